"""Sketches: Ansor's high-level program structures, as transform-dialect scripts with holes.

    SearchTask --rules.generate_sketches--> [Sketch(stages, knobs)]
    Sketch.script(None)   -> transform script whose holes are `transform.tune.knob` ops (no choice)
    Sketch.script(values) -> the same script with every knob resolved (`= V from options = [...]`)

A sketch is a list of **stages**, one per scheduled op of the (preprocessed) task, each with a
structure chosen by the derivation rules in `rules.py`:

- `mlt`: Ansor's CPU multi-level tiling `S0 S1 R0 S2 R1 S3` for an op with data reuse: `S0`
  tiles are distributed over cores (`scf.forall`), `S3` is the register tile (vectorized), `R1`
  steps one iteration at a time around it so the accumulator stays in vector registers
  (the register tile's read/write is hoisted out of `R1`). Optionally its element-wise consumer
  is fused at `S0` or `S1` (the consumer is tiled and the op fused into its loops).
- `tile`: parallel + vectorized tiling `S0 S1 R0 S2 R1` for ops without reuse (element-wise,
  reductions): `S0` over cores, `S2 x R1` the vector tile (`S1` is what `S0` tiles leave).
- `rfactor`: a reduction with little parallelism: the reduction is split (`R0` loop over
  partial results of an `R1` tile kept in vector registers) and combined afterwards.
- `chain`: a reduction chain (softmax, layer norm) fused into its element-wise output's
  parallel loop over the rows every op keeps; inside, each op runs row by row, vectorized.

Initialisers (`linalg.fill`) are fused into their consumer's parallel loop; `tensor.pad`
producers get a compute location knob (at the root, or inside the consumer's `S0` loop); every
stage carries Ansor's `auto_unroll_max_step` pragma as a knob. Knob values are tile *sizes*
(products of inner split factors); `annotation.py` samples them as factorizations.

Tile sizes nest exactly (each divides the level above), as in Ansor, with one extension: where
exact splits of a space loop have no good register tile (no divisor of 4-8 rows; on the vector
lanes, no multiple of a vector register: `rules._exact_tiles_suffice`), the register tile of an
`mlt` stage's loop (the vector tile of a `tile` stage's) may be **ragged**, any size up to
`MAX_INNERMOST` (`MAX_VECTOR` on the lanes) that does not divide the level above. The loop's
partial last tile is peeled (`transform.loop.peel`) and the full tiles and the remainder are
vectorized separately (a fused initialiser's or consumer's rows take the widest vector that
divides their tile instead). Exact splits leave a prime extent (197 tokens, a 17x17 feature map)
only one- or whole-extent register tiles. A window's rows (register tile 1) and packed stages
keep exact tiles.
"""

from __future__ import annotations



import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from ansor.core.loops import OP_ATTR, PAD_ATTR
from ansor.space.schedule import Schedule
from ansor.space.sketch import Knob, LoopSplit, Sketch, divisors
from ansor.targets.cpu.annotation import sample_cpu, validate_cpu
from ansor.targets.cpu.params import LEVELS, PAD_LOCATIONS, UNROLL_OPTIONS, exact_vector, innermost_limit, whole_row_vector
from ansor.targets.cpu.search_space import CpuSearchSpace
from ansor.space.script import ANY, PARAM, ScriptBuilder, ssa


@dataclass(frozen=True)
class Stage:
    """How one op is scheduled. See the module docstring for the kinds."""

    op: int
    op_name: str
    kind: str  # "mlt" | "tile" | "rfactor"
    splits: tuple[LoopSplit, ...]
    inits: tuple[tuple[int, int], ...] = ()  # fused initialisers: (op number, loop count)
    pads: tuple[int, ...] = ()  # pad producers whose location is a knob
    consumer: int | None = None  # fused element-wise consumer (mlt only)
    consumer_dims: tuple[int, ...] = ()  # consumer loop d <-> this op's loop consumer_dims[d]
    fuse_level: int = 0  # 1: consumer fused at S0, 2: at S1
    # Packed layout (mlt only): (input operand, outer_perm) for each input whose layout is
    # rewritten so a register tile's panel is contiguous ([.., d_vec/J3, .., J3] with the d_vec
    # block dim moved first); empty for the unpacked sketch.
    packs: tuple[tuple[int, tuple[int, ...]], ...] = ()
    n_inputs: int = 0
    # A windowed named op (2-D/3-D convolution, pooling) the vectorizer only handles in 1-D: its
    # register tile (one output row, every window loop stepping by 1 in R1) is decomposed into
    # the 1-D op before vectorization by this transform op (`transform.structured.decompose`,
    # `transform.ansor.decompose_conv3d`); "" for other ops.
    decompose: str = ""
    # A windowed linalg.generic: its register tile's unit loops are folded away
    # (`fold_unit_extent_dims_via_slices`, inside the enclosing R1 loop) before vectorization.
    fold_units: bool = False
    # A fused reduction chain (kind "chain": a softmax, a layer norm): `op` is the chain's
    # element-wise output, `members` the ops computing its inputs (reductions and element-wise
    # ops; consumers first), all fused into the output's `S0` loop over the dims every member
    # keeps (`rows`). `splits` holds the output's and every member's splits (by `op`).
    members: tuple[int, ...] = ()
    rows: tuple[int, ...] = ()
    # Chain members that reduce into a vector of partial results (one per lane of their R tile)
    # and combine it once per row, instead of reducing every R tile to a scalar.
    partial: tuple[int, ...] = ()

    @property
    def unroll_knob(self) -> str:
        return f"op{self.op}.unroll"

    def split(self, dim: int) -> LoopSplit:
        return next(s for s in self.splits if s.dim == dim and s.op == self.op)

    def op_splits(self, op: int) -> list[LoopSplit]:
        """The splits of op `op` (the stage's own op or a chain member), by dim."""
        return sorted((s for s in self.splits if s.op == op), key=lambda s: s.dim)

    @property
    def vector_dim(self) -> int | None:
        return next((s.dim for s in self.splits if s.vector and s.op == self.op), None)


@dataclass(frozen=True)
class CpuSketch(Sketch):
    """A CPU program structure with holes: one `Stage` per scheduled op (none: the skip sketch,
    the untransformed program)."""

    name: str
    rules: tuple[str, ...]
    stages: tuple[Stage, ...] = ()
    knobs: tuple[Knob, ...] = field(default_factory=tuple)

    @property
    def rule(self) -> str:
        return "skip" if not self.stages else "+".join(self.rules)

    @property
    def splits(self) -> tuple[LoopSplit, ...]:
        return tuple(s for st in self.stages for s in st.splits)

    @property
    def unroll_knobs(self) -> tuple[str, ...]:
        return tuple(st.unroll_knob for st in self.stages)

    @property
    def untrained_share(self) -> float:
        # A fused reduction chain has a few hundred annotations next to its unfused twin's
        # thousands: without a share, random scores gave it 1 of 31 trials on a log-softmax
        # (results/rowwise.json before this), although it is the fastest structure for row chains.
        return 0.5 if any(st.kind == "chain" for st in self.stages) else 0.0

    def innermost_limit(self, split: LoopSplit) -> int:
        return innermost_limit(split)

    def script(self, values: Mapping[str, int] | None = None, *, lower_vectors: bool = True) -> str | None:
        """The transform script; None for the skip sketch (the untransformed program).

        `lower_vectors=False` leaves `vector.contract`/`multi_reduction` unlowered: the program
        structure the cost model's features read is the same, and applying is ~2x faster."""
        if not self.stages:
            return None
        return _Renderer(self, values, lower_vectors=lower_vectors).render()

    def validate(self, values: Mapping[str, int]) -> str | None:
        return validate_cpu(self, values)

    def sample(self, rng: random.Random, *, max_tries: int = 1000) -> Schedule:
        return sample_cpu(self, rng, max_tries=max_tries)

    def search_space(self, ragged_prob: float) -> CpuSearchSpace:
        return CpuSearchSpace(self, ragged_prob)


def tile_options(split: LoopSplit) -> list[tuple[str, tuple[int, ...]]]:
    """(knob, options) of each tile knob of `split`: divisors of the extent, and for a ragged
    split's innermost knob every size up to `MAX_INNERMOST` (`MAX_VECTOR` on the vector lanes)
    as well."""
    out = [(name, divisors(split.extent)) for name in split.tile_knobs]
    if split.ragged and out:
        name, opts = out[-1]
        limit = min(innermost_limit(split), split.extent)
        out[-1] = (name, tuple(sorted(set(opts) | set(range(1, limit + 1)))))
    return out


def is_ragged(split: LoopSplit, values: Mapping[str, int]) -> bool:
    """Whether `values` give `split` an innermost tile that leaves a partial tile to peel."""
    if not split.ragged or len(split.tile_knobs) < 2:
        return False
    return int(values[split.tile_knobs[-2]]) % int(values[split.tile_knobs[-1]]) != 0


def stage_knobs(stage: Stage) -> list[Knob]:
    knobs = [Knob(name, opts) for s in stage.splits for name, opts in tile_options(s)]
    knobs += [Knob(f"pad{p}.loc", PAD_LOCATIONS) for p in stage.pads]
    knobs.append(Knob(stage.unroll_knob, UNROLL_OPTIONS))
    return knobs


# ----------------------------------------------------------------------------------------------
# Rendering



class _Renderer(ScriptBuilder):
    def __init__(self, sketch: Sketch, values: Mapping[str, int] | None, *, lower_vectors: bool = True) -> None:
        super().__init__(values)
        self.sk = sketch
        self.lower_vectors = lower_vectors
        self.r1_loops: list[str] = []  # attribute values of R1 loops to hoist, innermost last
        self.to_vectorize: list[str] = []  # handles of the innermost tiles of the current stage

    # -- helpers (the rest: `ScriptBuilder`) --------------------------------------------
    def tile_for(self, target: str, sizes: list[str]) -> tuple[str, list[str]]:
        n_loops = sum(1 for s in sizes if s != "0")
        op = self.fresh("t")
        if n_loops == 0:
            return target, []
        loops = self.fresh("l")
        params = [s for s in sizes if s.startswith("%")]
        in_types = ", ".join([ANY] + [PARAM] * len(params))
        outs = ", ".join([ANY] * (1 + n_loops))
        self.emit(f"{op}, {loops}:{n_loops} = transform.structured.tile_using_for {target} "
                  f"tile_sizes [{', '.join(sizes)}] : ({in_types}) -> ({outs})")
        return op, [f"{loops}#{i}" for i in range(n_loops)]

    def tile_forall(self, target: str, sizes: list[str]) -> tuple[str, str]:
        op, forall = self.fresh("t"), self.fresh("forall")
        params = [s for s in sizes if s.startswith("%")]
        in_types = ", ".join([ANY] + [PARAM] * len(params))
        self.emit(f"{op}, {forall} = transform.structured.tile_using_forall {target} "
                  f"tile_sizes [{', '.join(sizes)}] : ({in_types}) -> ({ANY}, {ANY})")
        return op, forall

    def annotate(self, target: str, name: str, param: str) -> None:
        self.emit(f'transform.annotate {target} "{name}" = {param} : {ANY}, {PARAM}')

    def const(self, v: int) -> str:
        c = self.fresh("cst")
        self.emit(f"{c} = transform.param.constant {v} : i64 -> {PARAM}")
        return c

    # -- stages ----------------------------------------------------------------------------
    @staticmethod
    def sizes(stage: Stage, level: int, kind: str, n_dims: int) -> list[str]:
        """Tile sizes of `stage` at `level` for loops of `kind` (others 0)."""
        out = []
        for d in range(n_dims):
            s = stage.split(d)
            out.append(ssa(s.tile_knobs[level - 1]) if s.kind == kind else "0")
        return out

    def row_width(self, stage: Stage, level: int) -> str:
        """Vector width of an element-wise row (a fused initialiser's or consumer's) inside a
        tile of the stage's vector loop at `level`: the register tile's width, or where a ragged
        register tile does not divide that tile, the widest vector (<= `MAX_VECTOR`) that does
        (the row then needs no peeling), or the whole row (`whole_row_vector`)."""
        vec = stage.vector_dim
        if vec is None:
            return "1"
        knobs = stage.split(vec).tile_knobs
        if self.values is None or int(self.values[knobs[level - 1]]) % int(self.values[knobs[-1]]) == 0:
            return ssa(knobs[-1])
        outer = int(self.values[knobs[level - 1]])
        return str(outer if whole_row_vector(outer) else exact_vector(outer))

    def fuse_inits(self, stage: Stage, container: str) -> str:
        for op, rank in stage.inits:
            init = self.match(OP_ATTR, op)
            fused, container = self.fuse_into(init, container)
            # One vector row at a time: vectorizing the whole S0 tile of an initialiser would
            # materialize one huge vector.
            row, _ = self.tile_for(fused, ["1"] * (rank - 1) + [self.row_width(stage, 1)])
            self.to_vectorize.append(row)
        return container

    def fuse_pads(self, stage: Stage, container: str) -> str:
        for p in stage.pads:
            if self.values is not None and int(self.values[f"pad{p}.loc"]) == 0:
                continue
            if self.values is None:
                self.emit(f"// pad #{p}: fused into the S0 loop when knob pad{p}.loc = 1")
            pad = self.match(PAD_ATTR, p)
            _, container = self.fuse_into(pad, container)
        return container

    def fold_unit_loops(self, tile: str) -> str:
        """Fold the unit loops of the register tile `tile` (inside its R1 loop) out of
        its indexing maps, so a windowed generic's indices become plain loops the vectorizer takes.
        Returns a handle to the rewritten op, matched again as the generic in that loop (the rewrite
        drops its discardable attributes): `tile` is not used after the rewrite, since the
        handle-tracking listener cannot follow a multi-result generic (its results become values of
        several ops: "replacement values belong to different ops")."""
        loop = self.fresh("r1")
        self.emit(f'{loop} = transform.get_parent_op {tile} {{deduplicate, op_name = "scf.for"}} : ({ANY}) -> {ANY}')
        self.emit(f"transform.apply_patterns to {loop} {{")
        self.emit("  transform.apply_patterns.linalg.fold_unit_extent_dims_via_slices")
        self.emit(f"}} : {ANY}")
        folded = self.fresh("f")
        # one loop per register-tile copy when partial tiles were peeled: match in each
        self.emit(f"{folded} = transform.foreach {loop} : {ANY} -> {ANY} {{")
        self.emit(f"^bb0(%l: {ANY}):")
        self.emit(f'  %g = transform.structured.match ops{{["linalg.generic"]}} in %l : ({ANY}) -> {ANY}')
        self.emit(f"  transform.yield %g : {ANY}")
        self.emit("}")
        # A peeled remainder loop can sit inside another copy's loop, whose match then finds its
        # generic too: the same op twice in one handle fails every later transform ("repeated
        # target op"; 21 of 600 ResNet-18 trials, one 7x7x512 convolution's candidates).
        unique = self.fresh("f")
        self.emit(f"{unique} = transform.merge_handles {folded} {{deduplicate}} : {ANY}")
        return unique

    def peel_partial_tiles(self, stage: Stage, tile: str, loops: list[str]) -> str:
        """Peel the partial last tile off each register-tile loop (`loops`, one per space dim of
        the stage's op, outermost first) whose tile size does not divide the level above, so the
        full tiles and the remainder both have static shapes and vectorize. Returns a handle to
        every copy of the register tile.

        Inner loops are peeled first (peeling an outer loop clones the inner ones, which stay
        whole: each clone covers the remainder rows/columns). Peeling consumes the loop handle
        and every handle nested in it; canonicalizing the enclosing loop folds the peeled
        bounds (the remainder runs once) into static slices, replacing the tile ops, so the
        copies are matched again by their op number."""
        space = [s for s in stage.op_splits(stage.op) if s.kind == "S"]
        if self.values is None:
            if any(s.ragged for s in space):
                self.emit("// register-tile loops whose tile does not divide the level above are peeled here")
            return tile
        ragged = [i for i, s in enumerate(space) if is_ragged(s, self.values)]
        if not ragged:
            return tile
        parent = self.fresh("par")
        self.emit(f"{parent} = transform.get_parent_op {loops[0]} : ({ANY}) -> {ANY}")
        for i in reversed(ragged):
            loop, main, rest = self.fresh("pl"), self.fresh("main"), self.fresh("rest")
            self.emit(f'{loop} = transform.cast {loops[i]} : {ANY} to !transform.op<"scf.for">')
            self.emit(f'{main}, {rest} = transform.loop.peel {loop} : (!transform.op<"scf.for">) -> ({ANY}, {ANY})')
        self.emit(f"transform.apply_patterns to {parent} {{ transform.apply_patterns.canonicalization }} : {ANY}")
        tiles = self.fresh("tiles")
        self.emit(f"{tiles} = transform.structured.match attributes{{{OP_ATTR} = {stage.op} : i64}} in {parent}"
                  f" : ({ANY}) -> {ANY}")
        return tiles

    def register_levels(self, stage: Stage, target: str, first_space_level: int) -> None:
        """Tile from R0 inward: R0 (reduce tiles), S at `first_space_level`.., R1 (step 1), register tile."""
        nd = len(stage.splits)
        levels = LEVELS[stage.kind]
        cur = target
        if stage.kind == "mlt":
            if first_space_level <= 2:
                cur, _ = self.tile_for(cur, self.sizes(stage, 2, "S", nd))
            if any(s.kind == "R" for s in stage.splits):
                cur, _ = self.tile_for(cur, self.sizes(stage, 1, "R", nd))
            cur, loops = self.tile_for(cur, self.sizes(stage, levels["S"] - 1, "S", nd))
            cur = self.peel_partial_tiles(stage, cur, loops)
            for d in [s.dim for s in stage.splits if s.kind == "R"]:
                cur, loops = self.tile_for(cur, ["1" if dd == d else "0" for dd in range(nd)])
                tag = len(self.r1_loops)
                self.annotate(loops[0], "ansor.r1", self.const(tag))
                self.r1_loops.append(str(tag))
            if stage.decompose:
                dec = self.fresh("dec")
                self.emit(f"{dec} = {stage.decompose} {cur} : ({ANY}) -> {ANY}")
                cur = dec
            if stage.fold_units:
                cur = self.fold_unit_loops(cur)
        else:  # tile: R0 loop over reduce tiles, then the S2 x R1 vector tile
            if any(s.kind == "R" for s in stage.splits):
                cur, _ = self.tile_for(cur, self.sizes(stage, 1, "R", nd))
            cur, loops = self.tile_for(cur, self.sizes(stage, 2, "S", nd))
            cur = self.peel_partial_tiles(stage, cur, loops)
        self.to_vectorize.append(cur)

    def stage_mlt_or_tile(self, stage: Stage) -> None:
        nd = len(stage.splits)
        if stage.consumer is not None:
            # Consumer fusion: tile the consumer at S0, fuse this op (and its initialisers and
            # pads) into that loop; for level 2, tile the consumer again at S1 and fuse this
            # op's tile into that loop too.
            cons = self.match(OP_ATTR, stage.consumer)
            ctile, forall = self.tile_forall(cons, [ssa(stage.split(d).tile_knobs[0]) for d in stage.consumer_dims])
            op = self.match(OP_ATTR, stage.op)
            fused, forall = self.fuse_into(op, forall)
            forall = self.fuse_inits(stage, forall)
            forall = self.fuse_pads(stage, forall)
            if stage.fuse_level == 2:
                ctile, loops = self.tile_for(ctile, [ssa(stage.split(d).tile_knobs[1]) for d in stage.consumer_dims])
                if loops:
                    fused, _ = self.fuse_into(fused, loops[0])
            crow = ["1"] * (len(stage.consumer_dims) - 1) + [self.row_width(stage, stage.fuse_level)]
            crow_tile, _ = self.tile_for(ctile, crow)
            self.to_vectorize.append(crow_tile)
            # Annotate last: fusing producers may rebuild the loop (dropping its attributes).
            self.annotate(forall, "ansor.auto_unroll_max_step", ssa(stage.unroll_knob))
            self.register_levels(stage, fused, first_space_level=3 if stage.fuse_level == 2 else 2)
            return
        if stage.packs:
            self.stage_mlt_packed(stage)
            return
        op = self.match(OP_ATTR, stage.op)
        tiled, forall = self.tile_forall(op, self.sizes(stage, 1, "S", nd))
        forall = self.fuse_inits(stage, forall)
        forall = self.fuse_pads(stage, forall)
        self.annotate(forall, "ansor.auto_unroll_max_step", ssa(stage.unroll_knob))
        self.register_levels(stage, tiled, first_space_level=2)

    def packed_sizes(self, stage: Stage, level: int, kind: str) -> list[str]:
        """Tile sizes of the packed op (dims: the op's dims + the J3-wide inner dim, never tiled).
        The vector dim counts J3-blocks; at the register level it is 1 block."""
        vec = stage.vector_dim
        out = []
        for d in range(len(stage.splits)):
            sp = stage.split(d)
            if sp.kind != kind:
                out.append("0")
            elif d == vec:
                j3 = sp.tile_knobs[-1]
                if level == len(sp.tile_knobs):
                    out.append("1")
                elif self.values is None:
                    out.append("{" + f"{sp.tile_knobs[level - 1]}/{j3}" + "}")
                else:
                    out.append(str(int(self.values[sp.tile_knobs[level - 1]]) // int(self.values[j3])))
            else:
                out.append(self.value(sp.tile_knobs[level - 1]))
        return out + ["0"]

    def stage_mlt_packed(self, stage: Stage) -> None:
        """Multi-level tiling on a packed layout (Ansor's layout rewrite): the vector loop is split
        into J3-blocks x J3 lanes and every input indexed by it is stored block-major, so the
        register tile's panel of that input is contiguous; the output's packing is a pure reshape
        that folds away. Packing copies are tiled and vectorized like any stage."""
        vec = stage.vector_dim
        assert vec is not None
        j3 = self.value(stage.split(vec).tile_knobs[-1])
        nd = len(stage.splits)
        op = self.match(OP_ATTR, stage.op)
        pk = self.fresh("pk")
        sizes = ["0"] * nd
        sizes[vec] = j3
        gen = '!transform.op<"linalg.generic">'
        packty = '!transform.op<"linalg.pack">'
        self.emit(f"{pk} = transform.structured.pack {op} packed_sizes = [{', '.join(sizes)}] : ({ANY}) -> {gen}")
        transposes = []
        for operand, perm in stage.packs:
            pb, pk2, pb2, e = (self.fresh(x) for x in ("pb", "pk", "pb", "e"))
            self.emit(f"{pb} = transform.get_producer_of_operand {pk}[{operand}] : ({gen}) -> {packty}")
            self.emit(f"{pk2}, {pb2}, {e} = transform.structured.pack_transpose {pb} with_compute_op({pk}) "
                      f"outer_perm = [{', '.join(str(x) for x in perm)}] : ({packty}, {gen}) -> ({gen}, {packty}, {ANY})")
            pk = pk2
            pp, pe, pt = (self.fresh(x) for x in ("pp", "pe", "pt"))
            self.emit(f'{pp}, {pe}, {pt} = transform.structured.lower_pack {pb2} : ({packty}) -> '
                      f'(!transform.op<"tensor.pad">, !transform.op<"tensor.expand_shape">, !transform.op<"linalg.transpose">)')
            ptc = self.fresh("ptc")
            self.emit(f'{ptc} = transform.cast {pt} : !transform.op<"linalg.transpose"> to {ANY}')
            transposes.append((ptc, len(perm) + 1))
        # The output's pack/unpack only reshape: lower them and let canonicalization fold them.
        self.emit("// the output's pack/unpack are pure reshapes: lower and fold them away")
        rest, ups = self.fresh("packs"), self.fresh("unpacks")
        self.emit(f'{rest} = transform.structured.match ops{{["linalg.pack"]}} in %root : ({ANY}) -> {packty}')
        self.emit(f'{self.fresh("lp")}, {self.fresh("lp")}, {self.fresh("lp")} = transform.structured.lower_pack {rest} : ({packty}) -> '
                  '(!transform.op<"tensor.pad">, !transform.op<"tensor.expand_shape">, !transform.op<"linalg.transpose">)')
        self.emit(f'{ups} = transform.structured.match ops{{["linalg.unpack"]}} in %root : ({ANY}) -> !transform.op<"linalg.unpack">')
        lu = [self.fresh("lu") for _ in range(4)]
        self.emit(f'{", ".join(lu)} = transform.structured.lower_unpack {ups} : (!transform.op<"linalg.unpack">) -> '
                  '(!transform.op<"tensor.empty">, !transform.op<"linalg.transpose">, !transform.op<"tensor.collapse_shape">, '
                  '!transform.op<"tensor.extract_slice">)')
        func = self.fresh("f")
        self.emit(f'{func} = transform.structured.match ops{{["func.func"]}} in %root : ({ANY}) -> {ANY}')
        self.emit(f"transform.apply_patterns to {func} {{ transform.apply_patterns.canonicalization }} : {ANY}")
        # Packing copies: one block row per thread, 8 x J3 vector tiles.
        for pt, rank in transposes:
            t1, _ = self.tile_forall(pt, ["1"])
            inner = ["0"] + ["1"] * (rank - 3) + ["8", "0"] if rank >= 3 else ["0", "8"]
            t2, _ = self.tile_for(t1, inner)
            self.to_vectorize.append(t2)
        # Multi-level tiling of the packed op.
        init = self.fresh("init")
        if stage.inits:
            self.emit(f"{init} = transform.get_producer_of_operand {pk}[{stage.n_inputs}] : ({gen}) -> {ANY}")
        pkc = self.fresh("pkc")
        self.emit(f"{pkc} = transform.cast {pk} : {gen} to {ANY}")
        tiled, forall = self.tile_forall(pkc, self.packed_sizes(stage, 1, "S"))
        for _, rank in stage.inits[:1]:  # the (re-created) initialiser of the packed output
            fused, forall = self.fuse_into(init, forall)
            row, _ = self.tile_for(fused, ["1"] * rank + ["0"])
            self.to_vectorize.append(row)
        forall = self.fuse_pads(stage, forall)
        self.annotate(forall, "ansor.auto_unroll_max_step", ssa(stage.unroll_knob))
        cur, _ = self.tile_for(tiled, self.packed_sizes(stage, 2, "S"))
        if any(sp.kind == "R" for sp in stage.splits):
            cur, _ = self.tile_for(cur, self.packed_sizes(stage, 1, "R"))
        cur, _ = self.tile_for(cur, self.packed_sizes(stage, 3, "S"))
        for d in [sp.dim for sp in stage.splits if sp.kind == "R"]:
            cur, loops = self.tile_for(cur, ["1" if dd == d else "0" for dd in range(nd)] + ["0"])
            tag = len(self.r1_loops)
            self.annotate(loops[0], "ansor.r1", self.const(tag))
            self.r1_loops.append(str(tag))
        if stage.fold_units:
            cur = self.fold_unit_loops(cur)
        self.to_vectorize.append(cur)

    def stage_rfactor(self, stage: Stage) -> None:
        """Split the reduction: loop over R0 chunks accumulating an R1-shaped partial result
        (vectorized), then combine the partials."""
        op = self.match(OP_ATTR, stage.op)
        for op_init, _ in stage.inits:
            self.emit(f"// initialiser #{op_init} stays at the root")
        sizes = [self.value(stage.split(d).tile_knobs[0]) if stage.split(d).kind == "R" else "0"
                 for d in range(len(stage.splits))]
        fill, split, comb, loop = (self.fresh(x) for x in ("rf_fill", "rf_split", "rf_comb", "rf_loop"))
        self.emit(f"{fill}, {split}, {comb}, {loop} = transform.structured.tile_reduction_using_for {op} "
                  f"by tile_sizes = [{', '.join(sizes)}] : ({ANY}) -> ({ANY}, {ANY}, {ANY}, {ANY})")
        self.to_vectorize += [fill, split, comb]
        # One loop per reduction dim, outermost first. The partial accumulator is loop-carried:
        # hoist it (innermost loop first: hoisting an outer loop first erases ops the inner
        # hoist still refers to, an MLIR assertion).
        # The op returns only the outermost loop; reach the others from the partial op inside.
        n_red = sum(1 for sp in stage.splits if sp.kind == "R")
        loops = []
        for j in range(n_red):
            lp = self.fresh("rfl")
            self.emit(f'{lp} = transform.get_parent_op {split} {{nth_parent = {n_red - j} : i64, op_name = "scf.for"}}'
                      f" : ({ANY}) -> {ANY}")
            loops.append(lp)
        self.annotate(loops[0], "ansor.auto_unroll_max_step", ssa(stage.unroll_knob))
        for lp in loops:
            tag = len(self.r1_loops)
            self.annotate(lp, "ansor.r1", self.const(tag))
            self.r1_loops.append(str(tag))

    def stage_chain(self, stage: Stage) -> None:
        """A fused reduction chain: the output op tiled over its `rows` at S0 (`scf.forall`), every
        member fused into that loop (each tile computes whole rows, so reductions are never
        recomputed and the rows stay in cache between the ops), initialisers too. Inside, each op
        runs one row at a time: element-wise ops in vectors of their vector knob, reductions in
        R-tiles of theirs. (Inner tile sizes are static: a member fused into the loop may be
        several payload ops, one per use, which a knob parameter cannot tile.)"""
        nd = len(stage.op_splits(stage.op))
        sizes = [ssa(stage.split(d).tile_knobs[0]) if d in stage.rows else "0" for d in range(nd)]
        tiled, forall = self.tile_forall(self.match(OP_ATTR, stage.op), sizes)
        fused = []
        for m in stage.members:
            f, forall = self.fuse_into(self.match(OP_ATTR, m), forall)
            fused.append((m, f))
        for op_init, _ in stage.inits:
            _, forall = self.fuse_into(self.match(OP_ATTR, op_init), forall)
        self.annotate(forall, "ansor.auto_unroll_max_step", ssa(stage.unroll_knob))
        for m, handle in [(stage.op, tiled), *fused]:
            splits = stage.op_splits(m)
            if m in stage.partial:
                # one row at a time, then rfactor: a loop over R tiles keeps an R-tile-wide
                # partial result (vector max/add), combined into the row's value after the loop
                handle, _ = self.tile_for(handle, ["1" if sp.kind == "S" else "0" for sp in splits])
                sizes = [self.value(sp.tile_knobs[0]) if sp.kind == "R" else "0" for sp in splits]
                fill, split, comb, loop = (self.fresh(x) for x in ("pr_fill", "pr_split", "pr_comb", "pr_loop"))
                self.emit(f"{fill}, {split}, {comb}, {loop} = transform.structured.tile_reduction_using_for {handle} "
                          f"by tile_sizes = [{', '.join(sizes)}] : ({ANY}) -> ({ANY}, {ANY}, {ANY}, {ANY})")
                self.to_vectorize += [fill, split, comb]
                continue
            if any(sp.kind == "R" for sp in splits):
                handle, _ = self.tile_for(handle, [self.value(sp.tile_knobs[0]) if sp.kind == "R" and sp.tile_knobs
                                                   else ("1" if sp.kind == "R" else "0") for sp in splits])
                handle, _ = self.tile_for(handle, ["1" if sp.kind == "S" else "0" for sp in splits])
            else:
                handle, _ = self.tile_for(handle, [self.value(sp.tile_knobs[0]) if sp.vector else "1" for sp in splits])
            self.to_vectorize.append(handle)

    def emit_vector_lowering(self) -> None:
        self.emit("transform.apply_patterns to %vfunc {")
        self.emit("  transform.apply_patterns.vector.lower_contraction lowering_strategy = outerproduct")
        self.emit("  transform.apply_patterns.vector.lower_outerproduct")
        self.emit('  transform.apply_patterns.vector.lower_multi_reduction lowering_strategy = "innerreduction"')
        self.emit("  transform.apply_patterns.vector.lower_transpose")
        self.emit("  transform.apply_patterns.canonicalization")
        self.emit(f"}} : {ANY}")

    def vectorize_stage(self) -> None:
        """Vectorize the stage's innermost tiles, each on its own. An op the vectorizer cannot
        handle stays scalar (silenceable failure suppressed) instead of failing the candidate.

        Upstream behaviour worked around: `vectorize_children_and_apply_patterns` would be
        simpler, but it also vectorizes a strided `tensor.insert_slice` into a contiguous
        `vector.transfer_write`, dropping the strides (a miscompile in MLIR 22; pinned in
        tests/test_upstream.py)."""
        for h in self.to_vectorize:
            self.emit(f"transform.sequence {h} : {ANY} failures(suppress) {{")
            self.emit(f"^bb0(%v: {ANY}):")
            self.emit(f"  transform.structured.vectorize %v : {ANY}")
            self.emit("}")
        self.to_vectorize = []

    def render(self) -> str:
        sk = self.sk
        head = [
            "module attributes {transform.with_named_sequence} {",
            f"  // sketch {sk.name}: {' + '.join(sk.rules)}",
            f"  transform.named_sequence @__transform_main(%root: {ANY} {{transform.readonly}}) {{",
        ]
        for k in sk.knobs:
            self.emit(self.knob_line(k))
        for stage in sk.stages:
            self.emit(f"// stage op #{stage.op} ({stage.op_name}): {stage.kind}"
                      + (f", consumer #{stage.consumer} fused at level {stage.fuse_level}" if stage.consumer is not None else ""))
            if stage.kind == "rfactor":
                self.stage_rfactor(stage)
            elif stage.kind == "chain":
                self.stage_chain(stage)
            else:
                self.stage_mlt_or_tile(stage)
            self.vectorize_stage()
        self.emit("// lower vector ops; contractions become outer products (FMAs)")
        self.emit(f'%vfunc = transform.structured.match ops{{["func.func"]}} in %root : ({ANY}) -> {ANY}')
        self.emit("transform.apply_patterns to %vfunc {")
        self.emit("  transform.apply_patterns.vector.transfer_permutation_patterns")
        self.emit("  transform.apply_patterns.vector.reduction_to_contract")
        self.emit(f"}} : {ANY}")
        if self.lower_vectors:
            self.emit_vector_lowering()
        if self.r1_loops:
            self.emit("// keep accumulators in registers: hoist register-tile reads/writes out of R1 loops")
        for tag in reversed(self.r1_loops):
            h = self.fresh("h")
            self.emit(f'{h} = transform.structured.match ops{{["scf.for"]}} attributes{{ansor.r1 = {tag}}} in %vfunc'
                      f" : ({ANY}) -> {ANY}")
            self.emit(f"transform.loop.hoist_loop_invariant_subsets {h} : {ANY}")
        self.emit("transform.apply_patterns to %vfunc {")
        self.emit("  transform.apply_patterns.canonicalization")
        self.emit(f"}} : {ANY}")
        self.emit(f"transform.apply_cse to %vfunc : {ANY}")
        self.emit("transform.yield")
        return "\n".join(head + self.lines + ["  }", "}"]) + "\n"

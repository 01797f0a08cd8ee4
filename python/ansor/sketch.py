"""Sketches: Ansor's high-level program structures, as transform-dialect scripts with holes.

    SearchTask --loops.analyze--> [OpLoops] --derivation rules--> [Sketch]
    Sketch.script(None)   -> transform script whose holes are `transform.tune.knob` ops (no choice)
    Sketch.script(values) -> the same script with every knob resolved (`= V from options = [...]`)

CPU rules implemented here:
- **multi-level tiling (SSRSRS)** for an op with data reuse: every space loop is split in four
  (`S0` parallel across cores via `scf.forall`, `S1`, `S2`, `S3` = register tile, vectorized),
  every reduction loop in two (`R0`, `R1` with `R1` stepping one iteration at a time around the
  register tile so the accumulator stays in vector registers). Loop order
  `S0 S1 R0 S2 R1 S3`. Tile sizes are knobs; so is Ansor's `auto_unroll_max_step` pragma.
  Initialising producers (`linalg.fill` of the output) are fused into the parallel loop.
- **skip**: the fallback, leaving the program untransformed, so every task has a valid program.

Knob values are tile *sizes* (products of the inner split factors); `annotation.py` samples them
as factorizations of each loop extent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .loops import OP_ATTR, OpLoops, analyze
from .task import SearchTask

#: Ansor's `auto_unroll_max_step` choices on CPU.
UNROLL_OPTIONS: tuple[int, ...] = (0, 16, 64, 512)
#: Ansor's `max_innermost_split_factor`.
MAX_INNERMOST = 64
#: Widest vector on the innermost (contiguous) loop, in elements (f32: two AVX2 registers x 8).
MAX_VECTOR = 16
#: Largest register tile (product of the innermost space factors), in elements.
MAX_REGISTER_TILE = 256

SPACE_LEVELS = 4  # S0 S1 S2 S3
REDUCE_LEVELS = 2  # R0 R1


def divisors(n: int) -> tuple[int, ...]:
    return tuple(d for d in range(1, n + 1) if n % d == 0)


@dataclass(frozen=True)
class Knob:
    """One hole: a name and the values it may take."""

    name: str
    options: tuple[int, ...]


@dataclass(frozen=True)
class LoopSplit:
    """A loop of the tiled op, split into `levels` tiling levels; its knobs are `tile_knobs`."""

    dim: int
    kind: str  # "S" or "R"
    extent: int
    vector: bool  # the innermost output loop: vectorized at the register level

    @property
    def tile_knobs(self) -> tuple[str, ...]:
        n = SPACE_LEVELS - 1 if self.kind == "S" else REDUCE_LEVELS - 1
        return tuple(f"d{self.dim}.t{level}" for level in range(1, n + 1))


@dataclass(frozen=True)
class Sketch:
    """A program structure with holes. `rule` names the derivation (e.g. "multi_level_tiling")."""

    name: str
    rule: str
    op: int | None = None
    op_name: str = ""
    splits: tuple[LoopSplit, ...] = ()
    fused_producers: tuple[tuple[int, int], ...] = ()  # (op number, loop count) of fused initialisers
    knobs: tuple[Knob, ...] = field(default_factory=tuple)

    def knob(self, name: str) -> Knob:
        for k in self.knobs:
            if k.name == name:
                return k
        raise KeyError(f"sketch {self.name} has no knob {name!r}")

    def script(self, values: Mapping[str, int] | None = None) -> str | None:
        """The transform script; None for the skip sketch (the untransformed program)."""
        if self.rule == "skip":
            return None
        return _render_multi_level_tiling(self, values)


# ----------------------------------------------------------------------------------------------
# Rendering

_ANY = "!transform.any_op"
_PARAM = "!transform.param<i64>"


def _knob_line(k: Knob, values: Mapping[str, int] | None) -> str:
    opts = ", ".join(str(o) for o in k.options)
    ssa = _ssa(k.name)
    if values is None:
        return f'    {ssa} = transform.tune.knob<"{k.name}"> options = [{opts}] -> {_PARAM}'
    if k.name not in values:
        raise KeyError(f"no value for knob {k.name!r}")
    v = int(values[k.name])
    if v not in k.options:
        raise ValueError(f"knob {k.name!r} = {v} is not one of its options")
    return f'    {ssa} = transform.tune.knob<"{k.name}"> = {v} : i64 from options = [{opts}] -> {_PARAM}'


def _ssa(name: str) -> str:
    return "%k_" + name.replace(".", "_")


def _match(var: str, op: int) -> str:
    return f"    {var} = transform.structured.match attributes{{{OP_ATTR} = {op} : i64}} in %root : ({_ANY}) -> {_ANY}"


def _tile(lhs: str, target: str, sizes: list[str], n_loops: int, forall: bool = False) -> str:
    params = [s for s in sizes if s.startswith("%")]
    in_types = ", ".join([_ANY] + [_PARAM] * len(params))
    if forall:
        return (
            f"    {lhs} = transform.structured.tile_using_forall {target} tile_sizes [{', '.join(sizes)}]"
            f" : ({in_types}) -> ({_ANY}, {_ANY})"
        )
    outs = ", ".join([_ANY] * (1 + n_loops))
    return f"    {lhs} = transform.structured.tile_using_for {target} tile_sizes [{', '.join(sizes)}] : ({in_types}) -> ({outs})"


def _render_multi_level_tiling(sk: Sketch, values: Mapping[str, int] | None) -> str:
    assert sk.op is not None
    ndims = len(sk.splits)
    by_dim = {s.dim: s for s in sk.splits}
    space = [s.dim for s in sk.splits if s.kind == "S"]
    reduce = [s.dim for s in sk.splits if s.kind == "R"]

    def sizes(level: int, kind: str, const: str | None = None) -> list[str]:
        out = []
        for d in range(ndims):
            s = by_dim[d]
            if s.kind != kind:
                out.append("0")
            elif const is not None:
                out.append(const)
            else:
                out.append(_ssa(f"d{d}.t{level}"))
        return out

    lines = [
        "module attributes {transform.with_named_sequence} {",
        f"  // sketch {sk.name}: rule {sk.rule} on op #{sk.op} ({sk.op_name}); loop structure S0 S1 R0 S2 R1 S3",
        f"  transform.named_sequence @__transform_main(%root: {_ANY} {{transform.readonly}}) {{",
    ]
    lines += [_knob_line(k, values) for k in sk.knobs]
    lines.append(_match("%op", sk.op))
    # S0: tiles distributed over cores.
    lines.append(_tile("%s0, %forall0", "%op", sizes(1, "S"), 0, forall=True))
    forall = "%forall0"
    vec_dim = next((s.dim for s in sk.splits if s.vector), None)
    for i, (p, rank) in enumerate(sk.fused_producers):
        lines.append(_match(f"%prod{i}", p))
        lines.append(
            f"    %fused{i}, %forall{i + 1} = transform.structured.fuse_into_containing_op %prod{i} into {forall}"
            f" : ({_ANY}, {_ANY}) -> ({_ANY}, {_ANY})"
        )
        forall = f"%forall{i + 1}"
        # Tile the fused initialiser to one register-tile row at a time, so vectorizing it stores
        # small vectors instead of materialising one vector as large as the whole S0 tile.
        fill_sizes = ["1"] * (rank - 1) + [_ssa(f"d{vec_dim}.t3") if vec_dim is not None else "1"]
        lines.append(_tile(f"%fillt{i}, %fillloops{i}:{rank}", f"%fused{i}", fill_sizes, rank))
    lines.append(f'    transform.annotate {forall} "ansor.auto_unroll_max_step" = %k_unroll : {_ANY}, {_PARAM}')
    # S1, R0, S2, R1 (one loop per reduction dim, stepping by one), S3 stays as the register tile.
    lines.append(_tile(f"%s1, %l1:{len(space)}", "%s0", sizes(2, "S"), len(space)))
    cur = "%s1"
    if reduce:
        lines.append(_tile(f"%r0, %l2:{len(reduce)}", cur, sizes(1, "R"), len(reduce)))
        cur = "%r0"
    lines.append(_tile(f"%s2, %l3:{len(space)}", cur, sizes(3, "S"), len(space)))
    cur = "%s2"
    for j, d in enumerate(reduce):
        one = ["1" if dd == d else "0" for dd in range(ndims)]
        lines.append(_tile(f"%r1_{j}, %lr1_{j}", cur, one, 1))
        lines.append(f"    %rid{j} = transform.param.constant {j} : i64 -> {_PARAM}")
        lines.append(f'    transform.annotate %lr1_{j} "ansor.r1" = %rid{j} : {_ANY}, {_PARAM}')
        cur = f"%r1_{j}"
    # Vectorize the register tile and lower contractions to outer products (FMAs).
    lines += [
        f"    %func = transform.structured.match ops{{[\"func.func\"]}} in %root : ({_ANY}) -> {_ANY}",
        f"    %vfunc = transform.structured.vectorize_children_and_apply_patterns %func : ({_ANY}) -> {_ANY}",
        "    transform.apply_patterns to %vfunc {",
        "      transform.apply_patterns.vector.lower_contraction lowering_strategy = outerproduct",
        "      transform.apply_patterns.vector.lower_outerproduct",
        "      transform.apply_patterns.canonicalization",
        f"    }} : {_ANY}",
    ]
    # Keep accumulators in registers: hoist the register tile's read/write out of the R1 loops,
    # innermost loop first so each hoist exposes the next.
    for j in reversed(range(len(reduce))):
        lines.append(
            f"    %h{j} = transform.structured.match ops{{[\"scf.for\"]}} attributes{{ansor.r1 = {j}}} in %vfunc : ({_ANY}) -> {_ANY}"
        )
        lines.append(f"    transform.loop.hoist_loop_invariant_subsets %h{j} : {_ANY}")
    lines += [
        "    transform.apply_patterns to %vfunc {",
        "      transform.apply_patterns.canonicalization",
        f"    }} : {_ANY}",
        f"    transform.apply_cse to %vfunc : {_ANY}",
        "    transform.yield",
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------
# Derivation rules


def _multi_level_tiling(task: SearchTask, ops: list[OpLoops]) -> Sketch | None:
    """SSRSRS tiling of the last op with data reuse, fusing fill-like producers of its output."""
    anchors = [o for o in ops if o.has_data_reuse()]
    if len(anchors) != 1:
        return None
    a = anchors[0]
    others = [o for o in ops if o.index != a.index]
    # Only initialisers (no tensor inputs, e.g. linalg.fill) can sit beside the anchor for now.
    if any(any(dims for dims in o.input_dims) or o.reduce for o in others):
        return None
    vec_dim = a.innermost_output_dim()
    splits = tuple(LoopSplit(d, a.kinds[d], a.extents[d], d == vec_dim) for d in range(len(a.extents)))
    knobs: list[Knob] = []
    for s in splits:
        for name in s.tile_knobs:
            knobs.append(Knob(name, divisors(s.extent)))
    knobs.append(Knob("unroll", UNROLL_OPTIONS))
    return Sketch(
        name=f"mlt_op{a.index}",
        rule="multi_level_tiling",
        op=a.index,
        op_name=a.name,
        splits=splits,
        fused_producers=tuple((o.index, len(o.extents)) for o in others),
        knobs=tuple(knobs),
    )


def generate_sketches(task: SearchTask) -> list[Sketch]:
    """All sketches for `task`; the last one is always the `skip` fallback."""
    ops = analyze(task.ir)
    sketches: list[Sketch] = []
    mlt = _multi_level_tiling(task, ops)
    if mlt is not None:
        sketches.append(mlt)
    sketches.append(Sketch(name="skip", rule="skip"))
    return sketches

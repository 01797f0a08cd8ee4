"""GPU rule for reduction subgraphs: Ansor's **cross-thread reduction**, one kernel per task.

    SearchTask (target "cuda", no op with data reuse to anchor multi-level tiling, or one whose
    rows a reduction needs whole) --row_stage_for--> RowStage --RowSketch.script(values)-->
    transform script: one row per block, the row's reductions split across the block's threads
    (`tile_reduction_using_forall`), merged with warp shuffles (`ansor-gpu-block-reductions-to-shuffles`)

A row-wise subgraph (LayerNorm, softmax, a row norm, attention scores + softmax, ...) has an output
op `E` indexed by row dims and (at most) one column dim, and reductions over the column dim whose
per-row results `E` (or another reduction) reads. The sketch:

1. tiles `E` by one row to blocks (up to three row dims of extent > 1 -> block x, y, z) and fuses
   every other op of the task into the block, consumers first;
2. splits each per-row reduction across `T` threads (`tile_reduction_using_forall`, thread x): each
   thread reduces its contiguous chunk of `C / T` columns into a slot of a shared buffer, and every
   thread merges the slots itself (rewritten by the lowering into a warp-shuffle butterfly + one
   shared step), so the row's value lives in every thread's registers (`private_allocs_to_stack`);
3. spreads `E` over the same `T` threads (a contiguous chunk each, vectorized);
4. element-wise ops producing whole rows with several users (softmax's `exp(x - max)`) are not
   materialized: each is fused into every thread loop that reads it and recomputed per chunk
   (`fuse_into_containing_op`); a contraction producing whole rows (attention's `Q K^T`) is
   computed once, spread over the same threads, into a row buffer in shared memory.

Knobs: the threads per block `T` (a divisor of `C`: 32..1024, multiples of 32, or a power of two
below 32 for short rows) and `auto_unroll_max_step`. The untuned program (baseline, reference) is
the same sketch with `T` = the largest option <= 256.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass

from ansor.space.schedule import Schedule, rejection_sample
from ansor.core.loops import OP_ATTR, analyze_graph
from ansor.space.sketch import Knob, Sketch
from ansor.core.task import SearchTask
from ansor.space.script import ANY, PARAM, ScriptBuilder
from ansor.targets.cuda.params import AXES, DEFAULT_THREADS, GPU_UNROLL_OPTIONS, MAX_THREADS_PER_BLOCK


@dataclass(frozen=True)
class RowStage:
    """The structure of a row-wise task (see the module docstring)."""

    out: int  # the output op E
    out_rank: int  # loops of E
    block_tiles: tuple[int, ...]  # E's tile sizes at block level (1 on mapped row dims, else 0)
    block_axes: tuple[str, ...]  # block axis of each tiled dim, in loop order
    col_dim: int | None  # E's loop spread over the threads (None: E is per-row)
    cols: int  # column extent C (what the threads split)
    fused: tuple[int, ...]  # ops fused into the block, consumers first
    reductions: tuple[tuple[int, int, int], ...]  # (op, loop count, reduction loop) split over threads
    recompute: tuple[int, ...]  # element-wise ops producing whole rows: recomputed inside each thread loop
    operands: tuple[tuple[int, tuple[int | None, ...]], ...]  # op -> producer of each operand (ins, init)
    # (contraction, loop count, its fill, its reduction extent if that is its last loop else 0): row in smem
    materialize: tuple[tuple[int, int, int | None, int], ...] = ()
    col_loops: tuple[tuple[int, int], ...] = ()  # materialized contraction -> its loop along the columns
    col_axis: int = 0  # the output's axis along the columns

    @property
    def threads_knob(self) -> str:
        return f"op{self.out}.threads"

    @property
    def unroll_knob(self) -> str:
        return f"op{self.out}.unroll"

    @property
    def lanes_knob(self) -> str:
        return f"op{self.out}.lanes"

    def lane_options(self) -> tuple[int, ...]:
        """Lanes splitting a materialized contraction's dot products (1: a thread computes whole
        dot products; L > 1: L consecutive threads split each, so a warp's loads are contiguous)."""
        ds = [d for *_, d in self.materialize]
        if not ds or 0 in ds:
            return (1,)
        g = math.gcd(*ds)
        # (L = the whole dot product would leave split_reduction a factor of 1, which it rejects)
        return tuple(x for x in (1, 2, 4, 8, 16, 32) if g % x == 0 and (x < g or x == 1))

    def producers(self, op: int) -> tuple[int | None, ...]:
        return dict(self.operands)[op]


def thread_options(cols: int) -> tuple[int, ...]:
    """Threads per block that split `cols` columns evenly: multiples of 32 up to 1024, or a power
    of two below 32 (warp-shuffle widths) when the row is short."""
    opts = [t for t in range(32, min(cols, MAX_THREADS_PER_BLOCK) + 1, 32) if cols % t == 0]
    if not opts:
        opts = [t for t in (2, 4, 8, 16) if t <= cols and cols % t == 0]
    return tuple(opts)


def row_stage_for(task: SearchTask) -> tuple[RowStage | None, str]:
    """The row-wise structure of `task`, or (None, why not)."""
    ops, pads = analyze_graph(task.ir)
    if pads:
        return None, "a tensor.pad (not scheduled by the cross-thread reduction rule)"
    by_index = {o.index: o for o in ops}
    outs = [o for o in ops if not o.users or None in o.users]
    if len(outs) != 1:
        return None, f"{len(outs)} output ops (the cross-thread reduction rule takes one)"
    e = outs[0]
    n_out = len(e.output_dims)
    e_reduces = bool(e.reduce)
    reducers = [o for o in ops if o.reduce and o.index != e.index]
    # Either E spreads over the columns (reading per-row results one rank lower), or E is itself
    # per row (a reduction, or element-wise over per-row results).
    row_e = e_reduces or not any(len(o.output_dims) == n_out - 1 for o in reducers)
    reds = [o for o in reducers if len(o.output_dims) == (n_out if row_e else n_out - 1)]
    if not reds and not e_reduces:
        return None, "no reduction"
    # rows: E's loops that index the per-row values it reads (or E's space loops if E is per-row)
    if row_e:
        col_dim = None
        row_dims = list(e.space)
    else:
        row_sets = [set(e.input_dims[i]) for i, p in enumerate(e.input_producers) if p in {r.index for r in reds}]
        rows = set.union(*row_sets)
        cols = [d for d in range(len(e.extents)) if d not in rows]
        if len(cols) != 1 or e.reduce:
            return None, f"op{e.index}: {len(cols)} column loops (the rule splits exactly one)"
        col_dim = cols[0]
        row_dims = sorted(rows)
    n_rows = len(row_dims)
    # every reduction: exactly one reduction loop, output indexed by the rows
    split = [*reds, e] if e_reduces else reds
    col_extents = set()
    for r in split:
        if len(r.reduce) != 1:
            return None, f"op{r.index} reduces over {len(r.reduce)} loops (the rule splits one)"
        if len(r.output_dims) != n_rows:
            return None, f"op{r.index}: result not indexed by the {n_rows} row loops"
        col_extents.add(r.extents[r.reduce[0]])
    if col_dim is not None:
        col_extents.add(e.extents[col_dim])
    if len(col_extents) != 1:
        return None, f"reductions and output over different column extents {sorted(col_extents)}"
    cols_n = col_extents.pop()
    if not thread_options(cols_n):
        return None, f"no thread count splits {cols_n} columns"
    recompute = []
    for o in ops:
        if o.index == e.index or o in split:
            continue
        if o.is_init() and len(o.output_dims) == n_rows:
            continue  # initialiser of a per-row value: stays at block level
        if len(o.output_dims) != n_rows + 1:
            return None, f"op{o.index} is neither a per-row reduction nor a whole-row producer"
        recompute.append(o.index)
    # contractions (and their initialisers) are computed once per row, into shared memory
    heavy = [by_index[i] for i in recompute if by_index[i].reduce]
    fills = {o.init_producer for o in heavy}
    materialize = tuple((o.index, len(o.extents), o.init_producer,
                         o.extents[-1] if o.reduce == (len(o.extents) - 1,) else 0) for o in heavy)
    if heavy and col_dim is None:
        return None, f"op{heavy[0].index}: a contraction feeding a per-row output"
    col_axis = e.output_dims.index(col_dim) if col_dim is not None else 0
    col_loops = tuple((o.index, o.output_dims[col_axis]) for o in heavy)
    recompute = [i for i in recompute if i not in {o.index for o in heavy} and i not in fills]
    for i in recompute:
        if any(p in fills for p in by_index[i].input_producers):
            return None, f"op{i} reads a contraction's initialiser"
    mapped = [d for d in row_dims if e.extents[d] > 1]
    if len(mapped) > 3:
        return None, f"{len(mapped)} row loops of extent > 1 (blocks have three axes)"
    tiles = tuple(1 if d in mapped else 0 for d in range(len(e.extents)))
    axes = tuple(AXES[len(mapped) - 1 - i] for i in range(len(mapped)))
    fused = tuple(sorted((o.index for o in ops if o.index != e.index), reverse=True))
    operands = tuple((o.index, (*o.input_producers, o.init_producer)) for o in ops)
    return RowStage(
        out=e.index, out_rank=len(e.extents), block_tiles=tiles, block_axes=axes, col_dim=col_dim,
        cols=cols_n, fused=fused,
        reductions=tuple((r.index, len(r.extents), r.reduce[0]) for r in split),
        recompute=tuple(recompute), operands=operands, materialize=materialize, col_loops=col_loops,
        col_axis=col_axis,
    ), f"gpu_cross_thread_reduction(op{e.index})"


def _row_col(stage: RowStage, op: int) -> int:
    """The loop of a materialized contraction that indexes the output's column (its output's last
    axis: contractions here produce rows laid out like E's output)."""
    return dict(stage.col_loops)[op]


class RowSketch(Sketch):
    """The cross-thread reduction sketch (`gpu_stage` holds the structure)."""

    def __init__(self, name: str, rule: str, stage: RowStage) -> None:
        self.name = name
        self.rules = (rule,)
        knobs = [Knob(stage.threads_knob, thread_options(stage.cols)), Knob(stage.unroll_knob, GPU_UNROLL_OPTIONS)]
        if len(stage.lane_options()) > 1:
            knobs.append(Knob(stage.lanes_knob, stage.lane_options()))
        self.knobs = tuple(knobs)
        self.gpu_stage = stage

    @property
    def unroll_knobs(self) -> tuple[str, ...]:
        return (self.gpu_stage.unroll_knob,)

    @property
    def free_tile_knobs(self) -> tuple[str, ...]:
        return (self.gpu_stage.threads_knob, self.gpu_stage.lanes_knob)

    def script(self, values: Mapping[str, int] | None = None, *, lower_vectors: bool = True) -> str:
        return render(self.gpu_stage, self.knobs, values, self.name, self.rule)

    def validate(self, values: Mapping[str, int]) -> str | None:
        for k in self.knobs:
            if k.name not in values:
                return f"missing knob {k.name}"
            if int(values[k.name]) not in k.options:
                return f"knob {k.name}={values[k.name]} not in its options"
        st = self.gpu_stage
        t, lanes = int(values[st.threads_knob]), int(values.get(st.lanes_knob, 1))
        if t % lanes or st.cols % (t // lanes):
            return f"{t} threads in groups of {lanes} lanes do not split {st.cols} columns"
        return None

    def sample(self, rng: random.Random, *, max_tries: int = 4000) -> Schedule:
        return rejection_sample(self, rng, max_tries=max_tries)

    def __hash__(self) -> int:
        return hash((self.name, self.rules, self.gpu_stage))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RowSketch) and (self.name, self.rules, self.gpu_stage) == (
            other.name, other.rules, other.gpu_stage)


def default_values(stage: RowStage) -> dict[str, int]:
    opts = thread_options(stage.cols)
    out = {stage.threads_knob: max([t for t in opts if t <= DEFAULT_THREADS] or [opts[0]]), stage.unroll_knob: 0}
    if len(stage.lane_options()) > 1:
        out[stage.lanes_knob] = 1
    return out


def render(stage: RowStage, knobs: tuple[Knob, ...], values: Mapping[str, int] | None, name: str, rule: str) -> str:
    """The transform script of the sketch (`values` None: knob placeholders `{name}`)."""
    sb = ScriptBuilder(values)
    fresh, emit, v = sb.fresh, sb.emit, sb.value
    for k in knobs:
        emit(sb.knob_line(k))
    threads = v(stage.threads_knob)

    def match(op: int) -> str:
        return sb.match(OP_ATTR, op)

    f0 = fresh("f")
    emit(f'{f0} = transform.structured.match ops{{["func.func"]}} in %root : ({ANY}) -> {ANY}')
    emit("// blocks: one row each; every other op fused into the block, consumers first")
    e = match(stage.out)
    et, blk = fresh("t"), fresh("blk")
    sizes = ", ".join(str(s) for s in stage.block_tiles)
    mapping = ", ".join(f"#gpu.block<{a}>" for a in stage.block_axes)
    emit(f"{et}, {blk} = transform.structured.tile_using_forall {e} tile_sizes [{sizes}] (mapping = [{mapping}]) "
         f": ({ANY}) -> ({ANY}, {ANY})")
    block_op = {stage.out: et}
    for op in stage.fused:
        h = match(op)
        fb, nb = fresh("b"), fresh("blk")
        emit(f"{fb}, {nb} = transform.structured.fuse_into_containing_op {h} into {blk} "
             f": ({ANY}, {ANY}) -> ({ANY}, {ANY})")
        emit(f"transform.apply_cse to {f0} : {ANY}")
        block_op[op], blk = fb, nb
    to_vectorize: list[str] = []
    smem: list[str] = []

    def recompute_into(handle: str, op: int, forall: str) -> str:
        """Fuse the whole-row producers of `op` (its thread-level clone `handle`) into `forall`."""
        for k, p in enumerate(stage.producers(op)):
            if p is None or p not in stage.recompute:
                continue
            sl, val, prod, fused, nf = fresh("sl"), fresh("v"), fresh("p"), fresh("r"), fresh("fa")
            emit(f"{sl} = transform.get_producer_of_operand {handle}[{k}] : ({ANY}) -> {ANY}")
            emit(f"{val} = transform.get_operand {sl}[0] : ({ANY}) -> !transform.any_value")
            emit(f"{prod} = transform.get_defining_op {val} : (!transform.any_value) -> {ANY}")
            emit(f"{fused}, {nf} = transform.structured.fuse_into_containing_op {prod} into {forall} "
                 f": ({ANY}, {ANY}) -> ({ANY}, {ANY})")
            to_vectorize.append(fused)
            forall = recompute_into(fused, p, nf)
        return forall

    # Thread level, last op first: a whole-row producer fused into a thread loop must have no
    # user left after that loop (else the fusion also yields its whole row out of the loop), so
    # later users are handled (and the block-level copy dropped, `apply_dce`) before earlier ones.
    if stage.col_dim is not None:
        emit("// the output: a contiguous chunk of the row per thread")
        nt = ", ".join(threads if d == stage.col_dim else "0" for d in range(stage.out_rank))
        tt, fe = fresh("t"), fresh("fe")
        emit(f"{tt}, {fe} = transform.structured.tile_using_forall {et} num_threads [{nt}] "
             f"(mapping = [#gpu.thread<x>]) : ({ANY}) -> ({ANY}, {ANY})")
        recompute_into(tt, stage.out, fe)
        to_vectorize.append(tt)
    for op, rank, rdim in sorted(stage.reductions, reverse=True):
        emit(f"transform.apply_dce to {f0} : {ANY}")
        emit(f"// op{op}: split over {threads} threads (a chunk each, partial results in shared memory)")
        nt = ", ".join(threads if d == rdim else "0" for d in range(rank))
        fill, part, comb, fa = fresh("fill"), fresh("part"), fresh("comb"), fresh("fa")
        emit(f"{fill}, {part}, {comb}, {fa} = transform.structured.tile_reduction_using_forall {block_op[op]} "
             f"by num_threads = [{nt}] mapping = [#gpu.thread<x>] : ({ANY}) -> ({ANY}, {ANY}, {ANY}, {ANY})")
        fb, fa2 = fresh("pf"), fresh("fa")
        emit("// each thread initialises its own slot")
        emit(f"{fb}, {fa2} = transform.structured.fuse_into_containing_op {fill} into {fa} "
             f": ({ANY}, {ANY}) -> ({ANY}, {ANY})")
        fa3 = recompute_into(part, op, fa2)
        to_vectorize.append(part)
        smem.append(fa3)
    lanes = int(values.get(stage.lanes_knob, 1)) if values is not None else 1
    for op, rank, fill, red in stage.materialize:
        emit(f"transform.apply_dce to {f0} : {ANY}")
        col = _row_col(stage, op)
        if lanes > 1:
            emit(f"// op{op}: the row computed once into shared memory; {lanes} consecutive threads split each dot")
            emit("// product (contiguous loads across a warp), their partial sums in shared memory, merged per column")
            init, pfill, part, comb = fresh("init"), fresh("pfill"), fresh("part"), fresh("comb")
            emit(f"{init}, {pfill}, {part}, {comb} = transform.structured.split_reduction {block_op[op]} "
                 f"{{split_factor = {red // lanes}, insert_split_dimension = {rank - 1}}} "
                 f": ({ANY}) -> ({ANY}, {ANY}, {ANY}, {ANY})")
            groups = f"{int(threads) // lanes}"
            nt = ", ".join(groups if d == col else (str(lanes) if d == rank - 1 else "0") for d in range(rank + 1))
            pt, pa = fresh("t"), fresh("fp")
            emit(f"{pt}, {pa} = transform.structured.tile_using_forall {part} num_threads [{nt}] "
                 f"(mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]) : ({ANY}) -> ({ANY}, {ANY})")
            pf2, pa2 = fresh("pf"), fresh("fp")
            emit(f"{pf2}, {pa2} = transform.structured.fuse_into_containing_op {pfill} into {pa} "
                 f": ({ANY}, {ANY}) -> ({ANY}, {ANY})")
            to_vectorize.append(pt)
            smem.append(pa2)
            # the merge iterates over the output's axes (identity) + the lanes
            target, out_rank, col = comb, rank, stage.col_axis
        else:
            emit(f"// op{op}: the row computed once, a chunk per thread, into shared memory")
            target, out_rank = block_op[op], rank
        nt = ", ".join(threads if d == col else "0" for d in range(out_rank))
        tt, fm = fresh("t"), fresh("fm")
        emit(f"{tt}, {fm} = transform.structured.tile_using_forall {target} num_threads [{nt}] "
             f"(mapping = [#gpu.thread<x>]) : ({ANY}) -> ({ANY}, {ANY})")
        if fill is not None:
            fb, fm2 = fresh("pf"), fresh("fm")
            emit(f"{fb}, {fm2} = transform.structured.fuse_into_containing_op {block_op[fill]} into {fm} "
                 f": ({ANY}, {ANY}) -> ({ANY}, {ANY})")
            fm = fm2
        to_vectorize.append(tt)
        smem.append(fm)
    emit("// vectorize every thread's code")
    for h in to_vectorize:
        emit(f"transform.sequence {h} : {ANY} failures(suppress) {{")
        emit(f"^bb0(%v: {ANY}):")
        emit(f"  transform.structured.vectorize %v : {ANY}")
        emit("}")
    emit(f"transform.apply_patterns to {f0} {{")
    emit("  transform.apply_patterns.vector.cast_away_vector_leading_one_dim")
    emit('  transform.apply_patterns.vector.lower_multi_reduction lowering_strategy = "innerreduction"')
    emit("  transform.apply_patterns.vector.reduction_to_contract")
    emit(f"}} : {ANY}")
    emit(f"transform.apply_patterns to {f0} {{")
    emit("  transform.apply_patterns.vector.lower_contraction lowering_strategy = outerproduct")
    emit("  transform.apply_patterns.vector.lower_outerproduct")
    emit("  transform.apply_patterns.vector.transfer_permutation_patterns")
    emit("  transform.apply_patterns.canonicalization")
    emit(f"}} : {ANY}")
    emit("// the partial results: shared memory")
    for fa in smem:
        b, nw, a = fresh("smem"), fresh("new"), fresh("alloc")
        emit(f"{b}, {nw} = transform.structured.bufferize_to_allocation {fa} "
             f"{{memory_space = 3, bufferize_destination_only, emit_dealloc}} : {ANY}")
        emit(f"{a} = transform.get_defining_op {b} : (!transform.any_value) -> {ANY}")
        emit(f'transform.annotate {a} "ansor.smem" : {ANY}')
    emit("// bufferize, then map to the GPU")
    emit(f"transform.bufferization.eliminate_empty_tensors {f0} : {ANY}")
    emit(f"transform.apply_dce to {f0} : {ANY}")
    emit(f"transform.apply_cse to {f0} : {ANY}")
    bufd, f2 = fresh("bufd"), fresh("f")
    emit(f"{bufd} = transform.bufferization.one_shot_bufferize layout{{IdentityLayoutMap}} %root "
         f"{{bufferize_function_boundaries = true}} : ({ANY}) -> {ANY}")
    emit(f'{f2} = transform.structured.match ops{{["func.func"]}} in {bufd} : ({ANY}) -> {ANY}')
    emit(f"transform.apply_patterns to {f2} {{")
    emit("  transform.apply_patterns.vector.lower_masked_transfers")
    emit("  transform.apply_patterns.canonicalization")
    emit(f"}} : {ANY}")
    emit(f"transform.apply_cse to {f2} : {ANY}")
    emit(f"transform.apply_patterns to {f2} {{")
    emit("  transform.apply_patterns.vector.lower_broadcast")
    emit(f"}} : {ANY}")
    launch, mapped = fresh("launch"), fresh("launch")
    emit(f"{launch} = transform.gpu.map_forall_to_blocks {f2} generate_gpu_launch : ({ANY}) -> {ANY}")
    emit(f"{mapped} = transform.gpu.map_nested_forall_to_threads {launch} block_dims = [{threads}, 1, 1] "
         f": ({ANY}) -> {ANY}")
    emit(f'transform.annotate {mapped} "ansor.auto_unroll_max_step" = %k_{stage.unroll_knob.replace(".", "_")} '
         f": {ANY}, {PARAM}")
    emit("transform.yield")
    head = [
        "module attributes {transform.with_named_sequence} {",
        f"  // sketch {name}: {rule} (GPU)",
        f"  transform.named_sequence @__transform_main(%root: {ANY} {{transform.consumed}}) {{",
    ]
    return "\n".join(head + sb.lines + ["  }", "}"]) + "\n"

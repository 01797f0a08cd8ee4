"""GPU rule for reduction subgraphs: Ansor's **cross-thread reduction**, one kernel per task.

    SearchTask (target "cuda", no op with data reuse to anchor multi-level tiling, or one whose
    rows a reduction needs whole) --row_stage_for (reduction loops merged)--> RowStage --RowSketch.script(values)-->
    transform script: one row per block, the row's reductions split across the block's threads
    (`tile_reduction_using_forall`), merged with warp shuffles (`ansor-gpu-block-reductions-to-shuffles`);
    R rows per block as row groups of thread y (`ansor-gpu-pack-rows-into-blocks`, the `rows` knob)

A row-wise subgraph (LayerNorm, softmax, a row norm, attention scores + softmax, ...) has an output
op `E` indexed by row dims and (at most) one column dim, and reductions over the column dim whose
per-row results `E` (or another reduction) reads. A reduction over several loops (a global
average pool over `h, w`, a norm over `m x n`) has them merged into one column loop of their
product first (`merged_reduction.py`; the script's first step, `ansor-gpu-collapse-reduction-loops`,
reads its input through a `tensor.collapse_shape`). The sketch:

1. tiles `E` by one row to blocks (up to three row dims of extent > 1 -> block x, y, z; a single
   row: its last row dim, one block; a reduction to a scalar: the unit row loop the merge gives
   it, one block) and fuses every other op of the task into the block,
   consumers first (a single row's values, which fusion leaves outside the one-iteration block
   loop, are moved into the launch by `ansor-gpu-row-values-into-launch`: the launch is marked
   `ansor.row_values`);
2. splits each per-row reduction across `T` threads (`tile_reduction_using_forall`, thread x): each
   thread reduces its contiguous chunk of `C / T` columns into a slot of a shared buffer, and every
   thread merges the slots itself (rewritten by the lowering into a warp-shuffle butterfly + one
   shared step), so the row's value lives in every thread's registers (`private_allocs_to_stack`);
3. spreads `E` over the same `T` threads (a contiguous chunk each, vectorized);
4. element-wise ops producing whole rows with several users (softmax's `exp(x - max)`) are not
   materialized: each is fused into every thread loop that reads it and recomputed per chunk
   (`fuse_into_containing_op`); a contraction producing whole rows (attention's `Q K^T`) is
   computed once, spread over the same threads, into a row buffer in shared memory.

**Ragged rows.** Where no multiple of 32 divides `C` (197 tokens, 1000 classes, 1023, a 50257-word
vocabulary), `T` need not divide `C` either: each thread then takes `ceil(C / T)` columns (the last
threads fewer or none). Before the tiling, every op along the columns is padded to
`Cp = T * ceil(C / T)` columns (`pad_tiling_interface`, producers first; a consumer reads its
producer's padded result, `ansor-gpu-fold-ragged-pads`), so the tiles above stay exact and
vectorized. Each reduction reading the padding gets a column mask `j < C` as one more input and
combines, past `C`, its combiner's neutral element (`ansor-gpu-mask-ragged-reductions`:
`arith::getNeutralElement` of the op that combines the accumulator -- 0 for a sum, -inf for a
max, +inf for a min -- or else keeps the accumulator); the mask is fused into the thread loops like
a whole-row producer. The lowering turns the padded inputs into guarded loads and the padded
output into masked stores (`ansor-gpu-guard-padded-reads`, as for ragged tiles in `rules.py`), so
nothing past column `C` is read or stored. A contraction materialized in shared memory (TBS's
`Q K^T`) is padded too, its fill renumbered (canonicalization made the padded fill a new op);
its dot products then stay whole per thread (`lanes` = 1: `split_reduction` would view the
padded input through an `expand_shape`, which the guards do not follow).

    RowStage, T not dividing C --pad every op along the columns to Cp, mask the reductions past C,
        fold producer pads--> the same sketch on Cp columns --lowering: guarded loads, masked stores-->

**Rows per block.** A short row (128 or 197 columns) leaves its block little work. The `rows`
knob `R` packs R consecutive rows along block x into one block: the script is unchanged but
for marking the launch `ansor.rows_per_block = R`, and after the mapping to the GPU (its
reductions already warp shuffles) `ansor-gpu-pack-rows-into-blocks` turns the launch of G
blocks of (T, 1, 1) threads into G / R blocks of (T, R, 1): row group `threadIdx.y` runs the
one-row program of row `blockIdx.x * R + threadIdx.y`, with its own slice of every shared
buffer (the partial-result slots of the warp step, TBS's scores row). With T a multiple of 32
each warp lies in one row group, so the shuffles and the shared step of a row's reductions
never mix rows; the barriers stay where every thread reaches them (the pass checks that no
control flow around one depends on the row). R = 1 is the one-row-per-block program.

    one-row program, launch (G, T) --annotate ansor.rows_per_block = R--> ... lowering:
        --ansor-gpu-pack-rows-into-blocks--> launch (G / R, (T, R, 1)), rows b R + threadIdx.y

Knobs: the threads per block `T` (the divisors of `C`: multiples of 32 up to 1024, or a power of
two below 32 for short rows; and where `C % 32 != 0` the ragged ones: multiples of 32 up to `C`
rounded up to one, powers of two below `2 C` on a row shorter than 32), `lanes` (TBS; 1 on a
ragged row), `rows` (`R`: the powers of two up to 32 that divide the rows along block x -- a
ragged row count is left out, since spare row groups redoing a row would race where a row sum
reads back its output; valid with `T` a multiple of 32 and `R T <= 1024`; no knob where only 1
divides, a single row or a prime count; a record without it reads as R = 1) and
`auto_unroll_max_step`. `T` and `R` mutate as tile sizes (`free_tile_knobs`). Sampling draws a ragged `T` with probability
`GPU_RAGGED_PROB` (where the row has both kinds); the search's `ragged_prob` = 0 keeps the exact
ones (`RowSearchSpace`) where there are any. The untuned program (baseline, reference) is the same sketch with R = 1 and `T` = the
largest exact option <= 256 when it is at least a warp, else a ragged row of
`min(256, C rounded up to a multiple of 32)` threads (224 for 197 columns, 256 for 1000).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass

from ansor.space.schedule import SamplingError, Schedule, rejection_sample
from ansor.space.search_space import SearchSpace
from ansor.core.loops import OP_ATTR, OpLoops, analyze_graph
from ansor.space.sketch import Knob, Sketch
from ansor.core.task import SearchTask
from ansor.space.script import ANY, PARAM, ScriptBuilder
from ansor.targets.cuda.merged_reduction import merge_reduction_loops
from ansor.targets.cuda.params import AXES, DEFAULT_THREADS, GPU_UNROLL_OPTIONS, MAX_THREADS_PER_BLOCK
from ansor.targets.cuda.rules import GPU_RAGGED_PROB


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
    # (op, its loop along the columns, its loop count) of every op that has one (what ragged rows
    # pad), in op order
    pad_loops: tuple[tuple[int, int, int], ...] = ()
    # ops reducing over several loops, merged into one column loop first (`merged_reduction.py`);
    # every loop index above counts loops after that merge
    merged: tuple[int, ...] = ()
    # rows along block x (E's innermost mapped row loop): what the rows-per-block knob packs
    block_rows: int = 1
    # the task returns a slice of E's result (a class token's row): the ops are first computed on
    # that slice only (`ansor-gpu-bubble-up-result-slices`, the script's first step)
    sliced: bool = False

    @property
    def ragged_ok(self) -> bool:
        """Whether `T` may leave a ragged row (every op along the columns traced)."""
        return bool(self.pad_loops)

    def thread_options(self) -> tuple[int, ...]:
        return thread_options(self.cols, ragged=self.ragged_ok)

    def ragged(self, values: Mapping[str, int]) -> bool:
        """Whether `values` leave a ragged row (`T` does not divide `C`)."""
        return self.cols % int(values[self.threads_knob]) != 0

    def padded_cols(self, values: Mapping[str, int]) -> int:
        """`C` rounded up to a multiple of `T`: the columns the threads split (`ceil(C / T)` each)."""
        t = int(values[self.threads_knob])
        return -(-self.cols // t) * t

    @property
    def threads_knob(self) -> str:
        return f"op{self.out}.threads"

    @property
    def rows_knob(self) -> str:
        return f"op{self.out}.rows"

    def row_options(self) -> tuple[int, ...]:
        """Rows per block `R` (`ansor-gpu-pack-rows-into-blocks`): the `ROW_OPTIONS` that divide
        the rows along block x; (1,) on a single row."""
        return tuple(r for r in ROW_OPTIONS if self.block_rows % r == 0)

    def rows(self, values: Mapping[str, int]) -> int:
        """`R` of `values` (1 where the knob is absent: the sketch has none, or the record
        predates it)."""
        return int(values.get(self.rows_knob, 1))

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


#: Rows per block `R` the knob may take (row groups of whole warps: 32 R <= 1024 threads).
ROW_OPTIONS: tuple[int, ...] = (1, 2, 4, 8, 16, 32)


def exact_thread_options(cols: int) -> tuple[int, ...]:
    """Threads per block that split `cols` columns evenly: multiples of 32 up to 1024, or a power
    of two below 32 (warp-shuffle widths) when the row is short."""
    opts = [t for t in range(32, min(cols, MAX_THREADS_PER_BLOCK) + 1, 32) if cols % t == 0]
    if not opts:
        opts = [t for t in (2, 4, 8, 16) if t <= cols and cols % t == 0]
    return tuple(opts)


def ragged_thread_options(cols: int) -> tuple[int, ...]:
    """Threads per block that leave a ragged row (`T` does not divide `cols`: each thread takes
    `ceil(cols / T)` columns, the last ones fewer or none), offered when no multiple of 32
    divides `cols` (`cols % 32 != 0`: 197, 1000, 1023, 50257 columns); a multiple of 32 keeps its
    exact options only. Multiples of 32 up to `cols` rounded up to one (1024 at most), and on a
    row shorter than 32 the powers of two below twice its length."""
    if cols % 32 == 0:
        return ()
    opts = [t for t in range(32, min(-(-cols // 32) * 32, MAX_THREADS_PER_BLOCK) + 1, 32)]
    if cols < 32:
        opts = [t for t in (2, 4, 8, 16) if t < 2 * cols and cols % t] + opts
    return tuple(opts)


def thread_options(cols: int, *, ragged: bool = True) -> tuple[int, ...]:
    """The `T` options of a row of `cols` columns: the exact ones, and (`ragged`) the ragged ones."""
    return tuple(sorted(set(exact_thread_options(cols)) | set(ragged_thread_options(cols) if ragged else ())))


def _sliced_ir(task_ir: str) -> str | None:
    """The preprocessed task after `ansor-gpu-bubble-up-result-slices` when the task returns a
    slice of an op's result (the ops then compute that slice only); None otherwise."""
    from mlir import ir, passmanager

    from ansor.core import native
    from ansor.core.loops import preprocessed_ir

    text = preprocessed_ir(task_ir)
    if "tensor.extract_slice" not in text:
        return None
    native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        passmanager.PassManager.parse(
            "builtin.module(func.func(ansor-gpu-bubble-up-result-slices),canonicalize,cse)").run(module.operation)
        out = str(module)
    return out if out != text else None


def row_stage_for(task: SearchTask) -> tuple[RowStage | None, str]:
    """The row-wise structure of `task`, or (None, why not)."""
    sliced = _sliced_ir(task.ir)
    if sliced is not None:
        from dataclasses import replace as _replace

        stage, why = _row_stage_for(_replace(task, ir=sliced))
        if stage is not None:
            return _replace(stage, sliced=True), why
    return _row_stage_for(task)


def _row_stage_for(task: SearchTask) -> tuple[RowStage | None, str]:
    ops, pads = analyze_graph(task.ir)
    if pads:
        return None, "a tensor.pad (not scheduled by the cross-thread reduction rule)"
    ops, merged, why = merge_reduction_loops(task.ir, ops)
    if why:
        return None, why
    by_index = {o.index: o for o in ops}
    anchors = [o.index for o in ops if o.has_data_reuse() and not o.is_elementwise() and not o.is_init()]
    if len(anchors) >= 2:  # (two matmuls read as per-element "row reductions": one kernel per anchor instead)
        return None, f"{len(anchors)} ops with data reuse {anchors} (the several-kernels rule's)"
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
        if len(cols) > 1 and sum(e.extents[d] > 1 for d in cols) == 1:
            # E over a reduction to a scalar (a log-softmax of one row, [1, 35] through 0-d
            # tensors): its unit loops are the row the merge gives the reduction
            rows |= {d for d in cols if e.extents[d] == 1}
            cols = [d for d in cols if e.extents[d] > 1]
        if len(cols) != 1 or e.reduce:
            return None, f"op{e.index}: {len(cols)} column loops (the rule splits exactly one)"
        col_dim = cols[0]
        row_dims = sorted(rows)
    n_rows = len(row_dims)
    # every reduction: exactly one reduction loop, output indexed by the rows
    split = [*reds, e] if e_reduces else reds
    col_extents = set()
    for r in split:
        if len(r.reduce) != 1:  # (merge_reduction_loops left one)
            return None, f"op{r.index} reduces over {len(r.reduce)} loops (the rule splits one)"
        if len(r.output_dims) != n_rows:
            return None, f"op{r.index}: result not indexed by the {n_rows} row loops"
        col_extents.add(r.extents[r.reduce[0]])
    if col_dim is not None:
        col_extents.add(e.extents[col_dim])
    if len(col_extents) != 1:
        return None, f"reductions and output over different column extents {sorted(col_extents)}"
    cols_n = col_extents.pop()
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
    if not mapped:  # a single row (nrm-1xMxN): one block, over a unit row loop
        if not row_dims:
            return None, f"op{e.index}: no row loop to map to blocks (a reduction to a scalar)"
        mapped = row_dims[-1:]
    if len(mapped) > 3:
        return None, f"{len(mapped)} row loops of extent > 1 (blocks have three axes)"
    tiles = tuple(1 if d in mapped else 0 for d in range(len(e.extents)))
    axes = tuple(AXES[len(mapped) - 1 - i] for i in range(len(mapped)))
    fused = tuple(sorted((o.index for o in ops if o.index != e.index), reverse=True))
    operands = tuple((o.index, (*o.input_producers, o.init_producer)) for o in ops)
    stage = RowStage(
        out=e.index, out_rank=len(e.extents), block_tiles=tiles, block_axes=axes, col_dim=col_dim,
        cols=cols_n, fused=fused,
        reductions=tuple((r.index, len(r.extents), r.reduce[0]) for r in split),
        recompute=tuple(recompute), operands=operands, materialize=materialize, col_loops=col_loops,
        col_axis=col_axis, pad_loops=_column_loops(by_index, e, col_dim, split, recompute, col_loops), merged=merged,
        block_rows=e.extents[mapped[-1]],
    )
    if not stage.thread_options():
        return None, f"no thread count splits {cols_n} columns"
    return stage, f"gpu_cross_thread_reduction(op{e.index})"


def _column_loops(by_index: dict[int, OpLoops], e: OpLoops, col_dim: int | None, split: list[OpLoops],
                  recompute: list[int], col_loops: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int, int], ...]:
    """Per op along the columns (the output, the reductions, the whole-row producers, the
    materialized contractions: `col_loops`), the loop that runs along them, in op order; () when a
    whole-row producer's cannot be traced (its consumers read it through something else than
    plain loop dims): no ragged rows then."""
    cols = {r.index: r.reduce[0] for r in split}
    cols.update(col_loops)
    if col_dim is not None:
        cols[e.index] = col_dim
    for i in sorted(recompute, reverse=True):  # consumers (higher numbers) first
        o, found = by_index[i], set()
        for c in by_index.values():
            if c.index not in cols:
                continue
            for pos, p in enumerate(c.input_producers):
                dims = c.input_dims[pos]
                if p != i:
                    continue
                if (len(dims) != len(o.output_dims) or not c.plain_inputs[pos]
                        or cols[c.index] not in dims):
                    return ()
                found.add(o.output_dims[dims.index(cols[c.index])])
        if len(found) != 1:
            return ()
        cols[i] = found.pop()
    return tuple((i, d, len(by_index[i].extents)) for i, d in sorted(cols.items()))


def _row_col(stage: RowStage, op: int) -> int:
    """The loop of a materialized contraction that indexes the output's column (its output's last
    axis: contractions here produce rows laid out like E's output)."""
    return dict(stage.col_loops)[op]


class RowSketch(Sketch):
    """The cross-thread reduction sketch (`gpu_stage` holds the structure)."""

    def __init__(self, name: str, rule: str, stage: RowStage) -> None:
        self.name = name
        self.rules = (rule,)
        knobs = [Knob(stage.threads_knob, stage.thread_options()), Knob(stage.unroll_knob, GPU_UNROLL_OPTIONS)]
        if len(stage.lane_options()) > 1:
            knobs.append(Knob(stage.lanes_knob, stage.lane_options()))
        if len(stage.row_options()) > 1:
            knobs.append(Knob(stage.rows_knob, stage.row_options()))
        self.knobs = tuple(knobs)
        self.gpu_stage = stage

    @property
    def unroll_knobs(self) -> tuple[str, ...]:
        return (self.gpu_stage.unroll_knob,)

    @property
    def free_tile_knobs(self) -> tuple[str, ...]:
        return (self.gpu_stage.threads_knob, self.gpu_stage.lanes_knob, self.gpu_stage.rows_knob)

    def complete(self, values: Mapping[str, int]) -> dict[str, int]:
        out = dict(values)
        if any(k.name == self.gpu_stage.rows_knob for k in self.knobs):
            out.setdefault(self.gpu_stage.rows_knob, 1)  # recorded before the knob: a row per block
        return out

    def script(self, values: Mapping[str, int] | None = None, *, lower_vectors: bool = True) -> str:
        values = self.complete(values) if values is not None else None
        return render(self.gpu_stage, self.knobs, values, self.name, self.rule)

    def validate(self, values: Mapping[str, int]) -> str | None:
        values = self.complete(values)
        for k in self.knobs:
            if k.name not in values:
                return f"missing knob {k.name}"
            if int(values[k.name]) not in k.options:
                return f"knob {k.name}={values[k.name]} not in its options"
        st = self.gpu_stage
        t, lanes = int(values[st.threads_knob]), int(values.get(st.lanes_knob, 1))
        if t % lanes:
            return f"{t} threads in groups of {lanes} lanes do not split {st.cols} columns"
        if lanes > 1 and st.ragged(values):
            # (split_reduction views the padded input through an expand_shape, which
            # ansor-gpu-guard-padded-reads does not guard)
            return f"{lanes} lanes on a ragged row of {st.cols} columns (ragged rows take lanes = 1)"
        rows = st.rows(values)
        if rows > 1 and t % 32:
            return f"{rows} rows per block of {t} threads each (a row group must be whole warps)"
        if rows * t > MAX_THREADS_PER_BLOCK:
            return f"{rows} rows per block of {t} threads each: {rows * t} threads (at most {MAX_THREADS_PER_BLOCK})"
        return None

    def sample(self, rng: random.Random, *, max_tries: int = 4000, ragged: bool = True) -> Schedule:
        """A random valid annotation: `T` ragged with probability `GPU_RAGGED_PROB` (when
        `ragged` and the row has both kinds of options), else exact."""
        st = self.gpu_stage
        exact = exact_thread_options(st.cols)
        ragged_opts = tuple(t for t in st.thread_options() if t not in exact)
        pool = ragged_opts if ragged_opts and (not exact or (ragged and rng.random() < GPU_RAGGED_PROB)) else exact
        for _ in range(max_tries):
            sch = rejection_sample(self, rng, max_tries=max_tries)
            values = {**sch.values(), st.threads_knob: rng.choice(pool)}
            if self.validate(values) is None:
                return Schedule.of(self.name, values)
        raise SamplingError(f"sketch {self.name}: no valid annotation in {max_tries} tries")

    def search_space(self, ragged_prob: float) -> SearchSpace:
        return RowSearchSpace(self, ragged_prob)

    def __hash__(self) -> int:
        return hash((self.name, self.rules, self.gpu_stage))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RowSketch) and (self.name, self.rules, self.gpu_stage) == (
            other.name, other.rules, other.gpu_stage)


class RowSearchSpace(SearchSpace):
    """The generic search space of a row sketch, with ragged rows switched off when the search's
    `ragged_prob` is 0 and the row has exact `T` options (without any, ragged rows are all the
    sketch has)."""

    def __init__(self, sketch: RowSketch, ragged_prob: float) -> None:
        super().__init__(sketch, ragged_prob)
        self.row_sketch = sketch
        st = sketch.gpu_stage
        self.exact_only = ragged_prob <= 0 and bool(set(exact_thread_options(st.cols)) & set(st.thread_options()))

    def valid(self, values: Mapping[str, int]) -> bool:
        if not super().valid(values):
            return False
        return not (self.exact_only and self.row_sketch.gpu_stage.ragged(values))

    def sample(self, rng: random.Random) -> Schedule:
        return self.row_sketch.sample(rng, ragged=not self.exact_only)


def default_values(stage: RowStage) -> dict[str, int]:
    """The untuned program: `T` = the largest exact option <= `DEFAULT_THREADS` when it is at
    least a warp; else (a row of 197, 1000 or 1023 columns) a ragged row of
    `min(DEFAULT_THREADS, C rounded up to a multiple of 32)` threads."""
    exact = [t for t in exact_thread_options(stage.cols) if t <= DEFAULT_THREADS]
    ragged = [t for t in stage.thread_options() if t not in exact_thread_options(stage.cols)]
    if exact and (max(exact) >= 32 or not ragged):
        t = max(exact)
    elif ragged:
        t = min(DEFAULT_THREADS, -(-stage.cols // 32) * 32)
        t = t if t in ragged else max([x for x in ragged if x <= t] or ragged[:1])
    else:
        t = stage.thread_options()[0]
    out = {stage.threads_knob: t, stage.unroll_knob: 0}
    if len(stage.lane_options()) > 1:
        out[stage.lanes_knob] = 1
    if len(stage.row_options()) > 1:
        out[stage.rows_knob] = 1
    return out


def _pad_ragged_rows(sb: ScriptBuilder, stage: RowStage, values: Mapping[str, int], f: str) -> str:
    """Pad every op along the columns to `C` rounded up to a multiple of `T` (producers first, so
    a consumer pads its slice of a padded producer, which `ansor-gpu-fold-ragged-pads` replaces by
    the padded result itself); mask the reductions past column `C`
    (`ansor-gpu-mask-ragged-reductions`); the padded inputs become guarded reads and the padded
    output masked writes in the lowering (`ansor-gpu-guard-padded-reads`). Returns the new handle
    of the function."""
    emit = sb.emit
    t, cp = int(values[stage.threads_knob]), stage.padded_cols(values)
    emit(f"// ragged rows: {t} threads do not divide {stage.cols} columns; every op along them is padded to {cp}")
    emit(f"// ({-(-stage.cols // t)} a thread; guarded reads, masked writes), its reductions masked past column "
         f"{stage.cols} with their identity")
    for op, loop, rank in stage.pad_loops:
        padded, pad = sb.fresh("padded"), sb.fresh("pad")
        sizes = ", ".join(str(cp) if d == loop else "0" for d in range(rank))
        emit(f"{padded}, {pad} = transform.structured.pad_tiling_interface {sb.match(OP_ATTR, op)} to padding_sizes "
             f"[{sizes}] pad_to_multiple_of : ({ANY}) -> ({ANY}, {ANY})")
        emit(f'transform.annotate {pad} "ansor.ragged" : {ANY}')
    for name in ("ansor-gpu-mask-ragged-reductions", "ansor-gpu-fold-ragged-pads"):
        nf = sb.fresh("f")
        emit(f'{nf} = transform.apply_registered_pass "{name}" to {f} : ({ANY}) -> {ANY}')
        f = nf
    emit(f"transform.apply_patterns to {f} {{")
    emit("  transform.apply_patterns.canonicalization")
    emit(f"}} : {ANY}")
    for op, _, fill, _ in stage.materialize:
        if fill is None:
            continue
        # canonicalization made the padded fill a new fill (of the padded result): renumber it
        fl, num = sb.fresh("fill"), sb.fresh("num")
        emit(f"{fl} = transform.get_producer_of_operand {sb.match(OP_ATTR, op)}[{len(stage.producers(op)) - 1}] "
             f": ({ANY}) -> {ANY}")
        emit(f"{num} = transform.param.constant {fill} : i64 -> {PARAM}")
        emit(f'transform.annotate {fl} "{OP_ATTR}" = {num} : {ANY}, {PARAM}')
    return f


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
    if stage.sliced:
        emit("// the task returns a slice of the result: every op computes that slice only")
        nf = fresh("f")
        emit(f'{nf} = transform.apply_registered_pass "ansor-gpu-bubble-up-result-slices" to {f0} : ({ANY}) -> {ANY}')
        emit(f"transform.apply_patterns to {nf} {{")
        emit("  transform.apply_patterns.canonicalization")
        emit(f"}} : {ANY}")
        emit(f"transform.apply_cse to {nf} : {ANY}")
        f0 = nf
    if stage.merged:
        emit(f"// ops {', '.join(f'op{i}' for i in stage.merged)}: their reduction loops merged into one column loop")
        emit("// (inputs through tensor.collapse_shape; kept unit dims of the result become unit loops)")
        nf = fresh("f")
        emit(f'{nf} = transform.apply_registered_pass "ansor-gpu-collapse-reduction-loops" to {f0} : ({ANY}) -> {ANY}')
        f0 = nf
    if values is not None and stage.ragged(values):
        f0 = _pad_ragged_rows(sb, stage, values, f0)
    elif values is None and stage.ragged_ok:
        emit("// ragged rows (T not dividing the columns): every op along them is first padded to a multiple of T")
        emit("// (guarded reads, masked writes), its reductions masked past the row's end with their identity")
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
    ragged = values is not None and stage.ragged(values)
    if ragged:
        emit("// the reductions' column masks (ansor-gpu-mask-ragged-reductions) too")
        mk, fb, nb = fresh("mask"), fresh("b"), fresh("blk")
        emit(f"{mk} = transform.structured.match attributes{{ansor.ragged_mask}} in %root : ({ANY}) -> {ANY}")
        emit(f"{fb}, {nb} = transform.structured.fuse_into_containing_op {mk} into {blk} "
             f": ({ANY}, {ANY}) -> ({ANY}, {ANY})")
        blk = nb
    to_vectorize: list[str] = []
    smem: list[str] = []

    def fuse_producer(handle: str, k: int, forall: str) -> tuple[str, str]:
        """Fuse the producer of operand `k` of `handle` (a thread-level op reading a slice of it)
        into `forall`: (the fused clone, the new forall)."""
        sl, val, prod, fused, nf = fresh("sl"), fresh("v"), fresh("p"), fresh("r"), fresh("fa")
        emit(f"{sl} = transform.get_producer_of_operand {handle}[{k}] : ({ANY}) -> {ANY}")
        emit(f"{val} = transform.get_operand {sl}[0] : ({ANY}) -> !transform.any_value")
        emit(f"{prod} = transform.get_defining_op {val} : (!transform.any_value) -> {ANY}")
        emit(f"{fused}, {nf} = transform.structured.fuse_into_containing_op {prod} into {forall} "
             f": ({ANY}, {ANY}) -> ({ANY}, {ANY})")
        to_vectorize.append(fused)
        return fused, nf

    def recompute_into(handle: str, op: int, forall: str) -> str:
        """Fuse the whole-row producers of `op` (its thread-level clone `handle`) into `forall`."""
        for k, p in enumerate(stage.producers(op)):
            if p is None or p not in stage.recompute:
                continue
            fused, nf = fuse_producer(handle, k, forall)
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
        if ragged:
            emit("// and its column mask (its last input)")
            _, fa2 = fuse_producer(part, len(stage.producers(op)) - 1, fa2)
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
    if any(k.name == stage.rows_knob for k in knobs):
        emit("// rows per block: R consecutive blocks (rows along x) run as row groups of one block, thread y")
        emit("// (ansor-gpu-pack-rows-into-blocks; R = 1: one row per block)")
        emit(f'transform.annotate {mapped} "ansor.rows_per_block" = %k_{stage.rows_knob.replace(".", "_")} '
             f": {ANY}, {PARAM}")
    emit("// a row's values are every thread's own (a single row's stay outside the one-block launch:")
    emit("// ansor-gpu-row-values-into-launch moves them in)")
    emit(f'transform.annotate {mapped} "ansor.row_values" : {ANY}')
    emit("transform.yield")
    head = [
        "module attributes {transform.with_named_sequence} {",
        f"  // sketch {name}: {rule} (GPU)",
        f"  transform.named_sequence @__transform_main(%root: {ANY} {{transform.consumed}}) {{",
    ]
    return "\n".join(head + sb.lines + ["  }", "}"]) + "\n"

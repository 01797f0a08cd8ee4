"""Sketch derivation rules for NVIDIA GPUs (Ansor §4.1, GPU rules) and their transform scripts.

    SearchTask (target "cuda") --loops.analyze_graph--> ops --GPU rules--> [GpuSketch] (+ skip)
    GpuSketch.script(values) --> transform script: tile to blocks / virtual threads / threads /
        registers, shared-memory copies, bufferize, gpu.launch (`lowering.py` lowers it)

Rules, tried on the op graph (element-wise producers are already inlined by `loops.preprocess`):

1. **multi-level tiling (GPU)** for an op with data reuse: every space loop is split five ways,
   `S0` (blocks, `#gpu.block`), `S1` (virtual threads: a serial loop over strided chunks),
   `S2` (threads, `#gpu.thread`), `S3` (a loop inside the thread) and `S4` (the register tile,
   vectorized); every reduction loop three ways, `R0` (the shared-memory tile), `R1`, `R2` (one
   step at a time around the register tile, so the accumulator stays in registers). Loop order
   inside a block: `R0 [copy inputs to shared memory] S1 S2 S3 R1 R2 S4` (Ansor puts `R1` before
   `S3`; with our accumulator living in registers only across the `R` loops below it, `S3` first
   keeps it there for the whole shared-memory tile). The inputs indexed by plain loop dims are
   **cached in shared memory** at `R0` (`transform.structured.pad` with nofold + a `bufferize_to_allocation`
   into address space 3), copied cooperatively by all threads of the block with 128-bit vectors
   where the tile allows. The output's initialiser (`linalg.fill`) is fused into the block.
   **Pipelined shared memory** (`op<N>.stages` in `PIPELINE_STAGES`, drawn among the depths the
   sampled tiles leave room for, mutated with the unroll knob): with `stages` = s > 1 every
   cached tile gets s buffers (counted by `shared_bytes` against `MAX_SHARED_BYTES`; refused
   when the innermost `R0` loop has fewer than s steps, `r0_trips`), the script annotates the
   launch with `ansor.pipeline_stages`, and
   the lowering (`ansor-gpu-pipeline-shared-copies`, before unrolling) copies the first s-1 tiles
   before the `R0` loop and tile i+s-1 while tile i is computed on: `cp.async` (16, 8 or 4 bytes
   as alignment allows; one commit group per tile, `wait_group s-2` and one barrier per step
   instead of two), or through registers where the reads are guarded (padded inputs, ragged
   tiles). `stages` = 1 is the synchronous copy (load, barrier, compute, barrier; its global
   loads prefetched one step ahead in registers by `ansor-gpu-prefetch-global-reads`).
2. **... with consumer fusion**: when the op's only user is element-wise (bias, ReLU, BN), the
   consumer is tiled to blocks and the op fused into it; the consumer then runs per thread on the
   block's tile after the reduction, writing the op's buffer in place (no extra global buffer).
3. **thread binding** for a task with no op with data reuse and no reduction (element-wise ops,
   transposes, broadcasts, gathers; one op after inlining): its space loops get the same `S0..S4`
   split (blocks, virtual threads, threads, a loop inside the thread, the vectorized register
   tile) with no reduction levels and no shared memory. Reductions without data reuse go to the
   cross-thread reduction rule (`reduction.py`); what neither covers as one kernel (two ops
   with data reuse, an anchor and a reduction of its result) to the several-kernels rule
   (`multi_kernel.py`: one kernel per fusion group, in one script).
4. the **skip** sketch: the default GPU schedule (`default_script`), which is also the untuned
   program (the baseline and the reference outputs).

**Ragged tiles** (rules 1 and 3): a mapped space loop (or a sum of products' reduction loop)
whose extent is not a multiple of `RAGGED_QUANTUM` splits within its `padded_extent` instead
(`GpuStage.split_extents`), so its block tile need not divide the extent: the script first pads
the op's iteration domain (and a fused consumer's) to a multiple of the block tile
(`_GpuRenderer.pad_ragged`, `transform.structured.pad_tiling_interface`) and the levels below nest
exactly; the lowering guards the edges (padded inputs: clamped loads + selects; the padded result:
masked row stores; `ansor-gpu-guard-padded-reads`). Sampling draws a ragged block tile with
probability `GPU_RAGGED_PROB` (always on an extent without a divisor in [16, 256], a prime: its
exact tiles are 1 or the whole extent); `GpuSearchSpace` switches them off at `ragged_prob` = 0.

At most three space loops are mapped to blocks/threads (x = the output's innermost); other space
loops are iterated inside each thread. Annotation respects the device: threads per block in
[32, 1024], shared memory per block <= 48 KiB (all pipeline stages), virtual threads <= 8,
`auto_unroll_max_step` in {0, 16, 64, 512, 1024}, no more pipeline stages than `R0` steps, and
the **register budget** of a tiled op with reduction loops (`thread_registers`): its thread's
accumulators (virtual threads included: they are unrolled) + the operands of one reduction step
(8 + 16 for an 8x16 matmul tile) + the elements it copies into shared memory per `R0` step +
`OTHER_REGISTERS` (40) must fit in 255 registers, and times the block's threads in the 64 K of an
SM (the kernel's `.maxntid` makes ptxas cap a thread at 65536 / threads registers, spilling past
it). So an 8x16 (or 16x8) thread tile of 128 accumulators fits with 256 threads (the 128x256
block tile of cuBLAS's SGEMM: ~204 registers estimated with K tile 8; ptxas allocates 255, no
spills), and 64 accumulators no longer pass with 1024 threads (64 registers each). On 140
sampled matmul candidates compiled by ptxas, the estimate refused 10 that did not spill and
passed 5 that did (all synchronous copies of 32- or 64-deep `R0` tiles); the flat cap of 64
accumulators it replaces: 15 and 15. A thread-binding stage (no reduction: nothing lives across
a loop) keeps at most `MAX_THREAD_TILE` = 64 elements per thread.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass

from ansor.core.dtypes import element_bytes
from ansor.core.loops import OP_ATTR, OpLoops, analyze_graph, fusable_consumer
from ansor.core.task import SearchTask
from ansor.space.schedule import SamplingError, Schedule, factorizations, sizes_from_factors
from ansor.space.script import ANY, PARAM, ScriptBuilder
from ansor.space.search_space import SearchSpace
from ansor.space.sketch import Knob, LoopSplit, Sketch, SkipSketch
from ansor.space.windowed import DECOMPOSE
from ansor.targets.cuda.params import (
    AXES,
    GPU_UNROLL_OPTIONS,
    MAX_BLOCK_DIMS,
    MAX_INNERMOST,
    MAX_LOOP_NESTS,
    MAX_MAPPED,
    MAX_RECOMPUTE,
    MAX_REGISTERS_PER_BLOCK,
    MAX_REGISTERS_PER_THREAD,
    MAX_SHARED_BYTES,
    MAX_THREAD_TILE,
    MAX_THREADS_PER_BLOCK,
    MAX_VTHREAD,
    MIN_THREADS_PER_BLOCK,
    OTHER_REGISTERS,
)


@dataclass(frozen=True)
class GpuStage:
    """The op scheduled by multi-level tiling, and what is fused with it."""

    op: int
    op_name: str
    extents: tuple[int, ...]
    kinds: tuple[str, ...]
    mapped: tuple[int, ...]  # space dims mapped to x, y, z (x first)
    input_dims: tuple[tuple[int, ...], ...]
    output_dims: tuple[int, ...]
    promoted: tuple[int, ...]  # inputs cached in shared memory
    elem_bytes: int = 4
    init: int | None = None  # fused linalg.fill
    consumer: int | None = None  # fused element-wise consumer
    consumer_dims: tuple[int, ...] = ()  # consumer loop c <-> op loop consumer_dims[c]
    decompose_rows: tuple[int, ...] = ()  # windowed op: output-row loops kept at 1 per register tile
    decompose_op: str = ""  # the transform op turning such a tile into the 1-D op
    vectorize_optional: bool = False  # the register tile stays scalar where the vectorizer declines
    operand_types: tuple[str, ...] = ()  # element types of the op's inputs, then its output
    # per dim, the extent its tile sizes nest in: `padded_extent` of a ragged-capable dim (whose
    # block tile need not divide the extent), else the extent; () = the extents
    split_extents: tuple[int, ...] = ()
    # broadcast producers (thread binding of a consumer that expands an anchor's small result):
    # the anchor and its fill, fused into every thread's tile and recomputed there, anchor first
    producers: tuple[int, ...] = ()
    producer_dims: tuple[int, ...] = ()  # the loops of `op` (the consumer) indexing the anchor's result
    producer_work: int = 0  # the anchor's reduction steps per result element
    # the consumer read the anchor's result through a tensor.collapse_shape: the script first
    # expands the consumer through it (`RESHAPED_CONSUMER_PASSES`) and re-tags it `consumer`
    reshaped_consumer: bool = False
    # per input: for a windowed input cached in shared memory (a convolution's image), its axes
    # as linear forms of the loops (`OpLoops.input_axes`); None for the others; () = none such
    windows: tuple[tuple[tuple[tuple[int, int], ...], ...] | None, ...] = ()

    @property
    def reduce(self) -> tuple[int, ...]:
        return tuple(d for d, k in enumerate(self.kinds) if k == "R")

    @property
    def space(self) -> tuple[int, ...]:
        return tuple(d for d, k in enumerate(self.kinds) if k == "S")

    def split_extent(self, d: int) -> int:
        return self.split_extents[d] if self.split_extents else self.extents[d]

    def ragged_dims(self, values: Mapping[str, int]) -> tuple[int, ...]:
        """The dims whose block tile (`R0` tile of a reduction dim) does not divide the extent."""
        return tuple(d for d, e in enumerate(self.extents) if self.split_extent(d) != e
                     and e % int(values[self.knob(d, 1)]))

    def padded_extents(self, values: Mapping[str, int]) -> list[int]:
        """The op's extents rounded up to a multiple of the block tile on ragged dims."""
        out = list(self.extents)
        for d in self.ragged_dims(values):
            t = int(values[self.knob(d, 1)])
            out[d] = -(-out[d] // t) * t
        return out

    def knob(self, d: int, level: int) -> str:
        return f"op{self.op}.d{d}.t{level}"

    @property
    def unroll_knob(self) -> str:
        return f"op{self.op}.unroll"

    @property
    def pipelined(self) -> bool:
        """Whether the sketch has the `stages` knob: inputs cached in shared memory at `R0`."""
        return bool(self.promoted) and bool(self.reduce)

    @property
    def stages_knob(self) -> str:
        return f"op{self.op}.stages"

    def stages(self, values: Mapping[str, int]) -> int:
        """Shared-memory buffers per cached input tile (1 when the sketch has no such knob, or
        a record from before it)."""
        return int(values.get(self.stages_knob, 1)) if self.pipelined else 1


class GpuSketch(Sketch):
    """A GPU sketch: `stage` holds the structure; `splits` expose the tile knobs in the CPU
    sketches' form (so mutation and crossover work unchanged)."""

    def __init__(self, name: str, rules: tuple[str, ...], stage: GpuStage, splits: tuple[LoopSplit, ...],
                 knobs: tuple[Knob, ...]) -> None:
        self.name = name
        self.rules = rules
        self.knobs = knobs
        self.gpu_stage = stage
        self.gpu_splits = splits

    @property
    def splits(self) -> tuple[LoopSplit, ...]:
        return self.gpu_splits

    @property
    def unroll_knobs(self) -> tuple[str, ...]:
        # (the pipeline depth mutates with the unroll knob: the CUDA target's mutation weights
        # have no "location" kind)
        st = self.gpu_stage
        return (st.unroll_knob, st.stages_knob) if st.pipelined else (st.unroll_knob,)

    def complete(self, values: Mapping[str, int]) -> dict[str, int]:
        out = dict(values)
        if self.gpu_stage.pipelined:
            out.setdefault(self.gpu_stage.stages_knob, 1)  # recorded before the knob: synchronous
        return out

    def innermost_limit(self, split: LoopSplit) -> int:
        return min(MAX_INNERMOST, split.inner_limit) if split.inner_limit else MAX_INNERMOST

    def script(self, values: Mapping[str, int] | None = None, *, lower_vectors: bool = True) -> str:
        values = self.complete(values) if values is not None else None
        return _GpuRenderer(self.gpu_stage, self.knobs, values).render(self.name, self.rules)

    def validate(self, values: Mapping[str, int]) -> str | None:
        return validate_gpu(self.gpu_stage, self.knobs, self.complete(values))

    def sample(self, rng: random.Random, *, max_tries: int = 4000) -> Schedule:
        return sample_gpu(self, rng, max_tries=max_tries)

    def search_space(self, ragged_prob: float) -> GpuSearchSpace:
        return GpuSearchSpace(self, ragged_prob)

    def __hash__(self) -> int:
        return hash((self.name, self.rules, self.gpu_stage))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GpuSketch) and (self.name, self.rules, self.gpu_stage) == (
            other.name, other.rules, other.gpu_stage)


class GpuSearchSpace(SearchSpace):
    """The generic search space of a GPU sketch, with ragged block tiles switched off when the
    search's `ragged_prob` is 0 (sampling, mutation and transfer then keep exact tiles)."""

    def __init__(self, sketch: GpuSketch, ragged_prob: float) -> None:
        super().__init__(sketch, ragged_prob)
        self.gpu_sketch = sketch

    def valid(self, values: Mapping[str, int]) -> bool:
        sk = self.gpu_sketch
        st = sk.gpu_stage
        chk = _checker(st, sk.knobs)  # (the verdict of `sk.validate`, without the reason)
        if chk is None:
            if not super().valid(values):
                return False
        elif not chk.ok(values if not st.pipelined or st.stages_knob in values else sk.complete(values)):
            return False
        return self.ragged_prob > 0 or not st.ragged_dims(values)

    def sample(self, rng: random.Random) -> Schedule:
        return sample_gpu(self.gpu_sketch, rng, ragged=self.ragged_prob > 0)

    def seeds(self, rng: random.Random) -> list[Schedule]:
        """The classic block shapes (`seeds.seed_values`) adapted to this task; the valid ones."""
        from ansor.targets.cuda.seeds import seed_values

        out: dict[Schedule, None] = {}
        for v in seed_values(self.gpu_sketch.gpu_stage, self.gpu_sketch.knobs):
            sch = self.adapt(v, rng)
            if sch is not None:
                out.setdefault(sch)
        return list(out)


# ----------------------------------------------------------------------------------------------
# Rules


#: Shared-memory buffers per cached input tile (`op<N>.stages`): 1 loads each `R0` tile, waits and
#: computes; 2 or 3 copy the next tiles (cp.async, or through registers where the reads are
#: guarded) while the current one is computed on (`ansor-gpu-pipeline-shared-copies`).
PIPELINE_STAGES = (1, 2, 3)
#: Extents that are multiples of this (or below it) keep exact tiles; others are ragged-capable.
RAGGED_QUANTUM = 16
#: Probability that sampling gives a ragged-capable loop a block tile that does not divide its
#: extent (exact splits of such extents, 97 or 1023, are mostly 1 or the whole extent); the
#: search's `ragged_prob` = 0 switches ragged tiles off (the ablation).
GPU_RAGGED_PROB = 0.75
#: Ops whose reduction loops may be ragged: sums of products, to which zero padding adds nothing.
_SUM_OF_PRODUCTS = frozenset({"linalg.matmul", "linalg.batch_matmul", "linalg.matvec", "linalg.vecmat",
                              "linalg.batch_matvec", "linalg.batch_vecmat", "linalg.matmul_transpose_a",
                              "linalg.matmul_transpose_b", "linalg.batch_matmul_transpose_a",
                              "linalg.batch_matmul_transpose_b"})


def padded_extent(e: int) -> int:
    """The extent a ragged-capable loop's tile sizes nest in: `e` rounded up to a power of two
    below 64, to a multiple of 64 above; `e` itself when exact tiles suffice (a multiple of
    `RAGGED_QUANTUM`, or smaller)."""
    if e < RAGGED_QUANTUM or e % RAGGED_QUANTUM == 0:
        return e
    if e < 64:
        return 1 << (e - 1).bit_length()
    return -(-e // 64) * 64


def _split_extents(op: OpLoops, mapped: tuple[int, ...], *, unfilled: bool = False,
                   fused: bool = False) -> tuple[int, ...]:
    """Per loop, the extent its tiles nest in (`padded_extent` where ragged tiles apply): the
    mapped space loops of an op whose inputs are indexed by plain loops or a stride-1 windowed
    op's (whose padded output rows read padded input rows: out-of-range results only), and the reduction
    loops of a sum of products; none for a reduction without a fill (`unfilled`: its padded
    result would start from a padded copy of its initial value), nor for a windowed op with a
    fused consumer (`fused`)."""
    # (a strided window: `transform.structured.pad_tiling_interface` sizes the input to the rows
    # the padded output reads, fewer than a padded input producer already has: a failed build)
    windowed = op.name in DECOMPOSE and not op.window_dims
    # A windowed op with a fused consumer (ConvLayer: conv + BN + ReLU over 97x97 pixels) computed
    # wrong values at 119 of 451632 outputs on the H200 (session 8, results/gpu-tests/): exact
    # tiles there until the cause is found. The unfused conv and a fused matmul passed.
    if unfilled or (windowed and fused) or not (all(op.plain_inputs) or windowed) or not op.plain_output:
        return op.extents
    return tuple(padded_extent(e) if (k == "S" and d in mapped) or (k == "R" and op.name in _SUM_OF_PRODUCTS)
                 else e for d, (k, e) in enumerate(zip(op.kinds, op.extents, strict=True)))


def _mapped_dims(op: OpLoops) -> tuple[int, ...]:
    """Up to three space dims with extent > 1, output order innermost first (x, y, z); where
    every space dim has extent 1 (a 1x1 result), the innermost one: a launch of one block and
    one thread (nothing mapped left no forall for the launch, and MLIR aborted)."""
    space = [d for d in reversed(op.output_dims) if op.kinds[d] == "S"]
    out = [d for d in space if op.extents[d] > 1]
    return tuple(out[:MAX_MAPPED]) if out else tuple(space[:1])


def _largest_mapped_dims(op: OpLoops) -> tuple[int, ...]:
    """Like `_mapped_dims`, but y and z are the two largest other space loops (innermost first
    among them) instead of the next innermost ones."""
    space = [d for d in reversed(op.output_dims) if op.kinds[d] == "S" and op.extents[d] > 1]
    if len(space) <= MAX_MAPPED:
        return _mapped_dims(op)
    rest = sorted(space[1:], key=lambda d: -op.extents[d])[:MAX_MAPPED - 1]
    return (space[0], *[d for d in space[1:] if d in rest])


def _elem_bytes(task: SearchTask) -> int:
    return element_bytes(task.outputs[0].dtype)


def _operand_types(task: SearchTask, index: int) -> tuple[str, ...]:
    """Element types of linalg op `index`'s operands (inputs, then inits), walk order as `tag_ops`:
    a mixed-precision op (f16 x f16 -> f32) pads each operand with a zero of its own type."""
    from mlir import ir

    from ansor.core.loops import _linalg_ops, preprocess

    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(task.ir)  # kept alive while its ops are read
        preprocess(module)  # numbered as `analyze_graph` numbers them (its fusion can merge ops)
        ops = _linalg_ops(module)
        if index >= len(ops):
            return ()
        return tuple(str(ir.ShapedType(v.type).element_type) if isinstance(v.type, ir.ShapedType)
                     else str(v.type) for v in ops[index].operands)


def _fusable_consumer(op: OpLoops, by_index: dict[int, OpLoops]) -> tuple[OpLoops, tuple[int, ...]] | None:
    return fusable_consumer(op, by_index)


def gpu_stage_for(task: SearchTask) -> tuple[GpuStage | None, str]:
    """The single multi-level tiled stage of `task` and the rule name; (None, why) when the task
    does not reduce to one anchor op (+ fill, + element-wise consumer)."""
    ops, pads = analyze_graph(task.ir)
    by_index = {o.index: o for o in ops}
    anchors = [o for o in ops if o.has_data_reuse() and not o.is_elementwise() and not o.is_init()]
    if not anchors and not any(o.reduce for o in ops):
        return _thread_binding_stage(task, ops, bool(pads))
    if len(anchors) != 1:
        return None, f"{len(anchors)} ops with data reuse (the GPU rules handle exactly one)"
    op = anchors[0]
    # A `tensor.pad` of an input is fused into the anchor's reads as guarded loads by the lowering
    # (`ansor-gpu-guard-padded-reads`); a pad feeding anything else is not scheduled.
    if any(p.consumer != op.index for p in pads):
        return None, "a tensor.pad producer that does not feed the tiled op"
    fc = _fusable_consumer(op, by_index)
    inits = [o for o in ops if o.is_init() and o.users == (op.index,)]
    rest = {o.index for o in ops} - {op.index} - {i.index for i in inits} - ({fc[0].index} if fc else set())
    if rest and fc is None and not pads:
        bc = _broadcast_consumer_stage(task, op, inits, rest, by_index)
        if bc is not None:
            return bc
        rc = _reshaped_consumer_stage(task, op, rest, by_index)
        if rc is not None:
            return rc
    if rest:
        return None, f"ops {sorted(rest)} are neither fused nor inlined (one GPU kernel per task for now)"
    if fc is not None and len(fc[0].input_dims) and fc[0].output_dims != tuple(range(len(fc[0].extents))):
        return None, "consumer with a permuted output"
    promoted = tuple(i for i, dims in enumerate(op.input_dims) if op.plain_inputs[i] and len(dims) >= 2)
    promoted, windows = _cached_windows(op, promoted)
    mapped = _mapped_dims(op)
    if math.prod(op.extents[d] for d in op.space if d not in mapped) > MAX_THREAD_TILE:
        # the innermost loops are small (ViT's QKV projection written as 1x197x3x3x64 for its
        # head transpose: 197 accumulators per thread): y, z to the two largest other loops
        mapped = _largest_mapped_dims(op)
    stage = GpuStage(
        op=op.index, op_name=op.name, extents=op.extents, kinds=op.kinds, mapped=mapped,
        input_dims=op.input_dims, output_dims=op.output_dims, promoted=promoted, elem_bytes=_elem_bytes(task),
        windows=windows, init=inits[0].index if inits else None,
        consumer=fc[0].index if fc else None, consumer_dims=fc[1] if fc else (),
        # windowed ops: the CPU rules' table (output-row loops kept at 1, the decomposing op);
        # on the GPU the window loops step by 1 in R2 anyway
        decompose_rows=DECOMPOSE[op.name][0] if op.name in DECOMPOSE else (),
        decompose_op=DECOMPOSE[op.name][1] if op.name in DECOMPOSE else "",
        # a windowed op MLIR 22 has no 1-D form for (depthwise NCHW): its register tile stays
        # scalar where the vectorizer declines (MobileNet-V2 channels-first)
        # (also a generic read through windows, `a + j + p`: the transposed convolution's phases,
        # which MLIR 22's vectorizer refuses; it failed the whole script)
        vectorize_optional=op.name not in DECOMPOSE and (
            op.name.startswith(("linalg.conv", "linalg.depthwise", "linalg.pooling"))
            or (op.name == "linalg.generic" and not all(op.plain_inputs))),
        operand_types=_operand_types(task, op.index),
        # ragged tiles pad the op; the padded result is an accumulator the fill initialises
        split_extents=_split_extents(op, mapped, unfilled=not inits, fused=fc is not None),
    )
    rule = f"gpu_multi_level_tiling(op{op.index})"
    if fc:
        rule = f"gpu_multi_level_tiling_with_fusion(op{op.index}<-op{fc[0].index})"
    return stage, rule


def _cached_windows(op: OpLoops, promoted: tuple[int, ...]) -> tuple[tuple[int, ...], tuple]:
    """(`promoted` with the op's windowed inputs, `GpuStage.windows`): a reduction whose plain
    inputs are cached in shared memory (a convolution's filter) caches its windowed ones too (the
    image: per `R0` step, a block's tile of output rows and columns reads 1 + stride * (tile - 1) +
    dilation * (window tile - 1) rows and columns of it), where each axis index is linear in the
    loops (`OpLoops.input_axes`). Before, the image was read from global memory by every thread
    for every output it computes (a 3x3 window: each element up to 9 times through L1); cached,
    the 97x97 13 -> 29-channel convolution's tuned program ran 13.9 -> 10.6 µs on an H200
    (`results/gpu-prime/README.md`). `config.CUDA_CACHE_WINDOWS` off: plain inputs only."""
    from ansor import config

    if not promoted or not op.reduce or not config.CUDA_CACHE_WINDOWS or not op.input_axes:
        return promoted, ()
    win = [i for i, axes in enumerate(op.input_axes) if not op.plain_inputs[i] and len(axes) >= 2
           and all(f is not None for f in axes)]
    if not win:
        return promoted, ()
    return tuple(sorted({*promoted, *win})), tuple(op.input_axes[i] if i in win else None
                                                  for i in range(len(op.input_dims)))


#: The script's first step for a consumer reading the anchor's result through a reshape (a grouped
#: convolution's 1x2x16xHxW result collapsed to 1x32xHxW for its batch norm): unit dims folded
#: (the per-channel parameters' `(c, 0, 0)` maps become plain ones, which reshape fusion needs),
#: then the collapse fused into the consumer by expanding its loops (`linalg-fuse-elementwise-ops`);
#: the consumer then reads the anchor's result as it is and the function returns its result collapsed.
RESHAPED_CONSUMER_PASSES = ("linalg-fold-unit-extent-dims", "linalg-fuse-elementwise-ops")


def _expand_reshaped_consumer(ir_text: str, consumer: int) -> str | None:
    """`ir_text` (a preprocessed, tagged task) after `RESHAPED_CONSUMER_PASSES`, the new consumer
    (the function's only untagged linalg.generic) tagged `consumer`; None when the passes leave
    no such single generic."""
    from mlir import ir, passmanager

    from ansor.core.loops import _linalg_ops

    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(ir_text)
        passmanager.PassManager.parse(
            "builtin.module(func.func(linalg-fold-unit-extent-dims{use-rank-reducing-slices=false}),canonicalize,"
            "func.func(linalg-fuse-elementwise-ops),canonicalize,cse)").run(module.operation)
        new = [o for o in _linalg_ops(module) if OP_ATTR not in o.attributes]
        if len(new) != 1 or new[0].name != "linalg.generic":
            return None
        new[0].attributes[OP_ATTR] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), consumer)
        return str(module)


def _reshaped_consumer_stage(task: SearchTask, op: OpLoops, rest: set[int],
                             by_index: dict[int, OpLoops]) -> tuple[GpuStage | None, str] | None:
    """Rule 2 through a reshape: the anchor's result reaches its element-wise consumer through a
    `tensor.collapse_shape` (RegNet's grouped convolutions and their batch norm + ReLU). The
    consumer is expanded through the reshape first (`RESHAPED_CONSUMER_PASSES`, the script's
    first step), after which it reads the anchor's result directly and fuses as in rule 2. None
    when the pattern does not apply (a named anchor, one element-wise consumer of its result)."""
    if len(rest) != 1 or op.users != (None,) or op.name == "linalg.generic":
        return None
    cons = by_index[next(iter(rest))]
    if not cons.is_elementwise() or any(u is not None for u in cons.users) or "collapse_shape" not in task.ir:
        return None
    from ansor.core.loops import preprocessed_ir

    text = _expand_reshaped_consumer(preprocessed_ir(task.ir), cons.index)
    if text is None:
        return None
    stage, rule = gpu_stage_for(dataclasses.replace(task, ir=text))
    if stage is None or stage.consumer != cons.index:
        return None
    return dataclasses.replace(stage, reshaped_consumer=True), rule.replace("_with_fusion", "_with_reshaped_fusion")


def _broadcast_consumer_stage(task: SearchTask, op: OpLoops, inits: list[OpLoops], rest: set[int],
                              by_index: dict[int, OpLoops]) -> tuple[GpuStage | None, str] | None:
    """Rule 3 with broadcast producers: the anchor's only user is an element-wise op that reads
    its result through a broadcast (the consumer iterates over more elements than the anchor
    computes: a squeeze-excitation gate `x * sigmoid(conv(pool(x)) + b)` over the whole
    activation). The consumer is thread-bound as in rule 3, and the anchor (with its fill) is
    fused into every thread's tile: each thread recomputes the few anchor elements its tile
    reads (validation bounds that work by `MAX_RECOMPUTE`). None when the pattern does not apply."""
    if len(op.users) != 1 or op.users[0] not in rest or len(rest) != 1:
        return None
    cons = by_index[op.users[0]]
    if not cons.is_elementwise() or any(u is not None for u in cons.users) or not op.plain_output:
        return None
    pos = [i for i, p in enumerate(cons.input_producers) if p == op.index]
    if len(pos) != 1 or cons.init_producer is not None:
        return None
    dims = cons.input_dims[pos[0]]
    anchor_elems = math.prod(op.extents[d] for d in op.output_dims)
    if math.prod(cons.extents[d] for d in cons.space) <= anchor_elems:
        return None  # not a broadcast: rule 2's fusion or nothing
    stage, why = _thread_binding_stage(task, [cons], False)
    if stage is None:
        return None, why
    work = math.prod(op.extents[d] for d in op.reduce)
    # (exact tiles: a padded consumer would read a padded slice of the fused anchor)
    stage = dataclasses.replace(stage, producers=(op.index, *(i.index for i in inits)), producer_dims=dims,
                                producer_work=max(1, work), split_extents=())
    return stage, f"gpu_thread_binding_with_broadcast_producer(op{cons.index}<-op{op.index})"


def _thread_binding_stage(task: SearchTask, ops: list[OpLoops], padded: bool) -> tuple[GpuStage | None, str]:
    """Rule 3: a task without data reuse or reductions (element-wise, transposes, broadcasts,
    gathers: what is left of a network between its anchors) is one op after inlining. Its
    space loops are bound to blocks and threads like Ansor's thread binding of such a stage: the
    multi-level tiling structure without reduction levels or shared-memory copies."""
    outs = [o for o in ops if (not o.users or None in o.users) and not o.is_init()]
    if len(outs) != 1:
        return None, f"{len(outs)} output ops and no op with data reuse (thread binding takes one)"
    e = outs[0]
    if padded:
        return None, "a tensor.pad in a task without data reuse"
    rest = sorted({o.index for o in ops} - {e.index})
    if rest:
        return None, f"ops {rest} are neither fused nor inlined (one GPU kernel per task for now)"
    mapped = _mapped_dims(e)
    if not mapped:
        return None, f"op{e.index} has no loop of extent > 1 to bind to threads"
    per_thread = math.prod(e.extents[d] for d in e.space if d not in mapped)
    if per_thread > MAX_THREAD_TILE:
        # the innermost loops are small (a channel shuffle 1x96x2x3x3): bind x to the innermost
        # output loop (coalesced stores) and y, z to the two largest others
        mapped = _largest_mapped_dims(e)
        per_thread = math.prod(e.extents[d] for d in e.space if d not in mapped)
    if per_thread > MAX_THREAD_TILE:
        return None, (f"op{e.index}: {per_thread} elements per thread in the loops beyond the {MAX_MAPPED} "
                      f"bound ones > {MAX_THREAD_TILE}")
    stage = GpuStage(
        op=e.index, op_name=e.name, extents=e.extents, kinds=e.kinds, mapped=mapped, input_dims=e.input_dims,
        output_dims=e.output_dims, promoted=(), elem_bytes=_elem_bytes(task),
        # a gather or strided read: the vectorizer may decline; the thread's loop is then scalar
        vectorize_optional=not e.is_elementwise(),
        # a ragged tile pads every operand with a zero of its own type (f16, i32: not f32/f64)
        operand_types=_operand_types(task, e.index),
        split_extents=_split_extents(e, mapped),
    )
    return stage, f"gpu_thread_binding(op{e.index})"


def gpu_schedulable(task: SearchTask) -> tuple[bool, str]:
    """Whether a GPU rule (multi-level tiling, thread binding or cross-thread reduction)
    schedules `task`, and the rule (or why none does)."""
    from ansor.targets.cuda.reduction import row_stage_for

    stage, why = gpu_stage_for(task)
    if stage is not None:
        return True, why
    row, row_why = row_stage_for(task)
    return (True, row_why) if row is not None else (False, f"{why}; {row_why}")


def _splits(stage: GpuStage) -> tuple[LoopSplit, ...]:
    out = []
    for d, (k, e) in enumerate(zip(stage.kinds, stage.extents, strict=True)):
        if k == "S":
            levels = 5 if d in stage.mapped else 1
        else:
            levels = 3
        out.append(LoopSplit(stage.op, d, k, stage.split_extent(d), False, levels))
    return tuple(out)


def _knobs(stage: GpuStage, splits: tuple[LoopSplit, ...]) -> tuple[Knob, ...]:
    from ansor.space.sketch import divisors

    # a ragged-capable loop: exact tiles of its extent, or any tiles nesting in its padded extent
    knobs = [Knob(n, tuple(sorted(set(divisors(s.extent)) | set(divisors(stage.extents[s.dim])))))
             for s in splits for n in s.tile_knobs]
    knobs.append(Knob(stage.unroll_knob, GPU_UNROLL_OPTIONS))
    if stage.pipelined:
        knobs.append(Knob(stage.stages_knob, PIPELINE_STAGES))
    return tuple(knobs)


def generate_gpu_sketches(task: SearchTask) -> list[Sketch]:
    """GPU sketches of `task`; the last one is `skip` (the default GPU schedule)."""
    skip = SkipSketch()
    from ansor.targets.cuda.tensorcore import TcSketch, tc_problem_for

    problem, _ = tc_problem_for(task)
    tensor_core = [TcSketch("tc0", problem)] if problem is not None else []
    stage, rule = gpu_stage_for(task)
    if stage is None:
        from ansor.targets.cuda.reduction import RowSketch, row_stage_for

        row, row_rule = row_stage_for(task)
        if row is not None:
            return [*tensor_core, RowSketch("r0", row_rule, row), skip]
        from ansor.targets.cuda.multi_kernel import MultiKernelSketch, parts_of

        parts, mk_rule = parts_of(task)  # several kernels: one per fusion group
        return [*tensor_core, MultiKernelSketch("m0", mk_rule, parts), skip] if parts else [*tensor_core, skip]
    splits = _splits(stage)
    return [*tensor_core, GpuSketch("s0", (rule,), stage, splits, _knobs(stage, splits)), skip]


def _partition_hint(task: SearchTask) -> str:
    """Where `task`'s function splits into several tasks (`ansor-partition`: one per anchor op
    and its fused element-wise ops), the way to run it on the GPU today: as a model, one kernel
    per task; "" otherwise."""
    from ansor.targets.cuda.multi_kernel import partition_size  # not frontend.partition: targets sit below it

    n = partition_size(task)
    if n < 2:
        return ""
    return (f" (it partitions into {n} tasks, one GPU kernel each: tune it as a model, "
            "`ansor tune FILE --target cuda` without --one-task, or `ansor.compile(src, target=\"cuda\")`)")


def default_script(task: SearchTask) -> str:
    """The untuned GPU program: a fixed, simple valid annotation of the GPU sketch (one output
    element per thread when possible, 8-deep shared-memory tiles)."""
    stage, why = gpu_stage_for(task)
    if stage is None:
        from ansor.targets.cuda.reduction import RowSketch, default_values, render, row_stage_for

        row, row_why = row_stage_for(task)
        if row is not None:
            return render(row, RowSketch("r0", row_why, row).knobs, default_values(row), "default", "default")
        from ansor.targets.cuda.multi_kernel import default_multi_kernel_script, parts_of

        parts, mk_why = parts_of(task)
        if parts is not None:
            return default_multi_kernel_script(task, parts, mk_why)
        from ansor.core.mlir import LoweringError

        raise LoweringError("apply", f"no GPU schedule for {task.name}: {why}; {row_why}{_partition_hint(task)}")
    splits = _splits(stage)
    knobs = _knobs(stage, splits)
    values: dict[str, int] = {stage.unroll_knob: 0}
    if stage.pipelined:
        values[stage.stages_knob] = 1
    threads_left = 256
    for s in splits:
        if not s.tile_knobs:
            continue
        if s.kind == "S":
            n = max(d for d in range(1, min(threads_left, 32 if s.dim == stage.mapped[0] else 8) + 1)
                    if stage.extents[s.dim] % d == 0)
            threads_left //= n
            values.update(zip(s.tile_knobs, (n, n, 1, 1), strict=True))
        else:
            r = max(d for d in range(1, 9) if stage.extents[s.dim] % d == 0)
            values.update(zip(s.tile_knobs, (r, 1), strict=True))
    err = validate_gpu(stage, knobs, values, strict_threads=False)
    if err and stage.reduce:
        # over the register budget (many unmapped accumulators, a wide windowed input tile per
        # R0 step: RegNet's 25-group convolution at 3x3): one reduction step per R0 tile
        fewer = {**values, **{stage.knob(d, 1): 1 for d in stage.reduce}}
        if validate_gpu(stage, knobs, fewer, strict_threads=False) is None:
            values, err = fewer, None
    if err:
        from ansor.core.mlir import LoweringError

        raise LoweringError("apply", f"default GPU schedule of {task.name} is invalid: {err}")
    return _GpuRenderer(stage, knobs, values).render("default", ("default",))


# ----------------------------------------------------------------------------------------------
# Annotation


def _sizes(stage: GpuStage, values: Mapping[str, int], d: int) -> tuple[int, int, int, int]:
    """(block tile, vthread chunk, thread tile, register tile) of space dim d."""
    if d not in stage.mapped:
        e = stage.extents[d]
        return e, e, e, 1
    return tuple(int(values[stage.knob(d, lv)]) for lv in range(1, 5))  # type: ignore[return-value]


def threads_per_dim(stage: GpuStage, values: Mapping[str, int]) -> list[int]:
    """Threads along x, y, z."""
    out = []
    for d in stage.mapped:
        _, t2, t3, _ = _sizes(stage, values, d)
        out.append(t2 // t3)
    return out + [1] * (3 - len(out))


def shared_bytes(stage: GpuStage, values: Mapping[str, int]) -> int:
    """Shared memory of one block, bytes: the cached input tiles, `stages` copies of each (+ the
    accumulator tile with a fused consumer)."""
    total = 0
    if stage.consumer is not None and stage.init is not None:
        total += math.prod(_sizes(stage, values, d)[0] for d in stage.output_dims) * stage.elem_bytes
    tiles = 0
    for i in stage.promoted:
        tiles += math.prod(input_tile_shape(stage, values, i)) * stage.elem_bytes
    return total + tiles * stage.stages(values)


def r0_trips(stage: GpuStage, values: Mapping[str, int]) -> int:
    """Iterations of the innermost `R0` loop (the one the shared-memory copies sit in, which
    `ansor-gpu-pipeline-shared-copies` pipelines): the last reduction dim with an `R0` tile
    smaller than its (padded) extent; 1 when there is none."""
    padded = stage.padded_extents(values)
    for d in reversed(stage.reduce):
        t = int(values[stage.knob(d, 1)])
        if t < padded[d]:
            return padded[d] // t
    return 1


def thread_registers(stage: GpuStage, values: Mapping[str, int]) -> int:
    """Estimated 32-bit registers one thread of a multi-level tiled stage needs: its
    accumulators (the thread's whole tile, virtual threads included: `S1` and `S3` are
    unrolled), the operands one reduction step reads into registers (per input, the thread's
    extent along the space loops indexing it: 8 + 16 for an 8x16 matmul tile), the elements
    each thread copies into shared memory per `R0` step (held in registers by the synchronous
    copy's global prefetch and by guarded pipelined copies; counted for cp.async too, whose
    many per-thread copies cost address registers), and `OTHER_REGISTERS`; 64-bit elements
    count twice."""
    ext = {}
    for d, k in enumerate(stage.kinds):
        if k == "S":
            t1, t2, t3, _ = _sizes(stage, values, d)
            ext[d] = (t1 // t2) * t3 if d in stage.mapped else t1
    acc = math.prod(ext.values())
    operands = sum(math.prod(ext.get(d, 1) for d in dims) for dims in stage.input_dims)
    threads = math.prod(threads_per_dim(stage, values))
    copies = 0
    for i in stage.promoted:
        shape = input_tile_shape(stage, values, i)
        copies += math.prod(_copy_tiles(shape, threads, stage.elem_bytes)[0])
    return (acc + operands + copies) * max(1, stage.elem_bytes // 4) + OTHER_REGISTERS


def loop_nests(stage: GpuStage, values: Mapping[str, int]) -> int:
    """Copies of the reduction nest one thread keeps as loops (0: all unrolled; see
    `MAX_LOOP_NESTS`). The schedule unrolls `S1` and `S3` (outside `R1 R2`): one nest per virtual
    thread and per register-tile vector, each of work K = the `R0` tile's reduction steps; the
    lowering's auto-unroll unrolls them all when K <= the unroll knob and the copies' scalar work
    (nests x K x vector width) fits `config.CUDA_MAX_UNROLLED_WORK`, else they stay loops."""
    from ansor import config

    nests, width = 1, 1
    for d in stage.mapped:
        if stage.kinds[d] != "S":
            continue
        t1, t2, t3, t4 = _sizes(stage, values, d)
        nests *= (t1 // t2) * (t3 // t4)
        width *= t4
    work = math.prod(int(values[stage.knob(d, 1)]) for d in stage.reduce)
    cap = config.CUDA_MAX_UNROLLED_WORK
    unrolled = work <= int(values[stage.unroll_knob]) and (cap <= 0 or nests * work * width <= cap)
    return 0 if unrolled else nests


def recompute_work(stage: GpuStage, values: Mapping[str, int]) -> int:
    """Multiply-adds one thread spends on the broadcast producer fused into its tile: per
    virtual thread, the anchor elements under the thread's tile (its `S2` tile along the loops
    indexing the anchor's result) times the anchor's reduction steps."""
    elems, vthreads = 1, 1
    for d in stage.space:
        t1, t2, t3, _ = _sizes(stage, values, d)
        if d in stage.mapped:
            vthreads *= t1 // t2
        if d in stage.producer_dims:
            elems *= t3
    return vthreads * elems * stage.producer_work


def _tile_extent(stage: GpuStage, values: Mapping[str, int], d: int) -> int:
    """Extent of loop d inside one block at one R0 step."""
    if stage.kinds[d] == "R":
        return int(values[stage.knob(d, 1)])
    return _sizes(stage, values, d)[0]


def input_tile_shape(stage: GpuStage, values: Mapping[str, int], i: int) -> list[int]:
    """The tile of cached input i that one block copies into shared memory per `R0` step: along
    each of its axes, the loop tile of the loop indexing it, or for a windowed input
    (`GpuStage.windows`) 1 + sum(coefficient * (loop tile - 1)) over the loops of its index."""
    forms = stage.windows[i] if stage.windows else None
    if forms is None:
        return [_tile_extent(stage, values, d) for d in stage.input_dims[i]]
    return [1 + sum(c * (_tile_extent(stage, values, d) - 1) for d, c in form) for form in forms]


def validate_gpu(stage: GpuStage, knobs: tuple[Knob, ...], values: Mapping[str, int], *,
                 strict_threads: bool = True) -> str | None:
    """Why `values` is not a valid annotation (None when valid): options, nesting, device limits.
    (The verdict comes from the stage's compiled `_GpuChecker`; the reason, only for an invalid
    annotation, from `_why_invalid`, the checks in their documented order.)"""
    chk = _checker(stage, knobs)
    if chk is not None and chk.ok(values, strict_threads):
        return None
    return _why_invalid(stage, knobs, values, strict_threads=strict_threads)


def _why_invalid(stage: GpuStage, knobs: tuple[Knob, ...], values: Mapping[str, int], *,
                 strict_threads: bool = True) -> str | None:
    """`validate_gpu`'s checks one by one, in order: the first one that fails says why."""
    for k in knobs:
        if k.name not in values:
            return f"missing knob {k.name}"
        if int(values[k.name]) not in k.options:
            return f"knob {k.name}={values[k.name]} not in its options"
    thread_tile, vthreads = 1, 1
    for d, (kind, e) in enumerate(zip(stage.kinds, stage.extents, strict=True)):
        if kind == "S" and d in stage.mapped:
            chain = [e, *_sizes(stage, values, d)]
        elif kind == "R":
            chain = [e, int(values[stage.knob(d, 1)]), int(values[stage.knob(d, 2)])]
        else:
            thread_tile *= e
            continue
        # the block tile divides the extent or, on a ragged-capable loop, the padded extent
        # (the op is then padded to a multiple of it); the levels below nest exactly
        top = stage.split_extent(d)
        if (chain[0] % chain[1] and top % chain[1]) or any(chain[i] % chain[i + 1] for i in range(1, len(chain) - 1)):
            where = f"extent {e}" + (f" (padded {top})" if top != e else "")
            return f"op{stage.op} loop d{d}: tile sizes {chain[1:]} do not nest in {where}"
        if kind == "S" and d in stage.decompose_rows and chain[4] != 1:
            return f"op{stage.op} loop d{d}: a windowed op's output-row register tile must be 1"
        if kind == "S":
            thread_tile *= chain[3]
            vthreads *= chain[1] // chain[2]
            if chain[4] > MAX_INNERMOST:
                return f"op{stage.op} loop d{d}: register tile {chain[4]} > {MAX_INNERMOST}"
    per_dim = threads_per_dim(stage, values)
    threads = math.prod(per_dim)
    if threads > MAX_THREADS_PER_BLOCK:
        return f"{threads} threads per block > {MAX_THREADS_PER_BLOCK}"
    for axis, n, most in zip(AXES, per_dim, MAX_BLOCK_DIMS, strict=False):
        if n > most:  # (the transform's `map_nested_forall_to_threads` refuses: "block_dims is too large")
            return f"{n} threads along {axis} > {most}"
    space = math.prod(stage.extents[d] for d in stage.mapped)
    if strict_threads and threads < min(MIN_THREADS_PER_BLOCK, space):
        return f"{threads} threads per block < {MIN_THREADS_PER_BLOCK}"
    if stage.reduce:
        # (virtual threads are unrolled: all their accumulators live in the thread's registers)
        regs = thread_registers(stage, values)
        if regs > MAX_REGISTERS_PER_THREAD:
            return (f"{thread_tile * vthreads} accumulators per thread need ~{regs} registers "
                    f"> {MAX_REGISTERS_PER_THREAD}")
        if regs * threads > MAX_REGISTERS_PER_BLOCK:
            return (f"{threads} threads x ~{regs} registers ({thread_tile * vthreads} accumulators) "
                    f"> {MAX_REGISTERS_PER_BLOCK} per block")
        nests = loop_nests(stage, values)
        if nests > MAX_LOOP_NESTS:
            return f"{nests} reduction loop nests per thread (not unrolled) > {MAX_LOOP_NESTS}"
    elif thread_tile * vthreads > MAX_THREAD_TILE:
        return f"{thread_tile * vthreads} elements per thread > {MAX_THREAD_TILE}"
    if stage.producers:
        work = recompute_work(stage, values)
        if work > MAX_RECOMPUTE:
            return f"{work} multiply-adds per thread recomputing the broadcast producer > {MAX_RECOMPUTE}"
    if vthreads > MAX_VTHREAD:
        return f"{vthreads} virtual threads > {MAX_VTHREAD}"
    smem = shared_bytes(stage, values)
    if smem > MAX_SHARED_BYTES:
        return f"{smem} bytes of shared memory > {MAX_SHARED_BYTES}"
    stages = stage.stages(values)
    if stages > 1 and r0_trips(stage, values) < stages:
        # (fewer R0 steps than buffers: nothing to overlap, a duplicate of stages = 1)
        return f"{stages} pipeline stages > {r0_trips(stage, values)} R0 steps"
    return None


@functools.lru_cache(maxsize=1 << 16)
def _copy_elems(shape: tuple[int, ...], threads: int, elem_bytes: int) -> int:
    """Elements one thread copies of a cooperative copy of `shape` (`_copy_tiles`' tile, its product)."""
    return math.prod(_copy_tiles(list(shape), threads, elem_bytes)[0])


class _GpuChecker:
    """`validate_gpu`'s verdict (valid or not, not why) compiled for one (stage, knobs): what
    depends on the stage alone is computed once (options as sets, per dim its extents, knob
    positions, the constant factors of accumulators, operands, shared tiles), and an annotation
    is checked as per-dim entries, each built and checked once per dim:

        mapped space dim: (t1, t2, t3, t4, threads, vthreads, t3 * vthreads, loop nests)
        reduction dim:    (r1, r2)

    `s_entry` / `r_entry` hold the checks of one dim alone (nesting, register tile, threads
    along its axis, and bounds the whole annotation can only exceed: virtual threads,
    accumulators); `check` the rest on the entries. The sampler (`_SamplePlan`) builds the
    entries of every factorization it can draw once. Keep it the same verdict as
    `_why_invalid(...) is None` when either changes (they agreed on ~100 K random, sampled and
    mutated annotations of the built-in workloads' GPU sketches, and the seeded sampler drew the
    same schedules with the same random calls)."""

    def __init__(self, stage: GpuStage, knobs: tuple[Knob, ...]) -> None:
        st = stage
        self.stage, self.knobs = stage, knobs
        self.names = tuple(k.name for k in knobs)
        self.options = tuple(frozenset(k.options) for k in knobs)
        pos = {n: i for i, n in enumerate(self.names)}
        mapped = tuple(st.mapped)
        self.supported = (set(st.kinds) <= {"S", "R"} and all(st.kinds[d] == "S" for d in mapped)
                          and len(set(mapped)) == len(mapped) and st.unroll_knob in pos
                          and all(st.knob(d, lv) in pos for d in mapped for lv in range(1, 5))
                          and all(st.knob(d, lv) in pos for d in st.reduce for lv in (1, 2))
                          and (not st.pipelined or st.stages_knob in pos))
        if not self.supported:
            return
        a_of = {d: a for a, d in enumerate(mapped)}
        self.reduce = bool(st.reduce)
        self.mult = max(1, st.elem_bytes // 4)
        self.eb = st.elem_bytes
        self.s_pos = tuple(tuple(pos[st.knob(d, lv)] for lv in range(1, 5)) for d in mapped)
        self.r_pos = tuple((pos[st.knob(d, 1)], pos[st.knob(d, 2)]) for d in st.reduce)
        self.unroll_pos = pos[st.unroll_knob]
        self.stages_pos = pos[st.stages_knob] if st.pipelined else -1
        # per mapped dim: extent, the extent its block tile may pad to, unit register tile, threads along its axis
        self.s_static = tuple((st.extents[d], st.split_extent(d), d in st.decompose_rows,
                               min(MAX_BLOCK_DIMS[a], MAX_THREADS_PER_BLOCK) if a < len(MAX_BLOCK_DIMS)
                               else MAX_THREADS_PER_BLOCK) for a, d in enumerate(mapped))
        self.r_static = tuple((st.extents[d], st.split_extent(d)) for d in st.reduce)
        # unmapped space loops: each thread iterates them whole (accumulators, elements per thread)
        self.u_const = math.prod(e for d, (k, e) in enumerate(zip(st.kinds, st.extents, strict=True))
                                 if k == "S" and d not in a_of)
        self.min_threads = min(MIN_THREADS_PER_BLOCK, math.prod(st.extents[d] for d in mapped))
        # per input: the constant part of its operand registers and the mapped dims of the rest
        self.operands = tuple((math.prod(st.extents[d] for d in dims if st.kinds[d] == "S" and d not in a_of),
                               tuple(a_of[d] for d in dims if d in a_of)) for dims in st.input_dims)
        b_of = {d: b for b, d in enumerate(st.reduce)}
        # per cached input, per axis of its tile: the terms (source, index, coefficient) of
        # 1 + sum(coefficient * (size - 1)) (`input_tile_shape`), the size from (0, extent) /
        # (1, mapped index: t1) / (2, reduce index: r1); a plain input's axis is one term of 1
        def term(d: int, c: int) -> tuple[int, int, int]:
            return ((2, b_of[d], c) if st.kinds[d] == "R" else (1, a_of[d], c) if d in a_of
                    else (0, st.extents[d], c))

        self.shapes = tuple(
            tuple((term(d, 1),) for d in st.input_dims[i]) if not st.windows or st.windows[i] is None
            else tuple(tuple(term(d, c) for d, c in form) for form in st.windows[i])
            for i in st.promoted)
        self.out_tile = st.consumer is not None and st.init is not None
        self.out_const = math.prod(st.extents[d] for d in st.output_dims if d not in a_of)
        self.out_idx = tuple(a_of[d] for d in st.output_dims if d in a_of)
        self.producers = bool(st.producers)
        self.prod_const = math.prod(st.extents[d] for d in st.space if d in st.producer_dims and d not in a_of)
        self.prod_idx = tuple(a_of[d] for d in st.space if d in st.producer_dims and d in a_of)
        self.producer_work = st.producer_work
        self.r0_order = tuple(reversed(range(len(st.reduce))))

    def s_entry(self, a: int, t1: int, t2: int, t3: int, t4: int) -> tuple[int, ...] | None:
        """The entry of mapped dim `a` with tile sizes t1..t4; None when it alone makes the annotation invalid."""
        e, top, unit, most = self.s_static[a]
        if (e % t1 and top % t1) or t1 % t2 or t2 % t3 or t3 % t4:
            return None
        if (unit and t4 != 1) or t4 > MAX_INNERMOST:
            return None
        thr, vt = t2 // t3, t1 // t2
        ext = vt * t3
        if thr > most or vt > MAX_VTHREAD:
            return None
        if self.reduce:  # (every other dim's accumulators and operands only add to this)
            if ext * self.u_const * self.mult + OTHER_REGISTERS > MAX_REGISTERS_PER_THREAD:
                return None
        elif ext * self.u_const > MAX_THREAD_TILE:
            return None
        return (t1, t2, t3, t4, thr, vt, ext, vt * (t3 // t4))

    def r_entry(self, b: int, r1: int, r2: int) -> tuple[int, int] | None:
        e, top = self.r_static[b]
        if (e % r1 and top % r1) or r1 % r2:
            return None
        return (r1, r2)

    def ok(self, values: Mapping[str, int], strict_threads: bool = True) -> bool:
        """Whether `validate_gpu(stage, knobs, values, strict_threads=...)` is None."""
        try:
            vals = [int(values[n]) for n in self.names]
        except KeyError:
            return False
        for v, opts in zip(vals, self.options):
            if v not in opts:
                return False
        S = []
        for a, (i1, i2, i3, i4) in enumerate(self.s_pos):
            ent = self.s_entry(a, vals[i1], vals[i2], vals[i3], vals[i4])
            if ent is None:
                return False
            S.append(ent)
        R = []
        for b, (j1, j2) in enumerate(self.r_pos):
            rent = self.r_entry(b, vals[j1], vals[j2])
            if rent is None:
                return False
            R.append(rent)
        stages = vals[self.stages_pos] if self.stages_pos >= 0 else 1
        return self.check(S, R, vals[self.unroll_pos], stages, strict_threads)

    def check(self, S: list, R: list, unroll: int, stages: int, strict_threads: bool = True) -> bool:
        """The checks across dims, on entries that passed `s_entry` / `r_entry`."""
        threads = vth = ext = 1
        for s in S:
            threads *= s[4]
            vth *= s[5]
            ext *= s[6]
        if vth > MAX_VTHREAD or threads > MAX_THREADS_PER_BLOCK:
            return False
        if strict_threads and threads < self.min_threads:
            return False
        shapes = [tuple([1 + sum(c * ((x if src == 0 else S[x][0] if src == 1 else R[x][0]) - 1)
                                 for src, x, c in axis) for axis in spec])
                  for spec in self.shapes]
        if self.reduce:
            regs = ext * self.u_const
            for const, idx in self.operands:
                for a in idx:
                    const *= S[a][6]
                regs += const
            for sh in shapes:
                regs += _copy_elems(sh, threads, self.eb)
            regs = regs * self.mult + OTHER_REGISTERS
            if regs > MAX_REGISTERS_PER_THREAD or regs * threads > MAX_REGISTERS_PER_BLOCK:
                return False
            nests = width = 1
            for s in S:
                nests *= s[7]
                width *= s[3]
            if nests > MAX_LOOP_NESTS:
                work = 1
                for r in R:
                    work *= r[0]
                from ansor import config

                cap = config.CUDA_MAX_UNROLLED_WORK
                if not (work <= unroll and (cap <= 0 or nests * work * width <= cap)):
                    return False
        elif ext * self.u_const > MAX_THREAD_TILE:
            return False
        if self.producers:
            elems = self.prod_const
            for a in self.prod_idx:
                elems *= S[a][2]
            if vth * elems * self.producer_work > MAX_RECOMPUTE:
                return False
        smem = 0
        if self.out_tile:
            smem = self.out_const
            for a in self.out_idx:
                smem *= S[a][0]
            smem *= self.eb
        tiles = 0
        for sh in shapes:
            tiles += math.prod(sh) * self.eb
        if smem + tiles * stages > MAX_SHARED_BYTES:
            return False
        if stages > 1:
            trips = 1
            for b in self.r0_order:
                t = R[b][0]
                e, top = self.r_static[b]
                padded = -(-e // t) * t if top != e and e % t else e
                if t < padded:
                    trips = padded // t
                    break
            if trips < stages:
                return False
        return True


_CHECKERS: dict[tuple[int, int], tuple[GpuStage, tuple[Knob, ...], _GpuChecker | None]] = {}


def _checker(stage: GpuStage, knobs: tuple[Knob, ...]) -> _GpuChecker | None:
    """The compiled checker of (stage, knobs), kept by identity (a sketch's own stage and knobs);
    None where it does not apply (a stage of another form: `_why_invalid` decides alone)."""
    hit = _CHECKERS.get((id(stage), id(knobs)))
    if hit is not None and hit[0] is stage and hit[1] is knobs:
        return hit[2]
    chk = _GpuChecker(stage, knobs)
    if len(_CHECKERS) >= 1024:
        _CHECKERS.clear()
    _CHECKERS[(id(stage), id(knobs))] = (stage, knobs, chk if chk.supported else None)
    return chk if chk.supported else None


@functools.cache
def _dim_choices(split: LoopSplit, extent: int, ragged: bool, axis: int) -> tuple[tuple[int, ...], ...]:
    """The factorizations the sampler draws for one loop (ragged ones of its padded extent, or the
    extent's), less those no annotation can use whatever the other loops draw: a mapped space
    loop's register tile over `MAX_INNERMOST`, threads over the block's limit along its `axis`,
    more than `MAX_VTHREAD` virtual threads or `MAX_REGISTERS_PER_THREAD` accumulators. Every
    valid annotation stays drawable with the same probability; the joint rejection sampling
    just rejects less (random 5-level splits of 4096 were 430 tries per valid draw)."""
    exact = factorizations(extent, split.levels)
    choices = (_ragged_factors(split, extent) or exact) if ragged else exact
    if axis < 0:
        return choices
    keep = []
    for f in choices:
        t1, t2, t3, t4 = sizes_from_factors(f)
        if (t4 <= MAX_INNERMOST and t2 // t3 <= min(MAX_BLOCK_DIMS[axis], MAX_THREADS_PER_BLOCK)
                and t1 // t2 <= MAX_VTHREAD and t3 * (t1 // t2) <= MAX_REGISTERS_PER_THREAD):
            keep.append(f)
    return tuple(keep) or choices


def _ragged_factors(split: LoopSplit, extent: int) -> tuple[tuple[int, ...], ...]:
    """Factorizations of `split`'s padded extent whose block tile does not divide `extent`."""
    return _ragged_factorizations(split.extent, split.levels, extent)


@functools.cache
def _ragged_factorizations(padded: int, levels: int, extent: int) -> tuple[tuple[int, ...], ...]:
    # cached: the sampler asks for every draw of every ragged loop (a prime matmul's initial
    # population recomputed 222M products, 54 s of a tuning round on the GPU host)
    return tuple(f for f in factorizations(padded, levels) if extent % math.prod(f[1:]))


@functools.cache
def _useful_divisor(extent: int) -> bool:
    """Whether `extent` has a divisor a block tile could be: in [RAGGED_QUANTUM, 256]."""
    return any(extent % d == 0 for d in range(RAGGED_QUANTUM, min(extent, 256) + 1))


def sample_gpu(sketch: GpuSketch, rng: random.Random, *, max_tries: int = 4000, ragged: bool = True) -> Schedule:
    """A random valid annotation (rejection sampling over factorizations): a ragged-capable
    loop takes, with probability `GPU_RAGGED_PROB` (never when not `ragged`; always when the extent
    has no divisor in [`RAGGED_QUANTUM`, 256], a prime), a factorization of its padded extent whose
    block tile does not divide the extent, else one of the extent. The
    pipeline depth is drawn uniformly among the depths that fit the drawn tiles.
    (Drawn through the sketch's `_SamplePlan`: the same draws as `_sample_gpu_reference`, checked faster.)"""
    plan = _sample_plan(sketch, ragged)
    if plan is None:
        return _sample_gpu_reference(sketch, rng, max_tries=max_tries, ragged=ragged)
    return plan.sample(rng, max_tries)


class _SamplePlan:
    """`sample_gpu`'s draws for one sketch, precomputed: per split with knobs, its factorizations
    (exact, and padded where ragged tiles apply) as the `_GpuChecker` entries of their tile sizes
    (None for one no annotation can use). A draw makes the same random calls on lists of the same
    lengths as `_sample_gpu_reference` (seeded searches propose the same schedules); a draw with a
    None entry is rejected without checking the rest, the others by `_GpuChecker.check`."""

    def __init__(self, sketch: GpuSketch, ragged: bool, chk: _GpuChecker) -> None:
        stage = sketch.gpu_stage
        self.name, self.chk, self.stage = sketch.name, chk, stage
        self.unroll_ok = chk.options[chk.unroll_pos]
        self.stage1_ok = chk.stages_pos < 0 or 1 in chk.options[chk.stages_pos]  # (the depth checked first)
        self.steps = []
        seen_s, seen_r = set(), set()
        for s in sketch.splits:
            if not s.tile_knobs:
                continue
            extent = stage.extents[s.dim]
            maybe_pad = ragged and s.extent != extent
            always_pad = not _useful_divisor(extent)
            axis = stage.mapped.index(s.dim) if s.kind == "S" and s.dim in stage.mapped else -1
            lists = []
            for pad in ((False, True) if maybe_pad else (False,)):
                choices = _dim_choices(s, extent, pad, axis)
                if s.kind == "S" and s.op == stage.op and s.dim in stage.decompose_rows:
                    choices = tuple(f for f in choices if f[-1] == 1)
                lists.append([self.entry(s, axis, sizes_from_factors(f)) for f in choices])
            slot = axis if axis >= 0 else stage.reduce.index(s.dim)
            (seen_s if axis >= 0 else seen_r).add(slot)
            self.steps.append((maybe_pad, always_pad, lists[0], lists[-1], axis < 0, slot, s.tile_knobs))
        self.n_s, self.n_r = len(stage.mapped), len(stage.reduce)

    def entry(self, s: LoopSplit, axis: int, sizes: list[int]) -> tuple[int, ...] | None:
        chk = self.chk
        pos = [chk.names.index(n) for n in s.tile_knobs]
        if any(v not in chk.options[i] for v, i in zip(sizes, pos, strict=True)):
            return None
        if axis >= 0:
            return chk.s_entry(axis, *sizes)
        return chk.r_entry(self.stage.reduce.index(s.dim), *sizes)

    def sample(self, rng: random.Random, max_tries: int) -> Schedule:
        chk, steps, unroll_ok = self.chk, self.steps, self.unroll_ok
        random_, choice = rng.random, rng.choice
        S: list = [None] * self.n_s
        R: list = [None] * self.n_r
        for _ in range(max_tries):
            bad = False
            picks = []
            for maybe_pad, always_pad, exact, padded, is_r, slot, _names in steps:
                # (the same calls as the reference: random() whenever the loop may be ragged)
                ent = choice(padded if maybe_pad and (random_() < GPU_RAGGED_PROB or always_pad) else exact)
                if ent is None:
                    bad = True
                elif is_r:
                    R[slot] = ent
                else:
                    S[slot] = ent
                picks.append(ent)
            unroll = choice(GPU_UNROLL_OPTIONS)
            if bad or unroll not in unroll_ok or not self.stage1_ok or not chk.check(S, R, unroll, 1):
                continue
            values: dict[str, int] = {}
            for step, ent in zip(steps, picks, strict=True):
                values.update(zip(step[6], ent, strict=False))
            values[self.stage.unroll_knob] = unroll
            if self.stage.pipelined:
                fits = [s for s in PIPELINE_STAGES if s == 1 or (s in chk.options[chk.stages_pos]
                                                                   and chk.check(S, R, unroll, s))]
                values[self.stage.stages_knob] = rng.choice(fits)
            return Schedule.of(self.name, values)
        raise SamplingError(f"sketch {self.name}: no valid GPU annotation found in {max_tries} tries")


_PLANS: dict[tuple[int, bool], tuple[GpuSketch, tuple[Knob, ...], _SamplePlan | None]] = {}


def _sample_plan(sketch: GpuSketch, ragged: bool) -> _SamplePlan | None:
    """The sketch's `_SamplePlan` (kept by identity), None where the checker does not apply or
    the splits are not one per mapped space dim and reduction dim of the stage."""
    key = (id(sketch), ragged)
    hit = _PLANS.get(key)
    if hit is not None and hit[0] is sketch and hit[1] is sketch.knobs:
        return hit[2]
    stage = sketch.gpu_stage
    chk = _checker(stage, sketch.knobs)
    plan = None
    knobbed = [s for s in sketch.splits if s.tile_knobs]
    expect = ([stage.knob(d, lv) for d in stage.mapped for lv in range(1, 5)]
              + [stage.knob(d, lv) for d in stage.reduce for lv in (1, 2)])
    own = {*expect, stage.unroll_knob, *([stage.stages_knob] if stage.pipelined else [])}
    if (chk is not None and all(s.op == stage.op for s in knobbed) and set(chk.names) == own
            and sorted(n for s in knobbed for n in s.tile_knobs) == sorted(expect)
            and all(s.tile_knobs == tuple(stage.knob(s.dim, lv) for lv in range(1, 1 + len(s.tile_knobs)))
                    and ((s.kind == "S" and s.dim in stage.mapped and len(s.tile_knobs) == 4)
                         or (s.kind == "R" and stage.kinds[s.dim] == "R" and len(s.tile_knobs) == 2))
                    for s in knobbed)):
        plan = _SamplePlan(sketch, ragged, chk)
    if len(_PLANS) >= 1024:
        _PLANS.clear()
    _PLANS[key] = (sketch, sketch.knobs, plan)
    return plan


def _sample_gpu_reference(sketch: GpuSketch, rng: random.Random, *, max_tries: int = 4000,
                          ragged: bool = True) -> Schedule:
    """`sample_gpu` drawn and checked plainly (dicts through `validate_gpu`): where the plan does
    not apply, and the reference the tests compare the plan with."""
    stage = sketch.gpu_stage
    for _ in range(max_tries):
        values: dict[str, int] = {}
        for s in sketch.splits:
            if not s.tile_knobs:
                continue
            extent = stage.extents[s.dim]
            # an extent without a divisor in [RAGGED_QUANTUM, 256] (a prime: 509, 1021, 257)
            # has only degenerate exact tiles (1 or the whole extent): always ragged there
            pad = ragged and s.extent != extent and (rng.random() < GPU_RAGGED_PROB or not _useful_divisor(extent))
            axis = stage.mapped.index(s.dim) if s.kind == "S" and s.dim in stage.mapped else -1
            choices = _dim_choices(s, extent, pad, axis)
            if s.kind == "S" and s.op == stage.op and s.dim in stage.decompose_rows:
                # a windowed op's output-row register tile is 1 (validate_gpu): sampled as such,
                # since rejection alone rarely meets it on two rows (a 3-D convolution)
                choices = tuple(f for f in choices if f[-1] == 1)
            factors = rng.choice(choices)
            values.update(zip(s.tile_knobs, sizes_from_factors(factors), strict=True))
        values[stage.unroll_knob] = rng.choice(GPU_UNROLL_OPTIONS)
        if stage.pipelined:
            values[stage.stages_knob] = 1
        if validate_gpu(stage, sketch.knobs, values) is None:
            if stage.pipelined:
                # the depth among those the tiles leave room for: the tiles are drawn as without
                # the knob (rejecting a large tile for its stages would favour small tiles)
                fits = [s for s in PIPELINE_STAGES
                        if s == 1 or validate_gpu(stage, sketch.knobs, {**values, stage.stages_knob: s}) is None]
                values[stage.stages_knob] = rng.choice(fits)
            return Schedule.of(sketch.name, values)
    raise SamplingError(f"sketch {sketch.name}: no valid GPU annotation found in {max_tries} tries")


# ----------------------------------------------------------------------------------------------
# Rendering


def _copy_tiles(shape: list[int], threads: int, elem_bytes: int) -> tuple[list[int], int]:
    """Per-thread tile of a cooperative copy of `shape` by `threads` threads: the innermost dim
    moves 16-byte vectors where it divides; the rest spread over the threads. Returns (tile, used)."""
    vec = 16 // elem_bytes
    while vec > 1 and shape[-1] % vec:
        vec //= 2
    tile = list(shape)
    left = threads
    # innermost: as many threads as vectors (a divisor of the vector count not above `left`)
    n_vec = shape[-1] // vec
    n = max(x for x in range(1, min(n_vec, left) + 1) if n_vec % x == 0)
    tile[-1] = shape[-1] // n
    left //= n
    for a in range(len(shape) - 2, -1, -1):
        n = max(x for x in range(1, min(shape[a], left) + 1) if shape[a] % x == 0)
        tile[a] = shape[a] // n
        left //= n
    used = math.prod(s // t for s, t in zip(shape, tile, strict=True))
    return tile, used


class _GpuRenderer(ScriptBuilder):
    def __init__(self, stage: GpuStage, knobs: tuple[Knob, ...], values: Mapping[str, int] | None) -> None:
        super().__init__(values)
        self.st = stage
        self.knobs = knobs
        self.ext: list[int] | None = None  # current tile extents of the compute op (filled scripts)
        self.last_trips: list[int] = []  # trip counts of the loops the last `tile_for` made
        self.unrolls: list[tuple[int, int]] = []  # (tag, trip count) of loops to unroll fully

    def expr(self, num: str, den: str) -> str:
        """num / den of two knobs as a number (filled) or a `{a/b}` placeholder."""
        if self.values is None:
            return "{" + f"{num}/{den}" + "}"
        return str(int(self.values[num]) // int(self.values[den]))

    def match(self, num: int) -> str:  # ops are matched by number only here
        return super().match(OP_ATTR, num)

    def tile_forall(self, target: str, sizes: list[str], mapping: list[str], *, num_threads: bool = False) -> tuple[str, str]:
        op, forall = self.fresh("t"), self.fresh("forall")
        kw = "num_threads" if num_threads else "tile_sizes"
        self.emit(f"{op}, {forall} = transform.structured.tile_using_forall {target} {kw} [{', '.join(sizes)}] "
                  f"(mapping = [{', '.join(mapping)}]) : ({ANY}) -> ({ANY}, {ANY})")
        return op, forall

    def tile_for(self, target: str, sizes: list[str], *, track: bool = True) -> tuple[str, list[str]]:
        if track:
            before = list(self.ext) if self.ext is not None else None
            sizes = self.effective(sizes)
            if before is not None:
                self.last_trips = [before[d] // int(s) for d, s in enumerate(sizes) if s != "0"]
        n_loops = sum(1 for s in sizes if s != "0")
        if n_loops == 0:
            return target, []
        op, loops = self.fresh("t"), self.fresh("l")
        outs = ", ".join([ANY] * (1 + n_loops))
        self.emit(f"{op}, {loops}:{n_loops} = transform.structured.tile_using_for {target} "
                  f"tile_sizes [{', '.join(sizes)}] : ({ANY}) -> ({outs})")
        return op, [f"{loops}#{i}" for i in range(n_loops)]

    # -- sizes ------------------------------------------------------------------------------
    def effective(self, sizes: list[str]) -> list[str]:
        """Drop tilings that would make one-iteration loops (filled scripts only): canonicalization
        folds those loops away, and a handle to a folded loop fails the script."""
        if self.values is None or self.ext is None:
            return sizes
        out = []
        for d, s in enumerate(sizes):
            if s != "0" and int(s) >= self.ext[d]:
                out.append("0")
            else:
                if s != "0":
                    self.ext[d] = int(s)
                out.append(s)
        return out

    def mapping(self, kind: str, dims: list[int]) -> list[str]:
        return [f"#gpu.{kind}<{AXES[self.st.mapped.index(d)]}>" for d in dims]

    def space_sizes(self, level: int) -> list[str]:
        """Tile sizes of mapped space dims at `level` (others 0)."""
        return [self.value(self.st.knob(d, level)) if d in self.st.mapped else "0" for d in range(len(self.st.kinds))]

    def threads(self) -> list[int] | None:
        if self.values is None:
            return None
        return threads_per_dim(self.st, self.values)

    def render(self, name: str, rules: tuple[str, ...]) -> str:
        st = self.st
        nd = len(st.kinds)
        head = [
            "module attributes {transform.with_named_sequence} {",
            f"  // sketch {name}: {' + '.join(rules)} (GPU)",
            f"  transform.named_sequence @__transform_main(%root: {ANY} {{transform.consumed}}) {{",
        ]
        for k in self.knobs:
            self.emit(self.knob_line(k))
        threads = self.threads()
        total_threads = math.prod(threads) if threads else None
        mapped_order = [d for d in range(nd) if d in st.mapped]  # loop order
        block_map = self.mapping("block", mapped_order)
        thread_map = self.mapping("thread", mapped_order)
        n_thr = {d: self.expr(st.knob(d, 2), st.knob(d, 3)) for d in st.mapped}
        to_vectorize: list[tuple[str, list[int] | None]] = []

        if st.reshaped_consumer:
            self.reshape_consumer()
        op = self.match(st.op)
        fill_h = None
        ragged = st.ragged_dims(self.values) if self.values is not None else ()
        if ragged:
            op, fill_h = self.pad_ragged(op, ragged)
        elif self.values is None and st.split_extents and st.split_extents != st.extents:
            self.emit("// ragged tiles: where a block tile does not divide its loop, the op is first padded to a")
            self.emit("// multiple of it (guarded reads, masked writes: ansor-gpu-guard-padded-reads)")
        self.emit(f"// S0: blocks ({', '.join(f'd{d}->{AXES[st.mapped.index(d)]}' for d in st.mapped)})")
        if st.consumer is not None:
            cons = self.match(st.consumer)
            csizes = [self.value(st.knob(st.consumer_dims[c], 1)) if st.consumer_dims[c] in st.mapped else "0"
                      for c in range(len(st.consumer_dims))]
            cmap = [f"#gpu.block<{AXES[st.mapped.index(st.consumer_dims[c])]}>"
                    for c in range(len(st.consumer_dims)) if st.consumer_dims[c] in st.mapped]
            cblk, blk = self.tile_forall(cons, csizes, cmap)
            blk_op, blk = self.fuse_into(op, blk)
        else:
            blk_op, blk = self.tile_forall(op, self.space_sizes(1), block_map)
        fused_producers: list[str] = []
        if st.producers:
            self.emit("// broadcast producers (the anchor, its fill): fused into the block, then into each thread")
            for p in st.producers:
                h, blk = self.fuse_into(self.match(p), blk)
                fused_producers.append(h)
        if self.values is not None:
            full = st.padded_extents(self.values)
            self.ext = [int(self.values[st.knob(d, 1)]) if d in st.mapped else e for d, e in enumerate(full)]
        if st.init is not None:
            fill = fill_h or self.match(st.init)
            fill_b, blk = self.fuse_into(fill, blk)
            self.emit("// the initialiser: one row per thread")
            fsizes = [n_thr[d] if d in st.mapped else "0" for d in st.output_dims]
            fmap = [f"#gpu.thread<{AXES[st.mapped.index(d)]}>" for d in st.output_dims if d in st.mapped]
            fill_t, fill_forall = self.tile_forall(fill_b, fsizes, fmap, num_threads=True)
            to_vectorize.append((fill_t, None))
            if st.consumer is not None:
                self.emit("// the block's accumulator tile (read by the fused consumer) lives in shared memory")
                acc_forall = fill_forall
        # R0 + shared memory
        red = list(st.reduce)
        cur = blk_op
        copies: list[str] = []
        copy_tiles: list[tuple[str, list[int] | None]] = []
        if red:
            self.emit("// R0: the shared-memory tile of the reduction")
            cur, _ = self.tile_for(cur, [self.value(st.knob(d, 1)) if d in red else "0" for d in range(nd)])
            if st.promoted:
                n_ops = len(st.input_dims) + 1
                zeros = self.zeros()
                flags = ", ".join("1" if i in st.promoted else "0" for i in range(n_ops))
                padded, pad, cb = self.fresh("padded"), self.fresh("pad"), self.fresh("cb")
                self.emit(f"// cache read: inputs {list(st.promoted)} into shared memory, copied by all threads")
                self.emit(f"{padded}, {pad}, {cb} = transform.structured.pad {cur} {{padding_values = [{zeros}], "
                          f"padding_dimensions = [{', '.join(str(d) for d in range(nd))}], nofold_flags = [{flags}], "
                          f'copy_back_op = "none"}} : ({ANY}) -> ({ANY}, {ANY}, {ANY})')
                cur = padded
                for i in st.promoted:
                    p = self.fresh("p")
                    self.emit(f"{p} = transform.get_producer_of_operand {padded}[{i}] : ({ANY}) -> {ANY}")
                    shape = self.input_tile(i)
                    if self.values is not None and total_threads is not None:
                        tile, _used = _copy_tiles([int(x) for x in shape], total_threads, st.elem_bytes)
                        ts = [str(t) for t in tile]
                        lin = [f"#gpu.thread<linear_dim_{len(tile) - 1 - a}>" for a in range(len(tile))]
                    else:
                        ts = ["{copy}"] * len(shape)
                        lin = [f"#gpu.thread<linear_dim_{len(shape) - 1 - a}>" for a in range(len(shape))]
                        tile = None
                    # every dim gets a size (a full-size tile still needs its mapping): drop unit trips
                    keep = [a for a in range(len(ts)) if tile is None or int(ts[a]) != int(shape[a])]
                    sizes = [ts[a] if a in keep else "0" for a in range(len(ts))]
                    lin = [f"#gpu.thread<linear_dim_{len(keep) - 1 - j}>" for j in range(len(keep))]
                    if keep:
                        tp, cf = self.tile_forall(p, sizes, lin)
                        ifs = self.fresh("if")
                        self.emit(f'{ifs} = transform.structured.match ops{{["scf.if"]}} in {cf} : ({ANY}) -> {ANY}')
                        self.emit(f"transform.scf.take_assumed_branch {ifs} take_else_branch : ({ANY}) -> ()")
                        copy_tiles.append((tp, [int(t) for t in tile] if tile is not None else None))
                        copies.append(cf)
        # S1 (virtual threads), S2 (threads)
        self.emit("// S1: virtual threads (a serial loop over strided chunks)")
        self.last_trips = []
        cur, loops = self.tile_for(cur, [self.value(st.knob(d, 2)) if d in st.mapped else "0" for d in range(nd)])
        self.unroll_later(loops)
        self.emit("// S2: threads")
        cur, thr = self.tile_forall(cur, self.space_sizes(3), thread_map)
        if fused_producers:
            self.emit("// each thread recomputes the producer elements its tile reads (a thread-private buffer)")
            fp = self.fresh("f")
            self.emit(f'{fp} = transform.structured.match ops{{["func.func"]}} in %root : ({ANY}) -> {ANY}')
            self.emit(f"transform.apply_patterns to {fp} {{")
            self.emit("  transform.apply_patterns.tensor.merge_consecutive_insert_extract_slice")
            self.emit(f"}} : {ANY}")
            for h in fused_producers:
                t, thr = self.fuse_into(h, thr)
                to_vectorize.append((t, None))
            self.emit(f"transform.apply_patterns to {fp} {{")
            self.emit("  transform.apply_patterns.tensor.fold_tensor_empty")
            self.emit(f"}} : {ANY}")
        if self.ext is not None:
            for d in st.mapped:
                self.ext[d] = min(self.ext[d], int(self.values[st.knob(d, 3)]))
        self.emit("// S3: loop inside the thread over register tiles; unmapped space loops step by one")
        self.last_trips = []
        cur, loops = self.tile_for(cur, [self.value(st.knob(d, 4)) if d in st.mapped else ("1" if st.kinds[d] == "S" else "0")
                                         for d in range(nd)])
        self.unroll_later(loops)
        r_loops: list[str] = []
        if red:
            self.emit("// R1, R2: the accumulator stays in registers across both")
            cur, loops = self.tile_for(cur, [self.value(st.knob(d, 2)) if d in red else "0" for d in range(nd)])
            r_loops += loops
            cur, loops = self.tile_for(cur, ["1" if d in red else "0" for d in range(nd)])
            r_loops += loops
            for tag, lp in enumerate(r_loops):
                c = self.fresh("cst")
                self.emit(f"{c} = transform.param.constant {tag} : i64 -> {PARAM}")
                self.emit(f'transform.annotate {lp} "ansor.r1" = {c} : {ANY}, {PARAM}')
        if st.decompose_rows:
            self.emit("// a windowed op with unit row tiles is a 1-D one: the vectorizer takes only those")
            dec = self.fresh("dec")
            self.emit(f"{dec} = {st.decompose_op} {cur} : ({ANY}) -> {ANY}")
            cur = dec
        to_vectorize.append((cur, None))
        if st.consumer is not None:
            self.emit("// the fused consumer: per thread, on the block's tile, in place")
            cons_t, _ = self.tile_forall(cblk, [n_thr[st.consumer_dims[c]] if st.consumer_dims[c] in st.mapped else "0"
                                                for c in range(len(st.consumer_dims))],
                                         [f"#gpu.thread<{AXES[st.mapped.index(st.consumer_dims[c])]}>"
                                          for c in range(len(st.consumer_dims)) if st.consumer_dims[c] in st.mapped],
                                         num_threads=True)
            row, _ = self.tile_for(cons_t, ["1"] * (len(st.consumer_dims) - 1) + ["0"], track=False)
            to_vectorize.append((row, None))
        self.emit("// vectorize: register tile (contraction -> outer-product FMAs), copies, initialiser")
        for h, sizes in to_vectorize:
            vs = f" vector_sizes [{', '.join(str(s) for s in sizes)}]" if sizes else ""
            if sizes is None and (h != cur or st.vectorize_optional):
                self.emit(f"transform.sequence {h} : {ANY} failures(suppress) {{")
                self.emit(f"^bb0(%v: {ANY}):")
                self.emit(f"  transform.structured.vectorize %v : {ANY}")
                self.emit("}")
            else:
                self.emit(f"transform.structured.vectorize {h}{vs} : {ANY}")
        f1 = self.fresh("f")
        self.emit(f'{f1} = transform.structured.match ops{{["func.func"]}} in %root : ({ANY}) -> {ANY}')
        self.emit(f"transform.apply_patterns to {f1} {{")
        self.emit("  transform.apply_patterns.vector.transfer_permutation_patterns")
        self.emit("  transform.apply_patterns.vector.reduction_to_contract")
        self.emit(f"}} : {ANY}")
        self.emit(f"transform.apply_patterns to {f1} {{")
        self.emit("  transform.apply_patterns.vector.lower_contraction lowering_strategy = outerproduct")
        self.emit("  transform.apply_patterns.vector.lower_outerproduct")
        self.emit("  transform.apply_patterns.canonicalization")
        self.emit(f"}} : {ANY}")
        if st.decompose_rows:
            # (hoisting around the decomposed convolution's rank-reducing slices makes bufferization
            # copy the accumulator into a buffer that the block's threads would share)
            self.emit("// decomposed convolution: the accumulator is not hoisted")
            r_loops = []
        for tag in reversed(range(len(r_loops))):  # innermost first; folded loops just match nothing
            h = self.fresh("h")
            self.emit(f'{h} = transform.structured.match ops{{["scf.for"]}} attributes{{ansor.r1 = {tag}}} in {f1}'
                      f" : ({ANY}) -> {ANY}")
            self.emit(f"transform.loop.hoist_loop_invariant_subsets {h} : {ANY}")
        self.emit("// the copies last: canonicalization would fold a tensor copy's read/write pair back into a copy")
        for h, sizes in copy_tiles:
            vs = f" vector_sizes [{', '.join(str(s) for s in sizes)}]" if sizes else ""
            self.emit(f"transform.structured.vectorize {h}{vs} : {ANY}")
        if st.consumer is not None and st.init is not None:
            copies.append(acc_forall)
        for cf in copies:
            b, n = self.fresh("smem"), self.fresh("new")
            self.emit(f"{b}, {n} = transform.structured.bufferize_to_allocation {cf} "
                      f"{{memory_space = 3, bufferize_destination_only, emit_dealloc}} : {ANY}")
            a = self.fresh("alloc")
            self.emit(f"{a} = transform.get_defining_op {b} : (!transform.any_value) -> {ANY}")
            self.emit(f'transform.annotate {a} "ansor.smem" : {ANY}')
        self.emit("// bufferize, then map to the GPU")
        self.emit(f"transform.bufferization.eliminate_empty_tensors {f1} : {ANY}")
        self.emit(f"transform.apply_dce to {f1} : {ANY}")
        self.emit(f"transform.apply_cse to {f1} : {ANY}")
        bufd = self.fresh("bufd")
        self.emit(f"{bufd} = transform.bufferization.one_shot_bufferize layout{{IdentityLayoutMap}} %root "
                  f"{{bufferize_function_boundaries = true}} : ({ANY}) -> {ANY}")
        f2 = self.fresh("f")
        self.emit(f'{f2} = transform.structured.match ops{{["func.func"]}} in {bufd} : ({ANY}) -> {ANY}')
        self.emit(f"transform.apply_patterns to {f2} {{")
        self.emit("  transform.apply_patterns.vector.lower_masked_transfers")
        self.emit("  transform.apply_patterns.canonicalization")
        self.emit(f"}} : {ANY}")
        self.emit(f"transform.apply_cse to {f2} : {ANY}")
        self.emit("// n-D broadcasts the NVVM lowering cannot take (alone: canonicalization folds them back)")
        self.emit(f"transform.apply_patterns to {f2} {{")
        self.emit("  transform.apply_patterns.vector.lower_broadcast")
        self.emit(f"}} : {ANY}")
        launch = self.fresh("launch")
        self.emit(f"{launch} = transform.gpu.map_forall_to_blocks {f2} generate_gpu_launch : ({ANY}) -> {ANY}")
        dims = ", ".join(str(x) for x in threads) if threads else "{threads_x}, {threads_y}, {threads_z}"
        mapped = self.fresh("launch")
        self.emit(f"{mapped} = transform.gpu.map_nested_forall_to_threads {launch} block_dims = [{dims}] : ({ANY}) -> {ANY}")
        if self.unrolls:
            self.emit("// S1 and S3 fully unrolled: the thread's whole tile of accumulators stays in registers")
            self.emit("// (like TVM's virtual threads and Ansor's local cache-write stage)")
        for tag, trip in self.unrolls:
            h = self.fresh("u")
            self.emit(f'{h} = transform.structured.match ops{{["scf.for"]}} attributes{{ansor.unroll_full = {tag} : i64}} '
                      f"in {mapped} : ({ANY}) -> {ANY}")
            self.emit(f"transform.loop.unroll {h} {{factor = {trip}}} : {ANY}")
        self.emit(f'transform.annotate {mapped} "ansor.auto_unroll_max_step" = %k_{st.unroll_knob.replace(".", "_")} '
                  f": {ANY}, {PARAM}")
        if st.pipelined and any(k.name == st.stages_knob for k in self.knobs):
            self.emit("// stages > 1: R0 tiles multi-buffered in shared memory, the next ones copied (cp.async) while")
            self.emit("// this one is computed on (ansor-gpu-pipeline-shared-copies)")
            self.emit(f'transform.annotate {mapped} "ansor.pipeline_stages" = %k_{st.stages_knob.replace(".", "_")} '
                      f": {ANY}, {PARAM}")
        self.emit("transform.yield")
        return "\n".join(head + self.lines + ["  }", "}"]) + "\n"

    def reshape_consumer(self) -> None:
        """The script's first step for a stage with `reshaped_consumer` (see `RESHAPED_CONSUMER_PASSES`)."""
        st = self.st
        assert st.consumer is not None
        self.emit("// the consumer reads the anchor through a reshape: expand it through the reshape, re-tag it")
        f = self.fresh("f")
        self.emit(f'{f} = transform.structured.match ops{{["func.func"]}} in %root : ({ANY}) -> {ANY}')
        f1 = self.fresh("f")
        self.emit(f'{f1} = transform.apply_registered_pass "linalg-fold-unit-extent-dims" with options = '
                  f'{{"use-rank-reducing-slices" = false}} to {f} : ({ANY}) -> {ANY}')
        self.emit(f"transform.apply_patterns to {f1} {{")
        self.emit("  transform.apply_patterns.canonicalization")
        self.emit(f"}} : {ANY}")
        f2 = self.fresh("f")
        self.emit(f'{f2} = transform.apply_registered_pass "linalg-fuse-elementwise-ops" to {f1} : ({ANY}) -> {ANY}')
        self.emit(f"transform.apply_patterns to {f2} {{")
        self.emit("  transform.apply_patterns.canonicalization")
        self.emit(f"}} : {ANY}")
        self.emit(f"transform.apply_cse to {f2} : {ANY}")
        # (the CSE merged the fill's tensor.empty with the consumer's again: the block's
        # accumulator tile would start as a copy of the output tile, which every thread ran)
        f3 = self.fresh("f")
        self.emit(f'{f3} = transform.apply_registered_pass "ansor-gpu-own-fill-destinations" to {f2} : ({ANY}) -> {ANY}')
        g, c = self.fresh("g"), self.fresh("cst")
        self.emit(f'{g} = transform.structured.match ops{{["linalg.generic"]}} in {f3} : ({ANY}) -> {ANY}')
        self.emit(f"{c} = transform.param.constant {st.consumer} : i64 -> {PARAM}")
        self.emit(f'transform.annotate {g} "{OP_ATTR}" = {c} : {ANY}, {PARAM}')

    def zeros(self) -> str:
        """Padding values of the op's operands: a zero of each one's element type (`pad_tiling_interface`
        refuses a value of another type, so the stage must carry them: `_operand_types`)."""
        st = self.st
        n_ops = len(st.input_dims) + 1
        if len(st.operand_types) != n_ops:
            raise AssertionError(f"stage of {st.op_name} has {len(st.operand_types)} operand types for {n_ops} operands")
        return ", ".join(f"0.0 : {t}" if t.startswith(("f", "bf")) else f"0 : {t}" for t in st.operand_types)

    def pad_ragged(self, op: str, ragged: tuple[int, ...]) -> tuple[str, str | None]:
        """Pad `op`'s iteration domain to a multiple of its block tile on the `ragged` dims (tiles
        then nest exactly; a convolution's input rows follow its output rows).
        The padded inputs become guarded reads and the padded result masked writes
        (`ansor-gpu-guard-padded-reads`); canonicalization turns the padded fill into a fill of
        the padded result. A fused consumer is padded alike and reads the padded result
        (`ansor-gpu-fold-ragged-pads`). Returns the padded op and its fill (None without one)."""
        st = self.st
        assert self.values is not None
        sizes = [self.value(st.knob(d, 1)) if d in ragged else "0" for d in range(len(st.kinds))]
        self.emit(f"// ragged tiles: loops {list(ragged)} padded to a multiple of the block tile")
        # (the iteration domain is padded: a convolution's input rows follow its output rows)
        padded, pad = self.fresh("padded"), self.fresh("pad")
        self.emit(f"{padded}, {pad} = transform.structured.pad_tiling_interface {op} to padding_sizes "
                  f"[{', '.join(sizes)}] pad_to_multiple_of {{padding_values = [{self.zeros()}]}} "
                  f": ({ANY}) -> ({ANY}, {ANY})")
        f = self.fresh("f")
        self.emit(f'{f} = transform.structured.match ops{{["func.func"]}} in %root : ({ANY}) -> {ANY}')
        if st.consumer is not None:
            # the consumer too; it then reads its padded slice of the padded result, which
            # ansor-gpu-fold-ragged-pads replaces by the padded result itself
            csizes = [sizes[d] for d in st.consumer_dims]
            cpadded, cpad = self.fresh("padded"), self.fresh("pad")
            self.emit(f"{cpadded}, {cpad} = transform.structured.pad_tiling_interface {self.match(st.consumer)} to "
                      f"padding_sizes [{', '.join(csizes)}] pad_to_multiple_of : ({ANY}) -> ({ANY}, {ANY})")
            self.emit(f'transform.annotate {cpad} "ansor.ragged" : {ANY}')
            f2 = self.fresh("f")
            self.emit(f'{f2} = transform.apply_registered_pass "ansor-gpu-fold-ragged-pads" to {f} : ({ANY}) -> {ANY}')
            f = f2
            padded = self.match(st.op)  # (the pass invalidated the handles inside the function)
        self.emit(f"transform.apply_patterns to {f} {{")
        self.emit("  transform.apply_patterns.canonicalization")
        self.emit(f"}} : {ANY}")
        if st.init is None:
            return padded, None
        fill = self.fresh("fill")
        self.emit(f"{fill} = transform.get_producer_of_operand {padded}[{len(st.input_dims)}] : ({ANY}) -> {ANY}")
        return padded, fill

    def unroll_later(self, loops: list[str]) -> None:
        """Tag `loops` (just made by `tile_for`) for full unrolling after the mapping to threads."""
        if self.values is None:
            return
        for lp, trip in zip(loops, self.last_trips, strict=True):
            if trip <= 1:
                continue
            tag = len(self.unrolls)
            c = self.fresh("cst")
            self.emit(f"{c} = transform.param.constant {tag} : i64 -> {PARAM}")
            self.emit(f'transform.annotate {lp} "ansor.unroll_full" = {c} : {ANY}, {PARAM}')
            self.unrolls.append((tag, trip))

    def input_tile(self, i: int) -> list[str]:
        """The shared-memory tile of cached input i (`input_tile_shape`; holes without values)."""
        st = self.st
        forms = st.windows[i] if st.windows else None
        if forms is None:
            return [self.tile_extent(d) for d in st.input_dims[i]]
        if self.values is None:
            return ["{window}"] * len(forms)
        return [str(x) for x in input_tile_shape(st, self.values, i)]

    def tile_extent(self, d: int) -> str:
        if self.st.kinds[d] == "R":
            return self.value(self.st.knob(d, 1))
        if d in self.st.mapped:
            return self.value(self.st.knob(d, 1))
        return str(self.st.extents[d])

"""Tensor-core GEMM sketch for sm_90 (H100/H200): warpgroup MMA (`wgmma`) fed by TMA through an
mbarrier ring of shared-memory stages.

    task: C = epilogue(A @ B, extras...): a `linalg.matmul` or `linalg.batch_matmul` of two
        function arguments in f16/bf16 (f32 on a TF32 task) on a zero fill (f32 sums), optionally
        followed by element-wise consumers (fused into one generic: bias, activation, rounding to
        f16/bf16)
    tc_problem_for(task) --> TcProblem (shapes, argument roles, the epilogue as a function) or why not;
        attention scores + row softmax (the TBS subgraph, f16/bf16) are a TcProblem too, with
        `attention` set: their knobs (`bm`, `bn`, `stages`), rules and kernel are those of
        `scores_softmax.py`, which `validate_tc`, `kernel_text` and `TcSketch.script` hand them to
    TcSketch.script(values) --> a transform script that annotates the function with its knobs
        (`ansor.tc.bm`, `.bn`, `.wgm`, `.stages`, `.wait`, `.group`, `.ws`, `.persist`, `.splitk`,
        and `.tw` for a convolution:
        replayable, stored in the records) and tiles the matmul as the kernel does (what the cost
        model's loop features see)
    lowering: annotated function --kernel_text--> nvgpu IR (TMA descriptors, `nvgpu.tma.async.load`,
        `nvgpu.mbarrier.*`, `nvgpu.warpgroup.mma`, the store) --> NVVM --> PTX; `kernel_text` reads
        top-down through the parts `_Kernel` emits (block start, operand loads, the pipelined k-loop,
        the accumulator store and epilogue, the split-K reduction, the host function)

Why a template and not a chain of transform ops: no upstream transform op produces
`nvgpu.warpgroup.mma` in MLIR 22 (the nvgpu transform ops are `rewrite_matmul_as_mma_sync`,
`create_async_groups`, `pipeline_shared_memory_copies`, `rewrite_copy_as_tma`), and the mma.sync
path they do support reached 37% of cuBLAS on an H200 (`../shared/probes/tensorcore/README.md`).
The kernel's structure is fixed; its holes are the block tile (`bm` x `bn`), the consumer
warpgroups along M (`wgm`: each owns `bm/wgm` rows x `bn` columns), the pipeline depth
(`stages`, >= 2), how many warpgroup MMAs stay in flight (`wait`: 0 waits for every k-block's
MMA before refilling its stage; 1 keeps one in flight and refills the stage of the previous one)
the block raster (`group`: 1 = row-major; G = G block rows swept column by column, for L2),
warp specialization (`ws`: 0 = thread 0 of the first consumer issues the TMA loads after a
block-wide barrier per k-block; 1 = an extra producer warpgroup streams the k-blocks and the
consumers release each stage through an `empty` mbarrier, no block-wide barrier in the loop) and
persistence (`persist`: min(tiles, SMs) blocks loop over their tiles, the producer running ahead)
and split-K clusters (`splitk` 1, 2, 3, 4 or 8, the largest portable cluster): a cluster of that
many blocks along z shares one tile, each summing an equal share of the k-blocks; after a cluster
barrier every thread of the cluster sums the partial tiles of all its blocks through distributed
shared memory (`mapa`, `ld.shared::cluster`) and stores its share of the tile: more blocks for
small grids, and no second kernel. The stages and the staged tile live in the dynamic shared
buffer of `KernelText.dynamic_shared`, clear of the static mbarriers.

A convolution (`linalg.conv_2d_nhwc_hwcf`, f16/bf16, C a multiple of 64) runs as an implicit GEMM
(a stride s reads X as [N*H/s, s, W/s, s, C], a tap picking coarse shift and phase): a block's rows are a th x tw patch of output pixels (`tw` knob, th = bm // tw capped
at the image height), each k-block is one filter tap x 64 input channels, loaded as a 4-D TMA box
of X shifted by the tap (TMA's zero fill past the image's edges is the padding); W is read as the
[KH*KW*C, CO] matrix it already is.

The K step is 64 elements (one 128-byte swizzled row of f16/bf16), the TMA boxes are `bm` x 64
for A and 64 x 64 chunks for B, zero-filled past the tensors' edges; the accumulators live in
registers (at most 128 f32 per thread). They are stored straight to global memory
(`nvgpu.warpgroup.mma.store`) when C is the f32 matmul and the tile divides it; otherwise through
a padded f32 tile in shared memory, from which every consumer thread applies the epilogue and
stores (guarded) row-contiguous elements. A batch matmul runs as one tall A, B and C with
blockIdx.z picking the batch.

TF32 (f32 A and B of a task created with `tf32=True`, `--tf32`; never otherwise): the wgmma is
m64nNk8 on tf32 operands, a stage's K step is 32 f32 (one 128-byte swizzled row), and the tf32
wgmma reads both operands K-major only (no transpose bit), while B is N-major in memory and TMA
copies it as it is. So the producer warpgroup is required: its thread 0 loads A's box (swizzled,
K-major already) and B's unswizzled 32 x 64 chunks, and its 128 threads write each k-block's B
K-major and swizzled into the stage (`transpose_b`) before releasing it to the consumers through
a third mbarrier per stage (`ready`). Upstream `nvgpu.warpgroup.mma` (MLIR 22) steps a K-major B
descriptor by whole rows between its k8 steps and a tf32 A descriptor wrongly past 64 rows, so a
consumer warpgroup owns 64 rows and issues one op per k8 step on descriptors it offsets itself
(`tf32_mmas`); the views behind those descriptors are f32 (memrefs of tf32 have no LLVM type).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping
from dataclasses import dataclass

from ansor.space.schedule import SamplingError, Schedule, rejection_sample
from ansor.space.script import ANY, PARAM, ScriptBuilder, ssa
from ansor.space.sketch import Knob, Sketch
from ansor.targets.cuda.kernel_text import DYNAMIC_SHARED_SLACK, KernelText
from ansor.targets.cuda.scores_softmax import KNOBS as ATTENTION_KNOBS
from ansor.targets.cuda.scores_softmax import ScoresSoftmax

#: Element types of A and B the wgmma sketch takes (f32 accumulation and output); f32 too on a
#: TF32 task (`SearchTask.tf32`), whose kernel feeds them to the wgmma as tf32.
TC_INPUT_TYPES = ("f16", "bf16")
#: K elements per stage (128 bytes of f16/bf16: the 128-byte swizzle's row).
BK = 64
#: K elements per stage of a TF32 kernel (128 bytes of f32) and of one tf32 wgmma (m64nNk8).
BK_TF32 = 32
TF32_MMA_K = 8
#: Rows of a TF32 kernel's warpgroup tile: upstream `nvgpu.warpgroup.mma` (MLIR 22) steps its A
#: descriptor by K*K elements per 64 rows (`iterateDescriptorA`), right for 64 f16 columns only.
TF32_WG_ROWS = 64
#: Shared memory a kernel's buffer may use (bytes): of the 227 KB a block may opt in to on sm_90,
#: less the slack its buffer starts within (`KernelText.dynamic_shared`) and 256 bytes for the
#: static mbarriers.
MAX_DYNAMIC_SHARED = 227 * 1024 - DYNAMIC_SHARED_SLACK - 256
#: f32 accumulators per thread (wgmma keeps them in registers; 255 registers per thread at most).
MAX_ACC_PER_THREAD = 128
#: Registers of one block (sm_90) and a thread's registers besides its accumulators (addresses,
#: loop state, descriptors; measured ~40 in the PTX of these kernels): 4 warpgroups of 128
#: accumulators each cannot launch (every such kernel left its output untouched on an H200).
REGISTERS_PER_SM = 65536
REGS_BESIDES_ACC = 40
#: The attribute prefix the sketch's script puts on the matmul.
ATTR = "ansor.tc"
KNOBS = ("bm", "bn", "wgm", "stages", "wait", "group", "ws", "persist", "splitk")
OPTIONS: dict[str, tuple[int, ...]] = {
    "bm": (64, 128, 256),
    "bn": (64, 128, 256),
    "wgm": (1, 2, 4),
    "stages": (2, 3, 4, 5, 6),
    "wait": (0, 1),
    "group": (1, 4, 8, 16),
    "ws": (0, 1),
    "persist": (0, 1),
    # (up to 8, the largest portable cluster; clusters of 8 and TF32's of 4 once left NaN in tile
    # row 0: the dynamic shared buffer lay over the mbarriers, `KernelText.dynamic_shared`)
    "splitk": (1, 2, 3, 4, 8),
}
#: The untuned tensor-core program (the shape the probe measured first).
DEFAULT = {"bm": 128, "bn": 128, "wgm": 1, "stages": 3, "wait": 0, "group": 1, "ws": 0, "persist": 0, "splitk": 1}
#: Knobs added after records were first written, with the value those records meant.
LATER_KNOBS = {"persist": 0, "splitk": 1}


def complete(v: Mapping[str, int]) -> dict[str, int]:
    """The annotation `v` (knob names without the `tc.` prefix) with the knobs added after it was
    recorded set to what it meant."""
    return {**LATER_KNOBS, **v}
#: SMs of the card a persistent kernel is sized for when no GPU is present (H100/H200 SXM).
DEFAULT_SM_COUNT = 132


#: The default `linalg.matmul` indexing maps (A[m,k], B[k,n], C[m,n]); transposed variants are refused.
_MATMUL_MAPS = ("[affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, "
                "affine_map<(d0, d1, d2) -> (d0, d1)>]")
#: The same for `linalg.batch_matmul` (A[b,m,k], B[b,k,n], C[b,m,n]).
_BATCH_MATMUL_MAPS = ("[affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, "
                      "affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]")
#: The contractions the sketch takes, by op name: (default indexing maps, batched).
_CONTRACTIONS = {"linalg.matmul": (_MATMUL_MAPS, False), "linalg.batch_matmul": (_BATCH_MATMUL_MAPS, True)}
#: The convolution the sketch runs as an implicit GEMM.
_CONV = "linalg.conv_2d_nhwc_hwcf"
#: The name of the generated element-wise epilogue function (inlined into the kernel).
EPILOGUE = "__ansor_epilogue"
#: TMA: a global row stride must be a multiple of 16 bytes (8 elements of f16/bf16).
TMA_STRIDE_ELEMS = 8


@dataclass(frozen=True)
class EpilogueInput:
    """An extra input of the fused epilogue: function argument `arg`, element type `dtype`, whose
    dimension i is indexed by the output's row (0) or column (1) index `dims[i]`."""

    arg: int
    dtype: str
    shape: tuple[int, ...]
    dims: tuple[int, ...]


@dataclass(frozen=True)
class ConvGeom:
    """An NHWC convolution run as an implicit GEMM: X[n, h, w, c] (the function argument, padding
    left to TMA's zero fill past the edges), W[kh, kw, c, co], stride 1, output [n, oh, ow, co]:
    GEMM rows are output pixels, columns output channels, the k-blocks walk (r, s, 64 channels)."""

    n: int
    h: int
    w: int
    c: int
    kh: int
    kw: int
    oh: int
    ow: int
    pad_h: int
    pad_w: int
    dil_h: int = 1
    dil_w: int = 1
    stride: int = 1

    def shift(self, tap: int, dil: int, pad: int) -> tuple[int, int]:
        """Input row (or column) of output 0 at filter tap `tap`, as (q, p) with stride*q + p the
        row: a strided X is read as [.., H/stride, stride, W/stride, stride, C], so a tap moves
        the box by q pixels of the coarse grid and picks phase p (0 <= p < stride)."""
        off = tap * dil - pad
        return off // self.stride, off % self.stride

    def tile(self, bm: int, tw: int) -> tuple[int, int]:
        """(th, tw): a block's output pixels, th rows of tw; th * tw <= bm rows of the MMA tile."""
        return max(1, min(bm // tw, self.oh)), tw


@dataclass(frozen=True)
class TcProblem:
    """What the kernel computes: C[m, n] = epilogue(sum_k A[m, k] * B[k, n], extras...) with A and B
    function arguments `a_arg`, `b_arg` in `et`; the sum runs in f32 and is rounded to `acc` (the
    matmul's result type) before the epilogue; C is the function's result, in `out`. `epilogue`:
    the text of a private function `@__ansor_epilogue(acc, extras...) -> out` (the task's fused
    element-wise consumer), "" when the result is the matmul's."""

    m: int
    n: int
    k: int
    et: str
    a_arg: int = 0
    b_arg: int = 1
    n_args: int = 2
    acc: str = "f32"
    out: str = "f32"
    extras: tuple[EpilogueInput, ...] = ()
    epilogue: str = ""
    batch: int = 0  # a linalg.batch_matmul's batch extent (0: a plain matmul)
    conv: ConvGeom | None = None  # an implicit-GEMM convolution (m = pixels, n = CO, k = KH*KW*C)
    tf32: bool = False  # f32 A and B on TF32 tensor cores (the task's opt-in, `SearchTask.tf32`)
    # attention scores + row softmax (`scores_softmax.py`): m = n = the sequence, k = the head dim
    attention: ScoresSoftmax | None = None

    @property
    def bk(self) -> int:
        """K elements per stage: one 128-byte swizzled row of A's type."""
        return BK_TF32 if self.tf32 else BK

    def knob(self, name: str) -> str:
        return f"tc.{name}"

    @property
    def knobs(self) -> tuple[str, ...]:
        """The knobs of this problem's sketch: a convolution adds its tile width `tw`; attention
        scores + softmax have their own (`scores_softmax.KNOBS`)."""
        if self.attention:
            return ATTENTION_KNOBS
        return KNOBS + ("tw",) if self.conv else KNOBS

    @property
    def later_knobs(self) -> dict[str, int]:
        """Knobs added after records of this problem's sketch were first written (`LATER_KNOBS`;
        none for attention, whose sketch came after them)."""
        return {} if self.attention else LATER_KNOBS

    def options(self, name: str) -> tuple[int, ...]:
        if self.attention:
            from ansor.targets.cuda import scores_softmax as ss

            return {"bm": ss.BM_OPTIONS, "bn": ss.bn_options(self.attention.seq), "stages": ss.STAGE_OPTIONS}[name]
        if name == "tw":
            ow = self.conv.ow
            return tuple(sorted({t for t in (4, 8, 16, 32, 64) if t < ow} | {min(ow, 256)}))
        return OPTIONS[name]

    @property
    def kt(self) -> int:
        """k-blocks of the main loop."""
        if self.conv:
            return self.conv.kh * self.conv.kw * _ceil(self.conv.c, BK)
        return _ceil(self.k, self.bk)

    @property
    def fused(self) -> bool:
        """Something runs between the accumulators and the store (a consumer or a rounding)."""
        return bool(self.epilogue) or self.acc != "f32"

    def staged(self, bm: int, bn: int) -> bool:
        """The accumulators go through shared memory to a guarded, element-wise store: a fused
        epilogue, a block tile that overhangs the result, or a convolution (its tile is a patch
        of pixels). Otherwise `nvgpu.warpgroup.mma.store` writes them straight to global memory."""
        return self.fused or self.conv is not None or bool(self.m % bm or self.n % bn)


def tc_problem_for(task) -> tuple[TcProblem | None, str]:
    """The GEMM of `task` when the wgmma sketch applies (else None and why not); f32 operands
    only on a TF32 task (`task.tf32`). Attention scores + row softmax (the TBS subgraph, f16/bf16)
    are a problem too (`TcProblem.attention`, the kernel of `scores_softmax.py`)."""
    return _analyze(task.ir, bool(getattr(task, "tf32", False)))


@functools.lru_cache(maxsize=256)
def _analyze(text: str, tf32: bool = False) -> tuple[TcProblem | None, str]:
    from mlir import ir

    from ansor.core.mlir import run_passes

    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        funcs = [op for op in module.body.operations if op.operation.name == "func.func"]
        if len(funcs) != 1:
            return None, "not a single function"
        # A chain of element-wise consumers (bias add, activation, rounding) becomes one generic.
        try:
            run_passes(module, "func.func(linalg-fuse-elementwise-ops,canonicalize,cse)", "apply")
            problem, why = _match(funcs[0].operation, tf32=True) if tf32 else _match(funcs[0].operation)
        except (ValueError, TypeError, KeyError, IndexError, RuntimeError) as exc:
            # IR this matcher did not foresee: no tensor-core sketch, never a failed tuning run
            return None, f"not analysable as a GEMM ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
    if problem is not None or tf32:
        return problem, why
    return _attention_problem(text, why)


def _attention_problem(text: str, why_not_gemm: str) -> tuple[TcProblem | None, str]:
    """Attention scores + row softmax (`scores_softmax.match_scores_softmax`) as a problem; when
    the function is no contraction + softmax at all, None and why it is no GEMM either."""
    from ansor.targets.cuda.scores_softmax import match_scores_softmax

    att, et, out, why = match_scores_softmax(text)
    if att is None:
        return None, why or why_not_gemm
    return TcProblem(att.seq, att.seq, att.dim, et, a_arg=att.q_arg, b_arg=att.k_arg, n_args=2, out=out,
                     attention=att), "wgmma attention scores + row softmax"


def _match(func, tf32: bool = False) -> tuple[TcProblem | None, str]:
    from mlir import ir

    ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    if len(ftype.results) != 1:
        return None, "not a one-result function"
    body = list(func.regions[0].blocks[0].operations)
    names = [op.name for op in body]
    if _CONV in names:
        return _match_conv(func, ftype, body, names)
    found = [n for n in names if n in _CONTRACTIONS]
    if len(found) != 1:
        return None, f"body is {', '.join(dict.fromkeys(names))}: not one linalg.matmul or linalg.batch_matmul"
    extra = set(names) - {"arith.constant", "tensor.empty", "linalg.fill", found[0], "linalg.generic",
                          "func.return"}
    if extra or names.count("linalg.generic") > 1:
        return None, f"body is {', '.join(dict.fromkeys(names))}: not a matmul with one element-wise consumer"
    mm = body[names.index(found[0])]
    maps, batched = _CONTRACTIONS[found[0]]
    if str(mm.attributes["indexing_maps"]) != maps:
        return None, f"a transposed {found[0]}"
    a, b, init = mm.operands
    args, et, why = _half_operands("matmul", a, b, init, tf32=tf32)
    if args is None:
        return None, why
    at, bt, ct = (ir.RankedTensorType(v.type) for v in (a, b, mm.results[0]))
    acc = str(ct.element_type)
    if acc not in ("f32", et):
        return None, f"the matmul accumulates in {acc}"
    batch = 0
    if batched:
        (batch, m, k), (b2, k2, n) = at.shape, bt.shape
        if b2 != batch or list(ct.shape) != [batch, m, n]:
            return None, f"shapes {at.shape} x {bt.shape} -> {ct.shape} are not a batch matmul"
        bk = BK_TF32 if et == "f32" else BK
        if k % bk:
            # The kernel views the batches as one tall A (b*m rows) and one tall B (b*k rows): a
            # k-block must not run into the next batch's rows.
            return None, f"a batch matmul needs K a multiple of {bk} (K = {k})"
    else:
        (m, k), (k2, n) = at.shape, bt.shape
    if k2 != k or list(ct.shape)[-2:] != [m, n]:
        return None, f"shapes {at.shape} x {bt.shape} -> {ct.shape} are not a matmul"
    if k % TMA_STRIDE_ELEMS or n % TMA_STRIDE_ELEMS:
        return None, (f"{m}x{n}x{k}: K and N must be multiples of {TMA_STRIDE_ELEMS} "
                      "(TMA needs 16-byte row strides)")
    ret = body[-1]
    problem = TcProblem(m, n, k, et, a_arg=args[0], b_arg=args[1], n_args=len(ftype.inputs), acc=acc, out=acc,
                        batch=batch, tf32=et == "f32")
    if "linalg.generic" not in names:
        if ret.operands[0] != mm.results[0]:
            return None, "the function does not return the matmul"
        return problem, "wgmma GEMM"
    gen = body[names.index("linalg.generic")]
    if ret.operands[0] != gen.results[0] or len(gen.results) != 1:
        return None, "the function does not return the matmul's element-wise consumer"
    if len(list(mm.results[0].uses)) != 1:
        return None, "the matmul's result is used twice"
    return _epilogue(problem, gen, mm.results[0])


def _match_conv(func, ftype, body, names) -> tuple[TcProblem | None, str]:
    """An NHWC convolution (stride 1, zero padding, f16/bf16 operands, f32 sums) with an optional
    element-wise consumer, as an implicit GEMM."""
    from mlir import ir

    extra = set(names) - {"arith.constant", "tensor.empty", "tensor.pad", "linalg.fill", _CONV, "linalg.generic",
                          "func.return"}
    if extra or names.count(_CONV) > 1 or names.count("linalg.generic") > 1 or names.count("tensor.pad") > 1:
        return None, f"body is {', '.join(dict.fromkeys(names))}: not a convolution with one element-wise consumer"
    conv = body[names.index(_CONV)]
    strides = [int(x) for x in ir.DenseIntElementsAttr(conv.attributes["strides"])]
    dil = [int(x) for x in ir.DenseIntElementsAttr(conv.attributes["dilations"])]
    if strides[0] != strides[1]:
        return None, f"a convolution with strides {strides} (the implicit GEMM takes equal strides)"
    x, w, init = conv.operands
    pad_h = pad_w = 0
    pad = _defining_op(x)
    if pad is not None and pad.name == "tensor.pad":
        lo = list(ir.DenseI64ArrayAttr(pad.attributes["static_low"]))
        hi = list(ir.DenseI64ArrayAttr(pad.attributes["static_high"]))
        yielded = list(pad.regions[0].blocks[0].operations)[-1].operands[0]
        if lo[0] or lo[3] or hi[0] or hi[3] or not _is_zero(yielded):
            return None, "the convolution's input is padded other than with zeros around its pixels"
        pad_h, pad_w = lo[1], lo[2]
        x = pad.operands[0]
    args, et, why = _half_operands("convolution", x, w, init)
    if args is None:
        return None, why
    xt, wt, ct = (ir.RankedTensorType(v.type) for v in (x, w, conv.results[0]))
    if str(ct.element_type) != "f32":
        return None, f"the convolution accumulates in {ct.element_type}"
    (n, h, wd, c), (kh, kw, c2, co), (n2, oh, ow, co2) = xt.shape, wt.shape, ct.shape
    if c2 != c or n2 != n or co2 != co:
        return None, f"shapes {xt.shape} x {wt.shape} -> {ct.shape} are not an NHWC convolution"
    if c % BK:
        return None, f"{c} input channels: the implicit GEMM needs a multiple of {BK}"
    if co % TMA_STRIDE_ELEMS:
        return None, f"{co} output channels: TMA needs a multiple of {TMA_STRIDE_ELEMS}"
    st = strides[0]
    if st > 1:
        # TMA steps one element: a strided X is viewed as [N*H/s, s, W/s, s, C] (5 dims, TMA's
        # most), the tap choosing the phase. Images share the coarse rows, so a padded one must be
        # alone (otherwise a box at an image's top edge would read the previous image's last rows).
        if h % st or wd % st:
            return None, f"a stride-{st} convolution needs H and W multiples of {st} (got {h}x{wd})"
        if n > 1 and (pad_h or pad_w):
            return None, f"a padded stride-{st} convolution of a batch of {n} images (TMA takes 5 dims)"
    geom = ConvGeom(n, h, wd, c, kh, kw, oh, ow, pad_h, pad_w, dil[0], dil[1], st)
    problem = TcProblem(n * oh * ow, co, kh * kw * c, et, a_arg=args[0], b_arg=args[1], n_args=len(ftype.inputs),
                        conv=geom)
    ret = body[-1]
    if "linalg.generic" not in names:
        if ret.operands[0] != conv.results[0]:
            return None, "the function does not return the convolution"
        return problem, "wgmma implicit-GEMM convolution"
    gen = body[names.index("linalg.generic")]
    if ret.operands[0] != gen.results[0] or len(gen.results) != 1:
        return None, "the function does not return the convolution's element-wise consumer"
    if len(list(conv.results[0].uses)) != 1:
        return None, "the convolution's result is used twice"
    problem, why = _epilogue(problem, gen, conv.results[0])
    return problem, why.replace("GEMM", "implicit-GEMM convolution")


def _half_operands(what: str, a, b, init, *, tf32: bool = False) -> tuple[list[int] | None, str, str]:
    """(argument numbers of `a` and `b`, their element type, "") when both are f16/bf16 (with
    `tf32`, or f32) function arguments of one type and `init` is a zero fill; else (None, "",
    why not)."""
    from mlir import ir

    args = []
    for v in (a, b):
        if not isinstance(v.owner, ir.Block):
            return None, "", f"the {what}'s operands are not function arguments"
        args.append(ir.BlockArgument(v).arg_number)
    at, bt = (ir.RankedTensorType(v.type).element_type for v in (a, b))
    if str(at) not in TC_INPUT_TYPES + (("f32",) if tf32 else ()) or str(bt) != str(at):
        hint = " (f32 takes the tensor cores as TF32 with --tf32)" if str(at) == str(bt) == "f32" else ""
        return None, "", f"inputs are {at}/{bt}, not f16 or bf16{hint}"
    fill = _defining_op(init)
    if fill is None or fill.name != "linalg.fill" or not _is_zero(fill.operands[0]):
        return None, "", f"the {what}'s init is not a zero fill"
    return args, str(at), ""


def _defining_op(v):
    """The op that defines `v` (an `ir.Operation`), None for a block argument."""
    from mlir import ir

    owner = v.owner
    return None if isinstance(owner, ir.Block) else owner.operation


def _is_zero(v) -> bool:
    from mlir import ir

    op = _defining_op(v)
    if op is None or op.name != "arith.constant":
        return False
    try:
        return ir.FloatAttr(op.attributes["value"]).value == 0.0
    except ValueError:
        return False


def _epilogue(problem: TcProblem, gen, acc_value) -> tuple[TcProblem | None, str]:
    """`problem` with `gen` (an element-wise generic reading the matmul's result) as its epilogue."""
    import dataclasses

    from mlir import ir
    from mlir.dialects import func as func_d

    iters = [str(x) for x in ir.ArrayAttr(gen.attributes["iterator_types"])]
    maps = [ir.AffineMapAttr(x).value for x in ir.ArrayAttr(gen.attributes["indexing_maps"])]
    n_in = len(gen.operands) - 1
    shape = list(ir.RankedTensorType(acc_value.type).shape)
    rank = len(shape)
    if len(iters) != rank or any("parallel" not in it for it in iters):
        return None, f"the matmul's consumer is not a {rank}-D element-wise op"
    out_t = ir.RankedTensorType(gen.results[0].type)
    dims = ", ".join(f"d{i}" for i in range(rank))
    ident = f"({dims}) -> ({dims})"
    if str(maps[-1]) != ident or list(out_t.shape) != shape:
        return None, "the consumer's result is not indexed like the matmul's"
    block = gen.regions[0].blocks[0]
    if len(list(block.arguments[n_in].uses)):
        return None, "the consumer reads its output"
    extras, types = [], [problem.acc]
    seen_acc = False
    for i, v in enumerate(list(gen.operands)[:n_in]):
        if v == acc_value:
            if seen_acc or str(maps[i]) != ident:
                return None, "the consumer reads the matmul's result other than element-wise"
            seen_acc = True
            continue
        if not isinstance(v.owner, ir.Block):
            return None, "the consumer's other inputs are not function arguments"
        dims = []
        for r in maps[i].results:
            d = r.maybe_downcast()
            if not isinstance(d, ir.AffineDimExpr):
                return None, f"the consumer reads an input through {maps[i]}"
            dims.append(d.position)
        t = ir.RankedTensorType(v.type)
        extras.append(EpilogueInput(ir.BlockArgument(v).arg_number, str(t.element_type), tuple(t.shape), tuple(dims)))
        types.append(str(t.element_type))
    if not seen_acc:
        return None, "the consumer does not read the matmul"
    if any(op.name == "linalg.index" for op in block.operations):
        return None, "the consumer reads its iteration indices"
    # The epilogue function: the consumer's body moved into a private func (acc first, extras next).
    mlir_types = [ir.Type.parse(t) for t in types]
    module = gen.parent
    while module.name != "builtin.module":
        module = module.parent
    with ir.InsertionPoint(module.regions[0].blocks[0]):
        fn = func_d.FuncOp(EPILOGUE, ir.FunctionType.get(mlir_types, [out_t.element_type]), visibility="private")
    entry = fn.add_entry_block()
    yield_op = list(block.operations)[-1]
    with ir.InsertionPoint(entry):
        ret = func_d.ReturnOp(list(yield_op.operands))
    order = [list(gen.operands)[:n_in].index(acc_value)] + [i for i in range(n_in)
                                                             if list(gen.operands)[i] != acc_value]
    yield_op.erase()
    for op in list(block.operations):
        op.move_before(ret)
    for j, i in enumerate(order):
        block.arguments[i].replace_all_uses_with(entry.arguments[j])
    clones: dict = {}
    for op in list(entry.operations):
        for idx, v in enumerate(list(op.operands)):
            owner = _defining_op(v)
            if owner is not None and owner.parent != fn.operation:
                if owner.name != "arith.constant":
                    return None, f"the consumer uses a value computed outside it ({owner.name})"
                if owner not in clones:
                    clones[owner] = owner.clone(ir.InsertionPoint.at_block_begin(entry))
                op.operands[idx] = clones[owner].results[0]
            elif owner is None and v.owner != entry:
                return None, "the consumer captures a function argument"
    # (`fn` is not erased: erasing a parent leaves the Python objects of the ops moved into it
    # dangling; the scratch module goes away whole with its context)
    text = str(fn)
    return dataclasses.replace(problem, out=str(out_t.element_type), extras=tuple(extras), epilogue=text), \
        "wgmma GEMM + fused epilogue"


def _may_be_valid(p: TcProblem, knob: str, value: int) -> bool:
    """Whether `validate_tc` can accept knob = value with some choice of the other knobs (its
    checks of one knob alone)."""
    if knob == "bm":
        return value <= _ceil(p.m, 64) * 64
    if knob == "bn":
        return value <= _ceil(p.n, 64) * 64
    if knob == "stages":
        return value <= max(2, p.kt)
    if knob == "splitk":
        return value == 1 or (not p.batch and p.kt % value == 0)
    return True


def validate_tc(p: TcProblem, v: Mapping[str, int]) -> str | None:
    """Why the annotation `v` cannot run (None when it can)."""
    if p.attention:
        from ansor.targets.cuda.scores_softmax import validate_scores_softmax

        return validate_scores_softmax(p.attention, v)
    v = complete(v)
    for name in p.knobs:
        if name not in v:
            return f"missing knob tc.{name}"
        if int(v[name]) not in p.options(name):
            return f"knob tc.{name}={v[name]} not in its options"
    bm, bn, wgm, stages, wait, _group, ws, persist, splitk = (int(v[k]) for k in KNOBS)
    if p.tf32 and not ws:
        return "a TF32 kernel needs the producer warpgroup (it writes B K-major for the tf32 wgmma)"
    if p.tf32 and bm != TF32_WG_ROWS * wgm:
        return f"a TF32 warpgroup tile is {TF32_WG_ROWS} rows (MLIR 22 steps a taller tf32 A descriptor wrongly)"
    if splitk > 1:
        if p.batch:
            return "a batch matmul runs its batches along z: no split-K cluster"
        if persist:
            return "a persistent kernel does not split K"
        if p.kt % splitk:
            return f"{p.kt} k-blocks do not split into {splitk} equal parts"
    if persist and p.batch:
        return "a persistent batch matmul is not built (its tile loop would have to walk the batches)"
    if persist and not ws:
        return "a persistent kernel needs the producer warpgroup (it runs ahead into the next tile)"
    if persist and p.staged(bm, bn):
        return ("a persistent kernel stores from registers: a staged tile would share shared memory with "
                "the next tile's stages")
    if bm > _ceil(p.m, 64) * 64 or bn > _ceil(p.n, 64) * 64:
        return f"block tile {bm}x{bn} is larger than the {p.m}x{p.n} result needs"
    wm = bm // wgm
    if bm % wgm or wm not in (64, 128):
        return f"{bm} rows over {wgm} warpgroups is not 64 or 128 rows each"
    acc = wm * bn // 128
    if acc > MAX_ACC_PER_THREAD:
        return f"a {wm}x{bn} warpgroup tile needs {acc} accumulators per thread (max {MAX_ACC_PER_THREAD})"
    if (acc + REGS_BESIDES_ACC) * 128 * (wgm + ws) > REGISTERS_PER_SM:
        return (f"{wgm + ws} warpgroups of {acc} accumulators (+{REGS_BESIDES_ACC} registers) per thread exceed "
                f"{REGISTERS_PER_SM} registers per block")
    if wm == 128 and bn == 64:
        # Upstream `nvgpu.warpgroup.mma.store` (MLIR 22) loses a quarter of a 128x64 accumulator
        # (a quarter of C never written, every such annotation on an H200; 64x64 and 128x128 are right).
        return "a 128x64 warpgroup tile is stored wrongly by upstream nvgpu.warpgroup.mma.store"
    if ws and wgm == 1 and wm * bn <= 64 * 64:
        # Measured on an H200: kernel faults or a hang (5 of 6 annotations); cause not found yet.
        return "a producer warpgroup with a single 64x64 consumer faults on the GPU"
    if p.kt // splitk < stages and stages > 2:
        # (a 2-stage ring over a single k-block -- attention scores with a 64-wide head -- fills
        # the one stage there is; deeper rings would only repeat that annotation)
        return f"{stages} stages exceed the {p.kt // splitk} k-blocks of a block"
    if p.conv:
        tw = int(v["tw"])
        th, _ = p.conv.tile(bm, tw)
        if tw > bm:
            return f"a {tw}-pixel-wide tile does not fit {bm} rows"
        if th * tw * 2 <= bm and bm > 64:
            return f"a {th}x{tw} pixel tile fills less than half of the {bm} rows"
    if stages * stage_bytes(bm, bn, p.tf32) > MAX_DYNAMIC_SHARED:
        return (f"{stages} stages of {stage_bytes(bm, bn, p.tf32)} bytes exceed {MAX_DYNAMIC_SHARED} bytes of "
                "shared memory")
    if (p.staged(bm, bn) or splitk > 1) and staged_tile_bytes(bm, bn) > MAX_DYNAMIC_SHARED:
        return (f"the {bm}x{bn} f32 tile the epilogue stages ({staged_tile_bytes(bm, bn)} bytes) exceeds "
                f"{MAX_DYNAMIC_SHARED} bytes of shared memory")
    if wait and stages < 3:
        return "one MMA in flight needs at least 3 stages"
    return None


def stage_bytes(bm: int, bn: int, tf32: bool = False) -> int:
    """Shared memory of one pipeline stage (bytes): A's bm x BK box and B's BK x bn chunks; a TF32
    stage (BK 32 f32) also holds B K-major (bn rows of 128 bytes, written by the producer)."""
    if tf32:
        return (bm + 2 * bn) * BK_TF32 * 4
    return (bm + bn) * BK * 2


#: f32 padding of each row of the staged accumulator tile: 8 words shift consecutive rows by 8 banks,
#: so the fragment stores (8 rows x 4 column pairs per warp) do not pile onto the same banks.
STAGE_PAD = 8


#: Columns each consumer thread stores at once from the staged tile (16 bytes of f16/bf16; N is a
#: multiple of 8 for TMA's row strides, so a vector never straddles the result's edge).
STORE_VEC = TMA_STRIDE_ELEMS
_BYTES = {"f32": 4, "f16": 2, "bf16": 2}


def staged_tile_bytes(bm: int, bn: int) -> int:
    return bm * (bn + STAGE_PAD) * 4


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


class TcSketch(Sketch):
    """The wgmma + TMA GEMM (a template: its script annotates, `kernel_text` builds the kernel)."""

    def __init__(self, name: str, problem: TcProblem) -> None:
        self.name = name
        self.rules = ("tensor-core-wgmma",)
        self.problem = problem
        self.knobs = tuple(Knob(problem.knob(k), problem.options(k)) for k in problem.knobs)

    @property
    def free_tile_knobs(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.knobs)

    @property
    def untrained_share(self) -> float:
        # ~200 annotations next to the CUDA-core sketch's millions: without a share, random
        # scores hand nearly every first batch to the CUDA-core sketch's offspring.
        return 0.5

    def _values(self, values: Mapping[str, int]) -> dict[str, int]:
        return {k: int(values[self.problem.knob(k)]) for k in self.problem.knobs if self.problem.knob(k) in values}

    def script(self, values: Mapping[str, int] | None = None, *, lower_vectors: bool = True) -> str:
        """Annotates the function with the knobs (what the lowering reads) and tiles the matmul the
        way the kernel does -- blocks of bm x bn, warpgroups of bm/wgm rows, k-blocks of 64 (TF32:
        32) -- so the loop features the cost model reads differ between annotations as the kernels
        do."""
        p = self.problem
        if values is not None:  # records written before a knob existed meant its old behaviour
            values = {p.knob(k): x for k, x in {**p.later_knobs, **self._values(values)}.items()}
        sb = ScriptBuilder(values)
        for k in self.knobs:
            sb.emit(sb.knob_line(k))
        if p.attention:
            return self._attention_script(sb)
        bm, bn = sb.value(p.knob("bm")), sb.value(p.knob("bn"))
        if values is None:
            wm = "{" + p.knob("bm") + "/" + p.knob("wgm") + "}"
        else:
            wm = str(int(values[p.knob("bm")]) // int(values[p.knob("wgm")]))
        sb.emit(f'%f = transform.structured.match ops{{["func.func"]}} in %root : ({ANY}) -> {ANY}')
        for k in p.knobs:
            sb.emit(f'transform.annotate %f "{ATTR}.{k}" = {ssa(p.knob(k))} : {ANY}, {PARAM}')
        if p.conv:  # blocks of tw pixels x bn channels, k-blocks of one filter tap x 64 channels
            tw = sb.value(p.knob("tw"))
            sb.emit(f'%cv = transform.structured.match ops{{["{_CONV}"]}} in %root : ({ANY}) -> {ANY}')
            sb.emit(f"%t1, %blocks = transform.structured.tile_using_forall %cv tile_sizes [0, 0, {tw}, {bn}] "
                    f"(mapping = [#gpu.block<y>, #gpu.block<x>]) : ({ANY}) -> ({ANY}, {ANY})")
            sb.emit(f"%t3, %kh, %kw, %kc = transform.structured.tile_using_for %t1 tile_sizes [0, 0, 0, 0, 1, 1, {BK}] "
                    f": ({ANY}) -> ({ANY}, {ANY}, {ANY}, {ANY})")
            return self._finish(sb)
        op, lead, z = ("linalg.batch_matmul", "1, ", "#gpu.block<z>, ") if p.batch else ("linalg.matmul", "", "")
        zero = "0, " if p.batch else ""
        sb.emit(f'%mm = transform.structured.match ops{{["{op}"]}} in %root : ({ANY}) -> {ANY}')
        sb.emit(f"%t1, %blocks = transform.structured.tile_using_forall %mm tile_sizes [{lead}{bm}, {bn}] "
                f"(mapping = [{z}#gpu.block<y>, #gpu.block<x>]) : ({ANY}) -> ({ANY}, {ANY})")
        sb.emit(f"%t2, %warpgroups = transform.structured.tile_using_forall %t1 tile_sizes [{zero}{wm}, 0] "
                f"(mapping = [#gpu.warpgroup<x>]) : ({ANY}) -> ({ANY}, {ANY})")
        sb.emit(f"%t3, %kloop = transform.structured.tile_using_for %t2 tile_sizes [{zero}0, 0, {p.bk}] "
                f": ({ANY}) -> ({ANY}, {ANY})")
        return self._finish(sb)

    def _attention_script(self, sb: ScriptBuilder) -> str:
        """Attention scores + softmax: the annotation, and the scores' contraction (the payload's op
        `attention.op`, over b, h, i, j, d) tiled as the kernel computes it -- blocks of 1 x 1 x bm
        rows, n-tiles of bn columns, k-blocks of 64."""
        p = self.problem
        bm, bn = sb.value(p.knob("bm")), sb.value(p.knob("bn"))
        sb.emit(f'%f = transform.structured.match ops{{["func.func"]}} in %root : ({ANY}) -> {ANY}')
        for k in p.knobs:
            sb.emit(f'transform.annotate %f "{ATTR}.{k}" = {ssa(p.knob(k))} : {ANY}, {PARAM}')
        mm = sb.match("ansor.op", p.attention.op)
        sb.emit(f"%t1, %blocks = transform.structured.tile_using_forall {mm} tile_sizes [1, 1, {bm}, 0, 0] "
                f"(mapping = [#gpu.block<z>, #gpu.block<y>, #gpu.block<x>]) : ({ANY}) -> ({ANY}, {ANY})")
        sb.emit(f"%t3, %ntiles, %kloop = transform.structured.tile_using_for %t1 tile_sizes [0, 0, 0, {bn}, {BK}] "
                f": ({ANY}) -> ({ANY}, {ANY}, {ANY})")
        return self._finish(sb)

    def _finish(self, sb: ScriptBuilder) -> str:
        sb.emit("transform.yield")
        head = [
            "module attributes {transform.with_named_sequence} {",
            f"  // sketch {self.name}: {self.rule} (GPU, sm_90{', TF32' if self.problem.tf32 else ''})",
            f"  transform.named_sequence @__transform_main(%root: {ANY} {{transform.consumed}}) {{",
        ]
        return "\n".join(head + sb.lines + ["  }", "}"]) + "\n"

    def validate(self, values: Mapping[str, int]) -> str | None:
        return validate_tc(self.problem, self._values(values))

    def complete(self, values: Mapping[str, int]) -> dict[str, int]:
        return {**{self.problem.knob(k): x for k, x in self.problem.later_knobs.items()}, **values}

    def sample(self, rng: random.Random, *, max_tries: int = 4000) -> Schedule:
        """Rejection sampling over the values each knob can take in some valid annotation (a
        small GEMM leaves one bm, bn and stage count: matmul 1x8x8 had 1 valid draw in ~5400 of
        all the options, and 4000 tries failed now and then); uniform over the valid ones."""
        p = self.problem
        if p.attention:
            return rejection_sample(self, rng, max_tries=max_tries)
        narrowed = {}
        for k in self.knobs:
            short = k.name.removeprefix(p.knob(""))
            opts = tuple(o for o in k.options if _may_be_valid(p, short, int(o)))
            narrowed[k.name] = opts or k.options
        for _ in range(max_tries):
            values = {name: rng.choice(opts) for name, opts in narrowed.items()}
            if self.validate(values) is None:
                return Schedule.of(self.name, values)
        raise SamplingError(f"sketch {self.name} (the {p.m}x{p.n}x{p.k} GEMM): no valid annotation found in "
                            f"{max_tries} tries")

    def __hash__(self) -> int:
        return hash((self.name, self.rules, self.problem))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TcSketch) and (self.name, self.problem) == (other.name, other.problem)


# ----------------------------------------------------------------------------------------------
# The kernel


def annotation_of(module) -> dict[str, int] | None:
    """The knob values the script left on the module's function (None: not a tensor-core program)."""
    from mlir import ir

    from ansor.core.mlir import walk

    for op in walk(module.operation, "func.func"):
        if f"{ATTR}.bm" in op.attributes:
            return complete({k: ir.IntegerAttr(op.attributes[f"{ATTR}.{k}"]).value for k in KNOBS + ("tw",)
                             if f"{ATTR}.{k}" in op.attributes})
    return None


def kernel_text(p: TcProblem, v: Mapping[str, int], func_name: str, *, sm_count: int = DEFAULT_SM_COUNT) -> str:
    """The whole module (host function + gpu.launch in nvgpu IR) of the annotated GEMM; a
    persistent kernel launches min(tiles, `sm_count`) blocks.

    The launch body, top-down, each part a method of `_Kernel` (which holds the annotation's
    geometry and the lines emitted so far):

        block_start        thread ids, the block's tile, shared memory, the stages' mbarriers
        producer           (ws) the extra warpgroup streaming the k-blocks into the stages
                           (TF32: `producer_tf32`, which also writes B K-major),
                           then `open_consumers`: the consumer warpgroups' branch (tile loop)
        first_loads        (no ws) thread 0 fills the first stages
        main_loop          per k-block: wait for its stage, wgmma, release or refill a stage
        drain              the MMA left in flight
        accumulator_store  the sums to C: from registers, or staged in shared memory with the
                           epilogue (`staged_store`); split-K only stages its partial tile
        close_consumers    the ends of the tile loop and the consumers' branch
        cluster_reduce     (split-K) every block of the cluster sums and stores a share of the tile

    and around it `module`: the host function building the TMA descriptors and launching.
    Attention scores + softmax have their own kernel (`scores_softmax.scores_softmax_kernel`)."""
    if p.attention:
        from ansor.targets.cuda.scores_softmax import scores_softmax_kernel

        return scores_softmax_kernel(p.attention, p.et, p.out, v, func_name)
    k = _Kernel(p, complete(v), sm_count)
    I = _BODY
    k.block_start(I)
    if k.ws:
        k.producer(I)
        I = k.open_consumers(I)
    else:
        k.first_loads(I)
    k.main_loop(I)
    k.drain(I)
    k.accumulator_store(I)
    I = k.close_consumers(I)
    if k.splitk > 1:
        k.cluster_reduce(I)
    k.emit(f"{I}gpu.terminator")
    return k.module(func_name, I)


#: Indentation of the gpu.launch body.
_BODY = "      "


class _Kernel(KernelText):
    """The kernel of one annotation being emitted: its geometry, read off the problem and the
    knobs, and the lines of the gpu.launch body with the index constants they use (`c`; declared
    at the top of the body, in order of value). Each method emits one part of the body at the
    indentation it is given (`I`)."""

    def __init__(self, p: TcProblem, v: Mapping[str, int], sm_count: int) -> None:
        """The geometry of the complete annotation `v` of `p`: tiles, k-blocks, the stages'
        layout, the grid (a persistent one of at most `sm_count` blocks); no lines yet."""
        bm, bn, wgm, depth, wait, group, ws, persist, splitk = (int(v[k]) for k in KNOBS)
        self.p, self.cv = p, p.conv
        self.bm, self.bn, self.wgm, self.depth, self.wait, self.group = bm, bn, wgm, depth, wait, group
        self.ws, self.persist, self.splitk = ws, persist, splitk
        self.wm, self.wn = bm // wgm, bn  # a consumer warpgroup's tile
        self.kt = p.kt // splitk  # k-blocks of one block (of its cluster's share of K)
        self.staged = p.staged(bm, bn) or splitk > 1  # the sums pass through shared memory
        # C as the kernel indexes it; `arow`: the tile's first row of A and C (a batch matmul's tall A and C)
        self.cname, self.rows = ("%C2", p.batch * p.m) if p.batch else ("%C", p.m)
        self.arow = "%arow" if p.batch else "%m0"
        # a stage: A's bm x BK box, then B's BK x 64 chunks (TF32: A's box, B K-major -- bn rows of
        # 32 f32, written by the producer warpgroup --, then B's chunks as TMA loads them)
        self.bk, self.esize = p.bk, _BYTES[p.et]
        esize = self.esize
        self.stage = stage_bytes(bm, bn, p.tf32)
        self.a_bytes = bm * self.bk * esize
        self.chunk = self.bk * 64 * esize
        self.b_off = self.a_bytes + (bn * self.bk * esize if p.tf32 else 0)  # B's chunks in a stage
        self.lookahead = max(1, depth // 2)  # TF32: k-blocks the producer's loads run ahead of its transposes
        cv = p.conv
        self.th, self.tw = cv.tile(bm, int(v["tw"])) if cv else (bm, 0)
        # bytes one stage's TMA loads deliver (a convolution's th x tw pixels may fill fewer than bm rows)
        self.loaded = ((self.th * self.tw if cv else bm) + bn) * self.bk * esize
        self.vA, self.vB = f"memref<{bm}x{self.bk}x{p.et}, 3>", f"memref<{self.bk}x64x{p.et}, 3>"
        if cv:  # one box of th x tw pixels x 64 channels of X, zero past the image's edges
            self.vA = (f"memref<1x{self.th}x{self.tw}x{BK}x{p.et}, 3>" if cv.stride == 1 else
                       f"memref<{self.th}x1x{self.tw}x1x{BK}x{p.et}, 3>")
        # the grid: gx x gy tiles (a convolution's rows: images x nhb x nwb patches of th x tw pixels)
        self.gx, self.gy = _ceil(p.n, bn), _ceil(p.m, bm)
        self.nhb = self.nwb = 0
        if cv:
            self.nhb, self.nwb = _ceil(cv.oh, self.th), _ceil(cv.ow, self.tw)
            self.gy = cv.n * self.nhb * self.nwb
        self.tiles = self.gx * self.gy
        self.blocks = min(self.tiles, sm_count) if persist else self.tiles
        KernelText.__init__(self)

    # -- the block and its tiles ------------------------------------------------------------------

    def block_start(self, I: str) -> None:
        """Thread and warpgroup ids; the block's tile (a persistent block's come from its tile
        loop instead), its share of K (split-K) and its batch's offsets (a batch matmul runs as
        one tall A, B and C, blockIdx.z picking the batch); then `barriers`."""
        p, c, emit = self.p, self.c, self.emit
        emit(f"{I}%tid = gpu.thread_id x")
        emit(f"{I}%wg = arith.divui %tid, {c(128)} : index")
        if not self.persist:
            self.raster(I, None)
        if self.splitk > 1:  # a cluster of `splitk` blocks along z shares a tile; block z sums k-blocks [z*kt, (z+1)*kt)
            emit(f"{I}%kbase = arith.muli %bz, {c(self.kt)} : index")
        if p.batch:  # rows of this batch: of the tall A and C (%arow), of the tall B (%kboff)
            emit(f"{I}%boff = arith.muli %bz, {c(p.m)} : index")
            emit(f"{I}%kboff = arith.muli %bz, {c(p.k)} : index")
            emit(f"{I}%arow = arith.addi %m0, %boff : index")
        emit(f"{I}%wgoff = arith.muli %wg, {c(self.wm * self.bk * self.esize)} : index")
        self.barriers(I)

    def barriers(self, I: str) -> None:
        """The dynamic shared memory; each stage's `full` mbarrier (and with a producer warpgroup
        its `empty` one, released by every consumer warpgroup; TF32, its `ready` one, released by
        every producer thread once B is K-major), initialised by thread 0, which also prefetches
        the TMA descriptors; a block-wide barrier."""
        c, emit = self.c, self.emit
        self.dynamic_shared(I, self.dyn_bytes)
        emit(f"{I}%bar = nvgpu.mbarrier.create -> !bar")
        if self.ws:
            emit(f"{I}%empty = nvgpu.mbarrier.create -> !bar")
        if self.p.tf32:
            emit(f"{I}%ready = nvgpu.mbarrier.create -> !bar")
        emit(f"{I}%is0 = arith.cmpi eq, %tid, {c(0)} : index")
        emit(f"{I}scf.if %is0 {{")
        for s_ in range(self.depth):
            emit(f"{I}  nvgpu.mbarrier.init %bar[{c(s_)}], {c(1)} : !bar")
            if self.ws:  # released once by each consumer warpgroup
                emit(f"{I}  nvgpu.mbarrier.init %empty[{c(s_)}], {c(self.wgm)} : !bar")
            if self.p.tf32:  # B K-major in the stage: every producer thread arrives
                emit(f"{I}  nvgpu.mbarrier.init %ready[{c(s_)}], {c(128)} : !bar")
        emit(f"{I}  nvgpu.tma.prefetch.descriptor %tA : !tmA")
        emit(f"{I}  nvgpu.tma.prefetch.descriptor %tB : !tmB")
        emit(f"{I}}}")
        emit(f"{I}gpu.barrier")

    def raster(self, ind: str, pid: str | None) -> None:
        """%m0, %n0 of tile `pid` (None: the launch grid's block); a convolution's tile also as
        %img and its first output pixel (%h0, %w0; strided, %h0s on the folded rows of X)."""
        c, emit, cv, gx, gy, group = self.c, self.emit, self.cv, self.gx, self.gy, self.group
        brow, bcol = "%brow", "%bcol"
        if group > 1 and gy > 1:
            # Grouped raster: consecutive tiles sweep `group` block rows column by column, so the
            # B tiles they share are still in L2.
            if pid is None:
                emit(f"{ind}%pid0 = arith.muli %by, {c(gx)} : index")
                emit(f"{ind}%pid = arith.addi %pid0, %bx : index")
                pid = "%pid"
            emit(f"{ind}%gid = arith.divui {pid}, {c(group * gx)} : index")
            emit(f"{ind}%gin = arith.remui {pid}, {c(group * gx)} : index")
            emit(f"{ind}%first = arith.muli %gid, {c(group)} : index")
            emit(f"{ind}%left = arith.subi {c(gy)}, %first : index")
            emit(f"{ind}%gm = arith.minui %left, {c(group)} : index")
            emit(f"{ind}%rin = arith.remui %gin, %gm : index")
            emit(f"{ind}%brow = arith.addi %first, %rin : index")
            emit(f"{ind}%bcol = arith.divui %gin, %gm : index")
        elif pid is None:
            brow, bcol = "%by", "%bx"
        else:
            emit(f"{ind}%brow = arith.divui {pid}, {c(gx)} : index")
            emit(f"{ind}%bcol = arith.remui {pid}, {c(gx)} : index")
        emit(f"{ind}%m0 = arith.muli {brow}, {c(self.bm)} : index")
        emit(f"{ind}%n0 = arith.muli {bcol}, {c(self.bn)} : index")
        if cv:
            nhb, nwb = self.nhb, self.nwb
            emit(f"{ind}%img = arith.divui {brow}, {c(nhb * nwb)} : index")
            emit(f"{ind}%pin = arith.remui {brow}, {c(nhb * nwb)} : index")
            emit(f"{ind}%hb = arith.divui %pin, {c(nwb)} : index")
            emit(f"{ind}%wb = arith.remui %pin, {c(nwb)} : index")
            emit(f"{ind}%h0 = arith.muli %hb, {c(self.th)} : index")
            emit(f"{ind}%w0 = arith.muli %wb, {c(self.tw)} : index")
            if cv.stride > 1:  # the image's first coarse row of the folded [N*H/s, ...] view
                emit(f"{ind}%imgrow = arith.muli %img, {c(cv.h // cv.stride)} : index")
                emit(f"{ind}%h0s = arith.addi %imgrow, %h0 : index")

    def tile_loop(self, ind: str) -> None:
        """A persistent block's loop over its tiles; %g0 counts the k-blocks streamed before."""
        c = self.c
        self.emit(f"{ind}%gend = scf.for %t = %bx to {c(self.tiles)} step {c(self.blocks)} "
                  f"iter_args(%g0 = {c(0)}) -> (index) {{")
        self.raster(ind + "  ", "%t")

    def tile_loop_end(self, ind: str) -> None:
        """The end of `tile_loop` (opened at `ind`)."""
        self.emit(f"{ind}  %gnext = arith.addi %g0, {self.c(self.kt)} : index")
        self.emit(f"{ind}  scf.yield %gnext : index")
        self.emit(f"{ind}}}")

    # -- operand loads ----------------------------------------------------------------------------

    def tma_load(self, stage_idx: str, kblock: str, pre: str, indent: str) -> None:
        """TMA loads of k-block `kblock` into stage `stage_idx` (SSA names), issued by one thread
        and counted on the stage's `full` mbarrier: A's box (a convolution's: `conv_load`), then
        the BK x 64 chunks of B. `pre` prefixes the SSA names it defines."""
        p, c, emit = self.p, self.c, self.emit
        vA, vB = self.vA, self.vB
        emit(f"{indent}%{pre}base = arith.muli {stage_idx}, {c(self.stage)} : index")
        if self.splitk > 1:  # this block's share of K starts at k-block %kbase
            emit(f"{indent}%{pre}kg = arith.addi {kblock}, %kbase : index")
            kblock = f"%{pre}kg"
        emit(f"{indent}%{pre}k = arith.muli {kblock}, {c(self.bk)} : index")
        bk = f"%{pre}k"
        if p.batch:  # this batch's rows of the tall B
            emit(f"{indent}%{pre}kb = arith.addi %{pre}k, %kboff : index")
            bk = f"%{pre}kb"
        emit(f"{indent}%{pre}a = memref.view %dyn[%{pre}base][] : memref<?xi8, 3> to {vA}")
        emit(f"{indent}nvgpu.mbarrier.arrive.expect_tx %bar[{stage_idx}], {c(self.loaded)} : !bar")
        if self.cv:
            self.conv_load(stage_idx, kblock, pre, indent)
        else:
            emit(f"{indent}nvgpu.tma.async.load %tA[%{pre}k, {self.arow}], %bar[{stage_idx}] to %{pre}a "
                 f": !tmA, !bar -> {vA}")
        for j in range(self.bn // 64):
            emit(f"{indent}%{pre}ob{j} = arith.addi %{pre}base, {c(self.b_off + j * self.chunk)} : index")
            emit(f"{indent}%{pre}b{j} = memref.view %dyn[%{pre}ob{j}][] : memref<?xi8, 3> to {vB}")
            emit(f"{indent}%{pre}n{j} = arith.addi %n0, {c(64 * j)} : index")
            emit(f"{indent}nvgpu.tma.async.load %tB[%{pre}n{j}, {bk}], %bar[{stage_idx}] to %{pre}b{j} "
                 f": !tmB, !bar -> {vB}")

    def conv_load(self, stage_idx: str, kblock: str, pre: str, indent: str) -> None:
        """A convolution's A box of k-block `kblock` (`tma_load`'s names): the k-block is a filter
        tap (r, s) and 64 input channels from c0; the tap shifts the box of X (TMA zero-fills what
        falls outside the image: the padding). Strided, `strided_tap` picks coarse shift and phase."""
        c, emit, cv, vA = self.c, self.emit, self.cv, self.vA
        cb = _ceil(cv.c, BK)
        rs, c0 = kblock, c(0)
        if cb > 1:
            emit(f"{indent}%{pre}rs = arith.divui {kblock}, {c(cb)} : index")
            emit(f"{indent}%{pre}cb = arith.remui {kblock}, {c(cb)} : index")
            emit(f"{indent}%{pre}c0 = arith.muli %{pre}cb, {c(BK)} : index")
            rs, c0 = f"%{pre}rs", f"%{pre}c0"
        emit(f"{indent}%{pre}r = arith.divui {rs}, {c(cv.kw)} : index")
        emit(f"{indent}%{pre}s = arith.remui {rs}, {c(cv.kw)} : index")
        if cv.stride == 1:
            emit(f"{indent}%{pre}ry = arith.muli %{pre}r, {c(cv.dil_h)} : index")
            emit(f"{indent}%{pre}sx = arith.muli %{pre}s, {c(cv.dil_w)} : index")
            emit(f"{indent}%{pre}y1 = arith.addi %h0, %{pre}ry : index")
            emit(f"{indent}%{pre}x1 = arith.addi %w0, %{pre}sx : index")
            emit(f"{indent}%{pre}y = arith.subi %{pre}y1, {c(cv.pad_h)} : index")
            emit(f"{indent}%{pre}x = arith.subi %{pre}x1, {c(cv.pad_w)} : index")
            emit(f"{indent}nvgpu.tma.async.load %tA[{c0}, %{pre}x, %{pre}y, %img], %bar[{stage_idx}] to %{pre}a "
                 f": !tmA, !bar -> {vA}")
        else:
            cy, py = self.strided_tap(pre, indent, "y", f"%{pre}r", cv.kh, cv.dil_h, cv.pad_h, "%h0s")
            cx, px = self.strided_tap(pre, indent, "x", f"%{pre}s", cv.kw, cv.dil_w, cv.pad_w, "%w0")
            emit(f"{indent}nvgpu.tma.async.load %tA[{c0}, {px}, {cx}, {py}, {cy}], %bar[{stage_idx}] to %{pre}a "
                 f": !tmA, !bar -> {vA}")

    def strided_tap(self, pre: str, indent: str, axis: str, tap: str, k: int, dil: int, pad: int,
                    base: str) -> tuple[str, str]:
        """A strided convolution's box coordinate along `axis` for filter tap `tap` (of `k`), and
        its phase (SSA names): the taps' (coarse shift, phase) pairs are compile-time tables,
        selected by tap -- q = sum over taps of (tap == t) * q_t, idem p: no signed division."""
        c, emit = self.c, self.emit
        q_, p_ = f"%{pre}q{axis}", f"%{pre}p{axis}"
        emit(f"{indent}{q_}0 = arith.constant 0 : index")
        emit(f"{indent}{p_}0 = arith.constant 0 : index")
        for t in range(k):
            q, ph = self.cv.shift(t, dil, pad)
            emit(f"{indent}{q_}is{t} = arith.cmpi eq, {tap}, {c(t)} : index")
            emit(f"{indent}{q_}v{t} = arith.constant {q} : index")
            emit(f"{indent}{q_}{t + 1} = arith.select {q_}is{t}, {q_}v{t}, {q_}{t} : index")
            emit(f"{indent}{p_}{t + 1} = arith.select {q_}is{t}, {c(ph)}, {p_}{t} : index")
        emit(f"{indent}%{pre}c{axis} = arith.addi {base}, {q_}{k} : index")
        return f"%{pre}c{axis}", f"{p_}{k}"

    # -- the pipeline -----------------------------------------------------------------------------

    def producer(self, I: str) -> None:
        """The producer warpgroup (ws): one thread of the extra warpgroup streams every k-block
        (of every tile of a persistent block, stages and phases running on across tiles),
        waiting for the consumers to release a stage (its `empty` mbarrier) before refilling it."""
        if self.p.tf32:
            self.producer_tf32(I)
            return
        c, emit = self.c, self.emit
        P = self.open_producer(I)
        emit(f"{P}scf.for %i = {c(0)} to {c(self.kt)} step {c(1)} {{")
        K2 = P + "  "
        self.wait_empty(K2)
        self.tma_load("%s", "%i", "q", K2)
        emit(f"{P}}}")
        self.close_producer(I)

    def open_producer(self, I: str, *, warpgroup: bool = False) -> str:
        """The producer's branch: its first thread's (`%isp`), or with `warpgroup` all its 128
        threads' (`%ptid` numbering them, `%isp` the first); in it a persistent block's tile
        loop. Returns the indentation inside (closed by `close_producer`)."""
        c, emit = self.c, self.emit
        J = I + "  "
        if warpgroup:
            emit(f"{I}%isprod = arith.cmpi uge, %tid, {c(self.wgm * 128)} : index")
            emit(f"{I}scf.if %isprod {{")
            emit(f"{J}%ptid = arith.subi %tid, {c(self.wgm * 128)} : index")
            emit(f"{J}%isp = arith.cmpi eq, %ptid, {c(0)} : index")
        else:
            emit(f"{I}%isp = arith.cmpi eq, %tid, {c(self.wgm * 128)} : index")
            emit(f"{I}scf.if %isp {{")
        if self.persist:
            self.tile_loop(J)
            return J + "  "
        return J

    def close_producer(self, I: str) -> None:
        """The ends of the tile loop and the branch `open_producer(I)` opened."""
        if self.persist:
            self.tile_loop_end(I + "  ")
        self.emit(f"{I}}}")

    def wait_empty(self, K: str) -> None:
        """In the producer's k-loop (`%i`; a persistent block's k-blocks counted on from `%g0`):
        %s, the stage of k-block %i, and from the second round on the wait for the consumers to
        release it (its `empty` mbarrier, in the phase of the previous round)."""
        c, emit, depth = self.c, self.emit, self.depth
        gq = "%i"
        if self.persist:  # stages and phases run on across tiles
            emit(f"{K}%g = arith.addi %g0, %i : index")
            gq = "%g"
        emit(f"{K}%s = arith.remui {gq}, {c(depth)} : index")
        emit(f"{K}%again = arith.cmpi uge, {gq}, {c(depth)} : index")
        emit(f"{K}scf.if %again {{")
        emit(f"{K}  %u = arith.divui {gq}, {c(depth)} : index")
        emit(f"{K}  %u1 = arith.subi %u, {c(1)} : index")
        emit(f"{K}  %pu = arith.remui %u1, {c(2)} : index")
        emit(f"{K}  %ph = arith.cmpi ne, %pu, {c(0)} : index")
        emit(f"{K}  nvgpu.mbarrier.try_wait.parity %empty[%s], %ph, {c(10000000)} : !bar")
        emit(f"{K}}}")

    def producer_tf32(self, I: str) -> None:
        """The producer warpgroup of a TF32 kernel (the tf32 wgmma reads B only K-major, TMA
        copies it as it is in memory: N-major): its thread 0 streams every k-block as `producer`
        does (A's box, B's chunks; waiting for the consumers to release the stage), and all 128
        threads write each k-block's B K-major into its stage (`transpose_b`) `lookahead` k-blocks
        behind the loads, then release the stage to the consumers (its `ready` mbarrier)."""
        c, emit, depth, L = self.c, self.emit, self.depth, self.lookahead
        P = self.open_producer(I, warpgroup=True)
        emit(f"{P}scf.for %i = {c(0)} to {c(self.kt + L)} step {c(1)} {{")
        K2, K3 = P + "  ", P + "    "
        emit(f"{K2}%load = arith.cmpi ult, %i, {c(self.kt)} : index")
        emit(f"{K2}scf.if %load {{")
        self.wait_empty(K3)
        emit(f"{K3}scf.if %isp {{")
        self.tma_load("%s", "%i", "q", K3 + "  ")
        emit(f"{K3}}}")
        emit(f"{K2}}}")
        emit(f"{K2}%late = arith.cmpi uge, %i, {c(L)} : index")
        emit(f"{K2}scf.if %late {{")
        emit(f"{K3}%it = arith.subi %i, {c(L)} : index")
        gt = "%it"
        if self.persist:
            emit(f"{K3}%gt = arith.addi %g0, %it : index")
            gt = "%gt"
        emit(f"{K3}%st = arith.remui {gt}, {c(depth)} : index")
        emit(f"{K3}%ut = arith.divui {gt}, {c(depth)} : index")
        emit(f"{K3}%put = arith.remui %ut, {c(2)} : index")
        emit(f"{K3}%pht = arith.cmpi ne, %put, {c(0)} : index")
        emit(f"{K3}nvgpu.mbarrier.try_wait.parity %bar[%st], %pht, {c(10000000)} : !bar")
        self.transpose_b(K3, "%st")
        # the generic-proxy writes (and reads of the chunks TMA refills later) before the wgmma's
        # and TMA's async-proxy accesses, then the release
        emit(f"{K3}nvvm.fence.proxy {{kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}}")
        emit(f"{K3}%tkr = nvgpu.mbarrier.arrive %ready[%st] : !bar -> !nvgpu.mbarrier.token")
        emit(f"{K2}}}")
        emit(f"{P}}}")
        self.close_producer(I)

    def transpose_b(self, K: str, st: str) -> None:
        """(TF32) The producer's 128 threads copy stage `st`'s B chunks (BK rows of 64 f32 each, as
        TMA wrote them) into the stage's K-major B: bn rows of BK f32, 16-byte pieces placed by the
        128-byte swizzle (piece q of row n at q ^ (n mod 8)), as TMA would have written a K-major
        B. Each thread moves 4 K-consecutive elements of one column at a time: a warp reads 32
        consecutive columns of a row (no bank conflict) and writes 8 pieces per quarter warp that
        the swizzle spreads over all banks."""
        c, emit, bn, bk = self.c, self.emit, self.bn, self.bk
        flat = f"memref<{bn * bk}xf32, 3>"
        emit(f"{K}%tbase = arith.muli {st}, {c(self.stage)} : index")
        emit(f"{K}%tro = arith.addi %tbase, {c(self.b_off)} : index")
        emit(f"{K}%tko = arith.addi %tbase, {c(self.a_bytes)} : index")
        emit(f"{K}%traw = memref.view %dyn[%tro][] : memref<?xi8, 3> to {flat}")
        emit(f"{K}%tkm = memref.view %dyn[%tko][] : memref<?xi8, 3> to {flat}")
        emit(f"{K}scf.for %te = %ptid to {c(bn * bk // 4)} step {c(128)} {{")
        L = K + "  "
        emit(f"{L}%tn = arith.remui %te, {c(bn)} : index")  # the column of B (a row of K-major B)
        emit(f"{L}%tq = arith.divui %te, {c(bn)} : index")  # its 16-byte piece: K elements 4q..4q+3
        emit(f"{L}%tj = arith.divui %tn, {c(64)} : index")
        emit(f"{L}%tc = arith.remui %tn, {c(64)} : index")
        emit(f"{L}%tr0 = arith.muli %tj, {c(bk * 64)} : index")
        emit(f"{L}%tr1 = arith.muli %tq, {c(4 * 64)} : index")
        emit(f"{L}%tr2 = arith.addi %tr0, %tr1 : index")
        emit(f"{L}%tr = arith.addi %tr2, %tc : index")
        emit(f"{L}%tv0 = arith.constant dense<0.0> : vector<4xf32>")
        for q in range(4):
            emit(f"{L}%ti{q} = arith.addi %tr, {c(q * 64)} : index")
            emit(f"{L}%tx{q} = memref.load %traw[%ti{q}] : {flat}")
            emit(f"{L}%tv{q + 1} = vector.insert %tx{q}, %tv{q} [{q}] : f32 into vector<4xf32>")
        emit(f"{L}%tsw = arith.remui %tn, {c(8)} : index")
        emit(f"{L}%tp = arith.xori %tq, %tsw : index")
        emit(f"{L}%td0 = arith.muli %tn, {c(bk)} : index")
        emit(f"{L}%td1 = arith.muli %tp, {c(4)} : index")
        emit(f"{L}%td = arith.addi %td0, %td1 : index")
        emit(f"{L}vector.store %tv4, %tkm[%td] {{alignment = 16}} : {flat}, vector<4xf32>")
        emit(f"{K}}}")

    def open_consumers(self, I: str) -> str:
        """The consumer warpgroups' branch (ws) and in it a persistent block's tile loop; returns
        the indentation of what runs inside (closed by `close_consumers`)."""
        self.emit(f"{I}%iscons = arith.cmpi ult, %tid, {self.c(self.wgm * 128)} : index")
        self.emit(f"{I}scf.if %iscons {{")
        I = I + "  "
        if self.persist:
            self.tile_loop(I)
            I = I + "  "
        return I

    def first_loads(self, I: str) -> None:
        """Without a producer warpgroup: thread 0 fills the first stages before the loop."""
        c = self.c
        self.emit(f"{I}scf.if %is0 {{")
        for s_ in range(min(self.depth, self.kt)):
            self.tma_load(c(s_), c(s_), f"p{s_}", I + "  ")
        self.emit(f"{I}}}")

    def main_loop(self, I: str) -> None:
        """The consumers' k-loop, summing into %res: per k-block `stage_mma`, then the stage of the
        k-block whose MMA is done (this one; with `wait`, the previous one) goes back to the
        producer (`release_stage`) or is refilled by thread 0 (`refill_stage`)."""
        c, emit = self.c, self.emit
        J = I + "  "
        emit(f"{I}%acc0 = nvgpu.warpgroup.mma.init.accumulator -> !acc")
        emit(f"{I}%res = scf.for %i = {c(0)} to {c(self.kt)} step {c(1)} iter_args(%acc = %acc0) -> (!acc) {{")
        gi = "%i"
        if self.persist:
            emit(f"{J}%g = arith.addi %g0, %i : index")
            gi = "%g"
        self.stage_mma(J, gi)
        j = gi
        if self.wait:  # the MMA of the previous k-block is done: its stage is free
            j = "%j"
            emit(f"{J}%j = arith.subi {gi}, {c(1)} : index")
        if self.ws:
            self.release_stage(J, j)
        else:
            self.refill_stage(J, j)
        emit(f"{J}scf.yield %acc2 : !acc")
        emit(f"{I}}}")

    def stage_mma(self, J: str, gi: str) -> None:
        """Wait for the stage of k-block `gi` (its `full` mbarrier, in the phase of its round), one
        wgmma of the warpgroup's wm x bn tile over it (descriptors of its swizzled A rows and
        B), and wait until at most `wait` MMAs are in flight."""
        c, emit, et, wm, wn, depth = self.c, self.emit, self.p.et, self.wm, self.wn, self.depth
        emit(f"{J}%s = arith.remui {gi}, {c(depth)} : index")
        emit(f"{J}%u = arith.divui {gi}, {c(depth)} : index")
        emit(f"{J}%pu = arith.remui %u, {c(2)} : index")
        emit(f"{J}%ph = arith.cmpi ne, %pu, {c(0)} : index")
        emit(f"{J}nvgpu.mbarrier.try_wait.parity %bar[%s], %ph, {c(10000000)} : !bar")
        if self.p.tf32:  # and for the producer to have written B K-major
            emit(f"{J}nvgpu.mbarrier.try_wait.parity %ready[%s], %ph, {c(10000000)} : !bar")
        emit(f"{J}%base = arith.muli %s, {c(self.stage)} : index")
        emit(f"{J}%offA = arith.addi %base, %wgoff : index")
        emit(f"{J}%offB = arith.addi %base, {c(self.a_bytes)} : index")
        if self.p.tf32:
            self.tf32_mmas(J)
            return
        emit(f"{J}%sa = memref.view %dyn[%offA][] : memref<?xi8, 3> to memref<{wm}x{BK}x{et}, 3>")
        emit(f"{J}%sb = memref.view %dyn[%offB][] : memref<?xi8, 3> to memref<{BK}x{wn}x{et}, 3>")
        emit(f"{J}%da = nvgpu.warpgroup.generate.descriptor %sa, %tA : memref<{wm}x{BK}x{et}, 3>, !tmA -> !dA")
        emit(f"{J}%db = nvgpu.warpgroup.generate.descriptor %sb, %tB : memref<{BK}x{wn}x{et}, 3>, !tmB -> !dB")
        emit(f"{J}%acc2 = nvgpu.warpgroup.mma %da, %db, %acc {{transposeB}} : !dA, !dB, !acc -> !acc")
        emit(f"{J}nvvm.wgmma.wait.group.sync.aligned {self.wait}")

    def tf32_mmas(self, J: str) -> None:
        """(TF32) The warpgroup's 64 x bn tile over the stage as BK/8 warpgroup MMAs of K 8, each
        on descriptors of its 32-byte column of the swizzled rows of A and of K-major B (upstream
        steps a K-major B descriptor by whole rows between the k8 steps of one
        `nvgpu.warpgroup.mma`, so each step is its own op), then the wait as `stage_mma`'s."""
        c, emit, wn, kq = self.c, self.emit, self.wn, TF32_MMA_K
        # (the views are f32: memrefs of tf32 have no LLVM type; the descriptor types say tf32)
        ta, tb = f"memref<{TF32_WG_ROWS}x{kq}xf32, 3>", f"memref<{kq}x{wn}xf32, 3>"
        # (B, written K-major with A's 128-byte swizzle by the producer: its descriptor from A's map)
        self.stepped_mmas(J, "%offA", "%offB", self.bk // kq, kq * 4, ta, tb, "A")
        emit(f"{J}nvvm.wgmma.wait.group.sync.aligned {self.wait}")

    def release_stage(self, J: str, j: str) -> None:
        """With a producer warpgroup: one thread per consumer warpgroup releases the stage of
        k-block `j` (its `empty` mbarrier; no block-wide barrier); with `wait`, from the second
        k-block on."""
        c, emit = self.c, self.emit
        emit(f"{J}%lane = arith.remui %tid, {c(128)} : index")
        emit(f"{J}%leader = arith.cmpi eq, %lane, {c(0)} : index")
        rel = "%leader"
        if self.wait:
            emit(f"{J}%started = arith.cmpi uge, %i, {c(1)} : index")
            emit(f"{J}%rel = arith.andi %leader, %started : i1")
            rel = "%rel"
        emit(f"{J}scf.if {rel} {{")
        emit(f"{J}  %sj = arith.remui {j}, {c(self.depth)} : index")
        emit(f"{J}  %tok = nvgpu.mbarrier.arrive %empty[%sj] : !bar -> !nvgpu.mbarrier.token")
        emit(f"{J}}}")

    def refill_stage(self, J: str, j: str) -> None:
        """Without a producer warpgroup: after a block-wide barrier, thread 0 refills the stage of
        k-block `j` with k-block j + stages, if there is one (with `wait`, from the second
        k-block on)."""
        c, emit = self.c, self.emit
        emit(f"{J}gpu.barrier")
        emit(f"{J}%nx = arith.addi {j}, {c(self.depth)} : index")
        emit(f"{J}%more = arith.cmpi ult, %nx, {c(self.kt)} : index")
        emit(f"{J}%go = arith.andi %more, %is0 : i1")
        if self.wait:
            emit(f"{J}%started = arith.cmpi uge, %i, {c(1)} : index")
            emit(f"{J}%go1 = arith.andi %go, %started : i1")
        emit(f"{J}scf.if {'%go1' if self.wait else '%go'} {{")
        emit(f"{J}  %sj = arith.remui {j}, {c(self.depth)} : index")
        self.tma_load("%sj", "%nx", "r", J + "  ")
        emit(f"{J}}}")

    def drain(self, I: str) -> None:
        """After the loop, with `wait`: wait for the MMA left in flight; a persistent block then
        releases the tile's last stage it held."""
        c, emit = self.c, self.emit
        if not self.wait:
            return
        emit(f"{I}nvvm.wgmma.wait.group.sync.aligned 0")
        if self.persist:  # the tile's last stage, held by the MMA left in flight, is free now
            emit(f"{I}%lane_e = arith.remui %tid, {c(128)} : index")
            emit(f"{I}%leader_e = arith.cmpi eq, %lane_e, {c(0)} : index")
            emit(f"{I}scf.if %leader_e {{")
            emit(f"{I}  %glast = arith.addi %g0, {c(self.kt - 1)} : index")
            emit(f"{I}  %slast = arith.remui %glast, {c(self.depth)} : index")
            emit(f"{I}  %tok_e = nvgpu.mbarrier.arrive %empty[%slast] : !bar -> !nvgpu.mbarrier.token")
            emit(f"{I}}}")

    # -- the accumulators to C --------------------------------------------------------------------

    def accumulator_store(self, I: str) -> None:
        """The sums (%res) to C: split-K stages them in shared memory for the cluster's reduction;
        a staged kernel stores them through shared memory with the epilogue (`staged_store`);
        otherwise `direct_store`."""
        # Upstream `nvgpu.warpgroup.mma.store` (MLIR 22) places rows by the *block's* warp index
        # (thread id / 32), not the warp's index within its warpgroup: warpgroup g's fragment already
        # lands g*64 rows down. Its view starts g*(wm - 64) rows down so the rows come out at g*wm.
        self.emit(f"{I}%wgfix = arith.muli %wg, {self.c(self.wm - 64)} : index")
        if self.splitk > 1:  # the partial sums stay in each block's shared memory for the cluster's reduction
            self.staged_store(I, consumers=128 * self.wgm, phase="stage")
        elif self.staged:
            self.staged_store(I, consumers=128 * self.wgm)
        else:
            self.direct_store(I)

    def direct_store(self, I: str) -> None:
        """The f32 sums straight from registers into C (`nvgpu.warpgroup.mma.store`): each warpgroup
        its wm x bn rows of the tile, which lies wholly inside C."""
        wm, wn = self.wm, self.wn
        cview = f"memref<{wm}x{wn}xf32, strided<[{self.p.n}, 1], offset: ?>>"
        self.emit(f"{I}%mst = arith.addi {self.arow}, %wgfix : index")
        self.emit(f"{I}%Cs = memref.subview {self.cname}[%mst, %n0] [{wm}, {wn}] [1, 1] : "
                  f"memref<{self.rows}x{self.p.n}xf32> to {cview}")
        self.emit(f"{I}nvgpu.warpgroup.mma.store %res, %Cs : !acc to {cview}")

    def close_consumers(self, I: str) -> str:
        """The ends of a persistent block's tile loop and of the consumers' branch (ws) opened by
        `open_consumers`; returns the indentation after them."""
        if self.persist:
            I = I[:-2]
            self.tile_loop_end(I)
        if self.ws:
            I = I[:-2]
            self.emit(f"{I}}}")
        return I

    def cluster_reduce(self, I: str) -> None:
        """Split-K: every thread of the cluster (the producer warpgroup too) reduces and stores a
        share of the tile, reading the peers' partial sums through distributed shared memory
        (`staged_store`'s "reduce"); nobody leaves before the peers have read its tile."""
        emit = self.emit
        emit(f"{I}nvvm.cluster.arrive {{aligned}}")
        emit(f"{I}nvvm.cluster.wait {{aligned}}")
        self.staged_store(I, consumers=128 * (self.wgm + self.ws), phase="reduce", cluster=self.splitk)
        emit(f"{I}nvvm.cluster.arrive {{aligned}}")
        emit(f"{I}nvvm.cluster.wait {{aligned}}")

    # -- the staged store -------------------------------------------------------------------------

    def staged_store(self, I: str, *, consumers: int, phase: str = "both", cluster: int = 1) -> None:
        """Accumulators -> a padded f32 tile in shared memory (over the drained pipeline stages:
        `stage_tile`) -> each of `consumers` threads walks the tile along rows (a warp covers 32
        consecutive columns: the shared reads are conflict-free, the global stores coalesced)
        `STORE_VEC` columns at a time (`store_coords`), rounds to the matmul's type, applies the
        fused epilogue with the extra inputs it reads (`epilogue_values`) and stores what lands
        inside C (`vector_store`).
        `phase` "stage" only writes the tile; "reduce" (`cluster` blocks of a split-K cluster,
        every thread of each) sums the cluster's tiles (`cluster_sum`) and stores, the blocks
        taking turns over the vectors; "both": stage, then store this block's tile."""
        c, emit, bn = self.c, self.emit, self.bn
        if phase != "reduce":
            self.stage_tile(I, consumers)
            if phase == "stage":
                return
            self.consumer_barrier(I)
        else:
            self.cluster_start(I, consumers)
        used = self.th * self.tw if self.cv else self.bm  # the tile's rows that hold results
        V = STORE_VEC  # consecutive columns per thread: one vector load from the tile, one vector store
        if phase == "reduce":
            emit(f"{I}scf.for %e = %cfirst to {c(used * bn // V)} step {c(consumers * cluster)} {{")
        else:
            emit(f"{I}scf.for %e = %tid to {c(used * bn // V)} step {c(consumers)} {{")
        J, guarded = self.store_coords(I + "  ")
        if phase == "reduce":
            v0 = self.cluster_sum(J, cluster)
        else:
            emit(f"{J}%v = vector.load %tile[%er, %ec] : {self.tile_type}, vector<{V}xf32>")
            v0 = "%v"
        val = self.epilogue_values(J, v0) if self.p.fused else v0
        self.vector_store(J, val)
        if guarded:
            emit(f"{J[:-2]}}}")
        emit(f"{I}}}")

    @property
    def dyn_bytes(self) -> int:
        """The dynamic shared buffer: the pipeline stages, or the staged f32 tile laid over them."""
        return max(self.depth * self.stage, staged_tile_bytes(self.bm, self.bn) if self.staged else 0)

    @property
    def tile_type(self) -> str:
        """The staged f32 tile: bm rows of bn columns, padded by `STAGE_PAD`."""
        return f"memref<{self.bm}x{self.bn + STAGE_PAD}xf32, 3>"

    def consumer_barrier(self, I: str) -> None:
        """A barrier over the threads that stage and store the tile."""
        if self.ws:  # the producer warpgroup has left: a named barrier over the consumers only
            self.emit(f"{I}nvvm.barrier id = %bid1 number_of_threads = %nconsumers")
        else:
            self.emit(f"{I}gpu.barrier")

    def stage_tile(self, I: str, consumers: int) -> None:
        """Each warpgroup's accumulators into its rows of the staged tile, at the start of the
        dynamic shared memory, once every warpgroup's MMAs have read their last stage."""
        emit, tile = self.emit, self.tile_type
        view = f"memref<{self.wm}x{self.bn}xf32, strided<[{self.bn + STAGE_PAD}, 1], offset: ?>, 3>"
        if self.ws:
            emit(f"{I}%nconsumers = arith.constant {consumers} : i32")
            emit(f"{I}%bid1 = arith.constant 1 : i32")
        self.consumer_barrier(I)  # every warpgroup's MMAs have read their last stage before the tile overwrites it
        emit(f"{I}%tile = memref.view %dyn[{self.c(0)}][] : memref<?xi8, 3> to {tile}")
        emit(f"{I}%Ts = memref.subview %tile[%wgfix, 0] [{self.wm}, {self.bn}] [1, 1] : {tile} to {view}")
        emit(f"{I}nvgpu.warpgroup.mma.store %res, %Ts : !acc to {view}")

    def cluster_start(self, I: str, consumers: int) -> None:
        """The reduction's start: the tile's address (%tbase, the same in every block of the
        cluster) and this thread's first vector (%cfirst: the blocks' threads one after another)."""
        emit = self.emit
        emit(f"{I}%tbase0 = memref.extract_aligned_pointer_as_index %dyn : memref<?xi8, 3> -> index")
        emit(f"{I}%tbase = arith.index_cast %tbase0 : index to i64")
        emit(f"{I}%crank = nvvm.read.ptx.sreg.cluster.ctarank : i32")
        emit(f"{I}%crk = arith.index_cast %crank : i32 to index")
        emit(f"{I}%cfirst0 = arith.muli %crk, {self.c(consumers)} : index")
        emit(f"{I}%cfirst = arith.addi %cfirst0, %tid : index")

    def store_coords(self, J: str) -> tuple[str, bool]:
        """Vector %e of the tile: its row %er and column %ec in the tile, its column %on of C and
        its row %om (a convolution: pixel %oy, %ox of %img); where the tile overhangs C, opens
        the guard of what lands inside. Returns the indentation inside and whether it guards."""
        c, emit, p, V = self.c, self.emit, self.p, STORE_VEC
        emit(f"{J}%er = arith.divui %e, {c(self.bn // V)} : index")
        emit(f"{J}%ecv = arith.remui %e, {c(self.bn // V)} : index")
        emit(f"{J}%ec = arith.muli %ecv, {c(V)} : index")
        emit(f"{J}%on = arith.addi %n0, %ec : index")
        guard = []
        if self.cv:
            g, th, tw = self.cv, self.th, self.tw
            emit(f"{J}%py = arith.divui %er, {c(tw)} : index")
            emit(f"{J}%px = arith.remui %er, {c(tw)} : index")
            emit(f"{J}%oy = arith.addi %h0, %py : index")
            emit(f"{J}%ox = arith.addi %w0, %px : index")
            for flag, val, ext, step in (("%iny", "%oy", g.oh, th), ("%inx", "%ox", g.ow, tw)):
                if ext % step:
                    emit(f"{J}{flag} = arith.cmpi ult, {val}, {c(ext)} : index")
                    guard.append(flag)
        else:
            emit(f"{J}%om = arith.addi %m0, %er : index")
            if p.m % self.bm:
                emit(f"{J}%inm = arith.cmpi ult, %om, {c(p.m)} : index")
                guard.append("%inm")
        if p.n % self.bn:  # N is a multiple of V (TMA's row strides): a vector is wholly inside or outside
            emit(f"{J}%inn = arith.cmpi ult, %on, {c(p.n)} : index")
            guard.append("%inn")
        if not guard:
            return J, False
        flag = guard[0]
        for i, other in enumerate(guard[1:]):
            emit(f"{J}%inb{i} = arith.andi {flag}, {other} : i1")
            flag = f"%inb{i}"
        emit(f"{J}scf.if {flag} {{")
        return J + "  ", True

    def cluster_sum(self, J: str, cluster: int) -> str:
        """The sum of the `cluster` blocks' partial tiles at this vector (`mapa` to each block's
        tile, `ld.shared::cluster`); returns its SSA name."""
        c, emit, vf = self.c, self.emit, f"vector<{STORE_VEC}xf32>"
        emit(f"{J}%eo0 = arith.muli %er, {c(self.bn + STAGE_PAD)} : index")
        emit(f"{J}%eo1 = arith.addi %eo0, %ec : index")
        emit(f"{J}%eo2 = arith.muli %eo1, {c(4)} : index")
        emit(f"{J}%eo3 = arith.index_cast %eo2 : index to i64")
        emit(f"{J}%eoa = arith.addi %tbase, %eo3 : i64")
        emit(f"{J}%eop = llvm.inttoptr %eoa : i64 to !llvm.ptr<3>")
        for r in range(cluster):
            emit(f"{J}%rk{r} = arith.constant {r} : i32")
            emit(f"{J}%rp{r} = nvvm.mapa %eop, %rk{r} : !llvm.ptr<3> -> !llvm.ptr<7>")
            emit(f"{J}%rv{r} = llvm.load %rp{r} {{alignment = 16 : i64}} : !llvm.ptr<7> -> {vf}")
        for r in range(1, cluster):
            prev = "%rv0" if r == 1 else f"%rs{r - 1}"
            emit(f"{J}%rs{r} = arith.addf {prev}, %rv{r} : {vf}")
        return f"%rs{cluster - 1}"

    def epilogue_values(self, J: str, v0: str) -> str:
        """The f32 sums `v0` element by element rounded to the matmul's type and passed through
        the fused epilogue (with the extra inputs it reads at the element's indices), gathered
        into a vector of C's type; returns its SSA name."""
        c, emit, p, V = self.c, self.emit, self.p, STORE_VEC
        vf, vo = f"vector<{V}xf32>", f"vector<{V}x{p.out}>"
        dim_names = (["%img", "%oy", "%ox", "%on"] if self.cv else ["%bz", "%om", "%on"] if p.batch
                     else ["%om", "%on"])
        col = len(dim_names) - 1
        emit(f"{J}%y0 = arith.constant dense<0.0> : {vo}")
        for j in range(V):
            emit(f"{J}%v{j} = vector.extract {v0}[{j}] : f32 from {vf}")
            x_ = f"%v{j}"
            if p.acc != "f32":
                emit(f"{J}%va{j} = arith.truncf %v{j} : f32 to {p.acc}")
                x_ = f"%va{j}"
            if p.epilogue:
                ins, tys = [x_], [p.acc]
                if any(col in x.dims for x in p.extras):
                    emit(f"{J}%on{j} = arith.addi %on, {c(j)} : index")
                names = dim_names[:col] + [f"%on{j}"]
                for x in p.extras:
                    name, t = _arg(p, x.arg)
                    idx = ", ".join(names[d] for d in x.dims)
                    emit(f"{J}%l{x.arg}_{j} = memref.load {name}[{idx}] : {t}")
                    ins.append(f"%l{x.arg}_{j}")
                    tys.append(x.dtype)
                emit(f"{J}%r{j} = func.call @{EPILOGUE}({', '.join(ins)}) : ({', '.join(tys)}) -> {p.out}")
                x_ = f"%r{j}"
            emit(f"{J}%y{j + 1} = vector.insert {x_}, %y{j} [{j}] : {p.out} into {vo}")
        return f"%y{V}"

    def vector_store(self, J: str, val: str) -> None:
        """The vector `val` into C at row %om (a batch matmul: of the tall C; a convolution: pixel
        %oy, %ox of image %img), column %on."""
        p, emit = self.p, self.emit
        vo = f"vector<{STORE_VEC}x{p.out}>"
        # The vector's first column is a multiple of V and C's rows are multiples of 16 bytes long
        # (N % 8 == 0), so the store is aligned as long as C's base is (numpy, PyTorch and the MLIR
        # runtime allocate at >= 16 bytes); without the attribute NVPTX splits it into scalar stores.
        align = f"{{alignment = {min(16, STORE_VEC * _BYTES[p.out])}}}"
        if self.cv:
            _, ct = _arg(p, p.n_args)
            emit(f"{J}vector.store {val}, %C[%img, %oy, %ox, %on] {align} : {ct}, {vo}")
        else:
            row = "%om"
            if p.batch:
                emit(f"{J}%ocr = arith.addi %om, %boff : index")
                row = "%ocr"
            emit(f"{J}vector.store {val}, {self.cname}[{row}, %on] {align} : memref<{self.rows}x{p.n}x{p.out}>, {vo}")

    # -- the host function ------------------------------------------------------------------------

    def tma_operands(self) -> tuple[str, str, str, str, str]:
        """A and B as their TMA descriptors see them: (A's SSA name, B's, the host lines that
        reshape them, A's box, A's memref type). A matrix's A is read in bm x 64 boxes; a
        convolution's X as it is in 1 x th x tw x 64 boxes (strided: its folded
        [N*H/s, s, W/s, s, C] view, th x 1 x tw x 1 x 64) and W as the [KH*KW*C, CO] matrix it
        already is; a batch matmul's A, B (and C) as one tall matrix each."""
        p, cv, et, K = self.p, self.cv, self.p.et, self.p.k
        a2, b2, collapse = "%A", "%B", ""
        a_box = "%hbm, %h32" if p.tf32 else "%hbm, %h64"
        a_mem = f"memref<{self.rows}x{K}x{et}>"
        if cv:  # X as it is (4-D boxes); W as the [KH*KW*C, CO] matrix it already is in memory
            a_box = "%h1, %hth, %htw, %h64"
            a_mem = f"memref<{cv.n}x{cv.h}x{cv.w}x{cv.c}x{et}>"
            b2 = "%B2"
            collapse = (f"    %hth = arith.constant {self.th} : index\n    %htw = arith.constant {self.tw} : index\n"
                        f"    %B2 = memref.collapse_shape %B [[0, 1, 2], [3]] : memref<{cv.kh}x{cv.kw}x{cv.c}x{p.n}x{et}> "
                        f"into memref<{K}x{p.n}x{et}>\n")
            if cv.stride > 1:  # [N*H/s, s, W/s, s, C]: boxes of th coarse rows x tw coarse columns, one phase each
                st = cv.stride
                a2, a_box = "%A5", "%hth, %h1, %htw, %h1, %h64"
                fine = f"memref<{cv.n * cv.h}x{cv.w}x{cv.c}x{et}>"
                a_mem = f"memref<{cv.n * cv.h // st}x{st}x{cv.w // st}x{st}x{cv.c}x{et}>"
                collapse += (f"    %A3 = memref.collapse_shape %A [[0, 1], [2], [3]] : memref<{cv.n}x{cv.h}x{cv.w}x{cv.c}x{et}> "
                             f"into {fine}\n"
                             f"    %A5 = memref.expand_shape %A3 [[0, 1], [2, 3], [4]] output_shape "
                             f"[{cv.n * cv.h // st}, {st}, {cv.w // st}, {st}, {cv.c}] : {fine} into {a_mem}\n")
        if p.batch:
            B_ = p.batch
            a2, b2 = "%A2", "%B2"
            collapse = "".join(
                f"    {dst} = memref.collapse_shape {src} [[0, 1], [2]] : memref<{B_}x{r}x{cols}x{t}> into "
                f"memref<{B_ * r}x{cols}x{t}>\n"
                for dst, src, r, cols, t in (("%A2", "%A", p.m, K, et), ("%B2", "%B", K, p.n, et),
                                             ("%C2", "%C", p.m, p.n, p.out)))
        return a2, b2, collapse, a_box, a_mem

    def module(self, func_name: str, I: str) -> str:
        """The module: the types of the kernel (mbarrier group, TMA descriptors, accumulator,
        wgmma descriptors), the host function `func_name` (the TMA descriptors of A and B, the
        launch: a grid of tiles -- persistent, `blocks` blocks; split-K, clusters along z --, the
        shared memory of the stages or of the staged tile, whichever is larger) around the body
        emitted so far (its constants declared first, at indentation `I`), and the epilogue."""
        p, et, K, N = self.p, self.p.et, self.p.k, self.p.n
        bm, wm, wn, depth, ws, persist, splitk = self.bm, self.wm, self.wn, self.depth, self.ws, self.persist, self.splitk
        vA, vB = self.vA, self.vB
        cdecl = [f"{I}%c{x} = arith.constant {x} : index" for x in sorted(self.consts)]
        tm = "swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none"
        a2, b2, collapse, a_box, a_mem = self.tma_operands()
        smem = self.dyn_bytes + DYNAMIC_SHARED_SLACK
        # the wgmma's view of A and B in shared memory (TF32: tf32, one k8 step: `tf32_mmas`), and
        # the TMA map of B's chunks (TF32: 256-byte rows, unswizzled, for the producer to transpose)
        da, db, tm_b, b_box = (f"{wm}x{BK}x{et}", f"{BK}x{wn}x{et}", tm, "%h64, %h64")
        if p.tf32:
            da, db = f"{TF32_WG_ROWS}x{TF32_MMA_K}xtf32", f"{TF32_MMA_K}x{wn}xtf32"
            tm_b, b_box = tm.replace("swizzle_128b", "none"), "%h32, %h64"
        h32 = "    %h32 = arith.constant 32 : index\n" if p.tf32 else ""
        return f"""!bar = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = {depth}>
!tmA = !nvgpu.tensormap.descriptor<tensor = {vA}, {tm}>
!tmB = !nvgpu.tensormap.descriptor<tensor = {vB}, {tm_b}>
!acc = !nvgpu.warpgroup.accumulator<fragmented = vector<{wm}x{wn}xf32>>
!dA = !nvgpu.warpgroup.descriptor<tensor = memref<{da}, 3>>
!dB = !nvgpu.warpgroup.descriptor<tensor = memref<{db}, 3>>
module {{
  func.func @{func_name}({_signature(p)}) attributes {{llvm.emit_c_interface}} {{
    %h1 = arith.constant 1 : index
    %h64 = arith.constant 64 : index
{h32}    %hbm = arith.constant {bm} : index
    %hgx = arith.constant {self.blocks if persist else self.gx} : index
    %hgy = arith.constant {1 if persist else self.gy} : index
    %hthreads = arith.constant {128 * (self.wgm + ws)} : index
    %hbatch = arith.constant {p.batch or splitk} : index
    %hsk = arith.constant {splitk} : index
    %smem = arith.constant {smem} : i32
{collapse}    %uA = memref.cast {a2} : {a_mem} to memref<*x{et}>
    %uB = memref.cast {b2} : memref<{(p.batch or 1) * K}x{N}x{et}> to memref<*x{et}>
    %tA = nvgpu.tma.create.descriptor %uA box[{a_box}] : memref<*x{et}> -> !tmA
    %tB = nvgpu.tma.create.descriptor %uB box[{b_box}] : memref<*x{et}> -> !tmB
    gpu.launch {"clusters(%kx, %ky, %kz) in (%ksx = %h1, %ksy = %h1, %ksz = %hsk) " if splitk > 1 else ""}blocks(%bx, %by, %bz) in (%gx = %hgx, %gy = %hgy, %gz = %hbatch) threads(%tx, %ty, %tz) in (%sx = %hthreads, %sy = %h1, %sz = %h1) dynamic_shared_memory_size %smem {{
{chr(10).join(cdecl)}
{chr(10).join(self.lines)}
    }}
    return
  }}
{p.epilogue}
}}
"""


def _arg(p: TcProblem, i: int) -> tuple[str, str]:
    """SSA name and memref type of function argument `i` (inputs, then the result)."""
    b = f"{p.batch}x" if p.batch else ""
    if p.conv:
        g = p.conv
        shapes = {p.a_arg: ("%A", (g.n, g.h, g.w, g.c), p.et), p.b_arg: ("%B", (g.kh, g.kw, g.c, p.n), p.et),
                  p.n_args: ("%C", (g.n, g.oh, g.ow, p.n), p.out)}
        if i in shapes:
            name, shape, t = shapes[i]
            return name, "memref<" + "x".join(map(str, shape)) + f"x{t}>"
    if i == p.a_arg:
        return "%A", f"memref<{b}{p.m}x{p.k}x{p.et}>"
    if i == p.b_arg:
        return "%B", f"memref<{b}{p.k}x{p.n}x{p.et}>"
    if i == p.n_args:
        return "%C", f"memref<{b}{p.m}x{p.n}x{p.out}>"
    x = next(e for e in p.extras if e.arg == i)
    return f"%x{i}", "memref<" + "".join(f"{d}x" for d in x.shape) + f"{x.dtype}>"


def _signature(p: TcProblem) -> str:
    """The host function's arguments: the inputs, then the result."""
    return ", ".join(f"{name}: {t}" for name, t in (_arg(p, i) for i in range(p.n_args + 1)))

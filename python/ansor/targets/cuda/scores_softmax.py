"""Attention scores + row softmax (the TBS subgraph) on sm_90 tensor cores: one kernel computes
a block of rows of S = Q K^T with warpgroup MMAs into a padded f32 tile in shared memory (every
column of those rows: the whole sequence), then the softmax of each row from there.

    task: out[b, h, i, j] = softmax_j(sum_d Q[b, i, h, d] * K[b, j, h, d]) -- Q, K [B, S, H, D] in
        f16/bf16 (`tbs-BxSxHxD-f16`: transposes to [B, H, S, D] and [B, H, D, S], a 4-D batched
        contraction summing in f32, max / exp / sum / divide in f32, the result in f32 or rounded
        to Q's type)
    match_scores_softmax(ir text) --> ScoresSoftmax (shapes, argument roles, the contraction's
        op tag) or None and why not (empty when the function is not a contraction + softmax)
    validate_scores_softmax(problem, values) --> why an annotation (`bm`, `bn`, `stages`) cannot run
    scores_softmax_kernel(problem, values, func_name) --> nvgpu IR: the host function (4-D TMA
        descriptors of Q and K, the launch) and the kernel below --> NVVM --> PTX (`lowering.py`,
        as the GEMM's)

The transposes are layout, not copies: Q and K are read in place through 4-D TMA boxes of
[1, rows, 1, 64] (batch, sequence, head, 64 of D), the 128-byte swizzled tile a wgmma operand
wants, zero past the sequence's end. Q's box is the wgmma's A (K-major: D contiguous); K's box
is B *K-major* too (K[b, j, h, :] is contiguous in d), which the wgmma reads without its
transpose bit. Upstream `nvgpu.warpgroup.mma` (MLIR 22) steps a K-major B descriptor by whole
rows between its k16 steps (right only for an N-major B), so each k16 step is its own op on
descriptors offset by 32 bytes (as the TF32 kernel does), and a warpgroup owns 64 rows (its A
descriptor would be stepped wrongly past them).

The kernel (grid: ceil(S / bm) row blocks x H heads x B batches; bm / 64 warpgroups):

    thread 0       loads the block's Q rows (every k-block of D, once) and fills the first
                   `stages` stages of K boxes (bn rows x 64 of D each), mbarriers counting bytes
    n-tile loop    per n-tile of bn columns: per k-block, wait for its K stage, 4 wgmma k16 steps
                   per warpgroup (64 rows x bn columns, f32 accumulators in registers), a block
                   barrier, thread 0 refills the stage with the k-block `stages` ahead; then the
                   accumulators into columns [t*bn, t*bn + bn) of the f32 tile (bm x nt*bn + 8)
    softmax        a warp per row (rows < S): the max over the row's S columns (lanes striding
                   the row, then 5 xor shuffles), exp(x - max) written back with its sum (shuffled
                   again), then x * (1 / sum) rounded to the result's type and stored (coalesced along
                   the row; columns >= S and rows >= S never leave the block)

Shared memory: Q's k-blocks (bm x 64 each), `stages` K boxes (bn x 64 each), the f32 tile
(bm x (nt * bn + 8), rows padded by 8 words). The whole tile must fit the 227 KB a block may opt
in to: an annotation whose tile does not is refused with the sizes (S ~ 850 at bm 64, D 64).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ansor.targets.cuda.kernel_text import DYNAMIC_SHARED_SLACK, KernelText

#: The knobs of the scores + softmax kernel (names without the `tc.` prefix).
KNOBS = ("bm", "bn", "stages")
#: Block rows (64 per warpgroup), n-tile widths (the sequence's length rounded up to 8 is added
#: when it is at most 256: one n-tile covers a ragged row), K stages in the ring.
BM_OPTIONS = (64, 128, 256)
BN_OPTIONS = (64, 128, 256)
STAGE_OPTIONS = (2, 3, 4)
#: The untuned annotation.
DEFAULT = {"bm": 64, "bn": 128, "stages": 2}
#: D elements per k-block (one 128-byte swizzled row of f16/bf16) and per wgmma (k16).
BK = 64
MMA_K = 16
#: Rows of one warpgroup's wgmma tile (see the module docstring).
WG_ROWS = 64
#: f32 padding of each row of the tile (8 words: consecutive rows start 8 banks apart).
TILE_PAD = 8
#: The largest TMA box edge and wgmma N.
MAX_BOX = 256


@dataclass(frozen=True)
class ScoresSoftmax:
    """softmax_j(sum_d Q[b, i, h, d] * K[b, j, h, d]) for Q, K [batch, seq, heads, dim] (function
    arguments `q_arg`, `k_arg`) in `et`; `op`: the contraction's `ansor.op` tag in the payload
    (what the sketch's script tiles)."""

    batch: int
    seq: int
    heads: int
    dim: int
    q_arg: int = 0
    k_arg: int = 1
    op: int = 1


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def bn_options(seq: int) -> tuple[int, ...]:
    """n-tile widths for a sequence of `seq`: 64, 128, 256 and `seq` rounded up to 8 (<= 256)."""
    whole = _ceil(seq, 8) * 8
    return tuple(sorted(set(BN_OPTIONS) | ({whole} if whole <= MAX_BOX else set())))


def tile_bytes(a: ScoresSoftmax, bm: int, bn: int) -> int:
    """The f32 row tile: bm rows of every n-tile's columns, padded."""
    return bm * (_ceil(a.seq, bn) * bn + TILE_PAD) * 4


def shared_bytes(a: ScoresSoftmax, bm: int, bn: int, stages: int) -> int:
    """Dynamic shared memory of the kernel: Q's k-blocks, the K stages, the f32 tile (bytes)."""
    kt = _ceil(a.dim, BK)
    return kt * bm * BK * 2 + stages * bn * BK * 2 + tile_bytes(a, bm, bn)


# ----------------------------------------------------------------------------------------------
# Matching


def match_scores_softmax(text: str) -> tuple[ScoresSoftmax | None, str, str, str]:
    """(the problem, Q's element type, the result's element type, "") when the function of `text`
    is attention scores + a row softmax the kernel computes; else (None, "", "", why not), why
    being "" when the function is not a batched contraction followed by element-wise and row
    ops at all. Reads the payload as every program starts from it (`core.loops.preprocess`: the
    transposes generalized and folded into the contraction's indexing maps)."""
    from mlir import ir

    from ansor.core.loops import OP_ATTR, preprocess

    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        funcs = [op for op in module.body.operations if op.operation.name == "func.func"]
        if len(funcs) != 1:
            return None, "", "", ""
        preprocess(module)
        func = funcs[0].operation
        body = list(func.regions[0].blocks[0].operations)
        generics = [op for op in body if op.name == "linalg.generic"]
        contractions = [g for g in generics if _iters(g) == "ppppr"]
        if len(contractions) != 1 or contractions[0] != generics[0] or len(generics) < 2:
            return None, "", "", ""
        try:
            return _match(func, body, generics, OP_ATTR)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            return None, "", "", f"attention scores + softmax not analysable ({type(exc).__name__}: {exc})"


def _iters(op) -> str:
    from mlir import ir

    return "".join("p" if "parallel" in str(x) else "r" for x in ir.ArrayAttr(op.attributes["iterator_types"]))


def _maps(op) -> list[str]:
    from mlir import ir

    return [str(ir.AffineMapAttr(x).value) for x in ir.ArrayAttr(op.attributes["indexing_maps"])]


def _body_ops(op) -> list[str]:
    return [o.name for o in op.regions[0].blocks[0].operations]


def _fill_value(v) -> float | None:
    """The constant a `linalg.fill` result `v` is filled with (None: not a fill of a constant)."""
    from mlir import ir

    owner = v.owner
    if isinstance(owner, ir.Block) or owner.name != "linalg.fill":
        return None
    c = owner.operands[0].owner
    if isinstance(c, ir.Block) or c.name != "arith.constant":
        return None
    return ir.FloatAttr(c.attributes["value"]).value


_ID4 = "(d0, d1, d2, d3) -> (d0, d1, d2, d3)"
_ROW4 = "(d0, d1, d2, d3) -> (d0, d1, d2)"
#: The contraction over (b, h, i, j, d): Q[b, i, h, d], K[b, j, h, d] -> S[b, h, i, j].
_Q_MAP = "(d0, d1, d2, d3, d4) -> (d0, d2, d1, d4)"
_K_MAP = "(d0, d1, d2, d3, d4) -> (d0, d3, d1, d4)"
_S_MAP = "(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)"


def _match(func, body, generics, op_attr: str) -> tuple[ScoresSoftmax | None, str, str, str]:
    from mlir import ir

    def no(why: str) -> tuple[None, str, str, str]:
        return None, "", "", why

    names = [op.name for op in body]
    extra = set(names) - {"arith.constant", "tensor.empty", "linalg.fill", "linalg.generic", "func.return"}
    if extra:
        return no(f"attention scores + softmax with {', '.join(sorted(extra))} in the function")
    if len(generics) != 5:
        return no(f"a contraction and {len(generics) - 1} more generics: not scores + max, exp, sum, divide")
    mm, mx, ex, sm, dv = generics
    # the scores: Q[b, i, h, d] * K[b, j, h, d] summed over d, in f32 from a zero fill
    if _maps(mm) != [_Q_MAP, _K_MAP, _S_MAP] and _maps(mm) != [_K_MAP, _Q_MAP, _S_MAP]:
        return no("the scores do not read Q and K as [B, S, H, D] (softmax(Q^T K) over transposed heads)")
    q, k = mm.operands[0], mm.operands[1]
    if _maps(mm)[0] == _K_MAP:
        q, k = k, q
    for v in (q, k):
        if not isinstance(v.owner, ir.Block):
            return no("the scores' operands are not function arguments")
    qt, kt = ir.RankedTensorType(q.type), ir.RankedTensorType(k.type)
    et = str(qt.element_type)
    if et not in ("f16", "bf16") or str(kt.element_type) != et:
        return no(f"Q and K are {qt.element_type}/{kt.element_type}, not f16 or bf16")
    if list(qt.shape) != list(kt.shape):
        return no(f"Q {list(qt.shape)} and K {list(kt.shape)} differ")
    ops = _body_ops(mm)
    if sorted(set(ops) - {"arith.extf"}) != ["arith.addf", "arith.mulf", "linalg.yield"] or len(ops) > 5:
        return no("the contraction is not a sum of products")
    if str(ir.RankedTensorType(mm.results[0].type).element_type) != "f32" or _fill_value(mm.operands[2]) != 0.0:
        return no("the scores are not summed in f32 from zero")
    s = mm.results[0]
    # max over j (from -inf), exp(s - max), its sum (from 0), the quotient (maybe rounded)
    ninf = float("-inf")
    if (_iters(mx) != "pppr" or _maps(mx) != [_ID4, _ROW4] or mx.operands[0] != s
            or _body_ops(mx)[0] not in ("arith.maximumf", "arith.maxnumf") or len(_body_ops(mx)) != 2
            or _fill_value(mx.operands[1]) != ninf):
        return no("the scores' consumer is not their row max")
    if (_iters(ex) != "pppp" or _maps(ex) != [_ID4, _ROW4, _ID4] or list(ex.operands)[:2] != [s, mx.results[0]]
            or _body_ops(ex) != ["arith.subf", "math.exp", "linalg.yield"]):
        return no("the row max is not followed by exp(scores - max)")
    if (_iters(sm) != "pppr" or _maps(sm) != [_ID4, _ROW4] or sm.operands[0] != ex.results[0]
            or _body_ops(sm) != ["arith.addf", "linalg.yield"] or _fill_value(sm.operands[1]) != 0.0):
        return no("exp(scores - max) is not summed per row")
    out_t = str(ir.RankedTensorType(dv.results[0].type).element_type)
    want = ["arith.divf", "linalg.yield"] if out_t == "f32" else ["arith.divf", "arith.truncf", "linalg.yield"]
    if (_iters(dv) != "pppp" or _maps(dv) != [_ID4, _ROW4, _ID4]
            or list(dv.operands)[:2] != [ex.results[0], sm.results[0]] or _body_ops(dv) != want):
        return no("the softmax does not end in exp / sum")
    if out_t not in ("f32", et):
        return no(f"the softmax's result is {out_t}")
    if body[-1].operands[0] != dv.results[0]:
        return no("the function does not return the softmax")
    for blk_op, (i, j) in ((ex, (0, 1)), (dv, (0, 1))):  # the subtraction / division operand order
        first = list(blk_op.regions[0].blocks[0].operations)[0]
        args = list(blk_op.regions[0].blocks[0].arguments)
        if list(first.operands) != [args[i], args[j]]:
            return no("the softmax's exp or division has its operands swapped")
    b, seq, heads, dim = qt.shape
    if dim % BK:
        return no(f"head dim {dim}: the tensor-core scores need a multiple of {BK}")
    q_arg, k_arg = ir.BlockArgument(q).arg_number, ir.BlockArgument(k).arg_number
    tag = ir.IntegerAttr(mm.attributes[op_attr]).value
    att = ScoresSoftmax(b, seq, heads, dim, q_arg, k_arg, tag)
    from ansor.targets.cuda.tensorcore import MAX_DYNAMIC_SHARED

    least = shared_bytes(att, BM_OPTIONS[0], BN_OPTIONS[0], STAGE_OPTIONS[0])
    if least > MAX_DYNAMIC_SHARED:  # not even the smallest annotation's row tile fits
        return no(f"sequence {seq}: {BM_OPTIONS[0]} rows of {seq} f32 scores, Q and {STAGE_OPTIONS[0]} K stages "
                  f"need {least} bytes of shared memory (max {MAX_DYNAMIC_SHARED}); the row tile must fit whole")
    return att, et, out_t, ""


# ----------------------------------------------------------------------------------------------
# Validation


def validate_scores_softmax(a: ScoresSoftmax, v: Mapping[str, int]) -> str | None:
    """Why the annotation `v` (`bm`, `bn`, `stages`) of `a` cannot run (None when it can)."""
    from ansor.targets.cuda.tensorcore import MAX_ACC_PER_THREAD, MAX_DYNAMIC_SHARED, REGISTERS_PER_SM, \
        REGS_BESIDES_ACC

    opts = {"bm": BM_OPTIONS, "bn": bn_options(a.seq), "stages": STAGE_OPTIONS}
    for name in KNOBS:
        if name not in v:
            return f"missing knob tc.{name}"
        if int(v[name]) not in opts[name]:
            return f"knob tc.{name}={v[name]} not in its options"
    bm, bn, stages = (int(v[k]) for k in KNOBS)
    if bm > max(BM_OPTIONS[0], _ceil(a.seq, 64) * 64):
        return f"{bm} rows per block: more than the {a.seq} rows of a head need"
    if bn > max(BN_OPTIONS[0], _ceil(a.seq, 8) * 8):
        return f"an n-tile of {bn} columns: wider than the {a.seq} columns of a row"
    wgm = bm // WG_ROWS
    acc = WG_ROWS * bn // 128
    if acc > MAX_ACC_PER_THREAD:
        return f"a 64x{bn} warpgroup tile needs {acc} accumulators per thread (max {MAX_ACC_PER_THREAD})"
    if (acc + REGS_BESIDES_ACC) * 128 * wgm > REGISTERS_PER_SM:
        return (f"{wgm} warpgroups of {acc} accumulators (+{REGS_BESIDES_ACC} registers) per thread exceed "
                f"{REGISTERS_PER_SM} registers per block")
    steps = _ceil(a.seq, bn) * _ceil(a.dim, BK)
    if stages > max(2, steps):
        return f"{stages} stages exceed the {steps} K boxes a block loads"
    need = shared_bytes(a, bm, bn, stages)
    if need > MAX_DYNAMIC_SHARED:
        return (f"the {bm} x {a.seq} f32 rows of scores ({tile_bytes(a, bm, bn)} bytes), Q and {stages} K "
                f"stages need {need} bytes of shared memory (max {MAX_DYNAMIC_SHARED})")
    return None


# ----------------------------------------------------------------------------------------------
# The kernel


def scores_softmax_kernel(a: ScoresSoftmax, et: str, out: str, v: Mapping[str, int], func_name: str) -> str:
    """The module (host function + gpu.launch in nvgpu IR) of annotation `v` of `a`: Q, K in `et`,
    the result in `out` (see the module docstring for the kernel's parts)."""
    return _ScoresKernel(a, et, out, v).module(func_name)


class _ScoresKernel(KernelText):
    """The lines of one annotation's kernel and the index constants they use (declared first)."""

    def __init__(self, a: ScoresSoftmax, et: str, out: str, v: Mapping[str, int]) -> None:
        self.a, self.et, self.out = a, et, out
        self.bm, self.bn, self.depth = int(v["bm"]), int(v["bn"]), int(v["stages"])
        self.wgm = self.bm // WG_ROWS
        self.threads = 128 * self.wgm
        self.kt = _ceil(a.dim, BK)  # k-blocks of D
        self.nt = _ceil(a.seq, self.bn)  # n-tiles of a row
        self.steps = self.nt * self.kt  # K boxes a block loads, one ring slot each
        self.q_block = self.bm * BK * 2  # bytes of one k-block of Q's rows
        self.k_stage = self.bn * BK * 2
        self.k_off = self.kt * self.q_block  # the K stages, after Q
        self.tile_off = self.k_off + self.depth * self.k_stage
        self.width = self.nt * self.bn + TILE_PAD  # f32 words of a tile row
        KernelText.__init__(self)

    @property
    def dyn_bytes(self) -> int:
        """The dynamic shared buffer: Q's k-blocks, the K stages, the f32 row tile (what
        validation counts: `shared_bytes`)."""
        return shared_bytes(self.a, self.bm, self.bn, self.depth)

    @property
    def vq(self) -> str:
        return f"memref<1x{self.bm}x1x{BK}x{self.et}, 3>"

    @property
    def vk(self) -> str:
        return f"memref<1x{self.bn}x1x{BK}x{self.et}, 3>"

    @property
    def tile(self) -> str:
        return f"memref<{self.bm}x{self.width}xf32, 3>"

    def k_load(self, I: str, stage: str, step: str, pre: str) -> None:
        """TMA load of K box `step` (n-tile step / kt, k-block step % kt) into ring slot `stage`."""
        c, emit = self.c, self.emit
        emit(f"{I}%{pre}t = arith.divui {step}, {c(self.kt)} : index")
        emit(f"{I}%{pre}kb = arith.remui {step}, {c(self.kt)} : index")
        emit(f"{I}%{pre}j0 = arith.muli %{pre}t, {c(self.bn)} : index")
        emit(f"{I}%{pre}d0 = arith.muli %{pre}kb, {c(BK)} : index")
        emit(f"{I}%{pre}so = arith.muli {stage}, {c(self.k_stage)} : index")
        emit(f"{I}%{pre}off = arith.addi %{pre}so, {c(self.k_off)} : index")
        emit(f"{I}%{pre}v = memref.view %dyn[%{pre}off][] : memref<?xi8, 3> to {self.vk}")
        emit(f"{I}nvgpu.mbarrier.arrive.expect_tx %bar[{stage}], {c(self.k_stage)} : !bar")
        emit(f"{I}nvgpu.tma.async.load %tB[%{pre}d0, %by, %{pre}j0, %bz], %bar[{stage}] to %{pre}v "
             f": !tmB, !bar -> {self.vk}")

    def body(self) -> None:
        """The launch body: set-up and loads, the n-tile loop, the softmax."""
        c, emit, I = self.c, self.emit, "      "
        emit(f"{I}%tid = gpu.thread_id x")
        emit(f"{I}%wg = arith.divui %tid, {c(128)} : index")
        emit(f"{I}%i0 = arith.muli %bx, {c(self.bm)} : index")
        self.dynamic_shared(I, self.dyn_bytes)
        emit(f"{I}%bar = nvgpu.mbarrier.create -> !bar")
        emit(f"{I}%qbar = nvgpu.mbarrier.create -> !qbar")
        emit(f"{I}%is0 = arith.cmpi eq, %tid, {c(0)} : index")
        emit(f"{I}scf.if %is0 {{")
        for s_ in range(self.depth):
            emit(f"{I}  nvgpu.mbarrier.init %bar[{c(s_)}], {c(1)} : !bar")
        emit(f"{I}  nvgpu.mbarrier.init %qbar[{c(0)}], {c(1)} : !qbar")
        emit(f"{I}  nvgpu.tma.prefetch.descriptor %tA : !tmA")
        emit(f"{I}  nvgpu.tma.prefetch.descriptor %tB : !tmB")
        emit(f"{I}}}")
        emit(f"{I}gpu.barrier")
        # thread 0: Q's rows (every k-block), then the first K boxes
        emit(f"{I}scf.if %is0 {{")
        J = I + "  "
        emit(f"{J}nvgpu.mbarrier.arrive.expect_tx %qbar[{c(0)}], {c(self.kt * self.q_block)} : !qbar")
        for kb in range(self.kt):
            emit(f"{J}%qv{kb} = memref.view %dyn[{c(kb * self.q_block)}][] : memref<?xi8, 3> to {self.vq}")
            emit(f"{J}nvgpu.tma.async.load %tA[{c(kb * BK)}, %by, %i0, %bz], %qbar[{c(0)}] to %qv{kb} "
                 f": !tmA, !qbar -> {self.vq}")
        for s_ in range(min(self.depth, self.steps)):
            self.k_load(J, c(s_), c(s_), f"p{s_}")
        emit(f"{I}}}")
        emit(f"{I}nvgpu.mbarrier.try_wait.parity %qbar[{c(0)}], %false, {c(10000000)} : !qbar")
        self.n_tiles(I)
        emit(f"{I}gpu.barrier")  # every warpgroup's columns are in the tile
        self.softmax(I)

    def n_tiles(self, I: str) -> None:
        """Per n-tile: the k-loop of wgmmas over the K ring, then the accumulators into the tile."""
        c, emit, et, bn = self.c, self.emit, self.et, self.bn
        J, K = I + "  ", I + "    "
        emit(f"{I}%tile = memref.view %dyn[{c(self.tile_off)}][] : memref<?xi8, 3> to {self.tile}")
        emit(f"{I}%qwg = arith.muli %wg, {c(WG_ROWS * BK * 2)} : index")  # the warpgroup's 64 rows of Q
        emit(f"{I}scf.for %t = {c(0)} to {c(self.nt)} step {c(1)} {{")
        emit(f"{J}%acc0 = nvgpu.warpgroup.mma.init.accumulator -> !acc")
        emit(f"{J}%res = scf.for %kb = {c(0)} to {c(self.kt)} step {c(1)} iter_args(%acc = %acc0) -> (!acc) {{")
        emit(f"{K}%g0 = arith.muli %t, {c(self.kt)} : index")
        emit(f"{K}%g = arith.addi %g0, %kb : index")
        emit(f"{K}%s = arith.remui %g, {c(self.depth)} : index")
        emit(f"{K}%u = arith.divui %g, {c(self.depth)} : index")
        emit(f"{K}%pu = arith.remui %u, {c(2)} : index")
        emit(f"{K}%ph = arith.cmpi ne, %pu, {c(0)} : index")
        emit(f"{K}nvgpu.mbarrier.try_wait.parity %bar[%s], %ph, {c(10000000)} : !bar")
        emit(f"{K}%qb = arith.muli %kb, {c(self.q_block)} : index")
        emit(f"{K}%qa = arith.addi %qb, %qwg : index")
        emit(f"{K}%ks = arith.muli %s, {c(self.k_stage)} : index")
        emit(f"{K}%kbase = arith.addi %ks, {c(self.k_off)} : index")
        ta, tb = f"memref<{WG_ROWS}x{MMA_K}x{et}, 3>", f"memref<{MMA_K}x{bn}x{et}, 3>"
        self.stepped_mmas(K, "%qa", "%kbase", BK // MMA_K, MMA_K * 2, ta, tb, "B")  # one op per k16 step
        emit(f"{K}nvvm.wgmma.wait.group.sync.aligned 0")
        if self.steps > self.depth:  # every warpgroup is done with the stage: refill it
            emit(f"{K}gpu.barrier")
            emit(f"{K}%nx = arith.addi %g, {c(self.depth)} : index")
            emit(f"{K}%more = arith.cmpi ult, %nx, {c(self.steps)} : index")
            emit(f"{K}%go = arith.andi %more, %is0 : i1")
            emit(f"{K}scf.if %go {{")
            self.k_load(K + "  ", "%s", "%nx", "r")
            emit(f"{K}}}")
        emit(f"{K}scf.yield %acc2 : !acc")
        emit(f"{J}}}")
        # Upstream `nvgpu.warpgroup.mma.store` places a warpgroup's rows by the block's warp index:
        # every warpgroup stores through the same view and lands 64 * wg rows down.
        view = f"memref<{WG_ROWS}x{bn}xf32, strided<[{self.width}, 1], offset: ?>, 3>"
        emit(f"{J}%n0 = arith.muli %t, {c(bn)} : index")
        emit(f"{J}%ts = memref.subview %tile[0, %n0] [{WG_ROWS}, {bn}] [1, 1] : {self.tile} to {view}")
        emit(f"{J}nvgpu.warpgroup.mma.store %res, %ts : !acc to {view}")
        emit(f"{I}}}")

    def softmax(self, I: str) -> None:
        """A warp per row of the tile (rows inside the sequence): max, exp and sum, quotient."""
        c, emit, a = self.c, self.emit, self.a
        J, K = I + "  ", I + "    "
        warps = self.threads // 32
        rows = min(self.bm, a.seq)  # a block's rows never start past the sequence
        emit(f"{I}%warp = arith.divui %tid, {c(32)} : index")
        emit(f"{I}%lane = arith.remui %tid, {c(32)} : index")
        emit(f"{I}%ninf = arith.constant 0xFF800000 : f32")
        emit(f"{I}%zf = arith.constant 0.0 : f32")
        emit(f"{I}%one = arith.constant 1.0 : f32")
        emit(f"{I}%w32 = arith.constant 32 : i32")
        for sh in (16, 8, 4, 2, 1):
            emit(f"{I}%x{sh} = arith.constant {sh} : i32")
        emit(f"{I}scf.for %r = %warp to {c(rows)} step {c(warps)} {{")
        emit(f"{J}%row = arith.addi %i0, %r : index")
        emit(f"{J}%inr = arith.cmpi ult, %row, {c(a.seq)} : index")
        emit(f"{J}scf.if %inr {{")
        emit(f"{K}%m = scf.for %j = %lane to {c(a.seq)} step {c(32)} iter_args(%mi = %ninf) -> (f32) {{")
        emit(f"{K}  %x = memref.load %tile[%r, %j] : {self.tile}")
        emit(f"{K}  %mx = arith.maximumf %mi, %x : f32")
        emit(f"{K}  scf.yield %mx : f32")
        emit(f"{K}}}")
        mx = self.warp_reduce(K, "%m", "maximumf", "mr")
        emit(f"{K}%sum = scf.for %j = %lane to {c(a.seq)} step {c(32)} iter_args(%si = %zf) -> (f32) {{")
        emit(f"{K}  %x = memref.load %tile[%r, %j] : {self.tile}")
        emit(f"{K}  %xm = arith.subf %x, {mx} : f32")
        emit(f"{K}  %e = math.exp %xm : f32")
        emit(f"{K}  memref.store %e, %tile[%r, %j] : {self.tile}")
        emit(f"{K}  %sn = arith.addf %si, %e : f32")
        emit(f"{K}  scf.yield %sn : f32")
        emit(f"{K}}}")
        tot = self.warp_reduce(K, "%sum", "addf", "sr")
        emit(f"{K}%inv = arith.divf %one, {tot} : f32")  # one division per row, a product per element
        emit(f"{K}scf.for %j = %lane to {c(a.seq)} step {c(32)} {{")
        emit(f"{K}  %e = memref.load %tile[%r, %j] : {self.tile}")
        emit(f"{K}  %y = arith.mulf %e, %inv : f32")
        y = "%y"
        if self.out != "f32":
            emit(f"{K}  %yh = arith.truncf %y : f32 to {self.out}")
            y = "%yh"
        emit(f"{K}  memref.store {y}, %C[%bz, %by, %row, %j] : {self.c_type}")
        emit(f"{K}}}")
        emit(f"{J}}}")
        emit(f"{I}}}")

    def warp_reduce(self, K: str, val: str, op: str, pre: str) -> str:
        """`val` combined (`arith.<op>`) over the warp's 32 lanes by xor shuffles; its SSA name."""
        cur = val
        for sh in (16, 8, 4, 2, 1):
            self.emit(f"{K}%{pre}s{sh}, %{pre}ok{sh} = gpu.shuffle xor {cur}, %x{sh}, %w32 : f32")
            self.emit(f"{K}%{pre}{sh} = arith.{op} {cur}, %{pre}s{sh} : f32")
            cur = f"%{pre}{sh}"
        return cur

    @property
    def c_type(self) -> str:
        a = self.a
        return f"memref<{a.batch}x{a.heads}x{a.seq}x{a.seq}x{self.out}>"

    def module(self, func_name: str) -> str:
        """The module: types, the host function (TMA descriptors of Q and K as 4-D tensors, the
        launch), the kernel body."""
        a, et = self.a, self.et
        self.body()
        cdecl = [f"      %c{x} = arith.constant {x} : index" for x in sorted(self.consts)]
        tm = "swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none"
        x = f"memref<{a.batch}x{a.seq}x{a.heads}x{a.dim}x{et}>"
        args = {a.q_arg: f"%A: {x}", a.k_arg: f"%B: {x}"}
        sig = ", ".join([args[0], args[1], f"%C: {self.c_type}"])
        smem = self.dyn_bytes + DYNAMIC_SHARED_SLACK
        return f"""!bar = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = {self.depth}>
!qbar = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 1>
!tmA = !nvgpu.tensormap.descriptor<tensor = {self.vq}, {tm}>
!tmB = !nvgpu.tensormap.descriptor<tensor = {self.vk}, {tm}>
!acc = !nvgpu.warpgroup.accumulator<fragmented = vector<{WG_ROWS}x{self.bn}xf32>>
!dA = !nvgpu.warpgroup.descriptor<tensor = memref<{WG_ROWS}x{MMA_K}x{et}, 3>>
!dB = !nvgpu.warpgroup.descriptor<tensor = memref<{MMA_K}x{self.bn}x{et}, 3>>
module {{
  func.func @{func_name}({sig}) attributes {{llvm.emit_c_interface}} {{
    %h1 = arith.constant 1 : index
    %h64 = arith.constant {BK} : index
    %hbm = arith.constant {self.bm} : index
    %hbn = arith.constant {self.bn} : index
    %hgx = arith.constant {_ceil(a.seq, self.bm)} : index
    %hgy = arith.constant {a.heads} : index
    %hgz = arith.constant {a.batch} : index
    %hthreads = arith.constant {self.threads} : index
    %smem = arith.constant {smem} : i32
    %uA = memref.cast %A : {x} to memref<*x{et}>
    %uB = memref.cast %B : {x} to memref<*x{et}>
    %tA = nvgpu.tma.create.descriptor %uA box[%h1, %hbm, %h1, %h64] : memref<*x{et}> -> !tmA
    %tB = nvgpu.tma.create.descriptor %uB box[%h1, %hbn, %h1, %h64] : memref<*x{et}> -> !tmB
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %hgx, %gy = %hgy, %gz = %hgz) threads(%tx, %ty, %tz) in (%sx = %hthreads, %sy = %h1, %sz = %h1) dynamic_shared_memory_size %smem {{
      %false = arith.constant false
{chr(10).join(cdecl)}
{chr(10).join(self.lines)}
      gpu.terminator
    }}
    return
  }}
}}
"""

"""Tensor-core GEMM sketch for sm_90 (H100/H200): warpgroup MMA (`wgmma`) fed by TMA through an
mbarrier ring of shared-memory stages.

    task: C[M,N] (f32) = A[M,K] @ B[K,N], A and B in f16 or bf16 (a `linalg.matmul` on a zero fill)
    TcSketch.script(values) --> a transform script that annotates the function with its knobs
        (`ansor.tc.bm`, `.bn`, `.wgm`, `.stages`, `.wait`: replayable, stored in the records) and
        tiles the matmul as the kernel does (what the cost model's loop features see)
    lowering: annotated function --kernel_text--> nvgpu IR (TMA descriptors, `nvgpu.tma.async.load`,
        `nvgpu.mbarrier.*`, `nvgpu.warpgroup.mma`, `nvgpu.warpgroup.mma.store`) --> NVVM --> PTX

Why a template and not a chain of transform ops: no upstream transform op produces
`nvgpu.warpgroup.mma` in MLIR 22 (the nvgpu transform ops are `rewrite_matmul_as_mma_sync`,
`create_async_groups`, `pipeline_shared_memory_copies`, `rewrite_copy_as_tma`), and the mma.sync
path they do support reached 37% of cuBLAS on an H200 (`../shared/probes/tensorcore/README.md`).
The kernel's structure is fixed; its holes are the block tile (`bm` x `bn`), the consumer
warpgroups along M (`wgm`: each owns `bm/wgm` rows x `bn` columns), the pipeline depth
(`stages`, >= 2), how many warpgroup MMAs stay in flight (`wait`: 0 waits for every k-block's
MMA before refilling its stage; 1 keeps one in flight and refills the stage of the previous one)
the block raster (`group`: 1 = row-major; G = G block rows swept column by column, for L2) and
warp specialization (`ws`: 0 = thread 0 of the first consumer issues the TMA loads after a
block-wide barrier per k-block; 1 = an extra producer warpgroup streams the k-blocks and the
consumers release each stage through an `empty` mbarrier, no block-wide barrier in the loop).

The K step is 64 elements (one 128-byte swizzled row of f16/bf16), the TMA boxes are `bm` x 64
for A and 64 x 64 chunks for B; the accumulators live in registers (at most 128 f32 per thread)
and are stored straight to global memory.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from ansor.space.schedule import Schedule, rejection_sample
from ansor.space.script import ANY, PARAM, ScriptBuilder, ssa
from ansor.space.sketch import Knob, Sketch

#: Element types of A and B the wgmma sketch takes (f32 accumulation and output).
TC_INPUT_TYPES = ("f16", "bf16")
#: K elements per stage (128 bytes of f16/bf16: the 128-byte swizzle's row).
BK = 64
#: Shared memory a block may opt in to on sm_90 (bytes).
MAX_DYNAMIC_SHARED = 227 * 1024
#: f32 accumulators per thread (wgmma keeps them in registers; 255 registers per thread at most).
MAX_ACC_PER_THREAD = 128
#: Registers of one block (sm_90) and a thread's registers besides its accumulators (addresses,
#: loop state, descriptors; measured ~40 in the PTX of these kernels): 4 warpgroups of 128
#: accumulators each cannot launch (every such kernel left its output untouched on an H200).
REGISTERS_PER_SM = 65536
REGS_BESIDES_ACC = 40
#: The attribute prefix the sketch's script puts on the matmul.
ATTR = "ansor.tc"
KNOBS = ("bm", "bn", "wgm", "stages", "wait", "group", "ws")
OPTIONS: dict[str, tuple[int, ...]] = {
    "bm": (64, 128, 256),
    "bn": (64, 128, 256),
    "wgm": (1, 2, 4),
    "stages": (2, 3, 4, 5, 6),
    "wait": (0, 1),
    "group": (1, 4, 8, 16),
    "ws": (0, 1),
}
#: The untuned tensor-core program (the shape the probe measured first).
DEFAULT = {"bm": 128, "bn": 128, "wgm": 1, "stages": 3, "wait": 0, "group": 1, "ws": 0}


@dataclass(frozen=True)
class TcProblem:
    """What the kernel computes: C[m, n] = sum_k A[m, k] * B[k, n] (A, B in `et`, C in f32)."""

    m: int
    n: int
    k: int
    et: str

    def knob(self, name: str) -> str:
        return f"tc.{name}"


def tc_problem_for(task) -> tuple[TcProblem | None, str]:
    """The GEMM of `task` when the wgmma sketch applies (else None and why not)."""
    ins, outs = task.inputs, task.outputs
    if len(ins) != 2 or len(outs) != 1:
        return None, "not a two-input, one-output function"
    a, b, c = ins[0], ins[1], outs[0]
    if a.dtype not in TC_INPUT_TYPES or b.dtype != a.dtype:
        return None, f"inputs are {a.dtype}/{b.dtype}, not f16 or bf16"
    if c.dtype != "f32":
        return None, f"output is {c.dtype}: the wgmma sketch stores f32 accumulators"
    if len(a.shape) != 2 or len(b.shape) != 2 or len(c.shape) != 2:
        return None, "not a 2-D matmul"
    ops = _payload_ops(task.ir)
    if ops != ["arith.constant", "tensor.empty", "linalg.fill", "linalg.matmul"]:
        return None, f"body is {', '.join(ops)}, not a zero-filled linalg.matmul"
    if not _zero_fill(task.ir):
        return None, "the matmul's init is not a zero fill"
    (m, k), (k2, n) = a.shape, b.shape
    if k2 != k or tuple(c.shape) != (m, n):
        return None, f"shapes {a.shape} x {b.shape} -> {c.shape} are not a matmul"
    if m % 64 or n % 64 or k % BK:
        return None, f"{m}x{n}x{k} is not a multiple of 64 in every dimension (guarded tiles not built yet)"
    return TcProblem(m, n, k, a.dtype), "wgmma GEMM"


def _payload_ops(text: str) -> list[str]:
    import re

    body = text[text.index("{", text.index("func.func")):]
    names = re.findall(r"=\s*([a-z_]+\.[a-z_.]+)", body)
    return sorted(set(names), key=names.index)


def _zero_fill(text: str) -> bool:
    import re

    m = re.search(r"(%\S+)\s*=\s*arith\.constant\s+([-0-9.e+]+)\s*:", text)
    return m is not None and float(m.group(2)) == 0.0


def validate_tc(p: TcProblem, v: Mapping[str, int]) -> str | None:
    """Why the annotation `v` cannot run (None when it can)."""
    for name in KNOBS:
        if name not in v:
            return f"missing knob tc.{name}"
        if int(v[name]) not in OPTIONS[name]:
            return f"knob tc.{name}={v[name]} not in its options"
    bm, bn, wgm, stages, wait, _group, ws = (int(v[k]) for k in KNOBS)
    if p.m % bm or p.n % bn:
        return f"block tile {bm}x{bn} does not divide {p.m}x{p.n}"
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
    if p.k // BK < stages:
        return f"{stages} stages exceed the {p.k // BK} k-blocks"
    if stages * stage_bytes(bm, bn) > MAX_DYNAMIC_SHARED:
        return f"{stages} stages of {stage_bytes(bm, bn)} bytes exceed {MAX_DYNAMIC_SHARED} bytes of shared memory"
    if wait and stages < 3:
        return "one MMA in flight needs at least 3 stages"
    return None


def stage_bytes(bm: int, bn: int) -> int:
    return (bm + bn) * BK * 2


class TcSketch(Sketch):
    """The wgmma + TMA GEMM (a template: its script annotates, `kernel_text` builds the kernel)."""

    def __init__(self, name: str, problem: TcProblem) -> None:
        self.name = name
        self.rules = ("tensor-core-wgmma",)
        self.problem = problem
        self.knobs = tuple(Knob(problem.knob(k), OPTIONS[k]) for k in KNOBS)

    @property
    def free_tile_knobs(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.knobs)

    @property
    def untrained_share(self) -> float:
        # ~200 annotations next to the CUDA-core sketch's millions: without a share, random
        # scores hand nearly every first batch to the CUDA-core sketch's offspring.
        return 0.5

    def _values(self, values: Mapping[str, int]) -> dict[str, int]:
        return {k: int(values[self.problem.knob(k)]) for k in KNOBS if self.problem.knob(k) in values}

    def script(self, values: Mapping[str, int] | None = None, *, lower_vectors: bool = True) -> str:
        """Annotates the function with the knobs (what the lowering reads) and tiles the matmul the
        way the kernel does -- blocks of bm x bn, warpgroups of bm/wgm rows, k-blocks of 64 -- so
        the loop features the cost model reads differ between annotations as the kernels do."""
        sb = ScriptBuilder(values)
        p = self.problem
        for k in self.knobs:
            sb.emit(sb.knob_line(k))
        bm, bn = sb.value(p.knob("bm")), sb.value(p.knob("bn"))
        if values is None:
            wm = "{" + p.knob("bm") + "/" + p.knob("wgm") + "}"
        else:
            wm = str(int(values[p.knob("bm")]) // int(values[p.knob("wgm")]))
        sb.emit(f'%f = transform.structured.match ops{{["func.func"]}} in %root : ({ANY}) -> {ANY}')
        for k in KNOBS:
            sb.emit(f'transform.annotate %f "{ATTR}.{k}" = {ssa(p.knob(k))} : {ANY}, {PARAM}')
        sb.emit(f'%mm = transform.structured.match ops{{["linalg.matmul"]}} in %root : ({ANY}) -> {ANY}')
        sb.emit(f"%t1, %blocks = transform.structured.tile_using_forall %mm tile_sizes [{bm}, {bn}] "
                f"(mapping = [#gpu.block<y>, #gpu.block<x>]) : ({ANY}) -> ({ANY}, {ANY})")
        sb.emit(f"%t2, %warpgroups = transform.structured.tile_using_forall %t1 tile_sizes [{wm}, 0] "
                f"(mapping = [#gpu.warpgroup<x>]) : ({ANY}) -> ({ANY}, {ANY})")
        sb.emit(f"%t3, %kloop = transform.structured.tile_using_for %t2 tile_sizes [0, 0, {BK}] "
                f": ({ANY}) -> ({ANY}, {ANY})")
        sb.emit("transform.yield")
        head = [
            "module attributes {transform.with_named_sequence} {",
            f"  // sketch {self.name}: {self.rule} (GPU, sm_90)",
            f"  transform.named_sequence @__transform_main(%root: {ANY} {{transform.consumed}}) {{",
        ]
        return "\n".join(head + sb.lines + ["  }", "}"]) + "\n"

    def validate(self, values: Mapping[str, int]) -> str | None:
        return validate_tc(self.problem, {k: values[self.problem.knob(k)] for k in KNOBS
                                          if self.problem.knob(k) in values})

    def sample(self, rng: random.Random, *, max_tries: int = 4000) -> Schedule:
        return rejection_sample(self, rng, max_tries=max_tries)

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
            return {k: ir.IntegerAttr(op.attributes[f"{ATTR}.{k}"]).value for k in KNOBS}
    return None


def kernel_text(p: TcProblem, v: Mapping[str, int], func_name: str) -> str:
    """The whole module (host function + gpu.launch in nvgpu IR) of the annotated GEMM."""
    bm, bn, wgm, depth, wait, group, ws = (int(v[k]) for k in KNOBS)
    et, M, N, K = p.et, p.m, p.n, p.k
    wm, wn = bm // wgm, bn
    kt = K // BK
    stage = stage_bytes(bm, bn)
    a_bytes = bm * BK * 2
    chunk = BK * 64 * 2  # one 64x64 B chunk
    consts: set[int] = set()

    def c(x: int) -> str:
        consts.add(x)
        return f"%c{x}"

    lines: list[str] = []
    emit = lines.append
    vA, vB = f"memref<{bm}x{BK}x{et}, 3>", f"memref<{BK}x64x{et}, 3>"

    def load(stage_idx: str, kblock: str, pre: str, indent: str) -> None:
        """TMA loads of k-block `kblock` into stage `stage_idx` (SSA names), issued by one thread."""
        emit(f"{indent}%{pre}base = arith.muli {stage_idx}, {c(stage)} : index")
        emit(f"{indent}%{pre}k = arith.muli {kblock}, {c(BK)} : index")
        emit(f"{indent}%{pre}a = memref.view %dyn[%{pre}base][] : memref<?xi8, 3> to {vA}")
        emit(f"{indent}nvgpu.mbarrier.arrive.expect_tx %bar[{stage_idx}], {c(stage)} : !bar")
        emit(f"{indent}nvgpu.tma.async.load %tA[%{pre}k, %m0], %bar[{stage_idx}] to %{pre}a : !tmA, !bar -> {vA}")
        for j in range(bn // 64):
            emit(f"{indent}%{pre}ob{j} = arith.addi %{pre}base, {c(a_bytes + j * chunk)} : index")
            emit(f"{indent}%{pre}b{j} = memref.view %dyn[%{pre}ob{j}][] : memref<?xi8, 3> to {vB}")
            emit(f"{indent}%{pre}n{j} = arith.addi %n0, {c(64 * j)} : index")
            emit(f"{indent}nvgpu.tma.async.load %tB[%{pre}n{j}, %{pre}k], %bar[{stage_idx}] to %{pre}b{j} "
                 f": !tmB, !bar -> {vB}")

    I = "      "
    emit(f"{I}%tid = gpu.thread_id x")
    emit(f"{I}%wg = arith.divui %tid, {c(128)} : index")
    gx, gy = N // bn, M // bm
    if group > 1 and gy > 1:
        # Grouped raster: consecutive blocks sweep `group` block rows column by column, so the
        # B tiles they share are still in L2 (the launch grid stays gx x gy).
        emit(f"{I}%pid0 = arith.muli %by, {c(gx)} : index")
        emit(f"{I}%pid = arith.addi %pid0, %bx : index")
        emit(f"{I}%gid = arith.divui %pid, {c(group * gx)} : index")
        emit(f"{I}%gin = arith.remui %pid, {c(group * gx)} : index")
        emit(f"{I}%first = arith.muli %gid, {c(group)} : index")
        emit(f"{I}%left = arith.subi {c(gy)}, %first : index")
        emit(f"{I}%gm = arith.minui %left, {c(group)} : index")
        emit(f"{I}%rin = arith.remui %gin, %gm : index")
        emit(f"{I}%brow = arith.addi %first, %rin : index")
        emit(f"{I}%bcol = arith.divui %gin, %gm : index")
        emit(f"{I}%m0 = arith.muli %brow, {c(bm)} : index")
        emit(f"{I}%n0 = arith.muli %bcol, {c(bn)} : index")
    else:
        emit(f"{I}%m0 = arith.muli %by, {c(bm)} : index")
        emit(f"{I}%n0 = arith.muli %bx, {c(bn)} : index")
    emit(f"{I}%wgoff = arith.muli %wg, {c(wm * BK * 2)} : index")
    emit(f"{I}%dyn0 = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>")
    emit(f"{I}%dyn = memref.memory_space_cast %dyn0 : memref<?xi8, #gpu.address_space<workgroup>> to memref<?xi8, 3>")
    emit(f"{I}%bar = nvgpu.mbarrier.create -> !bar")
    if ws:
        emit(f"{I}%empty = nvgpu.mbarrier.create -> !bar")
    emit(f"{I}%is0 = arith.cmpi eq, %tid, {c(0)} : index")
    emit(f"{I}scf.if %is0 {{")
    for s_ in range(depth):
        emit(f"{I}  nvgpu.mbarrier.init %bar[{c(s_)}], {c(1)} : !bar")
        if ws:  # released once by each consumer warpgroup
            emit(f"{I}  nvgpu.mbarrier.init %empty[{c(s_)}], {c(wgm)} : !bar")
    emit(f"{I}  nvgpu.tma.prefetch.descriptor %tA : !tmA")
    emit(f"{I}  nvgpu.tma.prefetch.descriptor %tB : !tmB")
    emit(f"{I}}}")
    emit(f"{I}gpu.barrier")
    J = I + "  "
    if ws:
        # Producer: one thread of the extra warpgroup streams every k-block, waiting for the
        # consumers to release a stage (the `empty` barriers) before refilling it.
        emit(f"{I}%isp = arith.cmpi eq, %tid, {c(wgm * 128)} : index")
        emit(f"{I}scf.if %isp {{")
        emit(f"{J}scf.for %i = {c(0)} to {c(kt)} step {c(1)} {{")
        K2 = J + "  "
        emit(f"{K2}%s = arith.remui %i, {c(depth)} : index")
        emit(f"{K2}%again = arith.cmpi uge, %i, {c(depth)} : index")
        emit(f"{K2}scf.if %again {{")
        emit(f"{K2}  %u = arith.divui %i, {c(depth)} : index")
        emit(f"{K2}  %u1 = arith.subi %u, {c(1)} : index")
        emit(f"{K2}  %pu = arith.remui %u1, {c(2)} : index")
        emit(f"{K2}  %ph = arith.cmpi ne, %pu, {c(0)} : index")
        emit(f"{K2}  nvgpu.mbarrier.try_wait.parity %empty[%s], %ph, {c(10000000)} : !bar")
        emit(f"{K2}}}")
        load("%s", "%i", "q", K2)
        emit(f"{J}}}")
        emit(f"{I}}}")
        emit(f"{I}%iscons = arith.cmpi ult, %tid, {c(wgm * 128)} : index")
        emit(f"{I}scf.if %iscons {{")
        I, J = I + "  ", J + "  "
    else:
        emit(f"{I}scf.if %is0 {{")
        for s_ in range(depth):
            load(c(s_), c(s_), f"p{s_}", I + "  ")
        emit(f"{I}}}")
    emit(f"{I}%acc0 = nvgpu.warpgroup.mma.init.accumulator -> !acc")
    emit(f"{I}%res = scf.for %i = {c(0)} to {c(kt)} step {c(1)} iter_args(%acc = %acc0) -> (!acc) {{")
    emit(f"{J}%s = arith.remui %i, {c(depth)} : index")
    emit(f"{J}%u = arith.divui %i, {c(depth)} : index")
    emit(f"{J}%pu = arith.remui %u, {c(2)} : index")
    emit(f"{J}%ph = arith.cmpi ne, %pu, {c(0)} : index")
    emit(f"{J}nvgpu.mbarrier.try_wait.parity %bar[%s], %ph, {c(10000000)} : !bar")
    emit(f"{J}%base = arith.muli %s, {c(stage)} : index")
    emit(f"{J}%offA = arith.addi %base, %wgoff : index")
    emit(f"{J}%offB = arith.addi %base, {c(a_bytes)} : index")
    emit(f"{J}%sa = memref.view %dyn[%offA][] : memref<?xi8, 3> to memref<{wm}x{BK}x{et}, 3>")
    emit(f"{J}%sb = memref.view %dyn[%offB][] : memref<?xi8, 3> to memref<{BK}x{wn}x{et}, 3>")
    emit(f"{J}%da = nvgpu.warpgroup.generate.descriptor %sa, %tA : memref<{wm}x{BK}x{et}, 3>, !tmA -> !dA")
    emit(f"{J}%db = nvgpu.warpgroup.generate.descriptor %sb, %tB : memref<{BK}x{wn}x{et}, 3>, !tmB -> !dB")
    emit(f"{J}%acc2 = nvgpu.warpgroup.mma %da, %db, %acc {{transposeB}} : !dA, !dB, !acc -> !acc")
    emit(f"{J}nvvm.wgmma.wait.group.sync.aligned {wait}")
    j = "%i"
    if wait:  # the MMA of the previous k-block is done: its stage is free
        j = "%j"
        emit(f"{J}%j = arith.subi %i, {c(1)} : index")
    if ws:
        # one thread per consumer warpgroup releases the stage (no block-wide barrier)
        emit(f"{J}%lane = arith.remui %tid, {c(128)} : index")
        emit(f"{J}%leader = arith.cmpi eq, %lane, {c(0)} : index")
        rel = "%leader"
        if wait:
            emit(f"{J}%started = arith.cmpi uge, %i, {c(1)} : index")
            emit(f"{J}%rel = arith.andi %leader, %started : i1")
            rel = "%rel"
        emit(f"{J}scf.if {rel} {{")
        emit(f"{J}  %sj = arith.remui {j}, {c(depth)} : index")
        emit(f"{J}  %tok = nvgpu.mbarrier.arrive %empty[%sj] : !bar -> !nvgpu.mbarrier.token")
        emit(f"{J}}}")
    else:
        emit(f"{J}gpu.barrier")
        emit(f"{J}%nx = arith.addi {j}, {c(depth)} : index")
        emit(f"{J}%more = arith.cmpi ult, %nx, {c(kt)} : index")
        emit(f"{J}%go = arith.andi %more, %is0 : i1")
        if wait:
            emit(f"{J}%started = arith.cmpi uge, %i, {c(1)} : index")
            emit(f"{J}%go1 = arith.andi %go, %started : i1")
        emit(f"{J}scf.if {'%go1' if wait else '%go'} {{")
        emit(f"{J}  %sj = arith.remui {j}, {c(depth)} : index")
        load("%sj", "%nx", "r", J + "  ")
        emit(f"{J}}}")
    emit(f"{J}scf.yield %acc2 : !acc")
    emit(f"{I}}}")
    if wait:
        emit(f"{I}nvvm.wgmma.wait.group.sync.aligned 0")
    cview = f"memref<{wm}x{wn}xf32, strided<[{N}, 1], offset: ?>>"
    # Upstream `nvgpu.warpgroup.mma.store` (MLIR 22) places rows by the *block's* warp index
    # (thread id / 32), not the warp's index within its warpgroup: warpgroup g's fragment already
    # lands g*64 rows down. Its view starts at m0 + g*(wm - 64) so the rows come out at m0 + g*wm.
    emit(f"{I}%wgfix = arith.muli %wg, {c(wm - 64)} : index")
    emit(f"{I}%mst = arith.addi %m0, %wgfix : index")
    emit(f"{I}%Cs = memref.subview %C[%mst, %n0] [{wm}, {wn}] [1, 1] : memref<{M}x{N}xf32> to {cview}")
    emit(f"{I}nvgpu.warpgroup.mma.store %res, %Cs : !acc to {cview}")
    if ws:
        I = I[:-2]
        emit(f"{I}}}")
    emit(f"{I}gpu.terminator")
    cdecl = [f"{I}%c{x} = arith.constant {x} : index" for x in sorted(consts)]
    tm = "swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none"
    return f"""!bar = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = {depth}>
!tmA = !nvgpu.tensormap.descriptor<tensor = {vA}, {tm}>
!tmB = !nvgpu.tensormap.descriptor<tensor = {vB}, {tm}>
!acc = !nvgpu.warpgroup.accumulator<fragmented = vector<{wm}x{wn}xf32>>
!dA = !nvgpu.warpgroup.descriptor<tensor = memref<{wm}x{BK}x{et}, 3>>
!dB = !nvgpu.warpgroup.descriptor<tensor = memref<{BK}x{wn}x{et}, 3>>
module {{
  func.func @{func_name}(%A: memref<{M}x{K}x{et}>, %B: memref<{K}x{N}x{et}>, %C: memref<{M}x{N}xf32>) attributes {{llvm.emit_c_interface}} {{
    %h1 = arith.constant 1 : index
    %h64 = arith.constant 64 : index
    %hbm = arith.constant {bm} : index
    %hgx = arith.constant {N // bn} : index
    %hgy = arith.constant {M // bm} : index
    %hthreads = arith.constant {128 * (wgm + ws)} : index
    %smem = arith.constant {depth * stage} : i32
    %uA = memref.cast %A : memref<{M}x{K}x{et}> to memref<*x{et}>
    %uB = memref.cast %B : memref<{K}x{N}x{et}> to memref<*x{et}>
    %tA = nvgpu.tma.create.descriptor %uA box[%hbm, %h64] : memref<*x{et}> -> !tmA
    %tB = nvgpu.tma.create.descriptor %uB box[%h64, %h64] : memref<*x{et}> -> !tmB
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %hgx, %gy = %hgy, %gz = %h1) threads(%tx, %ty, %tz) in (%sx = %hthreads, %sy = %h1, %sz = %h1) dynamic_shared_memory_size %smem {{
{chr(10).join(cdecl)}
{chr(10).join(lines)}
    }}
    return
  }}
}}
"""

"""GPU lowering: a task's payload + a GPU transform script -> PTX + a JIT-compiled host program.

    SearchTask.ir --apply script (tile to blocks/threads, shared-memory copies, bufferize,
        gpu.launch)--> memref + gpu.launch --workgroup attributions, out-params, auto-unroll-->
        --gpu-lower-to-nvvm-pipeline (NVVM -> PTX, `gpu-module-to-binary format=isa`)-->
        host LLVM + embedded PTX --ExecutionEngine + libmlir_cuda_runtime.so--> CudaKernel

Runs inside measurement worker processes, like `lowering.py` (MLIR aborts on internal assertion
failures). Buffers live on the device: `CudaKernel` allocates them through the MLIR CUDA runtime's
own entry points (`mgpuMemAlloc`, `mgpuMemcpy`, ...) and puts the device pointers into the memref
descriptors, so nothing here needs PyTorch or CuPy. Timing is a native loop around the kernel
(`lowering.BENCH_FUNC`); each call launches and synchronizes (the MLIR CUDA runtime makes a stream
per call), so a measured latency includes one launch + synchronization overhead (a few µs).

`emit_ptx` stops at the PTX text and needs no GPU or CUDA driver: CI tests the GPU lowering with it.
"""

from __future__ import annotations

import ctypes
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from mlir import ir, passmanager

from .lowering import (
    BENCH_FUNC,
    LoweringError,
    _add_bench_wrapper,
    _diag_text,
    apply_script,
    parse_payload,
)
from .task import SearchTask

#: Default architecture when the device cannot be asked (H100/H200 are sm_90).
DEFAULT_ARCH = "sm_90"

_AFTER_SCRIPT = (
    "canonicalize,cse,"
    "buffer-results-to-out-params{hoist-static-allocs modify-public-functions},"
    "canonicalize,cse"
)

#: Shared memory as an integer memory space: the NVVM lowering maps `3` directly, while
#: `#gpu.address_space<workgroup>` on host-side passes fails the LLVM type conversion.
_WORKGROUP = "3"


def _nvvm_pipeline(arch: str, fmt: str) -> str:
    """Host + device lowering (upstream `gpu-lower-to-nvvm-pipeline`'s steps, plus what our scripts
    leave behind: linalg ops on memrefs, `ub.poison`)."""
    return (
        "convert-linalg-to-loops,gpu-kernel-outlining,convert-nvgpu-to-nvvm,"
        "convert-vector-to-scf{full-unroll=true},convert-scf-to-cf,convert-nvvm-to-llvm,convert-func-to-llvm,"
        f"expand-strided-metadata,nvvm-attach-target{{chip={arch} O=3}},lower-affine,convert-arith-to-llvm,"
        "convert-index-to-llvm,canonicalize,cse,"
        "gpu.module(convert-vector-to-llvm,convert-gpu-to-nvvm,convert-ub-to-llvm,canonicalize,cse,reconcile-unrealized-casts),"
        "gpu-to-llvm,convert-math-to-llvm,convert-ub-to-llvm,reconcile-unrealized-casts,"
        f"gpu-module-to-binary{{format={fmt}}},canonicalize,cse"
    )


def _run(module: ir.Module, pipeline: str, stage: str) -> None:
    try:
        passmanager.PassManager.parse(f"builtin.module({pipeline})").run(module.operation)
    except ir.MLIRError as exc:
        raise LoweringError(stage, _diag_text(exc)) from None


def _walk(root: ir.Operation, name: str) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == name:
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found


def _is_workgroup(t: ir.Type) -> bool:
    if not isinstance(t, ir.MemRefType):
        return False
    ms = ir.MemRefType(t).memory_space
    return ms is not None and (str(ms) in ("3", "3 : i64") or "workgroup" in str(ms))


def workgroup_allocs_to_attributions(module: ir.Module) -> int:
    """Turn `memref.alloc` of shared memory inside a `gpu.launch` into workgroup attributions.

    `bufferize_to_allocation {memory_space = #gpu.address_space<workgroup>}` places the shared
    tiles' allocations where the copies are (inside the launch); the NVVM lowering only gives
    shared memory to the launch's workgroup attributions (they become `addrspace(3)` globals of the
    kernel). Returns the number of allocations moved. Shared-memory deallocations are dropped.
    """
    moved = 0
    for launch in _walk(module.operation, "gpu.launch"):
        body = launch.regions[0].blocks[0]
        if "workgroup_attributions" in launch.attributes:
            n_wg = ir.IntegerAttr(launch.attributes["workgroup_attributions"]).value
        else:
            n_wg = 0
        n_private = len(body.arguments) - 12 - n_wg
        if n_private:
            raise LoweringError("lower", "gpu.launch with private attributions is not supported")
        for alloc in _walk(launch, "memref.alloc"):
            t = alloc.results[0].type
            if not _is_workgroup(t):
                continue
            if "ansor.smem" not in alloc.attributes:
                # A buffer bufferization made inside a thread's code, in shared memory because its
                # source is: all threads of the block would share it.
                raise LoweringError("lower", f"per-thread buffer {t} in shared memory (not a cached tile)")
            mt = ir.MemRefType(t)
            if not mt.has_static_shape:
                raise LoweringError("lower", f"dynamic shared-memory allocation {t}")
            wg_type = ir.MemRefType.get(mt.shape, mt.element_type, memory_space=ir.Attribute.parse("3 : i64"))
            arg = body.add_argument(wg_type, ir.Location.unknown())
            for use in list(alloc.results[0].uses):
                if use.owner.name == "memref.dealloc":
                    use.owner.erase()
            if wg_type != t:
                # Same layout, memory space spelled `3`: convert the value for the old users.
                with ir.InsertionPoint(alloc):
                    cast = ir.Operation.create("memref.memory_space_cast", results=[t], operands=[arg])
                alloc.results[0].replace_all_uses_with(cast.results[0])
            else:
                alloc.results[0].replace_all_uses_with(arg)
            alloc.erase()
            n_wg += 1
            moved += 1
        if n_wg:
            launch.attributes["workgroup_attributions"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), n_wg)
    return moved


def copies_to_linalg(module: ir.Module) -> int:
    """`memref.copy` inside a kernel -> `linalg.copy` (lowered to loops later): the NVVM lowering
    turns a strided `memref.copy` into a call to the host runtime's `memrefCopy`, which does not
    exist on the device. (Bufferization leaves such copies around rank-reducing slices.)"""
    from mlir.dialects import linalg

    n = 0
    for launch in _walk(module.operation, "gpu.launch"):
        for cp in _walk(launch, "memref.copy"):
            with ir.InsertionPoint(cp), cp.location:
                linalg.copy(cp.operands[0], outs=[cp.operands[1]])
            cp.erase()
            n += 1
    return n


def own_fill_destinations(module: ir.Module) -> None:
    """Give every `linalg.fill` its own `tensor.empty` (CSE merges it with the consumer's): a fused
    initialiser whose destination is the output's tile would make the shared-memory accumulator
    start with a (useless) copy of the output."""
    for fill in _walk(module.operation, "linalg.fill"):
        dest = fill.operands[1]
        owner = dest.owner
        if not isinstance(owner, ir.Operation) and hasattr(owner, "operation"):
            owner = owner.operation
        if getattr(owner, "name", "") != "tensor.empty" or len(list(dest.uses)) < 2:
            continue
        clone = owner.clone(ir.InsertionPoint(fill))
        fill.operands[1] = clone.results[0]


#: Alignment (bytes) of shared tiles. (Global buffers would need it too for 128-bit loads:
#: `memref.assume_alignment` in the kernel is dropped by `expand-strided-metadata` in MLIR 22.)
BUFFER_ALIGN = 16


def align_workgroup_buffers(module: ir.Module) -> None:
    """`llvm.align` on every outlined kernel's workgroup attributions (shared tiles)."""
    for f in _walk(module.operation, "gpu.func"):
        if "workgroup_attributions" not in f.attributes:
            continue
        n = ir.IntegerAttr(f.attributes["workgroup_attributions"]).value
        if n:
            f.attributes["workgroup_attrib_attrs"] = ir.Attribute.parse(
                "[" + ", ".join([f"{{llvm.align = {BUFFER_ALIGN} : i64}}"] * n) + "]")


def shared_memory_bytes(module: ir.Module) -> int:
    """Largest static shared memory (workgroup attributions) of any gpu.launch, in bytes."""
    best = 0
    for launch in _walk(module.operation, "gpu.launch"):
        body = launch.regions[0].blocks[0]
        total = 0
        for a in list(body.arguments)[12:]:
            mt = ir.MemRefType(a.type)
            total += int(np.prod(mt.shape)) * (mt.element_type.width // 8)
        best = max(best, total)
    return best


def _check_host_allocs(module: ir.Module) -> None:
    """Every buffer a kernel touches must be device memory: a host `memref.alloc` left outside the
    launches (an intermediate tensor between two kernels) is not supported yet."""
    for f in module.body.operations:
        if f.operation.name != "func.func":
            continue
        launches = _walk(f.operation, "gpu.launch")
        if not launches:
            continue
        for alloc in _walk(f.operation, "memref.alloc"):
            if not _is_workgroup(alloc.results[0].type):
                raise LoweringError("lower", f"intermediate buffer {alloc.results[0].type} between GPU "
                                             "kernels (host allocation): not supported on the cuda target")
        # Host-side compute left outside the launches would read device pointers on the host.
        for block in f.operation.regions[0].blocks:
            for op in block.operations:
                n = op.operation.name
                if n.startswith(("linalg.", "vector.", "scf.")) or n == "memref.copy":
                    raise LoweringError("lower", f"'{n}' outside any gpu.launch (not mapped to the GPU)")


def lower_to_gpu_ir(task: SearchTask, script: str) -> ir.Module:
    """Apply the script and the fix-ups; the module still holds gpu.launch ops (current context)."""
    module = parse_payload(task)
    own_fill_destinations(module)
    apply_script(module, script)
    _run(module, _AFTER_SCRIPT, "lower")
    copies_to_linalg(module)
    workgroup_allocs_to_attributions(module)
    _check_host_allocs(module)
    return module


def _lower_module(task: SearchTask, script: str, arch: str, fmt: str, *, bench: bool) -> ir.Module:
    from . import _native

    _native.register_everything()
    module = lower_to_gpu_ir(task, script)
    if bench:
        _add_bench_wrapper(module, task.func_name)
    _run(module, "ansor-auto-unroll,canonicalize", "lower")
    _run(module, "convert-linalg-to-loops,gpu-kernel-outlining", "lower")
    align_workgroup_buffers(module)
    _run(module, _nvvm_pipeline(arch, fmt), "lower")
    return module


def emit_ptx(task: SearchTask, script: str, *, arch: str = DEFAULT_ARCH) -> str:
    """The PTX of the scheduled task's kernels (no GPU needed). Raises `LoweringError`."""
    with ir.Context(), ir.Location.unknown():
        module = _lower_module(task, script, arch, "isa", bench=False)
        text = str(module)
    m = re.search(r'assembly = "((?:[^"\\]|\\.)*)"', text) or re.search(r'bin = "((?:[^"\\]|\\.)*)"', text)
    if m is None:
        raise LoweringError("lower", "no gpu.binary in the lowered module")
    raw = m.group(1)
    # MLIR escapes non-printable bytes as \XX (hex).
    return re.sub(r"\\([0-9A-Fa-f]{2})", lambda g: chr(int(g.group(1), 16)), raw)


# ----------------------------------------------------------------------------------------------
# Running on the device


@functools.cache
def cuda_runtime_libs() -> tuple[str, ...]:
    """`libmlir_cuda_runtime.so` of the MLIR installation: all the host code calls. (Not
    `libmlir_c_runner_utils.so`: the GPU host's bundle lacks its `libmlir_apfloat_wrappers.so`
    dependency, and the host side of a GPU program needs none of it.)"""
    import mlir

    lib = Path(next(iter(mlir.__path__))) / "lib" / "libmlir_cuda_runtime.so"
    if not lib.is_file():
        raise LoweringError("jit", f"MLIR CUDA runtime not found: {lib}")
    return (str(lib),)


@functools.cache
def _rt() -> ctypes.CDLL:
    lib = ctypes.CDLL(cuda_runtime_libs()[0], mode=ctypes.RTLD_GLOBAL)
    lib.mgpuMemAlloc.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_bool]
    lib.mgpuMemAlloc.restype = ctypes.c_void_p
    lib.mgpuMemFree.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.mgpuMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    lib.mgpuStreamCreate.argtypes = []
    lib.mgpuStreamCreate.restype = ctypes.c_void_p
    lib.mgpuStreamSynchronize.argtypes = [ctypes.c_void_p]
    lib.mgpuStreamDestroy.argtypes = [ctypes.c_void_p]
    return lib


@functools.cache
def _primary_context() -> tuple[ctypes.CDLL, ctypes.c_void_p]:
    cuda = ctypes.CDLL("libcuda.so.1")
    cuda.cuInit(0)
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    cuda.cuDeviceGet(ctypes.byref(dev), 0)
    cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)  # the context the MLIR runtime uses
    return cuda, ctx


def device_status() -> int:
    """CUresult of synchronizing the device (0: fine). A kernel fault (illegal or misaligned
    address, ...) is sticky: every later CUDA call of this process fails."""
    cuda, ctx = _primary_context()
    cuda.cuCtxPushCurrent_v2(ctx)
    try:
        return int(cuda.cuCtxSynchronize())
    finally:
        cuda.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))


def _check_device(what: str) -> None:
    status = device_status()
    if 700 <= status < 800:  # CUDA_ERROR_ILLEGAL_ADDRESS .. LAUNCH_FAILED ...: sticky
        import os
        import sys

        # The process's CUDA context is dead: end the worker so the measurer starts a fresh one
        # (the candidate becomes a `crash` record); in any other process, raise.
        if os.environ.get("ANSOR_WORKER") == "1":
            sys.stderr.write(f"error: CUDA error {status} after {what}: kernel fault, context lost\n")
            sys.stderr.flush()
            os._exit(70)
        raise RuntimeError(f"CUDA error {status} after {what}")


class _DeviceBuffer:
    """A device allocation shaped like a numpy array, described by a memref descriptor."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        from mlir.runtime import as_ctype, make_nd_memref_descriptor

        self.shape, self.dtype = shape, np.dtype(dtype)
        self.nbytes = int(np.prod(shape)) * self.dtype.itemsize
        self.ptr = _rt().mgpuMemAlloc(max(self.nbytes, 4), None, False)
        if not self.ptr:
            raise MemoryError(f"device allocation of {self.nbytes} bytes failed")
        desc_t = make_nd_memref_descriptor(len(shape), as_ctype(self.dtype))
        d = desc_t()
        d.allocated = self.ptr  # an integer field
        d.aligned = ctypes.cast(ctypes.c_void_p(self.ptr), dict(desc_t._fields_)["aligned"])
        d.offset = 0
        strides = []
        acc = 1
        for s in reversed(shape):
            strides.append(acc)
            acc *= s
        if shape:
            d.shape = (ctypes.c_longlong * len(shape))(*shape)
            d.strides = (ctypes.c_longlong * len(shape))(*reversed(strides))
        self.desc = d

    def _copy(self, dst: int, src: int) -> None:
        rt = _rt()
        stream = rt.mgpuStreamCreate()
        rt.mgpuMemcpy(dst, src, self.nbytes, stream)
        rt.mgpuStreamSynchronize(stream)
        rt.mgpuStreamDestroy(stream)

    def upload(self, a: np.ndarray) -> None:
        a = np.ascontiguousarray(a, dtype=self.dtype)
        self._copy(self.ptr, a.ctypes.data)

    def download(self) -> np.ndarray:
        out = np.empty(self.shape, dtype=self.dtype)
        self._copy(out.ctypes.data, self.ptr)
        return out

    def free(self) -> None:
        if self.ptr:
            _rt().mgpuMemFree(self.ptr, None)
            self.ptr = None


@dataclass
class CudaKernel:
    """A JIT-compiled task whose kernels run on the GPU; same interface as `lowering.CompiledKernel`
    (`run`, `time`, `alloc_outputs`), with numpy in and out (copied to and from the device)."""

    engine: object
    task: SearchTask
    _bufs: dict = field(default_factory=dict)

    def alloc_outputs(self) -> list[np.ndarray]:
        return [np.zeros(s.shape, dtype=s.numpy_dtype()) for s in self.task.outputs]

    def _buffers(self, inputs: list[np.ndarray]) -> list[_DeviceBuffer]:
        specs = list(self.task.inputs) + list(self.task.outputs)
        key = id(inputs)
        if key not in self._bufs:
            for old in self._bufs.values():
                for b in old[1]:
                    b.free()
            self._bufs.clear()
            bufs = [_DeviceBuffer(s.shape, np.dtype(s.numpy_dtype())) for s in specs]
            for b, a in zip(bufs, inputs, strict=False):
                b.upload(a)
            self._bufs[key] = (inputs, bufs)  # keep `inputs` alive so its id stays unique
        return self._bufs[key][1]

    def _args(self, bufs: list[_DeviceBuffer]) -> list:
        return [ctypes.pointer(ctypes.pointer(b.desc)) for b in bufs]

    def run(self, inputs: list[np.ndarray], outputs: list[np.ndarray] | None = None) -> list[np.ndarray]:
        if len(inputs) != len(self.task.inputs):
            raise ValueError(f"{self.task.func_name}: expected {len(self.task.inputs)} inputs, got {len(inputs)}")
        bufs = self._buffers(inputs)
        self.engine.invoke(self.task.func_name, *self._args(bufs))
        _check_device("running the kernel")
        outs = [b.download() for b in bufs[len(self.task.inputs):]]
        if outputs is not None:
            for o, r in zip(outputs, outs, strict=True):
                o[...] = r
            return outputs
        return outs

    def time(self, inputs: list[np.ndarray], number: int) -> float:
        """Seconds for `number` back-to-back calls (launch + kernel + synchronize each), one native loop."""
        import time

        bufs = self._buffers(inputs)
        n = ctypes.c_longlong(number)
        args = self._args(bufs)
        t0 = time.perf_counter()
        self.engine.invoke(BENCH_FUNC, *args, ctypes.pointer(n))
        elapsed = time.perf_counter() - t0
        _check_device("timing the kernel")
        return elapsed

    def __del__(self) -> None:
        try:
            for _, bufs in self._bufs.values():
                for b in bufs:
                    b.free()
        except Exception:  # noqa: BLE001, S110 -- interpreter shutdown: nothing left to free
            pass


def compile_task_cuda(task: SearchTask, script: str | None, *, arch: str | None = None) -> CudaKernel:
    """Apply `script` (None: the default GPU schedule, see `gpu_rules.default_script`), lower to
    PTX and JIT the host side. Raises `LoweringError`."""
    from mlir.execution_engine import ExecutionEngine

    from .gpu_rules import default_script

    arch = arch or device_arch()
    if script is None:
        script = default_script(task)
    with ir.Context(), ir.Location.unknown():
        module = _lower_module(task, script, arch, "isa", bench=True)
        try:
            _rt()
            engine = ExecutionEngine(module, opt_level=3, shared_libs=list(cuda_runtime_libs()))
            engine.initialize()  # runs the global constructors that load the GPU module
        except RuntimeError as exc:
            raise LoweringError("jit", str(exc).splitlines()[0]) from None
    return CudaKernel(engine, task)


@functools.cache
def device_arch() -> str:
    """`sm_XY` of GPU 0 via the CUDA driver; `DEFAULT_ARCH` when there is no driver or device."""
    import os

    env = os.environ.get("ANSOR_CUDA_ARCH")
    if env:
        return env
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        if cuda.cuInit(0) != 0:
            return DEFAULT_ARCH
        dev = ctypes.c_int()
        if cuda.cuDeviceGet(ctypes.byref(dev), 0) != 0:
            return DEFAULT_ARCH
        major, minor = ctypes.c_int(), ctypes.c_int()
        cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)  # COMPUTE_CAPABILITY_MAJOR
        cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)  # COMPUTE_CAPABILITY_MINOR
        return f"sm_{major.value}{minor.value}"
    except OSError:
        return DEFAULT_ARCH


def has_cuda_device() -> bool:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        n = ctypes.c_int()
        return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(n)) == 0 and n.value > 0
    except OSError:
        return False

"""The CUDA side of a compiled GPU program: device buffers, the kernel object the measurer times,
and what the device is (`device_arch`, `has_cuda_device`).

    lowered module --ExecutionEngine + libmlir_cuda_runtime.so--> CudaKernel
    CudaKernel.run(inputs, outputs=poisoned) --upload, launch, download--> outputs
    CudaKernel.time(inputs, n) --native loop of n launches--> seconds

Buffers are allocated through the MLIR CUDA runtime's own entry points (`mgpuMemAlloc`,
`mgpuMemcpy`, ...), so nothing here needs PyTorch or CuPy. A program of several kernels takes
its intermediates as trailing arguments after its outputs, its **workspace**
(`ansor-gpu-device-intermediates`; their types in the lowered module's `lowering.WORKSPACE_ATTR`):
`CudaKernel` allocates them once, on the first call, passes them to every call (the network
runner too) and frees them with itself; nothing is allocated per call. A verifying `run` (given
poisoned outputs) poisons the workspace too, so a kernel that reads an intermediate element no
kernel wrote fails.

Per verifying run the device work stays on the device where it can: an output poisoned with one
sentinel (every element the same bytes, `uniform_element`) and the workspace's 0xFF bytes are
written by `mgpuMemset32`/`mgpuMemset16`, not uploaded, and outputs are downloaded straight into
the caller's arrays. In a measurement worker (`config.IN_WORKER`) the kernels of one task, measured
one after another, share the device inputs and outputs (`_TaskBuffers`): the inputs are uploaded
once per task, kept in a pristine device copy, and restored from it (device to device) before
every verifying run and for every new kernel.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from ansor.core.mlir import BENCH_FUNC, LoweringError
from ansor.core.task import SearchTask, TensorSpec
from ansor.targets.cuda.params import DEFAULT_ARCH
from ansor import config

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
def load_cuda_runtime() -> ctypes.CDLL:
    lib = ctypes.CDLL(cuda_runtime_libs()[0], mode=ctypes.RTLD_GLOBAL)
    lib.mgpuMemAlloc.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_bool]
    lib.mgpuMemAlloc.restype = ctypes.c_void_p
    lib.mgpuMemFree.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.mgpuMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    # CudaRuntimeWrappers.cpp (MLIR 22): cuMemsetD32Async / cuMemsetD16Async, `count` elements
    lib.mgpuMemset32.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p]
    lib.mgpuMemset16.argtypes = [ctypes.c_void_p, ctypes.c_ushort, ctypes.c_size_t, ctypes.c_void_p]
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
        if config.IN_WORKER:
            sys.stderr.write(f"error: CUDA error {status} after {what}: kernel fault, context lost\n")
            sys.stderr.flush()
            os._exit(70)
        raise RuntimeError(f"CUDA error {status} after {what}")


def uniform_element(a: np.ndarray) -> bytes | None:
    """The bytes of `a`'s element when every element of `a` has exactly these bytes (an output
    filled with a verification sentinel: NaN compares by its bits here), else None. A non-uniform
    array is usually rejected by a sample of ~64 elements; a uniform one costs one read-only pass
    in chunks (no full-size temporary; 0.35 ms for 6 MB on the 2-core VM, a host copy of it 0.75)."""
    if a.size == 0 or not a.flags.c_contiguous or a.dtype.itemsize not in (1, 2, 4, 8):
        return None
    u = a.reshape(-1).view(f"u{a.dtype.itemsize}")
    first = u[0]
    if not (u[:: max(1, u.size // 64)] == first).all() or u[-1] != first:
        return None
    element = u[:1].tobytes()
    if a.nbytes % 8 == 0 and 8 % len(element) == 0:  # compare 8 bytes at a time
        u, first = a.reshape(-1).view(np.uint64), np.frombuffer(element * (8 // len(element)), np.uint64)[0]
    step = 1 << 18
    for i in range(0, u.size, step):
        if not (u[i:i + step] == first).all():
            return None
    return element


def memset_call(element: bytes, nbytes: int) -> tuple[int, int, int] | None:
    """(bits, value, count) of the `mgpuMemset32` (bits 32) or `mgpuMemset16` (16) call that fills
    `nbytes` with the repeated `element` (an element's bytes in memory order); None when neither
    can: an element of 8 bytes with two different halves (f64 NaN, int64 minimum), or a size
    that is not a whole number of 16-bit words."""
    n = len(element)
    if n == 0 or nbytes % n:
        return None
    for width in (4, 2):
        if nbytes % width:
            continue
        if n <= width:
            if width % n:
                continue
            word = element * (width // n)
        elif n % width or element != element[:width] * (n // width):
            continue
        else:
            word = element[:width]
        return 8 * width, int.from_bytes(word, "little"), nbytes // width  # the GPU is little-endian
    return None


@functools.cache
def _copy_stream() -> int:
    """The stream every host-side copy and fill goes through (created once per process; each
    operation synchronises it before returning, so nothing is in flight between calls)."""
    return load_cuda_runtime().mgpuStreamCreate()


class _DeviceBuffer:
    """A device allocation shaped like a numpy array, described by a memref descriptor."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        from mlir.runtime import as_ctype, make_nd_memref_descriptor

        self.shape, self.dtype = shape, np.dtype(dtype)
        self.nbytes = int(np.prod(shape)) * self.dtype.itemsize
        self.ptr = load_cuda_runtime().mgpuMemAlloc(max(self.nbytes, 4), None, False)
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
        rt = load_cuda_runtime()
        stream = _copy_stream()
        rt.mgpuMemcpy(dst, src, self.nbytes, stream)
        rt.mgpuStreamSynchronize(stream)

    def fill(self, element: bytes) -> bool:
        """Every element `element` (its bytes), by a memset on the device; False (nothing written)
        where no memset can write it (`memset_call`)."""
        call = memset_call(element, self.nbytes)
        if call is None:
            return False
        bits, value, count = call
        rt = load_cuda_runtime()
        stream = _copy_stream()
        (rt.mgpuMemset32 if bits == 32 else rt.mgpuMemset16)(self.ptr, value, count, stream)
        rt.mgpuStreamSynchronize(stream)
        return True

    def upload(self, a: np.ndarray) -> None:
        """`a`'s contents onto the device: filled on the device when all its elements are one
        value (a verification's poisoned output, `uniform_element`), else copied."""
        a = np.ascontiguousarray(a, dtype=self.dtype)
        if a.nbytes == self.nbytes:
            element = uniform_element(a)
            if element is not None and self.fill(element):
                return
        self._copy(self.ptr, a.ctypes.data)

    def copy_from(self, other: _DeviceBuffer) -> None:
        """`other`'s contents (same size), device to device."""
        self._copy(self.ptr, other.ptr)

    def download(self, into: np.ndarray | None = None) -> np.ndarray:
        """The contents as a fresh array, or copied straight into `into` when it can take them
        (`takes`) and then returned."""
        out = into if into is not None and self.takes(into) else np.empty(self.shape, dtype=self.dtype)
        self._copy(out.ctypes.data, self.ptr)
        return out

    def takes(self, a: np.ndarray) -> bool:
        """Whether `a` can receive a download as it is: C-contiguous, writeable, this shape and dtype."""
        return (a.flags.c_contiguous and a.flags.writeable and tuple(a.shape) == tuple(self.shape)
                and a.dtype == self.dtype)

    def poison(self) -> None:
        """Every byte 0xFF: NaN in a float buffer, -1 in an integer one."""
        if self.fill(b"\xff"):
            return
        junk = np.full(max(self.nbytes, 1), 0xFF, dtype=np.uint8)
        self._copy(self.ptr, junk.ctypes.data)

    def free(self) -> None:
        if self.ptr:
            load_cuda_runtime().mgpuMemFree(self.ptr, None)
            self.ptr = None


def write_back(outs: list[np.ndarray], outputs: list[np.ndarray] | None) -> list[np.ndarray]:
    """The downloaded `outs`, copied into the caller's `outputs` when it gave some."""
    if outputs is None:
        return outs
    for o, r in zip(outputs, outs, strict=True):
        if r is not o:  # not already downloaded into it
            o[...] = r
    return outputs


def _download(buf: _DeviceBuffer, into: np.ndarray | None) -> np.ndarray:
    """`buf`'s contents, straight into `into` where it takes them (`_DeviceBuffer.takes`), else a
    fresh array that `write_back` copies. A buffer without a device pointer (a test double of the
    plain `download()` interface) downloads the plain way."""
    if into is not None and getattr(buf, "ptr", None) and buf.takes(into):
        return buf.download(into)
    return buf.download()


class _TaskBuffers:
    """One task's device buffers in a measurement worker, shared by the kernels of the task that
    it measures one after another: the inputs (uploaded once, kept in a pristine copy), a working
    copy of them that the kernels get, and the outputs. The working inputs are restored from the
    pristine copy (device to device: ~µs) before every verifying run and whenever another kernel
    uses them, so a kernel that wrote its inputs (lowering marks them read-only,
    `core.mlir._read_only_arguments`, so only by a wrong out-of-bounds store) cannot reach the
    next run's verification."""

    def __init__(self, task: SearchTask, inputs: list[np.ndarray]) -> None:
        self.inputs = inputs  # kept alive: its id, in the cache's key, stays unique
        specs = [*task.inputs, *task.outputs]
        self.pristine = [_DeviceBuffer(s.shape, np.dtype(s.numpy_dtype())) for s in task.inputs]
        for b, a in zip(self.pristine, inputs, strict=False):
            b.upload(a)
        self.bufs = [_DeviceBuffer(s.shape, np.dtype(s.numpy_dtype())) for s in specs]
        self.user = -1  # the serial of the kernel that ran on them last (restore for another)

    def restore(self) -> None:
        for w, p in zip(self.bufs, self.pristine, strict=False):
            w.copy_from(p)

    def free(self) -> None:
        for b in [*self.pristine, *self.bufs]:
            b.free()


#: Input sets a worker keeps on the device (`_TaskBuffers`), least recently used dropped first:
#: the reference's and the candidates' of the task being tuned.
SHARED_BUFFER_SETS = 2
_shared: OrderedDict[tuple[str, int], _TaskBuffers] = OrderedDict()
_serials = itertools.count()


def _shared_buffers(task: SearchTask, inputs: list[np.ndarray]) -> _TaskBuffers:
    key = (task.hash, id(inputs))
    if key in _shared:
        _shared.move_to_end(key)
        return _shared[key]
    while len(_shared) >= SHARED_BUFFER_SETS:
        _shared.popitem(last=False)[1].free()
    _shared[key] = _TaskBuffers(task, inputs)
    return _shared[key]


@functools.cache
def runtime_lib() -> ctypes.CDLL | None:
    """Our native library's deferred-synchronisation entry points (capi/GpuRuntime.cpp; None: a
    library without them)."""
    from ansor.core import native as _native

    try:
        lib = ctypes.CDLL(str(_native.find_library()))
        lib.ansorDeferSynchronize.argtypes = [ctypes.c_bool]
        lib.ansorSynchronizeReused.argtypes = []
        lib.ansorStreamSynchronizeDeferrable.argtypes = [ctypes.c_void_p]
    except (OSError, AttributeError):
        return None
    return lib


@contextlib.contextmanager
def deferred_synchronisation(lib: ctypes.CDLL | None):
    """Launches inside the block do not synchronise (`ansorDeferSynchronize`); the thread's
    stream is synchronised once on the way out. `lib` None (no deferrable runtime): a no-op."""
    if lib is None:
        yield
        return
    lib.ansorDeferSynchronize(True)
    try:
        yield
    finally:
        lib.ansorDeferSynchronize(False)
        lib.ansorSynchronizeReused()


@dataclass
class CudaKernel:
    """A JIT-compiled task whose kernels run on the GPU; same interface as `lowering.CompiledKernel`
    (`run`, `time`, `alloc_outputs`), with numpy in and out (copied to and from the device)."""

    engine: object
    task: SearchTask
    #: its launches synchronise through `ansorStreamSynchronizeDeferrable` (`lowering._jit`), so
    #: `time` can queue its calls and synchronise once
    deferrable: bool = False
    #: the trailing arguments after the outputs: intermediates between its kernels, allocated
    #: once (`workspace_buffers`) and passed to every call (module docstring)
    workspace: tuple[TensorSpec, ...] = ()
    _bufs: dict = field(default_factory=dict)
    _ws: list = field(default_factory=list)
    #: tells this kernel from others sharing a task's buffers (`_TaskBuffers.user`)
    _serial: int = field(default_factory=lambda: next(_serials), init=False)

    def alloc_outputs(self) -> list[np.ndarray]:
        return [np.zeros(s.shape, dtype=s.numpy_dtype()) for s in self.task.outputs]

    def workspace_buffers(self) -> list[_DeviceBuffer]:
        """The workspace's device buffers, allocated on the first call and kept until the kernel
        is freed (the same for every call: the program's lifetime)."""
        if len(self._ws) != len(self.workspace):
            self._ws = [_DeviceBuffer(s.shape, np.dtype(s.numpy_dtype())) for s in self.workspace]
        return self._ws

    def poison_workspace(self) -> None:
        """Fill the workspace with 0xFF bytes (NaN), as verification poisons the outputs."""
        for b in self.workspace_buffers():
            b.poison()

    def _buffers(self, inputs: list[np.ndarray], *, restore: bool = False) -> list[_DeviceBuffer]:
        """The call's device inputs and outputs. In a measurement worker the task's shared ones
        (`_TaskBuffers`; `restore`: the inputs restored first, as they are for a new kernel);
        elsewhere the kernel's own, uploaded when `inputs` is another list than last time."""
        if config.IN_WORKER:
            shared = _shared_buffers(self.task, inputs)
            if restore or shared.user != self._serial:
                shared.restore()
                shared.user = self._serial
            return shared.bufs
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
        """The call's arguments: `bufs` (inputs, outputs), then the workspace."""
        return [ctypes.pointer(ctypes.pointer(b.desc)) for b in [*bufs, *self.workspace_buffers()]]

    def run(self, inputs: list[np.ndarray], outputs: list[np.ndarray] | None = None) -> list[np.ndarray]:
        """Outputs of one call. Given `outputs`, their contents are copied to the device output
        buffers first (and the workspace poisoned) and the results are written back into them."""
        if len(inputs) != len(self.task.inputs):
            raise ValueError(f"{self.task.func_name}: expected {len(self.task.inputs)} inputs, got {len(inputs)}")
        bufs = self._buffers(inputs, restore=outputs is not None)
        outs = bufs[len(self.task.inputs):]
        if outputs is not None:
            # The device output allocations start as `outputs` (verification passes arrays filled
            # with a sentinel: a device memset, `_DeviceBuffer.upload`): without this they hold
            # whatever the previous call -- usually the previous, correct candidate -- left
            # there, and a kernel that skips work would pass. The workspace likewise holds the
            # previous call's intermediates.
            for b, o in zip(outs, outputs, strict=True):
                b.upload(o)
            self.poison_workspace()
        self.engine.invoke(self.task.func_name, *self._args(bufs))
        _check_device("running the kernel")
        into = outputs if outputs is not None else [None] * len(outs)
        return write_back([_download(b, o) for b, o in zip(outs, into, strict=True)], outputs)

    def time(self, inputs: list[np.ndarray], number: int) -> float:
        """Seconds for `number` back-to-back calls in one native loop. With
        `config.CUDA_TIME_DEFERRED` (and a deferrable kernel) the calls are queued on the stream
        and synchronised once at the end, as a compiled network runs them; otherwise each call is
        launch + kernel + synchronize."""
        import time

        bufs = self._buffers(inputs)
        n = ctypes.c_longlong(number)
        args = self._args(bufs)
        lib = runtime_lib() if self.deferrable and config.CUDA_TIME_DEFERRED else None
        t0 = time.perf_counter()
        with deferred_synchronisation(lib):
            self.engine.invoke(BENCH_FUNC, *args, ctypes.pointer(n))
        elapsed = time.perf_counter() - t0
        _check_device("timing the kernel")
        return elapsed

    def __del__(self) -> None:
        try:
            for _, bufs in self._bufs.values():
                for b in bufs:
                    b.free()
            for b in self._ws:
                b.free()
        except Exception:  # noqa: BLE001, S110 -- interpreter shutdown: nothing left to free
            pass


@functools.cache
def device_arch() -> str:
    """`sm_XY` of GPU 0 via the CUDA driver; `DEFAULT_ARCH` when there is no driver or device."""

    if config.CUDA_ARCH:
        return config.CUDA_ARCH
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


def device_sm_count(default: int) -> int:
    """Multiprocessors of GPU 0 via the CUDA driver; `default` without a driver or device."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        dev, n = ctypes.c_int(), ctypes.c_int()
        if cuda.cuInit(0) != 0 or cuda.cuDeviceGet(ctypes.byref(dev), 0) != 0:
            return default
        if cuda.cuDeviceGetAttribute(ctypes.byref(n), 16, dev) != 0 or n.value <= 0:  # MULTIPROCESSOR_COUNT
            return default
        return n.value
    except OSError:
        return default


def has_cuda_device() -> bool:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        n = ctypes.c_int()
        return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(n)) == 0 and n.value > 0
    except OSError:
        return False


def gpu_name() -> str | None:
    """Name of CUDA device 0 through the driver API, or None without a driver or device."""
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    try:
        if cuda.cuInit(0) != 0:
            return None
        dev = ctypes.c_int()
        if cuda.cuDeviceGet(ctypes.byref(dev), 0) != 0:
            return None
        buf = ctypes.create_string_buffer(256)
        if cuda.cuDeviceGetName(buf, 256, dev) != 0:
            return None
        return buf.value.decode(errors="replace") or None
    except (OSError, AttributeError):
        return None

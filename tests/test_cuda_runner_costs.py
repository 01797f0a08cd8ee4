"""The CUDA runner's per-candidate host work, without a GPU: one MLIR context per worker for
loading artifacts (`lowering.load_context`), sentinel outputs and the workspace filled on the
device (`mgpuMemset32`/`16`), outputs downloaded straight into the caller's arrays, and a
worker's inputs uploaded once per task and restored on the device (`runtime._TaskBuffers`).

The runtime tests run `CudaKernel` against an emulated device: the MLIR CUDA runtime's entry
points as Python functions over host memory (allocations are ctypes buffers, copies memmove,
memsets numpy fills), every call logged, and a fake engine whose "kernel" is numpy on the
descriptors' pointers. What the GPU would do is checked by the GPU tests named in the module's
last comment.
"""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

from ansor.core.task import SearchTask, TensorSpec, create_task
from ansor.frontend import workloads
from ansor.targets.cuda import lowering, runtime

# ----------------------------------------------------------------------------------------------
# memsets: which sentinel a memset can write, and which arrays are one sentinel


@pytest.mark.parametrize(("value", "dtype", "n", "want"), [
    (np.nan, np.float32, 6, (32, 0x7FC00000, 6)),
    (0.0, np.float32, 6, (32, 0, 6)),
    (np.nan, np.float16, 4, (32, 0x7E007E00, 2)),
    (np.nan, np.float16, 3, (16, 0x7E00, 3)),
    (0.0, np.float64, 5, (32, 0, 10)),
    (np.nan, np.float64, 5, None),  # 0x7FF8000000000000: two different 32-bit halves
    (np.iinfo(np.int64).min, np.int64, 2, None),
    (np.iinfo(np.int32).min, np.int32, 3, (32, 0x80000000, 3)),
    (np.iinfo(np.int8).min, np.int8, 8, (32, 0x80808080, 2)),
    (np.iinfo(np.int8).min, np.int8, 6, (16, 0x8080, 3)),
    (np.iinfo(np.int8).min, np.int8, 3, None),  # an odd number of bytes
])
def test_memset_call(value, dtype, n: int, want) -> None:
    a = np.full(n, value, dtype)
    assert runtime.memset_call(a[:1].tobytes(), a.nbytes) == want


def test_memset_call_of_the_workspace_poison() -> None:
    assert runtime.memset_call(b"\xff", 12) == (32, 0xFFFFFFFF, 3)
    assert runtime.memset_call(b"\xff", 6) == (16, 0xFFFF, 3)
    assert runtime.memset_call(b"\xff", 7) is None


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int32, np.int8, np.int64])
@pytest.mark.parametrize("n", [1, 3, 64, 1000, (1 << 18) + 7, 3 << 18])
def test_uniform_element_finds_every_odd_element(dtype, n: int) -> None:
    """A sentinel-filled array is uniform; the same array with any one element changed (first,
    last, off the sample's stride, in each 2^18 chunk) is not; NaNs compare by their bits."""
    v = np.nan if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min
    a = np.full(n, v, dtype)
    assert runtime.uniform_element(a) == a[:1].tobytes()
    assert runtime.uniform_element(a.reshape(1, n, 1)) == a[:1].tobytes()
    for i in sorted({0, n - 1, n // 2 + 1, n // 3, min(n - 1, (1 << 18) + 5)} if n > 1 else ()):
        b = a.copy()
        b[i] = 0
        assert runtime.uniform_element(b) is None, i
    if np.dtype(dtype).kind == "f" and n > 1:
        b = a.copy()
        b.view(f"u{b.dtype.itemsize}")[n // 2 + 1] += 1  # another NaN payload: other bytes
        assert np.isnan(b).all() and runtime.uniform_element(b) is None


def test_uniform_element_edge_cases() -> None:
    assert runtime.uniform_element(np.zeros(0, np.float32)) is None
    assert runtime.uniform_element(np.zeros((4, 4), np.float32)[:, ::2]) is None  # not contiguous
    assert runtime.uniform_element(np.zeros(4, np.complex128)) is None  # 16-byte elements: uploaded
    z = np.zeros(8, np.float32)
    z[3] = -0.0
    assert runtime.uniform_element(z) is None  # -0.0 == 0.0, but its bytes differ
    ml = pytest.importorskip("ml_dtypes")
    b = np.full(6, np.nan, ml.bfloat16)
    assert runtime.uniform_element(b) == b[:1].tobytes()


# ----------------------------------------------------------------------------------------------
# the emulated device


class _Device:
    """The MLIR CUDA runtime's memory entry points over host memory, each call logged as
    (what, bytes) with what one of alloc, free, H2D, D2H, D2D, memset32, memset16."""

    def __init__(self) -> None:
        self.mem: dict[int, ctypes.Array] = {}
        self.log: list[tuple[str, int]] = []
        self.copies: list[tuple[str, int, int]] = []  # (kind, dst, src)

    def _on_device(self, p: int) -> bool:
        return any(a <= p < a + len(b) for a, b in self.mem.items())

    def mgpuMemAlloc(self, n: int, stream, shared) -> int:  # noqa: N802 -- the C names
        buf = ctypes.create_string_buffer(b"\x5a" * n, n)  # not zeros: stale memory
        self.mem[ctypes.addressof(buf)] = buf
        self.log.append(("alloc", n))
        return ctypes.addressof(buf)

    def mgpuMemFree(self, p: int, stream) -> None:  # noqa: N802
        self.log.append(("free", len(self.mem.pop(p))))

    def mgpuMemcpy(self, dst: int, src: int, n: int, stream) -> None:  # noqa: N802
        kind = {(False, True): "H2D", (True, False): "D2H", (True, True): "D2D"}[(self._on_device(src),
                                                                                 self._on_device(dst))]
        ctypes.memmove(dst, src, n)
        self.log.append((kind, n))
        self.copies.append((kind, dst, src))

    def mgpuMemset32(self, dst: int, value: int, count: int, stream) -> None:  # noqa: N802
        assert self._on_device(dst)
        np.frombuffer((ctypes.c_uint32 * count).from_address(dst), np.uint32)[:] = value
        self.log.append(("memset32", 4 * count))

    def mgpuMemset16(self, dst: int, value: int, count: int, stream) -> None:  # noqa: N802
        assert self._on_device(dst)
        np.frombuffer((ctypes.c_uint16 * count).from_address(dst), np.uint16)[:] = value
        self.log.append(("memset16", 2 * count))

    def mgpuStreamSynchronize(self, stream) -> None:  # noqa: N802
        pass

    def kinds(self) -> list[str]:
        return [k for k, _ in self.log]


def _view(arg) -> np.ndarray:
    """The device array a call argument (a pointer to a pointer to a memref descriptor) describes."""
    d = arg.contents.contents
    shape = tuple(d.shape) if hasattr(d, "shape") else ()
    ct = d._fields_[1][1]._type_  # the element's ctypes type
    n = int(np.prod(shape))
    return np.ctypeslib.as_array((ct * n).from_address(d.allocated)).reshape(shape)


class _Engine:
    """Runs `body(inputs, outputs)` on the device arrays for the task function's calls."""

    def __init__(self, task: SearchTask, body) -> None:
        self.task, self.body, self.calls = task, body, 0

    def invoke(self, name: str, *args) -> None:
        n_in, n_out = len(self.task.inputs), len(self.task.outputs)
        views = [_view(a) for a in args[:n_in + n_out]]
        if name == self.task.func_name:
            self.calls += 1
            self.body(views[:n_in], views[n_in:])


@pytest.fixture
def device(monkeypatch) -> _Device:
    dev = _Device()
    monkeypatch.setattr(runtime, "load_cuda_runtime", lambda: dev)
    monkeypatch.setattr(runtime, "_copy_stream", lambda: 7)
    monkeypatch.setattr(runtime, "_check_device", lambda what: None)
    monkeypatch.setattr(runtime, "_shared", type(runtime._shared)())
    return dev


def _matmul(name: str = "matmul-16") -> tuple[SearchTask, list[np.ndarray]]:
    task = create_task(workloads.get(name), name=name, target="cuda")
    rng = np.random.default_rng(0)
    return task, [rng.standard_normal(s.shape).astype(s.numpy_dtype()) for s in task.inputs]


def _mm(ins, outs) -> None:
    outs[0][...] = ins[0] @ ins[1]


def test_verifying_run_memsets_the_sentinel_and_downloads_in_place(device: _Device) -> None:
    """Poisoned (NaN, then 0.0) outputs reach the device by memset, not a copy; the workspace's
    0xFF bytes too; the result lands in the caller's array itself (one D2H into its address)."""
    task, x = _matmul()
    n = 16 * 16 * 4
    k = runtime.CudaKernel(_Engine(task, _mm), task, workspace=(TensorSpec((3, 5), "f32"),))
    for uploads, sentinel in [(2, np.nan), (0, 0.0)]:  # the inputs on the first call only
        device.log.clear()
        out = [np.full((16, 16), sentinel, np.float32)]
        got = k.run(x, out)
        assert got is out and got[0] is out[0]
        np.testing.assert_allclose(out[0], x[0] @ x[1], rtol=1e-6)
        assert ("memset32", n) in device.log and ("memset32", 60) in device.log  # output, workspace
        assert device.kinds().count("H2D") == uploads
        assert device.copies[-1][:2] == ("D2H", out[0].ctypes.data)
        assert device.kinds().count("D2H") == 1
    plain = k.run(x)  # no outputs given: a fresh array, nothing poisoned
    np.testing.assert_allclose(plain[0], x[0] @ x[1], rtol=1e-6)


def test_poison_survives_where_the_kernel_writes_nothing(device: _Device) -> None:
    """A kernel that skips half its output leaves the memset sentinel there (the device buffer
    held the previous call's complete result)."""
    task, x = _matmul()
    good = runtime.CudaKernel(_Engine(task, _mm), task)
    good.run(x, [np.full((16, 16), np.nan, np.float32)])

    def half(ins, outs) -> None:
        outs[0][:8] = (ins[0] @ ins[1])[:8]

    lazy = runtime.CudaKernel(_Engine(task, half), task)
    lazy._bufs = good._bufs  # the same device buffers, as in a worker (below)
    (out,) = lazy.run(x, [np.full((16, 16), np.nan, np.float32)])
    assert np.isfinite(out[:8]).all() and np.isnan(out[8:]).all()
    (out,) = lazy.run(x, [np.zeros((16, 16), np.float32)])
    assert (out[8:] == 0).all()
    lazy._bufs = {}


def test_non_uniform_or_unsettable_outputs_are_uploaded(device: _Device) -> None:
    """Outputs that are not one value, and f64 NaN (no 32-bit pattern), are uploaded as before;
    a non-contiguous or other-dtype output array gets the result through a copy."""
    task, x = _matmul()
    n = 16 * 16 * 4

    def nothing(ins, outs) -> None:
        pass

    k = runtime.CudaKernel(_Engine(task, nothing), task)
    start = np.arange(256, dtype=np.float32).reshape(16, 16)
    (out,) = k.run(x, [start.copy()])
    assert ("H2D", n) in device.log and not any(w.startswith("memset") for w in device.kinds())
    np.testing.assert_array_equal(out, start)
    device.log.clear()
    task64 = create_task(workloads.matmul(16, 16, 16, "f64"), name="mm-f64", target="cuda")
    k64 = runtime.CudaKernel(_Engine(task64, nothing), task64)
    (out,) = k64.run([a.astype(np.float64) for a in x], [np.full((16, 16), np.nan)])
    assert ("H2D", 2 * n) in device.log[-2:] and not any(w.startswith("memset") for w in device.kinds())
    assert np.isnan(out).all()
    k2 = runtime.CudaKernel(_Engine(task, _mm), task)
    strided = np.full((16, 32), np.nan, np.float32)[:, ::2]
    (got,) = k2.run(x, [strided])
    assert got is strided
    np.testing.assert_allclose(strided, x[0] @ x[1], rtol=1e-6)


def test_outside_a_worker_each_kernel_uploads_its_inputs(device: _Device, monkeypatch) -> None:
    monkeypatch.setattr("ansor.config.IN_WORKER", False)
    task, x = _matmul()
    for _ in range(2):
        k = runtime.CudaKernel(_Engine(task, _mm), task)
        device.log.clear()
        k.run(x, [np.full((16, 16), np.nan, np.float32)])
        k.time(x, 3)
        assert device.kinds().count("H2D") == 2 and "D2D" not in device.kinds()
        del k
        gc.collect()
    assert not runtime._shared


def test_worker_uploads_inputs_once_per_task_and_restores_them(device: _Device, monkeypatch) -> None:
    """In a worker, candidates of one task share the inputs: uploaded once (and a pristine copy
    kept), restored on the device before every verifying run and for each new kernel, so a
    kernel that scribbles over its inputs corrupts neither its own next verification nor the
    next candidate's; a new input list is another set, and the least recently used one of more
    than `SHARED_BUFFER_SETS` is freed."""
    monkeypatch.setattr("ansor.config.IN_WORKER", True)
    task, x = _matmul()
    n = 16 * 16 * 4
    want = x[0] @ x[1]

    def scribble(ins, outs) -> None:
        _mm(ins, outs)
        ins[0][...] = 0
        ins[1][...] = np.nan

    bad = runtime.CudaKernel(_Engine(task, scribble), task)
    for _ in range(2):
        (out,) = bad.run(x, [np.full((16, 16), np.nan, np.float32)])
        np.testing.assert_allclose(out, want, rtol=1e-6)
    bad.time(x, 3)
    assert device.log.count(("H2D", n)) == 2  # the two inputs, once
    allocs = device.kinds().count("alloc")
    for _ in range(3):  # later candidates of the task
        device.log.clear()
        k = runtime.CudaKernel(_Engine(task, _mm), task)
        (out,) = k.run(x, [np.full((16, 16), np.nan, np.float32)])
        np.testing.assert_allclose(out, want, rtol=1e-6)
        k.time(x, 3)
        assert "H2D" not in device.kinds() and "alloc" not in device.kinds()
        assert device.log.count(("D2D", n)) == 2  # the restore, once: time() keeps the same kernel
        del k
        gc.collect()
    assert allocs == 5  # pristine x2, working x2, output
    ref = [a.copy() for a in x]  # another list: another set (the reference's inputs, say)
    runtime.CudaKernel(_Engine(task, _mm), task).run(ref, [np.full((16, 16), np.nan, np.float32)])
    assert len(runtime._shared) == 2
    device.log.clear()
    third = [a.copy() for a in x]
    runtime.CudaKernel(_Engine(task, _mm), task).run(third)
    assert len(runtime._shared) == 2 and device.kinds().count("free") == 5  # the first set
    assert all(key[1] != id(x) for key in runtime._shared)


# ----------------------------------------------------------------------------------------------
# one MLIR context per worker for loading artifacts


@pytest.fixture(scope="module")
def artifact() -> tuple[SearchTask, bytes]:
    import ansor.config

    old, ansor.config.CUDA_BINARY = ansor.config.CUDA_BINARY, "ptx"
    try:
        task = create_task(workloads.get("matmul-64"), name="matmul-64", target="cuda")
        return task, lowering.build_task_cuda(task, None, arch=runtime.device_arch())
    finally:
        ansor.config.CUDA_BINARY = old


def test_loads_share_a_context_until_it_is_replaced(artifact, monkeypatch) -> None:
    """`load_task_cuda` parses every artifact in the process's loading context, a new one after
    `CONTEXT_LOADS` loads; an unreadable artifact fails in it as before and leaves it usable."""
    from ansor.core.mlir import LoweringError

    task, art = artifact
    seen = []
    monkeypatch.setattr(lowering, "_jit", lambda module, task, defer_sync=False: seen.append(module.context))
    monkeypatch.setattr(lowering, "CONTEXT_LOADS", 3)
    monkeypatch.setattr(lowering, "_load_ctx", [None, 0])
    for _ in range(3):
        lowering.load_task_cuda(task, art)
    with pytest.raises(LoweringError, match="unreadable artifact"):
        lowering.load_task_cuda(task, art[: len(art) // 2])
    lowering.load_task_cuda(task, art)
    lowering.load_task_cuda(task, art)
    assert len(seen) == 5 and len({id(c) for c in seen}) == 2
    assert seen[0] is seen[1] is seen[2] and seen[3] is seen[4] and seen[3] is not seen[0]


def test_a_kernel_outlives_its_load_context(artifact, monkeypatch) -> None:
    """The host code JIT-ed from a module of the loading context runs after that context was
    replaced and destroyed (the CUDA runtime stubbed: every call of the task function launches
    its kernel into the stub)."""
    from ansor.core import native
    from mlir import ir
    from mlir.execution_engine import ExecutionEngine
    from mlir.runtime import as_ctype, make_nd_memref_descriptor

    task, art = artifact
    monkeypatch.setattr(lowering, "_load_ctx", [None, 0])
    native.register_everything()
    launches: list[int] = []
    launch_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p, *[ctypes.c_int64] * 6, ctypes.c_int32, ctypes.c_void_p,
                                ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_size_t)
    on_launch = launch_t(lambda *a: launches.append(1))
    stub = ctypes.CFUNCTYPE(ctypes.c_void_p)(lambda: None)
    live = ir.Context._get_live_count()
    with lowering.load_context(), ir.Location.unknown():
        module = ir.Module.parse(art)
        engine = ExecutionEngine(module, opt_level=0, shared_libs=[])
    for sym in ["mgpuModuleLoad", "mgpuModuleLoadJIT", "mgpuModuleUnload", "mgpuModuleGetFunction",
                "mgpuStreamCreate", "mgpuStreamSynchronize", "mgpuStreamDestroy", "mgpuMemAlloc", "mgpuMemFree"]:
        engine.raw_register_runtime(sym, ctypes.cast(stub, ctypes.c_void_p))
    engine.raw_register_runtime("mgpuLaunchKernel", ctypes.cast(on_launch, ctypes.c_void_p))
    del module
    lowering._load_ctx[:] = [None, 0]  # the loading context replaced: gone
    gc.collect()
    assert ir.Context._get_live_count() == live
    descs = []
    for spec in [*task.inputs, *task.outputs]:
        d = make_nd_memref_descriptor(2, as_ctype(np.dtype(np.float32)))()
        d.allocated = 1 << 28
        d.aligned = ctypes.cast(ctypes.c_void_p(1 << 28), type(d.aligned))
        d.shape = (ctypes.c_longlong * 2)(*spec.shape)
        d.strides = (ctypes.c_longlong * 2)(spec.shape[1], 1)
        descs.append(d)
    engine.invoke(task.func_name, *[ctypes.pointer(ctypes.pointer(d)) for d in descs])
    assert launches
    del engine
    del stub, on_launch


# ----------------------------------------------------------------------------------------------
# On an NVIDIA GPU: the real mgpuMemset32/16, device-to-device restores, direct downloads


@pytest.mark.gpu
@pytest.mark.parametrize(("value", "dtype", "n"), [
    (np.nan, np.float32, 1001), (0.0, np.float32, 7), (np.nan, np.float16, 1000), (np.nan, np.float16, 999),
    (np.iinfo(np.int8).min, np.int8, 1002), (np.iinfo(np.int32).min, np.int32, 5), (np.nan, np.float64, 9),
    (0.0, np.float64, 9),
])
def test_sentinels_reach_the_device_bit_exact(value, dtype, n: int) -> None:
    """Each sentinel written by `upload` (a memset where one can, a copy where not) reads back
    with the same bytes, over a buffer that held other data; the 0xFF poison likewise."""
    buf = runtime._DeviceBuffer((n,), np.dtype(dtype))
    try:
        buf.upload(np.arange(n).astype(dtype))
        want = np.full(n, value, dtype)
        buf.upload(want)
        got = np.empty(n, dtype)
        assert buf.download(got) is got
        assert got.tobytes() == want.tobytes()
        buf.poison()
        assert buf.download().tobytes() == b"\xff" * want.nbytes
        other = runtime._DeviceBuffer((n,), np.dtype(dtype))
        other.upload(np.arange(n).astype(dtype))
        buf.copy_from(other)
        assert buf.download().tobytes() == np.arange(n).astype(dtype).tobytes()
        other.free()
    finally:
        buf.free()


@pytest.mark.gpu
def test_worker_kernels_share_inputs_on_the_gpu(monkeypatch) -> None:
    """Two candidates of a matmul in worker mode: the second reuses the first's device inputs and
    outputs, and each verifying run into NaN- and 0-poisoned outputs gives the right product."""
    def check(what: str) -> None:  # a fault fails the test (in a worker it would end the process)
        assert runtime.device_status() == 0, what

    monkeypatch.setattr("ansor.config.IN_WORKER", True)
    monkeypatch.setattr(runtime, "_check_device", check)
    monkeypatch.setattr(runtime, "_shared", type(runtime._shared)())
    task, x = _matmul("matmul-64")
    from ansor.targets.cuda.lowering import compile_task_cuda

    for _ in range(2):
        k = compile_task_cuda(task, None)
        for sentinel in (np.nan, 0.0):
            out = [np.full((64, 64), sentinel, np.float32)]
            assert k.run(x, out)[0] is out[0]
            np.testing.assert_allclose(out[0], x[0] @ x[1], rtol=1e-4, atol=1e-3)
        assert k.time(x, 3) > 0
    assert len(runtime._shared) == 1
    for t in runtime._shared.values():
        t.free()


# GPU (with the measurer's worker path: the good program's results in the shared output buffers,
# then planted bugs that must still fail):
#   python3 -m pytest -q -m gpu tests/test_cuda_runner_costs.py tests/test_verify.py tests/test_stream_reuse.py
#       tests/test_gpu_multi_kernel.py tests/test_gpu.py -k "runner_costs or planted or deferred or multi_kernel or verified"

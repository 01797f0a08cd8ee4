"""The JIT's per-launch stream calls go to our reused per-thread stream (capi/GpuRuntime.cpp):
MLIR 22 creates and destroys a CUDA stream around every launch, more host time than a small kernel."""

from __future__ import annotations

import ctypes

import pytest
from mlir import ir
from mlir.execution_engine import ExecutionEngine

from ansor.targets.cuda.lowering import _reuse_streams

_HOST = """
func.func private @mgpuStreamCreate() -> !llvm.ptr
func.func private @mgpuStreamDestroy(!llvm.ptr)
func.func @twice() -> i1 attributes {llvm.emit_c_interface} {
  %a = func.call @mgpuStreamCreate() : () -> !llvm.ptr
  func.call @mgpuStreamDestroy(%a) : (!llvm.ptr) -> ()
  %b = func.call @mgpuStreamCreate() : () -> !llvm.ptr
  func.call @mgpuStreamDestroy(%b) : (!llvm.ptr) -> ()
  %same = llvm.icmp "eq" %a, %b : !llvm.ptr
  return %same : i1
}
"""


def _engine() -> ExecutionEngine:
    from ansor.core.mlir import run_passes

    module = ir.Module.parse(_HOST)
    run_passes(module, "convert-func-to-llvm,reconcile-unrealized-casts", "lower")
    return ExecutionEngine(module, opt_level=0)


def test_jit_stream_calls_resolve_to_the_reused_stream() -> None:
    with ir.Context(), ir.Location.unknown():
        engine = _engine()
        if not _reuse_streams(engine):
            pytest.fail("libAnsorMLIR lacks ansorStreamCreateReused/ansorStreamDestroyReused")
        engine.initialize()
        same = ctypes.c_bool(False)
        engine.invoke("twice", ctypes.pointer(same))
    # two create/destroy pairs on one thread hand out one stream. Without a CUDA runtime here
    # both are null, but they resolve: unregistered, the JIT finds no `mgpuStreamCreate` in this
    # process at all (next test), so resolving proves the calls reach our functions.
    assert same.value


def test_unregistered_the_upstream_symbols_are_missing_here() -> None:
    with ir.Context(), ir.Location.unknown():
        engine = _engine()
        engine.initialize()
        with pytest.raises(Exception):  # "JIT session error: Symbols not found: [ mgpuStreamCreate, ...]"
            engine.invoke("twice", ctypes.pointer(ctypes.c_bool(False)))


class _Lib:
    """Stands in for our native library's synchronisation entry points: records the calls."""

    def __init__(self, log: list) -> None:
        self.log = log

    def ansorDeferSynchronize(self, on: bool) -> None:  # noqa: N802 -- the C name
        self.log.append(("defer", on))

    def ansorSynchronizeReused(self) -> None:  # noqa: N802
        self.log.append(("sync",))


class _Engine:
    def __init__(self, log: list) -> None:
        self.log = log

    def invoke(self, name: str, *args) -> None:
        self.log.append(("invoke", name))


@pytest.mark.parametrize("deferred", [True, False])
def test_kernel_timing_queues_its_calls_and_synchronises_once(monkeypatch, deferred: bool) -> None:
    """`CudaKernel.time` with `CUDA_TIME_DEFERRED`: the timing loop runs with the per-launch
    synchronisation deferred, then synchronises once, and leaves deferral off; without it (or for
    a kernel whose synchronisation is not deferrable) the loop runs as it is."""
    import numpy as np

    from ansor import config, create_task
    from ansor.core.mlir import BENCH_FUNC
    from ansor.frontend import workloads
    from ansor.targets.cuda import runtime

    log: list = []
    monkeypatch.setattr(config, "CUDA_TIME_DEFERRED", deferred)
    monkeypatch.setattr(runtime, "runtime_lib", lambda: _Lib(log))
    monkeypatch.setattr(runtime, "_check_device", lambda what: None)
    task = create_task(workloads.get("rowsum-4x8"), name="rowsum-4x8", target="cuda")
    kernel = runtime.CudaKernel(_Engine(log), task, deferrable=True)
    monkeypatch.setattr(kernel, "_buffers", lambda inputs: [])
    kernel.time([np.zeros((4, 8), np.float32)], 10)
    if deferred:
        assert log == [("defer", True), ("invoke", BENCH_FUNC), ("defer", False), ("sync",)]
    else:
        assert log == [("invoke", BENCH_FUNC)]
    log.clear()
    plain = runtime.CudaKernel(_Engine(log), task, deferrable=False)
    monkeypatch.setattr(plain, "_buffers", lambda inputs: [])
    plain.time([np.zeros((4, 8), np.float32)], 10)
    assert log == [("invoke", BENCH_FUNC)]


@pytest.mark.gpu
def test_deferred_timing_on_the_gpu_leaves_the_next_call_synchronous() -> None:
    """On a card: a deferred timing loop of a row-sum kernel, then a call whose output (into a
    NaN-poisoned buffer) must be complete when it returns."""
    import numpy as np

    from ansor import create_task
    from ansor.frontend import workloads
    from ansor.targets.cuda.lowering import compile_task_cuda

    task = create_task(workloads.get("rowsum-64x1000"), name="rowsum-64x1000", target="cuda")
    kernel = compile_task_cuda(task, None)
    assert kernel.deferrable
    x = np.random.default_rng(0).standard_normal((64, 1000)).astype(np.float32)
    assert kernel.time([x], 200) > 0
    (out,) = kernel.run([x], [np.full((64,), np.nan, np.float32)])
    np.testing.assert_allclose(out, x.astype(np.float64).sum(1), rtol=1e-4, atol=1e-3)

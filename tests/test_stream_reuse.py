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

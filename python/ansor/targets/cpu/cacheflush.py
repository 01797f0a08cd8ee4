"""Evict chosen arrays from every CPU cache level, leaving the rest of the caches alone.

    arrays --evict--> each cache line of each array: clflush (x86), then mfence

What `RunOptions(cache_flush="weights")` does before each timed call (TVM's
`enable_cpu_cache_flush`, which flushes every argument but the first): inside a model whose
weights exceed the last-level cache, a task reads its weights from memory, while the input the
previous task has just written, the task's code and the OpenMP threads stay hot. Evicting the
caches wholesale (writing a buffer twice their size) makes all of that cold and measures a call
much slower than it runs inside the model; evicting the weights' lines alone does not.

The flush loop is a JIT-compiled MLIR function (the LLVM intrinsic `llvm.x86.sse2.clflush` through
`llvm.call_intrinsic`): no C compiler at run time, no extra native library. `available()` is False
on other architectures; the caller then falls back to a whole-cache flush.
"""

from __future__ import annotations

import ctypes
import functools
import platform

import numpy as np

_FLUSH_IR = """
func.func @ansor_clflush(%buf: memref<?xi8>) attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %mask = arith.constant -64 : index
  %n = memref.dim %buf, %c0 : memref<?xi8>
  %base = memref.extract_aligned_pointer_as_index %buf : memref<?xi8> -> index
  %first = arith.andi %base, %mask : index
  %end = arith.addi %base, %n : index
  scf.for %a = %first to %end step %c64 {
    %ai = arith.index_cast %a : index to i64
    %p = llvm.inttoptr %ai : i64 to !llvm.ptr
    llvm.call_intrinsic "llvm.x86.sse2.clflush"(%p) : (!llvm.ptr) -> ()
  }
  llvm.call_intrinsic "llvm.x86.sse2.mfence"() : () -> ()
  return
}
"""


def available() -> bool:
    """Whether `evict` can run here (an x86-64 CPU: clflush is in its base instruction set)."""
    return platform.machine().lower() in ("x86_64", "amd64")


@functools.cache
def _engine():  # noqa: ANN202 - an ExecutionEngine, kept alive for the process
    from mlir import ir
    from mlir.execution_engine import ExecutionEngine

    from ansor.core import native
    from ansor.core.mlir import run_passes
    from ansor.targets.cpu.lowering import _TO_LLVM_CPU

    native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(_FLUSH_IR)
        run_passes(module, _TO_LLVM_CPU, "lower")
        return ExecutionEngine(module, opt_level=2)


def evict(arrays: list[np.ndarray]) -> None:
    """Write back and invalidate every cache line of `arrays` in all cache levels (x86 only:
    check `available()` first)."""
    from ansor.targets.cpu.lowering import memref_descriptor

    engine = _engine()
    for a in arrays:
        if a.size == 0:
            continue
        flat = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        if flat.ctypes.data != np.asarray(a).ctypes.data:
            raise ValueError("evict: the array is not contiguous")
        desc = ctypes.pointer(ctypes.pointer(memref_descriptor(flat)))
        engine.invoke("ansor_clflush", desc)

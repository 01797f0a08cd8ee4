"""libAnsorMLIR.so through ctypes: dialect registration, ansor passes run from Python."""

from __future__ import annotations

import pytest

mlir_ir = pytest.importorskip("mlir.ir")
from ansor.core import native as _native
from mlir.passmanager import PassManager

try:
    _native.find_library()
except _native.NativeLibraryNotFound as exc:  # pragma: no cover - depends on the build
    pytest.skip(str(exc), allow_module_level=True)

MATMUL = """
func.func @mm(%a: tensor<{M}x{K}xf32>, %b: tensor<{K}x{N}xf32>, %c: tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32> {{
  %0 = linalg.matmul ins(%a, %b : tensor<{M}x{K}xf32>, tensor<{K}x{N}xf32>)
                     outs(%c : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>
  return %0 : tensor<{M}x{N}xf32>
}}
"""

LOOP = """
func.func @loop(%m: memref<4xf32>, %v: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c0 to %c4 step %c1 {
    memref.store %v, %m[%i] : memref<4xf32>
  } {ansor.auto_unroll_max_step = 4 : i64}
  return
}
"""


@pytest.fixture(scope="module", autouse=True)
def registered() -> None:
    _native.register_everything()
    _native.register_everything()  # idempotent


def _run(pipeline: str, text: str) -> mlir_ir.Module:
    module = mlir_ir.Module.parse(text)
    PassManager.parse(pipeline).run(module.operation)
    return module


def test_version() -> None:
    assert _native.version().startswith("0.1.0 (MLIR 22.")


def test_task_attr_parses_in_new_context() -> None:
    with mlir_ir.Context():
        attr = mlir_ir.Attribute.parse(
            '#ansor.task<name = "f", weight = 2, flops = 10, hash = "ab">'
        )
        assert str(attr) == '#ansor.task<name = "f", weight = 2 : i64, flops = 10 : i64, hash = "ab">'


@pytest.mark.parametrize("m,n,k", [(1024, 1024, 1024), (8, 2, 4)])
def test_annotate_task_flops(m: int, n: int, k: int) -> None:
    with mlir_ir.Context():
        module = _run("builtin.module(ansor-annotate-task{weight=3})", MATMUL.format(M=m, N=n, K=k))
        task = str(module.body.operations[0].attributes["ansor.task"])
    assert f"flops = {2 * m * n * k} : i64" in task
    assert 'name = "mm", weight = 3 : i64' in task


def test_annotate_task_hash_is_structural() -> None:
    def task_hash(text: str) -> str:
        with mlir_ir.Context():
            module = _run("builtin.module(func.func(ansor-annotate-task))", text)
            task = str(module.body.operations[0].attributes["ansor.task"])
        return task.split('hash = "')[1].split('"')[0]

    base = task_hash(MATMUL.format(M=8, N=2, K=4))
    renamed = task_hash(MATMUL.format(M=8, N=2, K=4).replace("@mm", "@other").replace("%a", "%x"))
    assert base == renamed and len(base) == 16
    assert task_hash(MATMUL.format(M=8, N=4, K=4)) != base


def test_auto_unroll_unrolls_annotated_loop() -> None:
    with mlir_ir.Context():
        module = _run("builtin.module(ansor-auto-unroll, canonicalize)", LOOP)
        text = str(module)
    assert "scf.for" not in text
    assert text.count("memref.store") == 4
    assert "ansor.auto_unroll_max_step" not in text


def test_dynamic_shape_is_an_error() -> None:
    text = MATMUL.format(M="?", N=4, K=4)
    with mlir_ir.Context():
        module = mlir_ir.Module.parse(text)
        with pytest.raises(mlir_ir.MLIRError, match="dynamic loop range"):
            PassManager.parse("builtin.module(ansor-annotate-task)").run(module.operation)


def test_calls_do_not_leak_memory() -> None:
    """Upstream `get_ranked_memref_descriptor` makes a new ctypes class per call, which ctypes'
    pointer-type cache keeps forever; `lowering.memref_descriptor` reuses classes. And the
    lowering frees what a program allocates (buffer-deallocation-pipeline)."""
    import ctypes
    import tracemalloc

    import ansor
    import numpy as np
    from ansor.frontend import workloads
    from ansor.targets.cpu.lowering import memref_descriptor
    from mlir.runtime import get_ranked_memref_descriptor

    a = np.ones((4, 4), np.float32)
    assert type(get_ranked_memref_descriptor(a)) is not type(get_ranked_memref_descriptor(a))  # upstream
    assert type(memref_descriptor(a)) is type(memref_descriptor(a))
    assert ctypes.cast(memref_descriptor(a).aligned, ctypes.c_void_p).value == a.ctypes.data

    fn = ansor.compile(workloads.get("mlp-8x16x4"))  # a network: buffers between its tasks
    x = np.ones((8, 16), np.float32)
    fn(x)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(300):
        fn(x)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert grown < 256 * 1024, grown


def test_intermediate_buffers_are_freed() -> None:
    """Without buffer-deallocation-pipeline each call of a network leaked its intermediates
    (mlp-64x64x4: 4 x 16 KiB per call)."""
    import resource

    import ansor
    import numpy as np
    from ansor.frontend import workloads

    fn = ansor.compile(workloads.get("mlp-64x64x4"))
    x = np.ones((64, 64), np.float32)
    for _ in range(50):
        fn(x)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(1500):
        fn(x)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 16 * 1024, f"{grown_kib} KiB"  # a leak would be ~96 MiB

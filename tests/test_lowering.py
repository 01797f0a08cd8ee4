"""Lowering workarounds for MLIR 22 behaviour (each test pins the upstream behaviour it relies on)."""

from __future__ import annotations

import ansor
import numpy as np
from ansor.core import native as _native
from ansor.targets.cpu import lowering
from ansor.frontend import workloads
from ansor.measure.measurer import make_inputs
from mlir import ir
from ansor.core import mlir as core_mlir


def test_strided_copies_become_linalg_copies() -> None:
    """A padded convolution bufferizes its `tensor.pad` into a `memref.copy` into a strided view of
    the padded buffer; upstream lowers that to the runtime's element-wise `memrefCopy`, so we turn it
    into `linalg.copy` (vectorizable loops) and keep contiguous copies as they are."""
    task = ansor.create_task(workloads.get("dep-1x8x8x3x3x1x1"))
    _native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = core_mlir.parse_payload(task)
        core_mlir.run_passes(module, lowering._BUFFERIZE, "lower")
        before = str(module)
        assert "memref.copy" in before and "strided<" in before  # the upstream behaviour
        assert lowering.strided_copies_to_linalg(module) >= 1
        after = str(module)
        assert "linalg.copy" in after
        assert all("strided<" not in line for line in after.splitlines() if "memref.copy" in line)
    # and the program still computes the same thing
    inputs = make_inputs(task)
    x, w = inputs
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = sum(xp[:, i:i + 8, j:j + 8, :] * w[i, j] for i in range(3) for j in range(3))
    out = lowering.compile_task(task, None).run(inputs)[0]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


_EXP = """func.func @e(%a: tensor<4x128xf32>) -> tensor<4x128xf32> {
  %empty = tensor.empty() : tensor<4x128xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<4x128xf32>) outs(%empty : tensor<4x128xf32>) {
    ^bb0(%x: f32, %o: f32):
      %e = math.exp %x : f32
      linalg.yield %e : f32
  } -> tensor<4x128xf32>
  return %r : tensor<4x128xf32>
}"""


def _expands_once(task, expand, op: str) -> str:
    """Bufferize `task`'s payload, run `expand` (it must rewrite one op) and return the IR."""
    _native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = core_mlir.parse_payload(task)
        core_mlir.run_passes(module, lowering._BUFFERIZE, "lower")
        assert expand(module) == 1
        text = str(module)
    assert op not in text
    return text


def _scalar_and_vector_outputs(task, *xs: np.ndarray) -> list[np.ndarray]:
    """`task` (one element-wise generic on 4x128) on `xs`, untuned (scalar) and as 16-lane vectors."""
    from ansor.space.schedule import validate
    from ansor.targets import generate_sketches

    sk = next(s for s in generate_sketches(task) if s.stages)
    values = {k.name: k.options[0] for k in sk.knobs} | {"op0.d1.t1": 128, "op0.d1.t2": 16}
    assert validate(sk, values) is None
    return [lowering.compile_task(task, script).run(list(xs))[0].astype(np.float64)
            for script in (None, sk.script(values))]


def test_exp_expanded_to_vector_arithmetic() -> None:
    """LLVM lowers a vector `llvm.intr.exp` to one libm `expf` call per lane (a vectorized softmax
    spent ~90% of its time there), so `math.exp` on f32 becomes arithmetic before lowering; it
    must match libm closely (also out of range: inf, 0, nan) in scalar and vector programs."""
    task = ansor.create_task(_EXP)
    _expands_once(task, lowering.expand_exp, "math.exp")
    x = np.concatenate([np.linspace(-100, 100, 300), np.linspace(-3, 3, 203),
                        [np.inf, -np.inf, np.nan, 88.5, 88.8, -87.0, 0.0, 1.0, -1.0]]).astype(np.float32)
    x = x.reshape(4, 128)
    ref = np.exp(x.astype(np.float64))
    for out in _scalar_and_vector_outputs(task, x):
        big = np.abs(ref) >= 1.2e-38
        with np.errstate(over="ignore", invalid="ignore"):
            np.testing.assert_allclose(out[big], ref.astype(np.float32)[big], rtol=3e-7)
            assert np.all(out[~big & ~np.isnan(x)] <= 1.2e-38)
        assert np.isnan(out[np.isnan(x)]).all()


def test_exp_rounds_by_magic_number_without_floor_or_underflow_select() -> None:
    """The exp expansion rounds n by adding 1.5 * 2^23 and builds 2^n from the sum's bits, and its
    lower clamp (-88) underflows to an exact 0 through the scale: no floor, no float-to-int
    conversion, a single select (overflow to inf) -- 4 fewer vector ops per exp than the plain
    Cephes form (~4% of log-softmax-2364x197). Accuracy: the test above."""
    text = _expands_once(ansor.create_task(_EXP), lowering.expand_exp, "math.exp")
    assert "math.floor" not in text and "arith.fptosi" not in text
    assert text.count("arith.select") == 1 and "0x4B400000" in text


def test_tanh_expanded_to_vector_arithmetic() -> None:
    """`math.tanh` on CPU goes through upstream's exp form and our vector exp, not one libm `tanhf`
    per lane: close to libm in scalar and vector programs, also at +-inf (+-1) and nan."""
    task = ansor.create_task(_EXP.replace("math.exp", "math.tanh"))

    def expand_tanh(module) -> int:
        core_mlir.run_passes(module, lowering._EXPAND_MATH_CPU, "lower")
        return str(module).count("math.exp")

    assert "math.tanh" not in _expands_once(task, expand_tanh, "math.tanh")
    x = np.concatenate([np.linspace(-12, 12, 300), np.linspace(-0.01, 0.01, 203),
                        [np.inf, -np.inf, np.nan, 1e-30, -1e-30, 0.0, 1.0, -1.0, 100.0]]).astype(np.float32)
    x = x.reshape(4, 128)
    ref = np.tanh(x.astype(np.float64))
    for out in _scalar_and_vector_outputs(task, x):
        ok = ~np.isnan(x)
        np.testing.assert_allclose(out[ok], ref[ok], rtol=1e-6, atol=2e-7)
        assert np.isnan(out[~ok]).all()


_FPOWI = """func.func @p(%a: tensor<4x128xf32>, %k: tensor<4x128xi64>) -> tensor<4x128xf32> {
  %empty = tensor.empty() : tensor<4x128xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a, %k : tensor<4x128xf32>, tensor<4x128xi64>) outs(%empty : tensor<4x128xf32>) {
    ^bb0(%x: f32, %n: i64, %o: f32):
      %c3 = arith.constant 3 : i64
      %cube = math.fpowi %x, %c3 : f32, i64
      %pow = math.fpowi %x, %n : f32, i64
      %s = arith.addf %cube, %pow : f32
      linalg.yield %s : f32
  } -> tensor<4x128xf32>
  return %r : tensor<4x128xf32>
}"""


def test_vector_fpowi_compiles() -> None:
    """Upstream `convert-math-to-llvm` makes `llvm.intr.powi` with a vector exponent out of a
    vector `math.fpowi` (GELU's tanh form: x^3), which fails to verify; `math-expand-ops{ops=fpowi}`
    runs first (constant exponent: multiplications; variable: `math.powf`)."""
    x = np.linspace(-3, 3, 512, dtype=np.float32).reshape(4, 128)
    n = np.resize(np.arange(-2, 3, dtype=np.int64), (4, 128))
    ref = x.astype(np.float64) ** 3 + x.astype(np.float64) ** n
    for out in _scalar_and_vector_outputs(ansor.create_task(_FPOWI), x, n):
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


_ACCUMULATE = """
func.func @mm_acc(%A: tensor<16x16xf32>, %B: tensor<16x16xf32> {llvm.noalias},
                  %C: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %r = linalg.matmul ins(%A, %B : tensor<16x16xf32>, tensor<16x16xf32>) outs(%C : tensor<16x16xf32>) -> tensor<16x16xf32>
  return %r : tensor<16x16xf32>
}
"""


def test_accumulating_into_an_argument_leaves_it_alone() -> None:
    """`outs(%C)` with %C a parameter: tuned programs computed C += A B into the caller's buffer
    (one-shot bufferization treats arguments as writable), so repeated calls accumulated and every
    candidate failed verification. Arguments are read-only now: each call returns C + A B."""
    import random

    from ansor.space.schedule import sample
    from ansor.core.mlir import parse_payload
    from ansor.targets import generate_sketches

    task = ansor.create_task(_ACCUMULATE)
    with ir.Context(), ir.Location.unknown():
        text = str(parse_payload(task))
    assert text.count("bufferization.writable = false") == 3 and "llvm.noalias" in text
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal((16, 16)).astype(np.float32) for _ in range(3))
    want = c + a @ b
    sk = next(s for s in generate_sketches(task) if s.stages)
    fn = lowering.compile_task(task, sk.script(sample(sk, random.Random(0)).values()))
    c_before = c.copy()
    for _ in range(3):
        (got,) = fn.run([a, b, c])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(c, c_before)


_ERF = _EXP.replace("math.exp", "math.erf")


def test_erf_expanded_to_vector_arithmetic() -> None:
    """`math.erf` (BERT's exact GELU) became one libm `erff` call per lane; it is arithmetic now
    (and one exp, expanded in turn), close to libm in scalar and 16-lane vector programs, with
    small inputs accurate relative to their size and erf(+-inf) = +-1, erf(nan) = nan."""
    import math

    task = ansor.create_task(_ERF)
    assert "math.exp" in _expands_once(task, lowering.expand_erf, "math.erf")
    x = np.concatenate([np.linspace(-6, 6, 300), np.geomspace(1e-6, 0.6, 100), -np.geomspace(1e-6, 0.6, 100),
                        [np.inf, -np.inf, np.nan, 0.0, 0.4999, 0.5, 0.5001, -0.5, 1e-30, 3.0, -3.0, 10.0]])
    x = x.astype(np.float32).reshape(4, 128)
    ref = np.vectorize(math.erf)(x.astype(np.float64))
    for out in _scalar_and_vector_outputs(task, x):
        ok = ~np.isnan(x)
        np.testing.assert_allclose(out[ok], ref[ok], rtol=2e-6, atol=3e-7)
        assert np.isnan(out[~ok]).all()



def test_cpp_expand_passes_match_python() -> None:
    """`ansor-expand-erf,ansor-expand-exp` (passes/CPU/ExpandMath.cpp) print exactly the IR of the
    Python `expand_erf` + `expand_exp` on the exp and erf programs and a vector/scalar function."""
    from mlir import passmanager

    _native.register_everything()
    vec = ("func.func @v(%x: vector<16xf32>, %y: f32) -> (vector<16xf32>, f32) {\n"
           "  %a = math.erf %x : vector<16xf32>\n  %b = math.exp %a : vector<16xf32>\n"
           "  %c = math.erf %y : f32\n  return %b, %c : vector<16xf32>, f32\n}")
    for src in (_EXP, _ERF, None):
        with ir.Context(), ir.Location.unknown():
            if src is None:
                text = vec
            else:
                module = core_mlir.parse_payload(ansor.create_task(src))
                core_mlir.run_passes(module, lowering._BUFFERIZE, "lower")
                text = str(module)
            ref, new = ir.Module.parse(text), ir.Module.parse(text)
            lowering.expand_erf(ref)
            assert lowering.expand_exp(ref) >= 1
            passmanager.PassManager.parse("builtin.module(ansor-expand-erf,ansor-expand-exp)").run(new.operation)
            assert str(new) == str(ref)

I8_GUARD = """func.func @guard(%x: tensor<4x5xf32>) -> tensor<4xi8> {
  %ninf = arith.constant 0xFF800000 : f32
  %one = arith.constant 1 : i8
  %e = tensor.empty() : tensor<4x5xi8>
  %m = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x5xf32>) outs(%e : tensor<4x5xi8>) {
  ^bb0(%a: f32, %o: i8):
    %c = arith.cmpf oeq, %a, %ninf : f32
    %w = arith.extui %c : i1 to i8
    linalg.yield %w : i8
  } -> tensor<4x5xi8>
  %r0 = tensor.empty() : tensor<4xi8>
  %r1 = linalg.fill ins(%one : i8) outs(%r0 : tensor<4xi8>) -> tensor<4xi8>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%m : tensor<4x5xi8>) outs(%r1 : tensor<4xi8>) {
  ^bb0(%a: i8, %acc: i8):
    %b = arith.andi %a, %acc : i8
    linalg.yield %b : i8
  } -> tensor<4xi8>
  return %r : tensor<4xi8>
}
"""


def test_i8_tensors_are_task_arguments_and_results() -> None:
    """torch-mlir's booleans arrive widened to i8 (SDPA's all-masked-row guard in a ViT block):
    a task may take and return i8 tensors, and tuned candidates of it are measured and checked."""
    import random

    from ansor.space.schedule import sample
    from ansor.measure.measurer import LocalMeasurer, MeasureInput, RunOptions
    from ansor.targets import generate_sketches

    task = ansor.create_task(I8_GUARD)
    assert task.outputs[0].dtype == "i8" and task.outputs[0].numpy_dtype() == "int8"
    x = np.zeros((4, 5), dtype=np.float32)
    x[1, :] = -np.inf
    x[3, :4] = -np.inf
    y = ansor.compile(I8_GUARD)(x)
    assert y.dtype == np.int8 and y.tolist() == [0, 1, 0, 0]
    sk = next(s for s in generate_sketches(task) if s.stages)
    s = sample(sk, random.Random(0))
    m = LocalMeasurer(RunOptions(threads=1, repeat=1, min_repeat_ms=0))
    try:
        res = m.measure([MeasureInput(task, s, sk.script(s.values()))])[0]
    finally:
        m.close()
    assert res.error is None, res.error_msg


# An embedding lookup as torch-mlir exports it: token ids (i64) index the table's rows, behind
# asserts that abort on an id outside [0, 10).
EMBEDDING = """func.func @embed(%table: tensor<10x4xf32>, %ids: tensor<1x6xi64>) -> tensor<1x6x4xf32> {
  %c10 = arith.constant 10 : index
  %c0 = arith.constant 0 : i64
  %e = tensor.empty() : tensor<1x6x4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(b, s, d) -> (b, s)>, affine_map<(b, s, d) -> (b, s, d)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%ids : tensor<1x6xi64>) outs(%e : tensor<1x6x4xf32>) {
  ^bb0(%id: i64, %o: f32):
    %i = arith.index_cast %id : i64 to index
    %d = linalg.index 2 : index
    %lt = arith.cmpi slt, %i, %c10 : index
    cf.assert %lt, "index must be smaller than dim size"
    %ge = arith.cmpi sge, %id, %c0 : i64
    cf.assert %ge, "index must be larger or equal to 0"
    %v = tensor.extract %table[%i, %d] : tensor<10x4xf32>
    linalg.yield %v : f32
  } -> tensor<1x6x4xf32>
  return %r : tensor<1x6x4xf32>
}
"""


def test_index_inputs_get_valid_random_values() -> None:
    """Random inputs for an embedding's ids stay inside the table (negative ids used to trip
    torch-mlir's asserts: the untuned program aborted and the task could never be tuned)."""
    import random

    from ansor.space.schedule import sample
    from ansor.measure.measurer import LocalMeasurer, MeasureInput, RunOptions, index_bounds, make_inputs
    from ansor.targets import generate_sketches

    task = ansor.create_task(EMBEDDING)
    assert index_bounds(task) == {1: 10}
    ids = make_inputs(task)[1]
    assert ids.dtype == np.int64 and ids.min() >= 0 and ids.max() < 10
    assert index_bounds(ansor.create_task(I8_GUARD)) == {}  # integers that index nothing
    sk = next(s for s in generate_sketches(task) if s.stages)
    s = sample(sk, random.Random(0))
    m = LocalMeasurer(RunOptions(threads=1, repeat=1, min_repeat_ms=0))
    try:
        assert m.baseline(task).error is None
        res = m.measure([MeasureInput(task, s, sk.script(s.values()))])[0]
    finally:
        m.close()
    assert res.error is None, res.error_msg


def test_fma_peak_is_measured_not_folded() -> None:
    """The roofline probe times real FMAs: a folded-away loop would report an absurd rate, a
    scalarized one a tiny rate. Bounds for one core: above 2 GFLOP/s (scalar code at 1 GHz), below
    2 FMA pipes x lanes x 2 flops x 6 GHz."""
    one = lowering.fma_peak_gflops(threads=1, vector_bits=256, seconds=0.05, repeats=2)
    assert 2.0 < one < 2 * 8 * 2 * 6.0
    wide = lowering.fma_peak_gflops(threads=1, vector_bits=512, seconds=0.05, repeats=2)
    assert 2.0 < wide < 2 * 16 * 2 * 6.0


def test_runtime_libraries_that_do_not_load_are_left_out(monkeypatch, tmp_path) -> None:
    """The ExecutionEngine aborts the process on a shared library it cannot load (the GPU host's
    runtime bundle lacks a dependency of libmlir_c_runner_utils.so): such a library is left out."""
    import mlir
    from ansor.targets.cpu import lowering

    fake = tmp_path / "mlir"
    (fake / "lib").mkdir(parents=True)
    (fake / "lib" / "libmlir_c_runner_utils.so").write_bytes(b"not an ELF file")
    monkeypatch.setattr(mlir, "__path__", [str(fake)])
    lowering.runtime_libs.cache_clear()
    try:
        libs = lowering.runtime_libs()
    finally:
        lowering.runtime_libs.cache_clear()
    assert not any("libmlir_c_runner_utils" in lib for lib in libs)


def test_horizontal_sums_are_reassociated() -> None:
    """A row's sum as one vector reduction lowers to LLVM's reduction with `reassoc` (a tree of
    vector adds), not an in-order chain of scalar adds (`lowering._TO_LLVM_CPU`)."""
    from ansor.targets.cpu import lowering as cpu_lowering

    text = """
func.func @rowsum(%v: vector<197xf32>) -> f32 {
  %s = vector.reduction <add>, %v : vector<197xf32> into f32
  return %s : f32
}
"""
    with ir.Context(), ir.Location.unknown():
        m = ir.Module.parse(text)
        core_mlir.run_passes(m, cpu_lowering._TO_LLVM_CPU, "lower")
        llvm = str(m)
    assert "llvm.intr.vector.reduce.fadd" in llvm and "reassoc" in llvm


def test_calls_reuse_packed_arguments_by_address() -> None:
    """`CompiledKernel.run` packs its arguments once per set of addresses (building descriptors
    took ~10 us of a 50-200 us row-wise call): a repeated call reuses the packed array, a new input
    array (another address) gets its own, and results follow the data, not a stale descriptor."""
    task = ansor.create_task(_EXP)
    k = lowering.compile_task(task, None)
    shape = task.inputs[0].shape
    x = np.linspace(-1.0, 1.0, int(np.prod(shape)), dtype=np.float32).reshape(shape)
    out = k.alloc_outputs()
    for _ in range(3):
        (got,) = k.run([x], out)
    assert got is out[0] and len(k._packed) == 1
    np.testing.assert_allclose(got, np.exp(x), rtol=1e-5)
    y = x * 0.5
    (got,) = k.run([y], out)
    assert len(k._packed) == 2
    np.testing.assert_allclose(got, np.exp(y), rtol=1e-5)
    x[...] = 0.25  # same address, new contents
    (got,) = k.run([x], out)
    np.testing.assert_allclose(got, np.exp(x), rtol=1e-5)
    x.flags.writeable = False  # a read-only input's address comes another way
    (got,) = k.run([x])
    np.testing.assert_allclose(got, np.exp(x), rtol=1e-5)
    assert k.time([x], 2, out) > 0 and len(k._packed) == 3  # timing args are not cached
    import pytest

    with pytest.raises(ValueError, match="output #0"):
        k.run([x], [np.empty(shape, np.float64)])
    with pytest.raises(ValueError, match="output #0"):
        k.run([x], [np.empty(shape[::-1], np.float32).T])


def _softmax_chain_bufferized(split: bool) -> str:
    """softmax-2364x197's reduction-chain sketch (whole rows, 4 rows a tile), bufferized."""
    from ansor.core.mlir import apply_script, parse_payload
    from ansor.targets import generate_sketches

    task = ansor.create_task(workloads.get("softmax-2364x197"))
    sk = next(s for s in generate_sketches(task) if any(st.kind == "chain" for st in s.stages))
    knobs = {k.name: (4 if k.name.endswith("d0.t1") else 0 if k.name.endswith("unroll") else 197)
             for k in sk.knobs}
    with ir.Context(), ir.Location.unknown():
        m = parse_payload(task)
        if split:
            assert lowering.split_shared_empties(m) >= 1
        apply_script(m, sk.script(knobs))
        core_mlir.run_passes(m, lowering._BUFFERIZE, "lower")
        assert lowering.reciprocal_divisors(m) == 1
        return str(m)


def test_chain_members_do_not_copy_the_output_tile() -> None:
    """A softmax's exp and division shared one (CSE-merged) `tensor.empty`: fused into the chain's
    loop, the exp wrote into the output's tile and bufferization copied that (uninitialised) tile
    into a fresh buffer on every tile. `split_shared_empties` gives each its own destination."""
    assert "memref.copy" in _softmax_chain_bufferized(split=False)  # the upstream behaviour
    text = _softmax_chain_bufferized(split=True)
    assert "memref.copy" not in text and text.count("memref.alloc()") == 3  # max, exp tile, sum


def test_division_by_a_broadcast_row_value_multiplies_by_its_reciprocal() -> None:
    """softmax's `x / sum` over a vectorized row: one division of the (unbroadcast) sum, then a
    vector multiplication (`reciprocal_divisors`); results stay within the f32 tolerance."""
    import random

    from ansor.space.schedule import sample
    from ansor.targets import generate_sketches

    text = _softmax_chain_bufferized(split=True)
    divs = [ln for ln in text.splitlines() if "arith.divf" in ln]
    assert len(divs) == 1 and "vector<1xf32>" in divs[0] and "vector<1x197xf32>" not in divs[0]
    task = ansor.create_task(workloads.get("softmax-2364x197"))
    sk = next(s for s in generate_sketches(task) if any(st.kind == "chain" for st in s.stages))
    k = lowering.compile_task(task, sk.script(sample(sk, random.Random(1)).values()))
    x = np.random.default_rng(0).standard_normal((2364, 197)).astype(np.float32) * 4
    (got,) = k.run([x])
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_parallel_program_without_openmp_runtime_is_a_one_line_error(monkeypatch) -> None:
    """Without an OpenMP runtime a parallel CPU program fails to JIT with a one-line error that
    names the fix (the GPU host's runtime bundle has none), not ORC's "Unknown function" at the
    first call; `ANSOR_OPENMP_LIB` picks the runtime."""
    import random

    from ansor.search.policy import RandomSearch
    from ansor.targets import generate_sketches

    assert lowering._find_openmp() is not None  # the intel-openmp dependency
    monkeypatch.setattr("ansor.config.OPENMP_LIB", "/opt/custom/libomp.so")
    assert lowering._find_openmp() == "/opt/custom/libomp.so"
    task = ansor.create_task(workloads.get("matmul-256"), name="matmul-256")
    sketches = generate_sketches(task)
    by = {s.name: s for s in sketches}
    scripts = [by[s.sketch].script(s.values())
               for s in RandomSearch(sketches, seed=random.Random(0).randrange(99), measured=set()).next_batch(8)]
    without_omp = tuple(lib for lib in lowering.runtime_libs() if "omp" not in lib)
    monkeypatch.setattr(lowering, "runtime_libs", lambda: without_omp)
    errors = 0
    for script in scripts:
        try:
            lowering.compile_task(task, script)
        except core_mlir.LoweringError as exc:
            assert exc.stage == "jit" and "needs an OpenMP runtime" in str(exc) and "\n" not in str(exc)
            errors += 1
    assert errors >= 1  # some of 8 random matmul schedules run their outer loops in parallel

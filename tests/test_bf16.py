"""bf16 end to end on the CPU side: tasks with bf16 arguments are created, get seeded bfloat16
inputs (numpy's `bfloat16` from ml_dtypes), an f32 numpy reference, run through the CPU
lowering, and are verified with the tuner's criterion; records round-trip."""

from __future__ import annotations

import json
import random

import ansor
import ml_dtypes
import numpy as np
import pytest
from ansor.core.dtypes import as_dtype, element_bytes, is_float, numpy_dtype, numpy_dtype_name
from ansor.core.task import SearchTask, TensorSpec, create_task
from ansor.frontend import workloads
from ansor.measure import measurer, verify
from ansor.measure.measurer import LocalMeasurer, MeasureInput, MeasureResult, RunOptions
from ansor.space.schedule import Schedule, sample
from ansor.targets import compile_task, generate_sketches
from ansor.tuning.records import Record, RecordWriter, load_records

BF16 = np.dtype(ml_dtypes.bfloat16)
MATMUL = "matmul-256x512x1024-bf16"
K = 1024

#: out = 2 * x + y, all bf16 (the body computes in bf16: LLVM extends to f32 and rounds back).
AXPY = """#m = affine_map<(i, j) -> (i, j)>
func.func @axpy_bf16(%x: tensor<64x96xbf16>, %y: tensor<64x96xbf16>) -> tensor<64x96xbf16> {
  %e = tensor.empty() : tensor<64x96xbf16>
  %r = linalg.generic {indexing_maps = [#m, #m, #m], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<64x96xbf16>, tensor<64x96xbf16>) outs(%e : tensor<64x96xbf16>) {
    ^bb0(%a: bf16, %b: bf16, %o: bf16):
      %c = arith.constant 2.0 : bf16
      %p = arith.mulf %a, %c : bf16
      %s = arith.addf %p, %b : bf16
      linalg.yield %s : bf16
  } -> tensor<64x96xbf16>
  return %r : tensor<64x96xbf16>
}
"""


@pytest.fixture(scope="module")
def task() -> SearchTask:
    return create_task(workloads.get(MATMUL), name=MATMUL)


@pytest.fixture(scope="module")
def inputs(task) -> list[np.ndarray]:
    return measurer.make_inputs(task)


@pytest.fixture(scope="module")
def exact(inputs) -> np.ndarray:
    a, b = inputs
    return a.astype(np.float64) @ b.astype(np.float64)  # bf16 products are exact in f64 (and f32)


# ---------------------------------------------------------------------------------------------
# Types and tasks


def test_dtype_table() -> None:
    assert np.dtype("bfloat16") == BF16  # importing ml_dtypes registered the name
    assert numpy_dtype(numpy_dtype_name("bf16")) == BF16 and numpy_dtype("bfloat16") == BF16
    assert numpy_dtype_name("f16") == "float16" and numpy_dtype(np.float32) == np.float32
    assert element_bytes("bf16") == 2 and BF16.itemsize == 2
    assert is_float(BF16) and is_float("bf16") and is_float(np.float16) and is_float("float32")
    assert not is_float(np.int32) and not is_float("i8")
    assert TensorSpec((2, 3), "bf16").numpy_dtype() == "bfloat16"


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_bf16_matmul_task(target) -> None:
    t = ansor.create_task(workloads.get(MATMUL), target=target)
    assert [s.dtype for s in t.inputs] == ["bf16", "bf16"] and [s.dtype for s in t.outputs] == ["f32"]
    assert [s.shape for s in t.inputs] == [(256, 1024), (1024, 512)] and t.outputs[0].shape == (256, 512)
    assert t.flops == 2 * 256 * 512 * 1024 and t.target == target
    # A task and a record of it round-trip through JSON (the log's format).
    assert SearchTask.from_json(json.loads(json.dumps(t.to_json()))) == t


def test_records_round_trip(tmp_path, task) -> None:
    rec = Record.of(MeasureInput(task, Schedule.of("s0", {"x": 4}), "// script"), MeasureResult(costs=(1e-3,)))
    path = tmp_path / "log.jsonl"
    with RecordWriter(path) as w:
        w.append(rec)
    (back,) = load_records(path)
    assert back.task == task and back.task.inputs[0].dtype == "bf16" and back.key == rec.key


# ---------------------------------------------------------------------------------------------
# Inputs and the reference


def test_make_inputs_are_bfloat16(task, inputs) -> None:
    assert [a.dtype for a in inputs] == [BF16, BF16]
    assert [a.shape for a in inputs] == [s.shape for s in task.inputs]
    for a in inputs:
        f = a.astype(np.float32)
        assert np.all(np.abs(f) <= 1.0) and np.unique(f).size > 100  # drawn like other floats
    again = measurer.make_inputs(task)  # seeded: the same in every process
    assert all(np.array_equal(x.view(np.uint16), y.view(np.uint16)) for x, y in zip(inputs, again, strict=True))


def test_numpy_reference_is_f32_and_exact_up_to_f32_sums(task, inputs, exact) -> None:
    (ref,) = measurer._numpy_reference(task, inputs)
    assert ref.dtype == np.float32 and ref.shape == (256, 512)
    # Standard bound of a K-term f32 sum of exact products: |err| <= K * eps * sum |a||b|.
    a, b = (np.abs(x.astype(np.float64)) for x in inputs)
    bound = K * np.finfo(np.float32).eps * (a @ b)
    assert np.all(np.abs(ref - exact) <= bound)
    assert np.abs(ref - exact).max() < 1e-4 * np.abs(exact).max()
    assert verify.check_task_outputs(task, [ref], [exact.astype(np.float32)]) is None


# ---------------------------------------------------------------------------------------------
# The CPU program and verification


@pytest.fixture(scope="module")
def cpu_outputs(task, inputs) -> list[np.ndarray]:
    kernel = compile_task(task, None)
    return kernel.run(inputs, verify.poisoned(task.outputs))


def test_untransformed_cpu_program_matches_reference(task, inputs, exact, cpu_outputs) -> None:
    (ref,) = measurer._numpy_reference(task, inputs)
    (out,) = cpu_outputs
    assert out.dtype == np.float32 and np.isfinite(out).all()
    assert verify.check_task_outputs(task, cpu_outputs, [ref]) is None
    assert np.abs(out - exact).max() < 1e-4 * np.abs(exact).max()
    # What the tuner does: reference_outputs cross-checks the program against numpy.
    _, outs, kernel = measurer.reference_outputs(task)
    assert kernel is not None and outs[0].dtype == np.float32
    assert verify.check_task_outputs(task, outs, [ref]) is None


def test_planted_wrong_outputs_are_rejected(task, inputs, cpu_outputs) -> None:
    (ref,) = measurer._numpy_reference(task, inputs)
    (out,) = cpu_outputs
    bad = out.copy()
    bad[17, 33] += 0.5
    assert "1 of 131072" in verify.check_task_outputs(task, [bad], [ref])
    bad = out.copy()
    bad[-1, :] = np.nan  # a skipped row leaves the poison behind
    assert "NaN" in verify.check_task_outputs(task, [bad], [ref])
    # Accumulating in bf16 (or rounding the f32 result to bf16) is not the program's precision.
    rounded = out.astype(BF16).astype(np.float32)
    assert verify.check_task_outputs(task, [rounded], [ref]) is not None
    # One K term missing.
    a, b = (x.astype(np.float32) for x in inputs)
    short = out - np.outer(a[:, 5], b[5, :])
    assert verify.check_task_outputs(task, [short], [ref]) is not None


def test_verification_of_bfloat16_arrays() -> None:
    spec = TensorSpec((4, 8), "bf16")
    (p0,) = verify.poisoned([spec])
    (p1,) = verify.poisoned([spec], 1)
    assert p0.dtype == BF16 and np.isnan(p0).all()
    assert p1.dtype == BF16 and (p1.astype(np.float32) == 0).all()
    rng = np.random.default_rng(0)
    ref = rng.uniform(-1, 1, (4, 8)).astype(BF16)
    assert verify.check_output(ref.copy(), ref) is None
    assert verify.default_rtol(ref.dtype) == 3e-2
    near = (ref.astype(np.float32) * (1 + 2e-3)).astype(BF16)  # one bf16 ulp or so: within 3e-2
    assert verify.check_output(near, ref) is None
    off = ref.copy()
    off[2, 3] = off[2, 3] + BF16.type(0.5)
    assert "1 of 32" in verify.check_output(off, ref)
    hole = ref.copy()
    hole[0, 0] = np.nan
    assert "NaN" in verify.check_output(hole, ref)
    ref_nan = ref.copy()
    ref_nan[1, 1] = np.nan
    assert verify.sentinel_runs([ref_nan]) == [0, 1] and verify.sentinel_runs([ref]) == [0]
    assert verify.check_output(ref_nan.copy(), ref_nan) is None


def test_npz_round_trip_keeps_bfloat16(tmp_path) -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4).astype(BF16)
    np.savez(tmp_path / "a.npz", a0=a)
    raw = np.load(tmp_path / "a.npz")["a0"]
    assert raw.dtype != BF16  # numpy stores it as raw 2-byte records ("V2")
    back = as_dtype(raw, "bfloat16")
    assert back.dtype == BF16 and np.array_equal(back.astype(np.float32), a.astype(np.float32))
    assert as_dtype(a, np.float32).dtype == np.float32  # other dtypes: a cast


# ---------------------------------------------------------------------------------------------
# A bf16 element-wise task (written as MLIR text) and the worker path


def test_elementwise_bf16_task_on_cpu() -> None:
    t = create_task(AXPY, name="axpy-bf16")
    assert [s.dtype for s in t.inputs + t.outputs] == ["bf16"] * 3
    ins = measurer.make_inputs(t)
    (out,) = compile_task(t, None).run(ins, verify.poisoned(t.outputs))
    x, y = (a.astype(np.float32) for a in ins)
    expected = (2 * x + y).astype(BF16)  # 2x is exact: one rounding
    assert out.dtype == BF16
    assert np.array_equal(out.view(np.uint16), expected.view(np.uint16))
    assert verify.check_task_outputs(t, [out], [expected]) is None
    _, refs, kernel = measurer.reference_outputs(t)
    assert kernel is not None and refs[0].dtype == BF16
    # A compiled function takes f32 arrays too (cast to the argument type).
    f = ansor.compile(AXPY)
    assert np.array_equal(f(x, y).view(np.uint16), expected.view(np.uint16))


def test_gpu_task_reference_cache_keeps_bfloat16(tmp_path, monkeypatch) -> None:
    from ansor import config

    monkeypatch.setattr(config, "CACHE_DIR", tmp_path)
    t = create_task(AXPY, name="axpy-bf16", target="cuda")
    _, first, k1 = measurer.reference_outputs(t)  # computed on the CPU, written to the cache
    _, again, k2 = measurer.reference_outputs(t)  # read back from the .npz
    assert k1 is None and k2 is None and list((tmp_path / "refs").glob("*.npz"))
    assert first[0].dtype == BF16 and again[0].dtype == BF16
    assert np.array_equal(first[0].view(np.uint16), again[0].view(np.uint16))


def test_local_measurer_tunes_bf16_matmul() -> None:
    """Worker processes: the reference travels as .npz (bfloat16 inputs), every CPU sketch builds,
    runs on bf16 inputs and passes verification."""
    t = create_task(workloads.get("matmul-64-bf16"), name="matmul-64-bf16")
    rng = random.Random(0)
    inps = [MeasureInput(t, s, sk.script(s.values())) for sk in generate_sketches(t) for s in [sample(sk, rng)]]
    m = LocalMeasurer(RunOptions(repeat=1, min_repeat_ms=1.0, timeout_s=20.0))
    try:
        base = m.baseline(t)
        assert base.error is None, base.error_msg
        results = m.measure(inps)
    finally:
        m.close()
    assert results and all(r.error is None for r in results), [r.error_msg for r in results]

"""Real builds and runs in worker processes: correct candidates are timed; faults become records."""

from __future__ import annotations

import math
import random

import pytest

from ansor.annotation import sample
from ansor.measure import LocalMeasurer, MeasureError, MeasureInput, RunOptions
from ansor.sketch import generate_sketches
from ansor.task import SearchTask, TensorSpec

FAST = RunOptions(repeat=1, min_repeat_ms=1.0, timeout_s=20.0)

I1_PAYLOAD = """func.func @f(%a: tensor<8xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xi1>
  %m = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%a : tensor<8xf32>) outs(%e : tensor<8xi1>) {
  ^bb0(%x: f32, %o: i1):
    %z = arith.constant 0.0 : f32
    %c = arith.cmpf ogt, %x, %z : f32
    linalg.yield %c : i1
  } -> tensor<8xi1>
  %e2 = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%m, %a : tensor<8xi1>, tensor<8xf32>) outs(%e2 : tensor<8xf32>) {
  ^bb0(%c: i1, %x: f32, %o: f32):
    %z = arith.constant 0.0 : f32
    %s = arith.select %c, %x, %z : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}
"""


def _inputs(task, n: int, seed: int = 0) -> list[MeasureInput]:
    sk = generate_sketches(task)[0]
    rng = random.Random(seed)
    return [MeasureInput(task, s, sk.script(s.values())) for s in (sample(sk, rng) for _ in range(n))]


def test_candidates_are_verified_and_timed(matmul64) -> None:
    m = LocalMeasurer(FAST)
    try:
        base = m.baseline(matmul64)
        assert base.error is None and 0 < base.latency < 1
        results = m.measure(_inputs(matmul64, 3))
    finally:
        m.close()
    assert all(r.error is None for r in results), [r.error_msg for r in results]
    assert all(0 < r.latency < 1 and r.build_s > 0 for r in results)


def test_mlir_assertion_in_worker_is_a_crash_record() -> None:
    # Upstream behaviour pinned: finalize-memref-to-llvm asserts (aborts) on i1 memref stores.
    task = SearchTask("i1", "f", I1_PAYLOAD, (TensorSpec((8,), "f32"),), (TensorSpec((8,), "f32"),), 8, "deadbeef")
    m = LocalMeasurer(FAST)
    try:
        base = m.baseline(task)
        assert base.error is MeasureError.CRASH
        assert "Assertion" in base.error_msg or "abort" in base.error_msg
        # the measurer survives and keeps working
        assert m.baseline(task).error is MeasureError.CRASH
    finally:
        m.close()


@pytest.mark.parametrize(
    ("fault", "code"),
    [("abort", MeasureError.CRASH), ("segv", MeasureError.CRASH), ("hang", MeasureError.TIMEOUT),
     ("wrong", MeasureError.WRONG_ANSWER)],
)
def test_injected_faults_become_records(monkeypatch, matmul64, fault, code) -> None:
    monkeypatch.setenv("ANSOR_ALLOW_FAULTS", "1")
    monkeypatch.setenv("ANSOR_INJECT_FAULT", fault)
    m = LocalMeasurer(RunOptions(repeat=1, min_repeat_ms=1.0, timeout_s=5.0))
    try:
        assert m.baseline(matmul64).error is None  # the reference path is not injected
        results = m.measure(_inputs(matmul64, 2, seed=1))
    finally:
        m.close()
    assert [r.error for r in results] == [code, code]
    assert all(math.isinf(r.latency) and r.error_msg for r in results)


def test_broken_script_is_an_apply_error(matmul64) -> None:
    inp = _inputs(matmul64, 1)[0]
    bad = MeasureInput(matmul64, inp.schedule, inp.script.replace("tile_using_forall", "tile_using_nothing"))
    m = LocalMeasurer(FAST)
    try:
        res = m.measure([bad])[0]
    finally:
        m.close()
    assert res.error is MeasureError.APPLY and "parse" in res.error_msg

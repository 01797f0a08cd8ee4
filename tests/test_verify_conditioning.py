"""Ill-conditioned outputs: a kernel that sums in another order is not a wrong answer there, and a
kernel that skips work still is (`verify.conditioning_slack`, `measurer.reference_slack`).

The case is BERT's softmax normalisation, x / sum(x) over rows, on the tuner's inputs (uniform in
[-1, 1)): some rows sum to nearly 0, where the f32 quotient depends on the summation order. On an
H200 the tuner refused the task's default GPU program for it (521 of 196608 elements, 7e-4
relative, results/gpu-network/README.md)."""

from __future__ import annotations

import numpy as np
import pytest
from ansor.measure import verify

K = 128


def _seq(x: np.ndarray) -> np.ndarray:
    """Row sums in order, in f32 (as the untransformed CPU loop adds)."""
    return np.cumsum(x, axis=1, dtype=np.float32)[:, -1]


def _tree32(x: np.ndarray) -> np.ndarray:
    """Row sums as a GPU block adds: 32 lanes each sum a strided slice, then a tree."""
    p = x.reshape(x.shape[0], -1, 32).sum(axis=1, dtype=np.float32)
    while p.shape[1] > 1:
        p = (p[:, ::2] + p[:, 1::2]).astype(np.float32)
    return p[:, 0]


def _normalise(x: np.ndarray, rowsum) -> np.ndarray:
    return (x / rowsum(x)[:, None]).astype(np.float32)


@pytest.fixture(scope="module")
def case():
    x = np.random.default_rng(7).uniform(-1, 1, (4096, K)).astype(np.float32)
    ref = _normalise(x, _seq)
    perturbed = [[_normalise(p[0], _seq)] for p in (verify.perturbed_inputs([x], k) for k in range(2))]
    slack = verify.conditioning_slack([ref], perturbed, K)
    return x, ref, slack


def test_reordered_sum_fails_without_slack_passes_with_it(case) -> None:
    x, ref, slack = case
    gpu = _normalise(x, _tree32)
    assert verify.check_output(gpu, ref, reduction=K) is not None  # the false alarm the tuner raised
    assert verify.check_output(gpu, ref, reduction=K, slack=slack[0]) is None
    assert verify.wrong_elements(gpu, ref, reduction=K, slack=slack[0]) == 0


def test_slack_stays_on_the_ill_conditioned_rows(case) -> None:
    x, ref, slack = case
    s = slack[0]
    tol = 1e-5 * np.sqrt(K) * np.sqrt(np.mean(ref.astype(np.float64) ** 2)) + 1e-5 * np.abs(ref)
    # Well-conditioned elements keep (nearly) their tolerance; the room goes where rows sum to ~0.
    assert np.median(s / tol) < 1e-2
    sums = np.abs(_seq(x))
    widened = (s / tol > 1).any(axis=1)
    assert widened.any() and sums[widened].max() < np.median(sums) / 10


def test_skipped_work_still_fails_with_slack(case) -> None:
    x, ref, slack = case
    missing = _normalise(x, lambda a: _seq(a[:, 1:]))  # one term of every row sum left out
    assert "elements differ" in verify.check_output(missing, ref, reduction=K, slack=slack[0])
    unwritten = _normalise(x, _tree32)
    unwritten[100:200] = verify.sentinel(np.float32)  # a tile never written: the poison stays
    assert "NaN/inf" in verify.check_output(unwritten, ref, reduction=K, slack=slack[0])


def test_mismatch_line_names_the_conditioning_term(case) -> None:
    x, ref, slack = case
    s = slack[0]
    i = int(np.argmax(s))
    bad = ref.copy()
    bad.flat[i] += np.float32(10 * s.flat[i] + 1)
    msg = verify.check_output(bad, ref, reduction=K, slack=s)
    assert msg is not None and "+ conditioning" in msg and msg.count("\n") == 0


def test_perturbation_moves_only_f32_f64_inputs() -> None:
    f32 = np.linspace(-3, 3, 1001, dtype=np.float32)
    ints = np.arange(10, dtype=np.int32)
    halves = np.linspace(-1, 1, 17).astype(np.float16)
    p = verify.perturbed_inputs([f32, ints, halves], 0)
    moved = p[0] != f32
    assert moved[f32 != 0].all() and (p[0][f32 == 0] == 0).all()  # every nonzero element moves
    assert np.all(np.abs(p[0] - f32) <= 3 * np.finfo(np.float32).eps * np.abs(f32))  # 2 ulps, rounded
    assert p[1] is ints and p[2] is halves
    assert (verify.perturbed_inputs([f32], 0)[0] == p[0]).all()  # seeded


def test_reference_slack_of_a_cpu_task(tmp_path, monkeypatch) -> None:
    """The tuner's path: the reference program (here the CPU program of x / rowsum(x)) run on
    perturbed inputs gives slack on the rows that sum to nearly 0, none for an integer-free task
    whose outputs do not move."""
    from ansor import config
    from ansor.core.task import create_task
    from ansor.measure.measurer import reference_outputs, reference_slack

    monkeypatch.setattr(config, "CACHE_DIR", tmp_path)
    text = """
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d0)>
func.func @normalise(%x: tensor<256x128xf32>) -> tensor<256x128xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<256xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<256xf32>) -> tensor<256xf32>
  %s = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<256x128xf32>) outs(%f : tensor<256xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %in, %acc : f32
    linalg.yield %a : f32
  } -> tensor<256xf32>
  %e2 = tensor.empty() : tensor<256x128xf32>
  %q = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : tensor<256x128xf32>, tensor<256xf32>) outs(%e2 : tensor<256x128xf32>) {
  ^bb0(%in: f32, %d: f32, %o: f32):
    %r = arith.divf %in, %d : f32
    linalg.yield %r : f32
  } -> tensor<256x128xf32>
  return %q : tensor<256x128xf32>
}
"""
    task = create_task(text, target="cpu")
    inputs, outs, kernel = reference_outputs(task)
    slack = reference_slack(task, inputs, outs, kernel)
    assert len(slack) == 1 and slack[0] is not None and slack[0].shape == outs[0].shape
    rows = np.abs(inputs[0].astype(np.float64).sum(axis=1))
    worst_row = int(np.unravel_index(np.argmax(slack[0]), slack[0].shape)[0])
    assert rows[worst_row] <= np.quantile(rows, 0.05)  # the most room where the row sum is smallest

"""The LayerNorm + GELU workload (`lngelu-MxN`): listed, not in the CPU suite, and equal to a
numpy reference when compiled for the CPU."""

from __future__ import annotations

import ansor
import numpy as np
import pytest
from ansor.frontend import workloads


def _lngelu(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=-1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=-1, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + eps) * g + b
    return 0.5 * y * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (y + 0.044715 * y**3)))


def test_lngelu_is_listed_but_not_in_the_cpu_suite() -> None:
    names = [n for n, _ in workloads.describe()]
    assert "lngelu-4096x1024" in names
    assert not any(n.startswith("lngelu") for n in workloads.suite())
    text = workloads.get("lngelu-4096x1024")
    assert "math.tanh" in text and "math.rsqrt" in text and text.count("linalg.generic") == 3


@pytest.mark.parametrize("name", ["lngelu-8x64", "lngelu-3x17"])
def test_lngelu_matches_numpy(name: str) -> None:
    fn = ansor.compile(workloads.get(name))
    rng = np.random.default_rng(0)
    m, n = (int(v) for v in name.split("-")[1].split("x"))
    x = (3.0 * rng.standard_normal((m, n)) + 1.0).astype(np.float32)  # a non-zero mean per row
    g = (1.0 + 0.5 * rng.standard_normal(n)).astype(np.float32)
    b = (0.5 * rng.standard_normal(n)).astype(np.float32)
    got = fn(x, g, b)
    assert got.shape == (m, n)
    np.testing.assert_allclose(got, _lngelu(x, g, b), rtol=1e-4, atol=1e-4)


def test_lngelu_bad_name() -> None:
    with pytest.raises(KeyError):
        workloads.get("lngelu-8")

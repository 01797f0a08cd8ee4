"""The verification fast path (`verify._clearly_within`) never changes a verdict or a message.

For every case, `check_output` with the fast path and with it switched off (the exact f64 path
alone, as before) return the same string or None; and wherever the fast path accepts, the exact
path accepts too. Cases: errors swept across the margin and the tolerance (elements at the
tolerance), NaN/inf in outputs and references, sentinel-valued unwritten outputs, f16/bf16/f64,
integers, shape and dtype mismatches, explicit atol/rtol, all-zero references."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from ansor import config
from ansor.measure import verify
from ansor.measure.verify import check_output


def _exact(out: np.ndarray, ref: np.ndarray, **kw) -> str | None:
    saved = config.VERIFY_FAST
    config.VERIFY_FAST = False
    try:
        return check_output(out, ref, **kw)
    finally:
        config.VERIFY_FAST = saved


def _same(out: np.ndarray, ref: np.ndarray, **kw) -> str | None:
    """The verdict, asserted equal with and without the fast path; a fast accept implies an exact one."""
    fast = check_output(out, ref, **kw)
    exact = _exact(out, ref, **kw)
    assert fast == exact, (fast, exact)
    rtol, atol, red = kw.get("rtol"), kw.get("atol"), kw.get("reduction", 1)
    if out.shape == ref.shape and ref.size and verify._clearly_within(out, ref, rtol, atol, red):
        assert exact is None
    return fast


def _atol(ref: np.ndarray, reduction: int, rtol: float | None = None) -> float:
    r = ref.astype(np.float64)
    r = r[np.isfinite(r)]
    rt = verify.default_rtol(ref.dtype) if rtol is None else rtol
    return rt * math.sqrt(max(reduction, 1)) * float(np.sqrt(np.mean(r * r)))


DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("reduction", [1, 1536])
def test_errors_swept_across_margin_and_tolerance(dtype, reduction: int) -> None:
    rng = np.random.default_rng(0)
    ref = rng.uniform(-2, 2, (37, 300)).astype(dtype)
    at = _atol(ref, reduction)
    rt = verify.default_rtol(ref.dtype)
    verdicts, fast = set(), 0
    for frac in [0.0, 0.1, 0.49, 0.5, 0.51, 0.9, 0.999, 1.0, 1.001, 1.5, 10.0]:
        for where in ["one", "all"]:
            out = ref.astype(np.float64)
            step = frac * at
            if where == "one":
                out[5, 7] += step
            else:
                out += step * np.sign(rng.standard_normal(out.shape))
            out = out.astype(dtype)
            verdicts.add(_same(out, ref, reduction=reduction) is None)
            fast += verify._clearly_within(out, ref, None, None, reduction)
    # every element exactly at its tolerance (as rounded to the dtype), and one step either side
    r64 = ref.astype(np.float64)
    tol = at + rt * np.abs(r64)
    for sign in (1.0, -1.0):
        at_tol = (r64 + sign * tol).astype(dtype)
        verdicts.add(_same(at_tol, ref, reduction=reduction) is None)
        if np.dtype(dtype).kind == "f":  # (numpy's nextafter has no bfloat16 loop)
            for toward in (ref, np.full_like(ref, sign * np.inf)):
                verdicts.add(_same(np.nextafter(at_tol, toward), ref, reduction=reduction) is None)
    assert fast > 0  # the fast path took some of them
    assert verdicts == {True, False}  # the sweep does cross the tolerance


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_non_finite_outputs_and_references(dtype) -> None:
    rng = np.random.default_rng(1)
    ref = rng.uniform(-1, 1, (16, 64)).astype(dtype)
    for v in [np.nan, np.inf, -np.inf]:
        out = ref.copy()
        out[3, 4] = v
        assert _same(out, ref, reduction=64) is not None
        r2 = ref.copy()
        r2[3, 4] = v
        assert _same(r2.copy(), r2, reduction=64) is None  # reproduced exactly
        assert _same(ref.copy(), r2, reduction=64) is not None  # finite where the reference is not
        for w in [np.nan, np.inf, -np.inf, 0.0]:
            out = r2.copy()
            out[3, 4] = w
            _same(out, r2, reduction=64)
    big = np.full((8,), np.finfo(np.float32).max if np.dtype(dtype) == np.float32 else 1e4, dtype=dtype)
    _same(-big, big)  # the difference overflows the dtype
    _same(big.copy(), big)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_sentinel_valued_unwritten_outputs(dtype) -> None:
    rng = np.random.default_rng(2)
    ref = rng.uniform(0.5, 1.5, (33, 65)).astype(dtype)
    for which in (0, 1):
        s = verify.sentinel(ref.dtype, which)
        for cut in [(slice(None), slice(-1, None)), (slice(-1, None), slice(None)), (slice(None), slice(None))]:
            out = ref.copy()
            out[cut] = s
            assert _same(out, ref, reduction=65) is not None
    tiny = np.full((4, 4), 1e-30, np.float64)  # a reference of values next to the second sentinel (0)
    _same(np.zeros_like(tiny), tiny)
    zero = np.zeros((4, 4), dtype)
    assert _same(zero.copy(), zero) is None
    out = zero.copy()
    out[0, 0] = np.array(1e-3, dtype)
    assert _same(out, zero) is not None  # atol 0: every difference is a miss


def test_integers_shapes_dtypes_and_explicit_tolerances() -> None:
    ref = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert _same(ref.copy(), ref) is None
    out = ref.copy()
    out[1, 1] = np.iinfo(np.int32).min
    assert _same(out, ref) is not None
    f = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    assert _same(f[:2], f) is not None  # shape
    assert _same(f.astype(np.float64), f) is None  # an output of another dtype: exact path
    assert _same(f.astype(np.float64) + 1e-3, f) is not None
    assert _same(f.T.copy().T, f) is None  # non-contiguous
    assert _same(f + np.float32(0.01), f, atol=0.02) is None
    assert _same(f + np.float32(0.01), f, atol=0.005) is not None
    assert _same(f + np.float32(0.01), f, atol=0.0, rtol=0.0) is not None
    assert _same(f.copy(), f, atol=0.0, rtol=0.0) is None
    assert _same(f * np.float32(1.01), f, rtol=0.02, atol=0.0) is None
    big = np.random.default_rng(3).standard_normal(200_000).astype(np.float32)  # several chunks
    out = big.copy()
    out[-1] += 1.0  # the miss in the last chunk
    assert _same(out, big, reduction=64) is not None
    out = big.copy()
    out[150_000] = np.nan
    assert _same(out, big, reduction=64) is not None
    assert _same(big * np.float32(1 + 1e-7), big, reduction=64) is None


def test_fast_path_takes_the_common_case() -> None:
    """A correct softmax-sized f32 output is accepted without the f64 path."""
    rng = np.random.default_rng(4)
    ref = rng.random((2048, 768)).astype(np.float32)
    ref /= ref.sum(1, keepdims=True)
    out = (ref.astype(np.float64) * (1 + rng.uniform(-3e-7, 3e-7, ref.shape))).astype(np.float32)
    assert verify._clearly_within(out, ref, None, None, 1536)
    assert check_output(out, ref, reduction=1536) is None
    assert config.VERIFY_FAST  # on by default (ANSOR_VERIFY_FAST=0: the exact check alone)

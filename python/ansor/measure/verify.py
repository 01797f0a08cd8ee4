"""Verification of a candidate's outputs: poisoned outputs, an independent reference, allclose.

    task --make_inputs--> inputs --reference program (CPU, untransformed; numpy where it exists)--> refs
    output buffers <--poison (NaN; the dtype's minimum for integers)-- each verification run
    candidate(inputs) --> outs --check_outputs(outs, refs, tolerance(task))--> None | one-line mismatch

The criterion (also in docs/design.md):
- Every output buffer is filled with a sentinel before the verification run (NaN for floats, the
  dtype's minimum for integers; on the GPU the sentinel is copied into every device output
  allocation), so a kernel that skips a tile, a ragged tail or its `linalg.fill` leaves the sentinel
  behind. Where the reference itself holds the sentinel somewhere (a NaN it computes), the run is
  repeated with a second sentinel (0 / the dtype's maximum), so those positions are checked too.
- Element-wise, numpy `allclose` semantics: `|out - ref| <= atol + rtol * |ref|` for every element
  whose reference is finite, with `rtol` by dtype (f32: 1e-5, f64: 1e-12, f16: 4e-3, bf16: 3e-2) and
  `atol = rtol * sqrt(K) * rms(ref)`: K is the task's reduction length (the products of each op's
  reduction extents, summed over its ops; 1 without reductions), rms the root-mean-square of the
  output's finite reference values; a TF32 task (`SearchTask.tf32`: f32 contractions on TF32
  tensor cores, 10-bit mantissas like f16) uses at least f16's rtol (`TF32_RTOL`). A correct fp32
  reordering of a K-term sum moves a result by about eps * sqrt(K) * rms; one missing term of a
  random-input contraction moves it by about rms / sqrt(K).
- Ill-conditioned elements get more room (`conditioning_slack`): the reference is computed again
  on inputs perturbed by two f32/f64 ulps (twice, random signs); where that moves an element by d,
  its tolerance grows by `SLACK_FACTOR * sqrt(K) * d`. An element whose exact value the f32
  rounding of its inputs already blurs (x / sum(x) where a row sums to nearly 0) is then not a
  mismatch when a kernel sums in another order; well-conditioned elements keep their tolerance
  (their d is an ulp or two of the result).
- Non-finite reference entries must be matched exactly (same positions, same values: NaN by NaN,
  +inf by +inf); a NaN or inf where the reference is finite is a mismatch. Integers compare exactly.
- The reference is independent of the candidate's transforms: on the CPU, the untransformed program
  (trusted lowering, no script), cross-checked once against numpy where `baselines` has the task;
  for a GPU task, numpy where it exists, else the untransformed program run on the CPU -- never a
  GPU schedule (see measure.py).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np

from ansor import config
from ansor.core.dtypes import is_float, numpy_dtype
from ansor.core.task import SearchTask, TensorSpec

#: Relative tolerance by numpy dtype name (floats); integers compare exactly.
DTYPE_RTOL = {"float64": 1e-12, "float32": 1e-5, "float16": 4e-3, "bfloat16": 3e-2}
#: Relative tolerance of a TF32 task's float outputs (at least): TF32 keeps f16's 10-bit mantissa.
TF32_RTOL = DTYPE_RTOL["float16"]


def default_rtol(dtype: np.dtype | str) -> float:
    return DTYPE_RTOL.get(numpy_dtype(dtype).name, 1e-5)


@functools.cache
def _reduction_length(ir_text: str) -> int:
    from ansor.core.loops import analyze

    total = 0
    for op in analyze(ir_text):
        if op.reduce:
            total += math.prod(op.extents[d] or 1 for d in op.reduce)
    return max(total, 1)


def reduction_length(task: SearchTask) -> int:
    """K of the tolerance: sum over the task's ops of the product of their reduction extents
    (1 for a task without reductions; 1 where the IR cannot be analysed)."""
    try:
        return _reduction_length(task.ir)
    except Exception:  # noqa: BLE001 - an unanalysable task keeps the tightest tolerance
        return 1


def sentinel(dtype: np.dtype | str, which: int = 0) -> float | int:
    """The value poisoned outputs hold: NaN (then 0.0) for floats, the dtype's minimum (then its
    maximum) for integers."""
    dt = numpy_dtype(dtype)
    if is_float(dt):  # bfloat16 (ml_dtypes) too: its kind is "V", not "f"
        return math.nan if which == 0 else 0.0
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return int(info.min if which == 0 else info.max)
    return 0 if which == 0 else 1


def poisoned(specs: Sequence[TensorSpec], which: int = 0) -> list[np.ndarray]:
    """Fresh output arrays for `specs`, every element the sentinel `which` (see `sentinel`)."""
    out = []
    for s in specs:
        dt = numpy_dtype(s.numpy_dtype())
        out.append(np.full(s.shape, sentinel(dt, which), dtype=dt))
    return out


def poison(arrays: Sequence[np.ndarray], which: int = 0) -> list[np.ndarray]:
    """`arrays` refilled in place with the sentinel `which` (`poisoned` without allocating: a
    runner reuses one set of output buffers across candidates)."""
    for a in arrays:
        a.fill(sentinel(a.dtype, which))
    return list(arrays)


def sentinel_runs(refs: Sequence[np.ndarray]) -> list[int]:
    """Which sentinels a verification uses: the first, and the second too where some reference
    output holds the first sentinel itself (a skipped write there would go unseen)."""
    for r in refs:
        s = sentinel(r.dtype, 0)
        hit = np.isnan(r).any() if isinstance(s, float) and math.isnan(s) else bool((r == s).any())
        if hit:
            return [0, 1]
    return [0]


def _where(shape: tuple[int, ...], flat: int) -> str:
    return str(tuple(int(i) for i in np.unravel_index(flat, shape))) if shape else "()"


def check_output(out: np.ndarray, ref: np.ndarray, *, rtol: float | None = None, atol: float | None = None,
                 reduction: int = 1, name: str = "output #0", slack: np.ndarray | None = None) -> str | None:
    """None when `out` matches `ref` under the criterion above; else one line naming the output,
    how many elements are wrong and the worst one. `rtol` None: by dtype; `atol` None: derived
    from `reduction` (K) and the reference's RMS; `slack` (`conditioning_slack`'s, or None): more
    tolerance per element."""
    if out.shape != ref.shape:
        return f"{name} has shape {out.shape}, expected {ref.shape}"
    if ref.size == 0:
        return None
    if ref.dtype.kind not in "fc" and not is_float(ref.dtype):
        bad = out != ref
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            return (f"{name}: {int(bad.sum())} of {ref.size} elements differ (first at {_where(ref.shape, i)}: "
                    f"{out.flat[i]} vs reference {ref.flat[i]})")
        return None
    if config.VERIFY_FAST and _clearly_within(out, ref, rtol, atol, reduction):
        return None  # the exact check below would pass too (see `_clearly_within`; slack only adds room)
    o, r, nonfin_bad, stray, bad, err, tol, at, rt = _float_misses(out, ref, rtol, atol, reduction, slack)
    if nonfin_bad.any():
        i = int(np.flatnonzero(nonfin_bad)[0])
        return (f"{name}: {int(nonfin_bad.sum())} of {ref.size} non-finite reference elements not reproduced "
                f"(first at {_where(ref.shape, i)}: {out.flat[i]} vs reference {ref.flat[i]})")
    if stray.any():
        i = int(np.flatnonzero(stray)[0])
        what = "NaN" if np.isnan(o.flat[i]) else "inf"
        return (f"{name}: {int(stray.sum())} of {ref.size} elements are NaN/inf where the reference is finite "
                f"(first at {_where(ref.shape, i)}: {what}; unwritten or overflowed)")
    if bad.any():
        i = int(np.argmax(np.where(bad, err - tol, -np.inf)))
        return (f"{name}: {int(bad.sum())} of {ref.size} elements differ from the reference (worst at "
                f"{_where(ref.shape, i)}: {o.flat[i]:.6g} vs {r.flat[i]:.6g}, tolerance {tol.flat[i]:.3g} = "
                f"{at:.3g} + {rt:g}*|ref|{_slack_term(slack, i)})")
    return None


def _slack_term(slack: np.ndarray | None, i: int) -> str:
    return f" + conditioning {float(slack.flat[i]):.3g}" if slack is not None and slack.flat[i] > 0 else ""


#: `conditioning_slack`'s factor on sqrt(K) * (the perturbed references' largest move): a kernel
#: that sums K terms in another order moves an element by about sqrt(K) times what an ulp-level
#: perturbation of its inputs does (a random walk of K roundings of partial sums against one of K
#: input roundings); 2 leaves room for the walk's spread (tests/test_verify_conditioning.py).
SLACK_FACTOR = 2.0
#: How far, in ulps of their type, `perturbed_inputs` moves each f32/f64 input element. One ulp
#: down from a power of two is half an ulp of the binade below and can round back; two always move.
PERTURB_ULPS = 2


def perturbed_inputs(inputs: Sequence[np.ndarray], which: int) -> list[np.ndarray]:
    """`inputs` with every f32/f64 element scaled by (1 +- PERTURB_ULPS * eps), signs drawn at
    random (seeded by `which`); other inputs (integers, f16/bf16, whose ulp dwarfs the f32
    arithmetic a kernel does with them) unchanged."""
    rng = np.random.default_rng(0x5EED + which)
    out = []
    for a in inputs:
        a = np.asarray(a)
        if a.dtype in (np.float32, np.float64) and a.size:
            step = a.dtype.type(PERTURB_ULPS * np.finfo(a.dtype).eps)
            signs = rng.integers(0, 2, size=a.shape).astype(a.dtype) * 2 - 1
            a = a * (a.dtype.type(1) + step * signs)
        out.append(a)
    return out


def conditioning_slack(refs: Sequence[np.ndarray], perturbed: Sequence[Sequence[np.ndarray]],
                       reduction: int) -> list[np.ndarray | None]:
    """Per output, the extra tolerance of each element: SLACK_FACTOR * sqrt(K) * the largest move
    of the element between `refs` and the references computed on `perturbed_inputs` (None for an
    output that no perturbation moved, or that is not a float). Elements whose moves are not
    finite get none (they are checked as non-finite elements)."""
    out: list[np.ndarray | None] = []
    scale = SLACK_FACTOR * math.sqrt(max(reduction, 1))
    for i, r in enumerate(refs):
        r = np.asarray(r)
        if not is_float(r.dtype):
            out.append(None)
            continue
        r64 = r.astype(np.float64)
        move = np.zeros(r.shape, dtype=np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            for p in perturbed:
                d = np.abs(np.asarray(p[i]).astype(np.float64).reshape(r.shape) - r64)
                move = np.maximum(move, np.where(np.isfinite(d), d, 0.0))
        out.append(scale * move if move.any() else None)
    return out


#: The fast path's margin: it accepts an output only when its worst error is at most this
#: fraction of the smallest tolerance (`atol`), so its own rounding (the outputs' precision, a
#: chunked f32 sum of squares) cannot turn a miss into a pass.
FAST_MARGIN = 0.5
#: Elements per chunk of the fast path (a scratch buffer that stays in the CPU's L2 cache).
_FAST_CHUNK = 1 << 16
#: Float dtypes the fast path takes, and the precision it computes them in (f16 and bf16 convert
#: exactly to f32).
_FAST_DTYPES = {"float16": np.float32, "bfloat16": np.float32, "float32": np.float32, "float64": np.float64}


def _clearly_within(out: np.ndarray, ref: np.ndarray, rtol: float | None, atol: float | None,
                    reduction: int) -> bool:
    """True only when `check_output` would find no miss: every element of `out` is within
    `FAST_MARGIN * atol` of a finite reference (atol as `_float_misses` derives it). A single
    chunked pass in the output's own precision (f32 for f16/bf16), no full-size temporaries:
    ~2 ms for 1.5M f32 elements where the exact f64 path takes ~50 ms. False (the caller runs the
    exact path, which words the error) whenever anything is non-finite or near the tolerance.

    Why a True is exact: for finite f32 (f64) values, the rounded |o - r| is at least
    (1 - 2^-24) (resp. 1 - 2^-53) times the exact one; the sum of squares of the reference
    (f32 dots over chunks of 2^16 non-negative terms, added in f64) is within 2^16 * 2^-24 < 0.4%
    of the exact one, so the tolerance estimated here is at most 0.2% above `_float_misses`'s
    `atol`, which bounds every element's tolerance from below. A margin of 0.5 absorbs both. A
    non-finite reference makes the sum of squares non-finite, a NaN output makes the maximum NaN,
    an inf output (or an overflowing difference) makes it inf: all refused."""
    cdt = _FAST_DTYPES.get(ref.dtype.name)
    rt = default_rtol(ref.dtype) if rtol is None else rtol
    if cdt is None or out.dtype != ref.dtype or not rt >= 0.0 or (atol is not None and not atol >= 0.0):
        return False
    o, r = out.reshape(-1), ref.reshape(-1)
    n = r.size
    convert = ref.dtype != cdt
    diff = np.empty(min(n, _FAST_CHUNK), dtype=cdt)
    rbuf = np.empty_like(diff) if convert else None
    worst, sumsq = 0.0, 0.0
    with np.errstate(all="ignore"):  # overflow to inf, inf - inf: refused below
        for s in range(0, n, _FAST_CHUNK):
            e = min(n, s + _FAST_CHUNK)
            d = diff[: e - s]
            if convert:
                rc = rbuf[: e - s]
                np.copyto(rc, r[s:e], casting="unsafe")  # exact: f16/bf16 -> f32
                np.copyto(d, o[s:e], casting="unsafe")
                np.subtract(d, rc, out=d)
            else:
                rc = r[s:e]
                np.subtract(o[s:e], rc, out=d)
            sumsq += float(np.dot(rc, rc))
            np.abs(d, out=d)
            m = float(d.max())  # NaN propagates through numpy's max
            if not (math.isfinite(m) and math.isfinite(sumsq)):
                return False
            worst = max(worst, m)
    at = rt * math.sqrt(max(reduction, 1)) * math.sqrt(sumsq / n) if atol is None else atol
    return worst <= FAST_MARGIN * at


def _float_misses(out: np.ndarray, ref: np.ndarray, rtol: float | None, atol: float | None, reduction: int,
                  slack: np.ndarray | None = None):
    """The three kinds of miss of a float output, as masks: non-finite reference elements not
    reproduced (NaN by NaN, inf by same-signed inf), NaN/inf where the reference is finite, and
    finite reference elements missed by more than the tolerance (plus `slack`, per element);
    with the outputs as f64 (exact for every float type, bfloat16 too), each element's error and
    tolerance, atol and rtol."""
    o, r = out.astype(np.float64), ref.astype(np.float64)
    fin_r, fin_o = np.isfinite(r), np.isfinite(o)
    nonfin_bad = ~fin_r & ~((np.isnan(r) & np.isnan(o)) | (r == o))
    stray = fin_r & ~fin_o
    rt = default_rtol(ref.dtype) if rtol is None else rtol
    rf = r[fin_r]
    rms = float(np.sqrt(np.mean(rf * rf))) if rf.size else 0.0
    at = rt * math.sqrt(max(reduction, 1)) * rms if atol is None else atol
    with np.errstate(invalid="ignore"):  # inf - inf at matched non-finite entries, masked out
        err = np.where(fin_r, np.abs(o - r), 0.0)
    tol = at + rt * np.abs(np.where(fin_r, r, 0.0))
    if slack is not None:
        tol = tol + np.where(fin_r, slack.reshape(r.shape), 0.0)
    return o, r, nonfin_bad, stray, err > tol, err, tol, at, rt


def wrong_elements(out: np.ndarray, ref: np.ndarray, *, rtol: float | None = None, atol: float | None = None,
                   reduction: int = 1, slack: np.ndarray | None = None) -> int:
    """How many elements of `out` `check_output` counts as wrong (non-finite ones not reproduced,
    NaN/inf where the reference is finite, finite ones outside the tolerance), all kinds together."""
    if out.shape != ref.shape:
        return int(ref.size)
    if ref.dtype.kind not in "fc" and not is_float(ref.dtype):
        return int((out != ref).sum())
    _, _, nonfin_bad, stray, bad, *_ = _float_misses(out, ref, rtol, atol, reduction, slack)
    return int((nonfin_bad | stray | bad).sum())


def check_outputs(outs: Sequence[np.ndarray], refs: Sequence[np.ndarray], *, rtol: float | None = None,
                  atol: float | None = None, reduction: int = 1,
                  slack: Sequence[np.ndarray | None] | None = None) -> str | None:
    """`check_output` over every output; None when all match, else the first mismatch's line."""
    if len(outs) != len(refs):
        return f"{len(outs)} outputs, expected {len(refs)}"
    for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
        bad = check_output(np.asarray(o), np.asarray(r), rtol=rtol, atol=atol, reduction=reduction, name=f"output #{i}",
                           slack=slack[i] if slack is not None else None)
        if bad is not None:
            return bad
    return None


def check_task_outputs(task: SearchTask, outs: Sequence[np.ndarray], refs: Sequence[np.ndarray], *,
                       rtol: float | None = None, atol: float | None = None,
                       slack: Sequence[np.ndarray | None] | None = None) -> str | None:
    """`check_outputs` with the task's reduction length; a TF32 task without an explicit `rtol`
    gets `TF32_RTOL` (or its outputs' dtype rtol where that is looser); `slack` per output
    (`task_slack`) or None."""
    if rtol is None and task.tf32:
        rtol = max([TF32_RTOL] + [default_rtol(r.dtype) for r in refs if is_float(np.asarray(r).dtype)])
    return check_outputs(outs, refs, rtol=rtol, atol=atol, reduction=reduction_length(task), slack=slack)


def task_slack(task: SearchTask, inputs: Sequence[np.ndarray], refs: Sequence[np.ndarray],
               reference: Callable[[list[np.ndarray]], Sequence[np.ndarray]]) -> list[np.ndarray | None]:
    """`conditioning_slack` of `task`'s reference outputs `refs`: `reference` (the same reference
    program, inputs -> outputs) run on two `perturbed_inputs` of `inputs`."""
    if not any(np.asarray(a).dtype in (np.float32, np.float64) for a in inputs):
        return [None] * len(refs)
    perturbed = [list(reference(perturbed_inputs(inputs, k))) for k in range(2)]
    return conditioning_slack(refs, perturbed, reduction_length(task))

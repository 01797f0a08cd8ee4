"""Verification that a wrong kernel cannot pass: the element-wise check, poisoned outputs, and
planted bugs sent through the real builder and runner (`LocalMeasurer`)."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest
from ansor.frontend import workloads
from ansor.space.schedule import Schedule
from ansor.measure.measurer import LocalMeasurer, MeasureError, MeasureInput, RunOptions
from ansor.core.task import SearchTask, create_task
from ansor.measure import verify
from ansor.measure.verify import check_output, check_outputs, poisoned, reduction_length, sentinel_runs

# ---------------------------------------------------------------------------------------------
# The check itself


def test_partial_write_is_caught() -> None:
    ref = np.random.default_rng(0).uniform(-1, 1, (16, 8)).astype(np.float32)
    out = ref.copy()
    out[-1, :] = np.nan  # the sentinel a skipped ragged tail leaves behind
    bad = check_output(out, ref)
    assert bad is not None and "8 of 128" in bad and "NaN" in bad and "(15, 0)" in bad


def test_nan_and_inf_must_match_the_reference_exactly() -> None:
    ref = np.array([1.0, np.nan, np.inf, -np.inf, 2.0], dtype=np.float32)
    assert check_output(ref.copy(), ref) is None
    for i, v in [(1, 0.0), (2, -np.inf), (3, np.nan), (2, 1e30)]:
        out = ref.copy()
        out[i] = v
        assert check_output(out, ref) is not None, (i, v)
    out = ref.copy()
    out[0] = np.inf  # inf where the reference is finite
    assert "NaN/inf where the reference is finite" in check_output(out, ref)
    # One NaN used to turn the error into NaN, and `NaN > tol` is False: everything passed.
    out = ref.copy()
    out[4] = 1000.0
    assert check_output(out, ref) is not None


def test_tiny_magnitude_rows_need_small_relative_error() -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (8, 1024))
    ref = (np.exp(x) / np.exp(x).sum(-1, keepdims=True)).astype(np.float32)  # values ~1e-3
    assert check_output((ref * (1 + 1e-6)).astype(np.float32), ref, reduction=1024) is None
    assert check_output((ref * 1.05).astype(np.float32), ref, reduction=1024) is not None
    assert check_output(np.zeros_like(ref), ref, reduction=1024) is not None  # a kernel that writes zeros


def test_near_zero_outputs_are_not_floored_to_one() -> None:
    ref = np.full((64,), 1e-6, dtype=np.float32)
    assert check_output(np.zeros_like(ref), ref) is not None
    assert check_output(ref * 2, ref) is not None
    assert check_output(np.zeros(4, np.float32), np.zeros(4, np.float32)) is None


def test_fp32_reordering_of_a_long_reduction_passes_but_a_missing_term_does_not() -> None:
    rng = np.random.default_rng(2)
    k = 4096
    a = rng.uniform(-1, 1, (32, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, 32)).astype(np.float32)
    ref = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    blocked = np.zeros((32, 32), np.float32)
    for k0 in range(0, k, 64):  # fp32 accumulation in another order
        blocked += a[:, k0:k0 + 64] @ b[k0:k0 + 64]
    naive = np.zeros((32, 32), np.float32)
    for kk in range(k):  # sequential fp32 sum, the naive loops' order
        naive += np.outer(a[:, kk], b[kk])
    assert check_output(blocked, ref, reduction=k) is None
    assert check_output(naive, ref, reduction=k) is None
    missing = blocked - np.outer(a[:, -1], b[-1])  # the last k step skipped
    assert check_output(missing, ref, reduction=k) is not None


def test_integers_compare_exactly_and_outputs_count() -> None:
    ref = np.arange(6, dtype=np.int32)
    assert check_output(ref.copy(), ref) is None
    out = ref.copy()
    out[3] += 1
    assert "1 of 6" in check_output(out, ref)
    assert check_outputs([ref], [ref, ref]) is not None
    assert "shape" in check_output(ref[:5], ref)


def test_poison_and_second_sentinel() -> None:
    from ansor.core.task import TensorSpec

    f, i = poisoned([TensorSpec((2, 3), "f32"), TensorSpec((4,), "i32")])
    assert np.isnan(f).all() and (i == np.iinfo(np.int32).min).all()
    assert sentinel_runs([np.ones(3, np.float32)]) == [0]
    assert sentinel_runs([np.array([1.0, np.nan], np.float32)]) == [0, 1]  # NaN in the reference: also poison with 0


def test_reduction_length(matmul64) -> None:
    assert reduction_length(matmul64) == 64
    sm = create_task(workloads.softmax(4, 96), name="softmax")
    assert reduction_length(sm) == 2 * 96  # the max and the sum


# ---------------------------------------------------------------------------------------------
# Planted bugs through the real builder: a twin of the task with the same hash (so the measurer
# verifies it against the real task's reference) whose program has one defect.

FAST = RunOptions(repeat=1, min_repeat_ms=1.0, timeout_s=60.0)


def _ret(ir: str) -> tuple[str, str, list[int]]:
    m = re.search(r"^(\s*)return (%\S+) : tensor<([0-9x]+)x(\w+)>\s*$", ir, re.M)
    assert m is not None, ir
    return m.group(2), f"tensor<{m.group(3)}x{m.group(4)}>", [int(d) for d in m.group(3).split("x")]


def _replace_return(ir: str, body: str, value: str) -> str:
    _, t, _ = _ret(ir)
    return re.sub(r"^(\s*)return (%\S+) : (tensor<[^>]*>)\s*$", lambda m: f"{body}{m.group(1)}return {value} : {t}",
                  ir, count=1, flags=re.M)


def drop_last(ir: str, dim: int) -> str:
    """The function's result with its last row (dim 0) or column (dim -1) never written."""
    v, t, shape = _ret(ir)
    part = list(shape)
    part[dim] -= 1
    pt = "tensor<" + "x".join(map(str, part)) + t[t.rindex("x"):]
    zeros = ", ".join("0" for _ in shape)
    ones = ", ".join("1" for _ in shape)
    sizes = ", ".join(map(str, part))
    body = (f"    %__part = tensor.extract_slice {v}[{zeros}] [{sizes}] [{ones}] : {t} to {pt}\n"
            f"    %__out = tensor.empty() : {t}\n"
            f"    %__res = tensor.insert_slice %__part into %__out[{zeros}] [{sizes}] [{ones}] : {pt} into {t}\n")
    return _replace_return(ir, body, "%__res")


def write_nothing(ir: str) -> str:
    """The function returns an uninitialised tensor of its result's type."""
    _, t, _ = _ret(ir)
    return _replace_return(ir, f"    %__none = tensor.empty() : {t}\n", "%__none")


def lose_fill(ir: str) -> str:
    """Every op that accumulates into a `linalg.fill` result accumulates into the fill's
    (uninitialised) destination instead."""
    fills = re.findall(r"(%\w+) = linalg\.fill ins\([^)]*\) outs\((%\w+) :", ir)
    assert fills, ir
    for res, dest in fills:
        ir = re.sub(rf"outs\({re.escape(res)} :", f"outs({dest} :", ir)
    return ir


def _twin(task: SearchTask, ir: str) -> SearchTask:
    return dataclasses.replace(task, ir=ir)


def _planted(task: SearchTask) -> dict[str, SearchTask]:
    out = {"drop last row": _twin(task, drop_last(task.ir, 0)),
           "drop last column": _twin(task, drop_last(task.ir, -1)),
           "write nothing": _twin(task, write_nothing(task.ir))}
    if "linalg.fill" in task.ir:
        out["lose the fill"] = _twin(task, lose_fill(task.ir))
    return out


def _planted_results(task: SearchTask, options: RunOptions = FAST) -> tuple[dict[str, MeasureResult], MeasureResult]:  # noqa: F821
    twins = _planted(task)
    m = LocalMeasurer(options)
    try:
        assert m.baseline(task).error is None
        good = m.measure([MeasureInput(task, Schedule.of("untuned", {}), None)])[0]
        res = m.measure([MeasureInput(t, Schedule.of(name, {}), None) for name, t in twins.items()])
    finally:
        m.close()
    return dict(zip(twins, res, strict=True)), good


@pytest.mark.parametrize("workload", ["matmul-odd", "softmax-long-rows"])
def test_planted_bugs_are_wrong_answers_on_cpu(workload: str) -> None:
    text = workloads.matmul(37, 29, 53) if workload == "matmul-odd" else workloads.softmax(6, 4096)
    task = create_task(text, name=workload)
    planted, good = _planted_results(task)
    assert good.error is None, good.error_msg  # the check can pass: the untouched program does
    assert len(planted) == 4
    # Known gap (session 8): softmax's "lose the fill" leaves its 6-float max and sum buffers
    # uninitialised, and in about 1 run in 4-10 (this VM, before and after session 8's changes)
    # they hold values that leave the softmax unchanged (zeros: max is shift-invariant, a sum
    # from 0 is right), so the check passes. Poisoning the kernel's own intermediates, not only
    # its outputs, would close it (glibc's M_PERTURB around the verification runs did not).
    flaky = {"lose the fill"} if workload == "softmax-long-rows" else set()
    for name, res in planted.items():
        if name not in flaky:
            assert res.error == MeasureError.WRONG_ANSWER, (name, res.error, res.error_msg)


def matmul_dropping_last_column(m: int, n: int, k: int) -> str:
    """matmul whose last output column keeps the fill: B's last column is cut off and padded back
    with zeros. (The GPU lowering takes no slices of results, a constant mask would be a host
    global the kernel cannot read, and the same trick on A's rows pads a buffer that is copied,
    which the guarded-read rewrite refuses: so the GPU set drops a column only.)"""
    return f"""func.func @matmul(%A: tensor<{m}x{k}xf32>, %B: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %zero = arith.constant 0.0 : f32
  %s = tensor.extract_slice %B[0, 0] [{k}, {n - 1}] [1, 1] : tensor<{k}x{n}xf32> to tensor<{k}x{n - 1}xf32>
  %p = tensor.pad %s low[0, 0] high[0, 1] {{
  ^bb0(%i: index, %j: index):
    tensor.yield %zero : f32
  }} : tensor<{k}x{n - 1}xf32> to tensor<{k}x{n}xf32>
  %empty = tensor.empty() : tensor<{m}x{n}xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %C = linalg.matmul ins(%A, %p : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) outs(%init : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  return %C : tensor<{m}x{n}xf32>
}}
"""


def test_gpu_planted_bugs_lower_to_ptx() -> None:
    """The GPU planted bugs build (PTX needs no GPU): on the GPU host they can only fail by
    verification, never by a build error. ("Write nothing" has no GPU program at all: a function
    without ops gets no GPU schedule, so it is a CPU-only planted bug.)"""
    from ansor.targets.cuda.lowering import emit_ptx
    from ansor.targets.cuda.rules import default_script

    m, n, k = 37, 29, 53
    task = create_task(workloads.matmul(m, n, k), name="matmul-odd", target="cuda")
    sm = create_task(workloads.softmax(6, 4096), name="softmax", target="cuda")
    for t in [create_task(matmul_dropping_last_column(m, n, k), target="cuda"),
              _twin(task, lose_fill(task.ir)), _twin(sm, lose_fill(sm.ir))]:
        assert ".entry" in emit_ptx(t, default_script(t), arch="sm_90")


@pytest.mark.gpu
def test_planted_bugs_are_wrong_answers_on_gpu() -> None:
    """Through the GPU builder (default GPU schedule of each twin) and runner: device outputs are
    poisoned, so neither a skipped column nor a lost fill can show the previous candidate's result."""
    m, n, k = 37, 29, 53
    task = create_task(workloads.matmul(m, n, k), name="matmul-odd", target="cuda")
    twins = {"drop last column": _twin(task, create_task(matmul_dropping_last_column(m, n, k), target="cuda").ir),
             "lose the fill": _twin(task, lose_fill(task.ir))}
    sm = create_task(workloads.softmax(6, 4096), name="softmax", target="cuda")
    sm_twins = {"lose the fill": _twin(sm, lose_fill(sm.ir))}
    m_ = LocalMeasurer(FAST)
    try:
        for t, tw in ((task, twins), (sm, sm_twins)):
            assert m_.baseline(t).error is None, m_.baseline(t).error_msg
            # the correct program first: its results are what a stale device buffer would hold
            good = m_.measure([MeasureInput(t, Schedule.of("untuned", {}), None)])[0]
            assert good.error is None, good.error_msg
            res = m_.measure([MeasureInput(x, Schedule.of(name, {}), None) for name, x in tw.items()])
            for name, r in zip(tw, res, strict=True):
                assert r.error == MeasureError.WRONG_ANSWER, (t.name, name, r.error, r.error_msg)
    finally:
        m_.close()


@pytest.mark.gpu
def test_gpu_reference_is_computed_on_the_cpu(tmp_path, monkeypatch) -> None:
    """The reference of a GPU task comes from numpy or the CPU program: a GPU task whose default
    schedule is wrong must fail its baseline, not define the truth."""
    from ansor import config
    from ansor.measure.measurer import reference_outputs

    monkeypatch.setattr(config, "CACHE_DIR", tmp_path)
    task = create_task(workloads.softmax(4, 100), name="softmax", target="cuda")
    inputs, outs, kernel = reference_outputs(task)
    assert kernel is None and list(tmp_path.glob("refs/*.npz"))
    x = inputs[0].astype(np.float64)
    want = np.exp(x - x.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    assert check_output(outs[0], want.astype(np.float32), reduction=200) is None
    assert math.isfinite(float(outs[0].sum()))


def test_wrong_elements_counts_what_check_output_reports() -> None:
    """`wrong_elements` (the pass-bisection tool's count) uses the measurer's criterion: f16
    rounding of a K = 1024 sum is not wrong; every kind of miss is counted once."""
    rng = np.random.default_rng(3)
    ref = rng.standard_normal((64, 64)).astype(np.float16)
    rounded = (ref.astype(np.float32) * (1 + 1e-3)).astype(np.float16)
    assert verify.wrong_elements(rounded, ref, reduction=1024) == 0
    assert verify.check_output(rounded, ref, reduction=1024) is None
    out = ref.copy()
    out[0, :5] = np.nan  # unwritten
    out[1, :3] += 1.0  # off by far more than the tolerance
    assert verify.wrong_elements(out, ref, reduction=1024) == 8
    msg = verify.check_output(out, ref, reduction=1024)
    assert msg is not None and "5 of 4096" in msg  # check_output names the first kind it finds
    assert verify.wrong_elements(np.arange(4), np.array([0, 1, 5, 3])) == 1

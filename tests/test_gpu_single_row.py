"""Row-wise tasks of a single row (LayerNorm / RMSNorm of one token, softmax of one row: batch-1
decode) on the GPU: the row's values (max, sum), which every thread computes itself, are moved
into the one-block launch (`ansor-gpu-row-values-into-launch`); before, they were host buffers and
the task had no GPU program."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ansor.core.task import create_task
from ansor.frontend import workloads
from ansor.targets import generate_sketches

SINGLE = ["softmax-1x197", "layernorm-1x768", "lngelu-1x768", "rmsnorm-1x4096", "logsoftmax-1x1000", "rowsum-1x4096"]


def _task(name: str):
    return create_task(workloads.get(name), name=name, target="cuda")


def _scripts(task) -> list[str | None]:
    sk = generate_sketches(task)[0]
    assert sk.name == "r0", sk.name
    rng = random.Random(0)
    return [None] + [sk.script(sk.sample(rng).values()) for _ in range(2)]


@pytest.mark.parametrize("name", SINGLE)
def test_single_row_tasks_build_for_the_gpu(name: str) -> None:
    from ansor.targets.cuda.lowering import emit_ptx
    from ansor.targets.cuda.rules import default_script

    task = _task(name)
    for script in _scripts(task):
        ptx = emit_ptx(task, script if script is not None else default_script(task))
        assert ".entry" in ptx and "bar.sync" in ptx and ".local" not in ptx


def test_row_values_stay_outside_without_the_pass() -> None:
    """What the pass fixes: after the script, a single row's sum is an alloc outside the launch."""
    from mlir import ir

    from ansor.core import native as _native
    from ansor.core.mlir import apply_script, parse_payload, run_passes
    from ansor.targets.cuda.rules import default_script

    task = _task("rmsnorm-1x4096")
    _native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = parse_payload(task)
        run_passes(module, "ansor-gpu-own-fill-destinations", "lower")
        apply_script(module, default_script(task))
        before = str(module).split("gpu.launch")[0]
        run_passes(module, "ansor-gpu-row-values-into-launch", "lower")
        after = str(module).split("gpu.launch")[0]
    assert "memref.alloc() {alignment = 64 : i64} : memref<1xf32>" in before
    assert "memref<1xf32>" not in after


def _reference(name: str, x: np.ndarray, inputs: list[np.ndarray]) -> np.ndarray:
    x = x.astype(np.float64)
    if name.startswith("softmax"):
        e = np.exp(x - x.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)
    if name.startswith("logsoftmax"):
        m = x.max(1, keepdims=True)
        return x - m - np.log(np.exp(x - m).sum(1, keepdims=True))
    if name.startswith("rowsum"):
        return x.sum(1)
    if name.startswith("rmsnorm"):
        return x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-6) * inputs[1]
    y = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * inputs[1] + inputs[2]
    if name.startswith("lngelu"):
        y = 0.5 * y * (1 + np.tanh(np.sqrt(2 / np.pi) * (y + 0.044715 * y**3)))
    return y


@pytest.mark.gpu
@pytest.mark.parametrize("name", SINGLE)
def test_single_row_tasks_run_on_the_gpu(name: str) -> None:
    """The default and two sampled programs, into NaN-poisoned outputs, against numpy."""
    from ansor.measure.measurer import make_inputs
    from ansor.targets.cuda.lowering import compile_task_cuda

    task = _task(name)
    inputs = make_inputs(task)
    want = _reference(name, inputs[0], inputs)
    for script in _scripts(task):
        (out,) = compile_task_cuda(task, script).run(inputs, [np.full(task.outputs[0].shape, np.nan, np.float32)])
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)

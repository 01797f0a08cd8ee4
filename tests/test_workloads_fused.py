"""Built-in workloads of several anchor ops (the GPU's multi-kernel tasks, docs/gpu.md rule 4):
attention, conv + ReLU + pool sum, matmul + row sum, matmul summed to a scalar, two matmuls of one
input, and the column sum. Each small variant, as the untuned CPU program, matches a numpy
reference written from its definition; the named instances are listed by `ansor workloads`."""

from __future__ import annotations

import itertools

import ansor
import numpy as np
import pytest
from ansor import cli
from ansor.frontend import workloads


def _conv_nhwc(x: np.ndarray, w: np.ndarray, s: int, p: int) -> np.ndarray:
    xp = np.pad(x, [(0, 0), (p, p), (p, p), (0, 0)])
    k = w.shape[0]
    oh, ow = (xp.shape[1] - k) // s + 1, (xp.shape[2] - k) // s + 1
    y = np.zeros((x.shape[0], oh, ow, w.shape[3]))
    for i, j in itertools.product(range(k), range(k)):
        y += xp[:, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s, :] @ w[i, j]
    return y


def _softmax(a: np.ndarray) -> np.ndarray:
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _reference(name: str, a: list[np.ndarray]) -> np.ndarray:
    fam, sizes = name.split("-", 1)
    v = [int(x) for x in sizes.split("x")]
    if fam == "colsum":
        return a[0].sum(axis=0)
    if fam == "attention":
        return _softmax(a[0] @ a[1]) @ a[2]
    if fam == "conv_relu_pool":
        return np.maximum(_conv_nhwc(a[0], a[1], v[-2], v[-1]), 0.0).sum(axis=(1, 2))
    if fam == "matmul_rowsum":
        return (a[0] @ a[1]).sum(axis=1)
    if fam == "matmul_sumall":
        return np.asarray((a[0] @ a[1]).sum())
    if fam == "two_matmuls":
        return (a[0] @ a[1]) * (a[0] @ a[2])
    raise AssertionError(name)


SMALL = ["colsum-5x33", "attention-5x9x4", "attention-16x33x8", "conv_relu_pool-1x7x6x3x4x3x1x0",
         "conv_relu_pool-2x8x8x2x3x3x2x1", "matmul_rowsum-5x7x3", "matmul_sumall-5x7x3", "two_matmuls-4x6x5"]


@pytest.mark.parametrize("name", SMALL)
def test_fused_workload_matches_numpy(name: str) -> None:
    task = ansor.create_task(workloads.get(name))
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s.shape).astype(np.float32) for s in task.inputs]
    out = ansor.compile(workloads.get(name))(*args)
    ref = _reference(name, [x.astype(np.float64) for x in args])
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_named_instances_are_listed(capsys: pytest.CaptureFixture[str]) -> None:
    names = ["colsum-97x197", "attention-16x33x8", "conv_relu_pool-1x10x10x8x16x3x1x0",
             "matmul_rowsum-33x65x17", "matmul_sumall-33x65x17", "two_matmuls-8x24x16"]
    assert cli.main(["workloads"]) == 0
    listing = capsys.readouterr().out
    for name in names:
        assert name in listing and name in workloads.BUILTIN
        assert ansor.create_task(workloads.get(name)).flops > 0
    with pytest.raises(KeyError, match="conv_relu_pool-NxHxWxCIxCOxKxSxP"):
        workloads.get("conv_relu_pool-1x2x2x3x4x5x1x0")  # the kernel does not fit

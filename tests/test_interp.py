"""The numpy interpreter that references GEMM + element-wise programs (`ansor.measure.interp`):
it agrees with the untransformed program compiled for the CPU, keeps the IR's element types, and
declines what it does not model."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ansor
from ansor.frontend import workloads
from ansor.measure.interp import _erf, numpy_program
from ansor.measure.measurer import reference_outputs
from ansor.measure.verify import check_task_outputs


def test_erf_is_accurate_without_scipy() -> None:
    x = np.linspace(-6, 6, 20001)
    assert np.abs(_erf(x) - np.vectorize(math.erf)(x)).max() < 1.5e-7


@pytest.mark.parametrize("name", ["mmgelu-96x64x128", "mmgelu-128x64x256-f16", "mmgelu-64x136x72-bf16"])
def test_agrees_with_the_untransformed_program(name: str) -> None:
    task = ansor.create_task(workloads.get(name), name=name, target="cpu")
    prog = numpy_program(task.ir)
    assert prog is not None
    inputs, refs, _ = reference_outputs(task)  # the compiled program (cross-checked with prog)
    (out,) = prog(*inputs)
    assert out.dtype == refs[0].dtype and out.shape == refs[0].shape
    assert check_task_outputs(task, [out], refs) is None
    assert check_task_outputs(task, [out + 0.5 * np.abs(out).max()], refs) is not None


def test_rounds_where_the_program_rounds() -> None:
    # f16 operands, f32 accumulation: the sum is exact in f32 and only the result is rounded
    task = ansor.create_task(workloads.get("mmgelu-64x64x2048-f16"), name="m", target="cpu")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 2048)).astype(np.float16)
    b = rng.standard_normal((2048, 64)).astype(np.float16)
    bias = np.zeros(64, np.float16)
    (out,) = numpy_program(task.ir)(a, b, bias)
    x = a.astype(np.float64) @ b.astype(np.float64)
    exact = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    assert out.dtype == np.float16
    assert np.abs(out.astype(np.float64) - exact).max() <= 2 ** -10 * np.abs(exact).max()


@pytest.mark.parametrize("name", ["mlp-64x256x4", "lngelu-64x128", "c2d-1x14x14x64x64x3x1x1", "softmax-32x64"])
def test_declines_what_it_does_not_model(name: str) -> None:
    # weights as resource blobs, reductions in generics, convolution windows, element-wise only
    assert numpy_program(ansor.create_task(workloads.get(name), name=name, target="cpu").ir) is None

"""Shared fixtures: small tasks, a fake measurer (no compiler), temporary logs."""

from __future__ import annotations

import math
import os
import shutil

# The CPU search space follows the host's vector width (`ansor.sketch.host_vector_bits`): pin
# AVX2's so the suite's expectations hold on any host (tests/test_vector_width.py covers 512).
os.environ["ANSOR_VECTOR_BITS"] = "256"

import ansor
import pytest
from ansor.frontend import workloads
from ansor.measure.measurer import MeasureError, MeasureInput, Measurer, MeasureResult
from ansor.core.task import SearchTask, create_task


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    has_gpu = shutil.which("nvidia-smi") is not None
    for item in items:
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(pytest.mark.skip(reason="no NVIDIA GPU on this machine"))


@pytest.fixture(scope="session")
def matmul64() -> SearchTask:
    return create_task(workloads.get("matmul-64"), name="matmul-64")


@pytest.fixture(scope="session")
def matmul_big() -> SearchTask:
    return create_task(workloads.get("matmul-256x128x512"), name="matmul-256x128x512")


class FakeMeasurer(Measurer):
    """Deterministic latency from the knobs (a smooth bowl around a known optimum); no compiler.

    Schedules whose `op1.d0.t3` knob equals `fail_t3` fail with a compile error.
    """

    def __init__(self, fail_t3: int | None = None) -> None:
        self.calls: list[str] = []
        self.fail_t3 = fail_t3

    def baseline(self, task: SearchTask) -> MeasureResult:
        return MeasureResult(costs=(1.0,))

    def measure(self, inputs: list[MeasureInput], on_result=None) -> list[MeasureResult]:
        out = []
        for inp in inputs:
            self.calls.append(inp.schedule.key())
            v = inp.schedule.values()
            if self.fail_t3 is not None and v.get("op1.d0.t3") == self.fail_t3:
                out.append(MeasureResult(error=MeasureError.COMPILE, error_msg="injected"))
                continue
            lat = 1e-3 * (1 + sum(abs(math.log2(max(x, 1)) - 3) for k, x in v.items() if k != "unroll"))
            out.append(MeasureResult(costs=(lat, lat)))
        return out


@pytest.fixture
def fake_measurer() -> FakeMeasurer:
    return FakeMeasurer()


@pytest.fixture
def make_fake() -> type[FakeMeasurer]:
    return FakeMeasurer


_ = ansor  # the import registers the dialect and passes

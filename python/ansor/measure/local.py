"""The measurer of one machine: a builder and a runner of this machine's worker processes.

    [MeasureInput] --Builder.submit (builder.py: InlineBuilder, or LocalBuilder of N workers)-->
        BuildResult --LocalRunner.run (runner.py), one candidate at a time--> MeasureResult, streamed

With `builders=0` (the default) one worker builds and runs each candidate in turn, as this
measurer always did. With N > 0, N worker processes build (apply + lower) the batch ahead while
the runner's worker JITs, verifies and times one candidate at a time: more candidates per second
on a machine with cores to spare, at the price of timings taken while builds run beside them.
"""

from __future__ import annotations

import time

from ansor.core.task import SearchTask
from ansor.measure.builder import Builder, InlineBuilder, LocalBuilder
from ansor.measure.measurer import MeasureInput, Measurer, MeasureResult, OnResult, RunOptions, _result
from ansor.measure.runner import LocalRunner


class LocalMeasurer(Measurer):
    """Builds and runs candidates in worker processes on this machine; results in input order,
    each reported through `on_result` as soon as it is measured."""

    kind = "local"

    def __init__(self, options: RunOptions | None = None, *, memory_mb: int | None = None, builders: int = 0) -> None:
        if builders < 0:
            raise ValueError(f"builders must be >= 0, not {builders}")
        self.options = options or RunOptions()
        self.runner = LocalRunner(self.options, memory_mb=memory_mb)
        self.builder: Builder = (LocalBuilder(builders, self.options, memory_mb=memory_mb) if builders
                                 else InlineBuilder())

    def baseline(self, task: SearchTask) -> MeasureResult:
        """Compute (once) the task's reference outputs and untuned latency."""
        return self.runner.baseline(task)

    def measure(self, inputs: list[MeasureInput], on_result: OnResult | None = None) -> list[MeasureResult]:
        for inp in inputs:  # references first: the builders must not slow the untuned timing
            self.runner.baseline(inp.task)
        futures = [self.builder.submit(inp) for inp in inputs]
        out: list[MeasureResult] = []
        for i, (inp, fut) in enumerate(zip(inputs, futures, strict=True)):
            res = self.runner.run(inp, fut.result())
            out.append(res)
            if on_result is not None:
                on_result(i, res)
        return out

    def build_only(self, inputs: list[MeasureInput]) -> list[MeasureResult]:
        """Apply, lower and JIT each candidate in the runner's worker without running it (for
        fuzzing the builder). A success has no costs and no error."""
        out = []
        for inp in inputs:
            t0 = time.perf_counter()
            ans = self.runner.worker.request(
                {"kind": "build", "task": inp.task.to_json(), "script": inp.script, "opts": self.options.__dict__.copy()},
                self.options.timeout_s,
            )
            out.append(_result(ans, time.perf_counter() - t0))
        return out

    def close(self) -> None:
        self.builder.close()
        self.runner.close()

"""The measurer of one machine: a builder and a runner of this machine's worker processes.

    [MeasureInput] --Builder.submit (builder.py: InlineBuilder, or LocalBuilder of N workers)-->
        BuildResult --LocalRunner.run (runner.py), one candidate at a time--> MeasureResult, streamed

With `builders=0` (the default) one worker builds and runs each candidate in turn, as this
measurer always did. With N > 0, N worker processes build (apply + lower) the batch ahead while
the runner's worker JITs, verifies and times one candidate at a time: more candidates per second
on a machine with cores to spare, at the price of timings taken while builds run beside them.
With `runners=R` > 1, R runner workers share the device through a lock: each loads its next
candidate (host JIT, module load) while another verifies and times, so only the measurement
itself is serial.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ansor.core.task import SearchTask
from ansor.measure.builder import Builder, InlineBuilder, LocalBuilder
from ansor.measure.measurer import MeasureInput, Measurer, MeasureResult, OnResult, RunOptions, _result
from ansor.measure.runner import LocalRunner


class LocalMeasurer(Measurer):
    """Builds and runs candidates in worker processes on this machine; results in input order,
    each reported through `on_result` as soon as it is measured."""

    kind = "local"

    def __init__(self, options: RunOptions | None = None, *, memory_mb: int | None = None, builders: int = 0,
                 runners: int = 1, env: dict[str, str] | None = None) -> None:
        """`env`: environment variables of every worker process of this measurer (`config`
        knobs, e.g. `ANSOR_CUDA_HOST_OPT_LEVEL` or `ANSOR_CUDA_BINARY`), over this process's;
        they reach workers started later too (a second runner's, a restarted one)."""
        if builders < 0:
            raise ValueError(f"builders must be >= 0, not {builders}")
        if runners < 1:
            raise ValueError(f"runners must be >= 1, not {runners}")
        self.options = options or RunOptions()
        lock = threading.Lock() if runners > 1 else None
        self.env = dict(env or {})
        self.runner = LocalRunner(self.options, memory_mb=memory_mb, device_lock=lock, env=self.env)
        self.runners = [self.runner] + [LocalRunner(self.options, memory_mb=memory_mb, device_lock=lock,
                                                    share=self.runner, env=self.env) for _ in range(runners - 1)]
        self._pool: ThreadPoolExecutor | None = None
        self.builder: Builder = (LocalBuilder(builders, self.options, memory_mb=memory_mb) if builders
                                 else InlineBuilder())
        for w in getattr(self.builder, "_workers", ()):  # LocalBuilder's processes: not started yet
            w.env.update(self.env)

    def baseline(self, task: SearchTask) -> MeasureResult:
        """Compute (once) the task's reference outputs and untuned latency."""
        return self.runner.baseline(task)

    def measure(self, inputs: list[MeasureInput], on_result: OnResult | None = None) -> list[MeasureResult]:
        for inp in inputs:  # references first: the builders must not slow the untuned timing
            self.runner.baseline(inp.task)
        futures = [self.builder.submit(inp) for inp in inputs]
        out: list[MeasureResult] = []
        if len(self.runners) == 1:
            for i, (inp, fut) in enumerate(zip(inputs, futures, strict=True)):
                res = self.runner.run(inp, fut.result())
                out.append(res)
                if on_result is not None:
                    on_result(i, res)
            return out
        free: queue.SimpleQueue[LocalRunner] = queue.SimpleQueue()
        for r in self.runners:
            free.put(r)

        def run(inp: MeasureInput, fut) -> MeasureResult:
            r = free.get()
            try:
                return r.run(inp, fut.result())
            finally:
                free.put(r)

        # One pool for the measurer's lifetime: a worker process dies with the thread that
        # started it (PR_SET_PDEATHSIG, `worker.py`), so the runner threads must outlive batches.
        if self._pool is None:
            self._pool = ThreadPoolExecutor(len(self.runners), thread_name_prefix="ansor-runner")
        done = [self._pool.submit(run, inp, fut) for inp, fut in zip(inputs, futures, strict=True)]
        for i, f in enumerate(done):  # reported in input order, from this thread
            out.append(f.result())
            if on_result is not None:
                on_result(i, out[-1])
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
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        for r in self.runners:
            r.close()

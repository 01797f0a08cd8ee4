"""Runners: the second half of measuring a candidate, on the hardware it is tuned for.

    (MeasureInput, BuildResult) --Runner.run (load or compile, check against the reference with
        poisoned outputs, time in a native loop)--> MeasureResult

TVM's `LocalRunner` shape. A runner first computes each task's reference outputs and untuned
latency (`baseline`); every candidate is verified against them before it is timed. A build that
failed is passed through as its error without touching the worker.

    LocalRunner   one isolated worker process on this machine, candidates one at a time so
                  timings do not disturb each other; several LocalRunners may share one device
                  through a lock: each loads its next candidate (JIT, module load) while another
                  holds the device to verify and time (`LocalMeasurer(runners=N)`)
    (cluster.py)  one runner actor per GPU or CPU node of a Ray cluster, each a LocalRunner
"""

from __future__ import annotations

import abc
import itertools
import math
import os
import tempfile
import threading
import time

from ansor.core.task import SearchTask
from ansor.measure.builder import BuildResult
from ansor.measure.measurer import SLOW_FACTOR, MeasureError, MeasureInput, MeasureResult, RunOptions, _result, _Worker


class Runner(abc.ABC):
    """Runs built candidates; never raises for a bad candidate."""

    @abc.abstractmethod
    def baseline(self, task: SearchTask) -> MeasureResult:
        """The untuned program's result; computes the task's reference outputs on first use."""

    @abc.abstractmethod
    def run(self, inp: MeasureInput, build: BuildResult, *, best: float = math.inf) -> MeasureResult:
        """The result of one built candidate. `best`: the fastest latency of the task known to the
        caller (seconds; a candidate far slower is timed once)."""

    def close(self) -> None:
        pass


class LocalRunner(Runner):
    """One worker process (threads: `options.threads`), reused across candidates and replaced
    whenever it dies or hangs."""

    _keys = itertools.count()

    def __init__(self, options: RunOptions | None = None, *, memory_mb: int | None = None,
                 device_lock: threading.Lock | None = None, share: LocalRunner | None = None,
                 env: dict[str, str] | None = None) -> None:
        """`device_lock`: held only while verifying and timing (a candidate is loaded outside
        it). `share`: another runner of the same device whose references and best latencies
        this one reuses. `env`: environment variables of its worker process (`config` knobs
        such as `ANSOR_CUDA_HOST_OPT_LEVEL`), over this process's."""
        from ansor import config

        self.options = options or RunOptions()
        self.worker = _Worker(self.options.threads, config.WORKER_MEMORY_MB if memory_mb is None else memory_mb,
                              env=env)
        self.device_lock = device_lock
        if share is not None:
            self._refs, self._best, self._ref_dir = share._refs, share._best, share._ref_dir
        else:
            self._refs: dict[str, tuple[str, MeasureResult]] = {}
            self._best: dict[str, float] = {}  # fastest latency measured here, per task hash
            self._ref_dir = tempfile.mkdtemp(prefix="ansor-ref-")

    def _opts(self) -> dict:
        return self.options.__dict__.copy()

    def baseline(self, task: SearchTask) -> MeasureResult:
        if task.hash not in self._refs:
            path = os.path.join(self._ref_dir, f"{task.hash}.npz")
            t0 = time.perf_counter()
            # The untuned program can be slow: allow it a generous multiple of the candidate limit.
            ans = self.worker.request(
                {"kind": "reference", "task": task.to_json(), "opts": self._opts(), "ref_path": path},
                self.options.timeout_s * 10,
            )
            self._refs[task.hash] = (path, _result(ans, time.perf_counter() - t0))
        return self._refs[task.hash][1]

    def run(self, inp: MeasureInput, build: BuildResult, *, best: float = math.inf) -> MeasureResult:
        if build.error is not None:
            return MeasureResult(error=build.error, error_msg=build.error_msg, build_s=build.build_s,
                                 total_s=build.build_s)
        ref = self.baseline(inp.task)
        if ref.error is not None:
            return MeasureResult(error=MeasureError.RUNTIME, error_msg=f"no reference: {ref.error_msg}")
        ref_path = self._refs[inp.task.hash][0]
        best = min(best, self._best.get(inp.task.hash, math.inf))
        t0 = time.perf_counter()
        req = {"kind": "run", "task": inp.task.to_json(), "script": inp.script, "artifact": build.artifact,
               "build_s": build.build_s, "opts": self._opts(), "ref_path": ref_path,
               "slow_s": max(SLOW_FACTOR * best, 0.01)}
        if self.device_lock is None:
            ans = self.worker.request(req, self.options.timeout_s)
        else:  # load outside the lock, verify and time inside it
            req.update(kind="load", key=f"{os.getpid()}-{next(self._keys)}")
            ans = self.worker.request(req, self.options.timeout_s)
            if not ans.get("error"):
                with self.device_lock:
                    req["slow_s"] = max(SLOW_FACTOR * min(best, self._best.get(inp.task.hash, math.inf)), 0.01)
                    ans = self.worker.request(dict(req, kind="measure_loaded", artifact=None),
                                              max(self.options.timeout_s - (time.perf_counter() - t0), 1.0))
        res = _result(ans, time.perf_counter() - t0 + build.build_s)
        if res.error is None:
            self._best[inp.task.hash] = min(best, res.latency)
        return res

    def close(self) -> None:
        self.worker.kill()

"""Builders: the first half of measuring a candidate, on any machine with the same MLIR.

    MeasureInput --Builder.submit/build (apply the script, lower to the LLVM dialect)-->
        BuildResult(artifact: MLIR bytecode | None, error, build_s) --> Runner (`runner.py`)

TVM's `LocalBuilder` shape. A target whose `Target.supports_artifacts` (the CPU: LLVM-dialect
bytecode; CUDA: PTX + the host's LLVM dialect) builds an artifact here and the runner only JITs it
(`Target.load`); for other targets the artifact is None and the runner compiles the script itself. A candidate that fails to build ends here as
a `BuildResult` with an error code; it never reaches a runner.

    InlineBuilder   builds nothing ahead: the runner compiles (one process does both, as
                    `LocalMeasurer` always did)
    LocalBuilder    a pool of N isolated worker processes (`measurer._Worker`) on this machine
    (cluster.py)    builder actors on the nodes of a Ray cluster
"""

from __future__ import annotations

import abc
import queue
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from ansor.measure.measurer import MeasureError, MeasureInput, RunOptions, _Worker


@dataclass(frozen=True)
class BuildResult:
    """What a builder hands a runner. `artifact` None without an error: the runner compiles the
    script itself. `build_s`: seconds the builder spent on it."""

    artifact: bytes | None = None
    error: MeasureError | None = None
    error_msg: str = ""
    build_s: float = 0.0


class Builder(abc.ABC):
    """Turns measure inputs into build results; never raises for a bad candidate."""

    @abc.abstractmethod
    def submit(self, inp: MeasureInput) -> Future[BuildResult]:
        """Start building `inp`; the future's result is its `BuildResult`."""

    def build(self, inputs: list[MeasureInput]) -> list[BuildResult]:
        """Build results in input order (as many at once as the builder has workers)."""
        return [f.result() for f in [self.submit(i) for i in inputs]]

    def close(self) -> None:
        pass


class InlineBuilder(Builder):
    """No build ahead of the run: every result is an empty artifact, the runner compiles."""

    def submit(self, inp: MeasureInput) -> Future[BuildResult]:
        f: Future[BuildResult] = Future()
        f.set_result(BuildResult())
        return f


def build_request(worker: _Worker, inp: MeasureInput, options: RunOptions) -> BuildResult:
    """One candidate built by `worker` (a worker process: a crash or hang is an error code)."""
    t0 = time.perf_counter()
    ans = worker.request({"kind": "artifact", "task": inp.task.to_json(), "script": inp.script,
                          "opts": options.__dict__.copy()}, options.timeout_s)
    err = MeasureError(ans["error"]) if ans.get("error") else None
    return BuildResult(artifact=ans.get("artifact"), error=err, error_msg=str(ans.get("msg", ""))[:500],
                       build_s=float(ans.get("build_s", 0.0)) if err is None else time.perf_counter() - t0)


class LocalBuilder(Builder):
    """`n_parallel` worker processes building at once (each single-threaded, memory-capped,
    restarted after a crash or a build that outlives `options.timeout_s`)."""

    def __init__(self, n_parallel: int = 1, options: RunOptions | None = None, *, memory_mb: int | None = None) -> None:
        from ansor import config

        if n_parallel < 1:
            raise ValueError(f"a LocalBuilder needs at least one worker, not {n_parallel}")
        self.options = options or RunOptions()
        mem = config.WORKER_MEMORY_MB if memory_mb is None else memory_mb
        self._workers = [_Worker(1, mem) for _ in range(n_parallel)]
        self._free: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        for w in self._workers:
            self._free.put(w)
        self._pool = ThreadPoolExecutor(n_parallel, thread_name_prefix="ansor-builder")

    @property
    def n_parallel(self) -> int:
        return len(self._workers)

    def start(self) -> None:
        """Start every worker process now (each imports MLIR: ~1 s) instead of on its first build."""
        for w in self._workers:
            if w.proc is None or w.proc.poll() is not None:
                w.kill()
                w.start()

    def _build(self, inp: MeasureInput) -> BuildResult:
        w = self._free.get()
        try:
            return build_request(w, inp, self.options)
        finally:
            self._free.put(w)

    def submit(self, inp: MeasureInput) -> Future[BuildResult]:
        return self._pool.submit(self._build, inp)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        for w in self._workers:
            w.kill()

"""Apply the best records: a task + a log -> a compiled callable (and its replayable script).

    module / .mlir file --create_task--> SearchTask --best record in LOG--> script
        --lowering.compile_task--> CompiledFunction(numpy arrays -> numpy arrays)

Without a log, or without a successful record for the task, the untuned program is compiled
(with a warning when a log was given).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
from mlir import ir

from . import lowering
from .records import SKETCH_VERSION, Record, best_record, load_records
from .task import SearchTask, create_task

log = logging.getLogger(__name__)


class CompiledFunction:
    """A compiled task. Call it with numpy arrays; it returns one array, or a tuple for several results."""

    def __init__(self, task: SearchTask, record: Record | None, threads: int | None = None) -> None:
        self.task = task
        self.record = record
        lowering.set_threads(threads)
        self._kernel = lowering.compile_task(task, record.script if record else None)

    @property
    def tuned(self) -> bool:
        return self.record is not None

    @property
    def script(self) -> str | None:
        """The transform script applied (None: untuned). Replayable with `ansor-opt --transform-interpreter`."""
        return self.record.script if self.record else None

    def __call__(self, *arrays: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
        outs = self._kernel.run(list(arrays))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def time(self, *arrays: np.ndarray, number: int = 10) -> float:
        """Seconds per call, averaged over `number` calls in a native loop."""
        ins = [np.ascontiguousarray(a, dtype=s.numpy_dtype()) for a, s in zip(arrays, self.task.inputs, strict=True)]
        return self._kernel.time(ins, number) / number


def compile(  # noqa: A001 (the public name the API promises)
    source: str | Path | ir.Module,
    target: str = "cpu",
    log: str | Path | None = None,
    *,
    func: str | None = None,
    threads: int | None = None,
) -> CompiledFunction:
    """Compile `source` (a .mlir path, MLIR text or module) with the best schedule in `log`."""
    if target != "cpu":
        raise ValueError(f"target '{target}' is not supported yet (supported: cpu)")
    task = create_task(source, func=func, target=target)
    record = None
    if log is not None:
        records = load_records(log)
        record = best_record(records, task.hash, target, current_only=True)
        stale = best_record(records, task.hash, target)
        if stale is not None and stale is not record:
            logging.getLogger(__name__).warning(
                "%s: ignoring records of %s from sketch generator v%d (this is v%d); retune to use them",
                log, task.name, stale.sketch_version, SKETCH_VERSION)
        if record is None:
            logging.getLogger(__name__).warning(
                "%s: no successful record for %s on %s: using the untuned program", log, task.name, target
            )
    return CompiledFunction(task, record, threads)

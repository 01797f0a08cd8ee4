"""ansor-mlir: Ansor (Zheng et al., OSDI 2020) auto-scheduling rebuilt on MLIR.

Pipeline (see docs/design.md):

    module --create_task--> SearchTask --sketch rules--> [Sketch] (transform scripts with holes)
    Sketch --annotation--> Schedule --measure (worker: apply, lower, JIT, verify, time)--> Record
    [Record] --> LOG.jsonl --compile--> callable with the best schedule

Importing `ansor` registers the `ansor` dialect and passes into every new `mlir.ir.Context`.
"""

from __future__ import annotations

from ansor.core import native as _native

_native.register_everything()

from ansor.compile import CompiledFunction, compile
from ansor.tuning.records import Record, load_records
from ansor.core.task import SearchTask, TaskError, create_task
from ansor.tuning.tuner import TuneResult, tune

__all__ = [
    "CompiledFunction",
    "Record",
    "SearchTask",
    "TaskError",
    "TuneResult",
    "compile",
    "create_task",
    "load_records",
    "tune",
]
__version__ = "0.1.0"

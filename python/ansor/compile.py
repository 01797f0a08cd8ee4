"""Apply the best records: a task + a log -> a compiled callable (and its replayable script).

    module / .mlir file --create_task--> SearchTask --best record in LOG--> script
        --Target.compile--> CompiledFunction(numpy arrays -> numpy arrays)
    model (several fusion groups) --extract_tasks--> Network --best record per task-->
        --Target.compile_network (each callee scheduled, one module)--> CompiledNetwork

Without a log, or without a successful record for the task, the untuned program is compiled
(with a warning when a log was given).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from mlir import ir


from ansor.frontend.partition import Network, extract_tasks
from ansor.tuning.records import SKETCH_VERSION, Record, best_record, load_records, warn_if_mixed
from ansor.core.task import SearchTask, create_task
from ansor.targets import Kernel, get_target, target_names

log = logging.getLogger(__name__)


class _Compiled:
    """Calling and timing a compiled kernel whose inputs are `self.task.inputs`."""

    task: SearchTask
    _kernel: Kernel

    def __call__(self, *arrays: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
        outs = self._kernel.run(list(arrays))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def time(self, *arrays: np.ndarray, number: int = 10) -> float:
        """Seconds per call, averaged over `number` calls in a native loop."""
        ins = [np.ascontiguousarray(a, dtype=s.numpy_dtype()) for a, s in zip(arrays, self.task.inputs, strict=True)]
        return self._kernel.time(ins, number) / number


class CompiledFunction(_Compiled):
    """A compiled task. Call it with numpy arrays; it returns one array, or a tuple for several results."""

    def __init__(self, task: SearchTask, record: Record | None, threads: int | None = None) -> None:
        self.task = task
        self.record = record
        target = get_target(task.target)
        target.set_threads(threads)
        self._kernel = target.compile(task, record.script if record else None)

    @property
    def tuned(self) -> bool:
        return self.record is not None

    @property
    def script(self) -> str | None:
        """The transform script applied (None: untuned). Replayable with `ansor-opt --transform-interpreter`."""
        return self.record.script if self.record else None



def _best(records: list[Record], task: SearchTask, target: str, source: str | Path) -> Record | None:
    record = best_record(records, task.hash, target, current_only=True)
    stale = best_record(records, task.hash, target)
    if stale is not None and stale is not record:
        log.warning("%s: ignoring records of %s from sketch generator v%d (this is v%d); retune to use them",
                    source, task.name, stale.sketch_version, SKETCH_VERSION)
    return record


class CompiledNetwork(_Compiled):
    """A compiled model: every task's callee runs its best schedule (untuned where the log has
    none). Call it with the model's inputs; it returns one array or a tuple (fresh arrays).

    The intermediates between tasks live in a static arena, allocated once (`targets/cpu/arena.py`):
    calls of one compiled network are serialised by a lock (safe from several threads, not
    concurrent); compile it twice for concurrent calls.

    `profile=True` adds timers around every task's call (`targets/cpu/profile.py`), read by
    `profile()`."""

    def __init__(self, net: Network, records: dict[str, Record | None], threads: int | None = None,
                 *, profile: bool = False) -> None:
        self._lock = threading.Lock()
        self.network = net
        self.task = net.as_task()  # the whole model as a task record: inputs, outputs, flops
        self.records = records  # task hash -> best record (None: untuned)
        target = get_target(self.task.target)
        target.set_threads(threads)
        scripts = {h: r.script for h, r in records.items() if r is not None}
        callees = {name: net.tasks[i] for name, i in net.calls.items()}
        self._kernel = target.compile_network(self.task, callees, scripts, **({"profile": True} if profile else {}))

    def __call__(self, *arrays: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
        with self._lock:
            return super().__call__(*arrays)

    def time(self, *arrays: np.ndarray, number: int = 10) -> float:
        with self._lock:
            return super().time(*arrays, number=number)

    @property
    def tuned_tasks(self) -> int:
        return sum(r is not None for r in self.records.values())

    def profile(self, *arrays: np.ndarray, number: int = 10) -> NetworkProfile:
        """Time `number` calls in the native loop (after one warm-up call) and split each call's
        time into its tasks' calls and the parent's own ops (compiled with `profile=True`)."""
        if self._kernel.profile_segments is None:
            raise ValueError("compile the network with profile=True to profile it")
        with self._lock:
            ins = [np.ascontiguousarray(a, dtype=s.numpy_dtype()) for a, s in zip(arrays, self.task.inputs, strict=True)]
            self._kernel.time(ins, 1)
            self._kernel.read_profile()
            wall = self._kernel.time(ins, number) / number
            acc = self._kernel.read_profile() / number
        tasks = {name: self.network.tasks[i] for name, i in self.network.calls.items()}
        calls, parent = [], []
        for seg, t in zip(self._kernel.profile_segments, acc, strict=True):
            if seg.kind == "call":
                task = tasks.get(seg.callee)
                rec = self.records.get(task.hash) if task is not None else None
                calls.append(CallTime(seg.callee, task.name if task else seg.callee, float(t),
                                      rec.latency if rec is not None else None))
            elif seg.kind == "parent":
                parent.append((seg.callee, float(t)))
        return NetworkProfile(wall, calls, parent)


@dataclass(frozen=True)
class CallTime:
    """One task call inside a profiled model: seconds per model call, and the task's best
    logged latency (timed warm and alone by the tuner; None: untuned)."""

    callee: str
    task: str
    seconds: float
    logged: float | None


@dataclass(frozen=True)
class NetworkProfile:
    """`CompiledNetwork.profile`: the end-to-end time per call (`wall`, timed around the native
    loop), each task call's time in the model, and the parent's own ops between calls (`parent`:
    (the callee they precede, '' for the tail), seconds)."""

    wall: float
    calls: list[CallTime]
    parent: list[tuple[str, float]]

    @property
    def in_calls(self) -> float:
        return sum(c.seconds for c in self.calls)

    @property
    def in_parent(self) -> float:
        return sum(t for _, t in self.parent)

    def table(self) -> str:
        """A text table: every call with its in-model and logged time, then the parent's total."""
        lines = [f"{'call':<28} {'task':<40} {'in model ms':>11} {'logged ms':>10} {'ratio':>6}"]
        for c in self.calls:
            logged = f"{c.logged * 1e3:>10.3f}" if c.logged is not None else f"{'-':>10}"
            ratio = f"{c.seconds / c.logged:>5.2f}x" if c.logged else f"{'':>6}"
            lines.append(f"{c.callee[:28]:<28} {c.task[:40]:<40} {c.seconds * 1e3:>11.3f} {logged} {ratio}")
        logged = sum(c.logged for c in self.calls if c.logged is not None)
        lines.append(f"{'sum of calls':<69} {self.in_calls * 1e3:>11.3f} {logged * 1e3:>10.3f}")
        lines.append(f"{'parent ops (between calls)':<69} {self.in_parent * 1e3:>11.3f}")
        rest = self.wall - self.in_calls - self.in_parent
        lines.append(f"{'end to end (native loop)':<69} {self.wall * 1e3:>11.3f}   (unattributed {rest * 1e3:+.3f})")
        return "\n".join(lines)



def extract_for_log(source: str | Path | ir.Module, log: str | Path | None, *, winograd: int | None = None,
                    records: list[Record] | None = None, **kwargs) -> Network:
    """`extract_tasks(source, winograd=..., **kwargs)` as `log` was tuned: `winograd=None` means the
    target's default, or the other setting (Winograd F(4x4) vs direct convolutions) when the log has
    records for more of that model's tasks (a log tuned with `--winograd 4`, say). `records`: the
    log's records when the caller has loaded them already."""
    net = extract_tasks(source, winograd=winograd, **kwargs)
    if winograd is not None or log is None:
        return net
    default = get_target(kwargs.get("target", "cpu")).default_winograd
    other = extract_tasks(source, winograd=0 if default else 4, **kwargs)
    if {t.hash for t in other.tasks} == {t.hash for t in net.tasks}:
        return net
    records = load_records(log) if records is None else records

    def covered(n: Network) -> int:
        return sum(best_record(records, t.hash, t.target) is not None for t in n.tasks)

    if covered(other) > covered(net):
        logging.getLogger(__name__).info("%s: tuned with%s Winograd convolutions; compiling that model", log,
                                         "out" if default else "")
        return other
    return net


def compile_network(net: Network, log: str | Path | None = None, *, threads: int | None = None,
                    records: list[Record] | None = None, profile: bool = False) -> CompiledNetwork:
    """Compile a partitioned model with the best record of each of its tasks in `log` (`records`:
    the log's records when the caller has loaded them already; `profile`: see `CompiledNetwork`)."""
    if records is None:
        records = load_records(log) if log is not None else []
        if log is not None:
            warn_if_mixed(records, log)
    chosen: dict[str, Record | None] = {}
    missing = []
    for t in net.tasks:
        chosen[t.hash] = _best(records, t, t.target, log) if log is not None else None
        if chosen[t.hash] is None:
            missing.append(t.name)
    if log is not None and missing:
        log_ = logging.getLogger(__name__)
        log_.warning("%s: no record for %d of %d tasks (%s): they run untuned", log, len(missing), len(net.tasks),
                     ", ".join(missing[:6]) + (", ..." if len(missing) > 6 else ""))
    return CompiledNetwork(net, chosen, threads, profile=profile)


def compile(
    source: str | Path | ir.Module,
    target: str = "cpu",
    log: str | Path | None = None,
    *,
    func: str | None = None,
    threads: int | None = None,
    winograd: int | None = None,
    split: bool | None = None,
    tf32: bool = False,
) -> CompiledFunction | CompiledNetwork:
    """Compile `source` (a .mlir path, MLIR text or module) with the best schedules in `log`.

    A function made of one fusion group, or one the log tuned as a whole (`ansor tune
    --one-task`), is one task (`CompiledFunction`); a model with several groups is partitioned
    into tasks and compiled as a whole (`CompiledNetwork`), each task with its own best record.
    `winograd`: as in `extract_tasks`; None (default): as the log was tuned (`extract_for_log`).
    `split`: as in `extract_tasks` (row-wise reduction chains in separate tasks; for a log tuned
    with `ansor tune --split`; None: the target's default).
    `tf32`: its tasks' f32 contractions may use TF32 tensor cores (as tuned by `ansor tune
    --tf32`; cuda only)."""
    if not get_target(target).supports_compile:
        ok = ", ".join(n for n in target_names() if get_target(n).supports_compile)
        raise ValueError(f"ansor.compile: target '{target}' is not supported yet (supported: {ok})")
    task = create_task(source, func=func, target=target, tf32=tf32)
    records = load_records(log) if log is not None else []
    if log is not None:
        warn_if_mixed(records, log)
    record = _best(records, task, target, log) if log is not None else None
    if record is None or winograd:  # (a record of the whole function: the log tuned it as it is)
        net = extract_for_log(source, log, func=func, target=target, winograd=winograd, records=records,
                              split=split, tf32=tf32)
        if len(net.calls) > 1 or net.tasks[0].hash != task.hash:  # several tasks, or one rewritten
            return compile_network(net, log, threads=threads, records=records)
    if log is not None and record is None:
        logging.getLogger(__name__).warning(
            "%s: no successful record for %s on %s: using the untuned program", log, task.name, target
        )
    return CompiledFunction(task, record, threads)

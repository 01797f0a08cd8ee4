"""Progress reporting: one callback object the tuner talks to; the CLI picks how it shows.

    tuner events (start, batch done, end) --ProgressCallback--> table lines / nothing / JSON events
"""

from __future__ import annotations

import json
import math
import sys
import time
from typing import TextIO

from ansor.measure.measurer import MeasureResult
from ansor.tuning.records import Record
from ansor.core.task import SearchTask
from ansor.targets import get_target


class ProgressCallback:
    """Receives tuner events. The base class ignores them (verbose=0)."""

    def on_start(self, task: SearchTask, baseline: MeasureResult, trials: int, resumed: int) -> None:
        pass

    def on_result(self, task: SearchTask, trials: int, best: Record | None, errors: int) -> None:
        """After every measured candidate (`trials` counts all so far, resumed ones included)."""

    def on_batch(self, task: SearchTask, trials: int, best: Record | None, errors: int, batch: list[Record]) -> None:
        pass

    def on_errors(self, task: SearchTask, batch: list[Record]) -> None:
        """Called when many consecutive candidates failed: say why."""

    def on_end(self, task: SearchTask, best: Record | None, baseline: MeasureResult) -> None:
        pass


def _fmt_lat(s: float) -> str:
    if not math.isfinite(s):
        return "-"
    return f"{s * 1e3:.3f} ms" if s >= 1e-4 else f"{s * 1e6:.1f} us"


def _baseline_name(task: SearchTask) -> str:
    """What the task's baseline program is: the untransformed program on the CPU ("naive loops"),
    the default GPU schedule on a GPU."""
    return get_target(task.target).baseline_name


class TableProgress(ProgressCallback):
    """A live table, one row per measured batch: trials, best latency, best GFLOP/s, errors."""

    def __init__(self, stream: TextIO | None = None, verbose: int = 1) -> None:
        self.out = stream or sys.stdout
        self.verbose = verbose
        self.t0 = time.perf_counter()

    def _p(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def on_start(self, task: SearchTask, baseline: MeasureResult, trials: int, resumed: int) -> None:
        self.t0 = time.perf_counter()
        target = get_target(task.target).describe()
        self._p(f"task {task.name}: {task.flops / 1e9:.3f} GFLOP per call, target {target}, {trials} trials"
                + (f" ({resumed} records resumed from the log)" if resumed else ""))
        what = _baseline_name(task)
        if baseline.error is None:
            self._p(f"{what}: {_fmt_lat(baseline.latency)} ({task.flops / baseline.latency / 1e9:.2f} GFLOP/s)")
        else:
            self._p(f"{what}: failed ({baseline.error.value}: {baseline.error_msg})")
        self._p(f"{'trials':>7} {'best latency':>14} {'GFLOP/s':>9} {'errors':>7} {'elapsed':>8}")

    #: A table row every this many measured candidates (and at the end of every batch).
    ROW_EVERY = 16

    def _row(self, trials: int, best: Record | None, errors: int) -> None:
        lat = best.latency if best else math.inf
        gf = best.gflops if best else 0.0
        self._p(f"{trials:>7} {_fmt_lat(lat):>14} {gf:>9.2f} {errors:>7} {time.perf_counter() - self.t0:>7.1f}s")
        self._last_row = trials

    def on_result(self, task: SearchTask, trials: int, best: Record | None, errors: int) -> None:
        if trials % self.ROW_EVERY == 0:
            self._row(trials, best, errors)

    def on_batch(self, task: SearchTask, trials: int, best: Record | None, errors: int, batch: list[Record]) -> None:
        if getattr(self, "_last_row", None) != trials:
            self._row(trials, best, errors)
        if self.verbose >= 2:
            for r in batch:
                if r.error:
                    self._p(f"        {r.schedule.key()} {r.error}: {r.result.error_msg}")

    def on_errors(self, task: SearchTask, batch: list[Record]) -> None:
        for r in batch[-3:]:
            self._p(f"  ! {r.error}: {r.result.error_msg}")

    def on_end(self, task: SearchTask, best: Record | None, baseline: MeasureResult) -> None:
        if best is None:
            self._p("no successful candidate: the untuned program is the result")
            return
        line = f"best: {_fmt_lat(best.latency)}  {best.gflops:.2f} GFLOP/s"
        if baseline.error is None and math.isfinite(baseline.latency):
            # a reference point, not a speedup to quote: `ansor bench` / bench/ compare with BLAS and PyTorch
            line += f"  ({_baseline_name(task)}: {_fmt_lat(baseline.latency)})"
        self._p(line)


class JsonProgress(ProgressCallback):
    """Machine-readable events, one JSON object per line."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.out = stream or sys.stdout

    def _e(self, **kw: object) -> None:
        print(json.dumps(kw), file=self.out, flush=True)

    def on_start(self, task: SearchTask, baseline: MeasureResult, trials: int, resumed: int) -> None:
        self._e(event="start", task=task.name, trials=trials, resumed=resumed,
                untuned_latency=baseline.latency if baseline.error is None else None)

    def on_batch(self, task: SearchTask, trials: int, best: Record | None, errors: int, batch: list[Record]) -> None:
        self._e(event="batch", task=task.name, trials=trials, errors=errors,
                best_latency=best.latency if best else None)

    def on_end(self, task: SearchTask, best: Record | None, baseline: MeasureResult) -> None:
        self._e(event="end", task=task.name, best_latency=best.latency if best else None,
                best_key=best.key if best else None)

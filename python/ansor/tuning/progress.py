"""Progress reporting: one callback object the tuner talks to; the CLI picks how it shows.

    tuner events (start, batch done, round times, end) --ProgressCallback--> table lines / nothing / JSON events

A round is one measured batch of a task: the search proposes it (evolution, with feature
extraction and cost-model prediction), the measurer builds and times it, the cost model
retrains on it. `RoundTimes` holds the wall-clock seconds of each part, so the search's
overhead is reported next to the measurement time it has to keep up with.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TextIO

from ansor.measure.measurer import MeasureResult
from ansor.tuning.records import Record
from ansor.core.task import SearchTask
from ansor.targets import get_target


@dataclass(frozen=True)
class RoundTimes:
    """Wall-clock seconds of one round (one measured batch of a task), by part.

    `search_s` is the policy's `next_batch` whole: evolution, including `features_s` (feature
    extraction of the candidates it scored) and `predict_s` (cost-model prediction); zero parts
    mean the policy does not time them (random search). `train_s` is learning from the batch
    (`policy.update` + `policy.retrain`: the measured programs' features and the model's
    training). `measure_s` is the measurer's build + run + check of the batch."""

    candidates: int
    search_s: float
    features_s: float
    predict_s: float
    train_s: float
    measure_s: float

    @property
    def evolution_s(self) -> float:
        """Search time outside features and prediction: sampling, mutation, selection."""
        return max(0.0, self.search_s - self.features_s - self.predict_s)

    @property
    def overhead_s(self) -> float:
        """The search's own time in this round (everything but measuring): search + training."""
        return self.search_s + self.train_s

    def to_json(self) -> dict[str, float]:
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in asdict(self).items()}

    @staticmethod
    def total(rounds: Sequence[RoundTimes]) -> RoundTimes:
        """The parts summed over `rounds`."""
        return RoundTimes(sum(r.candidates for r in rounds), sum(r.search_s for r in rounds),
                          sum(r.features_s for r in rounds), sum(r.predict_s for r in rounds),
                          sum(r.train_s for r in rounds), sum(r.measure_s for r in rounds))

    def describe(self) -> str:
        """One line: "search 2.10 s (features 1.10 s, predict 0.20 s, evolution 0.80 s) + training
        0.30 s = overhead 2.40 s vs measurement 6.20 s (28% of the round)"."""
        parts = ", ".join(f"{name} {v:.2f} s" for name, v in
                          (("features", self.features_s), ("predict", self.predict_s), ("evolution", self.evolution_s))
                          if self.features_s or self.predict_s)
        total = self.overhead_s + self.measure_s
        share = f" ({100 * self.overhead_s / total:.0f}% of the time)" if total > 0 else ""
        return (f"search {self.search_s:.2f} s" + (f" ({parts})" if parts else "")
                + f" + training {self.train_s:.2f} s = overhead {self.overhead_s:.2f} s"
                + f" vs measurement {self.measure_s:.2f} s" + share)


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

    def on_round(self, task: SearchTask, times: RoundTimes) -> None:
        """After every round (after `on_batch`): where its time went."""

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
        self.rounds: list[RoundTimes] = []

    def _p(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def on_start(self, task: SearchTask, baseline: MeasureResult, trials: int, resumed: int) -> None:
        self.t0 = time.perf_counter()
        self.rounds = []
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

    def on_round(self, task: SearchTask, times: RoundTimes) -> None:
        self.rounds.append(times)
        self._p(f"        round {len(self.rounds)}: {times.describe()}")

    def on_end(self, task: SearchTask, best: Record | None, baseline: MeasureResult) -> None:
        if self.rounds:
            self._p(f"time over {len(self.rounds)} rounds: {RoundTimes.total(self.rounds).describe()}")
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
        self.rounds: list[RoundTimes] = []

    def _e(self, **kw: object) -> None:
        print(json.dumps(kw), file=self.out, flush=True)

    def on_start(self, task: SearchTask, baseline: MeasureResult, trials: int, resumed: int) -> None:
        self.rounds = []
        self._e(event="start", task=task.name, trials=trials, resumed=resumed,
                untuned_latency=baseline.latency if baseline.error is None else None)

    def on_batch(self, task: SearchTask, trials: int, best: Record | None, errors: int, batch: list[Record]) -> None:
        self._e(event="batch", task=task.name, trials=trials, errors=errors,
                best_latency=best.latency if best else None)

    def on_round(self, task: SearchTask, times: RoundTimes) -> None:
        self.rounds.append(times)
        self._e(event="round", task=task.name, **times.to_json())

    def on_end(self, task: SearchTask, best: Record | None, baseline: MeasureResult) -> None:
        self._e(event="end", task=task.name, best_latency=best.latency if best else None,
                best_key=best.key if best else None, time=RoundTimes.total(self.rounds).to_json())

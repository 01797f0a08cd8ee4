"""Ansor's task scheduler: one measurement budget spread over the tasks of a network.

    Network.tasks --one TaskTuner each (shared measurer, log, cost model, feature workers)-->
        warm-up: one round per task, the largest share of the objective first; a resumed run
                 skips it for the tasks the log has tuned, whose per-round history is replayed
                 from their records
        loop: pick a task (gradient or round-robin, ε-greedy)
              --hand it the other tasks' fastest schedules (transfer)--TaskTuner.step(round)--> records
              --> per-task best latency g_i --> objective f(g) (default Σ weight_i · g_i)
        until the trial budget is spent, every task is dead, or the objective stops improving

The gradient strategy (Ansor §6) estimates, for each task i, how much the objective would drop
if the next round went to i:

    ∂f/∂t_i ≈ ∂f/∂g_i · ( α · (g_i(t_i) − g_i(t_i − Δt)) / Δt
                         + (1 − α) · (min(g_i − g_i / t_i,  β · C_i / max_{j ∈ N(i)} V_j) − g_i) )

with t_i the rounds given to task i so far, Δt the backward window, C_i the task's FLOPs,
V_j = C_j / g_j the throughput of a similar task j (N(i): tasks whose anchor op is the same kind,
e.g. all 3x3 convolutions) and ∂f/∂g_i taken by finite differences (= weight_i for the default
objective). The task with the most negative estimate gets the next round. Until a task has a
valid record its g_i is its untuned latency.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ansor.space.schedule import Schedule
from ansor.search.cost_model import create_cost_model
from ansor.measure.measurer import Measurer, MeasureResult
from ansor.tuning.records import Record, RecordWriter
from ansor.core.task import SearchTask
from ansor.tuning.progress import RoundTimes
from ansor.tuning.tuner import TaskTuner, TuneResult
from ansor.tuning.options import TuningOptions

log = logging.getLogger(__name__)

#: Objective over per-task latencies (seconds, in task order) -> seconds (lower is better).
Objective = Callable[[np.ndarray], float]

STRATEGIES = ("gradient", "round-robin")


@dataclass
class NetworkTuneResult:
    """What a scheduled tuning run found, per task, and the history of the objective."""

    tasks: tuple[SearchTask, ...]
    results: list[TuneResult]
    #: (trials measured so far, resumed records included, estimated objective in seconds)
    #: at the start and after every round
    history: list[tuple[int, float]] = field(default_factory=list)
    trials: int = 0  # measured in total, resumed records included

    @property
    def latencies(self) -> np.ndarray:
        return np.array([_cost(r.best, r.baseline) for r in self.results])

    def estimated_latency(self) -> float:
        """Σ weight · best latency (untuned latency for tasks without a record), seconds; inf
        when a task cannot run at all (`failed_tasks`)."""
        if self.failed_tasks():
            return math.inf
        return float(sum(t.weight * c for t, c in zip(self.tasks, self.latencies, strict=True)))

    def failed_tasks(self) -> list[str]:
        """Names of the tasks with neither a working record nor a working untuned program."""
        return [t.name for t, r in zip(self.tasks, self.results, strict=True) if r.unrunnable]


def _cost(best: Record | None, baseline: MeasureResult | None) -> float:
    if best is not None:
        return best.latency
    if baseline is not None and baseline.error is None:
        return baseline.latency
    return 1e10  # neither: the task cannot run (its error is in the log)


def _replayed_history(prior: Sequence[Record], per_round: int, current: float) -> list[float]:
    """A resumed task's latency before its first round and after each round of `per_round`
    records, replayed from its log records (log order); `[current]` when it has no tuned records
    (the untuned program alone). Ends at `current`, the task's latency now."""
    tuned = [r for r in prior if r.schedule.sketch != "skip"]
    if not tuned:
        return [current]
    base = [r.latency for r in prior if r.schedule.sketch == "skip" and r.error is None]
    best = min(base) if base else math.inf
    out = [best]
    for k, r in enumerate(tuned, 1):
        if r.error is None:
            best = min(best, r.latency)
        if k % per_round == 0 or k == len(tuned):
            out.append(best)
    out = [x if math.isfinite(x) else 1e10 for x in out]
    out[-1] = current
    return out


def _similarity_tag(task: SearchTask) -> str:
    """Tasks with the same tag are 'similar' for the forward estimate: same anchor op kind and
    same input ranks (e.g. every NCHW 2-D convolution)."""
    anchor = task.name.split("#", 1)[0]
    return anchor + ":" + ",".join(str(len(s.shape)) for s in task.inputs)


class TaskScheduler:
    """Spread `trials` measurements over `tasks` (Ansor's gradient scheduler or round-robin).

    Defaults are the paper's / TVM v0.19's: α = 0.2, β = 2, backward window 3 rounds,
    ε-greedy 0.05. `objective` maps the vector of per-task latencies to the quantity to minimise
    (default Σ weight · latency). `early_stopping`: stop when the objective has not improved for
    this many measured trials (None: never); `task_early_stopping`: a task whose best has not
    improved for this many of its own trials gets no more rounds.
    """

    def __init__(
        self,
        tasks: Sequence[SearchTask],
        *,
        strategy: str = "gradient",
        objective: Objective | None = None,
        alpha: float = 0.2,
        beta: float = 2.0,
        backward_window: int = 3,
        eps_greedy: float = 0.05,
        early_stopping: int | None = None,
        task_early_stopping: int | None = None,
        seed: int = 0,
    ) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown task scheduling strategy {strategy!r} (expected one of {', '.join(STRATEGIES)})")
        if not tasks:
            raise ValueError("no tasks to schedule")
        self.tasks = tuple(tasks)
        self.strategy = strategy
        weights = np.array([t.weight for t in self.tasks], dtype=float)
        self.objective: Objective = objective or (lambda g: float(np.dot(weights, g)))
        self.alpha, self.beta, self.window, self.eps = alpha, beta, backward_window, eps_greedy
        self.early_stopping, self.task_early_stopping = early_stopping, task_early_stopping
        self.rng = random.Random(seed)
        self.seed = seed
        self._tags = [_similarity_tag(t) for t in self.tasks]

    # -- the choice -------------------------------------------------------------------------

    def _chain_grad(self, g: np.ndarray, i: int) -> float:
        base = self.objective(g)
        h = max(abs(g[i]) * 1e-3, 1e-12)
        bumped = g.copy()
        bumped[i] += h
        return (self.objective(bumped) - base) / h

    def gradients(self, g: np.ndarray, rounds: Sequence[int], history: Sequence[Sequence[float]]) -> np.ndarray:
        """The estimate ∂f/∂t_i of the module docstring for every task (more negative = more useful).

        `g`: current per-task latency; `rounds[i]`: rounds task i had; `history[i]`: its latency
        before its first round (untuned) and after each of those rounds (history[i][-1] == g[i]).
        The backward term reads the rounds only, as TVM's history starts at the first round: the
        drop from the untuned program (85 ms to 0.6 ms for a BERT matmul) would otherwise look
        like the task's recent progress and win it one more round as soon as it had three."""
        out = np.zeros(len(self.tasks))
        for i, task in enumerate(self.tasks):
            t = max(rounds[i], 1)
            hist = history[i][1:]
            backward = (hist[-1] - hist[-1 - self.window]) / self.window if len(hist) > self.window else 0.0
            g_next = g[i] - g[i] / t
            similar = [j for j in range(len(self.tasks)) if self._tags[j] == self._tags[i]]
            if len(similar) > 1:
                best_speed = max(self.tasks[j].flops / g[j] for j in similar)
                if best_speed > 0:
                    g_next = min(g_next, self.beta * task.flops / best_speed)
            forward = g_next - g[i]
            out[i] = self._chain_grad(g, i) * (self.alpha * backward + (1 - self.alpha) * forward)
        return out

    def _pick(self, g: np.ndarray, rounds: list[int], history: list[list[float]], alive: list[int], turn: int) -> int:
        if self.strategy == "round-robin":
            return alive[turn % len(alive)]
        if self.rng.random() < self.eps:
            return self.rng.choice(alive)
        grads = self.gradients(g, rounds, history)[alive]
        if np.allclose(grads, grads[0]):
            return self.rng.choice(alive)
        return alive[int(np.argmin(grads))]

    def _donors(self, tuners: Sequence[TaskTuner], i: int, per_task: int = 2) -> list[Schedule]:
        """The `per_task` fastest measured schedules of every other task, tasks similar to task i
        first (`_similarity_tag`), then by throughput: the seeds `transfer` adapts to task i."""
        ranked = []
        for j, tn in enumerate(tuners):
            best = tn.policy.fastest(per_task) if j != i else []
            if not best:
                continue
            speed = tn.task.flops / best[0][1]
            ranked.append((self._tags[j] != self._tags[i], -speed, j, [s for s, _ in best]))
        ranked.sort(key=lambda r: r[:3])
        return [s for *_, best in ranked for s in best]

    # -- the loop ---------------------------------------------------------------------------

    def tune(
        self,
        trials: int,
        *,
        log_path: str | Path | None = None,
        measurer: Measurer | None = None,
        callback: SchedulerCallback | None = None,
        options: TuningOptions | None = None,
        **option_fields: Any,
    ) -> NetworkTuneResult:
        """Measure until `trials` candidates are measured in total: records resumed from
        `log_path` and the untuned programs count, as in one task's `tune`, so rerunning a killed
        run's command finishes its budget. `min(batch_size, remaining trials // tasks)` per
        round, the warm-up round of the tasks with the largest share of the objective first.
        Records go to `log_path` (each task resumes from its records).
        `transfer` (learned search): before each round, the task's search gets the fastest
        schedules of the other tasks, adapted to its shapes (`EvolutionarySearch.transfer`);
        `transfer=False` is the ablation switch. How each task's search runs: `options`
        (`TuningOptions`), its fields also accepted as keywords, as in `tune`."""
        opts = TuningOptions.of(options, **option_fields)
        batch_size, search, transfer = opts.batch_size, opts.search, opts.transfer
        cb = callback or SchedulerCallback()
        n = len(self.tasks)
        own_measurer = measurer is None
        measurer = measurer or opts.create_measurer(self.tasks[0].target if self.tasks else "cpu")
        writer = RecordWriter(Path(log_path)) if log_path is not None else None
        model = create_cost_model(opts.cost_model, seed=self.seed) if search == "learned" else opts.cost_model
        task_opts = dataclasses.replace(opts, cost_model=model)  # one model for every task
        extractor = None
        if search == "learned" and opts.features_fn is None:
            from ansor.search.features import FeatureExtractor

            extractor = FeatureExtractor()
        tuners: list[TaskTuner] = []
        try:
            for i, task in enumerate(self.tasks):
                tuners.append(TaskTuner(task, measurer=measurer, log_path=log_path, writer=writer, seed=self.seed + i,
                                        options=task_opts, extractor=extractor))
            for tn in tuners:
                tn.start(0)
            g = np.array([_cost(tn.best, tn.baseline) for tn in tuners])
            # the budget is a total: the log's records and the untuned programs logged by start()
            # (once per log) count
            spent, turn = sum(tn.done for tn in tuners), 0
            per_round = max(1, min(batch_size, (trials - spent) // n))
            cb.on_start(self, tuners, self.objective(g))
            # Resuming: a task with tuned records in the log has had its rounds; rebuild its
            # per-round history from them (for the backward gradient) and skip its warm-up.
            history = [_replayed_history(tn.prior, per_round, float(g[i])) for i, tn in enumerate(tuners)]
            rounds = [len(h) - 1 for h in history]
            # Warm-up in order of the task's share of the objective (weight x untuned latency by
            # default), largest first: a budget too small for every task's first round then
            # goes to the tasks that matter.
            warmup = sorted((i for i in range(n) if rounds[i] == 0),
                            key=lambda i: (-self._chain_grad(g, i) * g[i], i))
            left = max(trials - spent, 0)
            if left < len(warmup):
                log.warning("%d trials leave %d of the %d tasks untuned (a round needs at least one trial); "
                            "the tasks with the largest share of the latency go first",
                            left, len(warmup) - left, n)
            result = NetworkTuneResult(self.tasks, [], [(spent, self.objective(g))])
            best_obj, best_at = self.objective(g), spent
            since_improved = [0] * n
            alive = list(range(n))
            for i, tn in enumerate(tuners):
                if tn.unrunnable:
                    # Every candidate is checked against the untuned program's outputs: without
                    # them nothing can be measured, so no trials go to this task.
                    log.warning("task %s: the untuned program fails (%s: %s); not tuning it",
                                tn.task.name, tn.baseline.error.value, tn.baseline.error_msg)
                    alive.remove(i)
            while spent < trials and alive:
                if turn < len(warmup):  # warm-up: every task without rounds once, in order
                    i = warmup[turn]
                    if i not in alive:
                        turn += 1
                        continue
                else:
                    i = self._pick(g, rounds, history, alive, turn)
                turn += 1
                if transfer:
                    tuners[i].policy.transfer(self._donors(tuners, i))
                before = tuners[i].best.latency if tuners[i].best else math.inf
                batch = tuners[i].step(min(per_round, trials - spent))
                spent += len(batch)
                rounds[i] += 1
                g[i] = _cost(tuners[i].best, tuners[i].baseline)
                history[i].append(float(g[i]))
                obj = self.objective(g)
                result.history.append((spent, obj))
                improved = tuners[i].best is not None and tuners[i].best.latency < before
                since_improved[i] = 0 if improved else since_improved[i] + len(batch)
                if tuners[i].exhausted or (self.task_early_stopping is not None
                                           and since_improved[i] >= self.task_early_stopping):
                    alive.remove(i)
                cb.on_round(self, tuners, i, spent, obj)
                if obj < best_obj * (1 - 1e-9):
                    best_obj, best_at = obj, spent
                elif self.early_stopping is not None and spent - best_at >= self.early_stopping:
                    log.info("objective did not improve for %d trials: stopping", spent - best_at)
                    break
            result.results = [tn.result() for tn in tuners]
            result.trials = spent
            cb.on_end(self, tuners, self.objective(g))
            return result
        finally:
            for tn in tuners:
                tn.close()
            if extractor is not None:
                extractor.close()
            if writer is not None:
                writer.close()
            if own_measurer:
                measurer.close()


class SchedulerCallback:
    """Receives scheduler events; the base class ignores them."""

    def on_start(self, sched: TaskScheduler, tuners: list[TaskTuner], objective: float) -> None:
        pass

    def on_round(self, sched: TaskScheduler, tuners: list[TaskTuner], task_index: int, trials: int,
                 objective: float) -> None:
        pass

    def on_end(self, sched: TaskScheduler, tuners: list[TaskTuner], objective: float) -> None:
        pass


def _ms(s: float) -> str:
    return f"{s * 1e3:.3f}" if math.isfinite(s) and s < 1e9 else "-"


class SchedulerTable(SchedulerCallback):
    """A line per round and the per-task table (latency, GFLOP/s, trials, weight) every
    `table_every` rounds and at the end, with the estimated end-to-end latency."""

    def __init__(self, stream=None, table_every: int = 10) -> None:
        import sys

        self.out = stream or sys.stdout
        self.table_every = table_every
        self.rounds = 0

    def _p(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def table(self, tuners: list[TaskTuner], objective: float) -> None:
        self._p(f"{'task':<24} {'latency ms':>11} {'GFLOP/s':>9} {'trials':>7} {'weight':>6} {'untuned ms':>11}")
        for tn in tuners:
            lat = _cost(tn.best, tn.baseline)
            gf = tn.task.flops / lat / 1e9 if tn.best is not None else 0.0
            base = tn.baseline.latency if tn.baseline and tn.baseline.error is None else math.inf
            self._p(f"{tn.task.name:<24} {_ms(lat):>11} {gf:>9.2f} {tn.done:>7} {tn.task.weight:>6} {_ms(base):>11}")
        self._p(f"estimated end-to-end latency: {_ms(objective)} ms")

    def on_start(self, sched: TaskScheduler, tuners: list[TaskTuner], objective: float) -> None:
        self._p(f"{len(tuners)} tasks, strategy {sched.strategy}; untuned estimate {_ms(objective)} ms")
        prior = sum(len(tn.prior) for tn in tuners)
        if prior:
            self._p(f"resuming: {prior} records already in the log count toward the trial budget")

    def on_round(self, sched: TaskScheduler, tuners: list[TaskTuner], task_index: int, trials: int,
                 objective: float) -> None:
        self.rounds += 1
        tn = tuners[task_index]
        self._p(f"[{trials:>5} trials] {tn.task.name:<24} best {_ms(_cost(tn.best, tn.baseline))} ms"
                f"  estimate {_ms(objective)} ms")
        if tn.rounds:
            self._p(f"        {tn.rounds[-1].describe()}")
        if self.rounds % self.table_every == 0:
            self.table(tuners, objective)

    def on_end(self, sched: TaskScheduler, tuners: list[TaskTuner], objective: float) -> None:
        self.table(tuners, objective)
        rounds = [r for tn in tuners for r in tn.rounds]
        if rounds:
            self._p(f"time over {len(rounds)} rounds: {RoundTimes.total(rounds).describe()}")

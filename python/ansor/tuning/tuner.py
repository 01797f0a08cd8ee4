"""The tuning loop for one task.

    SearchTask --sketches--> policy --next_batch--> [MeasureInput] --Measurer--> [MeasureResult]
        --> LOG.jsonl (append, fsync) --> policy.update + cost-model retrain --> ... until `trials`

`search="learned"` (the default) is Ansor's: evolutionary search over the sketches, guided by an
XGBoost cost model on program features (`search/features.py`, the C++ pass `ansor-extract-features`)
that is retrained after every measured batch; `search="random"` samples uniformly.

`pretrain(model, logs)` trains the cost model on earlier logs' records (other tasks too) before
the search starts, so its first batch is already guided (TVM's `load_log_file`).

Resuming: records of the same task and target already in the log count toward `trials`,
seed the best result, and are never measured again.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ansor import config
from ansor.space.schedule import Schedule, validate
from ansor.search.cost_model import CostModel, create_cost_model
from ansor.search.evolution import EvolutionarySearch
from ansor.measure.measurer import MeasureInput, Measurer, MeasureResult
from ansor.tuning.progress import ProgressCallback, RoundTimes
from ansor.tuning.records import (
    LogError,
    Record,
    RecordWriter,
    best_record,
    check_writable,
    iter_records,
    record_key,
)
from ansor.targets import generate_sketches
from ansor.search.policy import RandomSearch, SearchPolicy
from ansor.space.sketch import Sketch
from ansor.core.task import SearchTask
from ansor.targets import get_target
from ansor.tuning.options import TuningOptions

if TYPE_CHECKING:  # imported lazily: its worker pool is only needed by the learned search
    from ansor.search.features import FeatureExtractor

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TuneResult:
    task: SearchTask
    best: Record | None
    baseline: MeasureResult
    trials: int  # measured in this run
    errors: int  # failed in this run
    rounds: tuple[RoundTimes, ...] = ()  # where each round's time went (search, training, measurement)

    @property
    def unrunnable(self) -> bool:
        """Neither a working record nor a working untuned program (see `TaskTuner.unrunnable`)."""
        return self.best is None and self.baseline.error is not None

    @property
    def speedup(self) -> float:
        if self.best is None or self.baseline.error is not None:
            return math.nan
        return self.baseline.latency / self.best.latency


def _current_sketch(r: Record, names: dict[str, Sketch]) -> Sketch | None:
    """The sketch among today's (`names`) that `r`'s schedule is a valid annotation of, or None."""
    sk = names.get(r.schedule.sketch)
    if sk is None or (sk.rule != "skip" and validate(sk, r.schedule.values()) is not None):
        return None
    return sk


def _prior_records(log_path: Path | None, task: SearchTask, sketches: list[Sketch]) -> list[Record]:
    if log_path is None:
        return []
    names = {s.name: s for s in sketches}
    out = []
    for r in iter_records(log_path):
        if r.task.hash == task.hash and r.task.target != task.target:
            raise LogError(f"{log_path}: holds records of {task.name} for target '{r.task.target}', "
                           f"not '{task.target}': give another --log")
        if r.task.hash != task.hash:
            continue
        # (every record is re-validated: a rule change may give a sketch name to other knobs)
        if _current_sketch(r, names) is None:
            log.warning("%s: ignoring record %s: it is not a valid schedule of sketch %s (generator v%d)",
                        log_path, r.key, r.schedule.sketch, r.sketch_version)
            continue
        out.append(r)
    return out


def _make_policy(task: SearchTask, sketches: list[Sketch], prior: list[Record], measured: set[str], *,
                 opts: TuningOptions, seed: int, closers: list,
                 extractor: FeatureExtractor | None = None) -> SearchPolicy:
    if opts.search == "random":
        return RandomSearch(sketches, seed=seed, measured=measured)
    features_fn = opts.features_fn
    if features_fn is None:
        from ansor.search.features import FeatureExtractor

        if extractor is None:  # else shared (the task scheduler's), closed by its owner
            extractor = FeatureExtractor()
            closers.append(extractor.close)
        by_name = {s.name: s for s in sketches}

        def features_fn(schedules: list[Schedule]) -> list:
            return extractor.extract(task, [by_name[s.sketch].script(s.values(), lower_vectors=False)
                                            for s in schedules])

    model = create_cost_model(opts.cost_model, seed=seed)
    ok = [r for r in prior if r.error is None]
    options = {"mutation_weights": get_target(task.target).mutation_weights, **opts.search_options}
    policy = EvolutionarySearch(sketches, model, features_fn, seed=seed, measured=measured,
                                history=[(r.schedule, r.latency) for r in ok], crossover=opts.crossover, **options)
    if prior:  # resuming: retrain on what the log holds
        model.update([MeasureInput(task, r.schedule, r.script) for r in prior], [r.result for r in prior],
                     policy.features([r.schedule for r in prior]))
    return policy


def pretrain(model: CostModel, logs: Sequence[str | Path], *, target: str = "cpu",
             skip_tasks: Collection[str] = (), extractor: FeatureExtractor | None = None) -> tuple[int, int]:
    """Train `model` on the measured programs of earlier tuning logs before a search starts
    (TVM's `load_log_file`): (programs, tasks) learned from.

    Without it the XGBoost model scores at random until it has seen `few_shot_threshold`
    programs (16), so the first round is unguided; with it the model trains on these records
    from the start, and keeps them until it has `prior_until` (100) of its own
    (`XGBModel.update_prior`). Records of any
    task of the same `target` count (features are per statement, labels are normalized per task,
    so other tasks teach which loop structures run fast); `skip_tasks` are task hashes to leave
    out (a benchmark keeps the task it tunes out of its own prior). Each record's schedule is
    rendered again from its task's current sketches, as the search renders its candidates;
    records that no current sketch accepts are skipped. Raises `LogError` naming a log that
    does not exist or is not a log.
    """
    by_task: dict[str, list[Record]] = {}
    for path in logs:
        if not Path(path).is_file():
            raise LogError(f"{path}: no such log to pre-train the cost model on")
        for r in iter_records(path):
            if r.task.target == target and r.task.hash not in skip_tasks:
                by_task.setdefault(r.task.hash, []).append(r)
    from ansor.tuning.records import warn_if_mixed

    warn_if_mixed([r for recs in by_task.values() for r in recs], ", ".join(str(p) for p in logs))
    own = extractor is None
    if own:
        from ansor.search.features import FeatureExtractor

        extractor = FeatureExtractor()
    inputs: list[MeasureInput] = []
    results: list[MeasureResult] = []
    feats: list = []
    try:
        for recs in by_task.values():
            task = recs[0].task
            try:
                names = {s.name: s for s in generate_sketches(task)}
            except Exception as e:  # noqa: BLE001 - a task today's rules reject teaches nothing
                log.warning("pre-training: skipping %d records of %s: %s", len(recs), task.name, e)
                continue
            seen: set[str] = set()
            keep = []
            for r in recs:
                sk = _current_sketch(r, names)
                if sk is None or r.key in seen:
                    continue
                seen.add(r.key)  # a program measured twice (resumed runs) counts once
                keep.append((r, sk.script(r.schedule.values(), lower_vectors=False)))
            for (r, script), f in zip(keep, extractor.extract(task, [s for _, s in keep]), strict=True):
                if f is not None:
                    inputs.append(MeasureInput(task, r.schedule, script))
                    results.append(r.result)
                    feats.append(f)
    finally:
        if own:
            extractor.close()
    if inputs:
        model.update_prior(inputs, results, feats)
    n_tasks = len({i.task.hash for i in inputs})
    log.info("cost model pre-trained on %d programs of %d tasks", len(inputs), n_tasks)
    return len(inputs), n_tasks


class TaskTuner:
    """The tuning state of one task, advanced one measured batch at a time.

    `tune` drives one of these to a trial budget; the task scheduler (`scheduler.py`) drives one
    per task of a network, sharing a measurer, a log and a cost model. Call `start()` once (it
    measures the untuned program: the baseline and the verification reference), then `step(n)`.
    """

    def __init__(
        self,
        task: SearchTask,
        *,
        measurer: Measurer,
        log_path: str | Path | None = None,
        writer: RecordWriter | None = None,
        seed: int = 0,
        policy: SearchPolicy | None = None,
        callback: ProgressCallback | None = None,
        options: TuningOptions | None = None,
        extractor: FeatureExtractor | None = None,
    ) -> None:
        self.task = task
        self.measurer = measurer
        self.cb = callback or ProgressCallback()
        path = Path(log_path) if log_path is not None else None
        if path is not None and writer is None:
            check_writable(path)  # before reading a long compressed log only to refuse it
        self.sketches = generate_sketches(task)
        self._by_name = {s.name: s for s in self.sketches}
        self.prior = _prior_records(path, task, self.sketches)
        self.measured = {r.schedule.key() for r in self.prior}
        self._closers: list = []
        self.options = options or TuningOptions()
        self.policy = policy or _make_policy(
            task, self.sketches, self.prior, self.measured, opts=self.options, seed=seed,
            closers=self._closers, extractor=extractor)
        self._own_writer = writer is None and path is not None
        self.writer = writer if writer is not None else (RecordWriter(path) if path is not None else None)
        self.best: Record | None = best_record(self.prior)
        self.done = len(self.prior)  # measured trials, resumed ones included
        self.run_trials = 0
        self.errors = 0
        self.streak = 0
        self.exhausted = False
        self.baseline: MeasureResult | None = None
        self.rounds: list[RoundTimes] = []  # this run's rounds

    def start(self, trials: int) -> MeasureResult:
        """Measure the untuned program (baseline + reference) and announce a budget of `trials`."""
        self.baseline = self.measurer.baseline(self.task)
        self.cb.on_start(self.task, self.baseline, trials, len(self.prior))
        self._log_untuned()
        return self.baseline

    def _log_untuned(self) -> None:
        """Log the baseline as the `skip` sketch's trial, once per log: the untuned program competes.

        Tiny or memory-bound tasks (a layer norm, a 30x60 matmul) can run faster untouched than
        any tiled, parallel schedule; with the untuned program among the records the best record
        (and what `ansor.compile` builds) is never slower than untuned.
        """
        skip = self._by_name.get("skip")
        if skip is None or self.baseline is None or self.baseline.error is not None:
            return
        sch = Schedule.of(skip.name, {})
        if sch.key() in self.measured:
            return
        prov = self.measurer.provenance(self.task)
        rec = Record(record_key(self.task, sch), self.task, sch, skip.script({}), self.baseline,
                     provenance={**prov, "node": self.baseline.node} if self.baseline.node else prov)
        if self.writer is not None:
            self.writer.append(rec)
        self.measured.add(sch.key())
        self.policy.update([MeasureInput(self.task, sch, rec.script)], [self.baseline])
        if self.best is None or rec.latency < self.best.latency:
            self.best = rec
        self.done += 1
        self.run_trials += 1

    def step(self, n: int) -> list[Record]:
        """Measure one batch of up to `n` new candidates; [] (and `exhausted`) when none are left."""
        task, cb = self.task, self.cb
        t0 = time.perf_counter()
        schedules: list[Schedule] = self.policy.next_batch(n)
        t_search = time.perf_counter() - t0
        schedules = [s for s in schedules if s.key() not in self.measured]
        if not schedules:
            log.info("search space of %s exhausted after %d trials", task.name, self.done)
            self.exhausted = True
            return []
        inputs = [MeasureInput(task, s, self._by_name[s.sketch].script(s.values())) for s in schedules]
        batch: list[Record] = []
        prov = self.measurer.provenance(task)

        def log_result(i: int, res: MeasureResult) -> None:
            inp = inputs[i]
            rec = Record(record_key(task, inp.schedule), task, inp.schedule, inp.script, res,
                         provenance={**prov, "node": res.node} if res.node else prov)  # a cluster's runner
            if self.writer is not None:
                self.writer.append(rec)  # at once: a killed run loses at most the candidate in flight
            batch.append(rec)
            self.measured.add(inp.schedule.key())
            if rec.error is None and (self.best is None or rec.latency < self.best.latency):
                self.best = rec
            if rec.error is not None:
                self.errors += 1
                self.streak += 1
            else:
                self.streak = 0
            cb.on_result(task, self.done + len(batch), self.best, self.errors)

        t0 = time.perf_counter()
        results = self.measurer.measure(inputs, on_result=log_result)
        for i in range(len(batch), len(results)):  # measurers that report only at the end
            log_result(i, results[i])
        t_measure = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.policy.update(inputs, results)
        self.policy.retrain(inputs, results)
        t_train = time.perf_counter() - t0
        self.done += len(inputs)
        self.run_trials += len(inputs)
        stats = self.policy.last_stats
        times = RoundTimes(len(inputs), t_search, stats.get("features_s", 0.0), stats.get("predict_s", 0.0),
                           t_train, t_measure)
        self.rounds.append(times)
        log.info("%s round %d: %s", task.name, len(self.rounds), times.describe())
        cb.on_batch(task, self.done, self.best, self.errors, batch)
        cb.on_round(task, times)
        if self.streak >= config.VERBOSE_AFTER_ERRORS:
            cb.on_errors(task, batch)
        return batch

    @property
    def unrunnable(self) -> bool:
        """The untuned program failed and no record succeeded: every candidate would fail too
        (candidates are checked against the untuned program's outputs)."""
        return self.baseline is not None and self.result().unrunnable

    def result(self) -> TuneResult:
        assert self.baseline is not None, "start() was not called"
        return TuneResult(self.task, self.best, self.baseline, self.run_trials, self.errors, tuple(self.rounds))

    def close(self) -> None:
        if self.writer is not None and self._own_writer:
            self.writer.close()
        for close in self._closers:
            close()
        self._closers.clear()


def tune(
    task: SearchTask,
    *,
    trials: int,
    log_path: str | Path | None = None,
    seed: int = 0,
    measurer: Measurer | None = None,
    policy: SearchPolicy | None = None,
    callback: ProgressCallback | None = None,
    options: TuningOptions | None = None,
    **option_fields: Any,
) -> TuneResult:
    """Tune `task` until `trials` candidates are measured (counting ones resumed from the log).

    How the search runs is a `TuningOptions` (`options`), whose fields may also be given as
    keywords here (`batch_size=16, search="random", search_options={...}`, ...), replacing
    those of `options`.
    """
    opts = TuningOptions.of(options, **option_fields)
    batch_size = opts.batch_size
    own_measurer = measurer is None
    measurer = measurer or opts.create_measurer(task.target)
    tuner = TaskTuner(task, measurer=measurer, log_path=log_path, seed=seed, policy=policy, callback=callback,
                      options=opts)
    try:
        tuner.start(trials)
        if tuner.unrunnable:
            log.error("%s: the untuned program fails (%s: %s); candidates are checked against its outputs, "
                      "so none can be measured", task.name, tuner.baseline.error.value, tuner.baseline.error_msg)
        while tuner.done < trials and not tuner.exhausted and not tuner.unrunnable:
            tuner.step(min(batch_size, trials - tuner.done))
        tuner.cb.on_end(task, tuner.best, tuner.baseline)
    finally:
        tuner.close()
        if own_measurer:
            measurer.close()
    return tuner.result()

"""The tuning loop for one task.

    SearchTask --sketches--> policy --next_batch--> [MeasureInput] --Measurer--> [MeasureResult]
        --> LOG.jsonl (append, fsync) --> policy.update + cost-model retrain --> ... until `trials`

`search="learned"` (the default) is Ansor's: evolutionary search over the sketches, guided by an
XGBoost cost model on program features (`features.py`, the C++ pass `ansor-extract-features`)
that is retrained after every measured batch; `search="random"` samples uniformly.

Resuming: records of the same task and target already in the log count toward `trials`,
seed the best result, and are never measured again.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

from . import config
from .annotation import Schedule, validate
from .cost_model import CostModel, create_cost_model
from .evolution import EvolutionarySearch, FeaturesFn
from .measure import MeasureInput, MeasureResult, Measurer, RunOptions, create_measurer
from .progress import ProgressCallback
from .records import SKETCH_VERSION, LogError, Record, RecordWriter, best_record, iter_records, record_key
from .search import RandomSearch, SearchPolicy
from .sketch import Sketch
from .rules import generate_sketches
from .task import SearchTask

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TuneResult:
    task: SearchTask
    best: Record | None
    baseline: MeasureResult
    trials: int  # measured in this run
    errors: int  # failed in this run

    @property
    def speedup(self) -> float:
        if self.best is None or self.baseline.error is not None:
            return math.nan
        return self.baseline.latency / self.best.latency


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
        if r.sketch_version != SKETCH_VERSION:
            sk = names.get(r.schedule.sketch)
            if sk is None or (sk.stages and validate(sk, r.schedule.values()) is not None):
                log.warning("%s: ignoring record %s from sketch generator v%d", log_path, r.key, r.sketch_version)
                continue
        out.append(r)
    return out


def _make_policy(task: SearchTask, sketches: list[Sketch], prior: list[Record], measured: set[str], *,
                 search: str, seed: int, crossover: bool, cost_model: str | CostModel,
                 features_fn: FeaturesFn | None, closers: list, options: dict) -> SearchPolicy:
    if search == "random":
        return RandomSearch(sketches, seed=seed, measured=measured)
    if search != "learned":
        raise ValueError(f"unknown search {search!r} (expected 'learned' or 'random')")
    if features_fn is None:
        from .features import FeatureExtractor

        extractor = FeatureExtractor()
        closers.append(extractor.close)
        by_name = {s.name: s for s in sketches}

        def features_fn(schedules: list[Schedule]) -> list:
            return extractor.extract(task, [by_name[s.sketch].script(s.values(), lower_vectors=False)
                                            for s in schedules])

    model = create_cost_model(cost_model, seed=seed)
    ok = [r for r in prior if r.error is None]
    policy = EvolutionarySearch(sketches, model, features_fn, seed=seed, measured=measured,
                                history=[(r.schedule, r.latency) for r in ok], crossover=crossover, **options)
    if prior:  # resuming: retrain on what the log holds
        model.update([MeasureInput(task, r.schedule, r.script) for r in prior], [r.result for r in prior],
                     policy.features([r.schedule for r in prior]))
    return policy


def tune(
    task: SearchTask,
    *,
    trials: int,
    log_path: str | Path | None = None,
    seed: int = 0,
    batch_size: int = 64,
    measurer: Measurer | None = None,
    policy: SearchPolicy | None = None,
    run_options: RunOptions | None = None,
    callback: ProgressCallback | None = None,
    search: str = "learned",
    crossover: bool = True,
    cost_model: str | CostModel = "xgb",
    features_fn: FeaturesFn | None = None,
    search_options: dict | None = None,
) -> TuneResult:
    """Tune `task` until `trials` candidates are measured (counting ones resumed from the log).

    `search`: "learned" (evolutionary search + XGBoost cost model, Ansor's) or "random";
    `crossover=False` is the ablation switch of the evolutionary search; `cost_model` is "xgb",
    "random" or a `CostModel`; `features_fn` overrides program feature extraction (tests);
    `search_options` go to `EvolutionarySearch` (population, generations, ...).
    """
    cb = callback or ProgressCallback()
    path = Path(log_path) if log_path is not None else None
    sketches = generate_sketches(task)
    by_name = {s.name: s for s in sketches}
    prior = _prior_records(path, task, sketches)
    measured = {r.schedule.key() for r in prior}
    closers: list = []
    if policy is None:
        policy = _make_policy(task, sketches, prior, measured, search=search, seed=seed, crossover=crossover,
                              cost_model=cost_model, features_fn=features_fn, closers=closers,
                              options=dict(search_options or {}))
    own_measurer = measurer is None
    measurer = measurer or create_measurer(run_options)
    writer = RecordWriter(path) if path is not None else None
    best = best_record(prior)
    done, errors, run_trials, streak = len(prior), 0, 0, 0
    try:
        baseline = measurer.baseline(task)
        cb.on_start(task, baseline, trials, len(prior))
        while done < trials:
            schedules: list[Schedule] = policy.next_batch(min(batch_size, trials - done))
            schedules = [s for s in schedules if s.key() not in measured]
            if not schedules:
                log.info("search space of %s exhausted after %d trials", task.name, done)
                break
            inputs = [MeasureInput(task, s, by_name[s.sketch].script(s.values())) for s in schedules]
            batch: list[Record] = []

            def log_result(i: int, res: MeasureResult) -> None:
                nonlocal best, errors, streak
                inp = inputs[i]
                rec = Record(record_key(task, inp.schedule), task, inp.schedule, inp.script, res)
                if writer is not None:
                    writer.append(rec)  # at once: a killed run loses at most the candidate in flight
                batch.append(rec)
                measured.add(inp.schedule.key())
                if rec.error is None and (best is None or rec.latency < best.latency):
                    best = rec
                if rec.error is not None:
                    errors += 1
                    streak += 1
                else:
                    streak = 0
                cb.on_result(task, done + len(batch), best, errors)

            results = measurer.measure(inputs, on_result=log_result)
            for i in range(len(batch), len(results)):  # measurers that report only at the end
                log_result(i, results[i])
            policy.update(inputs, results)
            if isinstance(policy, EvolutionarySearch):  # Ansor retrains after every measured batch
                policy.model.update(inputs, results, policy.features([i.schedule for i in inputs]))
            done += len(inputs)
            run_trials += len(inputs)
            cb.on_batch(task, done, best, errors, batch)
            if streak >= config.VERBOSE_AFTER_ERRORS:
                cb.on_errors(task, batch)
        cb.on_end(task, best, baseline)
    finally:
        if writer is not None:
            writer.close()
        if own_measurer:
            measurer.close()
        for close in closers:
            close()
    return TuneResult(task, best, baseline, run_trials, errors)

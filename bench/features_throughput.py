"""Feature-extraction throughput: candidates/s for matmul-1024 schedules.

    matmul-1024 --rules.generate_sketches--> sketches --Sketch.sample--> N random scripts
      --features.featurize (in-process, one core)--> candidates/s
      --FeatureExtractor(n_workers) (worker processes)--> candidates/s, per core

Run: ``.venv/bin/python -m bench.features_throughput [--n 500] [--workers 0] [--baseline REV]
[--population WORKLOAD ...] [--results results/features/throughput.json]`` (workers 0: all cores).

Prints one JSON line per mode: the in-process A/B over `--rounds` alternating rounds on the same
scripts (`featurize` as it is, the same without shared prefixes (`split=False`), and, with
`--baseline REV`, `search/features.py` as it was at commit REV, loaded from git), each
sketch's candidates alone, the parse+apply/extract split of applying each script whole, worker
processes, and (`--cleanup-ab`) full canonicalization vs `ansor-feature-cleanup` before
extraction. `--population W` repeats the in-process A/B on the scripts a tuning round of
workload W asks features for (third round; synthetic latencies, so no compiler: the search's
population of parents and mutants rather than uniform samples). Rows of every variant are
checked equal. Numbers are medians of the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, alternate, host_meta, load_module, write_results


def _same(a: list, b: list) -> bool:
    return all((x is None and y is None) or (x is not None and y is not None and (x == y).all())
               for x, y in zip(a, b, strict=True))


def _baseline_module(rev: str) -> Any:
    """`python/ansor/search/features.py` as it was at commit `rev`, as a module of its own."""
    text = subprocess.run(["git", "show", f"{rev}:python/ansor/search/features.py"], cwd=ROOT,
                          check=True, capture_output=True, text=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(text)
    try:
        return load_module(Path(f.name), "features_baseline")
    finally:
        os.unlink(f.name)


def _per_s(n: int, ts: list[float]) -> dict[str, float]:
    """Median candidates/s over rounds (and the range) of `n` candidates timed `ts` seconds."""
    return {"median": round(n / statistics.median(ts), 1), "min": round(n / max(ts), 1),
            "max": round(n / min(ts), 1)}


def _timed_once(fn: Any, scripts: list) -> float:
    t0 = time.perf_counter()
    fn(scripts)
    return time.perf_counter() - t0


def _population(workload: str, n: int) -> list[str | None]:
    """The first `n` scripts the evolutionary search asks features for in the third round of a
    tuning run of `workload` whose measurements are synthetic (latency from the knob values, no
    compiler; the model trains after 64 programs), in the order asked: a population as the
    search scores it, with the parents and mutants of its generations, not uniform samples."""
    import math

    from ansor.core.task import create_task
    from ansor.frontend import workloads
    from ansor.measure.measurer import Measurer, MeasureResult
    from ansor.search.cost_model import XGBModel
    from ansor.tuning.options import TuningOptions
    from ansor.tuning.tuner import TaskTuner

    class Synthetic(Measurer):
        def baseline(self, task: Any) -> MeasureResult:
            return MeasureResult(costs=(1.0,))

        def measure(self, inputs: list, on_result: Any = None) -> list[MeasureResult]:
            return [MeasureResult(costs=(1e-3 * (1 + sum(abs(math.log2(max(v, 1)) - 4) for k, v in
                                                         i.schedule.values().items() if "unroll" not in k)),) * 2)
                    for i in inputs]

    task = create_task(workloads.get(workload))
    asked: list[list[str | None]] = []

    def features_fn(schedules: list) -> list:
        scripts = [by_name[s.sketch].script(s.values(), lower_vectors=False) for s in schedules]
        asked.append(scripts)
        return fx.extract(task, scripts)

    from ansor.search.features import FeatureExtractor

    with FeatureExtractor() as fx:
        opts = TuningOptions(cost_model=XGBModel(few_shot_threshold=64), batch_size=64, features_fn=features_fn)
        tuner = TaskTuner(task, measurer=Synthetic(), options=opts)
        by_name = {s.name: s for s in tuner.sketches}
        try:
            tuner.start(1000)
            for _ in range(2):
                tuner.step(64)
            asked.clear()
            tuner.step(64)
        finally:
            tuner.close()
    return max(asked, key=len)[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=500, help="candidates")
    ap.add_argument("--workers", type=int, default=0, help="worker processes (0: all cores)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds of each A/B")
    ap.add_argument("--baseline", metavar="REV", help="also time search/features.py as of this commit")
    ap.add_argument("--cleanup-ab", action="store_true",
                    help="also time full canonicalize,cse vs ansor-feature-cleanup before extraction")
    ap.add_argument("--results", metavar="PATH", help="write every mode's numbers here (JSON)")
    ap.add_argument("--population", metavar="WORKLOAD", action="append", default=[],
                    help="also A/B the scripts a tuning round's evolution asks features for (repeatable)")
    args = ap.parse_args()

    from ansor.core import mlir as core_mlir
    from ansor.core import native
    from ansor.core.task import create_task
    from ansor.frontend import workloads
    from ansor.search import features
    from ansor.targets.cpu import rules
    from mlir import ir

    task = create_task(workloads.matmul(1024, 1024, 1024))
    sketches = [s for s in rules.generate_sketches(task) if s.stages]
    rng = random.Random(args.seed)
    scripts: list[str | None] = []
    for i in range(args.n):
        sk = sketches[i % len(sketches)]
        scripts.append(sk.script(sk.sample(rng).values(), lower_vectors=False))
    modes: list[dict[str, Any]] = []

    def report(row: dict[str, Any]) -> None:
        modes.append(row)
        print(json.dumps(row), flush=True)

    # In-process A/B, alternating rounds on the same scripts.
    variants = {"featurize": lambda s: features.featurize(task, s),
                "featurize, no shared prefixes": lambda s: features.featurize(task, s, split=False)}
    if args.baseline:
        old = _baseline_module(args.baseline)
        variants[f"features.py at {args.baseline}"] = lambda s: old.featurize(task, s)
    rows = {name: fn(scripts[:8]) for name, fn in variants.items()}  # warm-up (library load, first context)
    rows = {name: fn(scripts) for name, fn in variants.items()}
    ref = rows["featurize"]
    same = {name: _same(ref, r) for name, r in rows.items()}

    def timed(fn: Any) -> Any:
        def run() -> float:
            t0 = time.perf_counter()
            fn(scripts)
            return time.perf_counter() - t0
        return run

    times = alternate({name: timed(fn) for name, fn in variants.items()}, args.rounds, settle_s=0.0)
    report({"mode": "in-process A/B (candidates/s, median of rounds)", "candidates": len(scripts),
            "ok": sum(r is not None for r in ref), "rounds": args.rounds,
            "candidates_per_s": {name: _per_s(len(scripts), ts) for name, ts in times.items()},
            "featurize_speedup_over": {name: round(statistics.median(
                b / a for a, b in zip(times["featurize"], ts, strict=True)), 3)
                for name, ts in times.items() if name != "featurize"},
            "rows_equal": same, "seconds": times})

    # Per sketch: a sketch's scripts share a parse, and (split) their common prefixes.
    for i, sk in enumerate(sketches):
        mine = [sc for j, sc in enumerate(scripts) if j % len(sketches) == i]
        ts = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            features.featurize(task, mine)
            ts.append(time.perf_counter() - t0)
        report({"mode": "in-process, one sketch", "sketch": sk.name, "rules": "+".join(sk.rules),
                "candidates": len(mine), "candidates_per_s": _per_s(len(mine), ts)})

    # Where the time goes without any cache (first 100 scripts), applying each script whole.
    native.register_everything()
    parts = {"parse+apply": 0.0, "extract": 0.0}
    sample = scripts[:100]
    with ir.Context(), ir.Location.unknown():
        for s in sample:
            op = core_mlir.parse_payload(task)  # a fresh payload per script (untimed)
            t = time.perf_counter()
            core_mlir.apply_script(op, s)
            parts["parse+apply"] += time.perf_counter() - t
            t = time.perf_counter()
            features.extract_from_module(op)
            parts["extract"] += time.perf_counter() - t
    report({"mode": "split_ms_per_candidate (uncached)",
            **{k: round(1e3 * v / len(sample), 3) for k, v in parts.items()}})

    if args.cleanup_ab:
        # Full `canonicalize,cse` (what ran before ansor-feature-cleanup) vs `features.CLEANUP`.
        pipelines = {"canonicalize,cse": "builtin.module(canonicalize,cse)", "feature-cleanup": features.CLEANUP}
        default = features.CLEANUP

        def with_cleanup(pipeline: str) -> Any:
            def run() -> float:
                features.CLEANUP = pipeline
                try:
                    t0 = time.perf_counter()
                    features.featurize(task, scripts)
                    return time.perf_counter() - t0
                finally:
                    features.CLEANUP = default
            return run

        ct = alternate({k: with_cleanup(v) for k, v in pipelines.items()}, args.rounds, settle_s=0.0)
        report({"mode": "cleanup A/B (in-process, median of rounds)", "rounds": args.rounds,
                **{f"{k} candidates_per_s": _per_s(len(scripts), v) for k, v in ct.items()},
                "speedup": round(statistics.median(ct["canonicalize,cse"]) / statistics.median(ct["feature-cleanup"]), 3)})

    for name in args.population:
        batch = _population(name, args.n)
        ptask = create_task(workloads.get(name))
        pvariants = {"featurize": lambda s, t=ptask: features.featurize(t, s),
                     "featurize, no shared prefixes": lambda s, t=ptask: features.featurize(t, s, split=False)}
        if args.baseline:
            pvariants[f"features.py at {args.baseline}"] = lambda s, t=ptask: old.featurize(t, s)
        prow = {k: fn(batch) for k, fn in pvariants.items()}
        pt = alternate({k: (lambda fn=fn, b=batch: _timed_once(fn, b)) for k, fn in pvariants.items()},
                       args.rounds, settle_s=0.0)
        report({"mode": "tuning-round population A/B (candidates/s, median of rounds)", "workload": name,
                "candidates": len(batch), "rounds": args.rounds,
                "candidates_per_s": {k: _per_s(len(batch), ts) for k, ts in pt.items()},
                "featurize_speedup_over": {k: round(statistics.median(
                    b / a for a, b in zip(pt["featurize"], ts, strict=True)), 3)
                    for k, ts in pt.items() if k != "featurize"},
                "rows_equal": {k: _same(prow["featurize"], r) for k, r in prow.items()}, "seconds": pt})

    n_workers = args.workers or os.cpu_count() or 1
    with features.FeatureExtractor(n_workers) as fx:
        fx.extract(task, scripts[: 2 * n_workers])  # start the workers
        ts, rows_w = [], []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            rows_w = fx.extract(task, scripts)
            ts.append(time.perf_counter() - t0)
    per_s = _per_s(len(scripts), ts)
    report({"mode": "workers", "workers": n_workers, "candidates": len(scripts), "candidates_per_s": per_s,
            "candidates_per_s_per_worker": round(per_s["median"] / n_workers, 1),
            "same_as_in_process": _same(ref, rows_w)})

    if args.results:
        path = write_results(Path(args.results), "features-throughput",
                             {**host_meta(threads=n_workers), "cpu_count": os.cpu_count()},
                             {"title": "Feature extraction throughput, matmul-1024 random candidates",
                              "settings": {"n": args.n, "seed": args.seed, "rounds": args.rounds,
                                           "workers": n_workers, "baseline": args.baseline},
                              "modes": modes})
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.features_throughput [--help]")
    main()

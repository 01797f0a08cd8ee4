"""Where a network tuning run's time goes, round by round, with two feature extractors.

    model.mlir --extract_tasks--> tasks --TaskScheduler.tune(trials), feature extraction by
      <variant> in P worker processes--> RoundTimes of every round (search: evolution, features,
      prediction; training; measurement) --> totals per variant --> JSON

Run: ``.venv/bin/python -m bench.round_times [--model bench/out/resnet18.mlir] [--trials 300]
[--baseline REV] [--results results/features/resnet18-rounds.json]``.

Each variant tunes the network from an empty log with the same seed: `search/features.py` as it
is, and (`--baseline REV`) as it was at commit REV, loaded from git. Both extract features the
same way, in `--workers` spawned processes (the bench's own pool, standing in for
`FeatureExtractor`'s workers, which import the installed module), so only the extraction code
differs. Measurement is real (the tuner's local measurer). The two runs follow each other (one
run each, not alternated): compare their features time per extracted candidate and the share of
each round the search takes, not their totals alone, since the searches drift apart once their
measured latencies differ.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from bench.common import ROOT, host_meta, write_results

_impl: Any = None  # the feature extraction module of this pool process


def _init(path: str | None) -> None:
    """Pool initializer: load `search/features.py` from `path` (None: the installed one)."""
    global _impl
    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # as the measurement workers do
    if path is None:
        from ansor.search import features

        _impl = features
    else:
        from bench.common import load_module

        _impl = load_module(Path(path), "features_variant")


def _featurize(task_json: str, scripts: list[str | None]) -> list:
    from ansor.core.task import SearchTask

    return _impl.featurize(SearchTask.from_json(task_json), scripts)


class PoolExtractor:
    """`FeatureExtractor`'s interface over a process pool running one `featurize`: a batch is split
    into one chunk per process."""

    path: str | None = None
    workers = 2
    calls: list[tuple[int, float]] = []  # noqa: RUF012 - (scripts, seconds) of every `extract`, per run

    def __init__(self, n_workers: int | None = None, **_: Any) -> None:
        self.pool = ProcessPoolExecutor(self.workers, initializer=_init, initargs=(self.path,))

    def extract(self, task: Any, scripts: list[str | None]) -> list:
        if not scripts:
            return []
        t0 = time.perf_counter()
        k = min(self.workers, len(scripts))
        bounds = [round(i * len(scripts) / k) for i in range(k + 1)]
        futures = [self.pool.submit(_featurize, task.to_json(), scripts[bounds[i]:bounds[i + 1]]) for i in range(k)]
        out = [row for f in futures for row in f.result()]
        PoolExtractor.calls.append((len(scripts), time.perf_counter() - t0))
        return out

    def close(self) -> None:
        self.pool.shutdown(wait=True)


def _run(variant: str, path: str | None, args: argparse.Namespace, tasks: list) -> dict[str, Any]:
    from ansor.search import features
    from ansor.tuning.progress import RoundTimes
    from ansor.tuning.scheduler import SchedulerTable, TaskScheduler

    PoolExtractor.path, PoolExtractor.workers, PoolExtractor.calls = path, args.workers, []
    real = features.FeatureExtractor
    features.FeatureExtractor = PoolExtractor  # type: ignore[misc] # what TaskScheduler.tune creates
    log = Path(tempfile.mkdtemp()) / "rounds.jsonl"
    t0 = time.perf_counter()
    try:
        res = TaskScheduler(tasks, seed=args.seed).tune(args.trials, log_path=log, callback=SchedulerTable(table_every=10**6))
    finally:
        features.FeatureExtractor = real  # type: ignore[misc]
    wall = time.perf_counter() - t0
    rounds = [(r.task.name, t) for r in res.results for t in r.rounds]
    total = RoundTimes.total([t for _, t in rounds])
    extracted = sum(n for n, _ in PoolExtractor.calls)
    extract_s = sum(s for _, s in PoolExtractor.calls)
    print(f"== {variant}: {len(rounds)} rounds, {res.trials} trials in {wall:.0f} s; {total.describe()}; "
          f"{extracted} candidates featurized in {extract_s:.1f} s = {extracted / max(extract_s, 1e-9):.0f}/s "
          f"with {args.workers} processes", flush=True)
    return {"wall_s": wall, "trials": res.trials, "estimated_latency_s": res.estimated_latency(),
            "total": total.to_json(), "featurized": extracted, "featurize_s": extract_s,
            "featurized_per_s": extracted / max(extract_s, 1e-9),
            "rounds": [{"task": name, **t.to_json()} for name, t in rounds]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "bench" / "out" / "resnet18.mlir"), help="a .mlir model")
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="feature extraction processes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--baseline", metavar="REV", help="also tune with search/features.py as of this commit")
    ap.add_argument("--results", metavar="PATH", help="write the rounds and totals here (JSON)")
    args = ap.parse_args()

    from ansor.frontend.partition import extract_tasks

    tasks = extract_tasks(Path(args.model).read_text(), name=Path(args.model).stem).tasks
    variants: dict[str, str | None] = {}
    tmp = None
    if args.baseline:
        text = subprocess.run(["git", "show", f"{args.baseline}:python/ansor/search/features.py"], cwd=ROOT,
                              check=True, capture_output=True, text=True).stdout
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as tmp:
            tmp.write(text)
        variants[f"features.py at {args.baseline}"] = tmp.name
    variants["features.py now"] = None
    out = {}
    try:
        for name, path in variants.items():
            out[name] = _run(name, path, args, tasks)
    finally:
        if tmp is not None:
            os.unlink(tmp.name)
    if args.results:
        path = write_results(Path(args.results), "round-times", {**host_meta(threads=args.workers)},
                             {"title": f"Round times of a {Path(args.model).stem} tuning run",
                              "settings": {"trials": args.trials, "workers": args.workers, "seed": args.seed,
                                           "baseline": args.baseline, "tasks": len(tasks)},
                              "variants": out})
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.round_times [--help]")
    main()

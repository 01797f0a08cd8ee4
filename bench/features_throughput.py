"""Feature-extraction throughput: candidates/s for matmul-1024 schedules.

    matmul-1024 --rules.generate_sketches--> sketches --Sketch.sample--> N random scripts
      --features.featurize (in-process, one core)--> candidates/s
      --FeatureExtractor(n_workers) (worker processes)--> candidates/s

Run: ``.venv/bin/python -m bench.features_throughput [--n 500] [--workers 0]`` (0: all cores).
Prints one JSON line per mode: all candidates in-process, each sketch's alone (a sketch's
scripts are parsed once and differ only in knob values, see `ansor.search.features`), the
parse+apply/extract split of applying each script whole, an A/B of the cleanup before
extraction (full canonicalization vs `ansor-feature-cleanup`, alternating rounds), and worker
processes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=500, help="candidates")
    ap.add_argument("--workers", type=int, default=0, help="worker processes (0: all cores)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds of the cleanup A/B")
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

    features.featurize(task, scripts[:4])  # warm-up (library load, first context)
    t0 = time.perf_counter()
    rows = features.featurize(task, scripts)
    dt = time.perf_counter() - t0
    ok = sum(r is not None for r in rows)
    print(
        json.dumps(
            {
                "mode": "in-process",
                "candidates": len(scripts),
                "ok": ok,
                "seconds": round(dt, 3),
                "candidates_per_s": round(len(scripts) / dt, 1),
            }
        )
    )

    # Per sketch: scripts of one sketch that differ only in knob values share one parse.
    for i, sk in enumerate(sketches):
        mine = [sc for j, sc in enumerate(scripts) if j % len(sketches) == i]
        t0 = time.perf_counter()
        features.featurize(task, mine)
        dt = time.perf_counter() - t0
        print(json.dumps({"mode": "in-process, one sketch", "sketch": sk.name, "rules": "+".join(sk.rules),
                          "candidates": len(mine), "candidates_per_s": round(len(mine) / dt, 1)}))

    # Where the in-process time goes (first 100 scripts), applying each script whole.
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
    print(
        json.dumps(
            {
                "mode": "split_ms_per_candidate (uncached)",
                **{k: round(1e3 * v / len(sample), 3) for k, v in parts.items()},
            }
        )
    )

    # A/B of the cleanup between script and extraction, same scripts, alternating rounds:
    # full `canonicalize,cse` (what ran before ansor-feature-cleanup) vs `features.CLEANUP`.
    variants = {"canonicalize,cse": "builtin.module(canonicalize,cse)", "feature-cleanup": features.CLEANUP}
    times: dict[str, list[float]] = {k: [] for k in variants}
    default = features.CLEANUP
    try:
        for _ in range(args.rounds):
            for name, pipeline in variants.items():
                features.CLEANUP = pipeline
                t0 = time.perf_counter()
                features.featurize(task, scripts)
                times[name].append(time.perf_counter() - t0)
    finally:
        features.CLEANUP = default
    med = {k: statistics.median(v) for k, v in times.items()}
    print(json.dumps({"mode": "cleanup A/B (in-process, median of rounds)", "rounds": args.rounds,
                      **{f"{k} candidates_per_s": round(len(scripts) / v, 1) for k, v in med.items()},
                      "speedup": round(med["canonicalize,cse"] / med["feature-cleanup"], 3)}))

    n_workers = args.workers or os.cpu_count() or 1
    with features.FeatureExtractor(n_workers) as fx:
        fx.extract(task, scripts[: 2 * n_workers])  # start the workers
        t0 = time.perf_counter()
        rows_w = fx.extract(task, scripts)
        dt = time.perf_counter() - t0
    same = all(
        (a is None and b is None) or (a is not None and b is not None and (a == b).all())
        for a, b in zip(rows, rows_w, strict=True)
    )
    print(
        json.dumps(
            {
                "mode": "workers",
                "workers": n_workers,
                "candidates": len(scripts),
                "seconds": round(dt, 3),
                "candidates_per_s": round(len(scripts) / dt, 1),
                "same_as_in_process": same,
            }
        )
    )


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.features_throughput [--help]")
    main()

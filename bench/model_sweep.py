"""Robustness sweep: models no issue lists (bench/sweep_models.py), each imported, tuned, compiled
and checked against PyTorch, with the failed candidates counted by kind.

    python -m bench.model_sweep [--models unet,gpt,...] [--trials 120] [--batch-size 8]
                                [--out bench/out/sweep]

Per model: `ansor import` (torch-mlir, own process) -> `extract_tasks` -> `TaskScheduler.tune`
(learned search, gradient) -> `ansor.compile` -> max |ours - PyTorch| on seeded inputs (PyTorch in
its own process, `frontend.torch_reference`). The table lists tasks, tuning seconds, the estimate
against the untuned one, failed candidates by error kind, and the numeric difference. A sweep of
this kind found the six faults listed in the README ("Models beyond the built-in ones").
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np

#: The sweep's models, given to `ansor import` by path (`FILE:Class`).
SWEEP_MODELS = Path(__file__).resolve().with_name("sweep_models.py")


def _inputs(shapes: list[str]) -> list[np.ndarray]:
    from ansor.frontend.torch_import import parse_input_shape

    rng = np.random.default_rng(0)
    out = []
    for text in shapes:
        shape, dtype = parse_input_shape(text)
        if dtype.startswith("i"):
            out.append(rng.integers(0, 8, size=shape).astype(np.int64 if dtype == "i64" else np.int32))
        else:
            out.append(rng.standard_normal(shape).astype(np.float32))
    return out


def main() -> int:
    from bench.sweep_models import SWEEP

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(SWEEP))
    ap.add_argument("--trials", type=int, default=120)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--out", default="bench/out/sweep")
    a = ap.parse_args()

    import ansor
    from ansor.frontend import torch_import as frontend
    from ansor.frontend.partition import extract_tasks
    from ansor.frontend.torch_import import parse_input_shape
    from ansor.tuning.records import load_records
    from ansor.tuning.scheduler import SchedulerTable, TaskScheduler

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in a.models.split(","):
        if name not in SWEEP:
            print(f"unknown sweep model '{name}' (known: {', '.join(SWEEP)})", file=sys.stderr)
            return 2
        cls, shapes = SWEEP[name]
        spec = f"{SWEEP_MODELS}:{cls}"
        parsed = [parse_input_shape(s) for s in shapes]
        text = frontend.import_file(spec, [s for s, _ in parsed], input_dtypes=[d for _, d in parsed])
        mlir = out / f"{name}.mlir"
        mlir.write_text(text)
        net = extract_tasks(mlir, name=name)
        log = out / f"{name}.jsonl"
        log.unlink(missing_ok=True)
        t0 = time.perf_counter()
        res = TaskScheduler(net.tasks).tune(a.trials, batch_size=a.batch_size, log_path=log,
                                            callback=SchedulerTable(table_every=10**9))
        seconds = time.perf_counter() - t0
        errors = collections.Counter(str(getattr(r.error, "value", r.error)) for r in load_records(log) if r.error is not None)
        xs = _inputs(shapes)
        got = ansor.compile(mlir, log=log)(*xs)
        got = got if isinstance(got, tuple) else (got,)
        ref = frontend.torch_reference(spec, xs)
        diff = max(float(np.max(np.abs(np.asarray(g, dtype=np.float64) - r))) for g, r in zip(got, ref, strict=True))
        untuned = float(sum(t.weight * (tr.baseline.latency if tr.baseline else 0.0)
                            for t, tr in zip(net.tasks, res.results, strict=True)))
        rows.append((name, len(net.tasks), seconds, res.estimated_latency(), untuned, dict(errors), diff))
        print(f"{name}: {len(net.tasks)} tasks, {seconds:.0f} s, estimate {res.estimated_latency() * 1e3:.3f} ms, "
              f"errors {dict(errors)}, max |diff| {diff:.2e}", flush=True)

    print(f"\n{'model':<10} {'tasks':>5} {'tune s':>7} {'estimate ms':>12} {'naive loops ms':>14} {'max |diff|':>11}  failed candidates")
    for name, n, s, est, unt, errs, diff in rows:
        print(f"{name:<10} {n:>5} {s:>7.0f} {est * 1e3:>12.3f} {unt * 1e3:>14.3f} {diff:>11.2e}  "
              f"{', '.join(f'{k} {v}' for k, v in sorted(errs.items())) or '-'}")
    return 0


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.model_sweep [--help]")
    sys.exit(main())

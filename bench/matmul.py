"""Benchmark: tune matmul-1024 (fp32) and compare with numpy (OpenBLAS) and untuned MLIR.

    python bench/matmul.py [--trials 200] [--size 1024] [--log bench/out/matmul.jsonl] [--threads N]

Prints the machine, then latency / GFLOP/s of tuned, untuned MLIR and numpy measured in this
run with the same thread count, and the ratios tuned/numpy (GFLOP/s) and tuned-over-untuned speedup.
The log resumes: a second run with the same --log only measures the missing trials.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log", default=None)
    args = ap.parse_args()
    # numpy/OpenBLAS must use the same number of threads as the tuned program.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)

    import ansor
    import numpy as np
    from ansor import workloads
    from ansor.measure import RunOptions, make_inputs
    from ansor.progress import TableProgress

    n = args.size
    log = Path(args.log or f"bench/out/matmul-{n}.jsonl")
    log.parent.mkdir(parents=True, exist_ok=True)
    text = workloads.matmul(n, n, n)
    task = ansor.create_task(text, name=f"matmul-{n}")
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    print(f"machine: {platform.node()} | {cpu} | {os.cpu_count()} cores | threads used: {args.threads}")
    res = ansor.tune(task, trials=args.trials, log_path=log, seed=args.seed,
                     run_options=RunOptions(threads=args.threads), callback=TableProgress())

    tuned = ansor.compile(text, log=log, threads=args.threads)
    untuned = ansor.compile(text, threads=args.threads)
    a, b = make_inputs(task)
    np.testing.assert_allclose(tuned(a, b), a @ b, rtol=1e-3, atol=1e-2)

    def best_of(fn, reps: int = 7) -> float:
        fn()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return min(ts)

    t_tuned = min(tuned.time(a, b, number=10) for _ in range(5))
    t_untuned = untuned.time(a, b, number=1)
    t_numpy = best_of(lambda: a @ b)
    gf = lambda t: task.flops / t / 1e9
    print(f"\n{'program':<14} {'latency':>11} {'GFLOP/s':>9}")
    for name, t in (("ansor tuned", t_tuned), ("untuned MLIR", t_untuned), ("numpy", t_numpy)):
        print(f"{name:<14} {t * 1e3:>8.3f} ms {gf(t):>9.2f}")
    print(f"\ntuned / numpy GFLOP/s: {gf(t_tuned) / gf(t_numpy):.3f}   "
          f"speedup over untuned: {t_untuned / t_tuned:.1f}x   trials: {args.trials} ({res.errors} failed this run)")
    if res.best is not None:
        print(f"best schedule: {res.best.schedule.values()}")


if __name__ == "__main__":
    main()

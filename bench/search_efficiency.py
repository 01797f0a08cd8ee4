"""Benchmark: learned (evolutionary + XGBoost) vs random search, best-so-far latency vs trials.

    python -m bench.search_efficiency [--trials 200] [--seeds 0,1,2] [--workloads matmul-1024,...]
                                      [--no-crossover] [--pretrain LOG,...] [--out bench/out/search]

For every workload and seed, tunes twice with the same seed (`search="random"` and
`search="learned"`, each with its own resumable log), then reports per workload: random search's
best at the full budget, the first trial at which learned search reached it, and learned/random
best latency at the full budget (medians over seeds), and both searches' best as a share of the
CPU's measured FMA peak (`ansor.targets.cpu.lowering.fma_peak_gflops`, all cores): where random
search already runs near the peak, no search can be much faster. Plots best-so-far curves to OUT/curves.png.
Defaults are the issue's: matmul-1024, C2D (1,56,56,64,64,1,1,0), T2D (1,8,8,256,128,4,2,1).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from pathlib import Path

DEFAULT = "matmul-1024,c2d-1x56x56x64x64x1x1x0,t2d-1x8x8x256x128x4x2x1"


def main() -> None:
    from bench.common import add_search_args, best_so_far, tune_kwargs

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--workloads", default=DEFAULT)
    ap.add_argument("--no-crossover", action="store_true")
    ap.add_argument("--out", default="bench/out/search")
    ap.add_argument("--pretrain", default="",
                    help="comma-separated logs to pre-train the learned search's cost model on "
                         "(the tuned workload's own records are left out); its logs are tagged 'learned-pre'")
    add_search_args(ap)
    args = ap.parse_args()

    import ansor
    from ansor.frontend import workloads
    from ansor.targets.cpu.lowering import fma_peak_gflops
    from ansor.tuning.progress import TableProgress
    from ansor.tuning.tuner import pretrain

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    peak = fma_peak_gflops(threads=os.cpu_count())  # before tuning starts OpenMP in this process
    seeds = [int(s) for s in args.seeds.split(",")]
    pretrain_logs = [p for p in args.pretrain.split(",") if p]
    curves: dict[tuple[str, str, int], list[float]] = {}
    for name in args.workloads.split(","):
        task = ansor.create_task(workloads.get(name), name=name)
        for seed in seeds:
            for search in ("random", "learned"):
                tag = search
                kw = tune_kwargs(args, seed)
                if search == "learned":
                    tag += "-nox" if args.no_crossover else ""
                    if pretrain_logs:
                        tag += "-pre"
                        n, n_tasks = pretrain(kw["cost_model"], pretrain_logs, target=task.target,
                                              skip_tasks={task.hash})
                        print(f"cost model pre-trained on {n} programs of {n_tasks} other tasks")
                log = out / f"{name}.{tag}.s{seed}.jsonl"
                ansor.tune(task, trials=args.trials, log_path=log, seed=seed, search=search,
                           crossover=not args.no_crossover, callback=TableProgress(), **kw)
                curves[(name, search, seed)] = best_so_far(log)

    print(f"\nmachine: {os.uname().nodename}, {os.cpu_count()} cores, f32 FMA peak {peak:.0f} GFLOP/s; "
          f"{args.trials} trials; seeds {seeds}")
    print(f"{'workload':<30} {'random@N (ms)':>14} {'learned reaches it at':>22} {'learned@N / random@N':>21} "
          f"{'random@N % peak':>16} {'learned@N % peak':>17}")
    for name in args.workloads.split(","):
        flops = ansor.create_task(workloads.get(name), name=name).flops
        reach, ratio, rnd, lrn = [], [], [], []
        for seed in seeds:
            r, lcurve = curves[(name, "random", seed)], curves[(name, "learned", seed)]
            target = r[-1]
            rnd.append(target)
            lrn.append(lcurve[-1])
            hit = next((i + 1 for i, v in enumerate(lcurve) if v <= target), math.inf)
            reach.append(hit)
            ratio.append(lcurve[-1] / target)
        med_hit = statistics.median(reach)
        print(f"{name:<30} {statistics.median(rnd) * 1e3:>14.3f} "
              f"{(f'{med_hit:.0f} trials') if math.isfinite(med_hit) else 'not reached':>22} "
              f"{statistics.median(ratio):>21.3f} "
              f"{flops / statistics.median(rnd) / 1e9 / peak:>16.0%} {flops / statistics.median(lrn) / 1e9 / peak:>17.0%}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        names = args.workloads.split(",")
        fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4), squeeze=False)
        for ax, name in zip(axes[0], names, strict=True):
            for (n, search, seed), c in curves.items():
                if n == name:
                    ax.plot(range(1, len(c) + 1), [v * 1e3 for v in c], color="C0" if search == "random" else "C1",
                            alpha=0.8, label=f"{search} s{seed}")
            ax.set_title(name)
            ax.set_xlabel("measured trials")
            ax.set_ylabel("best latency (ms)")
            ax.set_yscale("log")
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "curves.png", dpi=110)
        print(f"plot: {out / 'curves.png'}")
    except ImportError:
        print("matplotlib not installed: no plot (pip install -e '.[bench]')")


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.search_efficiency [--help]")
    main()

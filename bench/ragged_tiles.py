"""Benchmark: ragged register tiles (peeled partial tiles) against Ansor's exact splits.

    python -m bench.ragged_tiles [--trials 96] [--seed 0] [--workloads a,b] [--rounds 7]
                                 [--threads N] [--out bench/out/ragged]

Per workload, tunes twice with the same seed and budget: `exact` (the evolutionary search with
`ragged_prob=0`: every tile size divides the level above, Ansor's space) and `ragged` (the
default: a register tile on a space loop may leave a partial tile, which is peeled). Both logs
are resumable. Then compiles both best programs, checks them against each other and against
PyTorch, and times exact, ragged and PyTorch (eager, same threads) in alternating rounds (each
round: best of 5 loops of ~0.1 s; ours in a fresh process in their native timing loop, as the
tuner times them, PyTorch in its own, bench/torch_ops.py), reporting the median per side and the
median of the per-round ratios, so host drift hits all three alike. The tuner's own best
latencies (one per run, the search's result) are reported too. Also reports how many measured
candidates of the ragged run had a ragged tile, and whether its best one does.

Defaults: the token count of ViT-B (197), ResNet-18's 7x7 and 14x14 3x3 convolutions, and
matmul-1024 as a power-of-two control.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
from pathlib import Path

DEFAULT = "matmul-197x768x768,c2d-1x7x7x512x512x3x1x1,c2d-1x14x14x256x256x3x1x1,matmul-1024"


def main() -> None:
    from bench.common import add_search_args, ratio, retime_in_child, tune_kwargs

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=96)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workloads", default=DEFAULT)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", default="bench/out/ragged")
    add_search_args(ap)
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    out = Path(args.out)

    import ansor
    from ansor.frontend import workloads
    from ansor.measure.measurer import RunOptions
    from ansor.targets import generate_sketches
    from ansor.targets.cpu.sketch import is_ragged
    from ansor.tuning.progress import TableProgress

    out.mkdir(parents=True, exist_ok=True)
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), "?")
    header = (f"machine: {platform.node()} | {cpu} | {os.cpu_count()} cores | threads: {args.threads} | "
              f"{args.trials} trials per run, seed {args.seed}, "
              f"batch {args.batch_size}, population {args.population}, generations {args.generations}")
    print(header, flush=True)
    rows = []
    for name in args.workloads.split(","):
        task = ansor.create_task(workloads.get(name), name=name)
        best_tuned = {}
        for variant in ("exact", "ragged"):
            kw = tune_kwargs(args, args.seed)
            if variant == "exact":
                kw["search_options"] = {**kw["search_options"], "ragged_prob": 0.0}
            print(f"== {name}: {variant}", flush=True)
            res = ansor.tune(task, trials=args.trials, log_path=out / f"{name}.{variant}.jsonl", seed=args.seed,
                             run_options=RunOptions(threads=args.threads), callback=TableProgress(), **kw)
            best_tuned[variant] = res.best.latency if res.best else float("nan")
        sketches = {s.name: s for s in generate_sketches(task)}
        recs = [r for r in ansor.load_records(out / f"{name}.ragged.jsonl") if r.schedule.sketch in sketches]

        def ragged(r, sketches=sketches) -> bool:
            return any(is_ragged(sp, r.schedule.values()) for sp in sketches[r.schedule.sketch].splits)

        n_ragged = sum(ragged(r) for r in recs)
        best = min(recs, key=lambda r: r.latency)
        # Timing in a fresh process: this one has run the tuner (XGBoost's OpenMP runtime beside
        # ours, feature workers), and re-timings here read up to 1.7x slow, unevenly.
        timed = retime_in_child(name, {v: [out / f"{name}.{v}.jsonl"] for v in ("exact", "ragged")},
                                args.rounds, args.threads, out / "tmp")
        times = timed["times"]
        med = {v: statistics.median(t) for v, t in times.items()}
        gain, vs_torch = ratio(times, "exact", "ragged"), ratio(times, "torch", "ragged")
        rows.append((name, best_tuned["exact"], best_tuned["ragged"], med["exact"], med["ragged"], gain,
                     med.get("torch", float("nan")), vs_torch, f"{n_ragged}/{len(recs)}",
                     "yes" if ragged(best) else "no", timed["agree"]))
        print(f"{name}: exact {med['exact'] * 1e3:.3f} ms, ragged {med['ragged'] * 1e3:.3f} ms "
              f"(x{gain:.2f}), torch {med.get('torch', float('nan')) * 1e3:.3f} ms", flush=True)

    lines = [header, "",
             ("| workload | tuner: exact / ragged (ms) | exact (ms) | ragged (ms) | exact / ragged | PyTorch (ms) "
              "| PyTorch / ragged | ragged candidates | best is ragged | outputs agree |"),
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, te, tr, e, r, g, t, vt, nr, br, ok in rows:
        lines.append(f"| {name} | {te * 1e3:.3f} / {tr * 1e3:.3f} | {e * 1e3:.3f} | {r * 1e3:.3f} | {g:.2f} "
                     f"| {t * 1e3:.3f} | {vt:.2f} | {nr} | {br} | {ok} |")
    lines.append("")
    lines.append(f"re-timed in a fresh process; ratios: median over {args.rounds} alternating rounds of each round's ratio")
    table = "\n".join(lines)
    (out / "ragged.md").write_text(table + "\n")
    print("\n" + table)


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.ragged_tiles [--help]")
    main()

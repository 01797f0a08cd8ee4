"""Benchmark: ragged register tiles (peeled partial tiles) against Ansor's exact splits.

    python bench/ragged_tiles.py [--trials 96] [--seed 0] [--workloads a,b] [--rounds 7]
                                 [--threads N] [--out bench/out/ragged]

Per workload, tunes twice with the same seed and budget: `exact` (the evolutionary search with
`ragged_prob=0`: every tile size divides the level above, Ansor's space) and `ragged` (the
default: a register tile on a space loop may leave a partial tile, which is peeled). Both logs
are resumable. Then compiles both best programs, checks them against each other and against
PyTorch, and times exact, ragged and PyTorch (eager, same threads) in alternating rounds in this
process (each round: best of 5 loops of ~0.1 s), reporting the median per side and the median of
the per-round ratios, so host drift hits all three alike. Also reports how many measured
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
import time
from pathlib import Path

from search_args import add_search_args, tune_kwargs

sys.path.insert(0, str(Path(__file__).resolve().parent))

DEFAULT = "matmul-197x768x768,c2d-1x7x7x512x512x3x1x1,c2d-1x14x14x256x256x3x1x1,matmul-1024"


def best_of(fn, number: int, repeats: int = 5) -> float:
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        ts.append((time.perf_counter() - t0) / number)
    return min(ts)


def calls_for(fn, seconds: float = 0.1) -> int:
    t0 = time.perf_counter()
    fn()
    return max(1, int(seconds / max(time.perf_counter() - t0, 1e-6)))


def main() -> None:
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

    import ansor
    import numpy as np
    import torch
    from ansor import workloads
    from ansor.measure import RunOptions, check_outputs, make_inputs
    from ansor.progress import TableProgress
    from ansor.rules import generate_sketches
    from ansor.sketch import is_ragged
    from torch_ops import prepare

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), "?")
    header = (f"machine: {platform.node()} | {cpu} | {os.cpu_count()} cores | threads: {args.threads} | "
              f"torch {torch.__version__} | {args.trials} trials per run, seed {args.seed}, "
              f"batch {args.batch_size}, population {args.population}, generations {args.generations}")
    print(header, flush=True)
    rows = []
    for name in args.workloads.split(","):
        text = workloads.get(name)
        task = ansor.create_task(text, name=name)
        fns = {}
        for variant in ("exact", "ragged"):
            kw = tune_kwargs(args, args.seed)
            if variant == "exact":
                kw["search_options"] = {**kw["search_options"], "ragged_prob": 0.0}
            log = out / f"{name}.{variant}.jsonl"
            print(f"== {name}: {variant}", flush=True)
            ansor.tune(task, trials=args.trials, log_path=log, seed=args.seed,
                       run_options=RunOptions(threads=args.threads), callback=TableProgress(), **kw)
            fns[variant] = ansor.compile(text, log=log, threads=args.threads)
        sketches = {s.name: s for s in generate_sketches(task)}
        recs = [r for r in ansor.load_records(out / f"{name}.ragged.jsonl") if r.schedule.sketch in sketches]

        def ragged(r) -> bool:
            return any(is_ragged(sp, r.schedule.values()) for sp in sketches[r.schedule.sketch].splits)

        n_ragged = sum(ragged(r) for r in recs)
        best = min(recs, key=lambda r: r.latency)
        inputs = workloads.valid_inputs(name, make_inputs(task))
        ye, yr = (np.asarray(fns[v](*inputs)) for v in ("exact", "ragged"))
        agree = check_outputs([yr], [ye], 1e-3, 1e-3)
        runs = {v: (lambda f=fns[v]: f(*inputs)) for v in ("exact", "ragged")}
        prep = prepare(name, inputs)
        if prep is not None:
            run, back = prep
            with torch.no_grad():
                agree = agree or check_outputs([yr], [back(run()).astype(np.float32)], 1e-3, 1e-3)
            runs["torch"] = run
        number = {v: calls_for(f) for v, f in runs.items()}
        times: dict[str, list[float]] = {v: [] for v in runs}
        with torch.no_grad():
            for _ in range(args.rounds):
                for v, f in runs.items():
                    times[v].append(best_of(f, number[v]))
        med = {v: statistics.median(t) for v, t in times.items()}
        gain = statistics.median(e / r for e, r in zip(times["exact"], times["ragged"], strict=True))
        vs_torch = (statistics.median(t / r for t, r in zip(times["torch"], times["ragged"], strict=True))
                    if "torch" in times else float("nan"))
        rows.append((name, med["exact"], med["ragged"], gain, med.get("torch", float("nan")), vs_torch,
                     f"{n_ragged}/{len(recs)}", "yes" if ragged(best) else "no", agree or "yes"))
        print(f"{name}: exact {med['exact'] * 1e3:.3f} ms, ragged {med['ragged'] * 1e3:.3f} ms "
              f"(x{gain:.2f}), torch {med.get('torch', float('nan')) * 1e3:.3f} ms", flush=True)

    lines = [header, "",
             "| workload | exact (ms) | ragged (ms) | exact / ragged | PyTorch (ms) | PyTorch / ragged "
             "| ragged candidates | best is ragged | outputs agree |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, e, r, g, t, vt, nr, br, ok in rows:
        lines.append(f"| {name} | {e * 1e3:.3f} | {r * 1e3:.3f} | {g:.2f} | {t * 1e3:.3f} | {vt:.2f} | {nr} | {br} | {ok} |")
    lines.append("")
    lines.append(f"ratios: median over {args.rounds} alternating rounds of each round's ratio")
    table = "\n".join(lines)
    (out / "ragged.md").write_text(table + "\n")
    print("\n" + table)


if __name__ == "__main__":
    main()

"""Benchmark: tune Ansor's single-op suite (+ subgraphs) with an equal trial budget; compare with
untuned MLIR and PyTorch CPU (eager, same threads).

    python bench/suite.py [--trials 200] [--only c2d,t2d] [--threads N] [--out bench/out/suite]

Per workload: tune (log in OUT/NAME.jsonl, resumable; the tuner verified every candidate
against the untuned program), then `retime.py` compiles the best schedule in a fresh process,
checks it against PyTorch's output and times both in 3 alternating rounds (PyTorch in its own
process, `torch_ops.py`; medians reported); the untuned latency is the one the tuner measured. Writes OUT/suite.md (a table) and prints it; the last line is the
geometric-mean speedup over PyTorch.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import os
import platform
import statistics
import sys
from pathlib import Path

from search_args import add_search_args, tune_kwargs

sys.path.insert(0, str(Path(__file__).resolve().parent))


def write_table(out: Path, header: str, rows: list[tuple]) -> str:
    """Write OUT/suite.md from the rows so far (the file is current after every workload)."""
    lines = [header, "",
             "| workload | GFLOP | tuned ms | GFLOP/s | vs untuned | PyTorch ms | vs PyTorch | same result |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    speedups = []
    for name, flops, tt, tu, tp, agree in rows:
        sp = tp / tt if math.isfinite(tp) else math.nan
        if math.isfinite(sp):
            speedups.append(sp)
        lines.append(f"| {name} | {flops / 1e9:.3f} | {tt * 1e3:.3f} | {flops / tt / 1e9:.1f} | {tu / tt:.1f}x | "
                     f"{tp * 1e3:.3f} | {sp:.2f}x | {agree} |")
    geo = math.exp(sum(math.log(s) for s in speedups) / len(speedups)) if speedups else math.nan
    lines += ["", f"geometric-mean speedup over PyTorch: {geo:.2f}x over {len(speedups)} workloads"]
    (out / "suite.md").write_text("\n".join(lines) + "\n")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--only", default="", help="comma-separated workload names or families")
    ap.add_argument("--out", default="bench/out/suite")
    ap.add_argument("--seed", type=int, default=0)
    add_search_args(ap)
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)

    import ansor
    from ansor import workloads
    from ansor.measure import RunOptions
    from ansor.progress import TableProgress
    from retime import retime_in_child
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = workloads.suite()
    if args.only:
        keys = args.only.split(",")
        names = [n for n in names if n in keys or n.split("-")[0] in keys]
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("model name")), "?")
    header = (f"machine: {platform.node()} | {cpu} | {os.cpu_count()} cores | threads: {args.threads} | "
              f"torch {importlib.metadata.version('torch')} | trials per workload: {args.trials}")
    print(header, flush=True)
    rows = []
    for name in names:
        text = workloads.get(name)
        task = ansor.create_task(text, name=name)
        res = ansor.tune(task, trials=args.trials, log_path=out / f"{name}.jsonl", seed=args.seed,
                         run_options=RunOptions(threads=args.threads), callback=TableProgress(),
                         **tune_kwargs(args, args.seed))
        # re-timed in a fresh process, PyTorch in its own: this one ran the tuner (XGBoost's OpenMP
        # runtime beside ours), which slows timings here 1.3-1.7x, unevenly
        timed = retime_in_child(name, {"tuned": [out / f"{name}.jsonl"]}, 3, args.threads, out / "tmp")
        t_tuned = statistics.median(timed["times"]["tuned"])
        t_untuned = res.baseline.latency if res.baseline.error is None else math.nan
        t_torch = statistics.median(timed["times"]["torch"]) if "torch" in timed["times"] else math.nan
        agree = timed["agree"] if "torch" in timed["times"] else "-"
        rows.append((name, task.flops, t_tuned, t_untuned, t_torch, agree))
        print(f"{name}: tuned {t_tuned * 1e3:.3f} ms, untuned {t_untuned * 1e3:.3f} ms, torch {t_torch * 1e3:.3f} ms",
              flush=True)
        write_table(out, header, rows)

    print(write_table(out, header, rows))


if __name__ == "__main__":
    main()

"""Benchmark: tune Ansor's single-op suite (+ subgraphs) with an equal trial budget; compare with
PyTorch CPU eager (same threads) and, as a secondary column, the naive loops.

    python -m bench.suite [--trials 200] [--only c2d,t2d] [--threads N] [--rounds 5] [--out bench/out/suite]
                          [--results results/suite.json] [--no-naive] [--workloads NAME,... --title T]

Per workload: tune (log in OUT/NAME.jsonl, resumable; the tuner verified every candidate
against the naive loops), then bench.retime compiles the best schedule in a fresh process, checks
it against PyTorch's output and times, in --rounds (>= 5) alternating rounds: our compiled
callable called from Python (timed the way PyTorch eager is), the same kernel in its native
loop, PyTorch eager (one-op forms, its own process, bench/torch_ops.py) and the naive loops. The
table (printed, OUT/suite.md, and results/suite.json for tools/render_results.py, rewritten after
every workload) holds medians over the rounds with their range; its last lines are the geometric
means of PyTorch over ours, over all workloads and over those of at least 50 µs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path


def main() -> None:
    from bench.common import (
        CALL,
        NATIVE,
        TORCH,
        add_search_args,
        host_line,
        host_meta,
        render,
        results_path,
        retime_in_child,
        suite_entry,
        tune_kwargs,
        write_results,
    )

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--only", default="", help="comma-separated workload names or families")
    ap.add_argument("--workloads", default="", help="comma-separated workload names to run instead of the suite "
                    "(any built-in, e.g. softmax-2048x768,rmsnorm-256x4096)")
    ap.add_argument("--title", default="", help="the table's title (default: the suite's)")
    ap.add_argument("--rounds", type=int, default=5, help="alternating timing rounds per workload (>= 5)")
    ap.add_argument("--no-naive", action="store_true", help="do not time the naive loops (slow for big convolutions)")
    ap.add_argument("--out", default="bench/out/suite")
    ap.add_argument("--results", help="results file (default results/suite.json)")
    ap.add_argument("--seed", type=int, default=0)
    add_search_args(ap)
    args = ap.parse_args()
    if args.rounds < 5:
        ap.error("--rounds: tables hold medians over >= 5 alternating rounds")
    os.environ["OMP_NUM_THREADS"] = str(args.threads)

    import ansor
    from ansor.frontend import workloads
    from ansor.measure.measurer import RunOptions
    from ansor.tuning.progress import TableProgress

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = [n for n in args.workloads.split(",") if n] or workloads.suite()
    if args.only:
        keys = args.only.split(",")
        names = [n for n in names if n in keys or n.split("-")[0] in keys]
    meta = host_meta(args.threads)
    print(host_line(meta) + f" | trials per workload: {args.trials}", flush=True)
    entries, torch_info = [], {}
    title = args.title or f"Ansor suite vs PyTorch eager ({args.trials} trials per workload)"
    path = results_path("suite", args.results)
    for name in names:
        text = workloads.get(name)
        task = ansor.create_task(text, name=name)
        log = out / f"{name}.jsonl"
        ansor.tune(task, trials=args.trials, log_path=log, seed=args.seed,
                   run_options=RunOptions(threads=args.threads), callback=TableProgress(),
                   **tune_kwargs(args, args.seed))
        # re-timed in a fresh process, PyTorch in its own: this one ran the tuner (XGBoost's OpenMP
        # runtime beside ours), which slows timings here 1.3-1.7x, unevenly
        load_before = os.getloadavg()
        timed = retime_in_child(name, {"tuned": [log]}, args.rounds, args.threads, out / "tmp",
                                naive=not args.no_naive)
        torch_info = torch_info or timed.get("torch_info", {})
        entries.append(suite_entry(name, task, [log], timed))
        # the host's 1/5/15-minute load averages before and after the timing rounds (a shared VM)
        entries[-1]["load_avg"] = {"before": [round(x, 2) for x in load_before],
                                   "after": [round(x, 2) for x in os.getloadavg()]}
        e = entries[-1]["times"]
        torch_ms = statistics.median(e[TORCH]) * 1e3 if TORCH in e else float("nan")
        print(f"{name}: Python call {statistics.median(e[CALL]) * 1e3:.3f} ms, native loop "
              f"{statistics.median(e[NATIVE]) * 1e3:.3f} ms, PyTorch eager {torch_ms:.3f} ms", flush=True)
        body = {"title": title,
                "settings": {"trials": args.trials, "rounds": args.rounds, "threads": args.threads,
                             "per_round": "best of 5 loops of ~0.1 s after 0.1 s of warm-up calls (naive loops: one loop)",
                             "batch_size": args.batch_size, "population": args.population,
                             "generations": args.generations, "seed": args.seed},
                "torch_info": torch_info, "workloads": entries}
        write_results(path, "suite", meta, body)
        table = render(json.loads(path.read_text()))
        (out / "suite.md").write_text(table + "\n")

    print("\n" + table)
    print(f"results: {path}")


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.suite [--help]")
    main()

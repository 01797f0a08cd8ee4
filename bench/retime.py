"""Benchmark: re-time the best tuned programs of existing logs against PyTorch, each in its own process.

    python -m bench.retime NAME=LOG[,LOG...] [NAME=LOG ...] [--rounds 5] [--threads N] [--results FILE]
    python -m bench.retime --suite DIR[,DIR...]      # every suite workload with a log DIR/NAME.jsonl

Per workload: a fresh child process compiles the best current record of its logs (the tuner's
latency decides), checks its output against PyTorch's, and times, in >= 5 alternating rounds:
our compiled callable called from Python (`ansor.compile(...)(*args)`: output allocation and
argument conversion included, timed the way PyTorch eager is timed), the same kernel in its
native timing loop (as the tuner times it), PyTorch eager (same threads, one-op forms where they
exist, the faster of two memory layouts for convolutions; in a process of its own,
bench/torch_ops.py: torch's OpenMP runtime in the same process as our kernels, or XGBoost's after a
tuning run, slows both 1.3-1.7x, unevenly) and, unless --no-naive, the naive loops (the program
as written, untransformed). Each round takes the best of 5 loops of ~0.1 s per side (the naive
loops: one loop); the table shows medians over rounds with their range (min–max) and the median
of the per-round ratios, so host drift hits both alike. The headline is PyTorch eager over our
Python-level call, as a geomean over all workloads and over those of at least 50 µs. No tuning
happens here. Writes results/retime.json (--results) unless --no-results.

`time_alternating` is the child side of `common.retime_in_child` (this module with --child), which
bench.suite and bench.ragged_tiles call too.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from pathlib import Path


def time_alternating(name: str, logs: dict[str, list[Path]], rounds: int, threads: int, tmp: Path,
                     naive: bool = False) -> dict:
    """(Run in a fresh process.) Compile the best record of each label's logs, check the programs
    against each other and PyTorch, and time them and PyTorch in alternating rounds.
    Returns {"times": {label: [native-loop s per round], "torch": [...]}, "calls": {label: [Python-call
    s per round]}, "naive": [...] (with `naive`), "agree": "yes" or why not, "torch_layout": [...],
    "torch_info": {...}}."""
    import ansor
    import numpy as np
    from ansor.frontend import workloads
    from ansor.measure.measurer import make_inputs
    from ansor.measure.verify import check_outputs
    from ansor.tuning.records import best_record, load_records

    from bench.common import alternate, calls_for, loop_time, native_time, start_torch_op

    text = workloads.get(name)
    task = ansor.create_task(text, name=name)
    fns = {}
    for label, paths in logs.items():
        recs = [r for p in paths for r in load_records(p)]
        rec = best_record(recs, task.hash, task.target, current_only=True)
        if rec is None:
            raise SystemExit(f"{name}: no current record in {', '.join(map(str, paths))}")
        fns[label] = ansor.CompiledFunction(task, rec, threads)
    inputs = workloads.valid_inputs(name, make_inputs(task))
    outs = {label: np.asarray(fn(*inputs)) for label, fn in fns.items()}
    first = next(iter(outs.values()))
    bad = next((msg for o in outs.values() if (msg := check_outputs([o], [first], rtol=1e-3, atol=1e-3))), None)
    cands = {}
    for label, fn in fns.items():
        n_call = calls_for(lambda f=fn: f(*inputs))
        n_native = max(1, int(0.1 / max(min(fn.time(*inputs, number=1) for _ in range(3)), 1e-7)))
        cands[f"{label}:call"] = lambda f=fn, n=n_call: loop_time(lambda: f(*inputs), number=n)
        cands[label] = lambda f=fn, n=n_native: native_time(f, inputs, number=n)
    if naive:
        base = ansor.CompiledFunction(task, None, threads)
        base(*inputs)  # (the first call finishes the JIT)
        n_naive = max(1, int(0.1 / max(base.time(*inputs, number=1), 1e-7)))
        cands[":naive"] = lambda: native_time(base, inputs, number=n_naive, repeats=1)
    try:
        started = start_torch_op(name, inputs, threads, tmp)
    except (OSError, RuntimeError) as exc:  # torch missing or broken: no PyTorch column, say why
        print(f"{name}: PyTorch not timed: {exc}", file=sys.stderr)
        started = None
    layouts: list[str] = []
    info = {}
    if started is not None:
        child, y_torch = started
        info = child.hello.get("info", {})
        bad = bad or check_outputs([first], [y_torch], rtol=1e-3, atol=1e-3)

        def torch_round() -> float:
            ans = child.ask()
            layouts.append(ans["layout"])
            return ans["latency_s"]

        cands["torch"] = torch_round
    try:
        t = alternate(cands, rounds)
    finally:
        if started is not None:
            child.close()
    out = {"times": {label: t[label] for label in fns}, "calls": {label: t[f"{label}:call"] for label in fns},
           "agree": bad or "yes", "torch_layout": layouts, "torch_info": info}
    if "torch" in t:
        out["times"]["torch"] = t["torch"]
    if naive:
        out["naive"] = t[":naive"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pairs", nargs="*", metavar="NAME=LOG[,LOG...]")
    ap.add_argument("--suite", metavar="DIR[,DIR...]", help="every suite workload with DIR/NAME.jsonl (all DIRs pooled)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-naive", action="store_true", help="do not time the naive loops (slow for big convolutions)")
    ap.add_argument("--out", help="also write the table to this markdown file")
    ap.add_argument("--results", help="results file (default results/retime.json)")
    ap.add_argument("--no-results", action="store_true", help="write no results file")
    ap.add_argument("--tmp", default="bench/out/retime-tmp")
    ap.add_argument("--child", nargs=2, metavar=("NAME", "LOGS_JSON"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rounds < 5 and not args.child:
        print(f"warning: {args.rounds} rounds; tables are meant to hold medians over >= 5", file=sys.stderr)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    if args.child:
        logs = {label: [Path(p) for p in paths] for label, paths in json.loads(args.child[1]).items()}
        print(json.dumps(time_alternating(args.child[0], logs, args.rounds, args.threads, Path(args.tmp),
                                          naive=not args.no_naive)))
        return

    import ansor
    from ansor.frontend import workloads

    from bench.common import (
        CALL,
        NATIVE,
        TORCH,
        host_line,
        host_meta,
        render,
        results_path,
        retime_in_child,
        suite_entry,
        write_results,
    )

    work: dict[str, list[Path]] = {}
    for pair in args.pairs:
        name, _, paths = pair.partition("=")
        if not paths:
            ap.error(f"{pair!r}: expected NAME=LOG[,LOG...]")
        work[name] = [Path(p) for p in paths.split(",")]
    if args.suite:
        for name in workloads.suite():
            found = [Path(d) / f"{name}.jsonl" for d in args.suite.split(",") if (Path(d) / f"{name}.jsonl").exists()]
            if found:
                work.setdefault(name, found)
    if not work:
        ap.error("nothing to re-time: give NAME=LOG pairs or --suite DIR")
    for name, paths in work.items():
        try:
            workloads.get(name)
        except KeyError as exc:
            ap.error(str(exc.args[0]))
        if missing := [str(p) for p in paths if not p.exists()]:
            ap.error(f"{name}: no such log: {', '.join(missing)}")
    meta = host_meta(args.threads)
    print(host_line(meta), flush=True)
    print(f"{args.rounds} alternating rounds per workload; ours and PyTorch in separate processes", flush=True)
    entries, torch_info = [], {}
    for name, paths in work.items():
        task = ansor.create_task(workloads.get(name), name=name)
        timed = retime_in_child(name, {"tuned": paths}, args.rounds, args.threads, Path(args.tmp),
                                naive=not args.no_naive)
        torch_info = torch_info or timed.get("torch_info", {})
        entries.append(suite_entry(name, task, paths, timed))
        e = entries[-1]["times"]
        print(f"{name}: Python call {statistics.median(e[CALL]) * 1e3:.3f} ms, native loop "
              f"{statistics.median(e[NATIVE]) * 1e3:.3f} ms, PyTorch "
              f"{statistics.median(e[TORCH]) * 1e3 if TORCH in e else math.nan:.3f} ms", flush=True)
    body = {"settings": {"rounds": args.rounds, "threads": args.threads, "trials": None,
                         "per_round": "best of 5 loops of ~0.1 s after 0.1 s of warm-up calls (naive loops: one loop)"},
            "torch_info": torch_info, "workloads": entries}
    data = {"kind": "suite", "title": "Re-timed suite workloads vs PyTorch eager", "host": meta, **body}
    table = render(data)
    print("\n" + table)
    if args.out:
        Path(args.out).write_text(table + "\n")
    if not args.no_results:
        path = write_results(results_path("retime", args.results), "suite", meta,
                             {"title": data["title"], **body})
        print(f"results: {path}")


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.retime [--help]")
    main()

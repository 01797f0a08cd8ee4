"""Benchmark: a compiled model's end-to-end time against its tuned estimate, with and without the
static arena for the intermediates between tasks (`ansor/targets/cpu/arena.py`).

    python -m bench.arena MODEL.mlir LOG.jsonl [--split] [--rounds 5] [--threads N] [--json results/X.json]

The estimate is what the task scheduler optimises: the sum over tasks of weight x best logged
latency (`ansor.cli.network_estimate`). Both programs are compiled from the same log and timed in
alternating rounds in their native loop (the way the tuner timed the tasks), after a warm-up; the
table shows medians, each program's ratio to the estimate, and the gap.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("log")
    ap.add_argument("--split", action="store_true", default=None, help="partition as `ansor tune --split` did")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json")
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)

    from ansor.cli import network_estimate
    from ansor.compile import CompiledNetwork, compile_network, extract_for_log
    from ansor.measure.measurer import make_inputs
    from ansor.targets.cpu import lowering
    from ansor.tuning.records import load_records

    from bench.common import alternate, host_line, host_meta, native_time

    records = load_records(args.log)
    net = extract_for_log(Path(args.model), args.log, records=records, split=args.split)
    with_arena = compile_network(net, args.log, threads=args.threads, records=records)
    original = lowering.compile_network

    def no_arena(*a, **k):
        return original(*a, arena=False, **k)

    lowering.compile_network = no_arena
    try:
        without: CompiledNetwork = compile_network(net, args.log, threads=args.threads, records=records)
    finally:
        lowering.compile_network = original
    inputs = make_inputs(net.as_task())
    a, b = with_arena(*inputs), without(*inputs)
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,), strict=True):
        if not (x == y).all():
            sys.exit("the two programs disagree")
    est, missing = network_estimate(net, with_arena.records)
    times = alternate({"arena": lambda: native_time(with_arena, inputs),
                       "no arena": lambda: native_time(without, inputs)}, args.rounds)
    meta = host_meta(args.threads)
    print(host_line(meta))
    print(f"{net.name}: {len(net.tasks)} tasks ({len(net.calls)} calls), {missing} untuned; "
          f"estimate {est * 1e3:.3f} ms (sum of weight x logged latency)")
    print(f"{'program':<10} {'median ms':>10} {'min-max ms':>17} {'/ estimate':>11} {'gap ms':>8}")
    for k, ts in times.items():
        m = statistics.median(ts)
        print(f"{k:<10} {m * 1e3:>10.3f} {min(ts) * 1e3:>8.3f}-{max(ts) * 1e3:<8.3f} {m / est:>10.2f}x "
              f"{(m - est) * 1e3:>+8.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "kind": "arena", "command": " ".join(["python -m bench.arena", *sys.argv[1:]]), "host": meta,
            "model": net.name, "tasks": len(net.tasks), "calls": len(net.calls), "untuned": missing,
            "estimate_s": est, "times": times}, indent=1))


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.arena [--help]")
    main()

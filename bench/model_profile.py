"""Benchmark: where a compiled model's end-to-end time goes, task by task.

    python -m bench.model_profile MODEL.mlir LOG.jsonl [--split] [--rounds 5] [--threads N] [--json results/X.json]

For every task call of the model (compiled with the log's best records):
- `logged`: the task's best latency in the log (what the estimate sums; timed warm and alone by
  the tuner's runner, the best of its repeats, possibly on a quieter or noisier day);
- `alone warm`: the same schedule compiled as its own function and timed now, alone, in a native
  loop on the model's input shapes (median of `--rounds` rounds, each the best of 3 loops);
- `alone cold` / `weights cold`: what a tuning log measured with `ansor tune --cache-flush` / `--cache-flush
  weights` would hold for the schedule: the runner's own timing (`measure.measurer.time_kernel`, one
  call per repeat into preallocated outputs, median of 3 repeats, median of rounds) after evicting
  every cache (`all`) or only the lines of every input but the first (`weights`, TVM's
  enable_cpu_cache_flush: the weights come from memory, the input the previous task wrote, the code
  and the threads stay hot);
- `in model`: the call's time inside the model, from a build with timers around every call
  (`CompiledNetwork(profile=True)`, `ansor/targets/cpu/profile.py`), median over rounds of
  `--number` model calls; the parent's own ops between calls are one more row.
So estimate - measured = (alone warm - logged) [the log's optimism] + (in model - alone warm)
[what running inside the model costs a task: caches, the previous task's data] + parent ops.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path


def prepare(args: argparse.Namespace) -> dict:
    """Compile everything (slow; no timing)."""
    from ansor.compile import CompiledFunction, compile_network, extract_for_log
    from ansor.measure.measurer import make_inputs
    from ansor.tuning.records import load_records

    records = load_records(args.log)
    net = extract_for_log(Path(args.model), args.log, records=records, split=args.split)
    plain = compile_network(net, args.log, threads=args.threads, records=records)
    profiled = compile_network(net, args.log, threads=args.threads, records=records, profile=True)
    inputs = make_inputs(net.as_task())
    a, b = plain(*inputs), profiled(*inputs)
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,), strict=True):
        if not (x == y).all():
            sys.exit("the profiled program disagrees with the plain one")
    alone = {}
    for t in net.tasks:
        rec = plain.records.get(t.hash)
        alone[t.hash] = (CompiledFunction(t, rec, args.threads), make_inputs(t))
    return {"net": net, "plain": plain, "profiled": profiled, "inputs": inputs, "alone": alone}


def measure(state: dict, args: argparse.Namespace) -> dict:
    """Time it all: `args.rounds` rounds, each of every measurement in turn."""
    from ansor.measure.measurer import RunOptions, time_kernel

    net, plain, profiled, inputs = state["net"], state["plain"], state["profiled"], state["inputs"]
    plain.time(*inputs, number=2)
    rounds = {"end_to_end": [], "profiled_wall": [], "calls": [], "parent": [], "alone_warm": [], "alone_cold": [],
              "weights_cold": []}
    cold_opts = {"alone_cold": RunOptions(repeat=3, cache_flush="all"),
                 "weights_cold": RunOptions(repeat=3, cache_flush="weights")}
    for _ in range(args.rounds):
        rounds["end_to_end"].append(min(plain.time(*inputs, number=args.number) for _ in range(3)))
        prof = min((profiled.profile(*inputs, number=args.number) for _ in range(3)), key=lambda p: p.wall)
        rounds["profiled_wall"].append(prof.wall)
        rounds["calls"].append([c.seconds for c in prof.calls])
        rounds["parent"].append(prof.in_parent)
        warm, cold = {}, {k: {} for k in cold_opts}
        for h, (fn, ins) in state["alone"].items():
            n = max(1, int(0.02 / max(fn.time(*ins, number=1), 1e-6)))
            warm[h] = min(fn.time(*ins, number=n) for _ in range(3))
            for k, opts in cold_opts.items():
                cold[k][h] = statistics.median(time_kernel(fn._kernel, ins, opts))
        rounds["alone_warm"].append(warm)
        for k in cold_opts:
            rounds[k].append(cold[k])
    tasks = {name: net.tasks[i] for name, i in net.calls.items()}
    rows = []
    for j, c in enumerate(prof.calls):
        t = tasks[c.callee]
        rows.append({"callee": c.callee, "task": t.name, "logged": c.logged,
                     "alone_warm": statistics.median(r[t.hash] for r in rounds["alone_warm"]),
                     "alone_cold": statistics.median(r[t.hash] for r in rounds["alone_cold"]),
                     "weights_cold": statistics.median(r[t.hash] for r in rounds["weights_cold"]),
                     "in_model": statistics.median(r[j] for r in rounds["calls"])})
    return {"rows": rows, "rounds": rounds,
            "end_to_end": statistics.median(rounds["end_to_end"]),
            "profiled_wall": statistics.median(rounds["profiled_wall"]),
            "parent": statistics.median(rounds["parent"])}


def report(state: dict, res: dict, args: argparse.Namespace) -> None:
    from ansor.cli import network_estimate

    from bench.common import host_line, host_meta

    net, plain = state["net"], state["plain"]
    est, missing = network_estimate(net, plain.records)
    meta = host_meta(args.threads)
    print(host_line(meta))
    rows = res["rows"]
    s = {k: sum(r[k] or 0.0 for r in rows) for k in ("logged", "alone_warm", "alone_cold", "weights_cold", "in_model")}
    print(f"{net.name}: {len(net.tasks)} tasks ({len(net.calls)} calls), {missing} untuned; estimate "
          f"{est * 1e3:.3f} ms; end to end {res['end_to_end'] * 1e3:.3f} ms ({res['end_to_end'] / est:.2f}x); "
          f"profiled build {res['profiled_wall'] * 1e3:.3f} ms")
    print(f"{'call':<11} {'task':<26} {'logged':>8} {'alone warm':>10} {'alone cold':>10} {'wts cold':>9} "
          f"{'in model':>9} {'model/warm':>10}   (ms)")
    for r in rows:
        logged = f"{r['logged'] * 1e3:>8.3f}" if r["logged"] else f"{'-':>8}"
        print(f"{r['callee'][-11:]:<11} {r['task'][:26]:<26} {logged} {r['alone_warm'] * 1e3:>10.3f} "
              f"{r['alone_cold'] * 1e3:>10.3f} {r['weights_cold'] * 1e3:>9.3f} {r['in_model'] * 1e3:>9.3f} "
              f"{r['in_model'] / r['alone_warm']:>9.2f}x")
    print(f"{'sum of calls':<38} {s['logged'] * 1e3:>8.3f} {s['alone_warm'] * 1e3:>10.3f} "
          f"{s['alone_cold'] * 1e3:>10.3f} {s['weights_cold'] * 1e3:>9.3f} {s['in_model'] * 1e3:>9.3f}")
    print(f"{'parent ops':<38} {'':>8} {'':>10} {'':>10} {'':>9} {res['parent'] * 1e3:>9.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "kind": "model_profile", "command": " ".join(["python -m bench.model_profile", *sys.argv[1:]]),
            "host": meta, "model": net.name, "tasks": len(net.tasks), "calls": len(net.calls), "untuned": missing,
            "estimate_s": est, "sums_s": s, **res}, indent=1))


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("log")
    ap.add_argument("--split", action="store_true", default=None, help="partition as `ansor tune --split` did")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--number", type=int, default=10, help="model calls per timing")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    return args


def main() -> None:
    args = parse()
    state = prepare(args)
    report(state, measure(state, args), args)


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.model_profile [--help]")
    main()

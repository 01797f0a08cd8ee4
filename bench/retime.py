"""Benchmark: re-time the best tuned programs of existing logs against PyTorch, each in its own process.

    python bench/retime.py NAME=LOG[,LOG...] [NAME=LOG ...] [--rounds 5] [--threads N] [--out FILE.md]
    python bench/retime.py --suite DIR[,DIR...]      # every suite workload with a log DIR/NAME.jsonl

Per workload: a fresh child process compiles the best current record of its logs (the tuner's
latency decides), checks its output against PyTorch's, and times it in its native loop
alternately with PyTorch (eager, same threads), which runs in a process of its own
(`torch_ops.py`): torch's OpenMP runtime in the same process as our kernels, or XGBoost's after a
tuning run, slows both 1.3-1.7x, unevenly. Each round takes the best of 5 loops of ~0.1 s per
side; reported are the medians and the median of the per-round ratios, so host drift hits both
alike. No tuning happens here.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path


def calls_for(fn, seconds: float = 0.1) -> int:
    t0 = time.perf_counter()
    fn()
    return max(1, int(seconds / max(time.perf_counter() - t0, 1e-6)))


def time_alternating(name: str, logs: dict[str, list[Path]], rounds: int, threads: int, tmp: Path) -> dict:
    """(Run in a fresh process.) Compile the best record of each label's logs, check the programs
    against each other and PyTorch, and time them and PyTorch in alternating rounds.
    Returns {"times": {label: [s, ...], "torch": [...]}, "agree": "yes" or why not}."""
    import ansor
    import numpy as np
    from ansor import workloads
    from ansor.measure import check_outputs, make_inputs
    from ansor.records import best_record, load_records
    from torch_ops import time_in_subprocess

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
    bad = next((msg for o in outs.values() if (msg := check_outputs([o], [first], 1e-3, 1e-3))), None)
    number = {label: calls_for(lambda f=fn, a=inputs: f(*a)) for label, fn in fns.items()}
    times: dict[str, list[float]] = {label: [] for label in fns} | {"torch": []}
    for _ in range(rounds):
        for label, fn in fns.items():  # in their native timing loop, as the tuner times them
            times[label].append(min(fn.time(*inputs, number=number[label]) for _ in range(5)))
        timed = time_in_subprocess(name, inputs, threads, tmp)
        if timed is None:
            times.pop("torch")
            break
        times["torch"].append(timed[0])
        bad = bad or check_outputs([first], [timed[1]], 1e-3, 1e-3)
    return {"times": times, "agree": bad or "yes"}


def retime_in_child(name: str, logs: dict[str, list[Path]], rounds: int, threads: int, tmp: Path) -> dict:
    """`time_alternating` in a fresh process (this one may hold torch, XGBoost or a tuner)."""
    spec = json.dumps({label: [str(p) for p in paths] for label, paths in logs.items()})
    child = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", name, spec,
                            "--rounds", str(rounds), "--threads", str(threads), "--tmp", str(tmp)],
                           capture_output=True, text=True, check=False)
    if child.returncode != 0:
        raise SystemExit(f"{name}: re-timing failed: {(child.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(child.stdout.strip().splitlines()[-1])


def ratio(times: dict[str, list[float]], num: str, den: str) -> float:
    """Median over rounds of times[num] / times[den] (nan when either side is missing)."""
    if num not in times or den not in times:
        return math.nan
    return statistics.median(a / b for a, b in zip(times[num], times[den], strict=False))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pairs", nargs="*", metavar="NAME=LOG[,LOG...]")
    ap.add_argument("--suite", metavar="DIR[,DIR...]", help="every suite workload with DIR/NAME.jsonl (all DIRs pooled)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", help="also write the table to this markdown file")
    ap.add_argument("--tmp", default="bench/out/retime-tmp")
    ap.add_argument("--child", nargs=2, metavar=("NAME", "LOGS_JSON"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if args.child:
        logs = {label: [Path(p) for p in paths] for label, paths in json.loads(args.child[1]).items()}
        print(json.dumps(time_alternating(args.child[0], logs, args.rounds, args.threads, Path(args.tmp))))
        return

    import ansor
    from ansor import workloads

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
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), "?")
    header = (f"machine: {platform.node()} | {cpu} | {os.cpu_count()} cores | threads: {args.threads} | "
              f"{args.rounds} alternating rounds, each side in its own process")
    print(header, flush=True)
    lines = [header, "", "| workload | GFLOP/s | tuned ms | PyTorch ms | PyTorch / tuned | same result | logs |",
             "|---|---:|---:|---:|---:|---|---|"]
    speedups = []
    for name, paths in work.items():
        flops = ansor.create_task(workloads.get(name), name=name).flops
        timed = retime_in_child(name, {"tuned": paths}, args.rounds, args.threads, Path(args.tmp))
        times = timed["times"]
        ours = statistics.median(times["tuned"])
        torch_ms = statistics.median(times["torch"]) * 1e3 if "torch" in times else math.nan
        sp = ratio(times, "torch", "tuned")
        if math.isfinite(sp):
            speedups.append(sp)
        row = (f"| {name} | {flops / ours / 1e9:.1f} | {ours * 1e3:.3f} | {torch_ms:.3f} | {sp:.2f}x | "
               f"{timed['agree']} | {', '.join(str(p.parent.name) for p in paths)} |")
        lines.append(row)
        print(row, flush=True)
    geo = math.exp(sum(map(math.log, speedups)) / len(speedups)) if speedups else math.nan
    lines += ["", f"geometric-mean speedup over PyTorch: **{geo:.2f}x** over {len(speedups)} workloads"]
    print(lines[-1])
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

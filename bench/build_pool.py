"""Candidates per minute with and without a build pool (issue 28): one runner, 0 or N builders.

    python -m bench.build_pool [--target cuda] [--workloads matmul-1024,c2d-1x56x56x64x64x3x1x1,softmax-2048x768]
                               [--candidates 6] [--rounds 5] [--builders 0:ptx,14:ptx,14] [--timeout 30]
                               [--out results/build-pool/cuda.json]

For each workload, the same seeded random candidates are measured by `LocalMeasurer` with each
`--builders` count: 0 is the measurer as it was (its one worker builds, then verifies and times,
each candidate in turn); N > 0 adds N builder processes that lower the batch to artifacts (on the
GPU: PTX + the host's LLVM dialect, `build_task_cuda`) while the runner JITs, verifies and times
one candidate at a time. Rounds alternate the configurations and draw fresh candidates; every
candidate is verified against the reference exactly as in tuning (failures count as measured:
the tuner pays for them too). Start-up (references, worker processes) is not timed.

A configuration is `N[:FORMAT][:rR][:oL][:v0]` (the parts after N in any order): N builders, R runners
sharing the device (default 1; with more, each loads its next candidate while another measures),
FORMAT (ptx, cubin, auto) is `ANSOR_CUDA_BINARY` for that measurer's workers (`ptx`: the driver
assembles the PTX when the runner loads it, as before cubins; `cubin`: ptxas runs in the
builders), L (0-3) is `ANSOR_CUDA_HOST_OPT_LEVEL` for them (the LLVM level of the host code the
runner JITs; default `config.CUDA_HOST_OPT_LEVEL`, 0 since c6108af, 3 before: `0:ptx:v0:o3` is the measurer of before issue 28); `v0` sets `ANSOR_VERIFY_FAST=0` (the exact f64 output check for every
candidate, as the measurer verified before its fast path). They reach the measurer's worker
processes through their environment (`LocalMeasurer(env=...)`), restarted ones too.

Prints candidates per minute, median (min-max) over rounds, the per-round ratio to the first
configuration, the runner's time per candidate by phase (load: JIT + module load, verify,
time), medians over every successful candidate, and each candidate's latency in one
configuration against the same candidate's in another (the first configuration, and any earlier
one that differs in one part only, e.g. `14:ptx` vs `14:ptx:r2`): does a second runner's load
beside a timing, or another host opt level, change what is measured? The JSON keeps every
candidate's costs, error and phases (`per_candidate`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from bench.common import RESULTS, host_line, host_meta, random_inputs, write_results

_OPT_ENV = "ANSOR_CUDA_HOST_OPT_LEVEL"


def parse_config(spec: str) -> dict:
    """`N[:FORMAT][:rR][:oL][:v0]` -> {"builders", "format", "runners", "host_opt_level",
    "verify_fast"} (None: unset, the environment's)."""
    head, *parts = spec.split(":")
    out: dict = {"builders": int(head), "format": None, "runners": 1, "host_opt_level": None, "verify_fast": None}
    for p in parts:
        if p == "v0":
            out["verify_fast"] = False
        elif p.startswith("r") and p[1:].isdigit():
            out["runners"] = int(p[1:])
        elif p.startswith("o") and p[1:].isdigit() and 0 <= int(p[1:]) <= 3:
            out["host_opt_level"] = int(p[1:])
        elif p in ("ptx", "cubin", "auto"):
            out["format"] = p
        else:
            raise SystemExit(f"--builders {spec!r}: {p!r} is not a FORMAT (ptx, cubin, auto), rR, oL (0-3) or v0")
    return out


def config_env(cfg: dict) -> dict[str, str]:
    """The environment a configuration's worker processes get on top of this process's."""
    env = {}
    if cfg["format"]:
        env["ANSOR_CUDA_BINARY"] = cfg["format"]
    if cfg["host_opt_level"] is not None:
        env[_OPT_ENV] = str(cfg["host_opt_level"])
    if cfg["verify_fast"] is False:
        env["ANSOR_VERIFY_FAST"] = "0"
    return env


def latency_pairs(counts: list[str], cfgs: dict[str, dict]) -> list[tuple[str, str]]:
    """(a, b) pairs whose per-candidate latencies are compared: every configuration against the
    first, and against each earlier one that differs from it in one part only."""
    pairs = []
    for j, b in enumerate(counts[1:], 1):
        for a in counts[:j]:
            diff = sum(cfgs[a][k] != cfgs[b][k] for k in cfgs[a])
            if a == counts[0] or diff == 1:
                pairs.append((a, b))
    return pairs


def compare_latencies(cands: dict[str, list[list[dict]]], a: str, b: str, repeat: int) -> dict | None:
    """Per-candidate latency ratios b / a over the candidates fully timed (`repeat` costs: not cut
    short as slow) and ok in both; None when there are none."""
    ratios, spread = [], []
    for ra, rb in zip(cands[a], cands[b], strict=False):
        for x, y in zip(ra, rb, strict=True):
            if len(x["costs"]) == repeat and len(y["costs"]) == repeat and not x["error"] and not y["error"]:
                ratios.append(statistics.median(y["costs"]) / statistics.median(x["costs"]))
                spread += [max(c["costs"]) / min(c["costs"]) for c in (x, y)]
    if not ratios:
        return None
    q = statistics.quantiles(ratios, n=10) if len(ratios) > 1 else ratios * 9
    return {"n": len(ratios), "median_ratio": statistics.median(ratios), "p10": q[0], "p90": q[-1],
            "over_5pct": sum(abs(r - 1) > 0.05 for r in ratios) / len(ratios),
            "repeat_spread_median": statistics.median(spread)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="cuda")
    ap.add_argument("--workloads", default="matmul-1024,c2d-1x56x56x64x64x3x1x1,softmax-2048x768")
    ap.add_argument("--candidates", type=int, default=6, help="candidates per workload and round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--builders", default=None,
                    help="comma-separated configurations N[:FORMAT][:rR][:oL][:v0] (default: 0 and the target's default)")
    ap.add_argument("--timeout", type=float, default=30.0, help="per-candidate limit, seconds")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()

    import ansor
    from ansor import config
    from ansor.frontend import workloads
    from ansor.measure.local import LocalMeasurer
    from ansor.measure.measurer import RunOptions
    from ansor.targets import get_target

    target = get_target(a.target)
    if target.worker_memory_mb is not None:
        config.WORKER_MEMORY_MB = target.worker_memory_mb
    counts = a.builders.split(",") if a.builders else ["0", str(target.default_builders())]
    meta = host_meta(0, a.target)
    print(host_line(meta))
    load_before = list(os.getloadavg())
    opts = RunOptions(repeat=3, min_repeat_ms=20.0, timeout_s=a.timeout)  # as bench/gpu.py tunes
    names = a.workloads.split(",")
    tasks = {w: ansor.create_task(workloads.get(w), name=w, target=a.target) for w in names}
    cfgs = {b: parse_config(b) for b in counts}
    measurers = {b: LocalMeasurer(opts, builders=c["builders"], runners=c["runners"], env=config_env(c))
                 for b, c in cfgs.items()}
    cands: dict[str, dict[str, list[list[dict]]]] = {w: {b: [] for b in counts} for w in names}
    per_min: dict[str, dict[str, list[float]]] = {w: {b: [] for b in counts} for w in names}
    errors: dict[str, dict[str, Counter]] = {w: {b: Counter() for b in counts} for w in names}
    build_s: dict[str, list[float]] = {w: [] for w in names}
    phases: dict[str, dict[str, dict[str, list[float]]]] = {w: {b: {} for b in counts} for w in names}

    def save(rounds_done: int) -> Path:  # after every round: a run cut short keeps what it measured
        out = Path(a.out) if a.out else RESULTS / "build-pool" / f"{a.target}.json"
        return write_results(out, "build-pool", meta, {
            "target": a.target, "workloads": names, "candidates_per_round": a.candidates, "rounds": rounds_done,
            "builders": counts, "configs": {b: {**c, "env": config_env(c)} for b, c in cfgs.items()},
            "host_opt_level_default": config.CUDA_HOST_OPT_LEVEL,
            "run_options": opts.__dict__, "candidates_per_min": per_min,
            "outcomes": {w: {b: dict(c) for b, c in e.items()} for w, e in errors.items()},
            "compile_s_0_builders": build_s, "runner_phases_s": phases,
            "per_candidate": cands, "latency_comparisons": {
                w: {f"{b} / {x}": compare_latencies(cands[w], x, b, opts.repeat) for x, b in latency_pairs(counts, cfgs)}
                for w in names},
            "load_average_before": load_before,
            "load_average_after": list(os.getloadavg())})

    try:
        t0 = time.perf_counter()
        for m in measurers.values():  # not timed: references, and every worker process started
            for task in tasks.values():
                m.baseline(task)
            start = getattr(m.builder, "start", None)
            if start is not None:
                start()
            for r in m.runners[1:]:
                r.worker.start()
        print(f"references and worker start-up: {time.perf_counter() - t0:.1f} s", flush=True)
        for r in range(a.rounds):
            for w, task in tasks.items():
                inputs = random_inputs(task, a.candidates, seed=r)
                order = counts[r % len(counts):] + counts[: r % len(counts)]
                for b in order:
                    t0 = time.perf_counter()
                    res = measurers[b].measure(inputs)
                    dt = time.perf_counter() - t0
                    per_min[w][b].append(60.0 * len(inputs) / dt)
                    errors[w][b].update(x.error.value if x.error else "ok" for x in res)
                    cands[w][b].append([{"latency": x.latency if x.error is None else None, "costs": list(x.costs),
                                         "error": x.error.value if x.error else None, "phases": x.phases}
                                        for x in res])
                    for x in res:
                        if x.error is None:
                            for k, v in x.phases.items():
                                phases[w][b].setdefault(k, []).append(v)
                    if b == counts[0]:
                        build_s[w] += [x.build_s for x in res]
                    print(f"  round {r} {w}: {b} builders: {per_min[w][b][-1]:.1f} candidates/min "
                          f"({sum(x.error is None for x in res)}/{len(res)} ok, {dt:.1f} s)", flush=True)
            save(r + 1)
    finally:
        for m in measurers.values():
            m.close()

    def med(xs: list[float]) -> str:
        return f"{statistics.median(xs):.1f} ({min(xs):.1f}-{max(xs):.1f})"

    def ratio(w: str, b: str) -> str:  # median of per-round ratios to the first configuration
        rs = [x / y for x, y in zip(per_min[w][b], per_min[w][counts[0]], strict=True)]
        return f", {statistics.median(rs):.2f}x" if b != counts[0] else ""

    print(f"\ncandidates per minute, {a.target}, {a.candidates} random candidates per workload and round, "
          f"{a.rounds} alternating rounds; median (min-max), and the median of per-round ratios to {counts[0]}")
    print("| workload | " + " | ".join(f"{b} builders" for b in counts) + " | speed-up (median of per-round ratios) |")
    print("|---|" + "---|" * (len(counts) + 1))
    for w in names:
        print(f"| {w} | " + " | ".join(med(per_min[w][b]) + ratio(w, b) for b in counts)
              + f" | {ratio(w, counts[-1])[2:] or '1.00x'} |")
    for w in names:
        print(f"{w}: outcomes {dict(errors[w][counts[0]])}; compile time per candidate ({counts[0]} builders) "
              f"median {statistics.median(build_s[w]):.2f} s, max {max(build_s[w]):.2f} s")
    print("\nrunner seconds per successful candidate, median by phase (load: JIT + module load; 0 builders: "
          "also the whole compile)")
    for w in names:
        for b in counts:
            ph = phases[w][b]
            print(f"  {w} [{b}]: " + ", ".join(f"{k} {statistics.median(v) * 1e3:.0f} ms" for k, v in ph.items()))
    print(f"\nper-candidate latency, b / a, over candidates ok and fully timed ({opts.repeat} repeats) in both: "
          "median (10th-90th percentile), share off by > 5%; median max/min of one candidate's repeats")
    for w in names:
        for x, b in latency_pairs(counts, cfgs):
            c = compare_latencies(cands[w], x, b, opts.repeat)
            if c is not None:
                print(f"  {w} [{b}] / [{x}]: {c['median_ratio']:.3f} ({c['p10']:.3f}-{c['p90']:.3f}) over "
                      f"{c['n']}, {c['over_5pct']:.0%} off by > 5%; repeat spread {c['repeat_spread_median']:.3f}")
    print(f"wrote {save(a.rounds)}")


if __name__ == "__main__":
    sys.exit(main())

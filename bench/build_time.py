"""Build time of seeded random CUDA candidates: script -> PTX, one fresh process per build.

    python -m bench.build_time [WORKLOAD ...] [--n 40] [--seed 0] [--timeout 60] [--jobs 1]
                               [--json results/build-time/NAME.json]

A tuning round with a pool of builder processes ends with its slowest build (issue 28), so the
tail of this distribution, not its median, bounds candidates per minute. For each workload the
bench draws `--n` candidates the way the tuner's first round does (`bench.common.random_inputs`:
the seeded random search over `generate_sketches(task)`), and lowers each to PTX in a fresh
process (`lowering._lower_module`, the path of `build_task_cuda` with format=isa; no GPU needed),
killed after `--timeout` seconds of CPU time. Seconds are the build's CPU time (the process's
user + system time from the script to the PTX, Python import excluded): on a shared host the wall
time swings with the others' load (a 10 s build took 44 s wall at load average 7), and a builder
on an idle core runs at its CPU time. Prints median / p90 / max per workload (a time-out counts as
the limit), the share of the NVPTX backend (`gpu-module-to-binary`), and the slowest candidates'
knobs; `--json` writes every row (CPU and wall seconds, NVPTX seconds, PTX lines).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.common import host_line, host_meta, random_inputs, write_results

DEFAULT_WORKLOADS = ("c2d-1x56x56x64x64x3x1x1", "c2d-1x56x56x64x128x3x2x1", "matmul-1024",
                     "softmax-2048x768", "dep-1x112x112x32x3x1x1")

_CHILD = """
import json, re, sys, time
from mlir import ir
import ansor
from ansor.frontend import workloads
from ansor.targets import generate_sketches
import ansor.targets.cuda.lowering as L
wl, sketch, values = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
task = ansor.create_task(workloads.get(wl), name=wl, target="cuda")
sk = next(s for s in generate_sketches(task) if s.name == sketch)
script = sk.script(values)
binary = [0.0, 0.0]  # wall, cpu of gpu-module-to-binary (LLVM's NVPTX backend)
run = L.run_passes
def timed(module, pipeline, stage):
    w, c = time.perf_counter(), time.process_time()
    run(module, pipeline, stage)
    if pipeline.startswith("gpu-module-to-binary"):
        binary[0] += time.perf_counter() - w
        binary[1] += time.process_time() - c
L.run_passes = timed
t0, c0 = time.perf_counter(), time.process_time()
with ir.Context(), ir.Location.unknown():
    module = L._lower_module(task, script, "sm_90", "isa", bench=True)
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    text = str(module)
ptx = "\\n".join(re.findall(r'assembly = "((?:[^"\\\\]|\\\\.)*)"', text))
print(json.dumps({"wall_s": dt, "s": dc, "nvptx_wall_s": binary[0], "nvptx_s": binary[1],
                  "ptx_lines": ptx.count("\\\\0A")}))
"""


def build_once(workload: str, sketch: str, values: dict, timeout: float) -> dict:
    """One build in a fresh process: {"s": CPU seconds or None, "wall_s", "nvptx_s", "ptx_lines",
    "error"}. The limit is on CPU time (RLIMIT_CPU; the wall clock gets 5x): on a shared host the
    wall time of a build swings with the other processes' load, its CPU time much less."""
    import resource
    import signal

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (int(timeout) + 10, int(timeout) + 11))  # + the imports

    try:
        out = subprocess.run([sys.executable, "-c", _CHILD, workload, sketch, json.dumps(values)],
                             capture_output=True, text=True, timeout=5 * timeout, check=False, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        return {"s": None, "error": "timeout (wall)"}
    if out.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return {"s": None, "error": "timeout"}
    if out.returncode != 0 or not out.stdout.strip():
        tail = (out.stderr.strip().splitlines() or ["?"])[-1]
        return {"s": None, "error": f"rc {out.returncode}: {tail[:300]}"}
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if got["s"] > timeout:
        return {**got, "s": None, "error": "timeout"}
    return {**got, "error": None}


def percentile(xs: list[float], q: float) -> float:
    """The `q`-quantile of `xs` (nearest rank)."""
    ys = sorted(xs)
    return ys[min(len(ys) - 1, max(0, int(round(q * len(ys) + 0.5)) - 1))]


def summarize(workload: str, rows: list[dict], timeout: float, top: int = 3) -> dict:
    times = [r["s"] if r["s"] is not None else timeout for r in rows]
    s = {"workload": workload, "n": len(rows), "median_s": statistics.median(times),
         "p90_s": percentile(times, 0.9), "max_s": max(times), "total_s": sum(times),
         "timeouts": sum(str(r.get("error")).startswith("timeout") for r in rows),
         "errors": sum(r.get("error") is not None and not str(r["error"]).startswith("timeout") for r in rows),
         "nvptx_share": (sum(r.get("nvptx_s") or 0 for r in rows if r["s"] is not None)
                         / max(1e-9, sum(r["s"] for r in rows if r["s"] is not None)))}
    print(f"{workload}: n {s['n']}, median {s['median_s']:.2f} s, p90 {s['p90_s']:.2f} s, max {s['max_s']:.2f} s, "
          f"sum {s['total_s']:.0f} s (NVPTX {100 * s['nvptx_share']:.0f}%); time-outs {s['timeouts']}, errors {s['errors']}")
    for r in sorted(rows, key=lambda r: -(r["s"] if r["s"] is not None else timeout))[:top]:
        t = "timeout" if r["s"] is None else f"{r['s']:.2f} s"
        print(f"    {t:>9} seed {r['seed']} #{r['index']} {r['sketch']} nvptx {r.get('nvptx_s') or 0:.1f} s ptx_lines {r.get('ptx_lines')} "
              f"{r.get('error') or ''} {json.dumps(r['values'], separators=(',', ':'))}")
    return s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workloads", nargs="*", default=list(DEFAULT_WORKLOADS))
    ap.add_argument("--n", type=int, default=40, help="candidates per workload")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--jobs", type=int, default=1, help="builds at once (each its own process)")
    ap.add_argument("--json", default=None, help="write every row and the summaries here")
    a = ap.parse_args()

    import ansor
    from ansor.frontend import workloads

    meta = host_meta(1, "cuda")
    print(host_line(meta))
    load_before = list(os.getloadavg())
    rows_all, summaries = {}, []
    for wl in a.workloads:
        task = ansor.create_task(workloads.get(wl), name=wl, target="cuda")
        inputs = random_inputs(task, a.n, seed=a.seed)
        jobs = [(i, inp.schedule.sketch, inp.schedule.values()) for i, inp in enumerate(inputs)]
        with ThreadPoolExecutor(max(1, a.jobs)) as pool:
            def one(j: tuple) -> dict:
                g = build_once(wl, j[1], j[2], a.timeout)
                t = g.get("error") if g["s"] is None else f"{g['s']:.2f} s cpu, {g['wall_s']:.2f} s wall"
                print(f"  {wl} #{j[0]} {j[1]}: {t}", flush=True)
                return g

            got = list(pool.map(one, jobs))
        rows = [{"seed": a.seed, "index": i, "sketch": sk, "values": v, **g} for (i, sk, v), g in zip(jobs, got)]
        rows_all[wl] = rows
        summaries.append(summarize(wl, rows, a.timeout))
    if a.json:
        out = Path(a.json)
        write_results(out, "build-time", meta, {"n": a.n, "seed": a.seed, "timeout_s": a.timeout, "jobs": a.jobs,
                                                "load_average_before": load_before,
                                                "load_average_after": list(os.getloadavg()),
                                                "summary": summaries, "rows": rows_all})
        print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())

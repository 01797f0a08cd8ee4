"""Seconds to PTX and the PTX itself of seeded CUDA candidates under two builds/settings (A/B).

    python results/compile-time/ptx_ab.py WORKLOAD SEED N --lib-a OLD.so --lib-b NEW.so
        [--env-a K=V,...] [--env-b K=V,...] [--timeout 90] [--gpu] [--meta K=V,...] --out results/compile-time/NAME.json

`bench.compile_ab` with the kernel kept: draws the candidates `bench.ptx_candidates` lowers
(`random_inputs(task, N, SEED)`), lowers each to PTX in a fresh process with A's library and
environment and with B's, alternating which goes first, and records per side the seconds, the PTX
lines, its barriers (`bar.sync` / `barrier.sync`) and a hash of the PTX, so a JSON row says both
how long a candidate took and whether its kernel changed. No GPU needed.

With `--gpu` (on a GPU host) each side also JITs its program, verifies it against the task's
reference (`measurer.verify_kernel`: poisoned outputs, as in tuning) and records its latency
(`gpu_s`: seconds per call, launch included, the best of 5 native loops of >= 50 ms) and
`verify` ("ok" or the mismatch), so the kernels whose code changed can be compared for speed;
the PTX is built for sm_90 (`ANSOR_CUDA_ARCH` does not apply).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.common import host_meta, random_inputs, write_results

_CHILD = """
import hashlib, json, re, sys, time
from mlir import ir
import ansor
from ansor.frontend import workloads
from ansor.targets import generate_sketches
from ansor.targets.cuda.lowering import _jit, _lower_module
wl, sketch, values, gpu = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4] == "gpu"
task = ansor.create_task(workloads.get(wl), name=wl, target="cuda")
sk = next(s for s in generate_sketches(task) if s.name == sketch)
script = sk.script(values)
t0 = time.perf_counter()
with ir.Context(), ir.Location.unknown():
    module = _lower_module(task, script, "sm_90", "isa", bench=True)
    seconds = time.perf_counter() - t0
    text = str(module)
    raw = "\\n".join(re.findall(r'assembly = "((?:[^"\\\\]|\\\\.)*)"', text))
    ptx = re.sub(r"\\\\([0-9A-Fa-f]{2})", lambda g: chr(int(g.group(1), 16)), raw)
    row = {"s": seconds, "ptx_lines": ptx.count("\\n") + 1,
           "barriers": len(re.findall(r"\\b(?:bar|barrier)\\.sync\\b", ptx)),
           "ptx_sha": hashlib.sha256(ptx.encode()).hexdigest()[:16]}
    if gpu:
        from ansor.measure.measurer import RunOptions, reference_outputs, verify_kernel
        kernel = _jit(module, task)
        inputs, expected, _ = reference_outputs(task)
        row["verify"] = verify_kernel(kernel, inputs, expected, RunOptions()) or "ok"
        n = max(1, int(0.05 / max(kernel.time(inputs, 1), 1e-7)))
        row["gpu_s"] = min(kernel.time(inputs, n) / n for _ in range(5))
print(json.dumps(row))
"""


def lower(workload: str, sketch: str, values: dict, lib: str, env: dict[str, str], timeout: float,
          gpu: bool = False) -> dict:
    """One candidate to PTX in a fresh process: seconds, PTX lines, barriers, hash (with `gpu`: its
    verification and latency too); an error or a time-out as {"error": ...}."""
    try:
        out = subprocess.run([sys.executable, "-c", _CHILD, workload, sketch, json.dumps(values),
                              "gpu" if gpu else "ptx"],
                             env={**os.environ, "ANSOR_NATIVE_LIB": lib, **env}, capture_output=True,
                             text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout {timeout:g} s"}
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        err = out.stderr.strip().splitlines()
        return {"error": f"exit {out.returncode}: {err[-1][:200] if err else ''}"}
    return json.loads(lines[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload")
    ap.add_argument("seed", type=int)
    ap.add_argument("n", type=int)
    ap.add_argument("--lib-a", required=True)
    ap.add_argument("--lib-b", required=True)
    ap.add_argument("--env-a", default="")
    ap.add_argument("--env-b", default="")
    ap.add_argument("--timeout", type=float, default=90.0)
    ap.add_argument("--gpu", action="store_true", help="also verify and time each side's program on GPU 0")
    ap.add_argument("--meta", default="", help="K=V,... recorded as they are (e.g. which commit each library is)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    import ansor
    from ansor.frontend import workloads

    envs = {k: dict(kv.split("=", 1) for kv in v.split(",") if kv) for k, v in (("a", a.env_a), ("b", a.env_b))}
    libs = {"a": a.lib_a, "b": a.lib_b}
    task = ansor.create_task(workloads.get(a.workload), name=a.workload, target="cuda")
    rows = []
    load_before = list(os.getloadavg())
    for i, inp in enumerate(random_inputs(task, a.n, a.seed)):
        got = {k: lower(a.workload, inp.schedule.sketch, inp.schedule.values(), libs[k], envs[k], a.timeout, a.gpu)
               for k in (("a", "b") if i % 2 == 0 else ("b", "a"))}
        same = "ptx_sha" in got["a"] and got["a"].get("ptx_sha") == got["b"].get("ptx_sha")
        rows.append({"index": i, "sketch": inp.schedule.sketch, "values": inp.schedule.values(),
                     "a": got["a"], "b": got["b"], "same_ptx": same})
        show = lambda g: g.get("error") or (f"{g['s']:.2f} s {g['ptx_lines']} lines {g['barriers']} bar"
                                            + (f" {g['gpu_s'] * 1e6:.1f} us {g['verify'][:20]}" if "gpu_s" in g else ""))
        print(f"{i:3d} A {show(got['a']):40s} B {show(got['b']):40s} {'same' if same else 'CHANGED'}", flush=True)
    for k in ("a", "b"):
        secs = [r[k].get("s", a.timeout) for r in rows]
        print(f"{k.upper()}: sum {sum(secs):.1f} s, median {statistics.median(secs):.2f} s, slowest "
              f"{max(secs):.2f} s, failed {sum('error' in r[k] for r in rows)} (failures count the limit)")
    print(f"kernels changed: {[r['index'] for r in rows if not r['same_ptx']]}")
    timed = [r for r in rows if not r["same_ptx"] and "gpu_s" in r["a"] and "gpu_s" in r["b"]]
    if timed:
        ratios = [r["b"]["gpu_s"] / r["a"]["gpu_s"] for r in timed]
        print(f"changed kernels' latency B/A: median {statistics.median(ratios):.3f}x, range "
              f"{min(ratios):.3f}-{max(ratios):.3f}x over {len(timed)}; geomean "
              f"{statistics.geometric_mean(ratios):.3f}x")
    write_results(Path(a.out), "compile-ab-ptx", host_meta(1, "cuda"),
                  {"workload": a.workload, "seed": a.seed, "n": a.n, "lib_a": a.lib_a, "lib_b": a.lib_b,
                   "env_a": envs["a"], "env_b": envs["b"], "timeout_s": a.timeout, "gpu": a.gpu,
                   "meta": dict(kv.split("=", 1) for kv in a.meta.split(",") if kv), "rows": rows,
                   "load_average_before": load_before, "load_average_after": list(os.getloadavg())})
    return 0


if __name__ == "__main__":
    sys.exit(main())

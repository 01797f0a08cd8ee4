"""Compile time of the same CUDA candidates under two builds of the C++ passes (A/B).

    python -m bench.compile_ab WORKLOAD --lib-a OLD.so --lib-b NEW.so [--env-a K=V,...] [--env-b K=V,...]
                               [--seeds 0,1,2,3,4] [--n 6] [--timeout 120] [--out results/compile-time/NAME.json]

Draws the candidates `bench.build_pool` measures (seeded random search, `--n` per seed), and
lowers each to PTX (`lowering.emit_ptx` path with the timing wrapper, no GPU needed) once with
libAnsorMLIR `--lib-a` and once with `--lib-b` (`ANSOR_NATIVE_LIB`, plus the environment of
`--env-a` / `--env-b`, e.g. `ANSOR_CUDA_MAX_UNROLLED_WORK=0`), alternating which goes first,
each compile in a fresh process with a time limit. Prints seconds per candidate and the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from bench.common import RESULTS, host_line, host_meta, random_inputs, write_results

_CHILD = """
import json, sys, time
from mlir import ir
import ansor
from ansor.frontend import workloads
from ansor.targets import generate_sketches
from ansor.targets.cuda.lowering import _lower_module
wl, sketch, values = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
task = ansor.create_task(workloads.get(wl), name=wl, target="cuda")
sk = next(s for s in generate_sketches(task) if s.name == sketch)
script = sk.script(values)
t0 = time.perf_counter()
with ir.Context(), ir.Location.unknown():
    _lower_module(task, script, "sm_90", "isa", bench=True)
print(time.perf_counter() - t0)
"""


def compile_s(workload: str, sketch: str, values: dict, lib: str, timeout: float,
              extra_env: dict[str, str]) -> float | None:
    """Seconds to PTX in a fresh process with `lib` and `extra_env`; None past `timeout` or on an error."""
    env = {**os.environ, "ANSOR_NATIVE_LIB": lib, **extra_env}
    try:
        out = subprocess.run([sys.executable, "-c", _CHILD, workload, sketch, json.dumps(values)], env=env,
                             capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None
    return float(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 and out.stdout.strip() else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload")
    ap.add_argument("--lib-a", required=True, help="libAnsorMLIR.so before the change")
    ap.add_argument("--lib-b", required=True, help="libAnsorMLIR.so after the change")
    ap.add_argument("--env-a", default="", help="K=V,... set for A's compiles")
    ap.add_argument("--env-b", default="", help="K=V,... set for B's compiles")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--n", type=int, default=6, help="candidates per seed")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()

    import ansor
    from ansor.frontend import workloads

    envs = {k: dict(kv.split("=", 1) for kv in v.split(",") if kv) for k, v in (("a", a.env_a), ("b", a.env_b))}
    meta = host_meta(1, "cuda")
    print(host_line(meta))
    task = ansor.create_task(workloads.get(a.workload), name=a.workload, target="cuda")
    rows = []
    load_before = list(os.getloadavg())
    for seed in (int(s) for s in a.seeds.split(",")):
        for inp in random_inputs(task, a.n, seed=seed):
            order = ["a", "b"] if len(rows) % 2 == 0 else ["b", "a"]
            got = {}
            for k in order:
                got[k] = compile_s(a.workload, inp.schedule.sketch, inp.schedule.values(),
                                   a.lib_a if k == "a" else a.lib_b, a.timeout, envs[k])
            rows.append({"seed": seed, "sketch": inp.schedule.sketch, "values": inp.schedule.values(),
                         "a_s": got["a"], "b_s": got["b"]})
            fmt = lambda x: "timeout/error" if x is None else f"{x:.2f} s"
            print(f"  seed {seed} {inp.schedule.sketch}: A {fmt(got['a'])}, B {fmt(got['b'])}", flush=True)
    both = [r for r in rows if r["a_s"] is not None and r["b_s"] is not None]
    cap = a.timeout
    a_all = [r["a_s"] if r["a_s"] is not None else cap for r in rows]
    b_all = [r["b_s"] if r["b_s"] is not None else cap for r in rows]
    print(f"\n{a.workload}: {len(rows)} candidates; A failed/timed out {sum(r['a_s'] is None for r in rows)}, "
          f"B {sum(r['b_s'] is None for r in rows)} (limit {cap:g} s, counted at the limit below)")
    print(f"median A {statistics.median(a_all):.2f} s, B {statistics.median(b_all):.2f} s; "
          f"max A {max(a_all):.2f} s, B {max(b_all):.2f} s; total A {sum(a_all):.1f} s, B {sum(b_all):.1f} s")
    if both:
        print(f"per-candidate ratio A/B over the {len(both)} both finished: median "
              f"{statistics.median(r['a_s'] / r['b_s'] for r in both):.2f}x")
    out = Path(a.out) if a.out else RESULTS / "compile-time" / f"ab-{a.workload}.json"
    write_results(out, "compile-ab", meta, {"workload": a.workload, "lib_a": a.lib_a, "lib_b": a.lib_b,
                                            "env_a": envs["a"], "env_b": envs["b"],
                                            "timeout_s": cap, "rows": rows, "load_average_before": load_before,
                                            "load_average_after": list(os.getloadavg())})
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())

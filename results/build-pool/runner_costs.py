"""The CUDA runner's per-candidate host work that needs no GPU, by part (CPU only).

    python results/build-pool/runner_costs.py [--candidates 8]   # repository root

1. Verification's output check (`verify.check_output`) on a softmax-2048x768 and a matmul-1024
   sized f32 output with realistic rounding: the exact f64 path alone (`ANSOR_VERIFY_FAST=0`,
   the check as it was) and with the fast path in front of it (the default). Same verdicts.
2. The load phase of real CUDA artifacts (seeded random candidates, `build_task_cuda`): a fresh
   `ir.Context` (what `load_task_cuda` makes per candidate), the artifact's parse in it and in a
   reused context, and the host JIT at O3 and O0 (`ANSOR_CUDA_HOST_OPT_LEVEL`). Without a GPU the
   CUDA runtime's entry points are stubs returning 0 (the global constructor that loads the GPU
   module gets a null module); looking up the entry points makes ORC compile the whole host
   module; nothing is run. The GPU module load itself (the driver's part) is not in here.
Medians in ms; the machine's load average is printed with them (other processes skew them).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench.common


def _median_ms(fn, n: int) -> tuple[float, float]:
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3, min(ts) * 1e3


def check_costs(repeats: int) -> None:
    import numpy as np
    from ansor import config
    from ansor.measure import verify

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2048, 768))
    e = np.exp(x - x.max(1, keepdims=True))
    sm = e / e.sum(1, keepdims=True)
    a, b = (rng.standard_normal((1024, 1024)).astype(np.float32) for _ in range(2))
    cases = [("softmax 2048x768 f32, K=1536", (sm * (1 + rng.uniform(-3e-7, 3e-7, sm.shape))).astype(np.float32),
              sm.astype(np.float32), 1536),
             ("matmul 1024x1024 f32, K=1024", a @ b, (a.astype(np.float64) @ b).astype(np.float32), 1024)]
    for name, out, ref, k in cases:
        row = []
        for fast in (False, True):
            config.VERIFY_FAST = fast
            assert verify.check_output(out, ref, reduction=k) is None
            med, lo = _median_ms(lambda: verify.check_output(out, ref, reduction=k), repeats)
            row.append(f"{'fast path' if fast else 'exact f64 only'} {med:.2f} ms (min {lo:.2f})")
        print(f"check_output, {name}: " + ", ".join(row), flush=True)
    config.VERIFY_FAST = True


def load_costs(n: int, names: list[str]) -> None:
    import ansor
    from ansor.core import native
    from ansor.core.mlir import BENCH_FUNC
    from ansor.frontend import workloads
    from ansor.targets.cuda.lowering import build_task_cuda
    from bench.common import random_inputs
    from mlir import ir
    from mlir.execution_engine import ExecutionEngine

    stub_fn = ctypes.CFUNCTYPE(ctypes.c_void_p)(lambda: None)
    stub = ctypes.cast(stub_fn, ctypes.c_void_p)
    runtime = ["mgpuModuleLoad", "mgpuModuleLoadJIT", "mgpuModuleUnload", "mgpuModuleGetFunction",
               "mgpuLaunchKernel", "mgpuLaunchClusterKernel", "mgpuStreamCreate", "mgpuStreamSynchronize",
               "mgpuStreamDestroy", "mgpuMemAlloc", "mgpuMemFree", "mgpuMemcpy", "mgpuMemset32", "mgpuMemset16",
               "mgpuTensorMapEncodeTiledMemref", "ansorTmaEncodeCached"]
    native.register_everything()
    shared = ir.Context()
    for w in names:
        task = ansor.create_task(workloads.get(w), name=w, target="cuda")
        arts = [build_task_cuda(task, i.script, arch="sm_90") for i in random_inputs(task, n, seed=0)]
        t: dict[str, list[float]] = {k: [] for k in ["fresh context", "parse (fresh context)", "parse (reused context)",
                                                     "host JIT O3", "host JIT O0"]}
        for a in arts:
            t0 = time.perf_counter()
            with ir.Context(), ir.Location.unknown():
                t1 = time.perf_counter()
                ir.Module.parse(a)
                t2 = time.perf_counter()
            t["fresh context"].append(t1 - t0)
            t["parse (fresh context)"].append(t2 - t1)
            with shared, ir.Location.unknown():
                t3 = time.perf_counter()
                m = ir.Module.parse(a)
                t["parse (reused context)"].append(time.perf_counter() - t3)
                for level in (3, 0):
                    t4 = time.perf_counter()
                    engine = ExecutionEngine(m, opt_level=level, shared_libs=[])
                    for s in runtime:
                        engine.raw_register_runtime(s, stub)
                    engine.raw_lookup(task.func_name)
                    engine.raw_lookup(BENCH_FUNC)
                    t[f"host JIT O{level}"].append(time.perf_counter() - t4)
                    del engine  # its destructors call the stubs: before they go
        print(f"load, {w} ({n} candidates, artifacts {statistics.median(len(a) for a in arts) / 1e3:.0f} kB): "
              + ", ".join(f"{k} {statistics.median(v) * 1e3:.1f}" for k, v in t.items()) + " ms", flush=True)
    del stub_fn


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--candidates", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--workloads", default="matmul-1024,softmax-2048x768")
    a = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    check_costs(a.repeats)
    load_costs(a.candidates, a.workloads.split(","))
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

"""Probe given GPU schedules of one workload: build, verify against PyTorch, time, and report the
kernels' registers and local memory (spills).

    python -m bench.gpu_probe WORKLOAD 'KNOBS_JSON'|default|@FILE ... [--ptx-dir DIR]

Each KNOBS_JSON is a full annotation of the workload's GPU sketch `s0` (as in a record's
`best_knobs`), or `default` for the untuned schedule. Runs on the GPU host like bench.gpu.
Registers and local memory come from loading the emitted PTX with CuPy (the CUDA driver's JIT,
the same `ptxas` as the MLIR runtime's `cuModuleLoadData`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def kernel_resources(ptx: str, where: Path) -> list[dict]:
    """[{name, regs, local_bytes, shared_bytes}] of the PTX's entry points (CuPy, if present)."""
    import re

    try:
        import cupy
    except ImportError:
        return []
    where.write_text(ptx)
    mod = cupy.RawModule(path=str(where))
    out = []
    for name in re.findall(r"\.entry\s+(\w+)\(", ptx):
        f = mod.get_function(name)
        out.append({"name": name, "regs": f.num_regs, "local_bytes": f.local_size_bytes,
                    "shared_bytes": f.shared_size_bytes})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload")
    ap.add_argument("schedules", nargs="+", help="KNOBS_JSON, default, or @FILE (one KNOBS_JSON per line)")
    ap.add_argument("--ptx-dir", default=os.environ.get("OUT", "/tmp"))
    args = ap.parse_args()

    import ansor
    import torch
    from ansor.frontend import workloads
    from ansor.measure.measurer import make_inputs
    from ansor.measure.verify import check_outputs
    from ansor.targets import generate_sketches
    from ansor.targets.cuda.lowering import compile_task_cuda, emit_ptx

    from bench.common import time_torch_cuda, torch_cuda_fn

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    task = ansor.create_task(workloads.get(args.workload), name=args.workload, target="cuda")
    inputs = make_inputs(task)
    tf = torch_cuda_fn(args.workload, inputs, "cuda")
    ref = None
    if tf is not None:
        run, to_np = tf
        ref = to_np(run())
        t_ev, t_sync = time_torch_cuda(run)
        print(json.dumps({"torch_s": t_ev, "torch_sync_s": t_sync, "gflop": task.flops / 1e9}), flush=True)
    sketch = generate_sketches(task)[0]
    ptx_dir = Path(args.ptx_dir)
    ptx_dir.mkdir(parents=True, exist_ok=True)
    specs = []
    for a in args.schedules:
        if a.startswith("@"):
            specs += [ln.strip() for ln in Path(a[1:]).read_text().splitlines() if ln.strip()]
        else:
            specs.append(a)
    for i, spec in enumerate(specs):
        row: dict = {"schedule": spec}
        try:
            script = None if spec == "default" else sketch.script(json.loads(spec))
            if script is not None:
                err = sketch.validate(json.loads(spec))
                if err:
                    row["invalid"] = err
            t0 = time.perf_counter()
            kernel = compile_task_cuda(task, script)
            row["build_s"] = round(time.perf_counter() - t0, 2)
            if script is not None:
                row["kernels"] = kernel_resources(emit_ptx(task, script), ptx_dir / f"{args.workload}.{i}.ptx")
            out = kernel.run(inputs)
            if ref is not None:
                bad = check_outputs(out, [ref], rtol=1e-4, atol=1e-4)
                row["verified"] = bad is None
                if bad:
                    row["mismatch"] = bad
            kernel.time(inputs, 3)
            one = kernel.time(inputs, 3) / 3
            number = max(3, int(0.2 / max(one, 1e-6)))
            row["tuned_s"] = min(kernel.time(inputs, number) / number for _ in range(3))
            row["tflops"] = round(task.flops / row["tuned_s"] / 1e12, 2)
            if ref is not None:
                row["vs_torch"] = round(t_ev / row["tuned_s"], 3)
        except Exception as exc:  # noqa: BLE001 -- report and go on with the next schedule
            row["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.gpu_probe [--help]")
    main()

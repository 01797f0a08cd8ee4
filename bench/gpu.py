"""Benchmark: tune workloads for the cuda target and compare with PyTorch on the same GPU.

    python -m bench.gpu [--workloads matmul-1024,matmul-4096,...] [--trials 64] [--budget-s 420]
                        [--log-dir bench/out/gpu] [--search random|learned] [--report-only] [--compile]

Runs on the GPU host (see ../shared/gpu/README.md), from the repository root:
`bash .gpu/with-mlir.sh env PYTHONPATH=python python3 -m bench.gpu ...`. Every workload gets the same
trial budget. Tuning resumes from `LOG_DIR/NAME.cuda.jsonl`, and stops starting new batches once
`--budget-s` seconds have passed, so the benchmark runs in pieces of a few minutes: rerun the same
command (with the logs) to go on.
The report (one process per workload), measured in this run on this card: the best logged schedule
rebuilt, checked against PyTorch's result, and timed in a native loop (launch + kernel + synchronize per call), against
PyTorch eager (cuBLAS/cuDNN, TF32 off), timed with CUDA events, against PyTorch timed the same
way as ours (one synchronize per call), against the same PyTorch calls replayed from a CUDA graph
(no Python or launch overhead: the honest baseline for microsecond kernels), and with `--compile`
against `torch.compile(mode="max-autotune")`. Every tuned output is checked against PyTorch's with
the tuner's criterion (`ansor.measure.verify`).
Workloads the GPU rules do not schedule yet get PyTorch's numbers and the reason; a workload
without a PyTorch baseline (`bench.common.torch_cuda_fn`; only the toy network mlp) gets one line
saying so. Inputs are `make_inputs` + `workloads.valid_inputs` on both sides.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

#: The issue's list (+ the 1x1 ConvLayer, the fused conv + BN + ReLU without padding).
DEFAULT = ("matmul-1024,matmul-4096,c2d-1x56x56x64x64x1x1x0,convlayer-1x56x56x64x128x3x2x1,"
           "convlayer-1x56x56x64x128x1x1x0,tbs-1x128x12x64,lngelu-4096x1024")


def time_compiled(run, reps: int = 50) -> tuple[float | None, str]:
    """PyTorch's best: `torch.compile(mode="max-autotune")` of the same function (Inductor +
    Triton autotuning, cuBLAS/cuDNN among its choices), timed like eager. (None, why) if it
    does not run here."""
    import torch

    from bench.common import time_torch_cuda

    try:
        fn = torch.compile(run, mode="max-autotune")
        fn()
        torch.cuda.synchronize()
        return time_torch_cuda(fn, reps)[0], ""
    except Exception as exc:  # noqa: BLE001 -- report why and go on
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"


def time_graphed(run, reps: int = 50) -> tuple[tuple[float, float] | None, str]:
    """PyTorch without its Python overhead: `run` captured once in a CUDA graph and replayed,
    timed like eager: ((CUDA events over back-to-back replays, a synchronize after each replay as
    ours is timed), ""). For microsecond kernels this is the honest baseline: eager's time there
    is mostly the Python dispatcher. (None, why) if capture fails."""
    import torch

    from bench.common import time_torch_cuda

    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the capture stream, as torch.cuda.graph asks
            for _ in range(3):
                run()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
        return time_torch_cuda(graph.replay, reps), ""
    except Exception as exc:  # noqa: BLE001 -- report why and go on
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"


def gpu_schedulable(task) -> tuple[bool, str]:
    """Whether the GPU rules give `task` a sketch (else why not)."""
    from ansor.targets.cuda.rules import gpu_schedulable as schedulable

    return schedulable(task)


def card() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=False).stdout.strip()
        return out or "?"
    except (OSError, subprocess.TimeoutExpired):
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=DEFAULT)
    ap.add_argument("--trials", type=int, default=64, help="trial budget per workload (equal for all)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--budget-s", type=float, default=420.0, help="start no tuning batch after this many seconds")
    ap.add_argument("--log-dir", default="bench/out/gpu")
    ap.add_argument("--search", default="random", choices=["random", "learned"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--json", help="also write the table as JSON here")
    ap.add_argument("--compile", action="store_true", help='also time torch.compile(mode="max-autotune")')
    ap.add_argument("--report-timeout-s", type=float, default=300.0, help="per-workload report limit")
    args = ap.parse_args()
    t_start = time.perf_counter()

    import ansor
    import torch
    from ansor import config
    from ansor.frontend import workloads
    from ansor.measure.measurer import RunOptions, make_inputs
    from ansor.measure.verify import check_task_outputs
    from ansor.targets import generate_sketches
    from ansor.targets.cuda.lowering import compile_task_cuda
    from ansor.targets.cuda.runtime import device_arch
    from ansor.tuning.progress import TableProgress
    from ansor.tuning.records import best_record, load_records

    from bench.common import module_argv, time_torch_cuda, torch_baseline_missing, torch_cuda_fn

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    config.WORKER_MEMORY_MB = 0  # the CUDA driver needs more address space than any cap
    print(f"card: {card()} | arch {device_arch()} | torch {torch.__version__} | search {args.search}", flush=True)
    log_dir = Path(args.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    names = [n for n in args.workloads.split(",") if n]
    opts = RunOptions(repeat=3, min_repeat_ms=20.0, timeout_s=60.0)
    rows = []
    for name in names:
        task = ansor.create_task(workloads.get(name), name=name, target="cuda")
        if not gpu_schedulable(task)[0]:
            print(f"{name}: not scheduled on the GPU: {gpu_schedulable(task)[1]}", flush=True)
            continue
        log = log_dir / f"{name}.cuda.jsonl"
        done = len([r for r in load_records(log) if r.task.hash == task.hash]) if log.exists() else 0
        while not args.report_only and done < args.trials and time.perf_counter() - t_start < args.budget_s:
            goal = min(args.trials, done + args.batch_size)
            ansor.tune(task, trials=goal, log_path=log, seed=args.seed + done, batch_size=args.batch_size,
                       search=args.search, run_options=opts, callback=TableProgress(verbose=0))
            now = len([r for r in load_records(log) if r.task.hash == task.hash])
            if now == done:
                break
            done = now
    for name in names:
        if len(names) > 1:
            # Each report in its own process: several JIT-ed CUDA programs in one process crashed
            # once (and a kernel fault would poison every later measurement of the process).
            out = log_dir / f"{name}.report.json"
            out.unlink(missing_ok=True)
            cmd = module_argv("bench.gpu", "--workloads", name, "--report-only", "--log-dir", str(log_dir),
                              "--trials", str(args.trials), "--json", str(out), *(["--compile"] if args.compile else []))
            try:
                res = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=args.report_timeout_s)
            except subprocess.TimeoutExpired:
                # (torch.compile's autotuning can take minutes) report without it
                cmd = [c for c in cmd if c != "--compile"]
                res = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if out.exists():
                    row = json.loads(out.read_text())[0]
                    row["compile_error"] = f"timeout: more than {args.report_timeout_s:.0f} s with torch.compile"
                    out.write_text(json.dumps([row]))
            if out.exists():
                rows += json.loads(out.read_text())
                print(json.dumps(rows[-1]), flush=True)
            else:
                rows.append({"workload": name, "trials": 0, "gflop": float("nan"), "error": res.stderr[-300:]})
                print(f"{name}: report failed: {res.stderr[-300:]}", flush=True)
            continue
        task = ansor.create_task(workloads.get(name), name=name, target="cuda")
        log = log_dir / f"{name}.cuda.jsonl"
        recs = [r for r in load_records(log) if r.task.hash == task.hash] if log.exists() else []
        best = best_record(recs)
        ok = sum(1 for r in recs if r.error is None)
        row = {"workload": name, "trials": len(recs), "ok": ok, "gflop": task.flops / 1e9}
        inputs = workloads.valid_inputs(name, make_inputs(task))  # (a stride-2 T2D filter: zeros past k)
        tf = torch_cuda_fn(name, inputs, "cuda")
        ref = None
        if tf is None:  # no PyTorch columns and nothing to verify against: say so
            row["torch_error"] = torch_baseline_missing(name)
            print(f"{name}: {row['torch_error']}", flush=True)
        else:
            run, to_np = tf
            ref = to_np(run())
            row["torch_s"], row["torch_sync_s"] = time_torch_cuda(run)
            graphed, why = time_graphed(run)
            if graphed is not None:
                row["graph_s"], row["graph_sync_s"] = graphed
            else:
                row["graph_error"] = why
            if args.compile:
                row["compile_s"], why = time_compiled(run)
                if why:
                    row["compile_error"] = why
        ok_gpu, why = gpu_schedulable(task)
        if not ok_gpu:
            row["error"] = f"not scheduled on the GPU: {why}"
        if best is not None:
            row["logged_s"] = best.latency
            # the script from today's sketch generator (older logs may hold scripts of an earlier one)
            sketch = next(sk for sk in generate_sketches(task) if sk.name == best.schedule.sketch)
            script = sketch.script(best.schedule.values())  # (None for the skip sketch: the default program)
            kernel = compile_task_cuda(task, script)
            out = kernel.run(inputs)
            if ref is not None:  # the tuner's criterion (ansor.measure.verify), against PyTorch's result
                bad = check_task_outputs(task, out, [ref])
                row["verified_vs_torch"] = bad is None
                if bad:
                    row["mismatch"] = bad
            number = max(3, int(0.2 / max(best.latency, 1e-6)))
            row["tuned_s"] = min(kernel.time(inputs, number) / number for _ in range(3))
            row["best_knobs"] = best.schedule.values()
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(f"{'workload':<34} {'trials':>6} {'tuned ms':>9} {'TFLOP/s':>8} {'torch ms':>9} {'TFLOP/s':>8} "
          f"{'tuned/torch':>11} {'vs torch+sync':>13} {'graph ms':>9} {'vs graph':>9} {'vs graph+sync':>13} {'compile ms':>10} "
          f"{'tuned/compile':>13} {'ok':>3}")
    nan = float("nan")
    for r in rows:
        t, p = r.get("tuned_s"), r.get("torch_s")
        ps, c, g, gs = r.get("torch_sync_s"), r.get("compile_s"), r.get("graph_s"), r.get("graph_sync_s")
        f = r["gflop"]
        verified = "yes" if r.get("verified_vs_torch") else "-" if r.get("torch_error") else "NO"
        print(f"{r['workload']:<34} {r['trials']:>6} {t * 1e3 if t else nan:>9.3f} "
              f"{f / t / 1e3 if t else nan:>8.2f} {p * 1e3 if p else nan:>9.3f} "
              f"{f / p / 1e3 if p else nan:>8.2f} {p / t if (p and t) else nan:>10.2f}x "
              f"{ps / t if (ps and t) else nan:>12.2f}x {g * 1e3 if g else nan:>9.3f} {g / t if (g and t) else nan:>8.2f}x "
              f"{gs / t if (gs and t) else nan:>12.2f}x "
              f"{c * 1e3 if c else nan:>10.3f} "
              f"{c / t if (c and t) else nan:>12.2f}x {verified:>3}")
        if r.get("error"):
            print(f"    {r['workload']}: {r['error'][:200]}")
        if r.get("torch_error"):
            print(f"    {r['workload']}: {r['torch_error'][:200]}")
    print(f"(tuned/torch > 1 means faster than PyTorch; total {time.perf_counter() - t_start:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.gpu [--help]")
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()

"""Benchmark: half-precision GEMMs on tensor cores (the wgmma sketch) against cuBLAS, same card, same run.

    python -m bench.tensor_core [--workloads matmul-4096-f16,...] [--trials 64] [--search learned]
                                [--rounds 5] [--log-dir bench/out/tc] [--json results/...json] [--tf32]

Runs on the GPU host, from the repository root: `bash .gpu/with-mlir.sh env PYTHONPATH=python python3 -m
bench.tensor_core ...`. Per workload: tune (resuming from `LOG_DIR/NAME.cuda.jsonl`), rebuild the best
logged program, check it against PyTorch's f32-output result with the tuner's criterion, then time in
`--rounds` alternating rounds
- ours: the native loop the tuner uses (launch + host TMA-descriptor set-up + kernel + synchronize per call),
- ours and cuBLAS kernel-only: CUPTI kernel durations (`torch.profiler`), the apples-to-apples figure,
- the PyTorch baseline of the workload (`bench.common.torch_cuda_fn`), CUDA events over back-to-back
  calls and CUPTI (the sum of its kernels): a matmul -> cuBLAS through `torch.mm(a, b,
  out_dtype=torch.float32)` (f16/bf16 in, f32 out: the task; `a @ b`, f16/bf16 out, cuBLAS's headline
  kernel, is printed too); `mmgelu` -> PyTorch eager `F.gelu(torch.addmm(bias, a, b))` (cuBLAS with
  the bias in its epilogue + a GELU kernel), against our one fused kernel; `tbs` (attention scores +
  softmax, `tbs-1x128x12x64-f16`) -> PyTorch eager `torch.softmax(q.permute(0, 2, 1, 3) @ k.permute(0, 2, 3,
  1), -1)` on the half tensors (half result), against our one kernel (the wgmma scores + softmax sketch
  or the CUDA-core row sketch, whichever the search found faster).
Prints medians, TFLOP/s, the ratio to the baseline and the share of the card's dense f16 peak.

`--tf32` (f32 workloads, e.g. `--workloads matmul-4096 --tf32`): the tasks are TF32 tasks (`create_task(...,
tf32=True)`: their f32 matmuls get the wgmma sketch with tf32 operands; logs `LOG_DIR/NAME.tf32.cuda.jsonl`),
the baseline is cuBLAS with `torch.backends.cuda.matmul.allow_tf32 = True`, the reference stays exact fp32
(computed with TF32 off) and the peak column is the dense TF32 peak (half the f16 one). Without it PyTorch
runs with TF32 off, as before.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

DEFAULT = "matmul-4096-f16,matmul-4096x11008x4096-f16,matmul-1024-f16,matmul-2048x512x8192-f16"
#: What `torch_cuda_fn` runs for each workload family (the baseline column).
BASELINE = {"matmul": "cuBLAS torch.mm(out_dtype=float32), kernel time",
            "mmgelu": "PyTorch eager F.gelu(torch.addmm(bias, a, b)), sum of its kernels",
            "gmm": "cuBLAS torch.bmm(out_dtype=float32), kernel time",
            "c2d": "cuDNN F.conv2d on channels_last half tensors (half result), kernel time",
            "tbs": "PyTorch eager softmax(q^T k) (cuBLAS bmm + softmax kernel), sum of its kernels"}
#: Dense f16/bf16 tensor-core peak (TFLOP/s, no sparsity) by card name fragment.
PEAK_TFLOPS = {"H200": 989.0, "H100 SXM": 989.0, "H100 80GB HBM3": 989.0, "H100 PCIe": 756.0, "H100": 989.0}


def peak_of(card: str) -> float | None:
    return next((v for k, v in PEAK_TFLOPS.items() if k in card), None)


def cupti_us(fn, calls: int, match) -> float:
    """Mean kernel duration (µs) of the kernels `match` selects over `calls` calls of `fn`."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total = 0.0
    for e in prof.key_averages():
        dt = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if dt and match(e.key):
            total += dt
    return total / calls


def _parse_fix(text: str) -> dict[str, set[int]]:
    """`tc.group=8,tc.bm=128|256` -> {"tc.group": {8}, "tc.bm": {128, 256}}."""
    out: dict[str, set[int]] = {}
    for item in filter(None, text.split(",")):
        k, _, vs = item.partition("=")
        out[k.strip()] = {int(x) for x in vs.split("|")}
    return out


def sweep(task, log: Path, opts, opts_fix: str = "tc.group=8") -> None:
    """Every valid annotation of the task's tensor-core sketch, measured by the tuner's measurer
    (isolated worker, verification with poisoned outputs, time-outs) and appended to `log`."""
    import itertools

    from ansor.targets import generate_sketches
    from ansor.targets.cuda.tensorcore import TcSketch

    sk = next((s for s in generate_sketches(task) if isinstance(s, TcSketch)), None)
    if sk is None:
        print(f"{task.name}: no tensor-core sketch", flush=True)
        return
    values = [dict(zip([k.name for k in sk.knobs], combo, strict=True))
              for combo in itertools.product(*[k.options for k in sk.knobs])]
    fixed = _parse_fix(opts_fix)
    values = [v for v in values if sk.validate(v) is None and all(v.get(k) in vs for k, vs in fixed.items())]
    print(f"{task.name}: sweeping {len(values)} tensor-core annotations", flush=True)
    measure_into_log(task, log, opts, sk, values)


def measure_into_log(task, log: Path, opts, sk, values: list[dict]) -> None:
    """Measure the annotations `values` of sketch `sk` with the tuner's measurer (isolated worker,
    verification with poisoned outputs, time-outs) and append them to `log` as records."""
    from ansor.measure.measurer import LocalMeasurer, MeasureInput
    from ansor.space.schedule import Schedule
    from ansor.tuning.records import Record, RecordWriter, record_key

    inputs = [MeasureInput(task, Schedule.of(sk.name, v), sk.script(v)) for v in values]
    m = LocalMeasurer(opts)
    try:
        results = m.measure(inputs)
    finally:
        m.close()
    prov = m.provenance(task)
    with RecordWriter(log) as w:
        for inp, res in zip(inputs, results, strict=True):
            w.append(Record(record_key(task, inp.schedule), task, inp.schedule, inp.script, res, provenance=prov))
    for inp, res in sorted(zip(inputs, results, strict=True), key=lambda p: p[1].latency):
        print(f"  {inp.schedule.values()}  {res.latency * 1e6:9.1f} µs  {res.error or ''} {res.error_msg[:100]}",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=DEFAULT)
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--search", default="learned", choices=["random", "learned"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--budget-s", type=float, default=400.0, help="start no tuning batch after this many seconds")
    ap.add_argument("--log-dir", default="bench/out/tc")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--json", help="write the raw rounds and the table here")
    ap.add_argument("--fix", default="tc.group=8",
                    help="--sweep only the annotations with these knob values (e.g. tc.group=8,tc.bm=128|256)")
    ap.add_argument("--tf32", action="store_true",
                    help="TF32 tasks (f32 matmuls on tensor cores) against cuBLAS with allow_tf32 = True")
    ap.add_argument("--measure", action="append", default=[], metavar="SKETCH=KNOBS_JSON",
                    help="measure this annotation (e.g. s0='{\"op1.stages\": 2, ...}', every knob of "
                         "the sketch) and log it before tuning; with --trials 0 the table then times the "
                         "log's best record, i.e. one given program kernel against kernel. Repeatable")
    ap.add_argument("--sweep", action="store_true",
                    help="measure every valid tensor-core annotation once (verified, in the tuner's worker) "
                         "and log them, before tuning")
    args = ap.parse_args()
    t_start = time.perf_counter()

    import numpy as np
    import torch

    import ansor
    from ansor import config
    from ansor.frontend import workloads
    from ansor.measure.measurer import RunOptions, make_inputs
    from ansor.measure.provenance import provenance
    from ansor.measure.verify import check_task_outputs
    from ansor.targets import generate_sketches
    from ansor.targets.cuda.lowering import compile_task_cuda
    from ansor.targets.cuda.runtime import device_arch
    from ansor.tuning.progress import TableProgress
    from ansor.tuning.records import best_record, load_records

    from bench.common import time_torch_cuda, torch_cuda_fn, torch_tensor

    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32  # PyTorch's default for convolutions is True
    config.WORKER_MEMORY_MB = 0
    card = torch.cuda.get_device_name()
    peak = peak_of(card)
    if peak is not None and args.tf32:  # dense TF32 runs at half the f16 rate
        peak /= 2
    print(f"card: {card} | arch {device_arch()} | torch {torch.__version__} | search {args.search}", flush=True)
    log_dir = Path(args.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    opts = RunOptions(repeat=3, min_repeat_ms=20.0, timeout_s=60.0)
    rows = []
    for name in [n for n in args.workloads.split(",") if n]:
        task = ansor.create_task(workloads.get(name), name=name, target="cuda", tf32=args.tf32)
        log = log_dir / f"{name}{'.tf32' if args.tf32 else ''}.cuda.jsonl"

        def count() -> int:
            return len([r for r in load_records(log) if r.task.hash == task.hash]) if log.exists() else 0

        if args.sweep:
            sweep(task, log, opts, args.fix)
        if args.measure:
            by_name = {sk.name: sk for sk in generate_sketches(task)}
            for item in args.measure:
                sk_name, _, text = item.partition("=")
                if sk_name not in by_name:
                    sys.exit(f"--measure {item[:60]}: {task.name} has no sketch {sk_name!r} "
                             f"(its sketches: {', '.join(by_name)})")
                sk = by_name[sk_name]
                knobs = sk.complete(json.loads(text))
                bad = sk.validate(knobs)
                if bad is not None:
                    sys.exit(f"--measure {item[:60]}: not a valid annotation of {task.name}'s {sk_name}: {bad}")
                measure_into_log(task, log, opts, sk, [knobs])
        done = count()
        while not args.report_only and done < args.trials and time.perf_counter() - t_start < args.budget_s:
            goal = min(args.trials, done + args.batch_size)
            ansor.tune(task, trials=goal, log_path=log, seed=args.seed + done, batch_size=args.batch_size,
                       search=args.search, run_options=opts, callback=TableProgress(verbose=0))
            now = count()
            if now == done:
                break
            done = now
        recs = [r for r in load_records(log) if r.task.hash == task.hash] if log.exists() else []
        best = best_record(recs)
        row: dict = {"workload": name, "trials": len(recs), "ok": sum(r.error is None for r in recs),
                     "gflop": task.flops / 1e9, "by_sketch": {}}
        for r in recs:
            if r.error is None:
                sk = r.schedule.sketch
                row["by_sketch"][sk] = min(row["by_sketch"].get(sk, float("inf")), r.latency)
        row["errors"] = sorted({(r.error or "")[:120] for r in recs if r.error})[:5]
        if best is None:
            rows.append(row)
            print(json.dumps(row), flush=True)
            continue
        sketch = next(sk for sk in generate_sketches(task) if sk.name == best.schedule.sketch)
        kernel = compile_task_cuda(task, sketch.script(best.schedule.values()))
        inputs = make_inputs(task)
        run_base, to_np = torch_cuda_fn(name, inputs, "cuda")
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # the reference: exact fp32
        ref = to_np(run_base())
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = args.tf32
        bad = check_task_outputs(task, kernel.run(inputs), [ref])
        row.update(best_sketch=best.schedule.sketch, best_knobs=best.schedule.values(), logged_s=best.latency,
                   verified_vs_torch=bad is None, mismatch=bad)
        number = max(3, int(0.2 / max(best.latency, 1e-6)))
        run_half = None
        if name.startswith("matmul-"):
            a, b = (torch_tensor(x, "cuda") for x in inputs)
            run_half = (lambda: a @ b)
        base = BASELINE.get(name.split("-")[0], "PyTorch")
        if not name.endswith(("-f16", "-bf16")):  # an f32 workload: f32 tensors and result
            base = base.replace(" half tensors (half result)", " f32 tensors").replace("channels_last", "NCHW")
        row["baseline"] = base + (", allow_tf32" if args.tf32 else "")
        raw: dict[str, list[float]] = {k: [] for k in ("ours_s", "ours_kernel_s", "base_s", "base_kernel_s",
                                                       "cublas_half_s")}

        def is_kernel(key: str) -> bool:  # every kernel of the call (ours: one; PyTorch's: all of them)
            return not any(w in key.lower() for w in ("memcpy", "memset"))

        for _ in range(args.rounds):  # alternating rounds
            raw["ours_s"].append(min(kernel.time(inputs, number) / number for _ in range(3)))
            raw["ours_kernel_s"].append(cupti_us(lambda: kernel.time(inputs, 1), 20, is_kernel) * 1e-6)
            raw["base_s"].append(time_torch_cuda(run_base)[0])
            raw["base_kernel_s"].append(cupti_us(run_base, 20, is_kernel) * 1e-6)
            if run_half is not None:
                raw["cublas_half_s"].append(time_torch_cuda(run_half)[0])
        med = {k: statistics.median(v) for k, v in raw.items() if v}
        row.update(rounds=raw, median=med)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(f"card {card} (dense {'TF32' if args.tf32 else 'f16'} peak {peak} TFLOP/s); medians of {args.rounds} "
          "alternating rounds")
    hdr = (f"{'workload':<28} {'trials':>6} {'sketch':>6} {'ours µs':>8} {'kern µs':>8} {'TFLOP/s':>8} {'%peak':>6} "
           f"{'baseline µs':>16} {'kern µs':>8} {'cuBLAS f16out µs':>16} {'ours/base (kernel)':>21} {'ok':>3}  baseline")
    print(hdr)
    nan = float("nan")
    for r in rows:
        m = r.get("median", {})
        ours, ok_k = m.get("ours_s"), m.get("ours_kernel_s")
        cb, cbk, cbh = m.get("base_s"), m.get("base_kernel_s"), m.get("cublas_half_s")
        t = ok_k or ours
        tf = r["gflop"] / t / 1e3 if t else nan
        print(f"{r['workload']:<28} {r['trials']:>6} {r.get('best_sketch', '-'):>6} {ours * 1e6 if ours else nan:>8.1f} "
              f"{ok_k * 1e6 if ok_k else nan:>8.1f} {tf:>8.1f} {100 * tf / peak if peak else nan:>5.1f}% "
              f"{cb * 1e6 if cb else nan:>16.1f} {cbk * 1e6 if cbk else nan:>8.1f} {cbh * 1e6 if cbh else nan:>16.1f} "
              f"{(cbk / ok_k) if (cbk and ok_k) else nan:>20.3f}x {'yes' if r.get('verified_vs_torch') else 'NO':>3}  "
              f"{r.get('baseline', '')}")
    print(f"(ours/base > 1 means faster than the baseline; total {time.perf_counter() - t_start:.0f} s)")
    if args.json:
        out = {"command": " ".join(["python -m bench.tensor_core", *sys.argv[1:]]), "card": card,
               "peak_tflops": peak, "tf32": args.tf32, "provenance": provenance("local", target="cuda"), "rows": rows}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.tensor_core [--help]")
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()

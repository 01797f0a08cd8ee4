"""Benchmark: tune matmul-1024 (fp32) and compare with the BLAS libraries at hand: numpy's (OpenBLAS)
and PyTorch's `torch.matmul` (oneMKL on x86), the stronger one headlined.

    python -m bench.matmul [--trials 200] [--size 1024] [--log bench/out/matmul-1024.jsonl] [--threads N]
                           [--rounds 5] [--results results/matmul-1024.json] [--no-naive]

Prints the host, the measured f32 FMA peak of the cores used
(`ansor.targets.cpu.lowering.fma_peak_gflops`, measured before tuning and after every round; the
best counts, as the host is shared), each BLAS library with its version and the core type / vector width of the kernel it dispatched
(numpy.show_config + threadpoolctl; torch's MKL), then a table of medians (min–max) over
--rounds alternating rounds, all with the same thread count: our tuned program called from Python
(`ansor.compile(...)(a, b)`, output allocation included, timed the way numpy and PyTorch are) and
in its native loop, numpy `a @ b`, `torch.matmul` (in a process of its own: two OpenMP runtimes in
one process slow both) and the naive loops (the untransformed program; secondary). Each program's
share of the FMA peak and its GFLOP/s ratio to ours sit next to it. Writes --results for
tools/render_results.py. The log resumes: a second run with the same --log only measures the
missing trials. Tuning runs in this process; the timings then run in a fresh one (the script
re-runs itself with --report-only): XGBoost's OpenMP runtime, loaded by the tuner, slows our
kernels 1.3-2.7x in the process it is loaded in.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

#: Labels of the BLAS baselines (ours and the naive loops: `common.CALL`, `NATIVE`, `NAIVE`).
NUMPY, TORCH = "numpy a @ b", "torch.matmul"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log", default=None)
    ap.add_argument("--rounds", type=int, default=5, help="alternating timing rounds (>= 5)")
    ap.add_argument("--no-naive", action="store_true", help="do not time the naive loops")
    ap.add_argument("--results", help="results file (default results/matmul-SIZE.json)")
    ap.add_argument("--report-only", action="store_true",
                    help="no tuning: time the best record of --log (after tuning, the script re-runs itself "
                         "this way, so the timings run in a fresh process)")
    args = ap.parse_args()
    if args.rounds < 5:
        ap.error("--rounds: tables hold medians over >= 5 alternating rounds")
    # numpy/OpenBLAS and torch/MKL must use the same number of threads as the tuned program.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)

    import ansor
    import numpy as np
    from ansor.frontend import workloads
    from ansor.measure.measurer import RunOptions, make_inputs
    from ansor.targets.cpu.lowering import fma_peak_gflops
    from ansor.targets.cpu.params import VECTOR_BITS
    from ansor.tuning.progress import TableProgress

    from bench.common import (
        CALL,
        NAIVE,
        NATIVE,
        OUT,
        alternate,
        best_record_lines,
        calls_for,
        describe_numpy_blas,
        describe_torch_blas,
        host_line,
        host_meta,
        loop_time,
        native_time,
        numpy_blas,
        reexec_fresh,
        render,
        results_path,
        start_torch_op,
        write_results,
    )

    n = args.size
    name = f"matmul-{n}"
    log = Path(args.log) if args.log else OUT / f"{name}.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    text = workloads.matmul(n, n, n)
    task = ansor.create_task(text, name=name)
    meta = host_meta(args.threads)
    if not args.report_only:
        print(host_line(meta), flush=True)
        res = ansor.tune(task, trials=args.trials, log_path=log, seed=args.seed,
                         run_options=RunOptions(threads=args.threads), callback=TableProgress())
        print(f"trials: {args.trials} ({res.errors} failed this run)", flush=True)
        reexec_fresh()  # time in a fresh process (XGBoost's OpenMP runtime is loaded here now)
    # First, before anything else in this process runs an OpenMP region (the runtime reads
    # OMP_NUM_THREADS once).
    peak = fma_peak_gflops(threads=args.threads)
    nblas = numpy_blas()
    print(host_line(meta))
    print(f"measured f32 FMA peak: {peak:.1f} GFLOP/s ({args.threads} threads, {VECTOR_BITS}-bit vectors)")
    print(f"BLAS: {describe_numpy_blas(nblas)}", flush=True)

    tuned = ansor.compile(text, log=log, threads=args.threads)
    a, b = make_inputs(task)
    ref = a @ b
    np.testing.assert_allclose(tuned(a, b), ref, rtol=1e-3, atol=1e-2)
    n_call = calls_for(lambda: tuned(a, b))
    cands = {CALL: lambda: loop_time(lambda: tuned(a, b), number=n_call),
             NATIVE: lambda: native_time(tuned, [a, b]),
             NUMPY: lambda: loop_time(lambda: a @ b)}
    kernels = {CALL: f"tuned MLIR, {VECTOR_BITS}-bit", NATIVE: f"tuned MLIR, {VECTOR_BITS}-bit"}
    kb = nblas.get("kernel_bits")
    rt = nblas.get("runtime") or {}
    kernels[NUMPY] = f"OpenBLAS {rt.get('version', '?')}, {rt.get('architecture', '?')} kernel ({kb or '?'}-bit)"
    descs = {NUMPY: describe_numpy_blas(nblas)}
    notes = []
    if kb and kb < VECTOR_BITS:
        notes.append(f"numpy's OpenBLAS dispatches a {kb}-bit {rt.get('architecture')} kernel on this "
                     f"{VECTOR_BITS}-bit host; torch.matmul is the stronger baseline to compare with.")
    started = None
    try:
        started = start_torch_op(name, [a, b], args.threads, OUT / "matmul-tmp")
    except (OSError, RuntimeError) as exc:
        notes.append(f"torch.matmul not timed: {exc}")
    tinfo = {}
    if started is not None:
        child, y_torch = started
        np.testing.assert_allclose(y_torch, ref, rtol=1e-3, atol=1e-2)
        tinfo = child.hello.get("info", {})
        descs[TORCH] = describe_torch_blas(tinfo)
        mkl = tinfo.get("mkl_version", "MKL").replace("Intel(R) oneAPI Math Kernel Library Version", "oneMKL")
        kernels[TORCH] = (f"{mkl.split(' for ')[0].split('-')[0]} SGEMM, "
                          + ("Intel code path" if tinfo.get("mkl_sees_intel_cpu")
                             else "non-Intel CPU path" if "mkl_sees_intel_cpu" in tinfo else "code path not reported"))
        cands[TORCH] = lambda: child.ask()["latency_s"]
    print(f"BLAS: {descs.get(TORCH, 'torch.matmul: not available')}")
    if not args.no_naive:
        naive = ansor.compile(text, threads=args.threads)
        naive(a, b)
        cands[NAIVE] = lambda: native_time(naive, [a, b], number=1, repeats=1)
        kernels[NAIVE] = "untransformed program"
    print(f"timing: {args.rounds} alternating rounds of {', '.join(cands)}", flush=True)
    peaks = [peak]

    def remeasure_peak(_r: int, _this: dict) -> None:  # the host is shared: the best measurement counts
        peaks.append(fma_peak_gflops(threads=args.threads))

    try:
        times = alternate(cands, args.rounds, on_round=remeasure_peak)
    finally:
        if started is not None:
            started[0].close()
    order = [k for k in (CALL, NATIVE, NUMPY, TORCH, NAIVE) if k in times]
    measured = sum(r.task.hash == task.hash for r in ansor.load_records(log))  # the log's trials, resumed runs included
    body = {"title": f"{name} fp32 vs BLAS ({measured} trials)",
            "settings": {"trials": measured, "size": n, "rounds": args.rounds, "threads": args.threads,
                         "seed": args.seed},
            "flops": task.flops, "fma_peak_gflops": max(peaks), "fma_peak_rounds": peaks,
            "fma_peak_vector_bits": VECTOR_BITS,
            "blas": {"numpy": nblas, "torch": tinfo}, "baselines": descs, "kernels": kernels,
            "times": {k: times[k] for k in order}, "notes": notes,
            "records": best_record_lines([log], [task])}
    path = write_results(results_path(name, args.results), "matmul", meta, body)
    print()
    print(render(json.loads(path.read_text())))
    print(f"\nresults: {path}")


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.matmul [--help]")
    main()

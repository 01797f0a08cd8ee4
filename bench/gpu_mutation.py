"""Benchmark: the GPU's own mutation policy (TVM's GPU weights) against the mix it had before.

    python -m bench.gpu_mutation [--workload matmul-2048] [--trials 64] [--seeds 0,1] [--rounds 5]

Runs on the GPU host, from the repository root:
`bash .gpu/with-mlir.sh env PYTHONPATH=python python3 -m bench.gpu_mutation ...`.
Two policies tune the same cuda task from scratch, for each seed, with the learned search:

- `tvm-gpu` (now the cuda target's): tile sizes 0.90, auto-unroll 0.10 (TVM v0.19
  `sketch_policy.cc`, GPU);
- `before`: what the GPU search did until issue 26 — TVM's CPU mix, where the GPU unroll knob was
  filed as a compute-location knob (0.05), the CPU's unroll kind (0.04) had no knob to act on,
  and "parallel" (0.01) moved factors between the block and vthread levels. Expressed in today's
  kinds: tile 0.90, unroll 0.05, parallel 0.01.

Reported: the best latency each run's tuner measured after each batch, and the best program of
each policy (over its seeds) rebuilt in this process and timed in `--rounds` alternating rounds
(native loop; launch + kernel + synchronize per call, as the tuner times it), with medians.
Writes `results/gpu-mutation-<workload>.json` (or `--out`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

POLICIES = {
    "tvm-gpu": None,  # the target's own
    "before": {"tile": 0.90, "unroll": 0.05, "parallel": 0.01},
}


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.gpu_mutation", description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="matmul-2048")
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--log-dir", default="bench/out/gpu-mutation")
    ap.add_argument("--fresh", action="store_true", help="discard the logs of earlier runs (default: keep finished ones)")
    ap.add_argument("--out", default=None, help="results file (default results/gpu-mutation-WORKLOAD.json)")
    args = ap.parse_args()

    import ansor
    from ansor import config
    from ansor.frontend import workloads
    from ansor.measure.measurer import RunOptions, make_inputs
    from ansor.targets import get_target
    from ansor.tuning.records import best_record, load_records

    from bench.common import alternate, host_meta, results_path, stats, write_results

    config.WORKER_MEMORY_MB = 0
    target = get_target("cuda")
    task = ansor.create_task(workloads.get(args.workload), name=args.workload, target="cuda")
    seeds = [int(s) for s in args.seeds.split(",")]
    log_dir = Path(args.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    opts = RunOptions(repeat=3, min_repeat_ms=20.0, timeout_s=60.0)
    curves: dict[str, dict[int, list[float | None]]] = {p: {} for p in POLICIES}
    wall: dict[str, float] = {p: 0.0 for p in POLICIES}
    for seed in seeds:
        for policy, weights in POLICIES.items():  # alternate the policies within each seed
            log = log_dir / f"{args.workload}.{policy}.s{seed}.jsonl"
            if args.fresh:
                log.unlink(missing_ok=True)
            elif log.exists() and len(load_records(log)) >= args.trials:  # a finished run: keep it
                recs = load_records(log)
                curves[policy][seed] = [best_record(recs[: min(len(recs), b)]).latency
                                        for b in range(args.batch_size, args.trials + 1, args.batch_size)]
                print(f"{policy} seed {seed}: from {log}", flush=True)
                continue
            t0 = time.perf_counter()
            done, curve = 0, []
            options = {} if weights is None else {"mutation_weights": weights}
            while done < args.trials:
                done = min(args.trials, done + args.batch_size)
                ansor.tune(task, trials=done, log_path=log, seed=seed, batch_size=args.batch_size,
                           run_options=opts, search_options=options)
                best = best_record(load_records(log))
                curve.append(best.latency if best is not None else None)
            wall[policy] += time.perf_counter() - t0
            curves[policy][seed] = curve
            print(f"{policy} seed {seed}: best after each batch (ms): "
                  + " ".join(f"{c * 1e3:.3f}" if c else "-" for c in curve), flush=True)

    inputs = make_inputs(task)
    best = {}
    for policy in POLICIES:
        recs = [r for s in seeds for r in load_records(log_dir / f"{args.workload}.{policy}.s{s}.jsonl")]
        best[policy] = best_record(recs)
    kernels = {p: target.compile(task, r.script) for p, r in best.items() if r is not None}

    def timer(kernel):
        def run() -> float:
            n = max(1, int(0.2 / max(kernel.time(inputs, 1), 1e-6)))
            return min(kernel.time(inputs, n) / n for _ in range(3))
        return run

    times = alternate({p: timer(k) for p, k in kernels.items()}, args.rounds)
    med = {p: statistics.median(ts) for p, ts in times.items()}
    for p, m in med.items():
        print(f"{p}: best program {m * 1e6:.1f} us median of {args.rounds} rounds "
              f"({task.flops / m / 1e12:.2f} TFLOP/s)")
    if len(med) == 2:
        print(f"tvm-gpu / before: {med['tvm-gpu'] / med['before']:.3f}x latency")
    meta = host_meta(0, "cuda")
    body = {
        "workload": args.workload, "trials": args.trials, "batch_size": args.batch_size, "seeds": seeds,
        "policies": {p: (w if w is not None else target.mutation_weights) for p, w in POLICIES.items()},
        "curves_s": curves, "tuning_wall_s": wall,
        "final": {p: {"key": best[p].key, "rounds_s": times.get(p), "stats": stats(times[p]) if p in times else None}
                  for p in POLICIES if best[p] is not None},
    }
    path = write_results(results_path(f"gpu-mutation-{args.workload}", args.out), "gpu-mutation", meta, body)
    print(f"wrote {path}")
    print(json.dumps({p: med.get(p) for p in POLICIES}))


if __name__ == "__main__":
    if not __package__:
        raise SystemExit("run from the repository root as a module: python -m bench.gpu_mutation [--help]")
    main()

"""Where a tuned network's time goes: each task's best record re-measured warm and cold, and the model.

    python -m bench.warm_cold NAME LOG [--winograd M] [--threads N]

NAME is a built-in network (its model is imported into bench/out/NAME.mlir by bench.network, or
here). Each task's best record is timed by the tuner's measurer twice: warm (repeated calls, what
the tuner optimizes and the logged estimate sums) and cold (TVM's enable_cpu_cache_flush: one call
after evicting the caches). Then the compiled model is timed (median of 20 calls). Where the model
sits near the cold sum, its tasks run memory-bound inside it and warm task timings mislead.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name")
    ap.add_argument("log")
    ap.add_argument("--winograd", type=int, default=0, choices=[0, 2, 4])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()

    from ansor.compile import compile_network
    from ansor.frontend.partition import extract_tasks
    from ansor.measure.measurer import MeasureInput, RunOptions, create_measurer
    from ansor.measure.provenance import cpu_model
    from ansor.tuning.records import best_record, load_records

    from bench.common import model_text, time_calls

    net = extract_tasks(model_text(a.name)[0], name=a.name, winograd=a.winograd)
    recs = load_records(a.log)
    times: dict[bool, list[float]] = {}
    for flush in (False, True):
        measurer = create_measurer(RunOptions(threads=a.threads, cache_flush=flush))
        try:
            times[flush] = []
            for t in net.tasks:
                r = best_record(recs, t.hash, t.target, current_only=True)
                res = measurer.baseline(t) if r is None else measurer.measure([MeasureInput(t, r.schedule, r.script)])[0]
                times[flush].append(res.latency)
        finally:
            measurer.close()
    print(f"machine: {cpu_model()}, {a.threads} threads; {a.name}, {len(net.tasks)} tasks, log {a.log}")
    print(f"{'task':<24} {'weight':>6} {'warm ms':>9} {'cold ms':>9} {'cold/warm':>10}")
    for t, w, c in zip(net.tasks, times[False], times[True], strict=True):
        print(f"{t.name:<24} {t.weight:>6} {w * 1e3:>9.3f} {c * 1e3:>9.3f} {c / w:>9.2f}x")
    warm = sum(t.weight * v for t, v in zip(net.tasks, times[False], strict=True))
    cold = sum(t.weight * v for t, v in zip(net.tasks, times[True], strict=True))
    fn = compile_network(net, a.log, threads=a.threads)
    x = [np.random.default_rng(0).standard_normal(s.shape).astype(s.numpy_dtype()) for s in net.inputs]
    med, low = time_calls(fn, x)
    print(f"sum over tasks (x weight): warm {warm * 1e3:.3f} ms, cold {cold * 1e3:.3f} ms; "
          f"model {med * 1e3:.3f} ms (median of 20 calls; min {low * 1e3:.3f})")
    return 0


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.warm_cold NAME LOG [--help]")
    sys.exit(main())

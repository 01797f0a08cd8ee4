"""Run one tensor-core annotation of a workload in a loop, for a profiler to attach to.

    ncu --section SpeedOfLight ... python -m bench.tc_profile WORKLOAD 'KNOBS_JSON' [--calls 5]

KNOBS_JSON: the `tc.*` knobs (missing ones take `tensorcore.DEFAULT`). Builds the kernel the
tuner would (`compile_task_cuda`), checks it once against the reference (poisoned outputs), then
calls it `--calls` times. Runs on the GPU host from the repository root (runtime as in docs/gpu.md).
"""

from __future__ import annotations

import argparse
import json
import sys


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload")
    ap.add_argument("knobs", help="JSON object of tc.* knob values")
    ap.add_argument("--calls", type=int, default=5)
    args = ap.parse_args()

    import ansor
    from ansor.frontend import workloads
    from ansor.measure.measurer import reference_outputs
    from ansor.measure.verify import check_task_outputs, poisoned
    from ansor.targets import generate_sketches
    from ansor.targets.cuda.lowering import compile_task_cuda
    from ansor.targets.cuda.tensorcore import DEFAULT, TcSketch

    task = ansor.create_task(workloads.get(args.workload), name=args.workload, target="cuda")
    sk = next((s for s in generate_sketches(task) if isinstance(s, TcSketch)), None)
    if sk is None:
        sys.exit(f"{args.workload}: no tensor-core sketch")
    values = {**{f"tc.{k}": v for k, v in DEFAULT.items()}, **json.loads(args.knobs)}
    why = sk.validate(values)
    if why:
        sys.exit(f"{args.workload}: {why}")
    kernel = compile_task_cuda(task, sk.script(values))
    inputs, refs, _ = reference_outputs(task)
    bad = check_task_outputs(task, kernel.run(inputs, poisoned(task.outputs)), refs)
    print(f"{args.workload} {values}: {'verified' if bad is None else bad}", flush=True)
    kernel.time(inputs, args.calls)
    print(f"ran {args.calls} calls", flush=True)


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.tc_profile ...")
    main()

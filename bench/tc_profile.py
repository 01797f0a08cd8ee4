"""Run one annotation of a workload (or its PyTorch baseline) in a loop, for a profiler to attach to.

    ncu --section SpeedOfLight ... python -m bench.tc_profile WORKLOAD 'KNOBS_JSON' [--calls 5]
    ncu ... python -m bench.tc_profile WORKLOAD @LOG.cuda.jsonl      # the log's best record
    ncu ... python -m bench.tc_profile WORKLOAD --baseline           # PyTorch's kernels

KNOBS_JSON: the knobs of one sketch: `tc.*` for the tensor-core sketch (missing ones take
`tensorcore.DEFAULT`), otherwise those of the sketch whose knobs they are (`op1.*` of the
CUDA-core sketch, ...). Builds the kernel the tuner would (`compile_task_cuda`), checks it once
against the reference (poisoned outputs), then calls it `--calls` times. `--baseline` calls
`bench.common.torch_cuda_fn`'s PyTorch program instead (TF32 off). Runs on the GPU host from the
repository root (runtime as in docs/gpu.md).
"""

from __future__ import annotations

import argparse
import json
import sys


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload")
    ap.add_argument("knobs", nargs="?", default="{}", help="JSON object of knob values, or @LOG (its best record)")
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--baseline", action="store_true", help="run the PyTorch baseline instead")
    args = ap.parse_args()

    import ansor
    from ansor.frontend import workloads
    from ansor.measure.measurer import reference_outputs
    from ansor.measure.verify import check_task_outputs, poisoned
    from ansor.targets import generate_sketches
    from ansor.targets.cuda.lowering import compile_task_cuda
    from ansor.targets.cuda.tensorcore import DEFAULT, TcSketch

    task = ansor.create_task(workloads.get(args.workload), name=args.workload, target="cuda")
    if args.baseline:
        import torch

        from ansor.measure.measurer import make_inputs
        from bench.common import torch_cuda_fn

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        run, _ = torch_cuda_fn(args.workload, make_inputs(task), "cuda")
        for _ in range(args.calls):
            run()
        torch.cuda.synchronize()
        print(f"ran {args.calls} PyTorch calls", flush=True)
        return
    if args.knobs.startswith("@"):
        from ansor.tuning.records import best_record, load_records

        best = best_record([r for r in load_records(args.knobs[1:]) if r.task.hash == task.hash])
        if best is None:
            sys.exit(f"{args.knobs[1:]}: no correct record of {args.workload}")
        name, values = best.schedule.sketch, best.schedule.values()
        sk = next(s for s in generate_sketches(task) if s.name == name)
    else:
        values = json.loads(args.knobs)
        if not values or any(k.startswith("tc.") for k in values):
            sk = next((s for s in generate_sketches(task) if isinstance(s, TcSketch)), None)
            if sk is None:
                sys.exit(f"{args.workload}: no tensor-core sketch")
            values = {**{f"tc.{k}": v for k, v in DEFAULT.items()}, **values}
        else:
            sk = next((s for s in generate_sketches(task) if set(values) <= {k.name for k in s.knobs}), None)
            if sk is None:
                sys.exit(f"{args.workload}: no sketch has the knobs {sorted(values)}")
    why = sk.validate(values)
    if why:
        sys.exit(f"{args.workload}: {why}")
    kernel = compile_task_cuda(task, sk.script(values))
    inputs, refs, _ = reference_outputs(task)
    bad = check_task_outputs(task, kernel.run(inputs, poisoned(task.outputs)), refs)
    print(f"{args.workload} {sk.name} {values}: {'verified' if bad is None else bad}", flush=True)
    kernel.time(inputs, args.calls)
    print(f"ran {args.calls} calls", flush=True)


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.tc_profile ...")
    main()

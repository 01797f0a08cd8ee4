"""A whole model on the GPU: tuned (or untuned) ansor network against PyTorch on the same card.

    python -m bench.gpu_network MODEL.mlir[bc] --network resnet18 [--log LOG [--no-untuned]] [--rounds 5] [--json OUT]

MODEL is the model as `ansor import` writes it (text), or as MLIR bytecode (`--save-bytecode` on
the machine that imported it: half the size, for carrying to a GPU host without torch-mlir).
`--network` names the built-in PyTorch network (`ansor.frontend.models`) the model was imported
from: PyTorch builds it again here, from the same seeds, on the GPU.

What it does: extracts the tasks for the cuda target, compiles the network with the best record of
each task in LOG (`ansor.compile`'s `compile_network`) and untuned, checks both against the model
compiled untuned for the CPU (an independent lowering) and PyTorch's output against the same
reference, then times in alternating rounds: ours (one synchronisation per model call), PyTorch
eager (`torch.no_grad`, CUDA events over back-to-back calls) and PyTorch replayed from a CUDA graph.
Prints the card and the medians; `--json` writes every round.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path


def load_text(path: Path) -> str:
    """MLIR text of `path` (text, or bytecode converted back to text)."""
    from ansor.core.task import read_mlir_file

    return read_mlir_file(path)


def save_bytecode(text_path: Path, out: Path) -> None:
    import io

    from mlir import ir

    from ansor.core import native

    native.register_everything()
    with ir.Context():
        module = ir.Module.parse(text_path.read_text())
        buf = io.BytesIO()
        module.operation.write_bytecode(buf)
    out.write_bytes(buf.getvalue())
    print(f"{out}: {len(buf.getvalue()) / 2**20:.1f} MiB of bytecode")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path)
    ap.add_argument("--network", help="the built-in PyTorch network MODEL was imported from (PyTorch baseline)")
    ap.add_argument("--log", help="tuning log (cuda records); none: untuned only")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--number", type=int, default=50, help="model calls per timing")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--no-untuned", action="store_true",
                    help="with --log: leave out the untuned program (its compile and timing)")
    ap.add_argument("--save-bytecode", type=Path, help="only convert MODEL (text) to bytecode here, and stop")
    args = ap.parse_args()
    if args.save_bytecode:
        save_bytecode(args.model, args.save_bytecode)
        return

    import numpy as np

    from ansor.compile import compile_network, extract_for_log
    from ansor.frontend.partition import extract_tasks
    from ansor.measure.measurer import make_inputs
    from ansor.measure.verify import check_task_outputs

    from bench.common import alternate, host_meta, time_torch_cuda, write_results
    from bench.gpu import card, time_graphed

    t0 = time.perf_counter()
    text = load_text(args.model)
    net = extract_for_log(text, args.log, target="cuda", name=args.network or args.model.stem)
    whole = net.as_task()
    print(f"card: {card()} | {net.name}: {len(net.tasks)} tasks, {len(net.calls)} calls, "
          f"{net.flops / 1e9:.3f} GFLOP ({time.perf_counter() - t0:.0f} s)", flush=True)
    inputs = make_inputs(whole)
    ref_net = extract_tasks(text, target="cpu", split=True)
    ref = compile_network(ref_net)(*inputs)
    refs = list(ref) if isinstance(ref, tuple) else [ref]
    print(f"CPU reference computed ({time.perf_counter() - t0:.0f} s)", flush=True)

    programs = {}
    if args.log:
        programs["ansor tuned"] = compile_network(net, args.log)
    if not (args.log and args.no_untuned):
        programs["ansor untuned"] = compile_network(net, None)
    checks = {}
    for label, fn in programs.items():
        out = fn(*inputs)
        outs = list(out) if isinstance(out, tuple) else [out]
        bad = check_task_outputs(whole, outs, refs)
        checks[label] = bad or "ok"
        print(f"{label}: {fn.tuned_tasks} of {len(net.tasks)} tasks tuned, on the CPU: "
              f"{fn._kernel.host_tasks or 'none'}; vs the CPU reference: {checks[label]} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
        if bad:
            sys.exit(f"error: {label} is wrong: {bad}")

    timers = {label: (lambda fn=fn: fn.time(*inputs, number=args.number))  # seconds per call
              for label, fn in programs.items()}
    torch_info = {}
    if args.network:
        import torch

        from ansor.frontend.models import NETWORKS

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        factory, _shapes = NETWORKS[args.network]
        model = factory().cuda().eval()
        xs = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in inputs]
        with torch.no_grad():
            y = model(*xs)
        ys = [t.float().cpu().numpy() for t in (y if isinstance(y, tuple) else (y,))]
        torch_check = check_task_outputs(whole, ys, refs) or "ok"
        torch_info = {"torch": torch.__version__, "check_vs_cpu_reference": torch_check}
        print(f"PyTorch {torch.__version__} vs the CPU reference: {torch_check}", flush=True)

        def eager() -> None:
            with torch.no_grad():
                model(*xs)

        def eager_time() -> float:
            return time_torch_cuda(eager, args.number)[0]

        timers["PyTorch eager"] = eager_time
        graph_time, why = time_graphed(eager, args.number)
        if graph_time is not None:

            def graphed() -> float | None:
                t, _why = time_graphed(eager, args.number)
                return t[0] if t else None

            timers["PyTorch CUDA graph"] = graphed
        else:
            print(f"no CUDA graph: {why}")
    times = alternate(timers, args.rounds)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med.get("PyTorch eager")
    print(f"{'program':<22} {'median ms':>10}  {'vs PyTorch eager':>16}  rounds (ms)")
    for k, v in med.items():
        rel = f"{base / v:>15.2f}x" if base else ""
        print(f"{k:<22} {v * 1e3:>10.3f}  {rel:>16}  {' '.join(f'{t * 1e3:.3f}' for t in times[k])}")
    if args.json:
        meta = {**host_meta(0, "cuda"), "card": card()}
        body = {"model": str(args.model), "network": args.network, "log": args.log, "tasks": len(net.tasks),
                "calls": len(net.calls), "gflop": net.flops / 1e9, "checks": checks, **torch_info,
                "host_tasks": {k: fn._kernel.host_tasks for k, fn in programs.items()},
                "tuned_tasks": {k: fn.tuned_tasks for k, fn in programs.items()},
                "rounds_s": times, "median_s": med}
        print(f"wrote {write_results(Path(args.json), 'gpu-network', meta, body)}")


if __name__ == "__main__":
    main()

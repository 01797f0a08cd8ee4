"""PyTorch side of bench.network, run as its own process (torch never shares a process with
our MLIR): build a built-in network by name, run it on saved inputs, time it as PyTorch runs it.

    python -m bench.torch_network NAME --threads T --inputs in0.npy [...] --out out.npy [--serve]
        [--variants eager,jit,compile]

Variants (each in both memory layouts for 4-D inputs; the faster one counts, per round):
  eager    the module as is, under `torch.inference_mode()`
  jit      `torch.jit.freeze(torch.jit.script(model))` (`torch.jit.trace` where scripting fails):
           TorchScript with weights folded (conv-bn folding, constant propagation)
  compile  `torch.compile(model)` (Inductor, C++ codegen): where it cannot compile here the hello
           line says why and the variant is left out
Saves the eager output; the hello line (JSON) lists the variants that work, why others do not,
each one's max |difference| from eager, and torch's BLAS. With --serve it then answers one line
per request {"variant": V}: {"median_s": median of --repeat calls after 0.1 s of warm-up calls
(`common.warm_up`, as for ours), "min_s",
"layout"}; without, it prints one such answer per variant.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback

import numpy as np
import torch

LABELS = {"eager": "PyTorch eager", "jit": "TorchScript frozen", "compile": "torch.compile"}


def _models():
    # ansor/frontend/models.py imports nothing from ansor: load it by path, not through the
    # package (whose import loads MLIR, which never shares a process with torch here).
    from bench.common import ansor_source, load_module

    return load_module(ansor_source("frontend", "models.py"), "ansor_models")


def _build(factory, variant: str, xs: list[torch.Tensor], layout: str):
    """A callable running `variant` of a fresh model on `xs`, and how it was built."""
    model = factory().eval()
    if layout == "channels_last":
        model = model.to(memory_format=torch.channels_last)
    if variant == "eager":
        return model, "eager"
    if variant == "jit":
        try:
            return torch.jit.freeze(torch.jit.script(model)), "torch.jit.freeze(torch.jit.script(model))"
        except Exception:  # noqa: BLE001 (scripting fails on some Python constructs: trace instead)
            return torch.jit.freeze(torch.jit.trace(model, tuple(xs))), "torch.jit.freeze(torch.jit.trace(model))"
    if variant == "compile":
        return torch.compile(model), "torch.compile(model)"
    raise ValueError(variant)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("name")
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--inputs", nargs="+", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--variants", default="eager,jit,compile")
    p.add_argument("--serve", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    from bench.common import serve, torch_blas, warm_up

    factory, _ = _models().NETWORKS[a.name]
    xs = [torch.from_numpy(np.load(f)) for f in a.inputs]
    layouts = ("contiguous", "channels_last") if all(x.dim() == 4 for x in xs) else ("contiguous",)
    runs: dict[str, dict[str, tuple]] = {}  # variant -> layout -> (callable, inputs)
    how: dict[str, str] = {}
    notes: dict[str, str] = {}
    diffs: dict[str, float] = {}
    built: dict[str, float] = {}  # seconds to build and warm up, all layouts
    ref = None
    for variant in a.variants.split(","):
        for layout in layouts:
            ins = xs if layout == "contiguous" else [x.contiguous(memory_format=torch.channels_last) for x in xs]
            t0 = time.perf_counter()
            try:
                with torch.no_grad():
                    fn, how[variant] = _build(factory, variant, ins, layout)
                with torch.inference_mode():
                    out = fn(*ins)
                    for _ in range(2):  # (TorchScript profiles and optimizes on its first calls)
                        fn(*ins)
            except Exception as exc:  # noqa: BLE001 (report why a baseline is missing, do not crash)
                notes[variant] = (f"not timed: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}"
                                  f" ({layout} layout)")
                print(traceback.format_exc(), file=sys.stderr)
                runs.pop(variant, None)
                break
            y = (out[0] if isinstance(out, tuple) else out).contiguous().numpy()
            if ref is None:
                ref = y
                np.save(a.out, ref)
            diffs[variant] = max(diffs.get(variant, 0.0), float(np.max(np.abs(y - ref))))
            runs.setdefault(variant, {})[layout] = (fn, ins)
            built[variant] = built.get(variant, 0.0) + time.perf_counter() - t0
    if ref is None:
        print(json.dumps({"available": False, "notes": notes}))
        return

    def one(req: dict) -> dict:
        variant = req.get("variant", "eager")
        best = None
        for layout, (fn, ins) in runs[variant].items():
            with torch.inference_mode():
                warm_up(lambda fn=fn, ins=ins: fn(*ins))
                times = []
                for _ in range(a.repeat):
                    t0 = time.perf_counter()
                    fn(*ins)
                    times.append(time.perf_counter() - t0)
            if best is None or statistics.median(times) < best["median_s"]:
                best = {"median_s": statistics.median(times), "min_s": min(times), "layout": layout}
        return best

    for v, per_layout in runs.items():
        if v != "eager":
            how[v] += f"; built and warmed in {built[v]:.1f} s ({', '.join(per_layout)})"
    hello = {"available": True, "variants": list(runs), "labels": {v: LABELS[v] for v in runs},
             "how": how, "notes": notes, "max_diff_vs_eager": diffs, "info": torch_blas()}
    if a.serve:
        serve(hello, one)
        return
    print(json.dumps(hello))
    for v in runs:
        print(json.dumps({"variant": v, **one({"variant": v})}))


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.torch_network [--help]")
    main()

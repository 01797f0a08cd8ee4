"""PyTorch side of bench/network.py, run as its own process (torch never shares a process with
our MLIR): build a built-in network by name, run it on saved inputs, time it.

    python bench/torch_network.py NAME --threads T --inputs in0.npy [...] --out out.npy
    -> prints {"latency_s": median seconds per call, "min_s": fastest call, "threads": T,
       "layout": the faster memory layout} as JSON; saves the output
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("name")
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--inputs", nargs="+", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--repeat", type=int, default=20)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    # models.py imports nothing from ansor: load it by path, not through the package.
    spec = importlib.util.spec_from_file_location(
        "ansor_models", Path(__file__).resolve().parents[1] / "python" / "ansor" / "models.py")
    models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(models)
    factory, _ = models.NETWORKS[a.name]
    model = factory()
    xs = [torch.from_numpy(np.load(f)) for f in a.inputs]
    # Networks of 4-D inputs (convolutional) run in both memory layouts; the faster counts
    # (oneDNN's convolutions are often faster channels_last: a 1x1 conv2d 0.27 vs 1.85 ms here).
    best = None
    for layout in ("contiguous", "channels_last") if all(x.dim() == 4 for x in xs) else ("contiguous",):
        if layout == "channels_last":
            model = model.to(memory_format=torch.channels_last)
            xs = [x.contiguous(memory_format=torch.channels_last) for x in xs]
        with torch.inference_mode():
            out = model(*xs)
            for _ in range(3):
                model(*xs)
            times = []
            for _ in range(a.repeat):
                t0 = time.perf_counter()
                model(*xs)
                times.append(time.perf_counter() - t0)
        if best is None or statistics.median(times) < statistics.median(best[1]):
            best = (layout, times, out)
    layout, times, out = best
    np.save(a.out, (out[0] if isinstance(out, tuple) else out).contiguous().numpy())
    print(json.dumps({"latency_s": statistics.median(times), "min_s": min(times), "threads": a.threads,
                      "layout": layout}))


if __name__ == "__main__":
    main()

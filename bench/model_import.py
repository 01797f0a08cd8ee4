"""Import the built-in networks and check the untuned MLIR program against PyTorch.

    NAME --ansor.frontend.import_network (exporter process)--> MLIR text --create_task-->
    --lowering.compile_task(untuned)--> outputs  vs  frontend.torch_reference (exporter process)

Reports per network: export seconds (exporter process, torch-mlir), text size, untuned compile
seconds, one untuned run's seconds, and the largest absolute / relative difference from PyTorch.

    python -m bench.model_import                 # mlp small-cnn resnet18 bert-layer
    python -m bench.model_import resnet18 mobilenet-v2 --save out/
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import ansor
import numpy as np
from ansor.frontend import torch_import as frontend
from ansor.frontend.models import NETWORKS
from ansor.targets.cpu import lowering


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("networks", nargs="*", default=["mlp", "small-cnn", "resnet18", "bert-layer"])
    ap.add_argument("--save", type=Path, help="write NAME.mlir (and NAME.elided.mlir) into this folder")
    ap.add_argument("--threads", type=int, default=0, help="OpenMP / torch threads (default: all cores)")
    args = ap.parse_args()
    lowering.set_threads(args.threads or None)
    rows = []
    for name in args.networks:
        t0 = time.perf_counter()
        text = frontend.import_network(name)
        t_export = time.perf_counter() - t0
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            (args.save / f"{name}.mlir").write_text(text)
            (args.save / f"{name}.elided.mlir").write_text(frontend.import_network(name, elide_weights=True))
        rng = np.random.default_rng(0)
        inputs = [rng.standard_normal(s).astype(np.float32) for s in NETWORKS[name][1]]
        ref = frontend.torch_reference(name, inputs, threads=args.threads)
        t0 = time.perf_counter()
        task = ansor.create_task(text, name=name)
        kernel = lowering.compile_task(task, None)
        t_compile = time.perf_counter() - t0
        t0 = time.perf_counter()
        outs = kernel.run(inputs)
        t_run = time.perf_counter() - t0
        err = max(float(np.abs(o - r).max()) for o, r in zip(outs, ref, strict=True))
        rel = max(float(np.abs(o - r).max() / (np.abs(r).max() + 1e-30)) for o, r in zip(outs, ref, strict=True))
        rows.append((name, t_export, len(text) / 2**20, task.flops / 1e9, t_compile, t_run, err, rel))
        print(f"{name}: done", flush=True)
    print(f"{'network':<14} {'export s':>9} {'MiB':>7} {'GFLOP':>7} {'compile s':>10} {'run s':>7} "
          f"{'max |diff|':>11} {'rel':>9}")
    for name, te, mib, gf, tc, tr, err, rel in rows:
        print(f"{name:<14} {te:>9.1f} {mib:>7.1f} {gf:>7.2f} {tc:>10.1f} {tr:>7.2f} {err:>11.2e} {rel:>9.1e}")


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.model_import [--help]")
    main()

"""Winograd vs direct 3x3 convolution on ResNet-18's layer shapes, each tuned with the same budget.

    conv3x3(C -> C, pad 1) + BN + ReLU at H x W  --extract_tasks(winograd=0 | M)--> tasks
      --TaskScheduler (gradient, same trials)--> logs --compile_network--> both layers
      --alternating timing rounds in this process--> median latency per side, ratio per round

Run: ``.venv/bin/python -m bench.winograd [--layers 56x64,28x128,14x256] [--trials 96] [--winograd 4]``
Logs go to bench/out/winograd/. The host is shared and drifts between minutes, so the two sides are
timed alternately in rounds and the ratio is taken within each round.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

import numpy as np


def _layer_mlir(hw: int, c: int) -> str:
    """conv3x3 + BN + ReLU (torch, random weights, eval mode) exported to linalg."""
    import torch
    from ansor.frontend.torch_import import import_torch

    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(c)
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 1.5)
    model = torch.nn.Sequential(torch.nn.Conv2d(c, c, 3, 1, 1, bias=False), bn, torch.nn.ReLU()).eval()
    return import_torch(model, (torch.randn(1, c, hw, hw),))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="56x64,28x128,14x256", help="HWxC of each layer")
    ap.add_argument("--trials", type=int, default=96, help="trials per side and layer")
    ap.add_argument("--winograd", type=int, default=4, choices=[2, 4])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--resume", action="store_true", help="keep existing logs")
    a = ap.parse_args()

    from ansor.compile import compile_network
    from ansor.frontend.partition import extract_tasks
    from ansor.measure.measurer import RunOptions, create_measurer
    from ansor.tuning.scheduler import SchedulerTable, TaskScheduler

    from bench.common import OUT, time_calls  # time_calls: (median, min) of 20 single calls

    out = OUT / "winograd"
    out.mkdir(parents=True, exist_ok=True)

    threads = os.cpu_count() or 1
    print(f"machine: {platform.processor() or platform.machine()}, {threads} cores, {threads} threads; "
          f"{a.trials} trials per side (gradient scheduler, learned search), F(t x t) with t <= {a.winograd}")
    rows = []
    for spec in a.layers.split(","):
        hw, c = (int(v) for v in spec.split("x"))
        text = _layer_mlir(hw, c)
        nets = {"direct": extract_tasks(text, name=f"l{spec}", winograd=0),
                "winograd": extract_tasks(text, name=f"l{spec}", winograd=a.winograd)}
        logs = {}
        measurer = create_measurer(RunOptions(threads=threads))
        try:
            for side, net in nets.items():
                log = out / f"l{spec}.{side}{a.winograd if side == 'winograd' else ''}.jsonl"
                if log.exists() and not a.resume:
                    log.unlink()
                res = TaskScheduler(net.tasks, strategy="gradient", seed=0).tune(
                    a.trials, batch_size=a.batch_size, log_path=log, measurer=measurer,
                    callback=SchedulerTable(table_every=1000))
                logs[side] = log
                print(f"{spec} {side}: {len(net.tasks)} tasks, {net.flops / 1e9:.3f} GFLOP, "
                      f"estimated {res.estimated_latency() * 1e3:.3f} ms")
        finally:
            measurer.close()
        models = {side: compile_network(net, logs[side], threads=threads) for side, net in nets.items()}
        x = np.random.default_rng(0).standard_normal(nets["direct"].inputs[0].shape).astype(np.float32)
        y = {side: m(x) for side, m in models.items()}
        err = float(np.max(np.abs(y["winograd"] - y["direct"])))
        rounds = []
        for _ in range(a.rounds):
            rounds.append({side: time_calls(m, [x])[0] for side, m in models.items()})
        ratios = [r["direct"] / r["winograd"] for r in rounds]
        med = {side: float(np.median([r[side] for r in rounds])) for side in models}
        rows.append((spec, med["direct"], med["winograd"], float(np.median(ratios)), min(ratios), max(ratios), err))
        print(f"{spec}: direct {med['direct'] * 1e3:.3f} ms, winograd {med['winograd'] * 1e3:.3f} ms, "
              f"speedup per round " + ", ".join(f"{r:.2f}x" for r in ratios) + f"; max |diff| {err:.1e}")
    print(f"\n{'layer HWxC':<12} {'direct ms':>10} {'winograd ms':>12} {'speedup (median, range)':>26} {'max |diff|':>11}")
    for spec, d, w, r, lo, hi, err in rows:
        print(f"{spec:<12} {d * 1e3:>10.3f} {w * 1e3:>12.3f} {f'{r:.2f}x ({lo:.2f}-{hi:.2f})':>26} {err:>11.1e}")
    return 0


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.winograd [--help]")
    sys.exit(main())

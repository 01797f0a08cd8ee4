"""PyTorch (CPU, eager) equivalents of the built-in workloads, for benchmarks.

    workload name + the MLIR function's numpy inputs --prepare (layout conversion, untimed)-->
        a zero-argument callable computing the same result in PyTorch's own layout

Each workload uses PyTorch's one-op form where one exists (`torch.linalg.vector_norm` for NRM,
`F.layer_norm` + `F.gelu` for LNGELU, `F.layer_norm`, `F.rms_norm`, `torch.softmax`, `torch.log_softmax`, `F.conv*`, `torch.bmm`): a baseline
composed of several elementwise ops would be slower than what a PyTorch user writes. The
subgraphs (ConvLayer, TBS, CAP) have no one-op form and stay composed.

`prepare` also returns the map of PyTorch's result back to the workload's layout, so a benchmark
can check that both compute the same thing before comparing times. `main` is the PyTorch side in
a process of its own that answers one timing per round, as `common.start_torch_op` starts it
(`python -m bench.torch_ops ... --serve`, a `common.Child`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

import numpy as np


def _sizes(name: str) -> tuple[str, list[int]]:
    fam, _, dims = name.partition("-")
    return fam, [int(x) for x in dims.split("x")]


#: Families whose PyTorch op takes channels-first tensors: timed in both memory layouts.
LAYOUT_FAMILIES = ("c1d", "c2d", "dil", "grp", "c3d", "dep", "t2d", "convlayer")


def prepare(name: str, inputs: list[np.ndarray], channels_last: bool = False,
            ) -> tuple[Callable[[], object], Callable[[object], np.ndarray]] | None:
    """(run, to_workload_layout) for workload `name`, or None when PyTorch has no equivalent.
    `channels_last`: convolutions get the workload's channels-last data as a channels-first view
    (PyTorch's `channels_last` memory format, weights likewise) instead of a contiguous copy;
    which is faster depends on the op (a 1x1 conv2d: 0.27 vs 1.85 ms here)."""
    import torch
    import torch.nn.functional as F

    fam, v = _sizes(name)
    t = [torch.from_numpy(np.ascontiguousarray(a)) for a in inputs]

    def cl(x: torch.Tensor) -> torch.Tensor:  # channels-last -> channels-first (a view, or contiguous)
        x = x.permute(0, x.dim() - 1, *range(1, x.dim() - 1))
        return x if channels_last else x.contiguous()

    def wl(w: torch.Tensor) -> torch.Tensor:  # a conv weight in the memory format matching `cl`
        if channels_last and w.dim() in (4, 5):
            return w.contiguous(memory_format=torch.channels_last if w.dim() == 4 else torch.channels_last_3d)
        return w.contiguous()

    def back(y: torch.Tensor) -> np.ndarray:  # channels-first -> channels-last
        return y.permute(0, *range(2, y.dim()), 1).contiguous().numpy()

    if fam in ("matmul",):
        a, b = t
        return (lambda: a @ b), (lambda y: y.numpy())
    if fam == "gmm":
        a, b = t
        return (lambda: torch.bmm(a, b)), (lambda y: y.numpy())
    if fam == "c1d":
        s, p = v[-2], v[-1]
        x, w = cl(t[0]), wl(t[1].permute(2, 1, 0))  # [k,CI,CO] -> [CO,CI,k]
        return (lambda: F.conv1d(x, w, stride=s, padding=p)), back
    if fam in ("c2d", "dil", "grp"):
        s, p = v[-2], v[-1]
        d = 2 if fam == "dil" else 1
        g = 4 if fam == "grp" else 1
        x, w = cl(t[0]), wl(t[1].permute(3, 2, 0, 1))  # HWIO -> OIHW
        return (lambda: F.conv2d(x, w, stride=s, padding=p, dilation=d, groups=g)), back
    if fam == "c3d":
        s, p = v[-2], v[-1]
        x, w = cl(t[0]), wl(t[1].permute(4, 3, 0, 1, 2))
        return (lambda: F.conv3d(x, w, stride=s, padding=p)), back
    if fam == "dep":
        s, p = v[-2], v[-1]
        c = v[3]
        x, w = cl(t[0]), wl(t[1].permute(2, 0, 1).unsqueeze(1))  # [k,k,C] -> [C,1,k,k]
        return (lambda: F.conv2d(x, w, stride=s, padding=p, groups=c)), back
    if fam == "t2d":
        s, p = v[-2], v[-1]
        # the workload's filter argument is W pre-arranged (workloads.t2d_filter); torch wants [CI, CO, k, k]
        from ansor.frontend import workloads

        wk = torch.from_numpy(workloads.t2d_torch_weight(t[1].cpu().numpy(), v[-3], s, p))
        x, w = cl(t[0]), wl(wk.permute(2, 3, 0, 1)).to(t[1].device)
        return (lambda: F.conv_transpose2d(x, w, stride=s, padding=p)), back
    if fam == "cap":
        k, s, p = v[-3], v[-2], v[-1]
        x, w = t  # X [N,H,W,4,4,CI], W [k,k,4,4,CI,CO]

        def cap() -> torch.Tensor:
            xp = F.pad(x, (0, 0, 0, 0, 0, 0, p, p, p, p))
            win = xp.unfold(1, k, s).unfold(2, k, s)  # [N,OH,OW,4,4,CI,k,k]
            return torch.einsum("nhwiqcab,abqjcz->nhwijz", win, w)

        return cap, (lambda y: y.numpy())
    if fam == "nrm":
        (x,) = t
        return (lambda: torch.linalg.vector_norm(x, ord=2, dim=(1, 2))), (lambda y: y.numpy())
    if fam == "lngelu":
        x, gamma, beta = t
        n = x.shape[-1]
        return (lambda: F.gelu(F.layer_norm(x, (n,), gamma, beta, eps=1e-5), approximate="tanh")), (lambda y: y.numpy())
    if fam == "convlayer":
        s, p = v[-2], v[-1]
        x, w = cl(t[0]), wl(t[1].permute(3, 2, 0, 1))
        scale, shift = t[2].view(1, -1, 1, 1), t[3].view(1, -1, 1, 1)
        return (lambda: torch.relu(F.conv2d(x, w, stride=s, padding=p) * scale + shift)), back
    if fam == "tbs":
        q, kk = t  # [B,S,H,D]

        def tbs() -> torch.Tensor:
            scores = torch.matmul(q.transpose(1, 2), kk.permute(0, 2, 3, 1))
            return torch.softmax(scores, dim=-1)

        return tbs, (lambda y: y.contiguous().numpy())
    if fam == "softmax":
        (x,) = t
        return (lambda: torch.softmax(x, dim=-1)), (lambda y: y.numpy())
    if fam == "logsoftmax":
        (x,) = t
        return (lambda: torch.log_softmax(x, dim=-1)), (lambda y: y.numpy())
    if fam == "layernorm":
        x, gamma, beta = t
        return (lambda: F.layer_norm(x, (x.shape[-1],), gamma, beta, eps=1e-5)), (lambda y: y.numpy())
    if fam == "rmsnorm":
        x, gamma = t
        return (lambda: F.rms_norm(x, (x.shape[-1],), gamma, eps=1e-6)), (lambda y: y.numpy())
    return None


def main() -> None:
    """`python -m bench.torch_ops NAME --threads T --inputs a0.npy ... --out y.npy [--serve]`: time
    workload NAME in PyTorch eager in its own process (torch never shares a process with our MLIR:
    two OpenMP runtimes spinning in one process slowed both sides 1.3-1.7x); saves the output in
    the workload's layout. A timing is the best of `--repeats` Python loops of ~`--seconds` s;
    convolutions are timed with contiguous channels-first tensors and in `channels_last` memory
    format, and the faster counts (PyTorch's best; which wins depends on the op). Without --serve
    it prints one {"latency_s", "layout"} line; with it, a hello line, then one timing per line
    read from stdin (bench/common.py `Child`)."""
    import argparse

    import torch

    from bench.common import loop_time, serve, torch_blas

    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--inputs", nargs="+", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=0.1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--serve", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_grad_enabled(False)
    inputs = [np.load(p) for p in a.inputs]
    variants = {}
    for channels_last in (False, True) if _sizes(a.name)[0] in LAYOUT_FAMILIES else (False,):
        prep = prepare(a.name, inputs, channels_last)
        if prep is None:
            print(json.dumps({"latency_s": None, "available": False}))
            return
        variants["channels_last" if channels_last else "contiguous"] = prep
    outs = {layout: back(run()).astype(np.float32) for layout, (run, back) in variants.items()}

    def one_round(_req: dict | None = None) -> dict:
        per = {layout: loop_time(run, seconds=a.seconds, repeats=a.repeats) for layout, (run, _) in variants.items()}
        layout = min(per, key=per.get)
        return {"latency_s": per[layout], "layout": layout, "per_layout": per}

    if a.serve:
        np.save(a.out, outs["contiguous"])
        serve({"available": True, "layouts": list(variants), "info": torch_blas()}, one_round)
        return
    res = one_round()
    np.save(a.out, outs[res["layout"]])
    print(json.dumps(res))


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.torch_ops [--help]")
    main()

"""The GPU benchmarks' PyTorch baselines (`bench.common.torch_cuda_fn`), checked on the CPU.

Every built-in workload family but the networks has a PyTorch baseline, and each one computes
the workload: for a few small shapes per family (strides, padding, odd sizes, the f16/bf16
variants) `to_workload_layout(run())` on device "cpu" must match the untransformed CPU program of
the same workload under the tuner's criterion (`ansor.measure.verify.check_task_outputs`), with
the inputs `bench/gpu.py` gives both (`make_inputs` + `workloads.valid_inputs`). The row-wise
normalizations also run on inputs scaled down so far that eps decides the result, so a wrong eps
fails too (`test_a_wrong_baseline_fails` shows that the check sees such mistakes).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # CI installs it (run.sh setup_torch); skip cleanly without

import ansor  # noqa: E402
from ansor.frontend import workloads  # noqa: E402
from ansor.measure import verify  # noqa: E402
from ansor.measure.measurer import make_inputs  # noqa: E402
from ansor.targets import compile_task  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the `bench` package (repository root)
from bench.common import TORCH_BASELINES, TORCH_NO_BASELINE, torch_baseline_missing, torch_cuda_fn  # noqa: E402

#: Inputs scaled by this (X only) in the `SMALL` cases: mean(x^2) ~ 3e-7, far under eps.
SMALL = 1e-3

#: family -> workloads checked (names; (name, SMALL) scales X down).
CASES: dict[str, list] = {
    "matmul": ["matmul-17x9x13", "matmul-8", "matmul-16x8x12-f16", "matmul-16x8x12-bf16"],
    "matmul_nt": ["matmul_nt-12x7x9"],
    "gmm": ["gmm-2x9x7x5", "gmm-2x8x4x12-f16", "gmm-2x8x4x12-bf16"],
    "mmgelu": ["mmgelu-9x7x11", "mmgelu-16x8x12-f16", "mmgelu-16x8x12-bf16"],
    "c1d": ["c1d-2x13x3x5x3x2x1", "c1d-1x9x4x6x1x1x0", "c1d-1x10x3x4x5x3x2"],
    "c2d": ["c2d-1x9x7x3x5x3x2x1", "c2d-2x6x6x4x6x1x1x0", "c2d-1x8x8x4x8x3x1x1-f16", "c2d-1x8x7x4x8x3x2x1-bf16"],
    "c3d": ["c3d-1x5x6x7x3x4x3x2x1", "c3d-1x4x4x4x2x3x1x1x0"],
    "grp": ["grp-1x7x9x8x12x3x2x1", "grp-1x6x6x4x8x1x1x0"],
    "dil": ["dil-1x11x9x3x5x3x1x2", "dil-1x12x12x4x4x3x2x0"],
    "dep": ["dep-1x9x7x6x3x2x1", "dep-2x8x8x4x5x1x2"],
    # stride 2 (sub-pixel filter argument; even and odd output), stride 1 and 3 (flipped filter)
    "t2d": ["t2d-1x4x5x6x3x4x2x1", "t2d-1x3x3x4x5x3x2x0", "t2d-1x4x4x3x5x3x1x1", "t2d-1x3x4x2x3x3x3x0"],
    "cap": ["cap-1x6x5x3x2x3x2x1", "cap-1x4x4x2x3x3x1x1"],
    "convlayer": ["convlayer-1x7x9x3x5x3x2x1", "convlayer-1x6x6x4x8x1x1x0"],
    "nrm": ["nrm-2x5x7", "nrm-3"],
    "tbs": ["tbs-2x7x3x5", "tbs-2x7x3x8-f16", "tbs-1x5x2x8-bf16"],
    "softmax": ["softmax-5x33", "softmax-3x197"],
    "logsoftmax": ["logsoftmax-5x33"],
    "layernorm": ["layernorm-4x24", ("layernorm-3x37", SMALL)],
    "lngelu": ["lngelu-3x40", ("lngelu-2x33", SMALL)],
    "rmsnorm": ["rmsnorm-3x40", ("rmsnorm-2x33", SMALL)],
    "rowsum": ["rowsum-3x40", "rowsum-2x197"],
    "colsum": ["colsum-5x33"],
    "attention": ["attention-5x9x4"],
    "conv_relu_pool": ["conv_relu_pool-1x7x6x3x4x3x1x0", "conv_relu_pool-2x8x8x2x3x3x2x1"],
    "matmul_rowsum": ["matmul_rowsum-5x7x3"],
    "matmul_sumall": ["matmul_sumall-5x7x3"],
    "two_matmuls": ["two_matmuls-4x6x5"],
}


def _case(c) -> tuple[str, float]:
    return (c, 1.0) if isinstance(c, str) else c


ALL = [_case(c) for cs in CASES.values() for c in cs]


@functools.cache
def _reference(name: str, scale: float = 1.0) -> tuple[object, list[np.ndarray], list[np.ndarray]]:
    """(task, inputs, outputs of the untransformed CPU program): the workload's reference."""
    task = ansor.create_task(workloads.get(name), name=name)
    inputs = workloads.valid_inputs(name, make_inputs(task))
    if scale != 1.0:
        inputs = [(inputs[0] * scale).astype(inputs[0].dtype), *inputs[1:]]
    kernel = compile_task(task, None)
    return task, inputs, kernel.run(inputs, verify.poisoned(task.outputs))


def test_every_family_has_a_baseline() -> None:
    """A new workload family without a PyTorch baseline (or a listed reason) fails here."""
    families = set(workloads._FAMILIES)
    missing = families - set(TORCH_BASELINES) - set(TORCH_NO_BASELINE)
    assert not missing, f"workload families without a PyTorch baseline in bench/common.py: {sorted(missing)}"
    assert set(TORCH_NO_BASELINE) <= {"mlp"}, "only networks (mlp) go without a baseline"
    assert set(TORCH_BASELINES) <= families, "a baseline for a family that no longer exists"
    assert torch_baseline_missing("mlp-64x256x4") is not None
    assert torch_baseline_missing("c3d-1x4x4x4x2x3x1x1x0") is None


def test_every_family_and_element_type_is_checked() -> None:
    assert set(CASES) == set(TORCH_BASELINES)
    names = [n for n, _ in ALL]
    for fam, types in workloads._TYPED.items():
        for t in types:
            assert any(n.startswith(f"{fam}-") and n.endswith(f"-{t}") for n in names), f"no {fam} -{t} case"


@pytest.mark.parametrize(("name", "scale"), ALL, ids=[n + ("-small" if s != 1.0 else "") for n, s in ALL])
def test_baseline_matches_the_workload(name: str, scale: float) -> None:
    task, inputs, ref = _reference(name, scale)
    tf = torch_cuda_fn(name, inputs, "cpu")
    assert tf is not None, name
    run, to_workload_layout = tf
    with torch.no_grad():
        out = np.asarray(to_workload_layout(run()))
    assert out.dtype == ref[0].dtype, (out.dtype, ref[0].dtype)
    bad = verify.check_task_outputs(task, [out], ref)
    assert bad is None, f"{name}: PyTorch baseline differs from the workload: {bad}"


def test_a_wrong_baseline_fails() -> None:
    """The check above sees the mistakes a baseline can make: a wrong eps (where it matters), the
    wrong GELU approximation, a transposed filter; a wrong stride or padding changes the shape."""
    import torch.nn.functional as F

    def mismatch(name: str, scale: float, fn) -> str | None:
        task, inputs, ref = _reference(name, scale)
        t = [torch.from_numpy(np.ascontiguousarray(a)) for a in inputs]
        return verify.check_task_outputs(task, [fn(*t).numpy()], ref)

    n = 33
    # the right calls pass ...
    assert mismatch("rmsnorm-2x33", SMALL, lambda x, g: F.rms_norm(x, (n,), g, eps=1e-6)) is None
    assert mismatch("layernorm-3x37", SMALL, lambda x, g, b: F.layer_norm(x, (37,), g, b, eps=1e-5)) is None
    # ... and a wrong eps, GELU or filter layout fails
    assert mismatch("rmsnorm-2x33", SMALL, lambda x, g: F.rms_norm(x, (n,), g, eps=1e-5)) is not None
    assert mismatch("layernorm-3x37", SMALL, lambda x, g, b: F.layer_norm(x, (37,), g, b, eps=1e-6)) is not None
    assert mismatch("lngelu-3x40", 1.0, lambda x, g, b: F.gelu(F.layer_norm(x, (40,), g, b, eps=1e-5))) is not None

    def dep(x, w, swap):  # depthwise with the filter's kh/kw swapped (same shape, wrong values)
        wt = w.permute(2, 1, 0) if swap else w.permute(2, 0, 1)
        y = F.conv2d(x.permute(0, 3, 1, 2), wt.unsqueeze(1).contiguous(), stride=2, padding=1, groups=x.shape[-1])
        return y.permute(0, 2, 3, 1).contiguous()

    assert mismatch("dep-1x9x7x6x3x2x1", 1.0, lambda x, w: dep(x, w, False)) is None
    assert mismatch("dep-1x9x7x6x3x2x1", 1.0, lambda x, w: dep(x, w, True)) is not None

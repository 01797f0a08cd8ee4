"""Built-in workloads: every suite instance validates; small variants of each family match numpy.

The numpy references are written from the operator definitions (PyTorch semantics for padding,
stride, dilation, groups and ConvTranspose2d), independently of the MLIR builders.
"""

from __future__ import annotations

import itertools

import ansor
import numpy as np
import pytest
from ansor import cli
from ansor.frontend import workloads

# --------------------------------------------------------------------------- references


def _conv_nd(
    x: np.ndarray, w: np.ndarray, s: int, p: int, d: int = 1, groups: int = 1
) -> np.ndarray:
    """Channels-last N-D convolution (cross-correlation, zero padding).

    x[N,*S,CI], w[*K,CI/g,CO]; group g reads channels [g*CI/g, (g+1)*CI/g)."""
    nsp = x.ndim - 2
    xp = np.pad(x, [(0, 0)] + [(p, p)] * nsp + [(0, 0)])
    ks, (cig, co) = w.shape[:nsp], w.shape[nsp:]
    outs = [(xp.shape[1 + i] - d * (ks[i] - 1) - 1) // s + 1 for i in range(nsp)]
    cog = co // groups
    y = np.zeros((x.shape[0], *outs, co), dtype=np.float64)
    for kpos in itertools.product(*(range(k) for k in ks)):
        sl = tuple(slice(kpos[i] * d, kpos[i] * d + s * (outs[i] - 1) + 1, s) for i in range(nsp))
        win = xp[(slice(None), *sl)]  # [N, *outs, CI]
        for g in range(groups):
            y[..., g * cog : (g + 1) * cog] += (
                win[..., g * cig : (g + 1) * cig] @ w[kpos][:, g * cog : (g + 1) * cog]
            )
    return y


def _depthwise(x: np.ndarray, w: np.ndarray, s: int, p: int) -> np.ndarray:
    c = x.shape[-1]
    return _conv_nd(x, w[:, :, None, :], s, p, groups=c)  # w [k,k,C] -> [k,k,1,C], C groups


def _conv_transpose(x: np.ndarray, w: np.ndarray, s: int, p: int) -> np.ndarray:
    """PyTorch ConvTranspose2d in NHWC, w[kh,kw,ci,co] (= torch weight[ci,co,kh,kw]).

    Scatter every input pixel through the kernel, then crop p from each border."""
    n, h, wd, _ = x.shape
    k, co = w.shape[0], w.shape[3]
    oh, ow = (h - 1) * s - 2 * p + k, (wd - 1) * s - 2 * p + k
    full = np.zeros((n, (h - 1) * s + k, (wd - 1) * s + k, co))
    for ih, iw in itertools.product(range(h), range(wd)):
        full[:, ih * s : ih * s + k, iw * s : iw * s + k, :] += np.einsum(
            "nc,hwco->nhwo", x[:, ih, iw, :], w
        )
    return full[:, p : p + oh, p : p + ow, :]


def _capsule(x: np.ndarray, w: np.ndarray, s: int, p: int) -> np.ndarray:
    h, wd = x.shape[1:3]
    k = w.shape[0]
    xp = np.pad(x, [(0, 0), (p, p), (p, p), (0, 0), (0, 0), (0, 0)])
    oh, ow = (h + 2 * p - k) // s + 1, (wd + 2 * p - k) // s + 1
    y = 0.0
    for rh, rw in itertools.product(range(k), range(k)):
        win = xp[
            :, rh : rh + s * (oh - 1) + 1 : s, rw : rw + s * (ow - 1) + 1 : s
        ]  # [N,OH,OW,i,ck,ci]
        y = y + np.einsum("nhwikc,kjco->nhwijo", win, w[rh, rw])
    return y


def _softmax(a: np.ndarray) -> np.ndarray:
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _sizes(name: str) -> list[int]:
    return [int(v) for v in name.split("-", 1)[1].split("x")]


def _reference(name: str, args: list[np.ndarray]) -> np.ndarray:
    fam, v = name.split("-", 1)[0], _sizes(name)
    a = [x.astype(np.float64) for x in args]
    if fam == "gmm":
        return a[0] @ a[1]
    if fam in ("c1d", "c2d", "c3d"):
        return _conv_nd(a[0], a[1], v[-2], v[-1])
    if fam == "grp":
        return _conv_nd(a[0], a[1], v[-2], v[-1], groups=4)
    if fam == "dil":
        return _conv_nd(a[0], a[1], v[-2], v[-1], d=2)
    if fam == "dep":
        return _depthwise(a[0], a[1], v[-2], v[-1])
    if fam == "t2d":
        k, st, pd = v[-3], v[-2], v[-1]
        return _conv_transpose(a[0], workloads.t2d_torch_weight(a[1], k, st, pd), st, pd)
    if fam == "cap":
        return _capsule(a[0], a[1], v[-2], v[-1])
    if fam == "nrm":
        return np.sqrt((a[0] ** 2).sum(axis=(1, 2)))
    if fam == "convlayer":
        return np.maximum(_conv_nd(a[0], a[1], v[-2], v[-1]) * a[2] + a[3], 0.0)
    if fam == "tbs":
        q, k = a[0].transpose(0, 2, 1, 3), a[1].transpose(0, 2, 3, 1)  # [B,H,S,D], [B,H,D,S]
        return _softmax(q @ k)
    if fam == "softmax":
        return _softmax(a[0])
    raise AssertionError(name)


# --------------------------------------------------------------------------- tests

#: Tiny variants of each suite family (same builders), cheap enough for the untuned scalar program.
SMALL = [
    "c1d-1x9x3x4x3x2x1",
    "c1d-2x6x3x2x1x1x0",
    "c2d-1x9x9x3x4x3x2x1",
    "c2d-1x6x5x4x5x1x1x0",
    "c3d-1x5x6x6x2x3x3x2x1",
    "gmm-2x4x5x6",
    "grp-1x7x7x8x8x3x2x1",
    "grp-1x5x5x4x8x1x1x0",
    "dil-1x9x9x3x4x3x2x1",
    "dil-1x6x6x2x3x3x1x0",
    "dep-1x7x7x4x3x1x1",
    "dep-1x8x8x3x3x2x1",
    "t2d-1x3x3x4x5x4x2x1",
    "t2d-1x3x3x4x5x3x2x0",  # stride 2, odd output (cropped), even padding
    "t2d-1x3x4x2x3x3x2x1",  # stride 2, odd padding, k not a multiple of 2
    "t2d-1x3x2x2x3x4x2x2",
    "t2d-1x2x3x2x3x3x1x0",
    "t2d-1x3x2x2x2x4x3x2",
    "cap-1x5x5x2x3x3x2x1",
    "cap-1x3x3x1x2x3x1x1",
    "nrm-2x5x7",
    "convlayer-1x7x7x3x4x3x2x1",
    "tbs-2x5x3x4",
    "softmax-6x37",
]


def test_suite_lists_ansor_instances_in_order() -> None:
    names = workloads.suite()
    assert len(names) == 22 and len(set(names)) == 22
    assert [n.split("-")[0] for n in names[::2]] == [
        "c1d",
        "c2d",
        "c3d",
        "gmm",
        "grp",
        "dil",
        "dep",
        "t2d",
        "cap",
        "nrm",
        "convlayer",
    ]
    assert names[-1] == "tbs-1x128x12x64"
    assert all(n in workloads.BUILTIN for n in names)
    assert "matmul-1024" in workloads.BUILTIN and workloads.DEFAULT_WORKLOAD not in names


@pytest.mark.parametrize("name", workloads.suite())
def test_suite_instance_is_a_task(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    task = ansor.create_task(workloads.get(name))
    assert task.flops > 0 and all(s.dtype == "f32" for s in task.inputs + task.outputs)
    assert cli.main(["workloads", "--emit", name]) == 0
    assert ansor.create_task(capsys.readouterr().out).hash == task.hash


@pytest.mark.parametrize(
    ("name", "flops"),
    [
        ("c2d-1x56x56x64x64x1x1x0", 2 * 56 * 56 * 64 * 64),
        ("c2d-1x224x224x3x64x7x2x3", 2 * 112 * 112 * 64 * 7 * 7 * 3),
        ("c1d-1x256x64x128x3x2x1", 2 * 128 * 128 * 3 * 64),
        ("dep-1x112x112x64x3x2x1", 2 * 56 * 56 * 64 * 9),
        ("grp-1x56x56x64x128x3x2x1", 2 * 28 * 28 * 128 * 9 * 16),
        # stride 2, sub-pixel: each output pixel gets (k/2)^2 = 4 of the 16 taps (no FLOP on a zero)
        ("t2d-1x4x4x512x256x4x2x1", 2 * 8 * 8 * 256 * 4 * 512),
        ("t2d-1x4x4x8x4x4x3x1", 2 * 11 * 11 * 4 * 16 * 8),  # stride 3: over the zero-inserted input
        ("cap-1x8x8x32x32x3x1x1", 2 * 8 * 8 * 4 * 4 * 32 * 9 * 4 * 32),
        ("nrm-1x256x256", 2 * 256 * 256 + 1),
    ],
)
def test_flops_by_hand(name: str, flops: int) -> None:
    assert ansor.create_task(workloads.get(name)).flops == flops


def test_result_is_fresh_and_weights_are_arguments() -> None:
    for name in workloads.suite():
        text = workloads.get(name)
        assert "linalg.fill" in text and "arith.constant dense" not in text
    assert "tensor.pad" in workloads.get("c2d-1x9x9x3x4x3x2x1")
    assert "tensor.pad" not in workloads.get("c2d-1x6x5x4x5x1x1x0")
    assert "linalg.conv_2d_nhwc_hwcf" in workloads.get("dil-1x9x9x3x4x3x2x1")


@pytest.mark.parametrize("name", SMALL)
def test_small_variant_matches_numpy(name: str) -> None:
    fn = ansor.compile(workloads.get(name))
    rng = np.random.default_rng(0)
    args = workloads.valid_inputs(name, [rng.standard_normal(s.shape).astype(np.float32) for s in fn.task.inputs])
    if name.startswith("convlayer"):  # make some outputs negative before the relu, some not
        args[3] = (args[3] * 0.5).astype(np.float32)
    got = fn(*args)
    want = _reference(name, args)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "name",
    [
        "nope-3",
        "c2d-1x9x9",
        "c2d-1x9x9x3x4x3x2x1x1",
        "c2d-0x9x9x3x4x3x2x1",
        "c1d-1x2x3x4x9x1x0",
        "grp-1x5x5x6x8x1x1x0",
        "t2d-1x3x3x4x5x3x2x3",
        "tbs-1x2",
        "C2D-1",
        "gmm-1xx2x3x4",
    ],
)
def test_bad_names_raise_one_line_key_error(name: str) -> None:
    with pytest.raises(KeyError) as info:
        workloads.get(name)
    msg = info.value.args[0]
    assert name in msg and "\n" not in msg


@pytest.mark.parametrize("name", ["layernorm-8x100", "rmsnorm-8x100", "logsoftmax-8x100", "rowsum-8x100"])
def test_row_wise_workloads_match_numpy(name: str) -> None:
    import ansor
    from ansor.measure.measurer import make_inputs

    task = ansor.create_task(workloads.get(name), name=name)
    ins = make_inputs(task)
    y = ansor.compile(workloads.get(name))(*ins)
    x = ins[0].astype(np.float64)
    if name.startswith("layernorm"):
        ref = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * ins[1] + ins[2]
    elif name.startswith("rmsnorm"):
        ref = x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-6) * ins[1]
    elif name.startswith("rowsum"):
        ref = x.sum(1)
    else:
        m = x.max(1, keepdims=True)
        ref = x - m - np.log(np.exp(x - m).sum(1, keepdims=True))
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)

"""Contractions initialised with a broadcast bias (torch-mlir's `nn.Conv2d(bias=True)`) become a
zero-initialised contraction and a bias-add epilogue at task extraction (`frontend.bias`)."""

from __future__ import annotations

import random

import numpy as np
from ansor.compile import compile_network
from ansor.frontend.partition import extract_tasks
from ansor.targets import generate_sketches
from ansor.targets.cuda.lowering import emit_ptx

#: conv(init = broadcast bias) -> ReLU, twice: SqueezeNet's 1x1 / 3x3 convolutions at toy size.
_CONV_BIAS = """
func.func @main(%x: tensor<1x3x9x9xf32>, %w: tensor<8x3x3x3xf32>, %b: tensor<8xf32>,
                %w2: tensor<4x8x1x1xf32>, %b2: tensor<4xf32>) -> tensor<1x4x7x7xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x8x7x7xf32>
  %bb = linalg.broadcast ins(%b : tensor<8xf32>) outs(%e : tensor<1x8x7x7xf32>) dimensions = [0, 2, 3]
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
       ins(%x, %w : tensor<1x3x9x9xf32>, tensor<8x3x3x3xf32>) outs(%bb : tensor<1x8x7x7xf32>) -> tensor<1x8x7x7xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>,
                                        affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
       ins(%c : tensor<1x8x7x7xf32>) outs(%e : tensor<1x8x7x7xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x8x7x7xf32>
  %e2 = tensor.empty() : tensor<1x4x7x7xf32>
  %bb2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d1)>,
                                          affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>],
                         iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
       ins(%b2 : tensor<4xf32>) outs(%e2 : tensor<1x4x7x7xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<1x4x7x7xf32>
  %c2 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
       ins(%r, %w2 : tensor<1x8x7x7xf32>, tensor<4x8x1x1xf32>) outs(%bb2 : tensor<1x4x7x7xf32>) -> tensor<1x4x7x7xf32>
  return %c2 : tensor<1x4x7x7xf32>
}
"""


def _conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    out = np.zeros((n, f, h - kh + 1, wd - kw + 1), np.float64)
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,fc->nfhw", x[:, :, i:i + out.shape[2], j:j + out.shape[3]], w[:, :, i, j])
    return out


def _inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(np.float32) for s in ((1, 3, 9, 9), (8, 3, 3, 3), (8,), (4, 8, 1, 1), (4,))]


def test_bias_inits_become_epilogues_and_compute_the_same() -> None:
    net = extract_tasks(_CONV_BIAS)
    # no task reads an output-sized bias: each takes the bias vector, the broadcast is gone
    shapes = [s.shape for t in net.tasks for s in t.inputs]
    assert (8,) in shapes and (4,) in shapes
    assert (1, 8, 7, 7) not in shapes[:3] and "linalg.broadcast" not in net.ir
    x, w, b, w2, b2 = _inputs()
    ref = _conv(np.maximum(_conv(x, w) + b[None, :, None, None], 0), w2) + b2[None, :, None, None]
    np.testing.assert_allclose(compile_network(net)(x, w, b, w2, b2), ref, rtol=1e-5, atol=1e-5)


def test_biased_convs_build_their_sampled_cuda_schedules() -> None:
    """Before, every sampled schedule splitting a block's tile over virtual threads was refused
    ("intermediate buffer ... between GPU kernels"): 2 of 2 samples of each SqueezeNet conv."""
    net = extract_tasks(_CONV_BIAS, target="cuda")
    task = max(net.tasks, key=lambda t: t.flops)
    sk = next(s for s in generate_sketches(task) if s.name == "s0")
    for seed in (0, 1):
        assert ".entry" in emit_ptx(task, sk.script(sk.sample(random.Random(seed)).values()), arch="sm_90")

"""Winograd F(m x m, 3 x 3) convolutions (`winograd.rewrite` through `extract_tasks(winograd=m)`)."""

from __future__ import annotations

import numpy as np
import pytest
from ansor import cli
from ansor.frontend import winograd
from ansor.compile import compile_network
from ansor.frontend.partition import extract_tasks


def _direct(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Stride-1 correlation of NHWC x (already padded) with an HWCF filter, float64."""
    n, hp, wp, _ = x.shape
    h, w = hp - 2, wp - 2
    out = np.zeros((n, h, w, g.shape[3]))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nhwc,ck->nhwk", x[:, i:i + h, j:j + w, :], g[i, j])
    return out


@pytest.mark.parametrize("m", [2, 4])
def test_numpy_algorithm_is_the_convolution(m: int) -> None:
    """The transform matrices: the algorithm `rewrite` emits, in numpy, equals direct convolution."""
    rng = np.random.default_rng(m)
    x = rng.standard_normal((2, 4 * m + 2, 2 * m + 2, 5))
    g = rng.standard_normal((3, 3, 5, 7))
    np.testing.assert_allclose(winograd.reference(x, g, m), _direct(x, g), rtol=1e-9, atol=1e-9)


def test_unknown_tile_is_refused() -> None:
    with pytest.raises(ValueError, match="F\\(3x3, 3x3\\)"):
        winograd.matrices(3)
    with pytest.raises(ValueError, match="winograd must be"):
        extract_tasks("module {}", winograd=3)


def _model(rng: np.random.Generator, hw: int, c: int, k: int, *, bias: bool) -> tuple[str, np.ndarray, np.ndarray]:
    """conv3x3 (pad 1) + [bias] + ReLU on NHWC, weights as a dense resource; (text, weights, bias)."""
    g = (rng.standard_normal((3, 3, c, k)) / np.sqrt(9 * c)).astype("<f4")
    b = rng.standard_normal(k).astype("<f4")
    hp = hw + 2
    init = (f"%bb = arith.constant dense_resource<b> : tensor<{k}xf32>\n"
            f"  %init = linalg.generic {{indexing_maps = [#bc, #id], iterator_types = [\"parallel\", \"parallel\", \"parallel\", \"parallel\"]}}"
            f" ins(%bb : tensor<{k}xf32>) outs(%e : tensor<1x{hw}x{hw}x{k}xf32>) {{\n"
            f"  ^bb0(%v: f32, %o: f32):\n    linalg.yield %v : f32\n  }} -> tensor<1x{hw}x{hw}x{k}xf32>"
            if bias else
            f"%init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x{hw}x{hw}x{k}xf32>) -> tensor<1x{hw}x{hw}x{k}xf32>")
    text = f"""
#id = affine_map<(n, h, w, c) -> (n, h, w, c)>
#bc = affine_map<(n, h, w, c) -> (c)>
func.func @layer(%x: tensor<1x{hw}x{hw}x{c}xf32>) -> tensor<1x{hw}x{hw}x{k}xf32> {{
  %zero = arith.constant 0.0 : f32
  %g = arith.constant dense_resource<g> : tensor<3x3x{c}x{k}xf32>
  %p = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {{
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
    tensor.yield %zero : f32
  }} : tensor<1x{hw}x{hw}x{c}xf32> to tensor<1x{hp}x{hp}x{c}xf32>
  %e = tensor.empty() : tensor<1x{hw}x{hw}x{k}xf32>
  {init}
  %y = linalg.conv_2d_nhwc_hwcf {{dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}}
      ins(%p, %g : tensor<1x{hp}x{hp}x{c}xf32>, tensor<3x3x{c}x{k}xf32>) outs(%init : tensor<1x{hw}x{hw}x{k}xf32>)
      -> tensor<1x{hw}x{hw}x{k}xf32>
  %r = linalg.generic {{indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}}
      ins(%y : tensor<1x{hw}x{hw}x{k}xf32>) outs(%e : tensor<1x{hw}x{hw}x{k}xf32>) {{
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  }} -> tensor<1x{hw}x{hw}x{k}xf32>
  return %r : tensor<1x{hw}x{hw}x{k}xf32>
}}
{{-#
  dialect_resources: {{ builtin: {{ g: "0x04000000{g.tobytes().hex().upper()}", b: "0x04000000{b.tobytes().hex().upper()}" }} }}
#-}}
"""
    return text, g, b


@pytest.mark.parametrize(("m", "hw", "bias", "t"), [
    (2, 6, False, 2), (2, 4, True, 2), (4, 16, True, 4), (4, 6, False, 2),
    (4, 8, True, 2),    # F(4x4) would give 4 tiles (< 16 rows): F(2x2)
    (4, 14, True, 4),   # overhanging: 16x16 computed, cropped to 14x14
    (2, 7, False, 2),   # overhanging: 8x8 computed, cropped to 7x7
])
def test_rewritten_layer_computes_the_convolution(m: int, hw: int, bias: bool, t: int) -> None:
    """F(t x t, 3 x 3), t from `choose_tile`, tiles overhanging the output where t does not divide it."""
    rng = np.random.default_rng(hw)
    text, g, b = _model(rng, hw, 16, 24, bias=bias)
    x = rng.standard_normal((1, hw, hw, 16)).astype(np.float32)
    pad = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = np.maximum(_direct(pad, g.astype(np.float64)) + (b if bias else 0), 0)
    net = extract_tasks(text, winograd=m)
    kinds = [t.name.split("#")[0] for t in net.tasks]
    assert kinds == ["generic", "batch_matmul", "generic"]  # input transform, products, output transform
    bmm = net.tasks[1]
    tiles = -(-hw // t)
    assert [s.shape for s in bmm.inputs] == [((t + 2) ** 2, tiles ** 2, 16), ((t + 2) ** 2, 16, 24)]
    assert net.flops < extract_tasks(text, winograd=0).flops
    # the output transform carries the convolution's consumers (ReLU; bias add), behind the crop if any
    assert "arith.maximumf" in net.tasks[2].ir and ("arith.addf %" in net.tasks[2].ir)
    assert (f"[1, {hw}, {hw}, 24] [1, 1, 1, 1]" in net.tasks[2].ir) == (hw % t != 0)  # the crop
    out = compile_network(net)(x)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 if t == 2 else 5e-4)


def test_choose_tile() -> None:
    """The largest t <= m giving >= 16 tiles, else the smallest; overhang allowed."""
    assert [winograd.choose_tile(1, hw, hw, 4) for hw in (56, 28, 14, 7, 4)] == [4, 4, 4, 2, 2]
    assert winograd.choose_tile(4, 7, 7, 4) == 4          # batch 4: 16 tiles of F(4x4)
    assert winograd.choose_tile(1, 56, 56, 2) == 2
    with pytest.raises(ValueError, match="no F"):
        winograd.choose_tile(1, 8, 8, 1)


@pytest.mark.parametrize("m", [2, 4])
def test_overhanging_reference(m: int) -> None:
    """The numpy algorithm with tiles past the output's end (zeros read, result cropped)."""
    rng = np.random.default_rng(m)
    x = rng.standard_normal((1, 9, 11, 3))
    g = rng.standard_normal((3, 3, 3, 2))
    np.testing.assert_allclose(winograd.reference(x, g, m), _direct(x, g), rtol=1e-9, atol=1e-9)


def test_ineligible_convolutions_stay_direct() -> None:
    narrow, _, _ = _model(np.random.default_rng(0), 4, 8, 24, bias=False)  # 8 input channels < min_channels
    for m in (2, 4):
        assert [t.name.split("#")[0] for t in extract_tasks(narrow, winograd=m).tasks] == ["conv_2d_nhwc_hwcf"]


def test_cli_tasks_winograd(tmp_path, capsys) -> None:
    text, _, _ = _model(np.random.default_rng(1), 4, 16, 16, bias=False)
    path = tmp_path / "layer.mlir"
    path.write_text(text)
    assert cli.main(["tasks", str(path), "--winograd", "2"]) == 0
    out = capsys.readouterr().out
    assert "batch_matmul" in out and "conv_2d" not in out


def test_default_and_log_aware_extraction(tmp_path) -> None:
    """Direct convolutions by default; a log tuned with Winograd convolutions is compiled as the
    Winograd model it was tuned on, and the compiled model computes the layer."""
    from ansor.compile import compile, extract_for_log

    rng = np.random.default_rng(3)
    text, g, _ = _model(rng, 4, 16, 16, bias=False)
    path = tmp_path / "layer.mlir"
    path.write_text(text)
    assert [t.name.split("#")[0] for t in extract_tasks(text).tasks] == ["conv_2d_nhwc_hwcf"]
    log = tmp_path / "wino.jsonl"
    assert cli.main(["tune", str(path), "--winograd", "4", "--trials", "6", "--batch-size", "2",
                     "--log", str(log)]) == 0
    kinds = ["generic", "batch_matmul", "generic"]
    assert [t.name.split("#")[0] for t in extract_for_log(path, log).tasks] == kinds
    assert len(extract_for_log(path, log, winograd=0).tasks) == 1  # asked for explicitly
    assert len(extract_for_log(path, None).tasks) == 1
    fn = compile(path, log=log)
    assert [t.name.split("#")[0] for t in fn.network.tasks] == kinds and fn.tuned_tasks == 3
    x = rng.standard_normal((1, 4, 4, 16)).astype(np.float32)
    ref = np.maximum(_direct(np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0))), g.astype(np.float64)), 0)
    np.testing.assert_allclose(fn(x), ref, rtol=1e-4, atol=1e-4)


def test_compile_keeps_a_one_task_log(tmp_path) -> None:
    """A layer tuned as one task (`--one-task`) compiles as that task."""
    from ansor.compile import CompiledFunction, compile

    text, _, _ = _model(np.random.default_rng(4), 4, 16, 16, bias=False)
    path = tmp_path / "layer.mlir"
    path.write_text(text)
    log = tmp_path / "one.jsonl"
    assert cli.main(["tune", str(path), "--one-task", "--trials", "2", "--batch-size", "2", "--log", str(log)]) == 0
    fn = compile(path, log=log)
    assert isinstance(fn, CompiledFunction) and fn.tuned

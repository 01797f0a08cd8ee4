"""Task extraction (ansor-partition + dedupe) and whole-network compilation."""

from __future__ import annotations

import ansor
import numpy as np
import pytest
from ansor.frontend import workloads
from ansor.compile import CompiledFunction, CompiledNetwork, compile_network
from ansor.frontend.partition import extract_tasks, task_table
from ansor.tuning.scheduler import TaskScheduler
from ansor.core.task import TaskError


def _mlp_reference(text: str, x: np.ndarray) -> np.ndarray:
    """numpy forward pass of `workloads.mlp`, reading its weights back from the resource blobs."""
    import re

    blobs = dict(re.findall(r"(\w+): \"0x04000000([0-9A-F]*)\"", text))
    vals = {k: np.frombuffer(bytes.fromhex(v), dtype="<f4") for k, v in blobs.items()}
    depth = sum(1 for k in vals if k.startswith("w"))
    width = x.shape[1]
    cur = x
    for i in range(depth):
        y = cur @ vals[f"w{i}"].reshape(width, width) + vals[f"b{i}"]
        if i % 2 == 1:
            y = y + cur
        cur = np.maximum(y, 0)
    return cur


def test_repeated_layers_become_weighted_tasks() -> None:
    net = extract_tasks(workloads.get("mlp-16x32x6"))
    assert len(net.calls) == 6
    assert sorted(t.weight for t in net.tasks) == [3, 3]  # plain and residual layers
    assert sum(t.weight * t.flops for t in net.tasks) == net.flops
    assert all(t.inputs[0].shape == (16, 32) for t in net.tasks)
    assert "2 tasks (6 calls)" in task_table(net)


def test_single_op_is_one_task_with_the_same_hash() -> None:
    text = workloads.get("convlayer-1x14x14x8x16x3x2x1")
    net = extract_tasks(text)
    assert len(net.tasks) == 1 and net.tasks[0].weight == 1
    # the fused conv + bn + relu group is the whole function
    assert net.tasks[0].flops == ansor.create_task(text).flops


def test_tbs_subgraph_is_one_task_and_splits_at_reductions_with_split() -> None:
    text = workloads.get("tbs-1x16x2x8")
    net = extract_tasks(text)
    assert len(net.tasks) == 1  # the batch matmul anchors the softmax over its output rows
    assert net.tasks[0].name.startswith("generic#")
    split = extract_tasks(text, split=True)
    assert len(split.tasks) >= 2  # the batch matmul and the softmax reductions are separate anchors
    assert net.flops == split.flops == ansor.create_task(text).flops
    x = np.random.default_rng(0).standard_normal((2, 1, 16, 2, 8)).astype(np.float32)
    np.testing.assert_allclose(compile_network(net)(x[0], x[1]), compile_network(split)(x[0], x[1]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["softmax-128x1000", "lngelu-64x768"])
def test_row_chains_are_one_task_unless_split(name: str) -> None:
    """A chain of row reductions and element-wise ops over the same rows (softmax, LayerNorm) is
    one task; `split=True` keeps the old partitioning, a task per reduction."""
    assert len(extract_tasks(workloads.get(name)).tasks) == 1
    assert len(extract_tasks(workloads.get(name), split=True).tasks) >= 2


def test_attention_scores_and_softmax_are_one_task() -> None:
    net = extract_tasks(workloads.get("tbs-1x128x12x64"))
    assert len(net.tasks) == 1 and len(net.calls) == 1


def test_matmul_bias_relu_is_still_one_task() -> None:
    text = """
#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
func.func @mm_bias_relu(%a: tensor<8x4xf32>, %b: tensor<4x2xf32>, %bias: tensor<2xf32>) -> tensor<8x2xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x2xf32>
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<8x2xf32>) -> tensor<8x2xf32>
  %m = linalg.matmul ins(%a, %b : tensor<8x4xf32>, tensor<4x2xf32>) outs(%z : tensor<8x2xf32>) -> tensor<8x2xf32>
  %r = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %bias : tensor<8x2xf32>, tensor<2xf32>) outs(%e : tensor<8x2xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %t = arith.maximumf %s, %cst : f32
    linalg.yield %t : f32
  } -> tensor<8x2xf32>
  return %r : tensor<8x2xf32>
}
"""
    for split in (False, True):
        net = extract_tasks(text, split=split)
        assert len(net.tasks) == 1 and net.tasks[0].name.startswith("matmul#")


def test_conv_then_global_average_pool_stays_two_tasks() -> None:
    """ResNet's tail: a channels-first convolution (run channels-last, transposed back) + relu,
    then the global average pool over h, w of the NCHW tensor. The pool reduces other rows than the
    convolution's output (its rows are columns of the NHWC result): not a row chain."""
    text = """
#nchw = affine_map<(n, c, h, w) -> (n, c, h, w)>
#plane = affine_map<(n, c, h, w) -> (n, c, 0, 0)>
func.func @conv_gap(%x: tensor<1x3x9x9xf32>, %w: tensor<8x3x3x3xf32>) -> tensor<1x8x1x1xf32> {
  %zero = arith.constant 0.0 : f32
  %inv = arith.constant 0.0204081628 : f32
  %e = tensor.empty() : tensor<1x8x7x7xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<1x8x7x7xf32>) -> tensor<1x8x7x7xf32>
  %c = linalg.conv_2d_nchw_fchw {strides = dense<1> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x3x9x9xf32>, tensor<8x3x3x3xf32>) outs(%z : tensor<1x8x7x7xf32>) -> tensor<1x8x7x7xf32>
  %r = linalg.generic {indexing_maps = [#nchw, #nchw], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%c : tensor<1x8x7x7xf32>) outs(%e : tensor<1x8x7x7xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x8x7x7xf32>
  %e1 = tensor.empty() : tensor<1x8x1x1xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e1 : tensor<1x8x1x1xf32>) -> tensor<1x8x1x1xf32>
  %s = linalg.generic {indexing_maps = [#nchw, #plane], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%r : tensor<1x8x7x7xf32>) outs(%f : tensor<1x8x1x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.addf %a, %o : f32
    linalg.yield %t : f32
  } -> tensor<1x8x1x1xf32>
  %mean = linalg.generic {indexing_maps = [#nchw, #nchw], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%s : tensor<1x8x1x1xf32>) outs(%e1 : tensor<1x8x1x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %d = arith.mulf %a, %inv : f32
    linalg.yield %d : f32
  } -> tensor<1x8x1x1xf32>
  return %mean : tensor<1x8x1x1xf32>
}
"""
    net = extract_tasks(text)
    assert sorted(t.name.split("#")[0] for t in net.tasks) == ["conv_2d_nhwc_hwcf", "generic"]
    assert len(extract_tasks(text, split=True).tasks) == 2


def test_compiled_network_matches_numpy() -> None:
    text = workloads.get("mlp-8x16x4")
    fn = ansor.compile(text)
    assert isinstance(fn, CompiledNetwork) and fn.tuned_tasks == 0
    x = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    np.testing.assert_allclose(fn(x), _mlp_reference(text, x), rtol=1e-4, atol=1e-5)
    # one fusion group: compiled as a single task
    assert isinstance(ansor.compile(workloads.get("matmul-64")), CompiledFunction)


def test_tuned_network_runs_every_task_schedule_and_stays_correct(tmp_path) -> None:
    text = workloads.get("mlp-32x64x2")
    net = extract_tasks(text)
    log = tmp_path / "mlp.jsonl"
    res = TaskScheduler(net.tasks, strategy="round-robin").tune(6, batch_size=3, log_path=log, search="random")
    assert res.trials == 6
    assert all(r.best is not None for r in res.results)  # each task has a verified schedule
    fn = compile_network(net, log)
    assert fn.tuned_tasks == len(net.tasks)
    x = np.random.default_rng(1).standard_normal((32, 64)).astype(np.float32)
    np.testing.assert_allclose(fn(x), _mlp_reference(text, x), rtol=1e-4, atol=1e-4)
    assert fn.time(x, number=2) > 0


def test_bad_model_input_is_one_line() -> None:
    with pytest.raises(TaskError, match="no public func.func"):
        extract_tasks("module {}")
    with pytest.raises(TaskError, match="no such file"):
        extract_tasks("missing-model.mlir")


def _nchw_model(rng: np.random.Generator) -> tuple[str, np.ndarray]:
    """conv (NCHW, weights embedded) + relu, then a second conv: what torch-mlir emits for a CNN."""
    w0 = rng.standard_normal((8, 3, 3, 3)).astype("<f4")
    w1 = rng.standard_normal((4, 8, 1, 1)).astype("<f4")
    blob = lambda a: "0x04000000" + a.tobytes().hex().upper()
    text = f"""
#id = affine_map<(n, c, h, w) -> (n, c, h, w)>
func.func @cnn(%x: tensor<1x3x10x10xf32>) -> tensor<1x4x4x4xf32> {{
  %zero = arith.constant 0.0 : f32
  %w0 = arith.constant dense_resource<w0> : tensor<8x3x3x3xf32>
  %w1 = arith.constant dense_resource<w1> : tensor<4x8x1x1xf32>
  %e0 = tensor.empty() : tensor<1x8x4x4xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %c0 = linalg.conv_2d_nchw_fchw {{strides = dense<2> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}}
      ins(%x, %w0 : tensor<1x3x10x10xf32>, tensor<8x3x3x3xf32>) outs(%z0 : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %r = linalg.generic {{indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}}
      ins(%c0 : tensor<1x8x4x4xf32>) outs(%e0 : tensor<1x8x4x4xf32>) {{
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  }} -> tensor<1x8x4x4xf32>
  %e1 = tensor.empty() : tensor<1x4x4x4xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %c1 = linalg.conv_2d_nchw_fchw {{strides = dense<1> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}}
      ins(%r, %w1 : tensor<1x8x4x4xf32>, tensor<4x8x1x1xf32>) outs(%z1 : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %c1 : tensor<1x4x4x4xf32>
}}
{{-#
  dialect_resources: {{ builtin: {{ w0: "{blob(w0)}", w1: "{blob(w1)}" }} }}
#-}}
"""
    x = rng.standard_normal((1, 3, 10, 10)).astype(np.float32)
    # numpy reference: direct convolution
    def conv(inp: np.ndarray, w: np.ndarray, s: int) -> np.ndarray:
        f, _c, kh, kw = w.shape
        oh = (inp.shape[2] - kh) // s + 1
        out = np.zeros((1, f, oh, oh), np.float32)
        for i in range(oh):
            for j in range(oh):
                patch = inp[0, :, i * s:i * s + kh, j * s:j * s + kw]
                out[0, :, i, j] = np.tensordot(w, patch, axes=([1, 2, 3], [0, 1, 2]))
        return out
    ref = conv(np.maximum(conv(x, w0, 2), 0), w1, 1)
    return text, (x, ref)


def test_channels_first_convs_run_channels_last_with_folded_weights() -> None:
    text, (x, ref) = _nchw_model(np.random.default_rng(3))
    net = extract_tasks(text)
    assert {t.name.split("#")[0] for t in net.tasks} == {"conv_2d_nhwc_hwcf"}
    assert any(s.shape == (3, 3, 3, 8) for t in net.tasks for s in t.inputs)  # HWCF filter, folded
    assert "linalg.conv_2d_nchw_fchw" not in net.ir
    kept = extract_tasks(text, layout="keep")
    assert {t.name.split("#")[0] for t in kept.tasks} == {"conv_2d_nchw_fchw"}
    for n in (net, kept):
        np.testing.assert_allclose(compile_network(n)(x), ref, rtol=1e-4, atol=1e-4)


def _depthwise_model_text(w: np.ndarray) -> str:
    blob = "0x04000000" + w.tobytes().hex().upper()
    return f"""
#id = affine_map<(n, c, h, w) -> (n, c, h, w)>
func.func @dw(%x: tensor<1x6x9x9xf32>) -> tensor<1x6x4x4xf32> {{
  %zero = arith.constant 0.0 : f32
  %w = arith.constant dense_resource<w> : tensor<6x3x3xf32>
  %e = tensor.empty() : tensor<1x6x4x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<1x6x4x4xf32>) -> tensor<1x6x4x4xf32>
  %c = linalg.depthwise_conv_2d_nchw_chw {{strides = dense<2> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}}
      ins(%x, %w : tensor<1x6x9x9xf32>, tensor<6x3x3xf32>) outs(%z : tensor<1x6x4x4xf32>) -> tensor<1x6x4x4xf32>
  %r = linalg.generic {{indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}}
      ins(%c : tensor<1x6x4x4xf32>) outs(%e : tensor<1x6x4x4xf32>) {{
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  }} -> tensor<1x6x4x4xf32>
  return %r : tensor<1x6x4x4xf32>
}}
{{-#
  dialect_resources: {{ builtin: {{ w: "{blob}" }} }}
#-}}
"""


_DEPTHWISE_MODEL = _depthwise_model_text(np.random.default_rng(5).standard_normal((6, 3, 3)).astype("<f4"))


def test_depthwise_convs_run_channels_last() -> None:
    """MobileNet's depthwise convolutions (torch's groups == channels) go channels-last too, with
    the C x KH x KW filter folded to KH x KW x C, and compute the same as the NCHW program."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((6, 3, 3)).astype("<f4")
    text = _depthwise_model_text(w)
    x = rng.standard_normal((1, 6, 9, 9)).astype(np.float32)
    ref = np.zeros((1, 6, 4, 4), np.float32)
    for i in range(4):
        for j in range(4):
            ref[0, :, i, j] = np.sum(x[0, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3] * w, axis=(1, 2))
    ref = np.maximum(ref, 0)
    net = extract_tasks(text)
    assert {t.name.split("#")[0] for t in net.tasks} == {"depthwise_conv_2d_nhwc_hwc"}
    assert any(s.shape == (3, 3, 6) for t in net.tasks for s in t.inputs)  # KH x KW x C filter
    assert "depthwise_conv_2d_nchw_chw" not in net.ir
    kept = extract_tasks(text, layout="keep")
    assert {t.name.split("#")[0] for t in kept.tasks} == {"depthwise_conv_2d_nchw_chw"}
    for n in (net, kept):
        np.testing.assert_allclose(compile_network(n)(x), ref, rtol=1e-4, atol=1e-4)


def test_row_chains_default_follows_the_target() -> None:
    """On the CPU a softmax is one task; on CUDA (whose rules do not schedule fused chains with an
    anchor yet) the default keeps today's split; `split` overrides both ways."""
    from ansor.frontend import workloads
    from ansor.frontend.partition import extract_tasks

    src = workloads.get("softmax-64x100")
    assert len(extract_tasks(src).tasks) == 1
    assert len(extract_tasks(src, target="cuda").tasks) == 2
    assert len(extract_tasks(src, target="cuda", split=False).tasks) == 1
    assert len(extract_tasks(src, split=True).tasks) == 2


_WIDENED = """
#id = affine_map<(i, j) -> (i, j)>
func.func @f(%x: tensor<8x16xbf16>, %w: tensor<16x4xf32>) -> tensor<8x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %xw = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x16xbf16>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %y = arith.extf %a : bf16 to f32
    linalg.yield %y : f32
  } -> tensor<8x16xf32>
  %ce = tensor.empty() : tensor<8x4xf32>
  %c0 = linalg.fill ins(%zero : f32) outs(%ce : tensor<8x4xf32>) -> tensor<8x4xf32>
  %c = linalg.matmul ins(%xw, %w : tensor<8x16xf32>, tensor<16x4xf32>) outs(%c0 : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %c : tensor<8x4xf32>
}
"""


def test_widened_half_operands_fold_into_the_matmul() -> None:
    """An `arith.extf` generic feeding a matmul is dropped (the matmul extends its operands
    itself, exactly); an f32 operand stays as it is."""
    from ansor.frontend.partition import extract_tasks

    net = extract_tasks(_WIDENED)
    (task,) = net.tasks
    assert [s.dtype for s in task.inputs] == ["bf16", "f32"]
    assert "linalg.generic" not in task.ir  # the widening is gone, not a task of its own
    assert "linalg.matmul ins(%arg0, %arg1 : tensor<8x16xbf16>, tensor<16x4xf32>)" in task.ir

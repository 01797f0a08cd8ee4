"""A task returning a reshape of its last op's result (torch's `sum(keepdim=True)` after the unit
dims are folded, an op preprocessing expanded) writes straight into its out-param on the GPU
(`ansor-gpu-reshaped-results-in-place`); before, its host buffer + copy was refused and the task
(BERT's row sums, the LayerNorm tail) ran on the CPU inside a GPU network."""

from __future__ import annotations

import numpy as np
import pytest

from ansor.frontend.partition import extract_tasks
from test_gpu_ragged_rows import _as_cpu_loops

#: A keepdim row sum of a 3-D tensor and its use: one row-wise task (`CHAIN`), or the sum alone
#: (`SUM`, BERT's generic#8).
CHAIN = """
func.func @f(%x: tensor<1x128x200xf32>) -> tensor<1x128x200xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x128x1xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<1x128x1xf32>) -> tensor<1x128x1xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, 0)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<1x128x200xf32>) outs(%z : tensor<1x128x1xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  } -> tensor<1x128x1xf32>
  %o = tensor.empty() : tensor<1x128x200xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, 0)>,
                                        affine_map<(a, b, c) -> (a, b, c)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %s : tensor<1x128x200xf32>, tensor<1x128x1xf32>) outs(%o : tensor<1x128x200xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %r = arith.subf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<1x128x200xf32>
  return %y : tensor<1x128x200xf32>
}
"""
SUM = CHAIN.split("  %o = tensor.empty")[0].replace("-> tensor<1x128x200xf32> {", "-> tensor<1x128x1xf32> {") + """\
  return %s : tensor<1x128x1xf32>
}
"""


def _task(model: str):
    (task,) = extract_tasks(model, target="cuda").tasks
    assert "tensor.expand_shape" in task.ir  # the folded unit dims come back at the task's edge
    return task


def _reference(model: str, x: np.ndarray) -> np.ndarray:
    s = x.astype(np.float64).sum(-1, keepdims=True)
    return s if model is SUM else x - s


@pytest.mark.parametrize("model", [SUM, CHAIN], ids=["sum", "chain"])
def test_keepdim_row_sum_builds_for_the_gpu(model: str) -> None:
    from ansor.targets.cuda.lowering import emit_ptx
    from ansor.targets.cuda.rules import default_script

    task = _task(model)
    ptx = emit_ptx(task, default_script(task))
    assert ".entry" in ptx and "shfl.sync" in ptx


def test_keepdim_row_sum_writes_its_out_param_right() -> None:
    """The default script up to the mapping to the GPU, then the out-param rewrite, run as CPU
    loops into a NaN-poisoned output: every row sum there and right, no host buffer left. (The
    chain's 200 columns are ragged: as CPU loops its padded copies stay host buffers, so it is
    checked as PTX here and on the card.)"""
    model = SUM
    from mlir import ir

    from ansor.core import native as _native
    from ansor.core.mlir import apply_script, parse_payload, run_passes
    from ansor.targets.cpu.lowering import _lower_and_jit
    from ansor.targets.cuda.lowering import _AFTER_SCRIPT
    from ansor.targets.cuda.rules import default_script

    task = _task(model)
    shape = task.outputs[0].shape
    x = np.random.default_rng(0).standard_normal((1, 128, 200)).astype(np.float32)
    _native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = parse_payload(task)
        run_passes(module, "ansor-gpu-own-fill-destinations", "lower")
        apply_script(module, _as_cpu_loops(default_script(task)))
        run_passes(module, _AFTER_SCRIPT, "lower")
        run_passes(module, "ansor-gpu-guard-padded-reads", "lower")  # ragged rows of 200 (as the GPU's)
        text = str(module)
        body_end = text.split("    return")[0].rsplit("\n    }", 1)[-1]  # after the outermost loops
        assert "memref.copy" not in body_end  # nothing copied into the out-param at the end
        assert all("ansor.smem" in line for line in text.splitlines() if "memref.alloc()" in line)
        (out,) = _lower_and_jit(module, task, 2).run([x], [np.full(shape, np.nan, np.float32)])
    np.testing.assert_allclose(out, _reference(model, x), rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("model", [SUM, CHAIN], ids=["sum", "chain"])
def test_keepdim_row_sum_runs_on_the_gpu(model: str) -> None:
    from ansor.targets.cuda.lowering import compile_task_cuda

    task = _task(model)
    x = np.random.default_rng(1).standard_normal((1, 128, 200)).astype(np.float32)
    (out,) = compile_task_cuda(task, None).run([x], [np.full(task.outputs[0].shape, np.nan, np.float32)])
    np.testing.assert_allclose(out, _reference(model, x), rtol=1e-4, atol=1e-4)

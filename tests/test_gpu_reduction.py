"""The cuda target's cross-thread reduction rule (`gpu_reduction.py`): which tasks it takes, its
scripts lowered to PTX (no GPU), and real runs against numpy (`@pytest.mark.gpu`)."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from ansor.frontend import workloads
from ansor.space.schedule import sample, validate
from ansor.targets.cuda.reduction import RowSketch, exact_thread_options, row_stage_for, thread_options
from ansor.targets.cuda.rules import default_script, gpu_schedulable
from ansor.targets import generate_sketches
from ansor.core.task import create_task

# A row sum whose output op is the reduction itself (no element-wise output), 96 columns.
ROWSUM = """
func.func @rowsum(%x: tensor<16x96xf32>) -> tensor<16xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<16xf32>) -> tensor<16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<16x96xf32>) outs(%f : tensor<16xf32>) {
    ^bb0(%a: f32, %acc: f32):
      %s = arith.addf %acc, %a : f32
      linalg.yield %s : f32
  } -> tensor<16xf32>
  return %r : tensor<16xf32>
}
"""

# Softmax over the last axis of a 3-D tensor with 40 columns (no multiple of 32: 2, 4 or 8 threads).
SOFTMAX = """
func.func @softmax(%x: tensor<2x8x40xf32>) -> tensor<2x8x40xf32> {
  %ninf = arith.constant -3.40282347E+38 : f32
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x8xf32>
  %mi = linalg.fill ins(%ninf : f32) outs(%e : tensor<2x8xf32>) -> tensor<2x8xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<2x8x40xf32>) outs(%mi : tensor<2x8xf32>) {
    ^bb0(%v: f32, %acc: f32):
      %r = arith.maximumf %acc, %v : f32
      linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %se = tensor.empty() : tensor<2x8xf32>
  %si = linalg.fill ins(%z : f32) outs(%se : tensor<2x8xf32>) -> tensor<2x8xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>,
                                        affine_map<(a, b, c) -> (a, b)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %m : tensor<2x8x40xf32>, tensor<2x8xf32>) outs(%si : tensor<2x8xf32>) {
    ^bb0(%v: f32, %mx: f32, %acc: f32):
      %d = arith.subf %v, %mx : f32
      %ex = math.exp %d : f32
      %r = arith.addf %acc, %ex : f32
      linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %oe = tensor.empty() : tensor<2x8x40xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>,
                                        affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %m, %s : tensor<2x8x40xf32>, tensor<2x8xf32>, tensor<2x8xf32>) outs(%oe : tensor<2x8x40xf32>) {
    ^bb0(%v: f32, %mx: f32, %sum: f32, %out: f32):
      %d = arith.subf %v, %mx : f32
      %ex = math.exp %d : f32
      %r = arith.divf %ex, %sum : f32
      linalg.yield %r : f32
  } -> tensor<2x8x40xf32>
  return %o : tensor<2x8x40xf32>
}
"""


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _lngelu(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b
    return 0.5 * y * (1 + np.tanh(0.7978845608028654 * (y + 0.044715 * y**3)))


def _tbs(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    return _softmax(np.einsum("bshd,bthd->bhst", q.astype(np.float64), k.astype(np.float64)))


TASKS = {
    "lngelu": (lambda: workloads.get("lngelu-8x256"), lambda ins: _lngelu(*ins)),
    "tbs": (lambda: workloads.get("tbs-1x32x2x16"), lambda ins: _tbs(*ins)),
    "rowsum": (lambda: ROWSUM, lambda ins: ins[0].astype(np.float64).sum(-1)),
    "softmax": (lambda: SOFTMAX, lambda ins: _softmax(ins[0].astype(np.float64))),
}


def _task(name: str):
    return create_task(TASKS[name][0](), name=name, target="cuda")


@pytest.mark.parametrize("name", sorted(TASKS))
def test_row_wise_tasks_get_the_cross_thread_reduction_sketch(name: str) -> None:
    task = _task(name)
    sketches = generate_sketches(task)
    assert [s.name for s in sketches] == ["r0", "skip"]
    sk = sketches[0]
    assert isinstance(sk, RowSketch) and sk.rule.startswith("gpu_cross_thread_reduction(")
    assert gpu_schedulable(task)[0]
    rng = random.Random(0)
    for _ in range(5):
        assert validate(sk, sample(sk, rng).values()) is None
    holes = sk.script()
    assert "{op" in holes and "tile_reduction_using_forall" in holes


def test_thread_options_split_the_row() -> None:
    assert thread_options(1024) == (32, 64, 128, 256, 512, 1024)
    assert thread_options(768) == (32, 64, 96, 128, 192, 256, 384, 768)
    # rows whose length no multiple of 32 divides also get ragged options (test_gpu_ragged_rows.py)
    assert exact_thread_options(40) == (2, 4, 8) and thread_options(40) == (2, 4, 8, 32, 64)
    assert exact_thread_options(3) == () and thread_options(3) == (2, 4, 32)


def test_structure_of_attention_scores_and_softmax() -> None:
    """TBS: one row (batch, head, query) per block; the batch matmul's row is computed once into
    shared memory, softmax's exp is recomputed per thread chunk, the max and the sum are split
    across the threads."""
    stage, _ = row_stage_for(_task("tbs"))
    assert stage is not None
    assert stage.col_dim == 3 and stage.cols == 32
    assert sorted(op for op, _, _ in stage.reductions) == [3, 6]
    assert stage.recompute == (4,)
    assert stage.materialize == ((1, 5, 0, 16),) and stage.col_loops == ((1, 3),)
    # 16-long dot products: 1 (a thread each) .. 8 lanes splitting one (16 would leave 1 each:
    # split_reduction rejects a factor of 1)
    assert stage.lane_options() == (1, 2, 4, 8)
    sk = generate_sketches(_task("tbs"))[0]
    assert sk.validate({"op7.threads": 32, "op7.unroll": 0, "op7.lanes": 8}) is None
    assert "not in its options" in sk.validate({"op7.threads": 32, "op7.unroll": 0, "op7.lanes": 16})
    assert "split_reduction" in sk.script({"op7.threads": 32, "op7.unroll": 0, "op7.lanes": 8})
    assert stage.block_axes == ("y", "x")


def test_graphs_outside_the_rule_say_why() -> None:
    # a norm over n x m of an m x n input: its two reduction loops cannot be merged into one
    # column loop (tests/test_gpu_multi_reduce.py has those that can)
    text = workloads.get("nrm-1x256x256").replace("affine_map<(b, m, n) -> (b, m, n)>", "affine_map<(b, m, n) -> (b, n, m)>")
    nrm = create_task(text, name="nrm", target="cuda")
    stage, why = row_stage_for(nrm)
    assert stage is None and "does not index its 2 reduction loops in order" in why
    ok, why = gpu_schedulable(nrm)
    assert not ok and "data reuse" in why and "2 reduction loops" in why


@pytest.mark.parametrize("name", sorted(TASKS))
def test_cross_thread_reductions_lower_to_warp_shuffles(name: str) -> None:
    """PTX without a GPU: the partial results are merged with `shfl.sync.bfly`, and no math
    function is left to libdevice (`tanh`, `exp`, `rsqrt` are approximated inline)."""
    from ansor.targets.cuda.lowering import emit_ptx

    task = _task(name)
    sk = generate_sketches(task)[0]
    rng = random.Random(1)
    ptxs = [emit_ptx(task, script, arch="sm_90") for script in [default_script(task), sk.script(sample(sk, rng).values())]]
    for ptx in ptxs:
        assert ".entry" in ptx and "shfl.sync.bfly" in ptx
        assert "call" not in ptx and "__nv_" not in ptx
        assert ".local" not in ptx  # per-row values stay in registers
    if name == "tbs":
        # the scores' row (the untuned program's; a sampled one where each thread reads back
        # only the columns it computed, a warp per row, keeps them in registers)
        assert ".shared" in ptxs[0] and "st.shared" in ptxs[0]


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(TASKS))
def test_cross_thread_reductions_match_numpy_on_the_gpu(name: str) -> None:
    """The default program and every valid (threads, lanes) of the sketch, against numpy."""
    from ansor.targets.cuda.lowering import compile_task_cuda
    from ansor.measure.measurer import make_inputs

    task = _task(name)
    ins = make_inputs(task)
    want = TASKS[name][1](ins)
    sk = generate_sketches(task)[0]
    unroll = sk.knobs[1]  # cycled through, not crossed with the others
    rest = [k for k in sk.knobs if k is not unroll]
    points = [{**dict(zip([k.name for k in rest], v)), unroll.name: unroll.options[i % len(unroll.options)]}
              for i, v in enumerate(itertools.product(*(k.options for k in rest)))]
    points = [p for p in points if sk.validate(p) is None]
    scripts = [None] + [sk.script(p) for p in points]
    for script in scripts:
        (out,) = compile_task_cuda(task, script).run(ins)
        np.testing.assert_allclose(out, want, rtol=2e-4, atol=2e-5)


def test_a_softmax_thread_loads_its_columns_once() -> None:
    """`ansor-gpu-reuse-readonly-loads`: the max, the exp-and-sum and the output phases read the
    thread's columns of the input across barriers; the input is never written, so each column is
    loaded once (was once per phase) and its `exp(x - max)` computed once (was twice)."""
    from ansor.targets.cuda.lowering import emit_ptx

    task = create_task(workloads.get("softmax-2364x197"), name="sm", target="cuda")
    sk = generate_sketches(task)[0]
    ptx = emit_ptx(task, sk.script({"op5.rows": 2, "op5.threads": 128, "op5.unroll": 16}), arch="sm_90")
    cols = -(-197 // 128)  # a thread's columns
    assert ptx.count("ld.global") == cols and ptx.count("ex2.approx") == cols

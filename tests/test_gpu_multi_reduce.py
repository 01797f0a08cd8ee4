"""Reductions over several loops on the GPU (issue 28): a global average pool over `h, w` (NCHW,
keepdim or not, then a divide), a norm over `m x n` (`nrm-BxMxN`, rows of 197 x 197 too), a sum
over the last two dims. The cross-thread reduction rule merges each such reduction's loops into
one column loop first (`ansor-gpu-collapse-reduction-loops`, `targets/cuda/merged_reduction.py`);
these tasks fell back to the CPU inside whole-model runs before. Checked here: the rule applies,
the default and sampled scripts build PTX without a GPU, and run on the CPU (blocks and threads
as loops) into NaN-poisoned outputs; on an NVIDIA GPU (`@pytest.mark.gpu`, skipped without one)
they run against numpy:

    pytest tests/test_gpu_multi_reduce.py -m gpu
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import pytest
from ansor.core.task import SearchTask, create_task
from ansor.frontend import workloads
from ansor.targets import generate_sketches
from ansor.targets.cuda.reduction import RowSketch, default_values, row_stage_for
from ansor.targets.cuda.rules import gpu_schedulable
from test_gpu_ragged_rows import _run_as_cpu_loops

_SUM = """  ^bb0(%a: f32, %o: f32):
    %t = arith.addf %a, %o : f32
    linalg.yield %t : f32
"""


def _gap(n: int, c: int, h: int, w: int, *, keepdim: bool) -> str:
    """torch-mlir's global average pool (`mean(x, (2, 3), keepdim)`) of an NCHW tensor: a sum
    generic over `h, w` into `[n, c]` (or `[n, c, 1, 1]` through the map `(n, c, 0, 0)`), then a
    divide generic."""
    out = f"{n}x{c}x1x1" if keepdim else f"{n}x{c}"
    rank = 4 if keepdim else 2
    res = "(n, c, 0, 0)" if keepdim else "(n, c)"
    ident = ", ".join(f"d{i}" for i in range(rank))
    return f"""
func.func @gap(%x: tensor<{n}x{c}x{h}x{w}xf32>) -> tensor<{out}xf32> {{
  %zero = arith.constant 0.0 : f32
  %area = arith.constant {float(h * w)} : f32
  %e = tensor.empty() : tensor<{out}xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<{out}xf32>) -> tensor<{out}xf32>
  %s = linalg.generic {{indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>, affine_map<(n, c, h, w) -> {res}>],
                       iterator_types = ["parallel", "parallel", "reduction", "reduction"]}}
      ins(%x : tensor<{n}x{c}x{h}x{w}xf32>) outs(%f : tensor<{out}xf32>) {{
{_SUM}  }} -> tensor<{out}xf32>
  %mean = linalg.generic {{indexing_maps = [affine_map<({ident}) -> ({ident})>, affine_map<({ident}) -> ({ident})>],
                          iterator_types = [{", ".join(['"parallel"'] * rank)}]}}
      ins(%s : tensor<{out}xf32>) outs(%e : tensor<{out}xf32>) {{
  ^bb0(%a: f32, %o: f32):
    %d = arith.divf %a, %area : f32
    linalg.yield %d : f32
  }} -> tensor<{out}xf32>
  return %mean : tensor<{out}xf32>
}}
"""


def _sum_last_two(b: int, m: int, n: int) -> str:
    """`x.sum((1, 2))` of a `[b, m, n]` tensor: the reduction is the task's output."""
    return f"""
func.func @sum12(%x: tensor<{b}x{m}x{n}xf32>) -> tensor<{b}xf32> {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{b}xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<{b}xf32>) -> tensor<{b}xf32>
  %s = linalg.generic {{indexing_maps = [affine_map<(b, m, n) -> (b, m, n)>, affine_map<(b, m, n) -> (b)>],
                       iterator_types = ["parallel", "reduction", "reduction"]}}
      ins(%x : tensor<{b}x{m}x{n}xf32>) outs(%f : tensor<{b}xf32>) {{
{_SUM}  }} -> tensor<{b}xf32>
  return %s : tensor<{b}xf32>
}}
"""


def _keepdim_folded() -> str:
    """The keepdim pool as a whole-model run gets it: extracted for cuda, its unit dims folded
    (`partition._fold_unit_reduction_dims`: reshapes at the task's edges)."""
    from ansor.frontend.partition import extract_tasks

    (task,) = extract_tasks(_gap(1, 64, 7, 7, keepdim=True), target="cuda").tasks
    assert "(d0, d1, 0, 0)" not in task.ir
    return task.ir


def _mean_hw(x: np.ndarray) -> np.ndarray:
    return x.mean(axis=(2, 3))


#: name -> (MLIR of the task, float64 numpy reference of its output, the merged column extent)
CASES: dict[str, tuple[Callable[[], str], Callable[[np.ndarray], np.ndarray], int]] = {
    "gap-2x8x7x7": (lambda: _gap(2, 8, 7, 7, keepdim=False), _mean_hw, 49),
    "gap-keepdim-2x8x7x7": (lambda: _gap(2, 8, 7, 7, keepdim=True), lambda x: _mean_hw(x)[:, :, None, None], 49),
    # ResNet-18's pool, keepdim folded at extraction as in a whole-model run
    "gap-keepdim-folded-1x64x7x7": (_keepdim_folded, lambda x: _mean_hw(x)[:, :, None, None], 49),
    "gap-1x512x7x7": (lambda: _gap(1, 512, 7, 7, keepdim=False), _mean_hw, 49),
    "nrm-2x64x64": (lambda: workloads.get("nrm-2x64x64"), lambda x: np.sqrt((x * x).sum(axis=(1, 2))), 4096),
    "nrm-8x197x197": (lambda: workloads.get("nrm-8x197x197"), lambda x: np.sqrt((x * x).sum(axis=(1, 2))), 197 * 197),
    # a single row: one block (its row loop of extent 1 mapped to block x)
    "nrm-1x256x256": (lambda: workloads.get("nrm-1x256x256"), lambda x: np.sqrt((x * x).sum(axis=(1, 2))), 65536),
    "sum12-4x32x48": (lambda: _sum_last_two(4, 32, 48), lambda x: x.sum(axis=(1, 2)), 32 * 48),
    "sum12-3x5x7": (lambda: _sum_last_two(3, 5, 7), lambda x: x.sum(axis=(1, 2)), 35),
}


def _task(name: str) -> SearchTask:
    return create_task(CASES[name][0](), name=name, target="cuda")


def _sketch(task: SearchTask) -> RowSketch:
    sk = generate_sketches(task)[0]
    assert isinstance(sk, RowSketch), task.name
    return sk


def _schedules(sk: RowSketch, n: int = 3, seed: int = 0) -> list[dict[str, int]]:
    """The untuned default, then `n` sampled annotations."""
    rng = random.Random(seed)
    return [default_values(sk.gpu_stage)] + [sk.sample(rng).values() for _ in range(n)]


def _input(task: SearchTask, seed: int = 3) -> np.ndarray:
    (spec,) = task.inputs
    return np.random.default_rng(seed).standard_normal(spec.shape).astype(np.float32)


# ----------------------------------------------------------------------------------------------
# The rule


@pytest.mark.parametrize("name", sorted(CASES))
def test_reductions_over_several_loops_get_the_gpu_rule(name: str) -> None:
    """Each task is GPU-schedulable by the cross-thread reduction rule, its reduction's loops
    merged into one column loop of their product; the script merges them first."""
    task = _task(name)
    ok, why = gpu_schedulable(task)
    assert ok and why.startswith("gpu_cross_thread_reduction"), why
    st = _sketch(task).gpu_stage
    assert st.cols == CASES[name][2] and len(st.merged) == 1
    (red,) = st.reductions
    assert red[0] == st.merged[0]
    script = _sketch(task).script(default_values(st))
    assert script.index('"ansor-gpu-collapse-reduction-loops"') < script.index("tile_using_forall")


def test_merged_loops_as_the_pass_leaves_them() -> None:
    """The keepdim pool's reduction `(n, c, h, w) -> (n, c, 0, 0)`: loops `n, c, u0, u1, r` (the
    kept unit dims are unit parallel loops before the merged one), the input read at
    `(n, c, r)`; the norm's `(b, m, n) -> (b)`: loops `b, r`."""
    from ansor.core.loops import analyze_graph
    from ansor.targets.cuda.merged_reduction import merge_reduction_loops

    task = _task("gap-keepdim-2x8x7x7")
    ops, merged, why = merge_reduction_loops(task.ir, analyze_graph(task.ir)[0])
    (r,) = [o for o in ops if o.index in merged]
    assert not why and r.extents == (2, 8, 1, 1, 49) and r.kinds == ("S", "S", "S", "S", "R")
    assert r.input_dims == ((0, 1, 4),) and r.output_dims == (0, 1, 2, 3) and r.plain_output
    task = _task("nrm-2x64x64")
    ops, merged, _ = merge_reduction_loops(task.ir, analyze_graph(task.ir)[0])
    (r,) = [o for o in ops if o.index in merged]
    assert r.extents == (2, 4096) and r.input_dims == ((0, 1),) and r.output_dims == (0,)


def _loops_after_the_pass(task: SearchTask, op: int) -> tuple[tuple[int, ...], tuple[str, ...], list[tuple[int, ...]]]:
    """(extents, kinds, dims indexing each operand) of op `op` once the payload has been through
    `ansor-gpu-collapse-reduction-loops`, read off the IR."""
    from ansor.core import native as _native
    from ansor.core.loops import OP_ATTR
    from ansor.core.mlir import parse_payload, run_passes
    from mlir import ir

    _native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = parse_payload(task)
        run_passes(module, "func.func(ansor-gpu-collapse-reduction-loops)", "apply")
        found: list[ir.Operation] = []

        def visit(o: ir.Operation) -> ir.WalkResult:
            if OP_ATTR in o.attributes and ir.IntegerAttr(o.attributes[OP_ATTR]).value == op:
                found.append(o)
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
        (g,) = found
        kinds = tuple("R" if "reduction" in str(a) else "S" for a in ir.ArrayAttr(g.attributes["iterator_types"]))
        extents = [0] * len(kinds)
        dims = []
        for v, m in zip(g.operands, ir.ArrayAttr(g.attributes["indexing_maps"]), strict=True):
            results = ir.AffineMapAttr(m).value.results
            dims.append(tuple(e.position for e in results if isinstance(e, ir.AffineDimExpr)))
            for axis, e in enumerate(results):
                if isinstance(e, ir.AffineDimExpr):
                    extents[e.position] = ir.ShapedType(v.type).shape[axis]
        return tuple(extents), kinds, dims


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_rule_predicts_what_the_pass_does(name: str) -> None:
    """The loops the rule reasons about (`merge_reduction_loops`) are those of the op the C++ pass
    leaves: extents, kinds, the loops indexing each input and the result."""
    from ansor.core.loops import analyze_graph
    from ansor.targets.cuda.merged_reduction import merge_reduction_loops

    task = _task(name)
    ops, merged, _ = merge_reduction_loops(task.ir, analyze_graph(task.ir)[0])
    (r,) = [o for o in ops if o.index in merged]
    extents, kinds, dims = _loops_after_the_pass(task, r.index)
    assert (extents, kinds) == (r.extents, r.kinds)
    assert dims == [*r.input_dims, r.output_dims]


def test_reductions_that_cannot_be_merged_say_why() -> None:
    """Reduction loops read out of order (`(b, m, n) -> (b, n, m)`): no exact merge; the rule
    refuses in one line naming the op."""
    text = _sum_last_two(4, 32, 48).replace("affine_map<(b, m, n) -> (b, m, n)>",
                                            "affine_map<(b, m, n) -> (b, n, m)>").replace(
        "tensor<4x32x48xf32>", "tensor<4x48x32xf32>")
    task = create_task(text, name="transposed", target="cuda")
    stage, why = row_stage_for(task)
    assert stage is None and why == "op1: input 0 does not index its 2 reduction loops in order, together"
    ok, why = gpu_schedulable(task)
    assert not ok and "\n" not in why


def test_ragged_and_exact_columns() -> None:
    """49 and 38809 columns: no thread count divides them, every option is ragged (the default
    pads 49 to 64); 4096: exact, 256 threads."""
    for name, t, padded in (("gap-2x8x7x7", 64, 64), ("nrm-8x197x197", 256, 38912), ("nrm-2x64x64", 256, 4096)):
        st = _sketch(_task(name)).gpu_stage
        v = default_values(st)
        assert (v[st.threads_knob], st.padded_cols(v)) == (t, padded), name
        assert st.ragged(v) == (padded != st.cols)


# ----------------------------------------------------------------------------------------------
# The scripts as CPU loops, PTX


@pytest.mark.parametrize("name", sorted(CASES))
def test_scripts_run_as_loops_on_the_cpu(name: str) -> None:
    """The default and sampled scripts, up to the mapping to the GPU, run on the CPU into
    NaN-poisoned outputs: every output written, right."""
    task = _task(name)
    sk = _sketch(task)
    x = _input(task)
    want = CASES[name][1](x.astype(np.float64))
    for v in _schedules(sk):
        out = _run_as_cpu_loops(task, sk.script(v), [x], sk.gpu_stage.padded_cols(v))
        assert not np.isnan(out).any(), v
        np.testing.assert_allclose(out, want, rtol=2e-4, atol=2e-4, err_msg=str(v))


@pytest.mark.parametrize("name", sorted(CASES))
def test_scripts_lower_to_ptx_without_a_gpu(name: str) -> None:
    """PTX without a GPU: warp shuffles merge the threads' partial sums, no local memory."""
    from ansor.targets.cuda.lowering import emit_ptx

    task = _task(name)
    sk = _sketch(task)
    for v in _schedules(sk, n=2, seed=1):
        ptx = emit_ptx(task, sk.script(v), arch="sm_90")
        assert ".entry" in ptx and "shfl.sync.bfly" in ptx, v
        assert ".local" not in ptx, v


def test_default_script_builds_ptx() -> None:
    """`default_script` (the untuned program a whole-model run builds) of the norm over 197 x 197."""
    from ansor.targets.cuda.lowering import emit_ptx
    from ansor.targets.cuda.rules import default_script

    task = _task("nrm-8x197x197")
    assert "shfl.sync.bfly" in emit_ptx(task, default_script(task), arch="sm_90")


def test_the_pool_of_a_model_builds_for_the_gpu() -> None:
    """A whole-model run (`network.compile_network`) builds the keepdim pool's task as extracted
    for cuda on the GPU (`gpu_schedulable`, then `build_kernels` in a worker process): it ran on
    the CPU between the kernels before (`_HostStep`)."""
    from ansor.frontend.partition import extract_tasks
    from ansor.targets.cuda.network import build_kernels

    net = extract_tasks(_gap(1, 64, 7, 7, keepdim=True), target="cuda")
    assert all(gpu_schedulable(t)[0] for t in net.tasks)
    artifacts, errors = build_kernels(list(net.tasks), {}, "sm_90", processes=1)
    assert not errors and set(artifacts) == {t.hash for t in net.tasks}


# ----------------------------------------------------------------------------------------------
# On an NVIDIA GPU


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_multi_loop_reductions_run_on_the_gpu(name: str) -> None:
    """The default and 5 sampled schedules against numpy, each run into outputs poisoned with NaN
    and with a second sentinel."""
    from ansor.measure import verify
    from ansor.targets.cuda.lowering import compile_task_cuda

    task = _task(name)
    sk = _sketch(task)
    x = _input(task)
    want = CASES[name][1](x.astype(np.float64))
    for v in _schedules(sk, n=5, seed=5):
        kernel = compile_task_cuda(task, sk.script(v))
        for which in (0, 1):
            (out,) = kernel.run([x], verify.poisoned(task.outputs, which))
            np.testing.assert_allclose(out, want, rtol=2e-4, atol=2e-4, err_msg=str(v))

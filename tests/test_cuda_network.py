"""Whole models on the GPU (`targets/cuda/network.py`): the model function split into its
constant part (folded once on the CPU) and a runtime plan of task calls and reshapes. The plan is
checked here without a GPU by running it with CPU kernels; the real GPU network runs under
`@pytest.mark.gpu` (skipped without one)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import ansor
from ansor.compile import CompiledNetwork, compile_network
from ansor.core.mlir import LoweringError
from ansor.core.task import SearchTask
from ansor.frontend import workloads
from ansor.frontend.partition import Network, extract_tasks
from ansor.measure.measurer import make_inputs
from ansor.targets import get_target
from ansor.targets.cuda.network import evaluate_constants, split_parent

from test_partition import _nchw_model


def _run_plan_on_cpu(net: Network, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The GPU network's plan, executed with each task's untuned CPU kernel on numpy arrays."""
    whole = net.as_task()
    split = split_parent(whole)
    assert {e[0] for e in split.plan} <= {"call", "view", "return"}
    env = {f"in{i}": a for i, a in enumerate(inputs)}
    env.update({n: c for (n, _), c in zip(split.constants, evaluate_constants(whole, split), strict=True)})
    callees = {n: net.tasks[i] for n, i in net.calls.items()}
    cpu = get_target("cpu")
    kernels = {t.hash: cpu.compile(dataclasses.replace(t, target="cpu"), None) for t in net.tasks}
    calls = 0
    for e in split.plan:
        if e[0] == "view":
            env[e[2]] = env[e[1]].reshape(e[3].shape)
        elif e[0] == "call":
            t = callees[e[1]]
            outs = kernels[t.hash].run([env[o].reshape(s.shape) for o, s in zip(e[2], t.inputs, strict=True)])
            env.update(zip(e[3], outs, strict=True))
            calls += 1
        else:
            assert calls == len(net.calls)  # every outlined callee runs once, in program order
            return [env[o] for o in e[1]]
    raise AssertionError("the plan has no return")


def test_the_plan_computes_what_the_cpu_network_computes() -> None:
    """Folded weights (channels-first convolutions -> channels-last, the filter transposes folded
    on the CPU), reshapes between the tasks: the plan equals the CPU-compiled model."""
    text, (x, ref) = _nchw_model(np.random.default_rng(3))
    net = extract_tasks(text, target="cuda", layout="nhwc")
    assert net.as_task().target == "cuda"
    out = _run_plan_on_cpu(net, [x])
    np.testing.assert_allclose(out[0], ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(out[0], compile_network(extract_tasks(text))(x))
    kept = extract_tasks(text, target="cuda")  # the GPU's default: channels-first stays
    assert {t.name.split("#")[0] for t in kept.tasks} == {"conv_2d_nchw_fchw"}
    np.testing.assert_allclose(_run_plan_on_cpu(kept, [x])[0], ref, rtol=1e-4, atol=1e-4)


def test_the_plan_runs_a_residual_mlp_with_repeated_tasks() -> None:
    net = extract_tasks(workloads.get("mlp-16x32x6"), target="cuda")
    assert len(net.tasks) < len(net.calls)  # a task's kernel serves several calls
    x = make_inputs(net.as_task())
    ref = compile_network(extract_tasks(workloads.get("mlp-16x32x6")))(*x)
    np.testing.assert_array_equal(_run_plan_on_cpu(net, x)[0], ref)


def test_weight_only_ops_are_in_the_constant_part() -> None:
    text, _ = _nchw_model(np.random.default_rng(3))
    split = split_parent(extract_tasks(text, target="cuda", layout="nhwc").as_task())
    assert "func.call" not in split.constant_ir
    assert all(e[0] != "call" or e[1] not in split.constant_ir for e in split.plan)
    assert split.constants  # the folded filters the calls read


_PARENT_MATH = """
func.func private @t(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {ansor.group = "g.generic"} {
  %e = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = func.call @t(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %z = arith.addf %y, %y : tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}
"""


def test_an_op_the_plan_cannot_run_is_one_line() -> None:
    from ansor.core.task import TensorSpec

    spec = (TensorSpec((4, 8), "f32"),)
    task = SearchTask("model", "main", _PARENT_MATH, spec, spec, 0, "0" * 16, "cuda")
    with pytest.raises(LoweringError, match=r"arith.addf between the tasks of the model reads") as e:
        split_parent(task)
    assert "\n" not in str(e.value)


def test_profiling_a_gpu_model_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="CPU-only"):
        get_target("cuda").compile_network(SearchTask("m", "main", "", (), (), 0, "0", "cuda"), {}, {},
                                           profile=True)


# -- on the GPU -----------------------------------------------------------------------------------


@pytest.mark.gpu
def test_gpu_network_matches_the_cpu_network() -> None:
    text, (x, ref) = _nchw_model(np.random.default_rng(3))
    kept = compile_network(extract_tasks(text, target="cuda"))
    assert not kept._kernel.host_tasks
    np.testing.assert_allclose(kept(x), ref, rtol=1e-4, atol=1e-4)
    gpu = compile_network(extract_tasks(text, target="cuda", layout="nhwc"))
    assert isinstance(gpu, CompiledNetwork)
    # channels-last, its first task (pad -> NCHW-to-NHWC transpose -> conv) has no GPU schedule: on the CPU
    assert gpu._kernel.host_tasks
    np.testing.assert_allclose(gpu(x), ref, rtol=1e-4, atol=1e-4)
    mlp = extract_tasks(workloads.get("mlp-16x32x6"), target="cuda")
    ins = make_inputs(mlp.as_task())
    np.testing.assert_allclose(compile_network(mlp)(*ins),
                               compile_network(extract_tasks(workloads.get("mlp-16x32x6")))(*ins),
                               rtol=1e-4, atol=1e-4)
    assert gpu.time(x, number=20) > 0
    np.testing.assert_allclose(gpu(x), ref, rtol=1e-4, atol=1e-4)  # the same after a timed loop


@pytest.mark.gpu
def test_ansor_compile_on_cuda_runs_a_model_with_a_tuned_task(tmp_path) -> None:
    """`ansor.compile(model, target="cuda", log=...)`: a tuned task's record is used, the rest run
    their default schedules, and the network stays right."""
    from ansor.tuning.tuner import tune

    text = workloads.get("mlp-16x32x6")
    net = extract_tasks(text, target="cuda")
    log = tmp_path / "mlp.cuda.jsonl"
    tune(net.tasks[0], trials=4, log_path=log, seed=0)
    fn = ansor.compile(text, target="cuda", log=log)
    assert isinstance(fn, CompiledNetwork) and fn.tuned_tasks == 1
    ins = make_inputs(net.as_task())
    np.testing.assert_allclose(fn(*ins), compile_network(extract_tasks(text))(*ins), rtol=1e-4, atol=1e-4)


def test_every_task_of_a_model_builds_to_ptx_in_worker_processes() -> None:
    """The builds of `compile_network` on a machine without a GPU: each distinct task's default
    schedule to PTX, two at a time, in spawned processes."""
    from ansor.targets.cuda.network import build_kernels

    net = extract_tasks(workloads.get("mlp-16x32x6"), target="cuda")
    artifacts, errors = build_kernels(list(net.tasks), {}, "sm_90", processes=2)
    assert len(net.tasks) == 2 and set(artifacts) == {t.hash for t in net.tasks} and not errors
    assert all(len(a) > 1000 for a in artifacts.values())


def test_a_task_that_cannot_build_is_named_in_one_line() -> None:
    from ansor.targets.cuda.network import build_kernels

    t = extract_tasks(workloads.get("mlp-16x32x6"), target="cuda").tasks[0]
    artifacts, errors = build_kernels([t], {t.hash: "this is not a transform script"}, "sm_90", processes=1)
    assert not artifacts and errors[t.hash].startswith(f"{t.name}: ") and "\n" not in errors[t.hash]


_KEEPDIM_SUM = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0, 0)>
func.func @rowsum(%x: tensor<8x128xf32>) -> tensor<8x128xf32> {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<8x1xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e1 : tensor<8x1xf32>) -> tensor<8x1xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x128xf32>) outs(%f : tensor<8x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.addf %a, %o : f32
    linalg.yield %t : f32
  } -> tensor<8x1xf32>
  %e = tensor.empty() : tensor<8x128xf32>
  %d = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : tensor<8x128xf32>, tensor<8x1xf32>) outs(%e : tensor<8x128xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %q = arith.divf %a, %b : f32
    linalg.yield %q : f32
  } -> tensor<8x128xf32>
  return %d : tensor<8x128xf32>
}
"""


def test_a_build_that_aborts_is_isolated_and_named() -> None:  # noqa: D205
    """Upstream behaviour pinned: MLIR 22's `tile_reduction_using_forall` asserts (`cast<AffineDimExpr>`)
    on a reduction whose output map has a constant 0 (torch's keepdim sum, BERT's softmax), which
    the cross-thread reduction rule's default schedule uses: the build process dies. The network
    builder rebuilds the pending tasks one process each and names the one that aborted, and the
    others still build (the network then runs that task on the CPU)."""
    from ansor.core.task import create_task
    from ansor.targets.cuda.network import build_kernels

    keepdim = create_task(_KEEPDIM_SUM, target="cuda")
    ok = extract_tasks(workloads.get("mlp-16x32x6"), target="cuda").tasks
    artifacts, errors = build_kernels([keepdim, *ok], {}, "sm_90", processes=2)
    assert set(errors) == {keepdim.hash} and "build process died" in errors[keepdim.hash]
    assert set(artifacts) == {t.hash for t in ok}


def test_compiling_for_cuda_without_a_driver_is_one_line() -> None:
    from ansor.targets.cuda.runtime import has_cuda_device

    if has_cuda_device():
        pytest.skip("this machine has a CUDA driver")
    with pytest.raises(LoweringError, match="cannot load the CUDA runtime") as e:
        ansor.compile(workloads.get("matmul-64"), target="cuda")
    assert "\n" not in str(e.value)


def test_keepdim_reductions_are_folded_for_the_gpu_and_build() -> None:
    """The workaround of the assertion above (`partition._fold_unit_reduction_dims`): extracted
    for cuda, the keepdim sum's task has its unit dims folded (the same signature; reshapes at
    its edges where its arguments have unit dims) and its default GPU program builds; for the
    CPU it stays as it was."""
    from ansor.targets.cuda.network import build_kernels

    net = extract_tasks(_KEEPDIM_SUM, target="cuda")
    assert not any("(d0, 0)>" in t.ir for t in net.tasks)
    artifacts, errors = build_kernels(list(net.tasks), {}, "sm_90", processes=1)
    assert not errors and len(artifacts) == len(net.tasks)
    assert any("(d0, 0)>" in t.ir for t in extract_tasks(_KEEPDIM_SUM).tasks)  # the CPU's tasks: unchanged
    x = make_inputs(net.as_task())
    np.testing.assert_allclose(_run_plan_on_cpu(net, x)[0], compile_network(extract_tasks(_KEEPDIM_SUM))(*x),
                               rtol=1e-5, atol=1e-6)


def test_channels_first_depthwise_convs_build_for_the_gpu() -> None:
    """MobileNet-V2's depthwise convolutions stay channels-first on the GPU: MLIR 22 has no 1-D
    form of `depthwise_conv_2d_nchw_chw` (`space/windowed.py`), so the GPU script leaves it a 2-D
    window op, scalar where the vectorizer declines, instead of failing (every MobileNet-V2
    depthwise task ran on the CPU before)."""
    from ansor.targets.cuda.network import build_kernels
    from test_partition import _DEPTHWISE_MODEL

    net = extract_tasks(_DEPTHWISE_MODEL, target="cuda")
    assert {t.name.split("#")[0] for t in net.tasks} == {"depthwise_conv_2d_nchw_chw"}
    artifacts, errors = build_kernels(list(net.tasks), {}, "sm_90", processes=1)
    assert not errors and len(artifacts) == len(net.tasks)

"""Ragged GPU tiles (issue 28 item 1): on a loop whose extent is not a multiple of 16 (97, 197,
1023, 50257), the block tile (the `R0` tile of a reduction) need not divide the extent; the op is
then padded to a multiple of it, the padded inputs read through clamped loads + selects and the
padded result written through masked stores (`ansor-gpu-guard-padded-reads`). Knobs, sampling
and the search's operators, lowering to PTX (no GPU), the guarded result on the CPU, and runs on
an NVIDIA GPU against numpy into poisoned outputs (`@pytest.mark.gpu`, skipped without one):

    pytest tests/test_gpu_ragged.py -m gpu
"""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
from ansor.core.task import SearchTask, create_task
from ansor.frontend import workloads
from ansor.targets import generate_sketches
from ansor.targets.cuda.rules import GpuSketch, default_script, padded_extent

#: A classic SGEMM shape of block tile on matmul 97x197x61: 64x64 blocks (2 x 4 of them, the
#: last ones partial), 8x16 threads of 8x4 accumulators, K steps of 8 (the last one partial).
MM_RAGGED = {"op1.d0.t1": 64, "op1.d0.t2": 64, "op1.d0.t3": 8, "op1.d0.t4": 4,
             "op1.d1.t1": 64, "op1.d1.t2": 64, "op1.d1.t3": 4, "op1.d1.t4": 4,
             "op1.d2.t1": 8, "op1.d2.t2": 1, "op1.unroll": 64}

#: An element-wise op (thread binding) on rows of 197.
_SCALE_197 = """
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @scale(%x: tensor<97x197xf32>) -> tensor<97x197xf32> {
  %c = arith.constant 2.5 : f32
  %e = tensor.empty() : tensor<97x197xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<97x197xf32>) outs(%e : tensor<97x197xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %c : f32
    %s = arith.addf %m, %c : f32
    linalg.yield %s : f32
  } -> tensor<97x197xf32>
  return %r : tensor<97x197xf32>
}
"""

_TASKS = {
    "matmul-97x197x61": lambda: workloads.get("matmul-97x197x61"),
    "matmul-1x1023x1000": lambda: workloads.get("matmul-1x1023x1000"),  # small M
    "matmul-100x50257x64": lambda: workloads.get("matmul-100x50257x64"),  # a vocabulary projection
    "scale-97x197": lambda: _SCALE_197,
    # 3x3 convolution, stride 1, zero padding 1, on a 97x97 image: rows of 97 pixels
    "c2d-1x97x97x32x48x3x1x1": lambda: workloads.get("c2d-1x97x97x32x48x3x1x1"),
    # a fused consumer: GELU(A @ B + bias)
    "mmgelu-97x197x61": lambda: workloads.get("mmgelu-97x197x61"),
}


def test_windowed_op_with_a_fused_consumer_keeps_exact_tiles() -> None:
    """A convolution + batch norm + ReLU over 97x97 pixels gets no ragged tiles: ragged ones
    computed wrong values at 119 of 451632 outputs on the H200 (session 8; the unfused
    convolution and a fused matmul were right). Exact tiles until the cause is found."""
    task = create_task(workloads.get("convlayer-1x97x97x32x48x3x1x1"), name="convlayer97", target="cuda")
    sk = _sketch(task)
    assert all(s.extent == e for s, e in zip(sk.splits, sk.gpu_stage.extents, strict=True))
    assert not sk.gpu_stage.ragged_dims(sk.sample(random.Random(0)).values())


def _task(name: str) -> SearchTask:
    return create_task(_TASKS[name](), name=name, target="cuda")


def _sketch(task: SearchTask) -> GpuSketch:
    sk = generate_sketches(task)[0]
    assert isinstance(sk, GpuSketch)
    return sk


def _ragged_samples(sk: GpuSketch, n: int, seed: int) -> list[dict[str, int]]:
    rng = random.Random(seed)
    out: list[dict[str, int]] = []
    while len(out) < n:
        v = sk.sample(rng).values()
        if sk.gpu_stage.ragged_dims(v):
            out.append(v)
    return out


def test_padded_extent() -> None:
    assert [padded_extent(e) for e in (1, 7, 16, 61, 97, 197, 1000, 1023, 50257, 768)] == [
        1, 7, 16, 64, 128, 256, 1024, 1024, 50304, 768]


def test_prime_matmul_gets_ragged_knobs() -> None:
    sk = _sketch(_task("matmul-97x197x61"))
    st = sk.gpu_stage
    assert st.split_extents == (128, 256, 64)
    assert [s.extent for s in sk.splits] == [128, 256, 64]
    # exact tiles of the extent and tiles of the padded extent
    assert sk.knob("op1.d0.t1").options == (1, 2, 4, 8, 16, 32, 64, 97, 128)
    assert sk.validate(MM_RAGGED) is None
    assert st.ragged_dims(MM_RAGGED) == (0, 1, 2)
    assert st.padded_extents(MM_RAGGED) == [128, 256, 64]
    assert st.padded_extents({**MM_RAGGED, "op1.d1.t1": 16, "op1.d1.t2": 16}) == [128, 208, 64]
    # the levels below the block tile nest exactly; the block tile nests in extent or padded extent
    assert sk.validate({**MM_RAGGED, "op1.d0.t2": 97}) == (
        "op1 loop d0: tile sizes [64, 97, 8, 4] do not nest in extent 97 (padded 128)")
    exact = {**MM_RAGGED, "op1.d0.t1": 1, "op1.d0.t2": 1, "op1.d0.t3": 1, "op1.d0.t4": 1,
             "op1.d1.t1": 197, "op1.d1.t2": 197, "op1.d1.t3": 1, "op1.d1.t4": 1}
    assert st.ragged_dims(exact) == (2,)
    exact["op1.d2.t1"] = 61
    assert st.ragged_dims(exact) == () and sk.validate(exact) is None
    script = sk.script(MM_RAGGED)
    assert "transform.structured.pad_tiling_interface %m1 to padding_sizes [64, 64, 8] pad_to_multiple_of" in script
    assert "tile_using_forall %padded2 tile_sizes [64, 64, 0]" in script
    # an exact schedule renders as before: no padding of the op
    assert "pad_to_multiple_of" not in sk.script(exact)
    # the script with holes says where the padding goes
    assert "ragged tiles" in sk.script(None)


def test_exact_extents_keep_exact_knobs() -> None:
    sk = _sketch(create_task(workloads.get("matmul-512"), name="mm512", target="cuda"))
    assert sk.gpu_stage.split_extents == (512, 512, 512)
    assert sk.knob("op1.d0.t1").options == tuple(d for d in range(1, 513) if 512 % d == 0)


def test_sampling_draws_ragged_and_exact_tiles() -> None:
    sk = _sketch(_task("matmul-97x197x61"))
    rng = random.Random(0)
    samples = [sk.sample(rng).values() for _ in range(200)]
    assert all(sk.validate(v) is None for v in samples)
    per_dim = [sum(d in sk.gpu_stage.ragged_dims(v) for v in samples) for d in range(3)]
    # GPU_RAGGED_PROB = 0.75 per loop (before the device limits reject some)
    assert all(100 < n < 200 for n in per_dim), per_dim
    # the untuned program stays exact
    assert "pad_to_multiple_of" not in default_script(sk_task := _task("matmul-97x197x61"))
    assert sk_task.name == "matmul-97x197x61"


def test_large_primes_always_draw_ragged_tiles() -> None:
    """509, 1021 and 257 have no divisor a block tile could be (their exact tiles are 1 or the
    whole extent, which 72 learned trials of matmul-509x1021x257 kept drawing): always ragged."""
    sk = _sketch(create_task(workloads.get("matmul-509x1021x257"), name="mm509", target="cuda"))
    rng = random.Random(0)
    samples = [sk.sample(rng).values() for _ in range(60)]
    assert all(set(sk.gpu_stage.ragged_dims(v)) == {0, 1, 2} for v in samples)
    assert not any(v["op1.d0.t1"] in (1, 509) or v["op1.d1.t1"] in (1, 1021) for v in samples)


def test_mutation_and_ragged_prob_zero() -> None:
    from ansor.search.cost_model import RandomModel
    from ansor.search.evolution import EvolutionarySearch
    from ansor.targets import get_target

    task = _task("matmul-97x197x61")
    sk = _sketch(task)
    weights = get_target("cuda").mutation_weights

    def search(ragged_prob: float) -> EvolutionarySearch:
        return EvolutionarySearch([sk], RandomModel(seed=0), lambda schs: [None] * len(schs), seed=0,
                                  mutation_weights=weights, ragged_prob=ragged_prob)

    on = search(0.3)
    parents = [sk.sample(random.Random(s)) for s in range(40)]
    children = [c for p in parents if (c := on.mutate(p)) is not None]
    assert len(children) > 30
    assert all(sk.validate(c.values()) is None for c in children)
    assert sum(bool(sk.gpu_stage.ragged_dims(c.values())) for c in children) > 20
    # ragged_prob = 0: Ansor's exact tiles only, in sampling and mutation alike
    off = search(0.0)
    info = off.info[sk.name]
    rng = random.Random(1)
    exact = [info.sample(rng) for _ in range(50)]
    assert not any(sk.gpu_stage.ragged_dims(s.values()) for s in exact)
    assert not info.valid(MM_RAGGED) and on.info[sk.name].valid(MM_RAGGED)
    kids = [c for p in exact if (c := off.mutate(p)) is not None]
    assert kids and not any(sk.gpu_stage.ragged_dims(c.values()) for c in kids)


def _launch_grid(text: str) -> list[int]:
    m = re.search(r"gpu\.launch blocks\([^)]*\) in \(%\w+ = (%[\w]+), %\w+ = (%[\w]+), %\w+ = (%[\w]+)\)", text)
    assert m, "no gpu.launch"
    out = []
    for name in m.groups():
        c = re.search(rf"{re.escape(name)} = arith\.constant (\d+) : index", text)
        assert c, name
        out.append(int(c.group(1)))
    return out


def test_ragged_matmul_lowers_with_guards_and_a_ceil_div_grid() -> None:
    """The padded buffers are gone: inputs read through clamped indices + selects, the result
    written by masked row transfers; the grid is ceil(97/64) x ceil(197/64); no scf.if."""
    from ansor.targets.cuda.lowering import lower_to_gpu_ir
    from mlir import ir

    task = _task("matmul-97x197x61")
    sk = _sketch(task)
    with ir.Context(), ir.Location.unknown():
        text = str(lower_to_gpu_ir(task, sk.script(MM_RAGGED)))
    assert _launch_grid(text) == [4, 2, 1]
    assert "memref<128x256xf32>" not in text and "memref<128x64xf32>" not in text
    assert "memref.copy" not in text
    assert "arith.select" in text and "arith.minsi" in text and "scf.if" not in text
    # (in_bounds = [false] is the default: not printed)
    assert re.search(r"vector\.transfer_write %\w+, %\w+\[%\w+\] : vector<4xf32>, memref<197xf32", text)


@pytest.mark.parametrize("name", list(_TASKS))
def test_ragged_candidates_lower_to_ptx_without_a_gpu(name: str) -> None:
    from ansor.targets.cuda.lowering import emit_ptx

    task = _task(name)
    sk = _sketch(task)
    assert any(s.extent != task_e for s, task_e in zip(sk.splits, sk.gpu_stage.extents, strict=True))
    for v in _ragged_samples(sk, 3, seed=11):
        ptx = emit_ptx(task, sk.script(v), arch="sm_90")
        assert ".entry" in ptx and ("%ctaid" in ptx or "%tid" in ptx) and "setp" in ptx  # (a draw may be one block)
        if name.startswith(("matmul", "mmgelu")):
            assert "fma.rn.f32" in ptx


def test_guarded_result_matches_numpy_on_the_cpu() -> None:
    """The result guard is target-independent: a matmul 13x11x7 padded to 16x16x8, tiled 8x8x4
    with `scf.forall`, bufferized, guarded, then run on the CPU into poisoned (NaN) outputs:
    every element of the edge tiles written, and right."""
    from ansor.core import native as _native
    from ansor.core.mlir import apply_script, parse_payload, run_passes
    from ansor.targets.cpu.lowering import _lower_and_jit
    from mlir import ir

    task = create_task(workloads.get("matmul-13x11x7"), name="mm13")
    script = """
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.consumed}) {
    %mm = transform.structured.match ops{["linalg.matmul"]} in %root : (!transform.any_op) -> !transform.any_op
    %p, %pad = transform.structured.pad_tiling_interface %mm to padding_sizes [8, 8, 4] pad_to_multiple_of {padding_values = [0.0 : f32, 0.0 : f32, 0.0 : f32]} : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %f = transform.structured.match ops{["func.func"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %f { transform.apply_patterns.canonicalization } : !transform.any_op
    %fill = transform.get_producer_of_operand %p[2] : (!transform.any_op) -> !transform.any_op
    %t, %forall = transform.structured.tile_using_forall %p tile_sizes [8, 8, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %ff, %c = transform.structured.fuse_into_containing_op %fill into %forall : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    %tk, %lk = transform.structured.tile_using_for %t tile_sizes [0, 0, 4] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.structured.vectorize %tk : !transform.any_op
    transform.structured.vectorize %ff : !transform.any_op
    transform.apply_patterns to %f {
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.vector.reduction_to_contract
    } : !transform.any_op
    transform.apply_patterns to %f {
      transform.apply_patterns.vector.lower_contraction lowering_strategy = outerproduct
      transform.apply_patterns.vector.lower_outerproduct
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.bufferization.eliminate_empty_tensors %f : !transform.any_op
    transform.apply_dce to %f : !transform.any_op
    transform.apply_cse to %f : !transform.any_op
    %b = transform.bufferization.one_shot_bufferize layout{IdentityLayoutMap} %root {bufferize_function_boundaries = true} : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}
"""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((13, 7)).astype(np.float32)
    b = rng.standard_normal((7, 11)).astype(np.float32)
    _native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = parse_payload(task)
        apply_script(module, script)
        run_passes(module, "canonicalize,cse,buffer-results-to-out-params{hoist-static-allocs modify-public-functions},"
                           "canonicalize,cse", "lower")
        assert "memref<16x16xf32>" in str(module)
        run_passes(module, "ansor-gpu-guard-padded-reads", "lower")
        text = str(module)
        assert "memref<16x16xf32>" not in text and "memref<16x8xf32>" not in text
        assert re.search(r"vector\.transfer_write %\w+, %\w+\[%\w+\] : vector<\d+xf32>, memref<11xf32", text)
        assert "scf.if" not in text
        # the CPU pipeline lowers vectors after memrefs: unroll the masked row transfers into
        # guarded scalar accesses first (on the GPU they become masked loads and stores)
        run_passes(module, "convert-vector-to-scf{full-unroll=true target-rank=0}", "lower")
        kernel = _lower_and_jit(module, task, 2)
        (out,) = kernel.run([a, b], [np.full((13, 11), np.nan, np.float32)])
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


def _as_cpu_loops(script: str) -> str:
    """A GPU sketch's script without the mapping to blocks and threads (and what follows it):
    its `scf.forall`s over blocks and threads stay loops, its shared-memory tiles plain buffers."""
    lines = script.splitlines()
    cut = next(i for i, line in enumerate(lines) if "map_forall_to_blocks" in line)
    end = next(i for i, line in enumerate(lines) if line.strip() == "transform.yield")
    assert cut < end
    return "\n".join(lines[:cut] + lines[end:]).replace("memory_space = 3, ", "").replace(", emit_dealloc", "")


@pytest.mark.parametrize("name", ["matmul-97x197x61", "matmul-1x1023x1000", "scale-97x197", "mmgelu-97x197x61"])
def test_ragged_gpu_scripts_run_as_loops_on_the_cpu(name: str) -> None:
    """The ragged GPU scripts themselves, up to the mapping to the GPU, then the guards, run on
    the CPU (blocks and threads as loops) into NaN-poisoned outputs: every element of the edge
    tiles is written, once and right."""
    from ansor.core import native as _native
    from ansor.core.mlir import apply_script, parse_payload, run_passes
    from ansor.targets.cpu.lowering import _lower_and_jit
    from mlir import ir

    task = _task(name)
    sk = _sketch(task)
    schedules = ([MM_RAGGED] if name == "matmul-97x197x61" else []) + _ragged_samples(sk, 2, seed=5)
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal(s.shape).astype(np.float32) for s in task.inputs]
    want = _reference(name, inputs)
    _native.register_everything()
    for v in schedules:
        with ir.Context(), ir.Location.unknown():
            module = parse_payload(task)
            run_passes(module, "ansor-gpu-own-fill-destinations", "lower")
            apply_script(module, _as_cpu_loops(sk.script(v)))
            run_passes(module, "canonicalize,cse,buffer-results-to-out-params{hoist-static-allocs "
                               "modify-public-functions},canonicalize,cse", "lower")
            run_passes(module, "ansor-gpu-guard-padded-reads", "lower")
            assert "memref.copy" not in str(module)  # no padded buffer left
            run_passes(module, "convert-vector-to-scf{full-unroll=true target-rank=0}", "lower")
            (out,) = _lower_and_jit(module, task, 2).run(inputs, [np.full(task.outputs[0].shape, np.nan, np.float32)])
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3, err_msg=str(v))


# ----------------------------------------------------------------------------------------------
# On an NVIDIA GPU


def _reference(name: str, inputs: list[np.ndarray]) -> np.ndarray:
    if name.startswith("mmgelu"):
        from ansor.measure.interp import numpy_program

        prog = numpy_program(_TASKS[name](), anchored=False)
        assert prog is not None
        return prog(*inputs)[0]
    if name.startswith("matmul"):
        return inputs[0].astype(np.float64) @ inputs[1].astype(np.float64)
    if name.startswith(("c2d", "convlayer")):  # 3x3, stride 1, zero padding 1 (+ scale, shift, ReLU)
        x, w = (a.astype(np.float64) for a in inputs[:2])
        p = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
        h, wd = x.shape[1:3]
        conv = sum(np.einsum("nhwc,cf->nhwf", p[:, i:i + h, j:j + wd], w[i, j]) for i in range(3) for j in range(3))
        return conv if name.startswith("c2d") else np.maximum(conv * inputs[2] + inputs[3], 0.0)
    return inputs[0] * np.float32(2.5) + np.float32(2.5)


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(_TASKS))
def test_ragged_candidates_run_on_the_gpu(name: str) -> None:
    """Ragged schedules (the classic SGEMM tile of `MM_RAGGED` and sampled ones) against numpy,
    each run twice into outputs poisoned with NaN and with a second sentinel."""
    from ansor.measure import verify
    from ansor.targets.cuda.lowering import compile_task_cuda

    task = _task(name)
    sk = _sketch(task)
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal(s.shape).astype(np.float32) for s in task.inputs]
    want = _reference(name, inputs)
    schedules = _ragged_samples(sk, 4, seed=5)
    if name == "matmul-97x197x61":
        schedules.insert(0, MM_RAGGED)
    for v in schedules:
        kernel = compile_task_cuda(task, sk.script(v))
        for which in (0, 1):
            (out,) = kernel.run(inputs, verify.poisoned(task.outputs, which))
            np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3, err_msg=str(v))

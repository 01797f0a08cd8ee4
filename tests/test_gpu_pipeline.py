"""Pipelined (multi-buffered) shared memory in the CUDA-core GPU sketch (issue 27, item 6).

The sketch's `op<N>.stages` knob (1, 2, 3) sets how many shared-memory buffers each cached
input tile gets; with 2 or 3 the lowering (`ansor-gpu-pipeline-shared-copies`) copies the next
`R0` tiles with cp.async (or through registers, for guarded reads of a padded input) while the
current one is computed on, with one barrier per step. Knob, sampling, mutation and limits;
PTX without a GPU (cp.async, one barrier in the loop, no local memory); and, on an NVIDIA GPU,
results against numpy into poisoned outputs (`@pytest.mark.gpu`, skipped without one):

    pytest tests/test_gpu_pipeline.py -m gpu

(The pipelined kernels cannot run as CPU loops: the pass works on the `gpu.launch` after the
mapping to threads, whose barriers and cp.async have no CPU form.)
"""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
from ansor.core.task import SearchTask, create_task
from ansor.frontend import workloads
from ansor.targets import generate_sketches
from ansor.targets.cuda.params import MAX_SHARED_BYTES
from ansor.targets.cuda.rules import PIPELINE_STAGES, GpuSketch, default_script, r0_trips, shared_bytes

from test_gpu_ragged import MM_RAGGED  # the ragged 97x197x61 matmul tile both files run

#: The classic SGEMM tile (128x128 blocks, 8x8 accumulators per thread, K tile 8).
CLASSIC = {"op1.d0.t1": 128, "op1.d0.t2": 128, "op1.d0.t3": 8, "op1.d0.t4": 8,
           "op1.d1.t1": 128, "op1.d1.t2": 128, "op1.d1.t3": 8, "op1.d1.t4": 8,
           "op1.d2.t1": 8, "op1.d2.t2": 8, "op1.unroll": 1024}
#: The best matmul-4096 record of results/gpu/ (0.69x cuBLAS with one stage).
BEST_4096 = {"op1.d0.t1": 32, "op1.d0.t2": 32, "op1.d0.t3": 16, "op1.d0.t4": 2,
             "op1.d1.t1": 128, "op1.d1.t2": 128, "op1.d1.t3": 2, "op1.d1.t4": 2,
             "op1.d2.t1": 32, "op1.d2.t2": 16, "op1.unroll": 16}


_SCALE = """
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @scale(%x: tensor<64x256xf32>) -> tensor<64x256xf32> {
  %c = arith.constant 2.5 : f32
  %e = tensor.empty() : tensor<64x256xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<64x256xf32>) outs(%e : tensor<64x256xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %c : f32
    linalg.yield %m : f32
  } -> tensor<64x256xf32>
  return %r : tensor<64x256xf32>
}
"""


def _task(name: str) -> SearchTask:
    return create_task(workloads.get(name), name=name, target="cuda")


def _sketch(task: SearchTask) -> GpuSketch:
    sk = generate_sketches(task)[0]
    assert isinstance(sk, GpuSketch)
    return sk


def _staged(sk: GpuSketch, stages: int, seed: int, n: int = 1) -> list[dict[str, int]]:
    """`n` sampled valid annotations of `sk` with `stages` pipeline stages."""
    rng = random.Random(seed)
    out: list[dict[str, int]] = []
    for _ in range(2000):
        v = sk.sample(rng).values()
        v[sk.gpu_stage.stages_knob] = stages
        if sk.validate(v) is None:
            out.append(v)
            if len(out) == n:
                return out
    raise AssertionError(f"no valid {stages}-stage annotation of {sk.name}")


def test_the_knob_exists_where_inputs_are_cached() -> None:
    mm = _sketch(_task("matmul-1024"))
    assert mm.knob("op1.stages").options == PIPELINE_STAGES == (1, 2, 3)
    assert "op1.stages" in mm.unroll_knobs  # mutated with the unroll knob (the GPU's weights)
    conv = _sketch(_task("c2d-1x14x14x32x32x3x1x1"))
    assert conv.gpu_stage.pipelined
    # no shared memory, no knob: an element-wise op (thread binding)
    ew = generate_sketches(create_task(_SCALE, name="scale", target="cuda"))[0]
    assert isinstance(ew, GpuSketch)
    assert not ew.gpu_stage.pipelined and all(k.name != ew.gpu_stage.stages_knob for k in ew.knobs)
    # records from before the knob are synchronous
    old = {k: v for k, v in {**CLASSIC, "op1.stages": 2}.items() if k != "op1.stages"}
    assert mm.complete(old)["op1.stages"] == 1
    assert mm.validate(mm.complete(old)) is None
    # the untuned program stays synchronous
    assert '"op1.stages"> = 1' in default_script(_task("matmul-1024"))


def test_shared_memory_counts_every_stage() -> None:
    sk = _sketch(_task("matmul-4096"))
    st = sk.gpu_stage
    one = shared_bytes(st, {**BEST_4096, "op1.stages": 1})
    assert one == (32 * 32 + 32 * 128) * 4
    assert shared_bytes(st, {**BEST_4096, "op1.stages": 2}) == 2 * one
    assert sk.validate({**BEST_4096, "op1.stages": 2}) is None
    # three stages of 20 KiB do not fit in 48 KiB: refused at annotation
    assert shared_bytes(st, {**BEST_4096, "op1.stages": 3}) > MAX_SHARED_BYTES
    assert sk.validate({**BEST_4096, "op1.stages": 3}) == (
        f"{3 * one} bytes of shared memory > {MAX_SHARED_BYTES}")


def test_more_stages_than_r0_steps_are_refused() -> None:
    sk = _sketch(_task("matmul-256"))
    v = {"op1.d0.t1": 16, "op1.d0.t2": 16, "op1.d0.t3": 2, "op1.d0.t4": 2,
         "op1.d1.t1": 16, "op1.d1.t2": 16, "op1.d1.t3": 1, "op1.d1.t4": 1,
         "op1.d2.t1": 128, "op1.d2.t2": 4, "op1.unroll": 16}
    assert r0_trips(sk.gpu_stage, v) == 2
    assert sk.validate({**v, "op1.stages": 2}) is None
    assert sk.validate({**v, "op1.stages": 3}) == "3 pipeline stages > 2 R0 steps"
    small = {**v, "op1.d0.t1": 8, "op1.d0.t2": 8, "op1.d0.t3": 1, "op1.d0.t4": 1,
             "op1.d1.t1": 8, "op1.d1.t2": 8, "op1.d2.t1": 256}
    assert sk.validate({**small, "op1.stages": 2}) == "2 pipeline stages > 1 R0 steps"
    # a ragged K: the steps of the padded extent (61 -> 64 in steps of 8)
    rg = _sketch(_task("matmul-97x197x61"))
    assert r0_trips(rg.gpu_stage, MM_RAGGED) == 8


def test_sampling_and_mutation_move_the_knob() -> None:
    from ansor.search.cost_model import RandomModel
    from ansor.search.evolution import EvolutionarySearch
    from ansor.targets import get_target

    task = _task("matmul-1024")
    sk = _sketch(task)
    rng = random.Random(0)
    samples = [sk.sample(rng).values() for _ in range(200)]
    assert {v["op1.stages"] for v in samples} == {1, 2, 3}
    # the depth is drawn among those the tiles leave room for: tiles too large for three (or
    # two) stages are still drawn, as often as without the knob
    one = [shared_bytes(sk.gpu_stage, {**v, "op1.stages": 1}) for v in samples]
    assert any(b * 3 > MAX_SHARED_BYTES for b in one)
    assert all(sk.validate(v) is None for v in samples)
    search = EvolutionarySearch([sk], RandomModel(seed=0), lambda schs: [None] * len(schs), seed=0,
                                mutation_weights=get_target("cuda").mutation_weights)
    parent = sk.sample(random.Random(1))
    kids = [search.mutate(parent) for _ in range(300)]
    assert any(k is not None and k.values()["op1.stages"] != parent.values()["op1.stages"] for k in kids)
    assert all(sk.validate(k.values()) is None for k in kids if k is not None)


def test_the_script_annotates_the_launch() -> None:
    sk = _sketch(_task("matmul-1024"))
    assert 'transform.tune.knob<"op1.stages"> options = [1, 2, 3]' in sk.script()
    assert '"ansor.pipeline_stages" = %k_op1_stages' in sk.script()
    assert '"ansor.pipeline_stages" = %k_op1_stages' in sk.script({**CLASSIC, "op1.stages": 2})


def test_the_cost_model_sees_the_pipeline_depth() -> None:
    """The `pipeline_stages` feature column is the launch's `ansor.pipeline_stages` (log2(1 + stages)),
    the same in every row of the kernel; 0 on a CPU program."""
    from ansor.search import features

    col = features.feature_names().index("pipeline_stages")
    task = _task("matmul-256")
    sk = _sketch(task)
    v = {"op1.d0.t1": 64, "op1.d0.t2": 64, "op1.d0.t3": 4, "op1.d0.t4": 4,
         "op1.d1.t1": 64, "op1.d1.t2": 64, "op1.d1.t3": 4, "op1.d1.t4": 4,
         "op1.d2.t1": 16, "op1.d2.t2": 4, "op1.unroll": 16}
    rows = features.featurize(task, [sk.script({**v, "op1.stages": s}) for s in PIPELINE_STAGES])
    for s, f in zip(PIPELINE_STAGES, rows, strict=True):
        assert f is not None and f.shape[0] > 0
        np.testing.assert_allclose(f[:, col], np.log2(1 + s))
        others = np.delete(f, col, axis=1)
        np.testing.assert_array_equal(others, np.delete(rows[0], col, axis=1))  # nothing else differs
    cpu = create_task(workloads.get("matmul-256"), name="matmul-256")
    (f,) = features.featurize(cpu, [generate_sketches(cpu)[0].script(
        generate_sketches(cpu)[0].sample(random.Random(0)).values())])
    assert f is not None and not f[:, col:].any()  # nor the row or launch columns after it


def _loop_body(ptx: str) -> str:
    """The PTX of the kernel's main loop: from the first loop label to its backward branch."""
    m = re.search(r"(\$L__BB0_\d+):\n(.*?)bra(?:\.uni)?\s+\1;", ptx, re.S)
    assert m, "no loop"
    return re.sub(r"[ \t]+", " ", m.group(2))


def test_classic_matmul_two_stages_ptx() -> None:
    """The classic tile with two stages: two 8 KiB buffers per operand tile, 16-byte cp.async
    (L1 bypassed) for both tiles, one commit per step, one barrier per step, no local memory."""
    from ansor.targets.cuda.lowering import emit_ptx

    task = _task("matmul-1024")
    sk = _sketch(task)
    one = emit_ptx(task, sk.script({**CLASSIC, "op1.stages": 1}), arch="sm_90")
    two = emit_ptx(task, sk.script({**CLASSIC, "op1.stages": 2}), arch="sm_90")
    assert "cp.async" not in one
    assert len(re.findall(r"\.shared \.align 16 \.b8 \w+\[8192\]", two)) == 2
    assert ".local" not in two
    loop = _loop_body(two)
    assert loop.count("cp.async.cg.shared.global") == 2  # a 4-float vector of A and of B per thread
    assert loop.count("cp.async.commit_group") == 1 and loop.count("cp.async.wait_group 0") == 1
    assert loop.count("bar.sync") == 1 and _loop_body(one).count("bar.sync") == 2
    assert len(re.findall(r"fma\.rn\.f32", loop)) == 512
    assert "ld.global" not in loop  # no register staging left


def test_before_sm80_the_stages_are_ignored() -> None:
    """cp.async needs sm_80: on older architectures a pipelined annotation builds as one stage."""
    from ansor.targets.cuda.lowering import emit_ptx

    task = _task("matmul-256")
    sk = _sketch(task)
    v = {"op1.d0.t1": 64, "op1.d0.t2": 64, "op1.d0.t3": 4, "op1.d0.t4": 4,
         "op1.d1.t1": 64, "op1.d1.t2": 64, "op1.d1.t3": 4, "op1.d1.t4": 4,
         "op1.d2.t1": 16, "op1.d2.t2": 4, "op1.unroll": 16, "op1.stages": 2}
    assert "cp.async" in emit_ptx(task, sk.script(v), arch="sm_80")
    old = emit_ptx(task, sk.script(v), arch="sm_75")
    assert "cp.async" not in old and ".target sm_75" in old


def test_three_stages_ptx() -> None:
    from ansor.targets.cuda.lowering import emit_ptx

    task = _task("matmul-1024")
    sk = _sketch(task)
    ptx = emit_ptx(task, sk.script({**CLASSIC, "op1.stages": 3}), arch="sm_90")
    assert len(re.findall(r"\.shared \.align 16 \.b8 \w+\[12288\]", ptx)) == 2
    assert "cp.async.wait_group 1" in _loop_body(ptx) and ".local" not in ptx


@pytest.mark.parametrize("name", ["matmul-1024", "gmm-4x128x128x64", "c2d-1x56x56x64x64x1x1x0",
                                  "c2d-1x14x14x32x32x3x1x1", "matmul-97x197x61",
                                  "convlayer-1x56x56x64x128x1x1x0"])
def test_sampled_two_stage_candidates_to_ptx(name: str) -> None:
    """Sampled 2-stage candidates: cp.async where the inputs are read plainly (matmul, batch
    matmul, the 1x1 convolution, with a fused BN + ReLU too: its accumulator tile in shared
    memory is hoisted into registers first); the padded 3x3 convolution's input and the ragged
    matmul's tiles are guarded reads and go through registers; no local memory anywhere."""
    from ansor.targets.cuda.lowering import emit_ptx

    task = _task(name)
    sk = _sketch(task)
    values = _staged(sk, 2, seed=3, n=2)
    if name == "matmul-97x197x61":
        values.insert(0, {**MM_RAGGED, "op1.stages": 2})
    for v in values:
        ptx = emit_ptx(task, sk.script(v), arch="sm_90")
        assert ".local" not in ptx, v
        assert "fma.rn.f32" in ptx or "fma.rn.ftz.f32" in ptx
        if name.startswith(("matmul-1024", "gmm", "c2d-1x56", "convlayer")):
            assert "cp.async" in ptx, v
        if name == "matmul-97x197x61" and v == values[0]:
            assert "cp.async" not in ptx  # guarded reads: through registers


# ----------------------------------------------------------------------------------------------
# On an NVIDIA GPU


def _reference(name: str, inputs: list[np.ndarray]) -> np.ndarray:
    x = [a.astype(np.float64) for a in inputs]
    if name.startswith("matmul"):
        return x[0] @ x[1]
    if name.startswith("gmm"):
        return np.einsum("bnk,bkm->bnm", x[0], x[1])
    if name.startswith("convlayer"):  # 1x1 convolution + scale + shift + ReLU
        conv = np.einsum("nhwc,cf->nhwf", x[0], x[1][0, 0])
        return np.maximum(conv * x[2] + x[3], 0.0)
    # c2d NHWC, stride 1: KxK filter, zero padding p
    k, p = x[1].shape[0], (x[1].shape[0] - 1) // 2
    xp = np.pad(x[0], ((0, 0), (p, p), (p, p), (0, 0)))
    h, w = x[0].shape[1:3]
    return sum(np.einsum("nhwc,cf->nhwf", xp[:, i:i + h, j:j + w], x[1][i, j]) for i in range(k) for j in range(k))


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["matmul-1024", "matmul-97x197x61", "gmm-4x128x128x64",
                                  "c2d-1x56x56x64x64x1x1x0", "c2d-1x14x14x32x32x3x1x1",
                                  "convlayer-1x56x56x64x128x1x1x0"])
def test_pipelined_kernels_run_on_the_gpu(name: str) -> None:
    """Stages 1, 2 and 3 (the classic tile at 1024^3, a ragged tile at 97x197x61, sampled ones)
    against numpy, each run into outputs poisoned with NaN and with a second sentinel."""
    from ansor.measure import verify
    from ansor.targets.cuda.lowering import compile_task_cuda

    task = _task(name)
    sk = _sketch(task)
    rng = np.random.default_rng(7)
    inputs = [rng.standard_normal(s.shape).astype(np.float32) for s in task.inputs]
    want = _reference(name, inputs)
    schedules = [*_staged(sk, 2, seed=5, n=2), *_staged(sk, 3, seed=6, n=1)]
    if name == "matmul-1024":
        schedules = [{**CLASSIC, "op1.stages": s} for s in PIPELINE_STAGES] + schedules
    if name == "matmul-97x197x61":
        schedules = [{**MM_RAGGED, "op1.stages": s} for s in PIPELINE_STAGES] + schedules
    for v in schedules:
        assert sk.validate(v) is None, v
        kernel = compile_task_cuda(task, sk.script(v))
        for which in (0, 1):
            (out,) = kernel.run(inputs, verify.poisoned(task.outputs, which))
            np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3, err_msg=str(v))


@pytest.mark.gpu
def test_best_4096_record_with_two_stages_runs_on_the_gpu() -> None:
    """The tuned matmul-4096 record of results/gpu/ with two stages (the A/B of bench/gpu_probe)."""
    from ansor.measure import verify
    from ansor.targets.cuda.lowering import compile_task_cuda

    task = _task("matmul-4096")
    sk = _sketch(task)
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((4096, 4096)).astype(np.float32) for _ in range(2))
    want = a.astype(np.float64) @ b.astype(np.float64)
    kernel = compile_task_cuda(task, sk.script({**BEST_4096, "op1.stages": 2}))
    (out,) = kernel.run([a, b], verify.poisoned(task.outputs, 0))
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-2)

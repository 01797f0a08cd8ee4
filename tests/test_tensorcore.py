"""The tensor-core (wgmma + TMA) GEMM sketch: which tasks get it, its annotation rules, its PTX (no GPU
needed), and on the GPU host its results against an f32 reference."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

import ansor
from ansor.core.task import SearchTask
from ansor.frontend import workloads
from ansor.targets import generate_sketches
from ansor.targets.cuda.tensorcore import DEFAULT, KNOBS, TcSketch, tc_problem_for


def _task(name: str) -> SearchTask:
    return ansor.create_task(workloads.get(name), name=name, target="cuda")


def _values(**kw: int) -> dict[str, int]:
    return {f"tc.{k}": v for k, v in {**DEFAULT, **kw}.items()}


def _check_on_gpu(task: SearchTask, kw: dict[str, int]) -> None:
    """Build the tensor-core annotation `kw` of `task`, run it into poisoned outputs and compare
    with the reference (numpy, the interpreter, or the untransformed CPU program)."""
    from ansor.measure.measurer import reference_outputs
    from ansor.measure.verify import check_task_outputs, poisoned
    from ansor.targets.cuda.lowering import compile_task_cuda

    sk = generate_sketches(task)[0]
    kernel = compile_task_cuda(task, sk.script(_values(**kw)))
    inputs, refs, _ = reference_outputs(task)
    out = kernel.run(inputs, poisoned(task.outputs))
    assert check_task_outputs(task, out, refs) is None


@pytest.fixture(scope="module")
def mm16() -> SearchTask:
    return _task("matmul-256x512x1024-f16")


def test_half_matmul_gets_the_tensor_core_sketch_first(mm16: SearchTask) -> None:
    names = [s.name for s in generate_sketches(mm16)]
    assert names == ["tc0", "s0", "skip"]
    assert mm16.inputs[0].dtype == "f16" and mm16.outputs[0].dtype == "f32"


@pytest.mark.parametrize("name, why", [
    ("matmul-256", "not f16 or bf16"),  # f32 operands
    ("matmul-96x100x128-f16", "multiples of 8"),  # TMA: 16-byte row strides
    ("c2d-1x14x14x64x64x3x1x1", "not f16 or bf16"),
    ("c2d-2x56x56x64x128x3x2x1-f16", "batch of 2 images"),  # TMA's 5 dims
    ("c2d-1x56x56x32x64x3x1x1-f16", "multiple of 64"),  # a k-block is 64 channels of one tap
    ("mlp-64x256x4", "not one linalg.matmul"),
])
def test_other_tasks_do_not_get_it(name: str, why: str) -> None:
    task = _task(name)
    problem, reason = tc_problem_for(task)
    assert problem is None and why in reason
    assert all(not isinstance(s, TcSketch) for s in generate_sketches(task))


def test_validation_names_what_cannot_run(mm16: SearchTask) -> None:
    sk = generate_sketches(mm16)[0]
    assert sk.validate(_values()) is None
    assert "larger than the 96x128 result" in generate_sketches(_task("matmul-96x128x128-f16"))[0].validate(
        _values(bm=256, wgm=2, stages=2))
    assert "accumulators per thread" in sk.validate(_values(bm=128, bn=256, wgm=1))
    assert "64 or 128 rows" in sk.validate(_values(bm=64, wgm=2))
    assert "at least 3 stages" in sk.validate(_values(stages=2, wait=1))
    assert "stored wrongly" in sk.validate(_values(bm=128, bn=64))  # MLIR 22 bug, measured
    assert sk.validate(_values(bm=128, bn=64, wgm=2)) is None
    assert sk.validate(_values(stages=6)) is None
    assert "shared memory" in sk.validate(_values(bm=256, bn=128, wgm=2, stages=6))
    assert "registers per block" in sk.validate(_values(bm=256, bn=256, wgm=4, stages=3))
    small = generate_sketches(_task("matmul-128x128x128-f16"))[0]
    assert "k-blocks" in small.validate(_values(stages=3))
    rng = random.Random(0)
    for _ in range(50):
        sch = sk.sample(rng)
        assert sk.validate(sch.values()) is None


def test_script_annotates_and_tiles_like_the_kernel(mm16: SearchTask) -> None:
    sk = generate_sketches(mm16)[0]
    holes = sk.script(None)
    for k in KNOBS:
        assert f'transform.tune.knob<"tc.{k}">' in holes and f'"ansor.tc.{k}"' in holes
    assert "{tc.bm/tc.wgm}" in holes
    filled = sk.script(_values(bm=256, bn=128, wgm=2, stages=4))
    assert "tile_sizes [256, 128]" in filled and "tile_sizes [128, 0]" in filled and "tile_sizes [0, 0, 64]" in filled


def test_features_tell_annotations_apart(mm16: SearchTask) -> None:
    from ansor.search.features import featurize

    sk = generate_sketches(mm16)[0]
    a, b, base = featurize(mm16, [sk.script(_values()), sk.script(_values(bm=64, bn=256)), None])
    assert a is not None and b is not None and base is not None
    assert a.shape != base.shape or not np.array_equal(a, base)
    assert a.shape != b.shape or not np.array_equal(a, b)


@pytest.mark.parametrize("kw", [{}, {"bm": 256, "bn": 128, "wgm": 2, "stages": 4, "wait": 1},
                                {"bm": 64, "bn": 256, "stages": 5, "group": 8},
                                {"bm": 128, "bn": 256, "wgm": 2, "stages": 4, "wait": 1, "ws": 1}],
                         ids=["default", "2wg-wait1", "64x256-grouped", "producer-warpgroup"])
def test_ptx_has_wgmma_tma_and_no_local_memory(mm16: SearchTask, kw: dict[str, int]) -> None:
    from ansor.targets.cuda.lowering import emit_ptx

    sk = generate_sketches(mm16)[0]
    v = _values(**kw)
    ptx = emit_ptx(mm16, sk.script(v))
    bm, bn, wgm = v["tc.bm"], v["tc.bn"], v["tc.wgm"]
    # one wgmma per m64 row block of a warpgroup and per 16-deep k step of the 64-deep stage
    assert ptx.count("wgmma.mma_async") == (bm // wgm // 64) * 4
    if v["tc.ws"]:  # the producer waits on the stages' `empty` barriers, consumers arrive on them
        assert ptx.count("mbarrier.try_wait") >= 2 and "mbarrier.arrive.shared" in ptx or "mbarrier.arrive" in ptx
    assert f"m64n{bn}k16.f32.f16.f16" in ptx
    assert "cp.async.bulk.tensor" in ptx and "mbarrier.try_wait" in ptx
    assert ptx.count("wgmma.wait_group") >= 1
    assert ".local" not in ptx  # the accumulators stay in registers
    assert ".target sm_90a" in ptx


def test_half_precision_reference_computes_in_f32(mm16: SearchTask) -> None:
    from ansor.measure.measurer import _numpy_reference, make_inputs

    inputs = make_inputs(mm16)
    assert inputs[0].dtype == np.float16
    (ref,) = _numpy_reference(mm16, inputs)
    exact = inputs[0].astype(np.float64) @ inputs[1].astype(np.float64)
    assert ref.dtype == np.float32
    assert np.abs(ref - exact).max() < 1e-4 * np.abs(exact).max()


def test_workload_type_suffix() -> None:
    assert "tensor<64x32xf16>" in workloads.get("matmul-64x16x32-f16")
    assert "tensor<64x16xf32>" in workloads.get("matmul-64x16x32-f16")
    with pytest.raises(KeyError, match="no element-type suffix -f16 for dep"):
        workloads.get("dep-1x14x14x64x3x1x1-f16")
    assert "tensor<1x14x14x64xf16>" in workloads.get("c2d-1x14x14x64x64x3x1x1-f16")
    with pytest.raises(ValueError, match="one group"):
        workloads.conv2d_nhwc(1, 8, 8, 16, 16, 3, groups=2, dtype="f16")


@pytest.mark.gpu
@pytest.mark.parametrize("kw", [{}, {"bm": 256, "bn": 128, "wgm": 2, "stages": 4, "wait": 1},
                                {"bm": 128, "bn": 256, "wgm": 2, "stages": 3, "group": 8},
                                {"bm": 64, "bn": 64, "stages": 2},
                                {"bm": 128, "bn": 256, "wgm": 2, "stages": 4, "wait": 1, "ws": 1},
                                {"bm": 128, "bn": 128, "stages": 2, "ws": 1, "group": 4}],
                         ids=["default", "2wg-wait1", "128x256-grouped", "64x64", "ws-2wg", "ws-1wg"])
def test_tensor_core_gemm_matches_the_f32_reference(mm16: SearchTask, kw: dict[str, int]) -> None:
    from ansor.measure.measurer import _numpy_reference, make_inputs
    from ansor.measure.verify import check_task_outputs, poisoned
    from ansor.targets.cuda.lowering import compile_task_cuda

    sk = generate_sketches(mm16)[0]
    kernel = compile_task_cuda(mm16, sk.script(_values(**kw)))
    inputs = make_inputs(mm16)
    out = kernel.run(inputs, poisoned(mm16.outputs))
    assert check_task_outputs(mm16, out, _numpy_reference(mm16, inputs)) is None


def test_host_builds_tma_descriptors_through_the_cache(mm16: SearchTask) -> None:
    """Upstream's `mgpuTensorMapEncodeTiledMemref` allocates a device descriptor per call and never
    frees it (MLIR 22): the host code must call our cached builder (capi/GpuRuntime.cpp) instead."""
    from mlir import ir

    from ansor.core import native
    from ansor.targets.cuda.lowering import _lower_module

    sk = generate_sketches(mm16)[0]
    with ir.Context(), ir.Location.unknown():
        text = str(_lower_module(mm16, sk.script(_values()), "sm_90", "isa", bench=True))
    assert text.count("llvm.call @ansorTensorMapEncodeTiledMemrefCached") == 2
    assert "mgpuTensorMapEncodeTiledMemref" not in text
    import ctypes

    assert hasattr(ctypes.CDLL(str(native.find_library())), "ansorTensorMapEncodeTiledMemrefCached")


@pytest.mark.gpu
@pytest.mark.parametrize("kw", [{}, {"bm": 128, "bn": 256, "wgm": 2, "stages": 4, "wait": 1, "ws": 1}],
                         ids=["default", "ws-2wg"])
def test_bf16_tensor_core_gemm_matches_the_f32_reference(kw: dict[str, int]) -> None:
    from ansor.measure.measurer import _numpy_reference, make_inputs
    from ansor.measure.verify import check_task_outputs, poisoned
    from ansor.targets.cuda.lowering import compile_task_cuda

    task = _task("matmul-256x512x1024-bf16")
    sk = generate_sketches(task)[0]
    assert isinstance(sk, TcSketch) and sk.problem.et == "bf16"
    kernel = compile_task_cuda(task, sk.script(_values(**kw)))
    inputs = make_inputs(task)
    assert inputs[0].dtype.name == "bfloat16"
    out = kernel.run(inputs, poisoned(task.outputs))
    assert check_task_outputs(task, out, _numpy_reference(task, inputs)) is None


def test_bf16_ptx_uses_bf16_wgmma() -> None:
    from ansor.targets.cuda.lowering import emit_ptx

    task = _task("matmul-256x512x1024-bf16")
    sk = generate_sketches(task)[0]
    ptx = emit_ptx(task, sk.script(_values()))
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in ptx


def test_untrained_search_gives_the_small_tensor_core_space_its_share(tmp_path) -> None:
    """While the cost model is untrained, random scores would hand nearly every batch to the
    CUDA-core sketch's offspring (millions of annotations against ~200): `untrained_share`."""
    from ansor.measure.measurer import SyntheticMeasurer
    from ansor.tuning.records import load_records

    task = _task("matmul-1024-f16")
    log = tmp_path / "tc.jsonl"
    ansor.tune(task, trials=16, measurer=SyntheticMeasurer(), search="learned", batch_size=16, log_path=log)
    sketches = [r.schedule.sketch for r in load_records(log) if r.schedule.sketch != "skip"]
    assert 6 <= sketches.count("tc0") <= 10 and sketches.count("s0") >= 6


# ----------------------------------------------------------------------------------------------
# Fused epilogues, half-precision results and ragged tiles (the staged store)

_CHAIN = """
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (j)>
#col = affine_map<(i, j) -> (i)>
func.func @f(%A: tensor<192x64xbf16>, %B: tensor<64x136xbf16>, %bias: tensor<136xf32>, %s: tensor<192xf32>) -> tensor<192x136xbf16> {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<192x136xf32>
  %eh = tensor.empty() : tensor<192x136xbf16>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<192x136xf32>) -> tensor<192x136xf32>
  %C = linalg.matmul ins(%A, %B : tensor<192x64xbf16>, tensor<64x136xbf16>) outs(%init : tensor<192x136xf32>) -> tensor<192x136xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%C, %bias : tensor<192x136xf32>, tensor<136xf32>) outs(%e : tensor<192x136xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %t = arith.addf %a, %b : f32
    linalg.yield %t : f32
  } -> tensor<192x136xf32>
  %z = linalg.generic {indexing_maps = [#col, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s, %y : tensor<192xf32>, tensor<192x136xf32>) outs(%eh : tensor<192x136xbf16>) {
  ^bb0(%sc: f32, %a: f32, %o: bf16):
    %m = arith.mulf %a, %sc : f32
    %r = arith.maximumf %m, %two : f32
    %h = arith.truncf %r : f32 to bf16
    linalg.yield %h : bf16
  } -> tensor<192x136xbf16>
  return %z : tensor<192x136xbf16>
}
"""


def test_matmul_with_an_element_wise_tail_gets_a_fused_epilogue() -> None:
    from ansor.targets.cuda.tensorcore import EpilogueInput

    p, why = tc_problem_for(_task("mmgelu-256x512x1024-f16"))
    assert p is not None and "epilogue" in why
    assert (p.acc, p.out, p.n_args) == ("f32", "f16", 3)
    assert p.extras == (EpilogueInput(arg=2, dtype="f16", shape=(512,), dims=(1,)),)
    assert "math.erf" in p.epilogue and "__ansor_epilogue" in p.epilogue
    # two consumers (bias add, then a per-row scale + clamp + rounding) fuse into one epilogue;
    # the row operand is read by the row index, the bias by the column index
    chain = ansor.create_task(_CHAIN, name="chain", target="cuda")
    p, _ = tc_problem_for(chain)
    assert p is not None and (p.m, p.n, p.k, p.et, p.out) == (192, 136, 64, "bf16", "bf16")
    assert sorted((x.arg, x.dims) for x in p.extras) == [(2, (1,)), (3, (0,))]
    assert p.staged(64, 64) and not tc_problem_for(_task("matmul-256-f16"))[0].staged(128, 128)


def test_epilogues_it_cannot_fuse_are_refused() -> None:
    # an epilogue that reads its iteration index cannot become a scalar function
    index = _CHAIN.replace("%t = arith.addf %a, %b : f32",
                           "%i = linalg.index 1 : index\n    %ii = arith.index_cast %i : index to i32\n"
                           "    %fi = arith.sitofp %ii : i32 to f32\n    %t = arith.addf %a, %fi : f32")
    p, reason = tc_problem_for(ansor.create_task(index, name="index", target="cuda"))
    assert p is None and "iteration indices" in reason


@pytest.mark.parametrize("name, kw, store", [
    # every consumer thread stores 8 consecutive elements at once: 16 bytes (f16) or 2 x 16 (f32)
    ("mmgelu-256x512x1024-f16", {}, "st.global.v4.b32"),
    ("mmgelu-256x512x1024-bf16", {"bm": 128, "bn": 256, "wgm": 2, "stages": 4, "wait": 1, "ws": 1}, "st.global.v4.b32"),
    ("matmul-200x136x256-f16", {"bm": 64, "bn": 64, "stages": 2}, "st.global.v4.b32"),
    ("matmul-16x1024x512-f16", {"bm": 64, "bn": 128, "stages": 4}, "st.global.v4.b32"),
], ids=["gelu-f16", "gelu-bf16-ws", "ragged", "decode"])
def test_staged_store_ptx(name: str, kw: dict[str, int], store: str) -> None:
    from ansor.targets.cuda.lowering import emit_ptx

    task = _task(name)
    sk = generate_sketches(task)[0]
    assert isinstance(sk, TcSketch) and sk.validate(_values(**kw)) is None
    ptx = emit_ptx(task, sk.script(_values(**kw)))
    assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor" in ptx
    assert store in ptx and ".local" not in ptx
    assert "st.global.b16" not in ptx and "st.global.f32" not in ptx  # no scalar stores left
    assert "call" not in ptx.split(".entry", 1)[1]  # the epilogue is inlined
    if kw.get("ws"):  # the consumers synchronise among themselves (the producer has left)
        assert f"bar.sync \t1, {128 * kw['wgm']};" in ptx


def test_staged_tile_reuses_the_pipeline_shared_memory() -> None:
    from ansor.targets.cuda.kernel_text import DYNAMIC_SHARED_SLACK
    from ansor.targets.cuda.tensorcore import kernel_text, stage_bytes, staged_tile_bytes

    sk = generate_sketches(_task("mmgelu-512-f16"))[0]
    v = _values(bm=128, bn=256, wgm=2, stages=2)
    assert sk.validate(v) is None
    text = kernel_text(sk.problem, {k: v[f"tc.{k}"] for k in KNOBS}, "f")
    # two 48 KB stages, then the 128 x (256 + 8) f32 tile over them: the larger of the two
    assert staged_tile_bytes(128, 256) > 2 * stage_bytes(128, 256)
    assert f"arith.constant {staged_tile_bytes(128, 256) + DYNAMIC_SHARED_SLACK} : i32" in text  # (launched)
    assert f"%dyn = memref.view %dynw[%dynsh][%c{staged_tile_bytes(128, 256)}]" in text  # (used)


@pytest.mark.parametrize("name, kw", [
    ("matmul-16x4096x4096-f16", {"bm": 64, "bn": 64, "stages": 4, "splitk": 4}),
    ("matmul-256x256x256-f16", {"ws": 1, "wait": 1, "stages": 3}),
])
def test_dynamic_shared_buffer_starts_past_the_static_mbarriers(name, kw) -> None:
    """MLIR 22 + NVPTX declare `gpu.dynamic_shared_memory` as a 1-byte static shared variable with
    the `nvgpu.mbarrier.create` mbarriers right behind it: a buffer used from its address lay over
    the mbarriers (tile row 0 of split-K 8 and TF32 split-K 4 results NaN on an H200). The kernel
    moves its buffer to the next 1024-byte boundary and launches with that much more."""
    from ansor.targets.cuda.lowering import emit_ptx

    task = _task(name)
    sk = generate_sketches(task)[0]
    ptx = emit_ptx(task, sk.script(_values(**kw)))
    # the upstream behaviour worked around: still a 1-byte static, not an extern array
    assert re.search(r"\.shared \.align 16 \.b8 __dynamic_shmem__0;", ptx), "upstream now emits an extern array?"
    base = re.search(r"mov\.b64 \t(%rd\d+), __dynamic_shmem__0;", ptx).group(1)
    assert re.search(rf"or\.b64 \t%rd\d+, {base}, 1023;", ptx)  # rounded up past the static variables


@pytest.mark.gpu
@pytest.mark.parametrize("name, kw", [
    ("mmgelu-256x512x1024-f16", {}),
    ("mmgelu-256x512x1024-bf16", {"bm": 128, "bn": 256, "wgm": 2, "stages": 4, "wait": 1, "ws": 1}),
    ("mmgelu-384x256x512-f16", {"bm": 256, "bn": 128, "wgm": 2, "stages": 3, "group": 4}),
    ("matmul-200x136x264-f16", {"bm": 64, "bn": 64, "stages": 2}),
    ("matmul-200x136x264-bf16", {"bm": 128, "bn": 128, "wgm": 2, "stages": 3, "ws": 1}),
    ("matmul-16x1024x512-f16", {"bm": 64, "bn": 128, "stages": 4}),
], ids=["gelu-f16", "gelu-bf16-ws", "gelu-2wg", "ragged-f16", "ragged-bf16-ws", "decode"])
def test_staged_store_matches_the_reference(name: str, kw: dict[str, int]) -> None:
    """Fused epilogues and ragged tiles against the CPU reference, outputs poisoned first."""
    _check_on_gpu(_task(name), kw)


# ----------------------------------------------------------------------------------------------
# Persistent kernels: min(tiles, SMs) blocks loop over the tiles; the producer runs ahead


def test_persistent_validation_and_old_records(mm16: SearchTask) -> None:
    sk = generate_sketches(mm16)[0]
    assert sk.validate(_values(ws=1, persist=1)) is None
    assert "producer warpgroup" in sk.validate(_values(persist=1))
    gelu = generate_sketches(_task("mmgelu-256x512x1024-f16"))[0]
    assert "staged tile" in gelu.validate(_values(ws=1, persist=1))
    old = {k: v for k, v in _values().items() if k != "tc.persist"}  # a record from before the knob
    assert sk.validate(old) is None and 'knob<"tc.persist"> = 0 ' in sk.script(old)


def test_persistent_kernel_loops_over_its_tiles(mm16: SearchTask) -> None:
    from ansor.targets.cuda.tensorcore import kernel_text

    sk = generate_sketches(mm16)[0]
    v = {k: x for k, x in {**DEFAULT, "ws": 1, "persist": 1, "wait": 1, "stages": 4}.items()}
    text = kernel_text(sk.problem, v, "f", sm_count=3)  # 2 x 4 tiles of 128 x 128 over 3 blocks
    assert "%hgx = arith.constant 3 : index" in text and "%hgy = arith.constant 1 : index" in text
    assert text.count("scf.for %t = %bx to %c8 step %c3") == 2  # the producer's and the consumers'
    # stages and phases count k-blocks across tiles; the last stage of a tile is released after it
    assert text.count("%g = arith.addi %g0, %i : index") == 2 and "%glast" in text
    from ansor.targets.cuda.lowering import emit_ptx

    ptx = emit_ptx(mm16, sk.script(_values(ws=1, persist=1, wait=1, stages=4)))
    assert "wgmma.mma_async" in ptx and ".local" not in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("name, kw", [
    ("matmul-2048x2048x512-f16", {"ws": 1, "persist": 1}),
    ("matmul-4096x2048x512-f16", {"bm": 128, "bn": 256, "wgm": 2, "stages": 4, "wait": 1, "group": 8, "ws": 1,
                                  "persist": 1}),
    ("matmul-1024x3072x256-bf16", {"bm": 128, "bn": 128, "wgm": 2, "stages": 2, "ws": 1, "persist": 1,
                                   "group": 4}),
], ids=["128x128", "128x256-wait1-grouped", "bf16-2wg"])
def test_persistent_gemm_matches_the_reference(name: str, kw: dict[str, int]) -> None:
    _check_on_gpu(_task(name), kw)


# ----------------------------------------------------------------------------------------------
# Batch matmul: the batches as one tall A, B and C, blockIdx.z picking the batch

_BATCH_SCALED = """
#id = affine_map<(b, i, j) -> (b, i, j)>
#s = affine_map<(b, i, j) -> (b)>
func.func @f(%A: tensor<12x197x64xf16>, %B: tensor<12x64x200xf16>, %s: tensor<12xf32>) -> tensor<12x197x200xf16> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<12x197x200xf32>
  %eh = tensor.empty() : tensor<12x197x200xf16>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<12x197x200xf32>) -> tensor<12x197x200xf32>
  %C = linalg.batch_matmul ins(%A, %B : tensor<12x197x64xf16>, tensor<12x64x200xf16>) outs(%init : tensor<12x197x200xf32>) -> tensor<12x197x200xf32>
  %y = linalg.generic {indexing_maps = [#id, #s, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%C, %s : tensor<12x197x200xf32>, tensor<12xf32>) outs(%eh : tensor<12x197x200xf16>) {
  ^bb0(%a: f32, %sc: f32, %o: f16):
    %m = arith.mulf %a, %sc : f32
    %h = arith.truncf %m : f32 to f16
    linalg.yield %h : f16
  } -> tensor<12x197x200xf16>
  return %y : tensor<12x197x200xf16>
}
"""


def test_batch_matmul_gets_the_sketch() -> None:
    p, why = tc_problem_for(_task("gmm-4x256x512x256-f16"))
    assert p is not None and (p.batch, p.m, p.n, p.k) == (4, 256, 512, 256)
    scaled = ansor.create_task(_BATCH_SCALED, name="bscaled", target="cuda")
    p, why = tc_problem_for(scaled)
    assert p is not None and "epilogue" in why and p.batch == 12 and p.out == "f16"
    assert [(x.arg, x.dims) for x in p.extras] == [(2, (0,))]  # read by the batch index
    p, why = tc_problem_for(_task("gmm-2x128x128x100-f16"))
    assert p is None and "multiple of 64" in why
    sk = generate_sketches(_task("gmm-4x256x512x256-f16"))[0]
    assert "persistent batch matmul" in sk.validate(_values(ws=1, persist=1))


@pytest.mark.parametrize("name, kw", [("gmm-4x256x512x256-f16", {}), ("gmm-12x197x200x64-f16", {"bm": 64, "bn": 64,
                                                                                                "stages": 2})],
                         ids=["plain", "one-k-block-ragged"])
def test_batch_matmul_ptx(name: str, kw: dict[str, int]) -> None:
    from ansor.targets.cuda.lowering import emit_ptx

    task = _task(name)
    sk = generate_sketches(task)[0]
    assert sk.validate(_values(**kw)) is None
    ptx = emit_ptx(task, sk.script(_values(**kw)))
    assert "wgmma.mma_async" in ptx and "%ctaid.z" in ptx and ".local" not in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("name, kw", [
    ("gmm-4x256x512x256-f16", {}),
    ("gmm-4x256x512x256-bf16", {"bm": 128, "bn": 256, "wgm": 2, "stages": 3, "wait": 1, "ws": 1}),
    ("gmm-12x197x200x64-f16", {"bm": 64, "bn": 64, "stages": 2}),
    ("bscaled", {"bm": 128, "bn": 128, "wgm": 2, "stages": 2, "group": 4}),
], ids=["f16", "bf16-ws", "ragged-one-k-block", "scaled-epilogue"])
def test_batch_matmul_matches_the_reference(name: str, kw: dict[str, int]) -> None:
    _check_on_gpu(ansor.create_task(_BATCH_SCALED, name=name, target="cuda") if name == "bscaled" else _task(name), kw)


def test_ir_the_matcher_does_not_foresee_is_declined_not_raised(monkeypatch) -> None:
    from ansor.targets.cuda import tensorcore

    def boom(func):
        raise ValueError("unexpected IR")

    monkeypatch.setattr(tensorcore, "_match", boom)
    tensorcore._analyze.cache_clear()
    try:
        p, why = tc_problem_for(_task("matmul-128x128x128-f16"))
    finally:
        tensorcore._analyze.cache_clear()
    assert p is None and "not analysable" in why and "unexpected IR" in why


# ----------------------------------------------------------------------------------------------
# Convolutions as implicit GEMMs: 4-D TMA boxes of th x tw pixels, shifted per filter tap

#: Conv + bias + ReLU in bf16, dilation 2, padding 2, a ragged 20x20 image, batch 2, 96 channels out.
_CONV_BIAS_RELU = """#id4 = affine_map<(a, b, c, d) -> (a, b, c, d)>
#ch = affine_map<(a, b, c, d) -> (d)>
func.func @conv_bias_relu(%X: tensor<2x20x20x128xbf16>, %W: tensor<3x3x128x96xbf16>, %b: tensor<96xf32>)
    -> tensor<2x20x20x96xbf16> {
  %zero = arith.constant 0.0 : f32
  %hzero = arith.constant 0.0 : bf16
  %xp = tensor.pad %X low[0, 2, 2, 0] high[0, 2, 2, 0] {
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
    tensor.yield %hzero : bf16
  } : tensor<2x20x20x128xbf16> to tensor<2x24x24x128xbf16>
  %e = tensor.empty() : tensor<2x20x20x96xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<2x20x20x96xf32>) -> tensor<2x20x20x96xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<2> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%xp, %W : tensor<2x24x24x128xbf16>, tensor<3x3x128x96xbf16>) outs(%init : tensor<2x20x20x96xf32>)
      -> tensor<2x20x20x96xf32>
  %o = tensor.empty() : tensor<2x20x20x96xbf16>
  %y = linalg.generic {indexing_maps = [#id4, #ch, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%c, %b : tensor<2x20x20x96xf32>, tensor<96xf32>) outs(%o : tensor<2x20x20x96xbf16>) {
  ^bb0(%v: f32, %bv: f32, %out: bf16):
    %s = arith.addf %v, %bv : f32
    %r = arith.maximumf %s, %zero : f32
    %h = arith.truncf %r : f32 to bf16
    linalg.yield %h : bf16
  } -> tensor<2x20x20x96xbf16>
  return %y : tensor<2x20x20x96xbf16>
}
"""


def _conv_task(name: str) -> SearchTask:
    return ansor.create_task(_CONV_BIAS_RELU, name=name, target="cuda") if name == "conv-bias-relu" else _task(name)


def test_convolution_gets_the_implicit_gemm_sketch() -> None:
    task = _task("c2d-1x56x56x64x64x3x1x1-f16")
    assert [s.name for s in generate_sketches(task)][0] == "tc0"
    p, why = tc_problem_for(task)
    assert "implicit-GEMM" in why and (p.m, p.n, p.k, p.kt) == (56 * 56, 64, 576, 9)
    assert (p.conv.pad_h, p.conv.oh, p.out) == (1, 56, "f16")
    sk = generate_sketches(task)[0]
    assert "tc.tw" in sk.free_tile_knobs and 56 in dict((k.name, k.options) for k in sk.knobs)["tc.tw"]
    assert sk.validate(_values(bm=64, bn=64, tw=8)) is None
    assert "not in its options" in sk.validate(_values(bm=64, bn=64, tw=64))  # wider than the image
    small = generate_sketches(_task("c2d-4x7x7x512x512x3x1x1-f16"))[0]  # 7x7 pixels: 49 rows a tile
    assert "less than half of the 128 rows" in small.validate(_values(bm=128, bn=128, wgm=2, tw=7))
    assert small.validate(_values(bm=64, bn=128, tw=7)) is None
    p, why = tc_problem_for(_conv_task("conv-bias-relu"))
    assert p is not None and "epilogue" in why and (p.conv.dil_h, p.conv.pad_w, p.n) == (2, 2, 96)
    assert [(x.arg, x.dims) for x in p.extras] == [(2, (3,))]  # the bias, by output channel


@pytest.mark.parametrize("name, kw", [
    ("c2d-1x56x56x64x64x3x1x1-f16", {"bm": 64, "bn": 64, "tw": 8}),
    ("conv-bias-relu", {"bm": 128, "bn": 128, "wgm": 2, "stages": 4, "wait": 1, "ws": 1, "tw": 16}),
    ("c2d-1x56x56x64x128x3x2x1-f16", {"bm": 128, "bn": 128, "wgm": 2, "stages": 4, "tw": 4}),
], ids=["resnet-56", "bias-relu-dilated", "stride-2"])
def test_convolution_ptx(name: str, kw: dict[str, int]) -> None:
    from ansor.targets.cuda.lowering import emit_ptx

    task = _conv_task(name)
    sk = generate_sketches(task)[0]
    assert sk.validate(_values(**kw)) is None
    ptx = emit_ptx(task, sk.script(_values(**kw)))
    # X's boxes: 1 x th x tw x 64 shifted per tap; strided, th x 1 x tw x 1 x 64 of [H/s, s, W/s, s, C]
    assert f"cp.async.bulk.tensor.{'5d' if 'x2x1-' in name else '4d'}" in ptx
    assert "cp.async.bulk.tensor.2d" in ptx  # W as a [KH*KW*C, CO] matrix
    assert "wgmma.mma_async" in ptx and "st.global.v4.b32" in ptx and ".local" not in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("name, kw", [
    ("c2d-1x56x56x64x64x3x1x1-f16", {"bm": 64, "bn": 64, "tw": 8}),
    ("c2d-1x56x56x64x64x3x1x1-f16", {"bm": 128, "bn": 64, "wgm": 2, "stages": 4, "wait": 1, "tw": 56}),
    ("c2d-2x28x28x128x128x3x1x1-f16", {"bm": 128, "bn": 128, "wgm": 2, "stages": 4, "ws": 1, "tw": 16}),
    ("c2d-1x14x14x256x256x1x1x0-bf16", {"bm": 64, "bn": 128, "stages": 3, "tw": 4}),
    ("conv-bias-relu", {"bm": 128, "bn": 128, "wgm": 2, "stages": 4, "wait": 1, "ws": 1, "tw": 16}),
    ("c2d-1x56x56x64x128x3x2x1-f16", {"bm": 128, "bn": 128, "wgm": 2, "stages": 4, "tw": 4}),
    ("c2d-2x56x56x64x128x1x2x0-f16", {"bm": 64, "bn": 128, "stages": 2, "tw": 8}),
    ("c2d-1x28x28x128x256x3x2x1-bf16", {"bm": 64, "bn": 128, "stages": 3, "tw": 14, "splitk": 2}),
], ids=["resnet-56-8x8", "rows-of-56", "batch2-ragged-rows", "1x1-bf16", "bias-relu-dilated", "stride2-3x3",
        "stride2-1x1-batch2", "stride2-bf16-splitk"])
def test_convolution_matches_the_reference(name: str, kw: dict[str, int]) -> None:
    _check_on_gpu(_conv_task(name), kw)


# ----------------------------------------------------------------------------------------------
# Split-K clusters: `splitk` blocks along z share a tile, each summing 1/splitk of the k-blocks;
# the partial tiles are reduced through distributed shared memory, no second kernel


def test_split_k_validation(mm16: SearchTask) -> None:
    sk = generate_sketches(mm16)[0]  # 1024 deep: 16 k-blocks
    assert sk.validate(_values(splitk=4, stages=4)) is None
    assert "stages exceed the 4 k-blocks of a block" in sk.validate(_values(splitk=4, stages=5))
    assert "persistent kernel does not split K" in sk.validate(_values(splitk=2, ws=1, persist=1))
    gmm = generate_sketches(_task("gmm-4x256x512x256-f16"))[0]
    assert "no split-K cluster" in gmm.validate(_values(splitk=2))
    conv = generate_sketches(_task("c2d-1x28x28x128x128x3x1x1-f16"))[0]  # 9 taps x 2 = 18 k-blocks
    assert "do not split into 4" in conv.validate(_values(bm=128, bn=64, wgm=2, tw=4, splitk=4))
    old = {f"tc.{k}": x for k, x in DEFAULT.items() if k != "splitk"}  # a record from before the knob
    assert sk.validate(old) is None and 'knob<"tc.splitk"> = 1 ' in sk.script(old)


def test_split_k_clusters_of_8_are_offered() -> None:
    """Clusters of 8 (the portable maximum) are offered again since the dynamic shared buffer no
    longer lies over the mbarriers (`test_dynamic_shared_buffer_starts_past_the_static_mbarriers`;
    their GPU run: `test_split_k_matches_the_reference[decode-8]`), and the sampler draws them."""
    from ansor.targets.cuda.tensorcore import OPTIONS

    assert max(OPTIONS["splitk"]) == 8
    decode = generate_sketches(_task("matmul-16x4096x4096-f16"))[0]  # 64 k-blocks
    assert decode.validate(_values(bm=64, bn=64, stages=4, splitk=8)) is None
    assert "do not split into 8" in generate_sketches(_task("matmul-256x256x256-f16"))[0].validate(
        _values(bm=64, bn=64, stages=2, splitk=8))  # 4 k-blocks
    rng = random.Random(3)
    assert 8 in {decode.sample(rng).values()["tc.splitk"] for _ in range(200)}


@pytest.mark.parametrize("name, kw", [
    ("matmul-16x4096x4096-f16", {"bm": 64, "bn": 64, "stages": 4, "splitk": 4}),
    ("matmul-16x4096x4096-f16", {"bm": 64, "bn": 128, "stages": 4, "splitk": 4}),
    ("c2d-1x28x28x128x128x3x1x1-f16", {"bm": 128, "bn": 64, "wgm": 2, "tw": 4, "splitk": 2, "ws": 1}),
    ("matmul-16x4096x4096-f16", {"bm": 64, "bn": 64, "stages": 4, "splitk": 8}),
], ids=["decode", "decode-bn128", "conv-ws", "decode-8"])
def test_split_k_ptx(name: str, kw: dict[str, int]) -> None:
    from ansor.targets.cuda.lowering import emit_ptx

    task = _task(name)
    sk = generate_sketches(task)[0]
    assert sk.validate(_values(**kw)) is None
    ptx = emit_ptx(task, sk.script(_values(**kw)))
    assert "mapa.shared::cluster" in ptx and "ld.shared::cluster.v4" in ptx  # peers' partial tiles
    assert ptx.count("ld.shared::cluster.v4") >= kw["splitk"]  # one load per block of the cluster
    assert ptx.count("barrier.cluster.arrive") == 2 and ".local" not in ptx
    assert "%clusterid" not in ptx and "%cluster_ctarank" in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("name, kw", [
    ("matmul-16x4096x4096-f16", {"bm": 64, "bn": 64, "stages": 4, "splitk": 4}),
    ("matmul-16x4096x4096-f16", {"bm": 64, "bn": 128, "stages": 6, "wait": 1, "splitk": 4}),
    ("matmul-200x136x256-f16", {"bm": 64, "bn": 64, "stages": 2, "splitk": 2}),
    ("mmgelu-256x512x1024-f16", {"bm": 128, "bn": 128, "wgm": 2, "stages": 4, "wait": 1, "ws": 1, "splitk": 2}),
    ("c2d-1x28x28x128x128x3x1x1-f16", {"bm": 128, "bn": 64, "wgm": 2, "tw": 4, "splitk": 2, "ws": 1}),
    ("c2d-1x56x56x64x64x3x1x1-f16", {"bm": 64, "bn": 64, "tw": 8, "stages": 3, "splitk": 3}),
    # clusters of 8 left NaN in tile row 0 while the dynamic shared buffer lay over the mbarriers
    ("matmul-16x4096x4096-f16", {"bm": 64, "bn": 64, "stages": 4, "splitk": 8}),
    ("matmul-16x4096x4096-f16", {"bm": 64, "bn": 128, "stages": 4, "wait": 1, "ws": 1, "splitk": 8}),
], ids=["decode-4", "decode-bn128-4", "ragged-2", "gelu-ws-2", "conv-ws-2", "conv-taps-3", "decode-8",
        "decode-ws-8"])
def test_split_k_matches_the_reference(name: str, kw: dict[str, int]) -> None:
    _check_on_gpu(_task(name), kw)


def test_resuming_a_log_from_before_a_knob(tmp_path) -> None:
    """Records written before `splitk` existed seed the search (mutation, crossover) as what they
    meant then (splitk = 1), instead of failing the resumed run."""
    import json

    from ansor.measure.measurer import SyntheticMeasurer
    from ansor.tuning.records import load_records

    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k != "tc.splitk"}
        return [strip(v) for v in x] if isinstance(x, list) else x

    task = _task("matmul-512x512x1024-f16")
    log = tmp_path / "old.jsonl"
    ansor.tune(task, trials=16, measurer=SyntheticMeasurer(), search="learned", batch_size=16, log_path=log, seed=1)
    old = [strip(json.loads(line)) for line in log.read_text().splitlines()]
    assert '"sketch": "tc0"' in log.read_text() and not any("tc.splitk" in r["schedule"]["knobs"] for r in old)
    log.write_text("".join(json.dumps(r) + "\n" for r in old))
    # Random scores throughout (the synthetic latencies would guide the model away from tc0 once it
    # trains at 16 programs, and this test is about resuming, not ranking).
    from ansor.search.cost_model import XGBModel

    ansor.tune(task, trials=48, measurer=SyntheticMeasurer(), search="learned", batch_size=16, log_path=log, seed=1,
               cost_model=XGBModel(seed=1, few_shot_threshold=100))
    recs = [r for r in load_records(log) if r.schedule.sketch == "tc0"]
    assert len(load_records(log)) >= 48 and recs
    assert all("tc.splitk" in r.schedule.values() for r in recs[-8:])  # new ones carry the knob

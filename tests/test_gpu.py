"""The cuda target: GPU sketches and annotation (no GPU), lowering to PTX (no GPU), and real
runs on an NVIDIA GPU (`@pytest.mark.gpu`, skipped without one)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from ansor.frontend import workloads
from ansor.space.schedule import sample, validate
from ansor.targets.cuda.rules import (
    GPU_UNROLL_OPTIONS,
    MAX_SHARED_BYTES,
    GpuSketch,
    default_script,
    shared_bytes,
    threads_per_dim,
)
from ansor.targets import generate_sketches
from ansor.core.task import SearchTask, create_task


@pytest.fixture(scope="module")
def mm_cuda() -> SearchTask:
    return create_task(workloads.get("matmul-512"), name="matmul-512", target="cuda")


@pytest.fixture(scope="module")
def mm64_cuda() -> SearchTask:
    return create_task(workloads.get("matmul-64"), name="matmul-64", target="cuda")


def test_cuda_target_gets_gpu_sketches(mm_cuda: SearchTask) -> None:
    sketches = generate_sketches(mm_cuda)
    assert [s.name for s in sketches] == ["s0", "skip"]
    sk = sketches[0]
    assert isinstance(sk, GpuSketch)
    assert sk.rule == "gpu_multi_level_tiling(op1)"
    names = {k.name for k in sk.knobs}
    # SSSRRSRS: 4 knobs per space loop, 2 per reduction loop, plus the unroll pragma
    assert {f"op1.d{d}.t{lv}" for d in (0, 1) for lv in (1, 2, 3, 4)} <= names
    assert {"op1.d2.t1", "op1.d2.t2", "op1.unroll"} <= names
    assert sk.knob("op1.unroll").options == GPU_UNROLL_OPTIONS


def test_gpu_samples_respect_device_limits(mm_cuda: SearchTask) -> None:
    sk = generate_sketches(mm_cuda)[0]
    rng = random.Random(0)
    for _ in range(50):
        values = sample(sk, rng).values()
        assert validate(sk, values) is None
        threads = int(np.prod(threads_per_dim(sk.gpu_stage, values)))
        assert 32 <= threads <= 1024
        assert shared_bytes(sk.gpu_stage, values) <= MAX_SHARED_BYTES


def test_gpu_validate_rejects_over_limits(mm_cuda: SearchTask) -> None:
    sk = generate_sketches(mm_cuda)[0]
    base = sample(sk, random.Random(1)).values()
    too_many_threads = dict(base)
    # 64 x 32 threads of one element each, no virtual threads
    too_many_threads.update({"op1.d0.t1": 64, "op1.d0.t2": 64, "op1.d0.t3": 1, "op1.d0.t4": 1,
                             "op1.d1.t1": 32, "op1.d1.t2": 32, "op1.d1.t3": 1, "op1.d1.t4": 1})
    assert "threads per block" in (validate(sk, too_many_threads) or "")
    too_much_smem = dict(base)
    # A: 512 x 32 floats = 64 KiB of shared memory
    too_much_smem.update({"op1.d0.t1": 512, "op1.d0.t2": 512, "op1.d0.t3": 16, "op1.d0.t4": 1,
                          "op1.d1.t1": 32, "op1.d1.t2": 32, "op1.d1.t3": 2, "op1.d1.t4": 1,
                          "op1.d2.t1": 32, "op1.d2.t2": 1})
    assert "shared memory" in (validate(sk, too_much_smem) or "")


def test_gpu_script_has_holes_and_mappings(mm_cuda: SearchTask) -> None:
    sk = generate_sketches(mm_cuda)[0]
    holes = sk.script()
    assert 'transform.tune.knob<"op1.d0.t1"> options = [' in holes
    filled = sk.script(sample(sk, random.Random(2)).values())
    for needle in ("#gpu.block<x>", "#gpu.thread<x>", "memory_space = 3", "map_forall_to_blocks",
                   "map_nested_forall_to_threads", "hoist_loop_invariant_subsets"):
        assert needle in filled


def test_gpu_lowering_emits_ptx_without_a_gpu(mm64_cuda: SearchTask) -> None:
    from ansor.targets.cuda.lowering import emit_ptx

    sk = generate_sketches(mm64_cuda)[0]
    rng = random.Random(3)
    for _ in range(3):
        ptx = emit_ptx(mm64_cuda, sk.script(sample(sk, rng).values()), arch="sm_90")
        assert ".target sm_90" in ptx and ".entry" in ptx
        assert "fma.rn.f32" in ptx
        assert ".shared" in ptx and "bar.sync" in ptx
    assert ".entry" in emit_ptx(mm64_cuda, default_script(mm64_cuda), arch="sm_80")


def test_unsupported_graph_falls_back_to_skip() -> None:
    # a norm over n x m of an m x n input: its reduction loops do not merge into one column loop
    text = workloads.get("nrm-1x256x256").replace("(b, m, n) -> (b, m, n)>", "(b, m, n) -> (b, n, m)>")
    task = create_task(text, name="nrm", target="cuda")
    assert [s.name for s in generate_sketches(task)] == ["skip"]


# ----------------------------------------------------------------------------------------------
# On an NVIDIA GPU


@pytest.mark.gpu
def test_default_gpu_program_matches_numpy(mm_cuda: SearchTask) -> None:
    from ansor.targets import compile_task
    from ansor.measure.measurer import make_inputs

    kernel = compile_task(mm_cuda, None)
    a, b = make_inputs(mm_cuda)
    (out,) = kernel.run([a, b])
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-3)
    assert kernel.time([a, b], 3) > 0


@pytest.mark.gpu
def test_gpu_candidates_are_verified_and_timed(mm_cuda: SearchTask) -> None:
    from ansor.measure.measurer import LocalMeasurer, MeasureInput, RunOptions

    sk = generate_sketches(mm_cuda)[0]
    rng = random.Random(4)
    inputs = []
    for _ in range(6):
        s = sample(sk, rng)
        inputs.append(MeasureInput(mm_cuda, s, sk.script(s.values())))
    m = LocalMeasurer(RunOptions(repeat=2, min_repeat_ms=5.0, timeout_s=60.0), memory_mb=0)
    try:
        assert m.baseline(mm_cuda).error is None
        results = m.measure(inputs)
    finally:
        m.close()
    assert [r.error for r in results] == [None] * len(results), [r.error_msg for r in results]
    assert all(0 < r.latency < 1.0 for r in results)


@pytest.mark.gpu
def test_gpu_tuning_resumes_from_its_log(mm_cuda: SearchTask, tmp_path) -> None:
    from ansor import config
    from ansor.measure.measurer import RunOptions
    from ansor.tuning.records import load_records
    from ansor.tuning.tuner import tune

    config.WORKER_MEMORY_MB = 0
    log = tmp_path / "mm.cuda.jsonl"
    opts = RunOptions(repeat=1, min_repeat_ms=5.0, timeout_s=60.0)
    first = tune(mm_cuda, trials=4, log_path=log, batch_size=4, search="random", run_options=opts)
    assert first.trials == 4 and first.best is not None
    again = tune(mm_cuda, trials=6, log_path=log, batch_size=4, search="random", run_options=opts)
    assert again.trials == 2
    assert len(load_records(log)) == 6


def test_learned_search_runs_on_gpu_sketches(mm_cuda: SearchTask, make_fake, tmp_path) -> None:
    """Evolutionary search + cost model over GPU sketches (fake measurements, real features of the
    GPU-scheduled IR): every proposed schedule respects the device limits."""
    from ansor.search.features import featurize
    from ansor.tuning.tuner import tune

    sk = generate_sketches(mm_cuda)[0]

    def features(schedules):
        return featurize(mm_cuda, [sk.script(s.values(), lower_vectors=False) for s in schedules])

    fake = make_fake()
    res = tune(mm_cuda, trials=24, batch_size=12, search="learned", measurer=fake, features_fn=features,
               log_path=tmp_path / "l.jsonl", search_options={"population": 64, "generations": 2})
    assert res.trials == 24 and res.best is not None
    from ansor.tuning.records import load_records

    for r in load_records(tmp_path / "l.jsonl"):
        if r.schedule.sketch == sk.name:  # (`skip`, the default schedule, has no knobs)
            assert validate(sk, r.schedule.values()) is None


def test_gpu_lowering_options_reach_the_ptx(mm_cuda: SearchTask, monkeypatch) -> None:
    """The accumulators stay in registers and the copies are 128-bit by default; the optional
    block-order swizzle and noalias kernel pointers (off by default: measured neutral / slower
    on an H100) still give valid kernels."""
    from ansor.targets.cuda.lowering import emit_ptx

    sk = generate_sketches(mm_cuda)[0]
    values = {"op1.d0.t1": 64, "op1.d0.t2": 64, "op1.d0.t3": 4, "op1.d0.t4": 4,
              "op1.d1.t1": 64, "op1.d1.t2": 64, "op1.d1.t3": 4, "op1.d1.t4": 4,
              "op1.d2.t1": 16, "op1.d2.t2": 16, "op1.unroll": 1024}
    script = sk.script(values)
    base = emit_ptx(mm_cuda, script)
    assert "ld.global.v4.b32" in base and "ld.shared.v4.b32" in base and ".local" not in base
    loop = base[base.index("$L__BB0_1:"):base.index("bra")]
    assert "st.global" not in loop and loop.count("fma.rn.f32") == 4 * 4 * 16
    from ansor import config

    monkeypatch.setattr(config, "CUDA_SWIZZLE", 8)
    monkeypatch.setattr(config, "CUDA_NOALIAS", True)
    other = emit_ptx(mm_cuda, script)
    assert "ld.global.nc.v4.b32" in other and other.count("%ctaid") == 2
    assert "rem" in other or "and.b" in other  # the grouped block order's arithmetic


# ----------------------------------------------------------------------------------------------
# tensor.pad producers: fused into the reads as guarded loads (no GPU needed up to PTX)

_PADCONV = """func.func @padconv(%x: tensor<1x7x6x3xf32>, %w: tensor<3x3x3x4xf32>) -> tensor<1x4x3x4xf32> {
  %zero = arith.constant 0.0 : f32
  %pv = arith.constant 0.5 : f32
  %p = tensor.pad %x low[0, 1, 2, 0] high[0, 1, 0, 0] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %pv : f32
  } : tensor<1x7x6x3xf32> to tensor<1x9x8x3xf32>
  %e = tensor.empty() : tensor<1x4x3x4xf32>
  %i = linalg.fill ins(%zero : f32) outs(%e : tensor<1x4x3x4xf32>) -> tensor<1x4x3x4xf32>
  %o = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
      ins(%p, %w : tensor<1x9x8x3xf32>, tensor<3x3x3x4xf32>) outs(%i : tensor<1x4x3x4xf32>) -> tensor<1x4x3x4xf32>
  return %o : tensor<1x4x3x4xf32>
}
"""


def _padconv_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    p = np.full((1, 9, 8, 3), 0.5, np.float32)  # asymmetric padding, non-zero padding value
    p[:, 1:8, 2:8, :] = x
    out = np.zeros((1, 4, 3, 4))
    for oh in range(4):
        for ow in range(3):
            out[0, oh, ow] = np.einsum("hwc,hwcf->f", p[0, 2 * oh:2 * oh + 3, 2 * ow:2 * ow + 3], w)
    return out


def _transform(body: str) -> str:
    a = "!transform.any_op"
    return (f"module attributes {{transform.with_named_sequence}} {{\n"
            f"  transform.named_sequence @__transform_main(%root: {a} {{transform.consumed}}) {{\n"
            f"    %conv = transform.structured.match attributes{{ansor.op = 1 : i64}} in %root : ({a}) -> {a}\n"
            f"{body}    transform.yield\n  }}\n}}\n").replace("A!", a)


_BUFFERIZE = ("    %b = transform.bufferization.one_shot_bufferize layout{IdentityLayoutMap} %root "
              "{bufferize_function_boundaries = true} : (A!) -> A!\n")
# vector reads through rank-reducing views (decomposed to a 1-D convolution, vectorized): the
# padded W dim lies inside the vector, split into guarded pieces along C
_VECTOR_READS = _transform(
    "    %t, %l:6 = transform.structured.tile_using_for %conv tile_sizes [1, 1, 3, 4, 1, 1, 0] "
    ": (A!) -> (A!, A!, A!, A!, A!, A!, A!)\n"
    "    %d = transform.structured.decompose %t : (A!) -> A!\n"
    "    transform.structured.vectorize %d : A!\n" + _BUFFERIZE)
# scalar loads through tiled views
_SCALAR_LOADS = _transform(
    "    %t, %l:3 = transform.structured.tile_using_for %conv tile_sizes [1, 2, 0, 2] : (A!) -> (A!, A!, A!, A!)\n"
    + _BUFFERIZE
    + '    %c = transform.structured.match ops{["linalg.conv_2d_nhwc_hwcf"]} in %b : (A!) -> A!\n'
    "    %lp = transform.structured.convert_to_loops %c : (A!) -> A!\n")


@pytest.mark.parametrize("script", [_VECTOR_READS, _SCALAR_LOADS], ids=["vector", "scalar"])
def test_guarded_pad_reads_match_numpy_on_the_cpu(script: str) -> None:
    """`ansor-gpu-guard-padded-reads` is target-independent: run its result on the CPU."""
    from ansor.core import native as _native
    from ansor.core.mlir import apply_script, parse_payload, run_passes
    from ansor.targets.cpu.lowering import _lower_and_jit
    from mlir import ir

    task = create_task(_PADCONV, name="padconv")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 7, 6, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)
    _native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = parse_payload(task)
        apply_script(module, script)
        assert "memref<1x9x8x3xf32>" in str(module)
        run_passes(module, "ansor-gpu-guard-padded-reads", "lower")
        text = str(module)
        assert "memref<1x9x8x3xf32>" not in text and "memref.copy %arg0" not in text
        # guarded by clamped indices and a select, never a branch (an scf.if per read made
        # convert-scf-to-cf superlinear on unrolled register tiles)
        assert "arith.select" in text and "arith.minsi" in text and "scf.if" not in text
        (out,) = _lower_and_jit(module, task, 2).run([x, w])
    np.testing.assert_allclose(out, _padconv_reference(x, w), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["convlayer-1x56x56x64x128x3x2x1", "c2d-1x224x224x3x64x7x2x3",
                                  "c1d-1x256x64x128x3x2x1"])
def test_padded_convolutions_get_gpu_sketches(name: str) -> None:
    task = create_task(workloads.get(name), name=name, target="cuda")
    sketches = generate_sketches(task)
    assert [s.name for s in sketches] == ["s0", "skip"]
    assert isinstance(sketches[0], GpuSketch)


def test_padded_conv_lowers_to_ptx_without_a_gpu() -> None:
    from ansor.targets.cuda.lowering import emit_ptx

    task = create_task(workloads.get("convlayer-1x14x14x8x16x3x2x1"), name="cl", target="cuda")
    sk = generate_sketches(task)[0]
    assert sk.rule == "gpu_multi_level_tiling_with_fusion(op1<-op2)"
    rng = random.Random(5)
    for script in [default_script(task)] + [sk.script(sample(sk, rng).values()) for _ in range(3)]:
        ptx = emit_ptx(task, script, arch="sm_90")
        assert ".entry conv2d_bn_relu_kernel(" in ptx and "fma.rn.f32" in ptx
        assert "setp" in ptx and "ld.global" in ptx


@pytest.mark.gpu
def test_padded_conv_runs_on_the_gpu() -> None:
    """The default program and sampled schedules of a padded 3x3 ConvLayer, against numpy."""
    from ansor.targets.cuda.lowering import compile_task_cuda

    task = create_task(workloads.get("convlayer-1x14x14x8x16x3x2x1"), name="cl", target="cuda")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 14, 14, 8)).astype(np.float32)
    w = rng.standard_normal((3, 3, 8, 16)).astype(np.float32)
    scale, shift = rng.standard_normal(16).astype(np.float32), (0.5 * rng.standard_normal(16)).astype(np.float32)
    p = np.zeros((1, 16, 16, 8), np.float32)
    p[:, 1:15, 1:15] = x
    conv = np.zeros((1, 7, 7, 16))
    for oh in range(7):
        for ow in range(7):
            conv[0, oh, ow] = np.einsum("hwc,hwcf->f", p[0, 2 * oh:2 * oh + 3, 2 * ow:2 * ow + 3], w)
    want = np.maximum(conv * scale + shift, 0.0)
    sk = generate_sketches(task)[0]
    scripts = [None] + [sk.script(sample(sk, random.Random(s)).values()) for s in range(3)]
    for script in scripts:
        (out,) = compile_task_cuda(task, script).run([x, w, scale, shift])
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_unit_axis_broadcast_consumer_gets_a_fused_gpu_sketch() -> None:
    """ResNet's convolution + batch norm (parameters `tensor<C x 1 x 1>` read at `(d3, 0, 0)`) +
    residual + ReLU: one anchor with a fused consumer (it used to count as two ops with data reuse,
    which left every such task of an imported network without a GPU schedule)."""
    from ansor.targets.cuda.lowering import emit_ptx
    from test_sketches import _resnet_conv_task_ir

    task = create_task(_resnet_conv_task_ir(transpose_out=False), name="rn", target="cuda")
    sk = generate_sketches(task)[0]
    assert sk.rule == "gpu_multi_level_tiling_with_fusion(op1<-op2)"
    rng = random.Random(6)
    for script in [default_script(task)] + [sk.script(sample(sk, rng).values()) for _ in range(2)]:
        assert "fma.rn.f32" in emit_ptx(task, script, arch="sm_90")


@pytest.mark.gpu
def test_unit_axis_broadcast_consumer_runs_on_the_gpu() -> None:
    """Against numpy (the GPU host's MLIR runtime has no CPU ExecutionEngine libraries)."""
    from ansor.targets.cuda.lowering import compile_task_cuda
    from test_sketches import _resnet_conv_task_ir

    task = create_task(_resnet_conv_task_ir(transpose_out=False), name="rn", target="cuda")
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((1, 7, 7, 32)).astype(np.float32), rng.standard_normal((3, 3, 32, 32)).astype(np.float32)
    mean, inv, gamma, beta = (rng.standard_normal((32, 1, 1)).astype(np.float32) for _ in range(4))
    res = rng.standard_normal((1, 7, 7, 32)).astype(np.float32)
    p = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    conv = sum(np.einsum("nhwc,cf->nhwf", p[:, i:i + 7, j:j + 7], w[i, j]) for i in range(3) for j in range(3))
    want = np.maximum((conv - mean[:, 0, 0]) * inv[:, 0, 0] * gamma[:, 0, 0] + beta[:, 0, 0] + res, 0.0)
    sk = generate_sketches(task)[0]
    for script in [None] + [sk.script(sample(sk, random.Random(s)).values()) for s in range(3)]:
        (out,) = compile_task_cuda(task, script).run([x, w, mean, inv, gamma, beta, res])
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


# y[b, j, i] = x[b, i, j] * s[j] + 1: an element-wise op with a transposed output and a broadcast
_SCALE_TRANSPOSE = """#in = affine_map<(d0, d1, d2) -> (d0, d2, d1)>
#bc = affine_map<(d0, d1, d2) -> (d1)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @scale_t(%x: tensor<4x40x24xf32>, %s: tensor<24xf32>) -> tensor<4x24x40xf32> {
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<4x24x40xf32>
  %y = linalg.generic {indexing_maps = [#in, #bc, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %s : tensor<4x40x24xf32>, tensor<24xf32>) outs(%e : tensor<4x24x40xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %m, %one : f32
    linalg.yield %r : f32
  } -> tensor<4x24x40xf32>
  return %y : tensor<4x24x40xf32>
}"""


def test_elementwise_task_gets_thread_binding() -> None:
    """No op with data reuse and no reduction: the space loops are bound to blocks and threads
    (the untuned program too, which used to fail: "0 ops with data reuse")."""
    from ansor.targets.cuda.lowering import emit_ptx

    task = create_task(_SCALE_TRANSPOSE, name="scale_t", target="cuda")
    sketches = generate_sketches(task)
    assert [s.name for s in sketches] == ["s0", "skip"]
    sk = sketches[0]
    assert sk.rule == "gpu_thread_binding(op0)"
    assert sk.gpu_stage.mapped == (2, 1, 0) and sk.gpu_stage.promoted == ()
    rng = random.Random(7)
    for _ in range(20):
        assert validate(sk, sample(sk, rng).values()) is None
    for script in [default_script(task)] + [sk.script(sample(sk, rng).values()) for _ in range(2)]:
        ptx = emit_ptx(task, script, arch="sm_90")
        assert ".entry" in ptx and "%ctaid" in ptx and "%tid" in ptx and ".shared" not in ptx


@pytest.mark.gpu
def test_elementwise_task_runs_on_the_gpu() -> None:
    from ansor.targets.cuda.lowering import compile_task_cuda

    task = create_task(_SCALE_TRANSPOSE, name="scale_t", target="cuda")
    rng = np.random.default_rng(3)
    x, s = rng.standard_normal((4, 40, 24)).astype(np.float32), rng.standard_normal(24).astype(np.float32)
    want = np.transpose(x, (0, 2, 1)) * s[None, :, None] + 1.0
    sk = generate_sketches(task)[0]
    for script in [None] + [sk.script(sample(sk, random.Random(i)).values()) for i in range(4)]:
        (out,) = compile_task_cuda(task, script).run([x, s])
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


# ResNet's max pool: -inf padding, 3x3 window, stride 2 (NHWC)
_MAXPOOL = """func.func @maxpool(%x: tensor<1x16x16x24xf32>) -> tensor<1x8x8x24xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %p = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %ninf : f32
  } : tensor<1x16x16x24xf32> to tensor<1x18x18x24xf32>
  %win = tensor.empty() : tensor<3x3xf32>
  %e = tensor.empty() : tensor<1x8x8x24xf32>
  %f = linalg.fill ins(%ninf : f32) outs(%e : tensor<1x8x8x24xf32>) -> tensor<1x8x8x24xf32>
  %y = linalg.pooling_nhwc_max {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
      ins(%p, %win : tensor<1x18x18x24xf32>, tensor<3x3xf32>) outs(%f : tensor<1x8x8x24xf32>) -> tensor<1x8x8x24xf32>
  return %y : tensor<1x8x8x24xf32>
}"""


# A channels-first convolution (decomposed along its output rows, loop d2)
_CONV_NCHW = """func.func @cnchw(%x: tensor<1x8x12x12xf32>, %w: tensor<16x8x3x3xf32>) -> tensor<1x16x10x10xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x16x10x10xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x16x10x10xf32>) -> tensor<1x16x10x10xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x8x12x12xf32>, tensor<16x8x3x3xf32>) outs(%f : tensor<1x16x10x10xf32>) -> tensor<1x16x10x10xf32>
  return %y : tensor<1x16x10x10xf32>
}"""


# A 3-D convolution (decomposed by our transform.ansor.decompose_conv3d: output depth and rows, d1 d2)
_CONV3D = """func.func @c3d(%x: tensor<1x4x6x6x4xf32>, %w: tensor<3x3x3x4x8xf32>) -> tensor<1x2x4x4x8xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x2x4x4x8xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x2x4x4x8xf32>) -> tensor<1x2x4x4x8xf32>
  %y = linalg.conv_3d_ndhwc_dhwcf {dilations = dense<1> : tensor<3xi64>, strides = dense<1> : tensor<3xi64>}
      ins(%x, %w : tensor<1x4x6x6x4xf32>, tensor<3x3x3x4x8xf32>) outs(%f : tensor<1x2x4x4x8xf32>) -> tensor<1x2x4x4x8xf32>
  return %y : tensor<1x2x4x4x8xf32>
}"""


@pytest.mark.parametrize("ir, rows, op", [(_MAXPOOL, (1,), "max.NaN.f32"), (_CONV_NCHW, (2,), "fma.rn.f32"),
                                          (_CONV3D, (1, 2), "fma.rn.f32")],
                         ids=["maxpool-nhwc", "conv-nchw", "conv3d"])
def test_windowed_ops_are_decomposed_and_vectorized_on_the_gpu(ir: str, rows: tuple[int, ...], op: str) -> None:
    """MLIR 22 vectorizes pooling, channels-first and 3-D convolutions only in their 1-D form (like
    the NHWC convolutions): the GPU sketch keeps the output-row register tiles at 1 and decomposes
    the tile. Before, every such schedule, the untuned one included, failed with "Attempted to
    vectorize, but failed"."""
    from ansor.targets.cuda.lowering import emit_ptx

    task = create_task(ir, name="windowed", target="cuda")
    sk = generate_sketches(task)[0]
    assert sk.rule == "gpu_multi_level_tiling(op1)" and sk.gpu_stage.decompose_rows == rows
    rng = random.Random(8)
    for script in [default_script(task)] + [sk.script(sample(sk, rng).values()) for _ in range(3)]:
        assert sk.gpu_stage.decompose_op in script
        ptx = emit_ptx(task, script, arch="sm_90")
        assert ".entry" in ptx and op in ptx


def _untuned_and_sampled_match(ir: str, name: str, inputs: list[np.ndarray], want: np.ndarray, tol: float) -> None:
    """The untuned program and 4 sampled schedules of `ir` on the GPU, against a numpy result
    (`tol` 0: exactly equal)."""
    from ansor.targets.cuda.lowering import compile_task_cuda

    task = create_task(ir, name=name, target="cuda")
    sk = generate_sketches(task)[0]
    for script in [None] + [sk.script(sample(sk, random.Random(i)).values()) for i in range(4)]:
        (out,) = compile_task_cuda(task, script).run(inputs)
        if tol:
            np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
        else:
            np.testing.assert_array_equal(out, want)


@pytest.mark.gpu
def test_pooling_runs_on_the_gpu() -> None:
    x = np.random.default_rng(4).standard_normal((1, 16, 16, 24)).astype(np.float32)
    p = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-np.inf)
    want = np.max([p[:, i:i + 16:2, j:j + 16:2] for i in range(3) for j in range(3)], axis=0)
    _untuned_and_sampled_match(_MAXPOOL, "maxpool", [x], want, 0.0)


@pytest.mark.gpu
def test_channels_first_conv_runs_on_the_gpu() -> None:
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((1, 8, 12, 12)).astype(np.float32), rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    want = sum(np.einsum("nchw,fc->nfhw", x[:, :, i:i + 10, j:j + 10], w[:, :, i, j]) for i in range(3) for j in range(3))
    _untuned_and_sampled_match(_CONV_NCHW, "cnchw", [x, w], want, 1e-4)


@pytest.mark.gpu
def test_conv3d_runs_on_the_gpu() -> None:
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((1, 4, 6, 6, 4)).astype(np.float32), rng.standard_normal((3, 3, 3, 4, 8)).astype(np.float32)
    want = sum(np.einsum("ndhwc,cf->ndhwf", x[:, a:a + 2, b:b + 4, c:c + 4], w[a, b, c])
               for a in range(3) for b in range(3) for c in range(3))
    _untuned_and_sampled_match(_CONV3D, "c3d", [x, w], want, 1e-4)


def test_unit_vector_transfers_leave_no_loops_before_scf_to_cf() -> None:
    """`convert-vector-to-scf{full-unroll=true}` lowers each transfer of a vector<1x1x1xf32> (a
    register-tile element of a 3-D convolution) into single-iteration loops; 8320 of them made
    upstream `convert-scf-to-cf` take 87 s and the kernel 146K lines of LLVM dialect (a c3d
    candidate: 533 s to PTX). The pipeline folds them (`canonicalize`) before `convert-scf-to-cf`."""
    from mlir import ir

    from ansor.core.mlir import run_passes
    from ansor.targets.cuda.lowering import _nvvm_pipeline

    # element i of the tile: a strided 1x1x1 view (innermost stride 3584, as in NDHWC), so the
    # transfer cannot become a vector.load
    mt = "memref<4x1x1xf32, strided<[200704, 3584, 3584]>>"
    reads = "\n".join(
        f"  %r{i} = vector.transfer_read %m[%c{i % 4}, %c0, %c0], %z {{in_bounds = [true, true, true]}}"
        f" : {mt}, vector<1x1x1xf32>\n"
        f"  %s{i} = vector.extract %r{i}[0, 0, 0] : f32 from vector<1x1x1xf32>\n"
        f"  memref.store %s{i}, %o[%c{i}] : memref<64xf32>" for i in range(64))
    text = (f"func.func @f(%m: {mt}, %o: memref<64xf32>) {{\n"
            f"  %z = arith.constant 0.0 : f32\n"
            + "".join(f"  %c{i} = arith.constant {i} : index\n" for i in range(64))
            + reads + "\n  return\n}\n")
    prefix = _nvvm_pipeline("sm_90", "isa").split(",convert-scf-to-cf")[0]
    with ir.Context(), ir.Location.unknown():
        m = ir.Module.parse(text)
        run_passes(m, prefix, "lower")
        out = str(m)
    assert "scf.for" not in out and out.count("memref.load") == 64


def test_gpu_validate_rejects_more_than_64_threads_along_z() -> None:
    """A block has at most 64 threads along z: 97 output rows mapped to z threads (a prime
    extent) passed validation and failed in the transform ("block_dims is too large")."""
    from ansor.targets.cuda.rules import threads_per_dim

    task = create_task(workloads.get("c2d-1x97x97x32x48x3x1x1"), name="c2d97", target="cuda")
    sk = next(s for s in generate_sketches(task) if s.name == "s0")
    bad = {"op1.d1.t1": 97, "op1.d1.t2": 97, "op1.d1.t3": 1, "op1.d1.t4": 1, "op1.d2.t1": 1, "op1.d2.t2": 1, "op1.d2.t3": 1, "op1.d2.t4": 1, "op1.d3.t1": 24, "op1.d3.t2": 4, "op1.d3.t3": 2, "op1.d3.t4": 1, "op1.d4.t1": 3, "op1.d4.t2": 1, "op1.d5.t1": 3, "op1.d5.t2": 1, "op1.d6.t1": 8, "op1.d6.t2": 2, "op1.unroll": 64}
    assert threads_per_dim(sk.gpu_stage, bad) == [2, 1, 97]
    assert sk.validate(bad) == "97 threads along z > 64"
    rng = random.Random(1)
    assert all(threads_per_dim(sk.gpu_stage, sk.sample(rng).values())[2] <= 64 for _ in range(200))

"""Fixes found by the CUDA build sweep (`tools/cuda_build_sweep.py`): workloads no issue listed,
each built to PTX without a GPU (and, where cheap, run as CPU loops against numpy)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from ansor.core.task import create_task
from ansor.frontend import workloads
from ansor.targets import generate_sketches
from ansor.targets.cuda.lowering import emit_ptx
from ansor.targets.cuda.rules import default_script
from test_gpu_ragged import _as_cpu_loops

def _task(name: str, src: str | None = None):
    return create_task(src or workloads.get(name), name=name.replace("-", "_"), target="cuda")


def _run_as_cpu_loops(task, script: str, inputs: list[np.ndarray], outputs: list[np.ndarray]) -> list[np.ndarray]:
    """`script`'s program as CPU loops (`test_gpu_ragged._as_cpu_loops`), JIT-compiled and run
    into `outputs`."""
    from ansor.core import native as _native
    from ansor.core.mlir import apply_script, parse_payload, run_passes
    from ansor.targets.cpu.lowering import _lower_and_jit
    from mlir import ir

    _native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = parse_payload(task)
        run_passes(module, "ansor-gpu-own-fill-destinations", "lower")
        apply_script(module, _as_cpu_loops(script))
        run_passes(module, "canonicalize,cse,buffer-results-to-out-params{hoist-static-allocs "
                           "modify-public-functions},canonicalize,cse", "lower")
        run_passes(module, "convert-vector-to-scf{full-unroll=true target-rank=0}", "lower")
        return _lower_and_jit(module, task, 1).run(inputs, outputs)


@pytest.mark.parametrize("name", ["matmul-1x1x1", "gmm-1x1x1x1", "c2d-1x1x1x1x1x1x1x0"])
def test_unit_extent_ops_build(name: str) -> None:
    """Every space loop of extent 1 (a 1x1 result): nothing was mapped to threads, the launch had
    no forall and MLIR aborted (`SmallVector::front` on an empty loop list). Now the innermost
    unit loop is mapped: one block of one thread."""
    task = _task(name)
    sk = generate_sketches(task)[0]
    scripts = [default_script(task)] + [sk.script(sk.sample(random.Random(s)).values()) for s in range(2)]
    for script in scripts:
        assert ".entry" in emit_ptx(task, script)


def test_unit_extent_matmul_runs_as_cpu_loops() -> None:
    task = _task("matmul-1x1x1")
    a, b = np.array([[1.5]], np.float32), np.array([[-2.0]], np.float32)
    (out,) = _run_as_cpu_loops(task, default_script(task), [a, b], [np.full((1, 1), np.nan, np.float32)])
    np.testing.assert_allclose(out, a @ b)


@pytest.mark.parametrize("name", ["t2d-1x5x5x7x3x4x2x1", "t2d-1x4x4x512x256x4x2x1"])
def test_transposed_convolution_builds(name: str) -> None:
    """The transposed convolution's phase generic reads its input through `a + j + p` windows,
    which MLIR 22's vectorizer refuses: every program of every t2d workload (Ansor's suite
    included) failed with "Attempted to vectorize, but failed". Its register tile now stays
    scalar where the vectorizer declines, like a channels-first depthwise convolution's."""
    task = _task(name)
    sk = generate_sketches(task)[0]
    assert sk.gpu_stage.vectorize_optional
    for script in [default_script(task), sk.script(sk.sample(random.Random(0)).values())]:
        assert ".entry" in emit_ptx(task, script)


def test_transposed_convolution_scripts_compute_it() -> None:
    """The t2d scripts that build now (scalar register tile) also compute the transposed
    convolution: the untuned one and three samples, run as CPU loops (the script up to the
    mapping to blocks and threads) into poisoned outputs, against the reference."""
    from ansor.measure.measurer import reference_outputs
    from ansor.measure.verify import check_task_outputs, poisoned

    task = _task("t2d-1x5x5x7x3x4x2x1")
    sk = generate_sketches(task)[0]
    inputs, refs, _ = reference_outputs(task)
    for script in [default_script(task)] + [sk.script(sk.sample(random.Random(s)).values()) for s in range(3)]:
        outs = _run_as_cpu_loops(task, script, inputs, poisoned(task.outputs))
        assert check_task_outputs(task, outs, refs) is None


def test_bool_private_buffers_are_widened() -> None:
    """A ragged reduction over the outer loop (a column sum over 97 rows, 128 threads: one
    element each) leaves its column mask in a thread-private i1 buffer, and MLIR 22's
    memref-to-LLVM lowering asserts on a `memref.load` of i1. `ansor-gpu-private-allocs-to-stack`
    now stores such buffers as i8."""
    from ansor.core import native as _native
    from ansor.core.mlir import run_passes
    from mlir import ir

    _native.register_everything()
    src = """
func.func @f(%v: vector<1xi1>, %o: memref<1xi1>) {
  %c1 = arith.constant 1 : index
  %c0 = arith.constant 0 : index
  gpu.launch blocks(%a, %b, %c) in (%x = %c1, %y = %c1, %z = %c1) threads(%d, %e, %g) in (%u = %c1, %w = %c1, %t = %c1) {
    %m = memref.alloc() : memref<1xi1>
    vector.transfer_write %v, %m[%c0] {in_bounds = [true]} : vector<1xi1>, memref<1xi1>
    %l = memref.load %m[%c0] : memref<1xi1>
    memref.store %l, %o[%c0] : memref<1xi1>
    memref.dealloc %m : memref<1xi1>
    gpu.terminator
  }
  return
}
"""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(src)
        run_passes(module, "ansor-gpu-private-allocs-to-stack", "lower")
        text = str(module)
    assert "memref.alloca() : memref<1xi8>" in text and "memref<1xi1>\n" not in text.split("gpu.launch")[1].split(
        "memref.store")[0]
    assert "arith.extui" in text and "arith.trunci" in text
    task = _task("colsum-97x197")
    assert ".entry" in emit_ptx(task, default_script(task))


def test_tensor_core_sampling_on_a_tiny_gemm() -> None:
    """matmul 1x8x8 f16 leaves one bm, bn and stage count valid: rejection sampling over every
    option found a valid annotation in ~1 of 5400 draws and failed now and then (SamplingError).
    Sampling now draws from the values each knob can take."""
    task = _task("matmul-1x8x8-f16")
    sk = generate_sketches(task)[0]
    assert sk.name == "tc0"
    for seed in range(100):
        v = sk.sample(random.Random(seed)).values()
        assert sk.validate(v) is None
    assert ".entry" in emit_ptx(task, sk.script(sk.sample(random.Random(1)).values()))


_TRANSPOSE = """
func.func @tr(%x: tensor<97x197xf32>) -> tensor<197x97xf32> {
  %e = tensor.empty() : tensor<197x97xf32>
  %r = linalg.transpose ins(%x : tensor<97x197xf32>) outs(%e : tensor<197x97xf32>) permutation = [1, 0]
  return %r : tensor<197x97xf32>
}
"""

_EW_F16_GELU = """
func.func @ewh(%x: tensor<7x1023xf16>, %b: tensor<1023xf16>) -> tensor<7x1023xf16> {
  %e = tensor.empty() : tensor<7x1023xf16>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<7x1023xf16>, tensor<1023xf16>) outs(%e : tensor<7x1023xf16>) {
  ^bb0(%a: f16, %c: f16, %o: f16):
    %s = arith.addf %a, %c : f16
    %w = arith.extf %s : f16 to f32
    %k = arith.constant 0.70710678 : f32
    %h = arith.constant 0.5 : f32
    %one = arith.constant 1.0 : f32
    %t = arith.mulf %w, %k : f32
    %er = math.erf %t : f32
    %p = arith.addf %er, %one : f32
    %q = arith.mulf %w, %p : f32
    %y = arith.mulf %q, %h : f32
    %yh = arith.truncf %y : f32 to f16
    linalg.yield %yh : f16
  } -> tensor<7x1023xf16>
  return %r : tensor<7x1023xf16>
}
"""

#: The sweep's transpose-97x197 s0 seed 2: a ragged 16-row tile of 197, one element per thread.
_TRANSPOSE_RAGGED = {"op0.d0.t1": 16, "op0.d0.t2": 8, "op0.d0.t3": 8, "op0.d0.t4": 1, "op0.d1.t1": 97,
                     "op0.d1.t2": 97, "op0.d1.t3": 1, "op0.d1.t4": 1, "op0.unroll": 1024}
#: The sweep's ew-f16-gelu-7x1023 s0 seed 2: 256 of 1023 columns a block (ragged), 32 a thread.
_EW_F16_RAGGED = {"op0.d0.t1": 7, "op0.d0.t2": 7, "op0.d0.t3": 1, "op0.d0.t4": 1, "op0.d1.t1": 256,
                  "op0.d1.t2": 256, "op0.d1.t3": 32, "op0.d1.t4": 1, "op0.unroll": 1024}


def _run_guarded_as_cpu_loops(task, script: str, inputs: list[np.ndarray], outputs: list[np.ndarray], *,
                              no_copies: bool = True, to_scf: bool = True) -> list[np.ndarray]:
    """Like `_run_as_cpu_loops`, with the padded buffers of a ragged script replaced by guarded
    reads and masked writes first (`ansor-gpu-guard-padded-reads`), as the GPU lowering does."""
    from ansor.core import native as _native
    from ansor.core.mlir import apply_script, parse_payload, run_passes
    from ansor.targets.cpu.lowering import _lower_and_jit
    from mlir import ir

    _native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = parse_payload(task)
        run_passes(module, "ansor-gpu-own-fill-destinations", "lower")
        apply_script(module, _as_cpu_loops(script))
        run_passes(module, "canonicalize,cse,buffer-results-to-out-params{hoist-static-allocs "
                           "modify-public-functions},canonicalize,cse", "lower")
        run_passes(module, "ansor-gpu-guard-padded-reads", "lower")
        assert not no_copies or "memref.copy" not in str(module)  # no padded buffer left
        if to_scf:  # (row scripts as test_gpu_ragged_rows runs them: the CPU lowering takes their vectors)
            run_passes(module, "convert-vector-to-scf{full-unroll=true target-rank=0}", "lower")
        return _lower_and_jit(module, task, 1).run(inputs, outputs)


def test_ragged_transpose_of_single_elements() -> None:
    """A ragged transpose whose register tile is one element: the tile stays a `linalg.copy`,
    which the guard of the padded input lowers to loops, and those loops load the copy's output
    (an unused value). The result side counted that load as a read of the result buffer's fill
    outside the kernel and refused ("padded result buffer filled outside the kernel that reads
    it"); unused loads are dropped now, and linalg ops writing the padded result inside the
    kernel are lowered to loops by the result side too (test_lit/gpu/guard-padded-results.mlir)."""
    from ansor.measure.measurer import reference_outputs
    from ansor.measure.verify import check_task_outputs, poisoned

    task = _task("transpose-97x197", _TRANSPOSE)
    sk = generate_sketches(task)[0]
    assert sk.gpu_stage.ragged_dims(_TRANSPOSE_RAGGED)
    script = sk.script(_TRANSPOSE_RAGGED)
    assert ".entry" in emit_ptx(task, script)
    inputs, refs, _ = reference_outputs(task)
    outs = _run_guarded_as_cpu_loops(task, script, inputs, poisoned(task.outputs))
    assert check_task_outputs(task, outs, refs) is None
    np.testing.assert_array_equal(outs[0], inputs[0].T)


def test_ragged_thread_binding_pads_with_its_operand_types() -> None:
    """The thread-binding stage (element-wise ops) carried no operand types, so a ragged tile
    padded an f16 op with `0.0 : f64` and `pad_tiling_interface` refused the script ("expects a
    padding value of type 'f16'"); it pads each operand with a zero of its own type now. The
    fixed program builds and, as CPU loops, computes the op."""
    from ansor.measure.measurer import reference_outputs
    from ansor.measure.verify import check_task_outputs, poisoned

    task = _task("ew-f16-gelu-7x1023", _EW_F16_GELU)
    sk = generate_sketches(task)[0]
    assert sk.gpu_stage.operand_types == ("f16", "f16", "f16")
    assert sk.gpu_stage.ragged_dims(_EW_F16_RAGGED)
    script = sk.script(_EW_F16_RAGGED)
    assert "padding_values = [0.0 : f16, 0.0 : f16, 0.0 : f16]" in script
    assert ".entry" in emit_ptx(task, script)
    inputs, refs, _ = reference_outputs(task)
    outs = _run_guarded_as_cpu_loops(task, script, inputs, poisoned(task.outputs))
    assert check_task_outputs(task, outs, refs) is None


def _scalar_reduction(shape: tuple[int, ...], combine: str = "arith.addf", init: str = "0.0",
                      elem: str = "f32") -> str:
    """A reduction of a whole `shape` tensor of `elem` to one f32 (`combine` of the f32 value)."""
    dims = ", ".join(f"d{i}" for i in range(len(shape)))
    t = "x".join(map(str, shape))
    ext = "    %w = arith.extf %a : f16 to f32\n" if elem == "f16" else ""
    a = "%w" if elem == "f16" else "%a"
    return f"""
func.func @red(%x: tensor<{t}x{elem}>) -> tensor<f32> {{
  %z = arith.constant {init} : f32
  %e = tensor.empty() : tensor<f32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.generic {{indexing_maps = [affine_map<({dims}) -> ({dims})>, affine_map<({dims}) -> ()>],
                       iterator_types = [{", ".join(['"reduction"'] * len(shape))}]}}
      ins(%x : tensor<{t}x{elem}>) outs(%f : tensor<f32>) {{
  ^bb0(%a: {elem}, %o: f32):
{ext}    %s = {combine} {a}, %o : f32
    linalg.yield %s : f32
  }} -> tensor<f32>
  return %r : tensor<f32>
}}
"""


@pytest.mark.parametrize("name,src", [
    ("max-all-1000", _scalar_reduction((1000,), "arith.maximumf", "0xFF800000")),
    ("sum-all-97x197", _scalar_reduction((97, 197))),
    ("sum-all-4096-f16", _scalar_reduction((4096,), elem="f16")),
    ("min-all-3", _scalar_reduction((3,), "arith.minimumf", "0x7F800000")),
])
def test_reductions_to_a_scalar(name: str, src: str) -> None:
    """A reduction of a whole tensor to one value had no GPU rule ("no row loop to map to
    blocks"). `ansor-gpu-collapse-reduction-loops` now gives it a unit row loop (its loops merged
    into one column loop, its fill and result one row long), so the cross-thread reduction rule
    schedules it as a single row: one block, its threads splitting the columns (ragged `T` where
    no warp multiple divides them). The untuned program and three samples build to PTX and, as
    CPU loops into poisoned outputs, compute the reduction."""
    from ansor.measure.measurer import reference_outputs
    from ansor.measure.verify import check_task_outputs, poisoned

    task = _task(name, src)
    sketches = generate_sketches(task)
    assert sketches[0].name == "r0"  # the cross-thread reduction sketch
    sk = sketches[0]
    scripts = [default_script(task)] + [sk.script(sk.sample(random.Random(s)).values()) for s in range(3)]
    assert ".entry" in emit_ptx(task, scripts[0]) and ".entry" in emit_ptx(task, scripts[-1])
    inputs, refs, _ = reference_outputs(task)
    for script in scripts:
        outs = _run_guarded_as_cpu_loops(task, script, inputs, poisoned(task.outputs), no_copies=False, to_scf=False)
        assert check_task_outputs(task, outs, refs) is None, script


@pytest.mark.parametrize("name", ["mlp-3x97x2", "matmul_rowsum-33x65x17"])
def test_several_anchors_run_as_one_kernel_per_task(name: str) -> None:
    """A function with two ops with data reuse (two matmuls; a matmul and a row sum of its
    result) tuned as a model: `extract_tasks` splits it into one task per anchor (the model path
    of `ansor tune FILE` and `ansor.compile`), and each task's untuned GPU program builds and, as
    CPU loops, computes its part. (As one task: `test_gpu_multi_kernel.py`.)"""
    from ansor.frontend.partition import extract_tasks
    from ansor.measure.measurer import reference_outputs
    from ansor.measure.verify import check_task_outputs, poisoned

    net = extract_tasks(workloads.get(name), target="cuda")
    assert len(net.calls) == 2 and len(net.tasks) == 2
    for task in net.tasks:
        script = default_script(task)
        assert ".entry" in emit_ptx(task, script)
        inputs, refs, _ = reference_outputs(task)
        outs = _run_guarded_as_cpu_loops(task, script, inputs, poisoned(task.outputs), no_copies=False, to_scf=False)
        assert check_task_outputs(task, outs, refs) is None


@pytest.mark.gpu
@pytest.mark.parametrize("name,src", [
    ("max-all-1000", _scalar_reduction((1000,), "arith.maximumf", "0xFF800000")),
    ("sum-all-97x197", _scalar_reduction((97, 197))),
])
def test_reductions_to_a_scalar_on_the_gpu(name: str, src: str) -> None:
    """The one-block scalar reductions, the untuned program and three samples, against the
    reference into poisoned outputs."""
    from ansor.measure import verify
    from ansor.measure.measurer import reference_outputs
    from ansor.targets.cuda.lowering import compile_task_cuda

    task = _task(name, src)
    sk = generate_sketches(task)[0]
    inputs, refs, _ = reference_outputs(task)
    for script in [default_script(task)] + [sk.script(sk.sample(random.Random(s)).values()) for s in range(3)]:
        kernel = compile_task_cuda(task, script)
        for which in (0, 1):
            outs = kernel.run(inputs, verify.poisoned(task.outputs, which))
            assert verify.check_task_outputs(task, outs, refs) is None

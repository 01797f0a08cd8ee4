"""Tasks of several GPU kernels (`targets/cuda/multi_kernel.py`): two matmuls (the built-in MLP),
a matmul and a row sum of its result, a matmul summed to one value, attention (scores + softmax,
then times V), a convolution + ReLU + pooling sum, two matmuls of one input. Without a GPU: the sketch's
knobs, the PTX (one kernel per fusion group), the scripts as CPU loops against the reference;
on an NVIDIA GPU (`-m gpu`): the programs against the reference, and their timing."""

from __future__ import annotations

import random

import numpy as np
import pytest
from ansor.core.task import SearchTask, create_task
from ansor.frontend import workloads
from ansor.targets import generate_sketches
from ansor.targets.cuda.lowering import emit_ptx
from ansor.targets.cuda.multi_kernel import MultiKernelSketch
from ansor.targets.cuda.rules import default_script
from test_gpu_sweep_fixes import _run_guarded_as_cpu_loops

#: The tasks (built-in workloads, `ansor.frontend.workloads`).
NAMES = [
    "mlp-3x97x2",  # two matmuls (+ bias, ReLU, residual), weights constant
    "matmul_rowsum-33x65x17",  # an anchor + a row reduction of its result
    "matmul_sumall-33x65x17",  # an anchor + a reduction to a scalar
    "attention-16x32x8",  # scores + softmax (one row kernel: row chains kept), then P V
    "conv_relu_pool-1x10x10x8x16x3x1x0",  # a convolution + ReLU, then a reduction over h, w
    "two_matmuls-8x24x16",  # two matmuls, the second fused with the product
]


def _task(name: str) -> SearchTask:
    return create_task(workloads.get(name), name=name.replace("-", "_"), target="cuda")


def _sketch(task: SearchTask) -> MultiKernelSketch:
    sks = generate_sketches(task)
    assert [s.name for s in sks] == ["m0", "skip"]
    assert isinstance(sks[0], MultiKernelSketch)
    return sks[0]


def _scripts(task: SearchTask, n: int) -> list[str]:
    sk = _sketch(task)
    return [default_script(task)] + [sk.script(sk.sample(random.Random(s)).values()) for s in range(n)]


@pytest.mark.parametrize("name", NAMES)
def test_one_sketch_over_every_part(name: str) -> None:
    """The sketch's knobs are its parts' own, named after the task's op numbers (unique across
    the parts); its loop splits are theirs; a sample is valid and a bad value names its part."""
    sk = _sketch(_task(name))
    assert len(sk.parts) == 2
    if name.startswith("attention"):  # the partition with row chains: scores + softmax in one part
        assert all(p.row_chains for p in sk.parts) and "cross_thread_reduction" in sk.parts[0].sketch.rule
    names = [k.name for k in sk.knobs]
    assert len(names) == len(set(names))
    for p in sk.parts:  # a part's `op<L>.*` knob is the task's `op<ops[L]>.*`
        for kn in p.sketch.knobs:
            local, rest = kn.name.split(".", 1)
            assert f"op{p.ops[int(local[2:])]}.{rest}" in names
    assert all(n in names for s in sk.splits for n in s.tile_knobs)
    assert set(sk.unroll_knobs) <= set(names)
    v = sk.sample(random.Random(0)).values()
    assert sk.validate(v) is None
    bad = dict(v, **{next(n for n in reversed(sk.unroll_knobs) if n.endswith(".unroll")): 3})
    assert sk.validate(bad).startswith("part 1")
    assert sk.validate({**v, "op99.unroll": 0}) is not None


def test_partition_runs_once_per_task() -> None:
    """`ansor-partition` runs once per task and option: sketch generation, then the untuned
    program, of one task share its parts (`parts_of`, `_callees`: cached by content); an equal
    task (created again from the same text) hits the cache, another task does not."""
    from ansor.targets.cuda import multi_kernel

    multi_kernel.parts_of.cache_clear()
    multi_kernel._callees.cache_clear()
    task = _task("matmul_rowsum-33x65x17")
    sk = _sketch(task)
    default_script(task)
    assert multi_kernel._callees.cache_info().misses == 2  # with row chains (refused), then without
    assert multi_kernel.parts_of.cache_info().misses == 1 and multi_kernel.parts_of.cache_info().hits >= 1
    assert multi_kernel.parts_of(_task("matmul_rowsum-33x65x17"))[0] is sk.parts
    assert multi_kernel.parts_of.cache_info().misses == 1
    multi_kernel.parts_of(_task("mlp-3x97x2"))
    assert multi_kernel.parts_of.cache_info().misses == 2


def test_search_space_over_the_parts() -> None:
    """The search space samples valid schedules through each part's own space, and with ragged
    tiles off (`ragged_prob` = 0) keeps every part's tiles exact."""
    sk = _sketch(_task("mlp-3x97x2"))
    for ragged_prob in (0.0, 0.75):
        space = sk.search_space(ragged_prob)
        rng = random.Random(1)
        for _ in range(20):
            v = space.sample(rng).values()
            assert space.valid(v) and sk.validate(v) is None
            if ragged_prob == 0:
                assert not any(p.sketch.gpu_stage.ragged_dims(lv) for p, lv in zip(sk.parts, sk._local(v)))


@pytest.mark.parametrize("name", NAMES)
def test_multi_kernel_programs_build(name: str) -> None:
    """The untuned program and three samples build to PTX: one kernel per part (the MLP's
    weights as device globals in the PTX, not host addresses passed as kernel arguments)."""
    task = _task(name)
    for script in _scripts(task, 3):
        ptx = emit_ptx(task, script)
        assert ptx.count(".entry") == 2
        if name.startswith("mlp"):
            assert ptx.count(".global .align") >= 4  # w0, b0, w1, b1


@pytest.mark.parametrize("name", NAMES)
def test_multi_kernel_scripts_run_as_cpu_loops(name: str) -> None:
    """The scripts themselves up to the mapping to the GPU (each part's blocks and threads as
    loops, the parts still calls), then the guards, into poisoned outputs: the task's result."""
    from ansor.measure.measurer import reference_outputs
    from ansor.measure.verify import check_task_outputs, poisoned

    task = _task(name)
    inputs, refs, _ = reference_outputs(task)
    for script in _scripts(task, 4):
        outs = _run_guarded_as_cpu_loops(task, script, inputs, poisoned(task.outputs), no_copies=False, to_scf=False)
        assert check_task_outputs(task, outs, refs) is None, script


def test_intermediates_are_a_workspace_argument() -> None:
    """The buffer between the two launches is a trailing argument of the task function (after
    its output), recorded as the module's workspace; the function allocates nothing, on the host
    or the device, and the lowered host code calls no allocator (`mgpuMemAlloc`/`mgpuMemFree`)
    in the task function or the timing loop: nothing is allocated per call."""
    from ansor.core.mlir import walk
    from ansor.core.task import TensorSpec
    from ansor.targets.cuda.lowering import WORKSPACE_ATTR, _lower_module, lower_to_gpu_ir, workspace_of
    from mlir import ir

    task = _task("matmul_rowsum-33x65x17")
    with ir.Context(), ir.Location.unknown():
        text = str(lower_to_gpu_ir(task, default_script(task)))
    head, body = text.split(f"func.func @{task.func_name}(")[1].split("\n", 1)
    assert "memref<33x17xf32>, %arg1: memref<17x65xf32>, %arg2: memref<33xf32>, %arg3: memref<33x65xf32>)" in head
    assert "ansor.workspace = 1 : i64" in head
    assert body.count("gpu.launch blocks") == 2
    assert "gpu.alloc" not in body and "gpu.dealloc" not in body
    assert "memref.alloc()" not in body.split("gpu.launch")[0]
    with ir.Context(), ir.Location.unknown():
        module = _lower_module(task, default_script(task), "sm_90", "isa", bench=True)
        assert workspace_of(module, task) == (TensorSpec((33, 65), "f32"),)
        assert WORKSPACE_ATTR in module.operation.attributes
        host = [op for op in walk(module.operation, "llvm.func")
                if ir.StringAttr(op.attributes["sym_name"]).value in (task.func_name, "__ansor_bench")]
        assert len(host) == 2
        for f in host:
            callees = {ir.FlatSymbolRefAttr(c.attributes["callee"]).value
                       for c in walk(f, "llvm.call") if "callee" in c.attributes}
            assert not {"mgpuMemAlloc", "mgpuMemFree"} & callees, callees
    from ansor.targets.cuda.lowering import build_task_cuda

    artifact = build_task_cuda(task, default_script(task), arch="sm_90")  # the builder's bytecode
    with ir.Context(), ir.Location.unknown():
        assert workspace_of(ir.Module.parse(artifact), task) == (TensorSpec((33, 65), "f32"),)


@pytest.mark.parametrize("name", ["mlp-3x97x2", "attention-16x32x8"])
def test_every_part_task_without_workspace(name: str) -> None:
    """Only the multi-kernel task has a workspace: its parts, as the tasks a partitioned model
    runs, build without one (one kernel, nothing between launches)."""
    from ansor.targets.cuda.lowering import lower_to_gpu_ir, record_workspace
    from mlir import ir

    sk = _sketch(_task(name))
    for p in sk.parts:
        with ir.Context(), ir.Location.unknown():
            assert record_workspace(lower_to_gpu_ir(p.task, default_script(p.task)), p.task) == ()


@pytest.mark.parametrize("name", ["matmul_rowsum-33x65x17", "mlp-3x97x2"])
def test_host_code_passes_the_workspace_to_both_kernels(monkeypatch, name: str) -> None:
    """The builder's artifact, its host code run on the CPU with the CUDA runtime's entry points
    stubbed (no GPU; the kernels never run): every call of the task function and of the timing
    loop launches the two kernels, the first writing into the workspace argument's buffer, the
    second reading it and writing the output, and nothing allocates or frees device memory."""
    import ctypes

    from ansor.core import native
    from ansor.core.mlir import BENCH_FUNC
    from ansor.targets.cuda.lowering import build_task_cuda, workspace_of
    from mlir import ir
    from mlir.execution_engine import ExecutionEngine
    from mlir.runtime import as_ctype, make_nd_memref_descriptor

    monkeypatch.setattr("ansor.config.CUDA_BINARY", "ptx")
    task = _task(name)
    artifact = build_task_cuda(task, default_script(task), arch="sm_90")
    launches: list[set[int]] = []
    allocs: list[str] = []
    launch_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p, *[ctypes.c_int64] * 6, ctypes.c_int32, ctypes.c_void_p,
                                ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_size_t)

    def launch(fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra, n):  # noqa: ANN001
        launches.append({ctypes.cast(params[i], ctypes.POINTER(ctypes.c_uint64))[0] for i in range(n)})

    on_launch = launch_t(launch)
    stub = ctypes.CFUNCTYPE(ctypes.c_void_p)(lambda: None)
    on_alloc = ctypes.CFUNCTYPE(ctypes.c_void_p)(lambda: allocs.append("alloc"))
    native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(artifact)
        specs = [*task.inputs, *task.outputs, *workspace_of(module, task)]
        assert len(specs) == len(task.inputs) + len(task.outputs) + 1
        engine = ExecutionEngine(module, opt_level=0, shared_libs=[])
        for sym in ["mgpuModuleLoad", "mgpuModuleLoadJIT", "mgpuModuleUnload", "mgpuModuleGetFunction",
                    "mgpuStreamCreate", "mgpuStreamSynchronize", "mgpuStreamDestroy"]:
            engine.raw_register_runtime(sym, ctypes.cast(stub, ctypes.c_void_p))
        for sym in ["mgpuMemAlloc", "mgpuMemFree"]:
            engine.raw_register_runtime(sym, ctypes.cast(on_alloc, ctypes.c_void_p))
        engine.raw_register_runtime("mgpuLaunchKernel", ctypes.cast(on_launch, ctypes.c_void_p))
        descs = []
        for i, spec in enumerate(specs):  # fake device addresses 0x1000_0000, 0x2000_0000, ...
            desc_t = make_nd_memref_descriptor(len(spec.shape), as_ctype(np.dtype(spec.numpy_dtype())))
            d = desc_t()
            d.allocated = (i + 1) << 28
            d.aligned = ctypes.cast(ctypes.c_void_p((i + 1) << 28), dict(desc_t._fields_)["aligned"])
            d.offset = 0
            d.shape = (ctypes.c_longlong * len(spec.shape))(*spec.shape)
            d.strides = (ctypes.c_longlong * len(spec.shape))(*[int(np.prod(spec.shape[k + 1:])) for k in range(len(spec.shape))])
            descs.append(d)
        args = [ctypes.pointer(ctypes.pointer(d)) for d in descs]
        engine.invoke(task.func_name, *args)
        engine.invoke(BENCH_FUNC, *args, ctypes.pointer(ctypes.c_longlong(3)))
        del engine
    x, out, ws = 1 << 28, len(task.inputs + task.outputs) << 28, len(specs) << 28
    assert len(launches) == 2 * 4 and not allocs
    for first, second in zip(launches[::2], launches[1::2], strict=True):
        assert {x, ws} <= first and out not in first
        assert {ws, out} <= second


class _FakeBuffer:
    """A device buffer without a device: records its life."""

    log: list = []

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        import ctypes

        self.shape, self.dtype, self.desc = tuple(shape), np.dtype(dtype), ctypes.c_int(0)
        _FakeBuffer.log.append(("alloc", self.shape))

    def upload(self, a: np.ndarray) -> None:
        _FakeBuffer.log.append(("upload", self.shape))

    def download(self) -> np.ndarray:
        return np.zeros(self.shape, self.dtype)

    def poison(self) -> None:
        _FakeBuffer.log.append(("poison", self.shape))

    def free(self) -> None:
        _FakeBuffer.log.append(("free", self.shape))


class _FakeEngine:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def invoke(self, name: str, *args) -> None:
        self.calls.append((name, len(args)))


def test_kernel_allocates_its_workspace_once(monkeypatch) -> None:
    """`CudaKernel` with a workspace (no GPU: fake buffers and engine): allocated on the first
    call, passed after the inputs and outputs to every call and the timing loop, poisoned with
    the outputs by a verifying run (only the outputs are uploaded besides the inputs), freed
    with the kernel."""
    import gc

    from ansor.core.task import TensorSpec
    from ansor.targets.cuda import runtime

    monkeypatch.setattr(runtime, "_DeviceBuffer", _FakeBuffer)
    monkeypatch.setattr(runtime, "_check_device", lambda what: None)
    monkeypatch.setattr(_FakeBuffer, "log", [])
    task = _task("matmul_rowsum-33x65x17")
    engine = _FakeEngine()
    kernel = runtime.CudaKernel(engine, task, workspace=(TensorSpec((33, 65), "f32"),))
    inputs = [np.zeros(s.shape, np.float32) for s in task.inputs]
    kernel.run(inputs)
    kernel.run(inputs, [np.full((33,), np.nan, np.float32)])
    kernel.time(inputs, 10)
    assert engine.calls == [(task.func_name, 4), (task.func_name, 4), ("__ansor_bench", 5)]
    log = _FakeBuffer.log
    assert log.count(("alloc", (33, 65))) == 1
    assert ("upload", (33, 65)) not in log
    assert log.count(("poison", (33, 65))) == 1 and log.count(("upload", (33,))) == 1
    assert log.index(("poison", (33, 65))) > log.index(("upload", (33,)))
    del kernel
    gc.collect()
    assert log[-1] == ("free", (33, 65))


def test_network_passes_each_kernel_its_workspace(monkeypatch) -> None:
    """The GPU network runner (no GPU: fake buffers, engines and kernels that have a workspace)
    passes a kernel's workspace after each call's operands and results, the same buffers every
    call, and a verifying run poisons it with the outputs."""
    from ansor.core.task import TensorSpec
    from ansor.frontend.partition import extract_tasks
    from ansor.targets.cuda import network, runtime

    for mod in (runtime, network):
        monkeypatch.setattr(mod, "_DeviceBuffer", _FakeBuffer)
        monkeypatch.setattr(mod, "_check_device", lambda what: None)
    monkeypatch.setattr(network, "runtime_lib", lambda: None)
    monkeypatch.setattr(_FakeBuffer, "log", [])
    net = extract_tasks(workloads.get("mlp-3x97x2"), target="cuda")
    whole = net.as_task()
    split = network.split_parent(whole)
    calls: list[tuple[str, int]] = []

    class Engine:
        def lookup(self, name: str):
            return lambda packed: calls.append((name, len(packed)))

    ws = TensorSpec((5, 7), "f32")
    kernels = {t.hash: runtime.CudaKernel(Engine(), t, workspace=(ws,)) for t in net.tasks}
    callees = {n: net.tasks[i] for n, i in net.calls.items()}
    model = network.CudaNetwork(whole, split, network.evaluate_constants(whole, split), kernels, callees)
    x = [np.zeros(s.shape, np.float32) for s in whole.inputs]
    model.run(x)
    model.run(x, [np.full(s.shape, np.nan, np.float32) for s in whole.outputs])
    assert len(calls) == 2 * len(net.calls)
    for name, n in calls:
        t = next(t for t in net.tasks if t.func_name == name)
        assert n == len(t.inputs) + len(t.outputs) + 1
    log = _FakeBuffer.log
    assert log.count(("alloc", (5, 7))) == len(net.tasks)  # once per kernel, at compile time
    assert log.count(("poison", (5, 7))) == len(net.tasks)  # by the verifying run only


# ----------------------------------------------------------------------------------------------
# On an NVIDIA GPU


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_multi_kernel_programs_run_on_the_gpu(name: str) -> None:
    """The untuned program and three samples against the reference, each run twice into
    outputs poisoned with NaN and with a second sentinel (the workspace poisoned too), then timed
    (deferred synchronisation; the intermediates in the kernel's workspace, allocated once)."""
    from ansor.measure import verify
    from ansor.measure.measurer import reference_outputs
    from ansor.targets.cuda.lowering import compile_task_cuda

    task = _task(name)
    inputs, refs, _ = reference_outputs(task)
    for script in _scripts(task, 3):
        kernel = compile_task_cuda(task, script)
        for which in (0, 1):
            outs = kernel.run(inputs, verify.poisoned(task.outputs, which))
            assert verify.check_task_outputs(task, outs, refs) is None
        seconds = kernel.time(inputs, 10)
        assert 0 < seconds < 1

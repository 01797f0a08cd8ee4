"""GPU lowering: a task's payload + a GPU transform script -> PTX + a JIT-compiled host program.

    SearchTask.ir --apply script (tile to blocks/threads, shared-memory copies, bufferize,
        gpu.launch)--> memref + gpu.launch --workgroup attributions, tensor.pad buffers -> guarded
        loads (ansor-gpu-guard-padded-reads), rows packed into blocks (ansor-gpu-pack-rows-into-blocks),
        out-params (a result returned reshaped written in
        place: ansor-gpu-reshaped-results-in-place), auto-unroll, LICM-->
        --ansor-gpu-{swizzle-blocks, hoist-accumulators, forward-initial-values, reuse-readonly-loads,
          remove-redundant-barriers, prefetch-global-reads} (C++ passes: the kernel rewrites a
          fast SGEMM needs, on memrefs)-->
        --ansor-gpu-sink-constants, gpu-kernel-outlining, llvm.align on kernel buffers-->
        --NVVM lowering to the LLVM dialect --infer_access_alignment (128-bit accesses)-->
        --gpu-module-to-binary format=isa (PTX), or bin (ptxas: a cubin; `config.CUDA_BINARY`)-->
        host LLVM + embedded cubin/PTX (+ the workspace's types: `WORKSPACE_ATTR`)
        --ExecutionEngine + libmlir_cuda_runtime.so--> CudaKernel

Runs inside measurement worker processes, like `lowering.py` (MLIR aborts on internal assertion
failures). Buffers live on the device: `CudaKernel` allocates them through the MLIR CUDA runtime's
own entry points (`mgpuMemAlloc`, `mgpuMemcpy`, ...) and puts the device pointers into the memref
descriptors, so nothing here needs PyTorch or CuPy. Timing is a native loop around the kernel
(`lowering.BENCH_FUNC`) on one reused stream; with `config.CUDA_TIME_DEFERRED` (the default) the
calls are queued and synchronised once, so a measured latency is the kernel's, not a launch +
synchronise round trip (~10 µs) per call.

A builder (`measure/builder.py`) runs all of the above but the last step (`build_task_cuda`: the
lowered module as bytecode, on any core of any machine); the runner only JITs it (`load_task_cuda`).
With `config.CUDA_BINARY` = cubin (or auto and a `ptxas` at hand) the builder also assembles the
PTX, so the driver does no PTX JIT at module load; measured on an H200 host it did not matter.
`emit_ptx` stops at the PTX text and needs no GPU or CUDA driver: CI tests the GPU lowering with it.
"""

from __future__ import annotations

import functools
import re

from mlir import ir
from ansor.core.mlir import (EXPAND_FPOWI, LoweringError, add_bench_wrapper, apply_script, diag_text,
                             parse_payload)
from ansor.core.task import SearchTask, TensorSpec
from ansor.targets.cuda.params import DEFAULT_ARCH
from ansor.targets.cuda.rewrites import MAX_PRIVATE_BYTES, infer_access_alignment
from ansor.targets.cuda.tensorcore import ATTR as TC_ATTR
from ansor.targets.cuda.tensorcore import DEFAULT_SM_COUNT, annotation_of, kernel_text, tc_problem_for, validate_tc
from ansor.targets.cuda.runtime import CudaKernel, load_cuda_runtime, cuda_runtime_libs, device_arch, device_sm_count
from ansor.core.mlir import run_passes
from ansor import config

_AFTER_SCRIPT = (
    "canonicalize,cse,"
    "buffer-results-to-out-params{hoist-static-allocs modify-public-functions},"
    "canonicalize,cse,ansor-gpu-reshaped-results-in-place,ansor-gpu-row-values-into-launch"
)


def _nvvm_pipeline(arch: str, fmt: str, *, nvgpu_first: bool = False) -> str:
    """Host + device lowering (upstream `gpu-lower-to-nvvm-pipeline`'s steps, plus what our scripts
    leave behind: linalg ops on memrefs, `ub.poison`). `nvgpu_first`: the tensor-core kernels."""
    outline = ("convert-nvgpu-to-nvvm,gpu-launch-sink-index-computations,gpu-kernel-outlining," if nvgpu_first
               else "gpu-kernel-outlining,convert-nvgpu-to-nvvm,")
    features = " features=+ptx80" if nvgpu_first else ""
    # `canonicalize` right after `convert-vector-to-scf`: MLIR 22 lowers each transfer of a strided
    # unit vector (vector<1x1x1xf32>: a register-tile element of an NDHWC convolution) into
    # single-iteration loops even with full-unroll, and `convert-scf-to-cf` is superlinear in
    # them: 8320 such loops took 87 s there, then 146K lines of LLVM dialect ~7 minutes in
    # NVPTX (a c3d candidate: 533 s -> 74 s to PTX on a loaded 2-core VM). Folding them first
    # leaves scalar loads. Pinned by tests/test_gpu.py. Only that folding
    # (`ansor-gpu-promote-single-iteration-loops`), not a whole `canonicalize`: MLIR 22's
    # canonicalizer also runs its region-branch patterns on every loop, superlinear in a loop's
    # iter_args: 6-8 s of CPU on convolution candidates with 128 accumulators carried around an
    # R0 loop (results/build-time/).
    return (
        EXPAND_FPOWI + "convert-linalg-to-loops," + outline +
        "convert-vector-to-scf{full-unroll=true},ansor-gpu-promote-single-iteration-loops,convert-scf-to-cf,convert-nvvm-to-llvm,convert-func-to-llvm,"
        f"expand-strided-metadata,nvvm-attach-target{{chip={arch} O=3{features}}},lower-affine,convert-arith-to-llvm,"
        "convert-index-to-llvm,canonicalize,cse,"
        "gpu.module(convert-vector-to-llvm,convert-gpu-to-nvvm,convert-ub-to-llvm,canonicalize,cse,reconcile-unrealized-casts),"
        "gpu-to-llvm,convert-math-to-llvm,convert-ub-to-llvm,reconcile-unrealized-casts,"
        f"{_to_binary(fmt)},canonicalize,cse"
    )


@functools.cache
def find_ptxas() -> str | None:
    """The `ptxas` a cubin build runs: PATH, $CUDA_ROOT/bin, $CUDA_PATH/bin, /usr/local/cuda/bin,
    then pip's `nvidia-cuda-nvcc` wheel and Triton's bundled one (PyTorch installs Triton); None
    when there is none (no CUDA toolkit)."""
    import importlib.util
    import os
    import shutil
    from pathlib import Path

    found = shutil.which("ptxas")
    if found:
        return found
    roots = [os.environ.get("CUDA_ROOT"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    try:
        import nvidia.cuda_nvcc as nvcc  # pip install nvidia-cuda-nvcc-cu12

        roots += [str(Path(p)) for p in nvcc.__path__]
    except ImportError:
        pass
    spec = importlib.util.find_spec("triton")  # located, not imported (slow)
    if spec is not None and spec.origin:
        roots.append(str(Path(spec.origin).parent / "backends" / "nvidia"))
    for root in filter(None, roots):
        cand = Path(root) / "bin" / "ptxas"
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return None


def binary_format() -> str:
    """`gpu-module-to-binary`'s format for a runnable build: "bin" (a cubin, assembled here by
    `ptxas`) or "isa" (PTX, assembled by the driver when the runner loads it); see
    `config.CUDA_BINARY`. Raises `LoweringError` for "cubin" without a ptxas."""
    want = config.CUDA_BINARY
    if want == "ptx":
        return "isa"
    if find_ptxas() is not None:
        return "bin"
    if want == "cubin":
        raise LoweringError("lower", "ANSOR_CUDA_BINARY=cubin but no ptxas found (PATH, CUDA_ROOT, CUDA_PATH, "
                                     "/usr/local/cuda)")
    return "isa"


def _to_binary(fmt: str) -> str:
    """The `gpu-module-to-binary` step for `fmt`, pointed at our ptxas for a cubin."""
    if fmt != "bin":
        return f"gpu-module-to-binary{{format={fmt}}}"
    import os

    toolkit = os.path.dirname(os.path.dirname(find_ptxas() or ""))  # <toolkit>/bin/ptxas
    return f"gpu-module-to-binary{{format=bin toolkit={toolkit}}}"


def lower_to_gpu_ir(task: SearchTask, script: str) -> ir.Module:
    """Apply the script and the fix-ups; the module still holds gpu.launch ops (current context)."""
    from ansor.core import native as _native

    _native.register_everything()  # the ansor-gpu-* passes
    module = parse_payload(task)
    run_passes(module, "ansor-gpu-own-fill-destinations", "lower")
    apply_script(module, script)
    run_passes(module, _AFTER_SCRIPT, "lower")
    run_passes(module, "ansor-gpu-copies-to-linalg", "lower")
    run_passes(module, "ansor-gpu-workgroup-attributions", "lower")
    run_passes(module, f"ansor-gpu-private-allocs-to-stack{{max-bytes={MAX_PRIVATE_BYTES}}}", "lower")
    run_passes(module, "ansor-gpu-block-reductions-to-shuffles", "lower")
    run_passes(module, "ansor-gpu-guard-padded-reads", "lower")
    # a task of several kernels (multi_kernel.py): the buffers between its launches become
    # trailing arguments, a workspace the runtime allocates once (`record_workspace`)
    run_passes(module, "ansor-gpu-device-intermediates", "lower")
    run_passes(module, "ansor-gpu-check-host-allocs", "lower")
    run_passes(module, "ansor-gpu-pack-rows-into-blocks", "lower")  # a row sketch's `rows` knob
    return module


#: The module attribute listing the workspace's types (memrefs): the task function's trailing
#: arguments after its outputs, which `ansor-gpu-device-intermediates` made of the buffers
#: between its kernels (absent: none).
WORKSPACE_ATTR = "ansor.cuda_workspace"


def record_workspace(module: ir.Module, task: SearchTask) -> tuple[TensorSpec, ...]:
    """Write the task function's workspace (its arguments after the inputs and outputs) into the
    module's `WORKSPACE_ATTR`, which survives the lowering to LLVM and the builder's bytecode;
    returns it. Raises `LoweringError` for an element type the runtime cannot allocate."""
    from ansor.core.mlir import walk

    func = next(op for op in walk(module.operation, "func.func")
                if ir.StringAttr(op.attributes["sym_name"]).value == task.func_name)
    args = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value).inputs
    extra = list(args[len(task.inputs) + len(task.outputs):])
    if not extra:
        return ()
    module.operation.attributes[WORKSPACE_ATTR] = ir.ArrayAttr.get([ir.TypeAttr.get(t) for t in extra])
    return workspace_of(module, task)


def workspace_of(module: ir.Module, task: SearchTask) -> tuple[TensorSpec, ...]:
    """The workspace `record_workspace` wrote into `module` (empty without one)."""
    from ansor.core.dtypes import NUMPY_DTYPES

    attrs = module.operation.attributes
    if WORKSPACE_ATTR not in attrs:
        return ()
    specs = []
    for a in ir.ArrayAttr(attrs[WORKSPACE_ATTR]):
        t = ir.MemRefType(ir.TypeAttr(a).value)
        et = str(t.element_type)
        if et not in NUMPY_DTYPES or not t.has_static_shape:
            raise LoweringError("lower", f"{task.name}: intermediate buffer {t} between GPU kernels: "
                                         "not supported as a workspace")
        specs.append(TensorSpec(tuple(t.shape), et))
    return tuple(specs)


def tensor_core_module(task: SearchTask, script: str) -> ir.Module | None:
    """The wgmma kernel of `task` when `script` is a tensor-core sketch's (it annotates the
    matmul, `tensorcore.py`); None for every other script. Raises `LoweringError`."""
    if f'"{TC_ATTR}.' not in script:
        return None
    module = parse_payload(task)
    apply_script(module, script)
    values = annotation_of(module)
    if values is None:
        return None
    problem, why = tc_problem_for(task)
    if problem is None:
        raise LoweringError("apply", f"tensor-core sketch on {task.name}: {why}")
    err = validate_tc(problem, values)
    if err:
        raise LoweringError("apply", f"tensor-core sketch on {task.name}: {err}")
    try:
        sm_count = device_sm_count(DEFAULT_SM_COUNT) if values.get("persist") else DEFAULT_SM_COUNT
        return ir.Module.parse(kernel_text(problem, values, task.func_name, sm_count=sm_count))
    except ir.MLIRError as exc:  # a generator bug, not a user error: name it
        raise LoweringError("lower", f"wgmma kernel of {task.name}: {diag_text(exc)}") from None


#: Upstream's TMA descriptor builder and ours with a cache in front (capi/GpuRuntime.cpp: upstream
#: allocates and copies a device descriptor on every call and never frees it).
_TMA_ENCODE = "mgpuTensorMapEncodeTiledMemref"
_TMA_ENCODE_CACHED = "ansorTensorMapEncodeTiledMemrefCached"


def _cache_tensor_maps(module: ir.Module) -> int:
    """Point the host's TMA-descriptor calls at the cached builder; returns how many."""
    from ansor.core.mlir import walk

    n = 0
    for op in walk(module.operation, "llvm.call"):
        if "callee" in op.attributes and ir.FlatSymbolRefAttr(op.attributes["callee"]).value == _TMA_ENCODE:
            op.attributes["callee"] = ir.FlatSymbolRefAttr.get(_TMA_ENCODE_CACHED)
            n += 1
    for op in walk(module.operation, "llvm.func"):
        if ir.StringAttr(op.attributes["sym_name"]).value == _TMA_ENCODE:
            op.attributes["sym_name"] = ir.StringAttr.get(_TMA_ENCODE_CACHED)
    return n


def _uses_symbol(module: ir.Module, name: str) -> bool:
    from ansor.core.mlir import walk

    return any(ir.StringAttr(op.attributes["sym_name"]).value == name for op in walk(module.operation, "llvm.func"))


def _tc_arch(arch: str) -> str:
    """wgmma and TMA need the architecture-specific target (sm_90 -> sm_90a)."""
    return arch if arch.endswith("a") else arch + "a"


def _lower_module(task: SearchTask, script: str, arch: str, fmt: str, *, bench: bool) -> ir.Module:
    from ansor.core import native as _native

    _native.register_everything()
    tc = tensor_core_module(task, script)
    if tc is not None:
        if bench:
            add_bench_wrapper(tc, task.func_name)
        # nvgpu's TMA/mbarrier/wgmma ops lower before outlining (their host-side descriptor
        # creation becomes runtime calls); wgmma needs sm_90a and PTX 8.0.
        to_llvm, to_binary = _nvvm_pipeline(_tc_arch(arch), fmt, nvgpu_first=True).rsplit(",gpu-module-to-binary", 1)
        run_passes(tc, "inline", "lower")  # the fused epilogue's function, into the kernel
        run_passes(tc, to_llvm, "lower")
        _cache_tensor_maps(tc)
        run_passes(tc, "gpu-module-to-binary" + to_binary, "lower")
        return tc
    module = lower_to_gpu_ir(task, script)
    record_workspace(module, task)
    if bench:
        add_bench_wrapper(module, task.func_name)
    # The unrolled code of one thread is capped (AutoUnroll in passes/Passes.td,
    # `config.CUDA_MAX_UNROLLED_WORK`), counted in the scalar instructions it becomes: the per-loop
    # rule alone let 32 copies of a reduction nest unroll into 18432 FMAs and 90+ s of NVPTX, and
    # a cap counted in loop iterations let a 576-step loop of copies, FMAs and barriers unroll into
    # 1729 barriers and ~108K lines.
    if _pipelined(module, arch):
        # the sketch's `stages` knob > 1 (rules.py); before unrolling, which would leave no R0
        # loop to pipeline where its trip count is small, and after hoisting the accumulators (a
        # fused consumer's tile in shared memory is another write in the loop)
        run_passes(module, "loop-invariant-code-motion,ansor-gpu-hoist-accumulators,"
                           "ansor-gpu-pipeline-shared-copies", "lower")
    cap = config.CUDA_MAX_UNROLLED_WORK
    unroll = f"ansor-auto-unroll{{max-unrolled-work={cap}}}" if cap > 0 else "ansor-auto-unroll"
    run_passes(module, f"{unroll},canonicalize,loop-invariant-code-motion,cse", "lower")
    group = config.CUDA_SWIZZLE
    run_passes(module, f"ansor-gpu-swizzle-blocks{{group={group}}}", "lower")
    run_passes(module, "ansor-gpu-hoist-accumulators", "lower")
    run_passes(module, "ansor-gpu-forward-initial-values", "lower")
    run_passes(module, "ansor-gpu-remove-redundant-barriers", "lower")
    # one load per address of a read-only buffer (a row kernel's phases reread their columns
    # across barriers), then cse merges what was computed twice from them
    run_passes(module, "ansor-gpu-reuse-readonly-loads,cse", "lower")
    run_passes(module, "ansor-gpu-prefetch-global-reads", "lower")
    run_passes(module, "convert-linalg-to-loops", "lower")
    run_passes(module, "ansor-gpu-sink-constants", "lower")
    run_passes(module, "gpu-kernel-outlining", "lower")
    run_passes(module, "ansor-gpu-align-workgroup-buffers", "lower")
    pipeline = _nvvm_pipeline(arch, fmt)
    to_llvm, to_binary = pipeline.rsplit(",gpu-module-to-binary", 1)
    run_passes(module, to_llvm, "lower")
    infer_access_alignment(module)
    if config.CUDA_NOALIAS:  # off by default: measured slower (GpuLoweringBPasses.td)
        run_passes(module, "ansor-gpu-mark-noalias", "lower")
    run_passes(module, "gpu-module-to-binary" + to_binary, "lower")
    return module


def _pipelined(module: ir.Module, arch: str) -> bool:
    """Whether a kernel asks for multi-buffered shared tiles (`ansor.pipeline_stages` > 1) on an
    architecture with cp.async (sm_80 and later; on older ones the stages are ignored)."""
    from ansor.core.mlir import walk

    m = re.match(r"sm_(\d+)", arch)
    if m is None or int(m.group(1)) < 80:
        return False
    return any("ansor.pipeline_stages" in op.attributes and ir.IntegerAttr(op.attributes["ansor.pipeline_stages"]).value > 1
               for op in walk(module.operation, "gpu.launch"))


def emit_ptx(task: SearchTask, script: str, *, arch: str = DEFAULT_ARCH) -> str:
    """The PTX of the scheduled task's kernels (no GPU needed). Raises `LoweringError`."""
    with ir.Context(), ir.Location.unknown():
        module = _lower_module(task, script, arch, "isa", bench=False)
        text = str(module)
    found = re.findall(r'assembly = "((?:[^"\\]|\\.)*)"', text) or re.findall(r'bin = "((?:[^"\\]|\\.)*)"', text)
    if not found:
        raise LoweringError("lower", "no gpu.binary in the lowered module")
    raw = "\n".join(found)  # one binary per outlined kernel module
    # MLIR escapes non-printable bytes as \XX (hex).
    return re.sub(r"\\([0-9A-Fa-f]{2})", lambda g: chr(int(g.group(1), 16)), raw)


#: Upstream's per-launch stream calls and ours (capi/GpuRuntime.cpp: one stream per thread, reused).
_STREAM_REUSE = {"mgpuStreamCreate": "ansorStreamCreateReused", "mgpuStreamDestroy": "ansorStreamDestroyReused"}


def _reuse_streams(engine, *, defer_sync: bool = False) -> bool:
    """Point the JIT's stream create/destroy at our reused per-thread stream (MLIR 22 creates and
    destroys a stream around every launch: more host time than a small kernel). Explicit JIT
    symbols take precedence over the runtime library's. False when our library lacks them.
    `defer_sync`: its synchronisation too, so that a compiled network can defer it to the end of
    a model call (`network.py`)."""
    import ctypes

    from ansor.core import native as _native

    if not config.CUDA_REUSE_STREAM:
        return False
    names = dict(_STREAM_REUSE)
    if defer_sync:
        names["mgpuStreamSynchronize"] = "ansorStreamSynchronizeDeferrable"
    try:
        lib = ctypes.CDLL(str(_native.find_library()))
        addrs = {up: ctypes.cast(getattr(lib, ours), ctypes.c_void_p) for up, ours in names.items()}
    except (OSError, AttributeError):
        return False
    for up, addr in addrs.items():
        engine.raw_register_runtime(up, addr)
    return True


def compile_task_cuda(task: SearchTask, script: str | None, *, arch: str | None = None,
                      defer_sync: bool = False) -> CudaKernel:
    """Apply `script` (None: the default GPU schedule, see `gpu_rules.default_script`), lower to
    PTX and JIT the host side (`defer_sync`: for a network, see `_reuse_streams`). Raises
    `LoweringError`."""
    from ansor.targets.cuda.rules import default_script

    arch = arch or device_arch()
    fmt = binary_format()
    with ir.Context(), ir.Location.unknown():
        module = _lower_module(task, script if script is not None else default_script(task), arch, fmt,
                               bench=True)
        return _jit(module, task, defer_sync=defer_sync)


#: The module attribute naming the architecture an artifact's PTX was generated for.
ARCH_ATTR = "ansor.cuda_arch"


def build_task_cuda(task: SearchTask, script: str | None, *, arch: str | None = None) -> bytes:
    """The builder's half of `compile_task_cuda` (`measure/builder.py`): apply `script`, lower to
    a cubin (PTX where there is no ptxas: `binary_format`) and the host's LLVM dialect, and return the module as MLIR bytecode with the architecture
    in `ARCH_ATTR`. All of the MLIR and NVPTX work happens here, on any core of any machine with
    the same MLIR; `load_task_cuda` only JITs the host code and hands the cubin (or PTX) to the driver.
    `arch`: `config.CUDA_ARCH`, else GPU 0's, else `DEFAULT_ARCH`. Raises `LoweringError`."""
    import io

    from ansor.targets.cuda.rules import default_script

    arch = arch or device_arch()
    fmt = binary_format()
    with ir.Context(), ir.Location.unknown():
        module = _lower_module(task, script if script is not None else default_script(task), arch, fmt,
                               bench=True)
        module.operation.attributes[ARCH_ATTR] = ir.StringAttr.get(arch)
        buf = io.BytesIO()
        module.operation.write_bytecode(buf)
        return buf.getvalue()


#: Loads one MLIR context serves in a process (`load_context`). A context keeps every attribute
#: uniqued in it for its whole life, each loaded candidate's PTX or cubin among them (10-100 kB),
#: so a runner replaces it after this many: at most a few tens of MB held, and ~20 ms (a new
#: context registers every dialect; measured on the 2-core VM) once per this many candidates
#: instead of once per candidate.
CONTEXT_LOADS = 200

#: [the context `load_task_cuda` parses artifacts in, loads it has served]
_load_ctx: list = [None, 0]


def load_context() -> ir.Context:
    """The process's MLIR context for loading artifacts, a fresh one every `CONTEXT_LOADS` calls.
    Nothing a load returns refers to it: the `ExecutionEngine` translates the module into LLVM IR
    in its own LLVM context when it is created, and the module (parsed per load) is dropped when
    the load returns, so a kernel outlives the context it was loaded in (as it outlived the
    per-load context before; pinned by tests/test_cuda_runner_costs.py)."""
    if _load_ctx[0] is None or _load_ctx[1] >= CONTEXT_LOADS:
        _load_ctx[0], _load_ctx[1] = ir.Context(), 0
    _load_ctx[1] += 1
    return _load_ctx[0]


def load_task_cuda(task: SearchTask, artifact: bytes, *, defer_sync: bool = False) -> CudaKernel:
    """The runner's half: JIT an artifact of `build_task_cuda` on this machine's GPU. An artifact
    built for another architecture than GPU 0's is refused (its PTX would JIT for the wrong chip,
    or not at all). Parsed in the process's loading context (`load_context`: not a fresh one per
    candidate). Raises `LoweringError`."""
    from ansor.core import native as _native

    _native.register_everything()  # before the context: it sees the ansor dialect
    with load_context(), ir.Location.unknown():
        try:
            module = ir.Module.parse(artifact)
        except Exception as exc:  # noqa: BLE001 - MLIRError or ValueError: a torn or foreign artifact
            raise LoweringError("jit", f"{task.name}: unreadable artifact of {len(artifact)} bytes "
                                       f"({str(exc).splitlines()[0].rstrip(':')})") from None
        attrs = module.operation.attributes
        built = ir.StringAttr(attrs[ARCH_ATTR]).value if ARCH_ATTR in attrs else None
        here = device_arch()
        if built != here:
            raise LoweringError("jit", f"{task.name}: artifact built for {built or 'an unknown architecture'}, "
                                       f"this GPU is {here}")
        return _jit(module, task, defer_sync=defer_sync)


def _jit(module: ir.Module, task: SearchTask, *, defer_sync: bool = False) -> CudaKernel:
    """JIT a lowered module (host LLVM dialect + embedded PTX) inside the caller's context."""
    from mlir.execution_engine import ExecutionEngine

    from ansor.core import native as _native

    workspace = workspace_of(module, task)  # before the engine takes the module
    try:
        load_cuda_runtime()
    except OSError as exc:  # no libcuda.so.1 (no driver) or a runtime that does not load
        raise LoweringError("jit", f"{task.name}: cannot load the CUDA runtime ({str(exc).splitlines()[0]}): "
                                   "a cuda program runs only on a machine with an NVIDIA driver") from None
    try:
        libs = list(cuda_runtime_libs())
        if _uses_symbol(module, _TMA_ENCODE_CACHED):
            libs.append(str(_native.find_library()))  # the cached TMA-descriptor builder
        engine = ExecutionEngine(module, opt_level=config.CUDA_HOST_OPT_LEVEL, shared_libs=libs)
        # deferrable synchronisation: a network defers it to the end of a model call, and
        # `CudaKernel.time` to the end of its loop (`config.CUDA_TIME_DEFERRED`)
        deferrable = defer_sync or config.CUDA_TIME_DEFERRED
        deferrable = _reuse_streams(engine, defer_sync=deferrable) and deferrable
        engine.initialize()  # runs the global constructors that load the GPU module
    except RuntimeError as exc:
        raise LoweringError("jit", str(exc).splitlines()[0]) from None
    return CudaKernel(engine, task, deferrable=deferrable, workspace=workspace)

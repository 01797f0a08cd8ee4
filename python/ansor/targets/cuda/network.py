"""Whole models on the GPU: a partitioned model -> one callable that runs every task's kernel
on device buffers, the intermediates never leaving the card.

    Network.ir (the model function: weight constants, weight-only ops, reshapes, func.call of the
    outlined tasks) --split_parent-->
        constant part: every op that reads no model input and no task result (the weights and
            what the model computes from them alone: folded batch norms, weight transposes)
            --the CPU target, once, at compile time--> numpy arrays --upload--> device buffers
        runtime plan: the calls in order; the reshapes between them are views of the same buffer
    each distinct task --CudaTarget.compile (its best script, or the default schedule)--> JIT engine
    CudaNetwork.run / .time --> the plan's calls, back to back on the thread's reused stream,
        one synchronisation per model call (`ansorDeferSynchronize`, capi/GpuRuntime.cpp)

A task no GPU rule schedules (and no log record covers), or whose GPU program does not build (an
MLIR assertion ends its build process, not the caller), runs on the CPU between the kernels, with
a warning: its operands are copied off the card and its results back (`_HostStep`). A task's
kernel is the very program the tuner measured (same lowering, same artifact); the
network adds no code of its own on the device. The device memory is static: one buffer per task
result, allocated at compile time, and each kernel's workspace (the intermediates of a task of
several kernels, `CudaKernel.workspace_buffers`), allocated once and kept by the kernel (calls of
one CudaNetwork are serialised by `ansor.compile`'s lock). Ops of the model function that the plan cannot run (anything but constants, reshapes and
calls reading a model input or a task result) are a one-line `LoweringError` naming the op.
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import logging
from dataclasses import dataclass, field

import numpy as np
from mlir import ir

from ansor.core.mlir import LoweringError
from ansor.core.task import SearchTask, TensorSpec, _tensor_spec
from ansor.targets.cuda.runtime import (CudaKernel, _check_device, _DeviceBuffer, deferred_synchronisation,
                                        runtime_lib, write_back)

log = logging.getLogger(__name__)

#: Ops of the model function that only re-describe a contiguous buffer (row-major views).
_VIEWS = ("tensor.expand_shape", "tensor.collapse_shape", "tensor.reshape")


@dataclass
class _Slot:
    """A tensor of the model function at run time: a device buffer (or a view of one)."""

    spec: TensorSpec
    buffer: _DeviceBuffer
    desc: object  # its memref descriptor (the buffer's own, or a view's with this shape)


@dataclass
class _Step:
    """One task call: the engine's packed entry point and its prebuilt argument array."""

    callee: str
    task: SearchTask
    func: object  # ctypes function of the JIT'd packed interface
    packed: object  # (c_void_p * n) of pointers to pointers to the operands' descriptors
    keep: list = field(default_factory=list)  # the ctypes objects `packed` points into


@dataclass
class _HostStep:
    """A task without a GPU schedule, run by the CPU between the kernels: its operands come down
    from the card after a synchronisation, its results go back up (`compile_network` warns)."""

    callee: str
    task: SearchTask
    kernel: object  # the CPU target's Kernel of the task
    operands: list  # _Slot
    results: list  # _Slot


@dataclass(frozen=True)
class ParentSplit:
    """The model function split in two (see the module docstring): `constant_ir`, a module whose
    entry takes the model's inputs (unused) and returns the `constants` the calls read; and the
    runtime `plan`, in program order: ("call", callee, operand names, result names), ("view",
    source name, result name, spec) and finally ("return", operand names)."""

    constant_ir: str
    constants: tuple[tuple[str, TensorSpec], ...]
    plan: tuple[tuple, ...]


def split_parent(task: SearchTask) -> ParentSplit:
    """Split the partitioned model `task.ir` (entry `task.func_name`) into its constant part and
    the runtime plan. Raises `LoweringError` for an op the plan cannot run."""
    from mlir.dialects import func as func_d

    from ansor.core import native as _native

    _native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(task.ir)
        entry = next((op.operation for op in module.body.operations if op.operation.name == "func.func"
                      and ir.StringAttr(op.operation.attributes["sym_name"]).value == task.func_name), None)
        if entry is None or not entry.regions[0].blocks:
            raise LoweringError("lower", f"{task.name}: no function {task.func_name} with a body")
        block = entry.regions[0].blocks[0]
        ids: list[tuple[ir.Value, str]] = []  # value -> name (ir.Value hashes are not stable: a list)

        def name(v: ir.Value) -> str:
            for k, n in ids:
                if k == v:
                    return n
            n = f"v{len(ids)}"
            ids.append((v, n))
            return n

        dynamic: list[ir.Value] = list(block.arguments)
        for i, a in enumerate(block.arguments):
            ids.append((a, f"in{i}"))

        def is_dynamic(v: ir.Value) -> bool:
            return any(v == d for d in dynamic)

        plan: list[tuple] = []
        runtime_ops: list[ir.Operation] = []
        needed: list[ir.Value] = []  # constant values the runtime part reads

        def need(v: ir.Value) -> None:
            if not is_dynamic(v) and not any(v == n for n in needed):
                needed.append(v)

        for op in block.operations:
            op = op.operation
            if op.name == "func.return":
                for v in op.operands:
                    need(v)
                plan.append(("return", tuple(name(v) for v in op.operands)))
                runtime_ops.append(op)
                continue
            if op.name == "func.call" or any(is_dynamic(v) for v in op.operands):
                if op.name == "func.call":
                    callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
                    for v in op.operands:
                        need(v)
                    plan.append(("call", callee, tuple(name(v) for v in op.operands),
                                 tuple(name(r) for r in op.results)))
                elif op.name in _VIEWS:
                    src = op.operands[0]
                    need(src)
                    plan.append(("view", name(src), name(op.results[0]),
                                 _tensor_spec(op.results[0].type, f"{op.name} result")))
                else:
                    raise LoweringError("lower", f"{task.name}: {op.name} between the tasks of the model reads "
                                                 "a model input or a task result; the GPU network runs only "
                                                 "task calls and reshapes there")
                dynamic.extend(op.results)
                runtime_ops.append(op)
        constants = tuple((name(v), _tensor_spec(v.type, "a constant the tasks read")) for v in needed)
        # The constant part: the same function without the runtime ops, returning what they read.
        ret = runtime_ops[-1]
        with ir.InsertionPoint(ret):
            func_d.ReturnOp(needed)
        for op in reversed(runtime_ops):
            op.erase()
        ftype = ir.FunctionType(ir.TypeAttr(entry.attributes["function_type"]).value)
        entry.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(ftype.inputs, [v.type for v in needed]))
        for op in list(module.body.operations):  # the outlined tasks: not called any more
            o = op.operation
            if o.name == "func.func" and o != entry:
                o.erase()
        return ParentSplit(module.operation.get_asm(), constants, tuple(plan))


def evaluate_constants(task: SearchTask, split: ParentSplit) -> list[np.ndarray]:
    """The constant part's values, computed once by the CPU target (its untuned lowering)."""
    from ansor.targets import get_target

    if not split.constants:
        return []
    digest = hashlib.sha256(split.constant_ir.encode()).hexdigest()[:16]
    const_task = SearchTask(f"{task.name}.constants", task.func_name, split.constant_ir, task.inputs,
                            tuple(s for _, s in split.constants), 0, digest, "cpu")
    cpu = get_target("cpu")
    kernel = cpu.compile_network(const_task, {}, {})
    dummy = [np.zeros(s.shape, dtype=s.numpy_dtype()) for s in task.inputs]
    return list(kernel.run(dummy))


def _view_desc(buf: _DeviceBuffer, spec: TensorSpec) -> object:
    """A memref descriptor of `buf`'s memory with `spec`'s shape (row-major, offset 0)."""
    from mlir.runtime import as_ctype, make_nd_memref_descriptor

    dtype = np.dtype(spec.numpy_dtype())
    desc_t = make_nd_memref_descriptor(len(spec.shape), as_ctype(dtype))
    d = desc_t()
    d.allocated = buf.ptr
    d.aligned = ctypes.cast(ctypes.c_void_p(buf.ptr), dict(desc_t._fields_)["aligned"])
    d.offset = 0
    if spec.shape:
        strides, acc = [], 1
        for s in reversed(spec.shape):
            strides.append(acc)
            acc *= s
        d.shape = (ctypes.c_longlong * len(spec.shape))(*spec.shape)
        d.strides = (ctypes.c_longlong * len(spec.shape))(*reversed(strides))
    return d


class CudaNetwork:
    """A compiled model on the GPU (`Kernel` interface: `run`, `time`, `alloc_outputs`); numpy in
    and out, everything between on the device. Built by `compile_network`."""

    profile_segments = None  # per-call profiling is CPU-only (`CompiledNetwork.profile`)

    def __init__(self, task: SearchTask, split: ParentSplit, constants: list[np.ndarray],
                 kernels: dict[str, CudaKernel], callees: dict[str, SearchTask],
                 host_kernels: dict[str, object] | None = None) -> None:
        self.task = task
        self._kernels = kernels  # keeps the engines alive
        host_kernels = host_kernels or {}
        self.host_tasks = sorted({t.name for h, t in ((t.hash, t) for t in callees.values()) if h in host_kernels})
        self._lib = runtime_lib()
        self._buffers: list[_DeviceBuffer] = []
        slots: dict[str, _Slot] = {}

        def new_slot(name: str, spec: TensorSpec) -> _Slot:
            buf = _DeviceBuffer(spec.shape, np.dtype(spec.numpy_dtype()))
            self._buffers.append(buf)
            slots[name] = _Slot(spec, buf, buf.desc)
            return slots[name]

        self._inputs = [new_slot(f"in{i}", s) for i, s in enumerate(task.inputs)]
        for (name, spec), value in zip(split.constants, constants, strict=True):
            new_slot(name, spec).buffer.upload(value)
        self._steps: list[_Step | _HostStep] = []
        self._outputs: list[_Slot] = []
        for entry in split.plan:
            if entry[0] == "view":
                _, src, dst, spec = entry
                base = slots[src]
                if int(np.prod(spec.shape)) != int(np.prod(base.spec.shape)):
                    raise LoweringError("lower", f"{task.name}: a reshape from {base.spec.shape} to {spec.shape}")
                slots[dst] = _Slot(spec, base.buffer, _view_desc(base.buffer, spec))
            elif entry[0] == "call":
                _, callee, operands, results = entry
                t = callees[callee]
                outs = [new_slot(r, s) for r, s in zip(results, t.outputs, strict=True)]
                descs = [slots[o].desc for o in operands] + [s.desc for s in outs]
                for o, spec in zip(operands, t.inputs, strict=True):
                    if tuple(slots[o].spec.shape) != tuple(spec.shape):
                        slots[o] = _Slot(spec, slots[o].buffer, _view_desc(slots[o].buffer, spec))
                        descs[operands.index(o)] = slots[o].desc
                if t.hash in host_kernels:
                    self._steps.append(_HostStep(callee, t, host_kernels[t.hash], [slots[o] for o in operands], outs))
                    continue
                kernel = kernels[t.hash]
                descs += [b.desc for b in kernel.workspace_buffers()]  # its intermediates: the kernel's, kept
                ptrs = [ctypes.pointer(ctypes.pointer(d)) for d in descs]
                packed = (ctypes.c_void_p * len(ptrs))()
                for i, p in enumerate(ptrs):
                    packed[i] = ctypes.cast(p, ctypes.c_void_p)
                func = kernel.engine.lookup(t.func_name)
                self._steps.append(_Step(callee, t, func, packed, [ptrs, descs]))
            elif entry[0] == "return":
                self._outputs = [slots[o] for o in entry[1]]

    def alloc_outputs(self) -> list[np.ndarray]:
        return [np.zeros(s.shape, dtype=s.numpy_dtype()) for s in self.task.outputs]

    def _upload(self, inputs: list[np.ndarray]) -> None:
        if len(inputs) != len(self.task.inputs):
            raise ValueError(f"{self.task.name}: expected {len(self.task.inputs)} inputs, got {len(inputs)}")
        for slot, a in zip(self._inputs, inputs, strict=True):
            if tuple(np.shape(a)) != tuple(slot.spec.shape):
                raise ValueError(f"{self.task.name}: input of shape {tuple(np.shape(a))}, expected {slot.spec.shape}")
            slot.buffer.upload(a)

    def _calls(self, number: int) -> None:
        """`number` model calls back to back; one synchronisation at the end."""
        with deferred_synchronisation(self._lib):
            for _ in range(number):
                for step in self._steps:
                    if isinstance(step, _HostStep):
                        self._on_host(step)
                    else:
                        step.func(step.packed)

    def _on_host(self, step: _HostStep) -> None:
        if self._lib is not None:
            self._lib.ansorSynchronizeReused()  # the kernels before it have written its operands
        ins = [s.buffer.download().reshape(spec.shape) for s, spec in zip(step.operands, step.task.inputs, strict=True)]
        for slot, out in zip(step.results, step.kernel.run(ins), strict=True):
            slot.buffer.upload(out)

    def run(self, inputs: list[np.ndarray], outputs: list[np.ndarray] | None = None) -> list[np.ndarray]:
        self._upload(inputs)
        if outputs is not None:  # poisoned outputs: a result the plan never writes stays poisoned
            for slot, o in zip(self._outputs, outputs, strict=True):
                slot.buffer.upload(o)
            for kernel in self._kernels.values():  # and so do intermediates inside a task
                kernel.poison_workspace()
        self._calls(1)
        _check_device(f"running {self.task.name}")
        return write_back([s.buffer.download().reshape(s.spec.shape) for s in self._outputs], outputs)

    def time(self, inputs: list[np.ndarray], number: int) -> float:
        """Seconds for `number` model calls back to back (one synchronisation at the end)."""
        import time

        self._upload(inputs)
        t0 = time.perf_counter()
        self._calls(number)
        elapsed = time.perf_counter() - t0
        _check_device(f"timing {self.task.name}")
        return elapsed

    def __del__(self) -> None:
        try:
            for b in self._buffers:
                b.free()
        except Exception:  # noqa: BLE001, S110 -- interpreter shutdown: nothing left to free
            pass


def build_kernels(tasks: list[SearchTask], scripts: dict[str, str | None], arch: str,
                  processes: int | None = None) -> tuple[dict[str, bytes], dict[str, str]]:
    """Each task's artifact (`build_task_cuda`: its script, or the default schedule, to PTX), built
    in parallel worker processes (spawned: an MLIR assertion ends a worker, not the caller).
    Returns (task hash -> artifact, task hash -> one-line error naming the task). When a worker
    dies, the pool is broken for every task still pending: those are built again one process
    each, so the error lands on the task that aborted."""
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    n = max(1, min(len(tasks), processes or cores))
    log.info("building %d GPU kernels in %d processes", len(tasks), n)
    spawn = multiprocessing.get_context("spawn")
    out: dict[str, bytes] = {}
    errors: dict[str, str] = {}
    again: list[SearchTask] = []

    def take(t: SearchTask, result: tuple[bytes | None, str, str]) -> None:
        artifact, stage, error = result
        if artifact is None:
            errors[t.hash] = f"{t.name}: {stage}: {error}"
        else:
            out[t.hash] = artifact

    with ProcessPoolExecutor(n, mp_context=spawn) as pool:
        futures = [(t, pool.submit(_build_one, t, scripts.get(t.hash), arch)) for t in tasks]
        for t, fut in futures:
            try:
                take(t, fut.result())
            except BrokenProcessPool:
                again.append(t)
    for t in again:
        with ProcessPoolExecutor(1, mp_context=spawn) as alone:
            try:
                take(t, alone.submit(_build_one, t, scripts.get(t.hash), arch).result())
            except BrokenProcessPool:
                errors[t.hash] = f"{t.name}: the build process died (an MLIR assertion or LLVM fatal error)"
    return out, errors


def _build_one(task: SearchTask, script: str | None, arch: str) -> tuple[bytes | None, str, str]:
    """`build_task_cuda` in a worker: (artifact, "", "") or (None, stage, one-line error); a
    `LoweringError` does not cross the process boundary (its constructor takes two arguments)."""
    from ansor.targets.cuda.lowering import build_task_cuda

    try:
        return build_task_cuda(task, script, arch=arch), "", ""
    except LoweringError as exc:
        return None, exc.stage, str(exc).splitlines()[0] if str(exc) else "failed"


def compile_network(task: SearchTask, callees: dict[str, SearchTask], scripts: dict[str, str | None], *,
                    processes: int | None = None) -> CudaNetwork:
    """The GPU counterpart of the CPU target's `compile_network`: `task.ir` is the partitioned
    model, `callees` maps each outlined callee to its task, `scripts` each task hash to its best
    script (None or absent: the default GPU schedule); the kernels build in `processes` worker
    processes (default: one per core, `build_kernels`). Raises `LoweringError`."""
    from ansor.targets import get_target
    from ansor.targets.cuda.lowering import load_task_cuda
    from ansor.targets.cuda.rules import gpu_schedulable
    from ansor.targets.cuda.runtime import device_arch

    split = split_parent(task)
    constants = evaluate_constants(task, split)
    distinct = list({t.hash: t for t in callees.values()}.values())
    on_gpu, host = [], {}
    for t in distinct:
        ok, why = (True, "") if scripts.get(t.hash) is not None else gpu_schedulable(t)
        if ok:
            on_gpu.append(t)
            continue
        log.warning("%s: %s has no GPU schedule (%s): it runs on the CPU between the kernels, its data "
                    "copied off and back onto the card", task.name, t.name, why)
        host[t.hash] = get_target("cpu").compile(dataclasses.replace(t, target="cpu"), None)
    arch = device_arch()
    artifacts, errors = build_kernels(on_gpu, scripts, arch, processes) if on_gpu else ({}, {})
    # A tuned script that does not build here (an older log, another MLIR): the default schedule.
    retry = [t for t in on_gpu if t.hash in errors and scripts.get(t.hash) is not None]
    for t in retry:
        log.warning("%s: %s; using its default GPU schedule", task.name, errors.pop(t.hash))
    if retry:
        more, errs = build_kernels(retry, {}, arch, processes)
        artifacts.update(more)
        errors.update(errs)
    for t in on_gpu:
        if t.hash in errors:
            log.warning("%s: %s: it runs on the CPU between the kernels", task.name, errors[t.hash])
            host[t.hash] = get_target("cpu").compile(dataclasses.replace(t, target="cpu"), None)
    kernels = {t.hash: load_task_cuda(t, artifacts[t.hash], defer_sync=True) for t in on_gpu if t.hash in artifacts}
    return CudaNetwork(task, split, constants, kernels, callees, host)

"""Measurement: build and run candidates in isolated worker processes, verify, time.

    MeasureInput(task, schedule, script) --builder (apply script, lower; builder.py)--> artifact
        --runner (JIT, check against the reference, time in a native loop; runner.py)--> MeasureResult

This module holds the records (`MeasureInput`, `MeasureResult`, `RunOptions`), the `Measurer`
interface and the worker process both halves run in; `LocalMeasurer` (local.py) is a builder and
a runner on this machine, `RayMeasurer` (cluster.py) many of them on a Ray cluster.

Building and running happen in a worker process (`multiprocessing`, spawn) with a per-candidate
timeout and a memory cap: MLIR aborts the process on internal assertion failures, a bad schedule
can hang or segfault, and none of that may take the tuner down. A dead or hung worker is replaced
and the candidate becomes a `MeasureResult` with an error code. Failures are results, never
exceptions.

The reference output of a task is computed once by its untuned program (trusted lowering,
no transform script) on seeded random inputs, together with the untuned latency.
"""

from __future__ import annotations

import abc
import ctypes
import enum
import functools
import importlib
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from ansor.core.dtypes import as_dtype, is_float, is_float_type
from ansor.space.schedule import Schedule
from ansor.core.task import SearchTask
from ansor.core import mlir as core_mlir
from ansor.targets import compile_task, get_target


class MeasureError(str, enum.Enum):
    """Why a candidate has no latency. The value is what logs store."""

    INSTANTIATION = "instantiation"  # the schedule does not fit its sketch
    APPLY = "apply"  # the transform script failed on the payload
    COMPILE = "compile"  # lowering or JIT failed
    RUNTIME = "runtime"  # the kernel raised while running
    CRASH = "crash"  # the worker died (signal: MLIR assertion, segfault, ...)
    TIMEOUT = "timeout"  # build + run exceeded the per-candidate time limit
    WRONG_ANSWER = "wrong_answer"  # output differs from the reference
    OOM = "oom"  # the worker hit its memory cap


@dataclass(frozen=True)
class MeasureInput:
    """What to measure: a task, a point of its search space, and the concrete script (None = untuned)."""

    task: SearchTask
    schedule: Schedule
    script: str | None


@dataclass(frozen=True)
class MeasureResult:
    """Outcome of one candidate. `costs` are seconds per call, one per repeat."""

    costs: tuple[float, ...] = ()
    error: MeasureError | None = None
    error_msg: str = ""
    build_s: float = 0.0
    total_s: float = 0.0
    timestamp: float = field(default_factory=time.time)
    #: The host that ran it when that is not this process's (a cluster's runner node; see
    #: `provenance`); "" = here.
    node: str = ""
    #: Seconds of the runner's phases ("load": JIT an artifact or compile the script, "verify",
    #: "time"), where the runner reports them; for profiling the measurer, not logged.
    phases: dict[str, float] = field(default_factory=dict, compare=False, repr=False)

    @property
    def latency(self) -> float:
        """Median seconds per call; `inf` for a failed candidate."""
        return statistics.median(self.costs) if self.costs and self.error is None else math.inf


@dataclass(frozen=True)
class RunOptions:
    """TVM LocalRunner-style timing: `repeat` measurements, each averaging `number` calls,
    `number` raised until one measurement lasts at least `min_repeat_ms`."""

    number: int = 1
    repeat: int = 3
    min_repeat_ms: float = 100.0
    timeout_s: float = 30.0
    threads: int = 0  # OpenMP threads; 0 = all cores
    #: Verification tolerances (`verify.check_output`): None = by dtype (rtol) and derived from the
    #: task's reduction length and the reference's RMS (atol).
    rtol: float | None = None
    atol: float | None = None
    #: Cold measurement (CPU): each of the `repeat` measurements is one call timed after the
    #: caches were prepared (`number` and `min_repeat_ms` are ignored; `prepare_caches`).
    #: `True` or "all": a buffer of twice the last-level cache is written first, so every input,
    #: output, the code and the idle threads are cold. "weights": every input but the first is
    #: evicted line by line (TVM's `enable_cpu_cache_flush` flushes every argument but the
    #: first), as inside a model whose weights exceed the last-level cache while each task's
    #: input was just written by the previous task. Latencies measured either way are not
    #: comparable with warm ones: keep them in their own log.
    cache_flush: bool | str = False

    def __post_init__(self) -> None:
        flush_mode(self.cache_flush)  # a bad value fails here, not in a worker


#: A candidate whose first call is this many times slower than the task's best so far is timed
#: once instead of `repeat` times: its exact latency cannot matter, and slow candidates dominate
#: tuning time otherwise.
SLOW_FACTOR = 8.0


OnResult = Callable[[int, "MeasureResult"], None]


class Measurer(abc.ABC):
    """Turns a batch of inputs into results (same order). Implementations never raise for bad candidates."""

    @abc.abstractmethod
    def measure(self, inputs: list[MeasureInput], on_result: OnResult | None = None) -> list[MeasureResult]:
        """Results in input order; `on_result(i, result)` is called as soon as input i is done
        (the tuner logs it at once, so a killed run loses at most the candidate in flight)."""

    def baseline(self, task: SearchTask) -> MeasureResult:
        """The untuned program's result (latency of the baseline); default: unknown."""
        return MeasureResult(error=MeasureError.RUNTIME, error_msg="no baseline")

    #: What records measured by this measurer name as their "measurer" (see `provenance`).
    kind: str = "custom"

    def provenance(self, task: SearchTask) -> dict[str, Any]:
        """How this measurer measures `task`, stored in every record (`provenance.provenance`)."""
        from ansor.measure.provenance import provenance

        opts = getattr(self, "options", None)
        return provenance(self.kind if self.kind != "custom" else f"custom:{type(self).__name__}",
                          threads=getattr(opts, "threads", 0), cache_flush=getattr(opts, "cache_flush", False),
                          target=task.target)

    def close(self) -> None:
        pass


# ----------------------------------------------------------------------------------------------
# Reference data


def make_inputs(task: SearchTask) -> list[np.ndarray]:
    """Seeded random inputs for `task` (the same in every process). An integer input used as an
    index (an embedding's token ids, a gather's positions) takes values in [0, size) of every
    dimension it indexes (`index_bounds`); other integers take values in [-8, 8). Floats (bf16
    too) are drawn uniformly from [-1, 1) and rounded to their type."""
    rng = np.random.default_rng(int(task.hash[:8], 16) if task.hash else 0)
    bounds = index_bounds(task) if any(not is_float_type(s.dtype) for s in task.inputs) else {}
    out = []
    for i, s in enumerate(task.inputs):
        if is_float_type(s.dtype):
            out.append(rng.uniform(-1.0, 1.0, size=s.shape).astype(s.numpy_dtype()))
        elif i in bounds:
            out.append(rng.integers(0, bounds[i], size=s.shape).astype(s.numpy_dtype()))
        else:
            out.append(rng.integers(-8, 8, size=s.shape).astype(s.numpy_dtype()))
    return out


#: Ops through which an integer keeps its value (as far as indexing goes).
_VALUE_PRESERVING = {"arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui", "arith.trunci",
                     "tensor.extract_slice", "tensor.collapse_shape", "tensor.expand_shape", "tensor.cast"}


@functools.cache
def _index_bounds(ir_text: str, func_name: str) -> dict[int, int]:
    from mlir import ir

    from ansor.core import native as _native

    _native.register_everything()
    bounds: dict[int, int] = {}
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(ir_text)
        func = next(op.operation for op in module.body.operations if op.operation.name == "func.func"
                    and ir.StringAttr(op.operation.attributes["sym_name"]).value == func_name)
        for i, arg in enumerate(func.regions[0].blocks[0].arguments):
            seen: set = set()
            work = [arg]
            while work:
                v = work.pop()
                if v in seen or len(seen) > 256:
                    continue
                seen.add(v)
                for use in v.uses:
                    user, k = use.owner, use.operand_number
                    name = user.name
                    if name.startswith("linalg.") and user.regions and user.regions[0].blocks:
                        block = user.regions[0].blocks[0]  # operand k <-> block argument k
                        if k < len(block.arguments):
                            work.append(block.arguments[k])
                    elif name in _VALUE_PRESERVING or (name == "tensor.extract" and k == 0):
                        work.extend(user.results)
                    elif name == "tensor.extract" and k > 0:
                        dim = ir.RankedTensorType(user.operands[0].type).get_dim_size(k - 1)
                        if dim > 0:
                            bounds[i] = min(bounds.get(i, dim), dim)
    return bounds


def index_bounds(task: SearchTask) -> dict[int, int]:
    """{input position: exclusive bound} for the integer inputs of `task` whose values index a
    tensor (through `tensor.extract`, after casts and linalg block arguments): the smallest size
    of the dimensions they index. Random indices outside it would trip torch-mlir's bound
    asserts (an abort) or read out of bounds."""
    try:
        return _index_bounds(task.ir, task.func_name)
    except Exception:  # noqa: BLE001 - unparsable IR fails later with its own error
        return {}


#: Version of the cached reference files (bump when inputs or the reference's definition change).
REF_VERSION = 1


def verify_kernel(kernel: Any, inputs: list[np.ndarray], expected: list[np.ndarray], opts: RunOptions, *,
                  corrupt: bool = False, runs: list[int] | None = None,
                  scratch: list[np.ndarray] | None = None,
                  slack: list[np.ndarray | None] | None = None) -> str | None:
    """Run `kernel` into poisoned output buffers (`verify.poisoned`; a second sentinel where the
    reference holds the first) and compare with `expected`; None or the one-line mismatch.
    `corrupt` is the fault-injection hook's "wrong" (outputs shifted by 1). A caller that
    verifies many candidates against one reference passes what does not change between them:
    `runs` (`verify.sentinel_runs(expected)`) and `scratch` (output arrays of the task's
    shapes, re-poisoned here before each run instead of allocated), and the reference's
    per-element `slack` (`reference_slack`)."""
    from ansor.measure import verify

    for which in verify.sentinel_runs(expected) if runs is None else runs:
        bufs = verify.poisoned(kernel.task.outputs, which) if scratch is None else verify.poison(scratch, which)
        outs = kernel.run(inputs, bufs)
        if corrupt:
            outs = [o + 1 for o in outs]
        bad = verify.check_task_outputs(kernel.task, outs, expected, rtol=opts.rtol, atol=opts.atol, slack=slack)
        if bad is not None:
            return bad
    return None


def _numpy_reference(task: SearchTask, inputs: list[np.ndarray]) -> list[np.ndarray] | None:
    from ansor.measure.baselines import numpy_function

    fn = numpy_function(task) if len(task.outputs) == 1 else None
    if fn is None and len(task.outputs) == 1:
        from ansor.measure.interp import numpy_program

        prog = numpy_program(task.ir)  # a contraction + element-wise consumers (a fused GEMM epilogue)
        if prog is not None:
            try:
                return _as_reference(task, prog(*inputs)[0])
            except (RuntimeError, ValueError, TypeError, FloatingPointError):
                return None  # the interpreter met an op it does not model: the CPU program decides
    if fn is None:
        return None
    odt = np.dtype(task.outputs[0].numpy_dtype())
    if is_float(odt):
        # Half-precision operands with a wider result (f16/bf16 x f16/bf16 -> f32): linalg extends
        # the operands before multiplying, so the reference computes in the result's precision
        # (exact products, BLAS sums), never in the operands' (numpy has no f16 BLAS). A bfloat16
        # result (ml_dtypes' kind "V": no BLAS, every ufunc step rounded) is computed in f32.
        cdt = odt if odt.kind == "f" else np.dtype(np.float32)
        inputs = [a.astype(cdt) if is_float(a.dtype) and (a.dtype.itemsize < cdt.itemsize or a.dtype.kind != "f")
                  else a for a in inputs]
    return _as_reference(task, fn(*inputs))


def _as_reference(task: SearchTask, out) -> list[np.ndarray]:
    """The single output `out` in the task's result type and shape."""
    odt = np.dtype(task.outputs[0].numpy_dtype())
    return [np.asarray(out).astype(odt).reshape(task.outputs[0].shape)]


def reference_outputs(task: SearchTask) -> tuple[list[np.ndarray], list[np.ndarray], Any]:
    """(inputs, reference outputs, the CPU kernel that computed them or None) for `task`.

    CPU task: the untransformed program (no script; trusted lowering) into poisoned outputs,
    cross-checked against numpy where `baselines` has the task; the kernel is returned so its
    latency becomes the baseline. GPU task: numpy where it has the task, else the untransformed
    program lowered for the CPU -- never a GPU schedule, so no GPU rewrite can agree with itself;
    cached on disk (`config.CACHE_DIR/refs`) since the CPU loops of a large GPU task are slow.
    Raises RuntimeError when the untransformed program and numpy disagree."""

    from ansor import config
    from ansor.measure import verify

    inputs = make_inputs(task)
    ref_task = get_target(task.target).reference_task(task)
    if ref_task is not None:
        path = config.CACHE_DIR / "refs" / f"{task.hash}-{task.target}-v{REF_VERSION}.npz"
        if path.exists():
            try:
                data = np.load(path)  # (npz stores bfloat16 as raw "V2": `as_dtype` views it back)
                return inputs, [as_dtype(data[f"o{i}"], s.numpy_dtype()) for i, s in enumerate(task.outputs)], None
            except (OSError, ValueError, KeyError):
                pass  # a torn cache file: recompute
        outs = _numpy_reference(task, inputs)
        if outs is None:
            ref_kernel = compile_task(ref_task, None)
            outs = ref_kernel.run(inputs, verify.poisoned(task.outputs))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, **{f"o{i}": o for i, o in enumerate(outs)})
        os.replace(tmp, path)
        return inputs, outs, None
    kernel = compile_task(task, None)
    outs = kernel.run(inputs, verify.poisoned(task.outputs))
    np_outs = _numpy_reference(task, inputs)
    if np_outs is not None:
        bad = verify.check_task_outputs(task, outs, np_outs)
        if bad is not None:
            raise RuntimeError(f"the untransformed program disagrees with numpy: {bad}")
    return inputs, outs, kernel


def reference_slack(task: SearchTask, inputs: list[np.ndarray], outs: list[np.ndarray],
                    kernel: Any = None) -> list[np.ndarray | None]:
    """`verify.task_slack` of the reference `outs` that `reference_outputs` gave (with its `kernel`,
    the CPU program that computed them, or None: a GPU task's reference, numpy or the
    untransformed program on the CPU), computed by the same reference program on perturbed
    inputs. A GPU task's is cached on disk beside its reference."""
    from ansor import config
    from ansor.measure import verify

    if kernel is not None:
        return verify.task_slack(task, inputs, outs, lambda xs: kernel.run(xs, verify.poisoned(task.outputs)))
    path = config.CACHE_DIR / "refs" / f"{task.hash}-{task.target}-slack-v{REF_VERSION}.npz"
    if path.exists():
        try:
            data = np.load(path)
            return [data[f"s{i}"] if f"s{i}" in data.files else None for i in range(len(outs))]
        except (OSError, ValueError, KeyError):
            pass  # a torn cache file: recompute
    ref_kernel = None

    def reference(xs: list[np.ndarray]) -> list[np.ndarray]:
        nonlocal ref_kernel
        got = _numpy_reference(task, xs)
        if got is None:
            if ref_kernel is None:
                ref_kernel = compile_task(get_target(task.target).reference_task(task), None)
            got = ref_kernel.run(xs, verify.poisoned(task.outputs))
        return got

    slack = verify.task_slack(task, inputs, outs, reference)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
    np.savez(tmp, **{f"s{i}": a for i, a in enumerate(slack) if a is not None})
    os.replace(tmp, path)
    return slack


# ----------------------------------------------------------------------------------------------
# Worker process


def _worker_main(conn_in: Connection, conn: Connection, threads: int, memory_mb: int) -> None:
    """Loop: receive a request, answer it. Runs in a fresh process started by `_Worker`
    (`python -m ansor.measure.worker`); stderr goes to a file the parent reads after a crash.

    Request kinds: "reference" (reference outputs + untuned latency), "artifact" (a builder's
    half: apply + lower, `Target.build`), "run" (a runner's half: load the artifact, or compile
    the script when there is none, then verify and time), the same split in two ("load", then
    "measure_loaded": verify and time it: a runner that holds the device only while measuring), "build"
    (compile only), "features" (program features, for `search/features.py`)."""
    os.environ["OMP_NUM_THREADS"] = str(threads or os.cpu_count() or 1)
    if memory_mb > 0:
        import resource

        cap = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    from ansor import config

    #: per task hash: inputs, reference outputs, the sentinel runs they need, output scratch,
    #: the reference's per-element slack
    refs: dict[str, tuple[list[np.ndarray], list[np.ndarray], list[int], list[np.ndarray],
                          list[np.ndarray | None]]] = {}

    def reference(task: SearchTask, ref_path: str) -> tuple[list[np.ndarray], list[np.ndarray], list[int],
                                                            list[np.ndarray], list[np.ndarray | None]]:
        if task.hash not in refs:
            from ansor.measure import verify

            data = np.load(ref_path)
            n_in = len(task.inputs)
            specs = list(task.inputs) + list(task.outputs)  # npz keeps bfloat16 as raw "V2"
            arrays = [as_dtype(data[f"a{i}"], specs[i].numpy_dtype()) for i in range(len(specs))]
            expected = arrays[n_in:]
            slack = [data[f"s{i}"] if f"s{i}" in data.files else None for i in range(len(expected))]
            refs[task.hash] = (arrays[:n_in], expected, verify.sentinel_runs(expected),
                               verify.poisoned(task.outputs), slack)
        return refs[task.hash]

    def verify_and_time(kernel: Any, task: SearchTask, req: dict, opts: RunOptions, build_s: float,
                        phases: dict[str, float]) -> dict:
        """Check `kernel` against the reference (poisoned outputs), then time it: the answer."""
        inputs, expected, runs, scratch, slack = reference(task, req["ref_path"])
        # The verification runs come first: they also finish JIT compilation (ORC materializes
        # the code on first lookup: 0.1-1 s), so they are the warm-up and never a timing.
        fault = config.injected_fault(req["script"])
        if fault == "abort":
            os.abort()
        elif fault == "segv":
            ctypes.string_at(0)  # a real invalid read
        elif fault == "hang":
            time.sleep(1e6)
        t0 = time.perf_counter()
        bad = verify_kernel(kernel, inputs, expected, opts, corrupt=fault == "wrong", runs=runs, scratch=scratch,
                            slack=slack)
        t_verified = time.perf_counter()
        phases["verify"] = t_verified - t0
        if bad is not None:
            return {"costs": (), "error": "wrong_answer", "msg": bad, "build_s": build_s, "phases": phases}
        # A candidate far from the best (one warm call slower than `slow_s`) is timed once.
        # (This used to compare the *first* call, which includes JIT compilation and was
        # always slower than slow_s: every candidate but the first was timed by one cold
        # call, ~2-5x too slow for 0.05 ms kernels and biased against parallel ones.)
        costs = time_kernel(kernel, inputs, opts, slow_s=req.get("slow_s", math.inf))
        phases["time"] = time.perf_counter() - t_verified
        return {"costs": costs, "error": None, "msg": "", "build_s": build_s, "phases": phases}

    #: (key, kernel, build_s, load_s) of the last "load" request, until its "measure"
    loaded: tuple[str, Any, float, float] | None = None

    while True:
        try:
            req = conn_in.recv()
        except EOFError:
            return
        kind = req["kind"]
        t_start = time.perf_counter()
        try:
            task = SearchTask.from_json(req["task"])
            opts = RunOptions(**req["opts"])
            if kind == "features":  # program features of each script (`search/features.py`,
                # loaded by name: measurement sits below the search and never imports it)
                featurize = importlib.import_module("ansor.search.features").featurize

                conn.send({"features": featurize(task, req["scripts"]), "error": None, "msg": "", "build_s": 0.0})
                continue
            if kind == "reference":
                inputs, outs, base_kernel = reference_outputs(task)
                slack = reference_slack(task, inputs, outs, base_kernel)
                if base_kernel is None:  # a GPU task: its baseline is the default GPU schedule
                    base_kernel = compile_task(task, None)
                    bad = verify_kernel(base_kernel, inputs, outs, opts, slack=slack)
                    if bad is not None:
                        raise RuntimeError(f"the default GPU program is wrong: {bad}")
                costs = time_kernel(base_kernel, inputs, opts, slow_s=1.0)
                np.savez(req["ref_path"], **{f"a{i}": a for i, a in enumerate(inputs + outs)},
                         **{f"s{i}": a for i, a in enumerate(slack) if a is not None})
                conn.send({"costs": costs, "error": None, "msg": "", "build_s": 0.0})
                continue
            t0 = time.perf_counter()
            if kind == "artifact":  # the builder's half (`builder.py`): apply + lower, no JIT
                target = get_target(task.target)
                art = target.build(task, req["script"]) if target.supports_artifacts else None
                conn.send({"artifact": art, "error": None, "msg": "", "build_s": time.perf_counter() - t0})
                continue
            if kind == "measure_loaded":  # the second half of a split run: the kernel of the last "load"
                if loaded is None or loaded[0] != req["key"]:
                    raise RuntimeError("no loaded kernel for this candidate (the worker restarted?)")
                _, kernel, build_s, load_s = loaded
                loaded = None
                conn.send(verify_and_time(kernel, task, req, opts, build_s, {"load": load_s}))
                continue
            loaded = None  # a new candidate: the kernel of an earlier "load" is not measured
            if kind in ("run", "load") and req.get("artifact") is not None:  # the runner's half (`runner.py`)
                kernel = get_target(task.target).load(task, req["artifact"])
            else:
                kernel = compile_task(task, req["script"])
            t_loaded = time.perf_counter()
            build_s = t_loaded - t0 + req.get("build_s", 0.0)
            if kind == "build":
                conn.send({"costs": (), "error": None, "msg": "", "build_s": build_s})
                continue
            if kind == "load":  # the first half of a split run (`LocalRunner` with a device lock)
                loaded = (req["key"], kernel, build_s, t_loaded - t0)
                conn.send({"costs": (), "error": None, "msg": "", "build_s": build_s})
                continue
            conn.send(verify_and_time(kernel, task, req, opts, build_s, {"load": t_loaded - t0}))
        except core_mlir.LoweringError as exc:
            code = "apply" if exc.stage == "apply" else "compile"
            conn.send({"costs": (), "error": code, "msg": str(exc), "build_s": time.perf_counter() - t_start})
        except MemoryError:
            conn.send({"costs": (), "error": "oom", "msg": "worker memory cap reached", "build_s": 0.0})
        except Exception as exc:  # a failed candidate is a result, whatever went wrong
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            conn.send({"costs": (), "error": "runtime", "msg": last, "build_s": time.perf_counter() - t_start})


def largest_cache_bytes() -> int:
    """Size of the largest CPU cache the kernel reports (sysfs; 0 when it reports none)."""
    largest = 0
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = f.read_text().strip().upper()
            largest = max(largest, int(text.rstrip("KMG")) * {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1], 1))
        except (OSError, ValueError):
            continue
    return largest


def flush_bytes() -> int:
    """Size of the buffer written before a cold measurement: twice the largest CPU cache, at
    least 64 MiB."""
    return max(2 * largest_cache_bytes(), 64 << 20)


@functools.cache
def _flush_buffer() -> np.ndarray:
    return np.zeros(flush_bytes() // 8, dtype=np.float64)


def flush_cpu_caches() -> None:
    """Evict the CPU caches by writing (and so reading) a buffer larger than all of them."""
    buf = _flush_buffer()
    np.add(buf, 1.0, out=buf)


#: `RunOptions.cache_flush` values -> mode (None: warm).
_FLUSH_MODES = {False: None, None: None, "none": None, True: "all", "all": "all", "weights": "weights"}


def flush_mode(value: bool | str | None) -> str | None:
    """The cold-measurement mode `value` asks for: None (warm), "all" or "weights"."""
    try:
        return _FLUSH_MODES[value]
    except (KeyError, TypeError):
        raise ValueError(f"cache_flush={value!r}: expected False, True, 'all' or 'weights'") from None


def prepare_caches(inputs: list[np.ndarray], mode: str, target: Any) -> None:
    """Before a cold call. "all": evict the caches wholesale (`flush_cpu_caches`). "weights":
    evict every input but the first, line by line (`target.evict`; the CPU's is
    `targets/cpu/cacheflush.py`), leaving the first input, the outputs, the code and the threads
    as the previous call left them; where the target cannot, evict everything and read the
    first input back in."""
    if mode == "weights" and target.evict(inputs[1:]):
        return
    flush_cpu_caches()
    if mode == "weights" and inputs:
        np.add.reduce(np.ascontiguousarray(inputs[0]).reshape(-1).view(np.uint8), dtype=np.uint64)


def time_kernel(kernel: Any, inputs: list[np.ndarray], opts: RunOptions, slow_s: float = math.inf) -> tuple[float, ...]:
    """Per-call seconds, one per repeat. A call slower than `slow_s` is timed once (the untuned
    baseline of a large task can take seconds per call). With `opts.cache_flush`, each repeat is
    one call after `prepare_caches` (everything evicted, or for "weights" every input but the first)."""
    est = kernel.time(inputs, 1)  # also a warm-up
    if est > slow_s:
        return (est,)
    mode = flush_mode(opts.cache_flush)
    target = get_target(kernel.task.target)
    if mode and target.supports_cache_flush:
        outs = kernel.alloc_outputs()
        kernel.time(inputs, 1, outs)  # the outputs' pages are mapped before any timing
        costs = []
        for _ in range(opts.repeat):
            prepare_caches(inputs, mode, target)
            costs.append(kernel.time(inputs, 1, outs))
        return tuple(costs)
    number = max(opts.number, math.ceil(opts.min_repeat_ms / 1e3 / max(est, 1e-9)))
    return tuple(kernel.time(inputs, number) / number for _ in range(opts.repeat))


_SIGNAL_HINTS = {
    signal.SIGABRT: "aborted (an MLIR assertion or LLVM fatal error)",
    signal.SIGSEGV: "segmentation fault",
    signal.SIGBUS: "bus error",
    signal.SIGILL: "illegal instruction",
    signal.SIGFPE: "arithmetic exception",
    signal.SIGKILL: "killed (out of memory?)",
}


class _Worker:
    """One worker process (`python -m ansor.measure.worker`) talking over two pipes; restartable.

    A plain subprocess rather than `multiprocessing`: spawn would re-import the user's main
    module, which breaks scripts that call `ansor.tune` without an `if __name__ == "__main__"` guard.
    """

    def __init__(self, threads: int, memory_mb: int, env: dict[str, str] | None = None) -> None:
        """`env`: environment variables set for this worker (over this process's), at every
        start and restart: the way to give one measurer's workers other `config` knobs (a
        worker reads them when it imports `ansor.config`)."""
        self.threads = threads
        self.memory_mb = memory_mb
        self.env = dict(env or {})
        self._dir = tempfile.mkdtemp(prefix="ansor-worker-")
        self.stderr_path = os.path.join(self._dir, "stderr.txt")
        self.proc: subprocess.Popen | None = None
        self.req: Connection | None = None
        self.resp: Connection | None = None

    def start(self) -> None:
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ansor.measure.worker", str(req_r), str(resp_w), str(self.threads), str(self.memory_mb)],
                pass_fds=(req_r, resp_w), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                # Workers never call BLAS; OpenBLAS's idle threads would spin-wait on the cores
                # the kernels and the other workers use.
                env={**os.environ, "OPENBLAS_NUM_THREADS": "1", **self.env},
            )
        os.close(req_r)
        os.close(resp_w)
        self.req = Connection(req_w, readable=False)
        self.resp = Connection(resp_r, writable=False)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for c in (self.req, self.resp):
            if c is not None:
                c.close()
        self.proc, self.req, self.resp = None, None, None

    def last_stderr(self) -> str:
        try:
            lines = [ln.strip() for ln in Path(self.stderr_path).read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        interesting = [ln for ln in lines if "Assertion" in ln or "error" in ln.lower() or "LLVM ERROR" in ln]
        return (interesting or lines or [""])[-1][:300]

    def request(self, req: dict, timeout_s: float) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self.kill()
            self.start()
        assert self.req is not None and self.resp is not None and self.proc is not None
        try:
            self.req.send(req)
            if self.resp.poll(timeout_s):
                return self.resp.recv()
            self.kill()
            return {"costs": (), "error": "timeout", "msg": f"no result within {timeout_s:g} s", "build_s": 0.0}
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            try:
                code = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
            detail = self.last_stderr()
            self.kill()
            if code is not None and code < 0:
                sig = signal.Signals(-code)
                what = _SIGNAL_HINTS.get(sig, sig.name)
                err = "oom" if sig == signal.SIGKILL else "crash"
                return {"costs": (), "error": err, "msg": f"worker {what}" + (f": {detail}" if detail else ""),
                        "build_s": 0.0}
            return {"costs": (), "error": "crash", "msg": f"worker exited ({code})" + (f": {detail}" if detail else ""),
                    "build_s": 0.0}


class SyntheticMeasurer(Measurer):
    """Deterministic fake latencies derived from the schedule key; no compiler, no workers.

    For tests of the search, scheduling and logging logic (and of kill/resume, through the CLI
    with `ANSOR_SYNTHETIC_MEASURE_DELAY`). Schedules whose key ends in "0" fail with a compile error.
    """

    kind = "synthetic"

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s

    def baseline(self, task: SearchTask) -> MeasureResult:
        return MeasureResult(costs=(1.0,))

    def measure(self, inputs: list[MeasureInput], on_result: OnResult | None = None) -> list[MeasureResult]:
        out = []
        for i, inp in enumerate(inputs):
            if self.delay_s > 0:
                time.sleep(self.delay_s)
            key = inp.schedule.key()
            if key.endswith("0"):
                res = MeasureResult(error=MeasureError.COMPILE, error_msg="synthetic failure", timestamp=0.0)
            else:
                res = MeasureResult(costs=(1e-3 * (1 + int(key[:6], 16) / 0xFFFFFF),), timestamp=0.0)
            out.append(res)
            if on_result is not None:
                on_result(i, res)
        return out


def create_measurer(options: RunOptions | None = None, *, builders: int = 0, cluster: str | None = None,
                    runners: int = 1) -> Measurer:
    """The measurer a tuning run uses: real workers on this machine (`builders` > 0: that many
    building ahead of `runners` runners that share the device, `local.LocalMeasurer`), on a Ray
    cluster (`cluster`: "ray", "ray://HOST:PORT", see `cluster.parse_cluster`; `builders` per
    node, one runner per device), or the synthetic one when the test hook is set."""
    from ansor import config

    config.announce_test_hooks()
    if config.SYNTHETIC_MEASURE_DELAY >= 0:
        return SyntheticMeasurer(config.SYNTHETIC_MEASURE_DELAY)
    if cluster is not None:
        from ansor.measure.cluster import RayMeasurer, parse_cluster

        return RayMeasurer(parse_cluster(cluster), options=options, builders_per_node=max(1, builders))
    from ansor.measure.local import LocalMeasurer

    return LocalMeasurer(options, builders=builders, runners=runners)


def _result(ans: dict, total_s: float) -> MeasureResult:
    err = MeasureError(ans["error"]) if ans.get("error") else None
    return MeasureResult(
        costs=tuple(float(c) for c in ans.get("costs", ())),
        error=err,
        error_msg=str(ans.get("msg", ""))[:500],
        build_s=float(ans.get("build_s", 0.0)),
        total_s=total_s,
        phases={k: float(v) for k, v in ans.get("phases", {}).items()},
    )



def __getattr__(name: str) -> Any:
    """`LocalMeasurer` lives in local.py (it builds on builder.py and runner.py, which build on
    this module); it is still importable from here, as it always was."""
    if name == "LocalMeasurer":
        from ansor.measure.local import LocalMeasurer

        return LocalMeasurer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

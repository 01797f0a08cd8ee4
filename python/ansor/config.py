"""Every environment knob of ansor-mlir, read once, typed, in this one module.

    os.environ --_declare (parse, check, document)--> module attributes (WORKER_MEMORY_MB, ...)
    VARIABLES --tools/gen_config_docs.py--> docs/configuration.md

User options are function arguments and CLI flags; these are for developers, CI and the GPU host.
No other module reads `os.environ` for an ANSOR_* variable, and nothing here touches hardware:
host properties (the CPU's vector width, the GPU's architecture) are asked for lazily by the
target that needs them (`core/host.py`, `targets/cuda/runtime.py`), with these as overrides.
Worker processes inherit the environment, so a knob set here reaches them by its variable; code
that changes one for its workers (the CLI's `--arch`) uses the setter below, which does both.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Variable:
    """One environment knob: its name, type, default (as documented) and meaning."""

    env: str
    attr: str
    kind: str
    default: str
    doc: str


#: Every knob, in declaration order (the table of docs/configuration.md).
VARIABLES: list[Variable] = []


def _declare(env: str, attr: str, kind: str, default: Any, doc: str, parse: Callable[[str], Any],
             shown: str | None = None) -> Any:
    """The value of `env` (`default` when unset or empty), recorded in `VARIABLES` (with `shown` as
    its documented default where the real one depends on the machine)."""
    if shown is None:
        shown = "" if default in (None, "") else str(default)
    VARIABLES.append(Variable(env, attr, kind, shown, " ".join(doc.split())))
    raw = os.environ.get(env)
    if raw is None or raw == "":
        return default
    return parse(raw)


def _int(env: str) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            return int(raw)
        except ValueError as exc:  # a developer typo must not be silently ignored
            raise ValueError(f"environment variable {env}={raw!r} is not an integer") from exc
    return parse


def _flag(raw: str) -> bool:
    return raw not in ("0", "false", "no", "off")


def _vector_bits(raw: str) -> int | None:
    if raw in ("256", "512"):
        return int(raw)
    warnings.warn(f"ANSOR_VECTOR_BITS={raw!r} ignored (expected 256 or 512); using the host's vector width",
                  stacklevel=3)
    return None


WORKER_MEMORY_MB: int = _declare(
    "ANSOR_WORKER_MEMORY_MB", "WORKER_MEMORY_MB", "int (MiB)", 16384,
    "Memory cap of a build/run worker process (RLIMIT_AS); 0 disables it. The cuda target sets 0 "
    "for its workers (the CUDA driver reserves far more address space than any cap).",
    _int("ANSOR_WORKER_MEMORY_MB"))

CACHE_DIR: Path = _declare(
    "ANSOR_CACHE_DIR", "CACHE_DIR", "path", Path.home() / ".cache" / "ansor-mlir",
    "Where reference outputs (`refs/`) and other per-task artifacts are cached.", Path,
    shown="~/.cache/ansor-mlir")

VERBOSE_AFTER_ERRORS: int = _declare(
    "ANSOR_VERBOSE_AFTER_ERRORS", "VERBOSE_AFTER_ERRORS", "int", 16,
    "Consecutive failed candidates after which the tuner switches to verbose error reporting.",
    _int("ANSOR_VERBOSE_AFTER_ERRORS"))

VECTOR_BITS: int | None = _declare(
    "ANSOR_VECTOR_BITS", "VECTOR_BITS", "256 or 512", None,
    "Vector width the CPU search targets (innermost vector tile, register-tile limit). Unset: the "
    "host's, 512 where /proc/cpuinfo lists avx512f, else 256 (asked when the CPU target first "
    "needs it, never at import). Other values warn and are ignored. The test suite pins 256.",
    _vector_bits)

NATIVE_LIB: str = _declare(
    "ANSOR_NATIVE_LIB", "NATIVE_LIB", "path", "",
    "libAnsorMLIR.so to load instead of the installed one (`ansor_native`) or build/dev's: for a "
    "copy of the tree whose library was built elsewhere (the GPU host).", str)

OPENMP_LIB: str = _declare(
    "ANSOR_OPENMP_LIB", "OPENMP_LIB", "path", "",
    "The OpenMP runtime (libiomp5.so or libomp.so) CPU programs are JIT-linked against, instead "
    "of the one found beside Python (the `intel-openmp` dependency), under `pip --target` "
    "folders on sys.path, or by the dynamic linker. A parallel CPU program without one fails to "
    "JIT with a one-line error naming this variable.", str)

CUDA_ARCH: str = _declare(
    "ANSOR_CUDA_ARCH", "CUDA_ARCH", "sm_XY", "",
    "GPU architecture the cuda target compiles for. Unset: asked from device 0 (sm_90 without "
    "a driver). `ansor tune --arch` sets it for its workers.", str)

CUDA_SWIZZLE: int = _declare(
    "ANSOR_CUDA_SWIZZLE", "CUDA_SWIZZLE", "int", 0,
    "Block rows per group of the GPU kernels' block-order swizzle; 0: off (on an H100 it changed "
    "the best matmul-4096 schedules by -1%..+1%, noise).", _int("ANSOR_CUDA_SWIZZLE"))

CUDA_MAX_UNROLLED_WORK: int = _declare(
    "ANSOR_CUDA_MAX_UNROLLED_WORK", "CUDA_MAX_UNROLLED_WORK", "int", 2048,
    "Cap on the straight-line code auto-unrolling leaves per GPU thread, in the scalar "
    "instructions it becomes (`ansor-auto-unroll`'s max-unrolled-work: vector ops by elements, "
    "transfers by 128-bit accesses); 0: none, Ansor's per-loop rule alone. With the cap counted "
    "in loop iterations a 3x3 convolution candidate unrolled into 1727 barriers and took 32 s to "
    "PTX, 0.16 s now; 8192 compiled 24 convolution candidates 1.5x slower than 2048 for PTX of "
    "about the same size (results/compile-time/).", _int("ANSOR_CUDA_MAX_UNROLLED_WORK"))

CUDA_CACHE_WINDOWS: bool = _declare(
    "ANSOR_CUDA_CACHE_WINDOWS", "CUDA_CACHE_WINDOWS", "bool", True,
    "GPU sketches cache a convolution's windowed input (the image) in shared memory, as its "
    "filter, instead of every thread reading its windows from global memory (on an H200 the 97x97 "
    "13 -> 29-channel convolution's tuned program ran 13.9 -> 10.6 µs); off: the filter only "
    "(the ablation). Records do not carry it: replay a log with the setting it was tuned with.", _flag)

CUDA_NOALIAS: bool = _declare(
    "ANSOR_CUDA_NOALIAS", "CUDA_NOALIAS", "bool", False,
    "Mark GPU kernel pointer arguments noalias (ld.global.nc); off: on an H100 it made the best "
    "matmul-4096 schedules 9-18% slower.", _flag)

def _opt_level(env: str, raw: str) -> int:
    level = _int(env)(raw)
    if not 0 <= level <= 3:
        raise ValueError(f"environment variable {env}={raw!r}: expected an LLVM optimisation level 0-3")
    return level


CUDA_HOST_OPT_LEVEL: int = _declare(
    "ANSOR_CUDA_HOST_OPT_LEVEL", "CUDA_HOST_OPT_LEVEL", "0-3", 0,
    "LLVM optimisation level of a CUDA program's host code (the launch glue the runner JITs; the "
    "kernels are compiled at O3 by the NVPTX back-end either way). O0 halves the runner's load "
    "phase on an H200 host (71 -> 37 ms a matmul candidate) and left kernel timings unchanged "
    "(median ratio 1.002; results/build-pool/README.md, c6108af).",
    lambda raw: _opt_level("ANSOR_CUDA_HOST_OPT_LEVEL", raw))


def _cuda_binary(raw: str) -> str:
    if raw in ("auto", "ptx", "cubin"):
        return raw
    raise ValueError(f"environment variable ANSOR_CUDA_BINARY={raw!r}: expected auto, ptx or cubin")


CUDA_BINARY: str = _declare(
    "ANSOR_CUDA_BINARY", "CUDA_BINARY", "ptx, cubin or auto", "ptx",
    "What a CUDA build embeds: `ptx` (the driver assembles it when the runner loads the module); "
    "`cubin` runs `ptxas` in the builder (`gpu-module-to-binary` format=bin); `auto`: cubin where "
    "a `ptxas` is found (PATH, CUDA_ROOT, CUDA_PATH, /usr/local/cuda, pip's nvidia-cuda-nvcc, "
    "Triton's), else ptx. On an H200 host cubins did not raise candidates per minute (the runner's "
    "load is host JIT, not the driver's PTX compile: results/build-pool/), so PTX stays the default "
    "(no dependence on a ptxas matching the driver). `emit_ptx` always stops at PTX.", _cuda_binary)

CUDA_REUSE_STREAM: bool = _declare(
    "ANSOR_CUDA_REUSE_STREAM", "CUDA_REUSE_STREAM", "bool", True,
    "JIT-compiled CUDA programs launch on one reused stream per thread instead of the stream MLIR "
    "22 creates and destroys around every launch (~5.5 µs less per call on an H200).",
    _flag)

CUDA_TIME_DEFERRED: bool = _declare(
    "ANSOR_CUDA_TIME_DEFERRED", "CUDA_TIME_DEFERRED", "bool", True,
    "GPU timings (the tuner's, `CudaKernel.time`) queue their calls back to back and synchronise "
    "once at the end, as a compiled network runs its kernels: a microsecond kernel is then timed "
    "as itself, not as the ~10 µs launch + synchronise round trip that hid the differences between "
    "row-wise candidates. Off: every call synchronises (the timings of logs before 2026-11-29).",
    _flag)

VERIFY_FAST: bool = _declare(
    "ANSOR_VERIFY_FAST", "VERIFY_FAST", "bool", True,
    "Verification first tries a chunked pass in the outputs' own precision that accepts outputs "
    "within half the smallest tolerance (`verify._clearly_within`: ~2 ms for a 2048x768 f32 output "
    "where the exact f64 check takes ~50 ms), and runs the exact check only when that fails: same "
    "verdicts and messages. Off: the exact check always (the measurer before 2026-11-29; for A/B "
    "runs of `bench/build_pool.py`, configuration part `v0`).",
    _flag)

ALLOW_TEST_HOOKS: bool = _declare(
    "ANSOR_ALLOW_TEST_HOOKS", "ALLOW_TEST_HOOKS", "1", False,
    "Test hooks (ANSOR_INJECT_FAULT, ANSOR_SYNTHETIC_MEASURE_DELAY) act only when this is 1 (the "
    "older name ANSOR_ALLOW_FAULTS=1 is accepted too), so none can leak into a real run; an "
    "active hook prints a banner and its records say so (measurer \"synthetic\").",
    lambda raw: raw == "1") or os.environ.get("ANSOR_ALLOW_FAULTS") == "1"

INJECT_FAULT: str = _declare(
    "ANSOR_INJECT_FAULT", "INJECT_FAULT", "KIND[:N],...", "",
    "Test hook: faults to inject into measured candidates, KIND in abort / segv / hang / wrong; "
    "with :N only candidates whose script hash is 0 mod N.", str)
if not ALLOW_TEST_HOOKS:
    INJECT_FAULT = ""

_REQUESTED_SYNTHETIC = os.environ.get("ANSOR_SYNTHETIC_MEASURE_DELAY", "")

SYNTHETIC_MEASURE_DELAY: float = _declare(
    "ANSOR_SYNTHETIC_MEASURE_DELAY", "SYNTHETIC_MEASURE_DELAY", "seconds", -1.0,
    "Test hook: measure with SyntheticMeasurer (fake latencies from the schedule key, no "
    "compiler), sleeping this long per candidate; negative: real measurement.",
    float)
if not ALLOW_TEST_HOOKS:
    SYNTHETIC_MEASURE_DELAY = -1.0

COMMIT_OVERRIDE: str = _declare(
    "ANSOR_COMMIT", "COMMIT_OVERRIDE", "git sha", "",
    "The commit records name, instead of what `git` says: for copies of the tree whose .git is "
    "not theirs (the GPU host; `bash run.sh gpu-test` passes it on).", str)

#: Set by the measurement worker's entry point (`measure/worker.py`), not by the environment:
#: code that can leave the process unusable (a CUDA kernel fault) exits the worker instead.
IN_WORKER: bool = False


def set_cuda_arch(arch: str) -> None:
    """Compile for `arch` here and in every worker started from now on."""
    global CUDA_ARCH
    CUDA_ARCH = arch
    os.environ["ANSOR_CUDA_ARCH"] = arch


def injected_fault(script: str | None) -> str:
    """The fault (or "") the INJECT_FAULT hook assigns to the candidate with this script."""
    if not INJECT_FAULT:
        return ""
    import zlib

    h = zlib.crc32((script or "").encode())
    for i, part in enumerate(INJECT_FAULT.split(",")):
        kind, _, every = part.partition(":")
        n = int(every) if every else 1
        if (h // (i + 1)) % n == 0:
            return kind
    return ""


_announced = False


def announce_test_hooks() -> None:
    """Print (once, to stderr) which test hooks are active, or that a requested one is ignored."""
    global _announced
    if _announced:
        return
    _announced = True
    import sys

    active = []
    if SYNTHETIC_MEASURE_DELAY >= 0:
        active.append("SYNTHETIC measurements (no program is built or run; every latency is fake)")
    if INJECT_FAULT:
        active.append(f"fault injection ({INJECT_FAULT})")
    if active:
        print("ansor: TEST HOOK ACTIVE: " + "; ".join(active), file=sys.stderr, flush=True)
    elif (_REQUESTED_SYNTHETIC or os.environ.get("ANSOR_INJECT_FAULT")) and not ALLOW_TEST_HOOKS:
        print("ansor: warning: ANSOR_SYNTHETIC_MEASURE_DELAY / ANSOR_INJECT_FAULT ignored: test hooks need "
              "ANSOR_ALLOW_TEST_HOOKS=1", file=sys.stderr, flush=True)

"""Developer knobs, read from typed environment variables in this one module.

User options are function arguments and CLI flags; these are for developers and CI only.
"""

from __future__ import annotations

import os
from pathlib import Path


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:  # a developer typo must not be silently ignored
        raise ValueError(f"environment variable {name}={raw!r} is not an integer") from exc


#: Memory cap of a build/run worker process, in MiB (RLIMIT_AS). 0 disables the cap.
WORKER_MEMORY_MB: int = _int("ANSOR_WORKER_MEMORY_MB", 16384)

#: Where reference outputs and other per-task artifacts are cached.
CACHE_DIR: Path = Path(os.environ.get("ANSOR_CACHE_DIR", Path.home() / ".cache" / "ansor-mlir"))

#: Consecutive failed candidates after which the tuner switches to verbose error reporting.
VERBOSE_AFTER_ERRORS: int = _int("ANSOR_VERBOSE_AFTER_ERRORS", 16)

#: Test hooks (fault injection, the synthetic measurer) act only when this is "1" (the older name
#: ANSOR_ALLOW_FAULTS=1 is accepted too), so none can leak into a real run by accident; an active
#: hook prints a banner (`announce_test_hooks`) and its records say so (measurer "synthetic").
ALLOW_TEST_HOOKS: bool = "1" in (os.environ.get("ANSOR_ALLOW_TEST_HOOKS"), os.environ.get("ANSOR_ALLOW_FAULTS"))

#: Test hook: faults to inject into the candidates a worker measures, as "KIND[:N],KIND[:N]..." with
#: KIND in abort / segv / hang / wrong; with ":N" only candidates whose script hash is 0 mod N
#: (deterministic per candidate).
INJECT_FAULT: str = os.environ.get("ANSOR_INJECT_FAULT", "") if ALLOW_TEST_HOOKS else ""


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


_REQUESTED_SYNTHETIC = os.environ.get("ANSOR_SYNTHETIC_MEASURE_DELAY", "")

#: Test hook: measure with `SyntheticMeasurer` (deterministic fake latencies, no compiler) instead of
#: real workers, sleeping this many seconds per candidate. Negative (default) = real measurement.
SYNTHETIC_MEASURE_DELAY: float = float(_REQUESTED_SYNTHETIC) if _REQUESTED_SYNTHETIC and ALLOW_TEST_HOOKS else -1.0

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


#: The git commit records name (`provenance.git_commit`), overriding what `git` says: for copies of
#: the tree whose git metadata is not theirs (the GPU host gets the working tree over an older
#: checkout's .git; `bash run.sh gpu-test` passes it on).
COMMIT_OVERRIDE: str = os.environ.get("ANSOR_COMMIT", "")

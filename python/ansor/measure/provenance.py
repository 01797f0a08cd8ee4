"""Where a measurement came from: host, software and how it was measured.

    measurer kind + RunOptions --provenance()--> {"measurer", "threads", "cache_flush", "cpu", "gpu", "node", ...}
        --> every record of a log (records.py), every results/ file (bench/common.py)

A latency is only comparable with latencies of the same host, measurer and options; readers
(`ansor.compile`, `ansor bench`, `--pretrain`) warn when a log mixes them (`mixed_provenance`).
Nothing here runs at import time: the host is read on first use and cached.
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from pathlib import Path
from typing import Any
from ansor.targets import get_target


@functools.cache
def cpu_model() -> str:
    """The CPU's model name (Linux `/proc/cpuinfo`; `platform.processor()` elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


@functools.cache
def git_commit() -> str | None:
    """The commit of the source tree the package runs from (`+dirty` with local changes), or None
    when it does not run from a git checkout (an installed wheel). `ANSOR_COMMIT` (config) overrides."""
    from ansor import config

    if config.COMMIT_OVERRIDE:
        return config.COMMIT_OVERRIDE
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "-C", str(here), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("+dirty" if dirty else "") if sha else None


def package_version() -> str:
    from ansor import __version__

    return __version__


def host(target: str = "cpu") -> dict[str, Any]:
    """The machine: CPU model and core count, and the GPU's name for a CUDA target."""
    out: dict[str, Any] = {"cpu": cpu_model(), "cores": os.cpu_count() or 1, "node": platform.node()}
    out.update(get_target(target).host_info())
    return out


def provenance(measurer: str, *, threads: int = 0, cache_flush: bool | str = False, target: str = "cpu") -> dict[str, Any]:
    """What a record says about how it was measured. `measurer` names the implementation
    ("local", "synthetic", ...); `threads` 0 means all cores (recorded as the count);
    `cache_flush` is recorded as false, true (everything cold) or "weights"."""
    h = host(target)
    return {
        "measurer": measurer,
        "threads": threads or h["cores"],
        "cache_flush": "weights" if cache_flush == "weights" else cache_flush in (True, "all"),
        "cpu": h["cpu"],
        "gpu": h.get("gpu"),
        "node": h["node"],  # the machine's name (a cluster's records name each runner's node)
        "ansor": package_version(),
        "commit": git_commit(),
    }


#: The fields whose difference makes two latencies incomparable.
COMPARABLE_FIELDS = ("measurer", "threads", "cache_flush", "cpu", "gpu")


def mixed_provenance(provs: list[dict[str, Any] | None]) -> str | None:
    """None when every provenance agrees on `COMPARABLE_FIELDS` (records without one, from logs
    written before provenance existed, count as their own kind "unknown"); else a one-line
    description of the difference."""
    seen: dict[str, set] = {f: set() for f in COMPARABLE_FIELDS}
    for p in provs:
        for f in COMPARABLE_FIELDS:
            seen[f].add("unknown" if p is None else str(p.get(f)))
    diffs = [f"{f}: {' / '.join(sorted(v))}" for f, v in seen.items() if len(v) > 1]
    return "; ".join(diffs) if diffs else None

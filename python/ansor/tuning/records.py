"""Tuning records: an append-only, versioned JSON-lines log, one line per measured candidate.

    (MeasureInput, MeasureResult) --RecordWriter.append (write, flush, fsync)--> LOG.jsonl
    LOG.jsonl --load_records / iter_records--> [Record]

Readers also take logs compressed with xz or gzip (`LOG.jsonl.xz`, `LOG.jsonl.gz`, told by the
suffix) as archived logs are kept; those are read-only: `RecordWriter` refuses them.

A line is written whole and fsync-ed before the tuner goes on, so a process killed at any
instant leaves at most one partial last line; readers skip it with a warning. Each record
carries its key = hash(task IR hash + target + schedule), the task, the schedule, the concrete
transform script (replayable with `ansor-opt --transform-interpreter`) and the result.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
import lzma
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ansor.space.schedule import Schedule
from ansor.measure.measurer import MeasureError, MeasureInput, MeasureResult
from ansor.core.task import SearchTask

log = logging.getLogger(__name__)

#: Version of the record format; readers refuse records of another major version.
LOG_VERSION = 1
#: Version of the sketch generator (rules, preprocessing, script shape). Records of another
#: version are not applied by `ansor.compile` (their scripts may address ops differently). A
#: resumed run counts only records that validate against the current sketch of their name.
SKETCH_VERSION = 2


def record_key(task: SearchTask, schedule: Schedule) -> str:
    payload = json.dumps({"task": task.hash, "target": task.target, "schedule": schedule.to_json()}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Record:
    """One measured candidate."""

    key: str
    task: SearchTask
    schedule: Schedule
    script: str | None
    result: MeasureResult
    version: int = LOG_VERSION
    sketch_version: int = SKETCH_VERSION
    #: How it was measured (`provenance.provenance`: measurer kind, threads, cache flush, CPU
    #: model, GPU name, package version, git commit); None in logs written before it existed.
    provenance: dict[str, Any] | None = None

    @property
    def latency(self) -> float:
        """Seconds per call (median of repeats); `inf` when the candidate failed."""
        return self.result.latency

    @property
    def error(self) -> str | None:
        return self.result.error.value if self.result.error is not None else None

    @property
    def gflops(self) -> float:
        lat = self.latency
        return self.task.flops / lat / 1e9 if math.isfinite(lat) and lat > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        r = self.result
        return {
            "v": self.version,
            "sketch_v": self.sketch_version,
            "key": self.key,
            "task": self.task.to_json(),
            "schedule": self.schedule.to_json(),
            "script": self.script,
            "result": {
                "costs": list(r.costs),
                "latency": r.latency if math.isfinite(r.latency) else None,
                "error": r.error.value if r.error else None,
                "error_msg": r.error_msg,
                "build_s": round(r.build_s, 4),
                "total_s": round(r.total_s, 4),
                "timestamp": r.timestamp,
            },
            **({"provenance": self.provenance} if self.provenance is not None else {}),
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> Record:
        r = d["result"]
        result = MeasureResult(
            costs=tuple(float(c) for c in r["costs"]),
            error=MeasureError(r["error"]) if r.get("error") else None,
            error_msg=r.get("error_msg", ""),
            build_s=float(r.get("build_s", 0.0)),
            total_s=float(r.get("total_s", 0.0)),
            timestamp=float(r.get("timestamp", 0.0)),
        )
        return Record(
            key=d["key"],
            task=SearchTask.from_json(d["task"]),
            schedule=Schedule.from_json(d["schedule"]),
            script=d.get("script"),
            result=result,
            version=int(d["v"]),
            sketch_version=int(d.get("sketch_v", 0)),
            provenance=d.get("provenance"),
        )

    @staticmethod
    def of(inp: MeasureInput, res: MeasureResult) -> Record:
        return Record(record_key(inp.task, inp.schedule), inp.task, inp.schedule, inp.script, res)


class LogError(ValueError):
    """A log that cannot be used (wrong version, not a log): one line naming the file."""


#: Suffixes of compressed (read-only) logs and the stdlib module that opens each.
COMPRESSED_SUFFIXES = {".xz": lzma, ".gz": gzip}


def is_compressed(path: str | Path) -> bool:
    """Whether `path` names an xz- or gzip-compressed log (by its suffix)."""
    return Path(path).suffix.lower() in COMPRESSED_SUFFIXES


def open_log(path: str | Path) -> io.TextIOBase:
    """The log at `path` opened for reading as text, decompressing `.xz` / `.gz` logs."""
    path = Path(path)
    opener = COMPRESSED_SUFFIXES.get(path.suffix.lower())
    if opener is None:
        return path.open("r", encoding="utf-8", errors="replace")
    return opener.open(path, "rt", encoding="utf-8", errors="replace")


def _read_lines(path: Path) -> list[str]:
    lines: list[str] = []
    try:
        with open_log(path) as f:
            for line in f:
                lines.append(line)
    except EOFError:  # a compressed log cut short (copy interrupted): keep what came before the cut
        log.warning("%s: compressed stream ends early; reading the %d lines before the cut", path, len(lines))
    except (lzma.LZMAError, gzip.BadGzipFile) as exc:
        raise LogError(f"{path}: not a valid {path.suffix[1:]} file ({exc})") from None
    return lines


def iter_records(path: str | Path) -> Iterator[Record]:
    """Records of a log in order (`.xz` / `.gz` logs are decompressed). A torn last line (killed
    writer) is skipped with a warning."""
    path = Path(path)
    if not path.exists():
        return
    lines = _read_lines(path)
    seen_valid = False
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError:
            if not seen_valid and i == 0 and len(lines) > 1:
                raise LogError(f"{path}:{i + 1}: not a JSON line: is this an ansor log?") from None
            # A writer killed mid-line leaves a torn line (the next writer starts on a fresh line).
            log.warning("%s:%d: skipping a partial line (a writer was killed mid-write)", path, i + 1)
            continue
        seen_valid = True
        if not isinstance(d, dict) or "v" not in d or "key" not in d:
            raise LogError(f"{path}:{i + 1}: not an ansor record")
        if int(d["v"]) != LOG_VERSION:
            raise LogError(f"{path}:{i + 1}: record version {d['v']} is not supported (this ansor writes {LOG_VERSION})")
        yield Record.from_json(d)


def load_records(path: str | Path) -> list[Record]:
    """All records of the log at `path`, in order (empty when the file does not exist)."""
    return list(iter_records(path))


def check_writable(path: str | Path) -> None:
    """Raise `LogError` (one line naming the file) when `path` is a compressed log: logs are
    appended to, and the `.xz` / `.gz` ones are read-only archives."""
    path = Path(path)
    if is_compressed(path):
        tool = "xz" if path.suffix.lower() == ".xz" else "gzip"
        raise LogError(f"{path}: compressed logs are read-only: decompress it (`{tool} -dk {path}`) "
                       f"to append to {path.with_suffix('')}")


class RecordWriter:
    """Appends records to a log: one JSON line each, flushed and fsync-ed before returning."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        check_writable(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair_tail()
        self._f = self.path.open("a", encoding="utf-8")

    def _repair_tail(self) -> None:
        """If the log ends in a torn line (killed writer), end it so the next record starts clean."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with self.path.open("rb") as f:
            f.seek(-1, os.SEEK_END)
            last = f.read(1)
        if last != b"\n":
            with self.path.open("ab") as f:
                f.write(b"\n")
                f.flush()
                os.fsync(f.fileno())

    def append(self, record: Record) -> None:
        self._f.write(json.dumps(record.to_json(), sort_keys=True) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def warn_if_mixed(records: list[Record], source: str | Path) -> str | None:
    """Log (warning) and return a one-line message when the successful records of `source` were
    measured on different hosts or by different measurers or options
    (`provenance.mixed_provenance`): their latencies are not comparable, so "the best" of them is
    not well defined. None when they agree."""
    from ansor.measure.provenance import mixed_provenance

    ok = [r for r in records if r.error is None]
    diff = mixed_provenance([r.provenance for r in ok]) if ok else None
    if diff is None:
        return None
    line = f"{source} mixes measurements that are not comparable ({diff}); the best record may not be the fastest here"
    log.warning("%s", line)
    return line


def best_record(records: list[Record], task_hash: str | None = None, target: str | None = None,
                *, current_only: bool = False) -> Record | None:
    """The fastest successful record (optionally of one task on one target; with `current_only`,
    only records of this sketch generator version)."""
    best: Record | None = None
    for r in records:
        if task_hash is not None and r.task.hash != task_hash:
            continue
        if target is not None and r.task.target != target:
            continue
        if current_only and r.sketch_version != SKETCH_VERSION:
            continue
        if r.error is None and math.isfinite(r.latency) and (best is None or r.latency < best.latency):
            best = r
    return best

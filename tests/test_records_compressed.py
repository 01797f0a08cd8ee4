"""Logs compressed with xz or gzip (archived results): read like plain ones, never appended to."""

from __future__ import annotations

import gzip
import lzma
import subprocess
import sys
from pathlib import Path

import pytest
from ansor.space.schedule import Schedule
from ansor.measure.measurer import MeasureError, MeasureInput, MeasureResult
from ansor.tuning.records import LogError, Record, RecordWriter, load_records

OPENERS = {".xz": lzma.open, ".gz": gzip.open}


def _rec(task, knob: int, lat: float | None, sketch: str = "mlt_op1") -> Record:
    sch = Schedule.of(sketch, {"x": knob} if sketch != "skip" else {})
    res = MeasureResult(costs=(lat,)) if lat else MeasureResult(error=MeasureError.CRASH, error_msg="boom")
    return Record.of(MeasureInput(task, sch, "// script" if sketch != "skip" else None), res)


def _plain_log(tmp_path: Path, task) -> Path:
    path = tmp_path / "log.jsonl"
    with RecordWriter(path) as w:
        for i, lat in enumerate([3e-3, None, 1e-3, 2e-3]):
            w.append(_rec(task, i, lat))
    return path


def _compress(path: Path, suffix: str, text: str | None = None) -> Path:
    out = path.with_name(path.name + suffix)
    with OPENERS[suffix](out, "wt", encoding="utf-8") as f:
        f.write(path.read_text() if text is None else text)
    return out


@pytest.mark.parametrize("suffix", sorted(OPENERS))
def test_compressed_log_reads_as_the_plain_one(tmp_path, matmul64, suffix) -> None:
    plain = _plain_log(tmp_path, matmul64)
    packed = _compress(plain, suffix)
    assert packed.stat().st_size < plain.stat().st_size
    want = [r.to_json() for r in load_records(plain)]
    assert len(want) == 4
    assert [r.to_json() for r in load_records(packed)] == want
    assert [r.to_json() for r in load_records(str(packed))] == want  # a str path too


@pytest.mark.parametrize("suffix", sorted(OPENERS))
def test_torn_last_line_inside_a_compressed_log_is_skipped(tmp_path, matmul64, suffix, caplog) -> None:
    plain = _plain_log(tmp_path, matmul64)
    full = plain.read_text()
    last = full.splitlines(keepends=True)[-1]
    packed = _compress(plain, suffix, full + last[: len(last) // 2])  # a writer killed mid-line
    recs = load_records(packed)
    assert [r.to_json() for r in recs] == [r.to_json() for r in load_records(plain)]
    assert "partial line" in caplog.text


def test_compressed_file_that_is_not_compressed_is_one_line(tmp_path, matmul64) -> None:
    fake = tmp_path / "log.jsonl.xz"
    fake.write_text(_plain_log(tmp_path, matmul64).read_text())  # plain text under an .xz name
    with pytest.raises(LogError) as e:
        load_records(fake)
    assert str(fake) in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("suffix", sorted(OPENERS))
def test_writer_refuses_a_compressed_log(tmp_path, matmul64, suffix) -> None:
    packed = _compress(_plain_log(tmp_path, matmul64), suffix)
    before = packed.read_bytes()
    with pytest.raises(LogError) as e:
        RecordWriter(packed)
    msg = str(e.value)
    assert "\n" not in msg and str(packed) in msg
    assert "compressed logs are read-only" in msg and "decompress" in msg
    assert packed.read_bytes() == before  # untouched
    with pytest.raises(LogError):
        RecordWriter(tmp_path / "new.jsonl.gz")  # also one that does not exist yet
    assert not (tmp_path / "new.jsonl.gz").exists()


def _ansor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ansor.cli", *args], capture_output=True, text=True, timeout=600)


def test_cli_bench_reads_a_compressed_log(tmp_path, matmul64) -> None:
    """`ansor bench --log LOG.jsonl.xz` finds the log's best record as it does in the plain log."""
    plain = tmp_path / "log.jsonl"
    with RecordWriter(plain) as w:
        w.append(_rec(matmul64, 0, 1e-3, sketch="skip"))
    packed = _compress(plain, ".xz")
    p = _ansor("bench", "--workload", "matmul-64", "--log", str(packed))
    assert p.returncode == 0, p.stderr
    assert "no successful record" not in p.stderr and "Traceback" not in p.stderr


def test_cli_tune_into_a_compressed_log_is_one_line(tmp_path, matmul64) -> None:
    packed = _compress(_plain_log(tmp_path, matmul64), ".xz")
    p = _ansor("tune", "--workload", "matmul-64", "--trials", "1", "--log", str(packed))
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "compressed logs are read-only" in lines[0], p.stderr

"""The JSON-lines log: append-only, fsync-ed, survives torn lines, refuses foreign files."""

from __future__ import annotations

import json
import math

import pytest
from ansor.space.schedule import Schedule
from ansor.measure.measurer import MeasureError, MeasureInput, MeasureResult
from ansor.tuning.records import LogError, Record, RecordWriter, best_record, load_records


def _rec(task, knob: int, lat: float | None) -> Record:
    sch = Schedule.of("mlt_op1", {"x": knob})
    res = MeasureResult(costs=(lat,)) if lat else MeasureResult(error=MeasureError.CRASH, error_msg="boom")
    return Record.of(MeasureInput(task, sch, "// script"), res)


def test_round_trip_and_best(tmp_path, matmul64) -> None:
    path = tmp_path / "log.jsonl"
    with RecordWriter(path) as w:
        for i, lat in enumerate([3e-3, None, 1e-3, 2e-3]):
            w.append(_rec(matmul64, i, lat))
    recs = load_records(path)
    assert [r.schedule.values()["x"] for r in recs] == [0, 1, 2, 3]
    assert recs[1].error == "crash" and math.isinf(recs[1].latency)
    assert recs[0].latency == pytest.approx(3e-3)
    assert best_record(recs).schedule.values()["x"] == 2
    assert recs[2].key != recs[3].key and len(recs[2].key) >= 16
    assert recs[2].script == "// script"


def test_torn_last_line_is_skipped_and_repaired(tmp_path, matmul64) -> None:
    path = tmp_path / "log.jsonl"
    with RecordWriter(path) as w:
        w.append(_rec(matmul64, 0, 1e-3))
    full = path.read_text()
    path.write_text(full + full[: len(full) // 2])  # a writer killed mid-line
    assert len(load_records(path)) == 1
    with RecordWriter(path) as w:  # the next writer starts on a fresh line
        w.append(_rec(matmul64, 1, 2e-3))
    recs = load_records(path)
    assert [r.schedule.values()["x"] for r in recs] == [0, 1]


def test_foreign_or_future_logs_are_refused(tmp_path, matmul64) -> None:
    p = tmp_path / "notes.jsonl"
    p.write_text("hello world\nsecond line\n")
    with pytest.raises(LogError, match="not a JSON line"):
        load_records(p)
    q = tmp_path / "future.jsonl"
    d = _rec(matmul64, 0, 1e-3).to_json()
    d["v"] = 99
    q.write_text(json.dumps(d) + "\n")
    with pytest.raises(LogError, match="version 99"):
        load_records(q)


def test_compile_ignores_records_of_another_sketch_version(tmp_path, caplog) -> None:
    import dataclasses
    import logging

    import ansor
    from ansor.frontend import workloads
    from ansor.tuning.records import SKETCH_VERSION

    text = workloads.matmul(8, 8, 8)
    task = ansor.create_task(text)
    old = dataclasses.replace(_rec(task, 0, 1e-6), sketch_version=SKETCH_VERSION - 1, script="not a script")
    path = tmp_path / "old.jsonl"
    with RecordWriter(path) as w:
        w.append(old)
    with caplog.at_level(logging.WARNING):
        fn = ansor.compile(text, log=path)
    assert not fn.tuned
    assert "sketch generator v" in caplog.text

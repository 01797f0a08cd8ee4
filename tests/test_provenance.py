"""Records say how they were measured; test hooks are gated and announce themselves; readers warn
when a log mixes measurements that are not comparable."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys

import ansor
from ansor.measure import provenance
from ansor.frontend import workloads
from ansor.measure.measurer import RunOptions
from ansor.tuning.records import load_records, warn_if_mixed


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in
           ("ANSOR_ALLOW_TEST_HOOKS", "ANSOR_ALLOW_FAULTS", "ANSOR_SYNTHETIC_MEASURE_DELAY", "ANSOR_INJECT_FAULT")}
    return {**env, **extra}


def _config(env: dict[str, str]) -> str:
    code = "from ansor import config; print(config.SYNTHETIC_MEASURE_DELAY, repr(config.INJECT_FAULT))"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip()


def test_test_hooks_need_the_gate() -> None:
    assert _config(_env(ANSOR_SYNTHETIC_MEASURE_DELAY="0", ANSOR_INJECT_FAULT="abort")) == "-1.0 ''"
    assert _config(_env(ANSOR_SYNTHETIC_MEASURE_DELAY="0", ANSOR_INJECT_FAULT="abort",
                        ANSOR_ALLOW_TEST_HOOKS="1")) == "0.0 'abort'"


def test_synthetic_run_prints_a_banner_and_labels_its_records(tmp_path) -> None:
    log = tmp_path / "syn.jsonl"
    cmd = [sys.executable, "-m", "ansor.cli", "tune", "--workload", "matmul-64", "--trials", "4", "--log", str(log),
           "--search", "random"]
    out = subprocess.run(cmd, env=_env(ANSOR_SYNTHETIC_MEASURE_DELAY="0", ANSOR_ALLOW_TEST_HOOKS="1"),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "TEST HOOK ACTIVE: SYNTHETIC measurements" in out.stderr
    recs = load_records(log)
    assert recs and all(r.provenance["measurer"] == "synthetic" for r in recs)
    # Without the gate the request is refused loudly (and real measurement runs instead).
    out = subprocess.run([sys.executable, "-c", "from ansor.measure.measurer import create_measurer as c; print(type(c()).__name__)"],
                         env=_env(ANSOR_SYNTHETIC_MEASURE_DELAY="0"), capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "LocalMeasurer" and "ignored" in out.stderr


def test_real_records_carry_host_and_software(tmp_path, matmul64) -> None:
    log = tmp_path / "real.jsonl"
    ansor.tune(matmul64, trials=2, log_path=log, seed=0, search="random",
               run_options=RunOptions(repeat=1, min_repeat_ms=1.0, threads=1))
    recs = load_records(log)
    assert len(recs) >= 2
    p = recs[-1].provenance
    assert p["measurer"] == "local" and p["threads"] == 1 and p["cache_flush"] is False
    assert p["cpu"] == provenance.cpu_model() and p["ansor"] == ansor.__version__
    assert p["commit"] == provenance.git_commit()  # None outside a git checkout
    # Round trip through JSON keeps it; logs from before provenance existed still load.
    line = json.loads(log.read_text().splitlines()[-1])
    assert line["provenance"] == p
    del line["provenance"]
    old = tmp_path / "old.jsonl"
    old.write_text(json.dumps(line) + "\n")
    assert load_records(old)[0].provenance is None


def test_readers_warn_when_a_log_mixes_hosts(tmp_path, matmul64, caplog) -> None:
    from ansor.space.schedule import Schedule
    from ansor.measure.measurer import MeasureResult
    from ansor.tuning.records import Record, RecordWriter

    base = provenance.provenance("local", threads=2, target="cpu")
    log = tmp_path / "mixed.jsonl"
    with RecordWriter(log) as w:
        for i, cpu in enumerate([base["cpu"], "Some Other CPU"]):
            w.append(Record(f"k{i}", matmul64, Schedule.of("skip", {}), None, MeasureResult(costs=(1e-3 * (i + 1),)),
                            provenance={**base, "cpu": cpu}))
    recs = load_records(log)
    assert warn_if_mixed(recs[:1], log) is None
    with caplog.at_level(logging.WARNING):
        msg = warn_if_mixed(recs, log)
    assert msg is not None and "Some Other CPU" in msg and "mixes" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        ansor.compile(workloads.get("matmul-64"), log=log)
    assert "not comparable" in caplog.text
    same = [dataclasses.replace(r, provenance=base) for r in recs]
    assert warn_if_mixed(same, log) is None

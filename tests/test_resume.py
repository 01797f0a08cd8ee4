"""Kill `ansor tune` with SIGKILL at random instants, resume, and compare with an uninterrupted run."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import ansor

TRIALS = 48


def _cmd(log) -> list[str]:
    return [sys.executable, "-m", "ansor.cli", "tune", "--workload", "matmul-256", "--trials", str(TRIALS),
            "--batch-size", "4", "--seed", "9", "--log", str(log), "--search", "random"]


def _env() -> dict[str, str]:
    return dict(os.environ, ANSOR_SYNTHETIC_MEASURE_DELAY="0.02", ANSOR_ALLOW_TEST_HOOKS="1")


def test_sigkill_then_resume_loses_and_repeats_nothing(tmp_path) -> None:
    ref_log = tmp_path / "ref.jsonl"
    subprocess.run(_cmd(ref_log), env=_env(), check=True, capture_output=True, timeout=300)
    ref = ansor.load_records(ref_log)
    assert len(ref) == TRIALS

    log = tmp_path / "killed.jsonl"
    rng = random.Random(1)
    kills = 0
    for _ in range(4):
        p = subprocess.Popen(_cmd(log), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(1.0, 2.5))  # start-up ~1 s, then 0.02 s per candidate
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            kills += 1
        p.wait()
    subprocess.run(_cmd(log), env=_env(), check=True, capture_output=True, timeout=300)
    assert kills >= 1
    got = ansor.load_records(log)
    keys = [r.key for r in got]
    assert len(keys) == len(set(keys)), "a program was measured twice"
    assert set(keys) == {r.key for r in ref}, "records lost or different programs measured"
    best = min(got, key=lambda r: r.latency)
    assert best.key == min(ref, key=lambda r: r.latency).key


def test_each_result_is_logged_before_the_batch_ends(tmp_path) -> None:
    """A run interrupted mid-batch keeps every candidate measured so far."""
    import pytest
    from ansor.frontend import workloads
    from ansor.measure.measurer import SyntheticMeasurer
    from ansor.tuning.progress import ProgressCallback

    class Stop(Exception):
        pass

    class StopAfter(ProgressCallback):
        def on_result(self, task, trials, best, errors) -> None:
            if trials == 5:
                raise Stop

    task = ansor.create_task(workloads.get("matmul-64"))
    log = tmp_path / "mid.jsonl"
    with pytest.raises(Stop):
        ansor.tune(task, trials=32, log_path=log, batch_size=16, search="random", measurer=SyntheticMeasurer(),
                   callback=StopAfter())
    assert len(ansor.load_records(log)) == 5

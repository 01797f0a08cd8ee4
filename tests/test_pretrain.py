"""Pre-training the cost model on earlier logs (`tuner.pretrain`, `ansor tune --pretrain`)."""

from __future__ import annotations

import os
import subprocess
import sys

import ansor
import pytest
from ansor.frontend import workloads
from ansor.search.cost_model import XGBModel, normalized_throughputs, pairwise_accuracy
from ansor.measure.measurer import SyntheticMeasurer
from ansor.tuning.records import LogError
from ansor.tuning.tuner import pretrain


@pytest.fixture(scope="module")
def log_of_another_task(tmp_path_factory):
    """24 random-search records of matmul-64 (synthetic latencies: no compiler, no timing)."""
    path = tmp_path_factory.mktemp("pre") / "mm64.jsonl"
    task = ansor.create_task(workloads.get("matmul-64"), name="matmul-64")
    ansor.tune(task, trials=24, log_path=path, search="random", measurer=SyntheticMeasurer(0))
    return task, path


def test_pretrained_model_learns_the_logged_programs(log_of_another_task) -> None:
    task, log = log_of_another_task
    model = XGBModel(few_shot_threshold=10, nthread=1)
    n, n_tasks = pretrain(model, [log], target="cpu")
    records = ansor.load_records(log)
    assert n_tasks == 1 and 10 <= n <= len(records)
    assert model.trained  # past the few-shot threshold before any program of the new task is measured
    # It learned the log's labels, not random scores: its predictions order the logged programs
    # (failed ones included, at throughput 0) as their measurements do.
    inputs, results, features = model.prior
    y = normalized_throughputs(inputs, results)
    assert pairwise_accuracy(model.predict(features), y) > 0.75
    assert {i.task.hash for i in inputs} == {task.hash} and model.inputs == []


def test_pretrain_leaves_out_skipped_tasks_other_targets_and_fails_on_a_missing_log(
        log_of_another_task, tmp_path) -> None:
    task, log = log_of_another_task
    model = XGBModel(few_shot_threshold=1, nthread=1)
    assert pretrain(model, [log], target="cpu", skip_tasks={task.hash}) == (0, 0)
    assert pretrain(model, [log], target="cuda") == (0, 0)
    assert not model.trained and model.prior[0] == []
    with pytest.raises(LogError, match="nope.jsonl: no such log"):
        pretrain(model, [tmp_path / "nope.jsonl"])


def _ansor(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ANSOR_SYNTHETIC_MEASURE_DELAY": "0", "ANSOR_ALLOW_TEST_HOOKS": "1"}
    return subprocess.run([sys.executable, "-m", "ansor.cli", *args], check=False, capture_output=True, text=True,
                          timeout=600, env=env)


def test_cli_pretrain(log_of_another_task, tmp_path) -> None:
    _, log = log_of_another_task
    out = tmp_path / "mm32.jsonl"
    p = _ansor("tune", "--workload", "matmul-32", "--trials", "8", "--batch-size", "4", "--pretrain", str(log),
               "--log", str(out))
    assert p.returncode == 0, p.stderr
    assert "cost model pre-trained on" in p.stdout and "of 1 tasks" in p.stdout
    assert len(out.read_text().splitlines()) == 8
    bad = _ansor("tune", "--workload", "matmul-32", "--trials", "4", "--pretrain", str(tmp_path / "gone.jsonl"),
                 "--log", str(tmp_path / "x.jsonl"))
    lines = [ln for ln in bad.stderr.splitlines() if ln.strip()]
    assert bad.returncode == 2 and len(lines) == 1 and "gone.jsonl: no such log" in lines[0], bad.stderr
    rnd = _ansor("tune", "--workload", "matmul-32", "--trials", "4", "--search", "random", "--pretrain", str(log),
                 "--log", str(tmp_path / "y.jsonl"))
    assert rnd.returncode == 2 and "--pretrain trains the learned search's cost model" in rnd.stderr

"""Measurement on a Ray cluster (measure/cluster.py): a two-node `ray.cluster_utils.Cluster` on
this machine, loopback only, tuning a 64x64x64 matmul with a seeded random search."""

from __future__ import annotations

import os
import subprocess
import sys
import time

# Every Ray process of these tests binds and talks on 127.0.0.1 only (Ray's own switch for a
# one-machine cluster; read when Ray is imported, inherited by the nodes it starts).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

import ansor
import pytest
from ansor.measure.cluster import ClusterError, hardware_mismatch, parse_cluster
from ansor.measure.measurer import LocalMeasurer, RunOptions
from ansor.tuning.progress import ProgressCallback

FAST = RunOptions(threads=1, repeat=1, min_repeat_ms=2.0, timeout_s=20.0)
TRIALS, BATCH, SEED = 12, 6, 5


def _tune(task, log, measurer, callback=None):
    return ansor.tune(task, trials=TRIALS, batch_size=BATCH, log_path=log, seed=SEED, search="random",
                      measurer=measurer, callback=callback)


def test_no_ray_without_cluster(tmp_path) -> None:
    """A normal `ansor tune` (the CLI, a real local measurer) never imports Ray."""
    code = ("import sys\nfrom ansor.cli import main\n"
            f"rc = main(['tune', '--workload', 'matmul-64', '--trials', '3', '--batch-size', '3', '--search', 'random',"
            f" '--threads', '1', '--min-repeat-ms', '2', '--log', {str(tmp_path / 'l.jsonl')!r}])\n"
            "assert rc == 0, rc\n"
            "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert len(ansor.load_records(tmp_path / "l.jsonl")) == 3


def test_cluster_spec_and_hardware_check() -> None:
    assert parse_cluster("ray") is None
    assert parse_cluster("ray://head:10001") == "ray://head:10001"
    assert parse_cluster("ray:10.0.0.1:6379") == "10.0.0.1:6379"
    for bad in ("slurm", "ray://", "ray:head"):
        with pytest.raises(ValueError, match="unknown --cluster"):
            parse_cluster(bad)
    a = {"cpu": "AMD EPYC", "cores": 2, "gpu": None, "ansor": "0.1.0", "mlir": "22.1.8.4", "node": "a"}
    assert hardware_mismatch([a, {**a, "node": "b"}]) is None  # other node, same hardware
    msg = hardware_mismatch([a, {**a, "gpu": "NVIDIA H100", "node": "b"}])
    assert msg is not None and "node a" in msg and "node b" in msg and "H100" in msg


def test_cli_rejects_a_bad_cluster_in_one_line(capsys) -> None:
    from ansor.cli import main

    assert main(["tune", "--workload", "matmul-64", "--trials", "2", "--cluster", "slurm"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ansor: error: unknown --cluster 'slurm'") and "\n" not in err


def test_logs_of_another_host_pretrain_and_say_so(tmp_path) -> None:
    """Records carry their host; `--pretrain` learns from another host's log as from this
    host's, and a log mixing two CPU models is reported (its latencies do not compare)."""
    import json

    from ansor.frontend import workloads
    from ansor.measure.measurer import SyntheticMeasurer
    from ansor.search.cost_model import XGBModel
    from ansor.tuning.records import warn_if_mixed
    from ansor.tuning.tuner import pretrain

    here = tmp_path / "here.jsonl"
    task = ansor.create_task(workloads.get("matmul-64"), name="matmul-64")
    ansor.tune(task, trials=16, log_path=here, search="random", measurer=SyntheticMeasurer(0))
    lines = [json.loads(x) for x in here.read_text().splitlines()]
    assert all(d["provenance"]["node"] and d["provenance"]["cpu"] for d in lines)
    there = tmp_path / "there.jsonl"
    there.write_text("".join(json.dumps({**d, "provenance": {**d["provenance"], "cpu": "Other CPU 9000",
                                                             "node": "host-b"}}) + "\n" for d in lines))
    counts = [pretrain(XGBModel(few_shot_threshold=4, nthread=1), [log], target="cpu") for log in (here, there)]
    assert counts[0] == counts[1] and counts[0][0] >= 8
    assert ansor.load_records(there)[0].provenance["node"] == "host-b"
    both = ansor.load_records(here) + ansor.load_records(there)
    msg = warn_if_mixed(both, "both")
    assert msg is not None and "Other CPU 9000" in msg


ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    c.add_node(num_cpus=2)
    ray.init(address=c.address, logging_level="WARNING", log_to_driver=False)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture(scope="module")
def local_keys(matmul64, tmp_path_factory) -> set[str]:
    log = tmp_path_factory.mktemp("local") / "local.jsonl"
    m = LocalMeasurer(FAST)
    try:
        _tune(matmul64, log, m)
    finally:
        m.close()
    recs = ansor.load_records(log)
    assert len(recs) == TRIALS
    return {r.key for r in recs}


def _check_log(log, local_keys: set[str]) -> list:
    recs = ansor.load_records(log)
    keys = [r.key for r in recs]
    assert len(keys) == TRIALS and len(set(keys)) == TRIALS  # nothing lost, nothing measured twice
    assert set(keys) == local_keys  # the seeded random search's candidates, as on one machine
    assert all(r.provenance["measurer"] == "ray" for r in recs)
    assert any(r.error is None and r.latency > 0 for r in recs)
    return recs


def test_ray_tune_equals_a_local_run(cluster, matmul64, local_keys, tmp_path) -> None:
    from ansor.measure.cluster import RayMeasurer

    m = RayMeasurer(options=FAST)
    try:
        t0 = time.monotonic()
        res = _tune(matmul64, tmp_path / "ray.jsonl", m)
        assert time.monotonic() - t0 < 120
    finally:
        m.close()
    recs = _check_log(tmp_path / "ray.jsonl", local_keys)
    assert res.best is not None and m.requeued == 0
    assert len({r.provenance["node"] for r in recs}) == 2  # both nodes' runners measured
    from ansor.tuning.records import warn_if_mixed

    assert warn_if_mixed(recs, "ray.jsonl") is None  # two nodes of one hardware: comparable
    assert {r.error for r in recs} <= {None, "wrong_answer", "compile", "apply"}


def test_a_node_killed_mid_run_loses_no_record(cluster, matmul64, local_keys, tmp_path) -> None:
    from ansor.measure.cluster import RayMeasurer

    doomed = cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()

    class KillWhileBusy(ProgressCallback):
        """Removes the node as soon as its runner holds a candidate (results stream in while
        the others are still in flight)."""

        killed = False

        def on_result(self, task, done, best, errors) -> None:
            busy = any(r.node_id == doomed.node_id and r.in_flight for r in m._runners)
            if busy and not self.killed:
                self.killed = True
                cluster.remove_node(doomed)

    m = RayMeasurer(options=FAST)
    cb = KillWhileBusy()
    try:
        _tune(matmul64, tmp_path / "kill.jsonl", m, cb)
        assert cb.killed, "the extra node never got a candidate"
        assert len(m._runners) == 2 and all(r.node_id != doomed.node_id for r in m._runners)
    finally:
        m.close()
    recs = _check_log(tmp_path / "kill.jsonl", local_keys)
    assert m.requeued >= 1  # the dead node held candidates; they were measured elsewhere
    assert not any(r.error == "crash" for r in recs)


def test_runners_need_the_named_resources(cluster, matmul64) -> None:
    from ansor.measure.cluster import RayMeasurer

    m = RayMeasurer(options=FAST, resources={"H200": 1})
    try:
        with pytest.raises(ClusterError, match="no node of the Ray cluster can run cpu candidates"):
            m.baseline(matmul64)
    finally:
        m.close()


def test_cli_on_the_cluster_resumes_after_the_driver_is_killed(cluster, local_keys, tmp_path) -> None:
    """`ansor tune --cluster ray:ADDRESS`, SIGKILLed once records arrive, then run again: the log
    (written by the driver alone) ends with every trial once."""
    log = tmp_path / "cli.jsonl"
    cmd = [sys.executable, "-m", "ansor.cli", "tune", "--workload", "matmul-64", "--trials", str(TRIALS),
           "--batch-size", str(BATCH), "--seed", str(SEED), "--search", "random", "--threads", "1",
           "--repeat", "1", "--min-repeat-ms", "2", "--cluster", f"ray:{cluster.address}", "--log", str(log)]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and p.poll() is None:
            if log.exists() and len(log.read_text().splitlines()) >= 3:
                break
            time.sleep(0.05)
    finally:
        p.kill()
        _, err = p.communicate(timeout=30)
    first = len(ansor.load_records(log))
    assert 3 <= first < TRIALS, err[-2000:]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    recs = _check_log(log, local_keys)
    assert len({r.provenance["node"] for r in recs}) >= 2

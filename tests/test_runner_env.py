"""Per-measurer worker environments (`LocalMeasurer(env=...)`): how `bench/build_pool.py` gives
one configuration's workers another `ANSOR_CUDA_HOST_OPT_LEVEL` or `ANSOR_CUDA_BINARY`; and the
bench's configuration syntax and per-candidate latency comparison."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from ansor.measure.local import LocalMeasurer
from ansor.measure.measurer import RunOptions

FAST = RunOptions(repeat=1, min_repeat_ms=1.0, timeout_s=60.0)


def _environ(pid: int) -> dict[str, str]:
    """The environment process `pid` started with (read again while it reads empty: a process
    just started may not have finished its exec)."""
    for _ in range(100):
        raw = Path(f"/proc/{pid}/environ").read_bytes()
        if raw:
            break
        time.sleep(0.05)
    return dict(kv.split("=", 1) for kv in raw.decode(errors="replace").split("\0") if "=" in kv)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/environ")
def test_every_worker_of_a_measurer_gets_its_env_restarts_too() -> None:
    env = {"ANSOR_CUDA_HOST_OPT_LEVEL": "0", "ANSOR_CUDA_BINARY": "ptx"}
    m = LocalMeasurer(FAST, builders=1, runners=2, env=env)
    plain = LocalMeasurer(FAST)
    try:
        workers = [r.worker for r in m.runners] + list(m.builder._workers)
        for w in workers + [plain.runner.worker]:
            w.start()
        for w in workers:
            got = _environ(w.proc.pid)
            assert {k: got.get(k) for k in env} == env
        assert _environ(plain.runner.worker.proc.pid).get("ANSOR_CUDA_HOST_OPT_LEVEL") == \
            os.environ.get("ANSOR_CUDA_HOST_OPT_LEVEL")
        w = m.runners[1].worker
        w.kill()
        w.start()  # a restarted worker (after a crash or a time-out) keeps it
        assert _environ(w.proc.pid)["ANSOR_CUDA_HOST_OPT_LEVEL"] == "0"
    finally:
        m.close()
        plain.close()


def test_build_pool_configurations() -> None:
    from bench.build_pool import config_env, latency_pairs, parse_config

    c = {b: parse_config(b) for b in ["0:ptx", "14:ptx", "14:ptx:r2", "14:r2:o0:ptx"]}
    assert c["14:r2:o0:ptx"] == {"builders": 14, "format": "ptx", "runners": 2, "host_opt_level": 0}
    assert config_env(c["14:r2:o0:ptx"]) == {"ANSOR_CUDA_BINARY": "ptx", "ANSOR_CUDA_HOST_OPT_LEVEL": "0"}
    assert config_env(parse_config("3")) == {}
    assert latency_pairs(list(c), c) == [("0:ptx", "14:ptx"), ("0:ptx", "14:ptx:r2"), ("14:ptx", "14:ptx:r2"),
                                         ("0:ptx", "14:r2:o0:ptx"), ("14:ptx:r2", "14:r2:o0:ptx")]
    for bad in ["14:o4", "14:x", "14:r"]:
        with pytest.raises(SystemExit):
            parse_config(bad)


def test_per_candidate_latency_comparison() -> None:
    from bench.build_pool import compare_latencies

    def cand(lat: float, n: int = 3, err: str | None = None) -> dict:
        return {"latency": lat, "costs": [lat * 0.99, lat, lat * 1.01][:n], "error": err, "phases": {}}

    cands = {"a": [[cand(1.0), cand(2.0), cand(3.0, n=1), cand(1.0, err="wrong_answer")]],
             "b": [[cand(1.1), cand(2.0), cand(3.0), cand(1.0)]]}
    c = compare_latencies(cands, "a", "b", repeat=3)
    assert c["n"] == 2  # timed once, or failed, in either: left out
    assert c["median_ratio"] == pytest.approx(1.05) and c["over_5pct"] == 0.5
    assert c["repeat_spread_median"] == pytest.approx(1.01 / 0.99)
    assert compare_latencies({"a": [[cand(1.0, n=1)]], "b": [[cand(1.0)]]}, "a", "b", 3) is None

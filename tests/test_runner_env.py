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
    assert c["14:r2:o0:ptx"] == {"builders": 14, "format": "ptx", "runners": 2, "host_opt_level": 0,
                                 "verify_fast": None}
    assert config_env(c["14:r2:o0:ptx"]) == {"ANSOR_CUDA_BINARY": "ptx", "ANSOR_CUDA_HOST_OPT_LEVEL": "0"}
    assert config_env(parse_config("0:ptx:v0")) == {"ANSOR_CUDA_BINARY": "ptx", "ANSOR_VERIFY_FAST": "0"}
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


@pytest.mark.parametrize("level", [0, 3])
def test_cuda_host_code_jits_at_every_opt_level_without_a_gpu(monkeypatch, level: int) -> None:
    """The host code of a CUDA artifact (launch glue + timing loop) compiles at the opt level a
    runner is given (`ANSOR_CUDA_HOST_OPT_LEVEL`). No GPU here: the CUDA runtime's entry points
    are stubs returning 0 (the global constructor that loads the GPU module gets a null module);
    looking the entry points up makes ORC compile the whole host module; nothing runs."""
    import ctypes

    monkeypatch.setattr("ansor.config.CUDA_BINARY", "ptx")
    from ansor.core import native
    from ansor.core.mlir import BENCH_FUNC
    from ansor.core.task import create_task
    from ansor.frontend import workloads
    from ansor.targets.cuda.lowering import build_task_cuda
    from mlir import ir
    from mlir.execution_engine import ExecutionEngine

    task = create_task(workloads.get("matmul-64"), name="matmul-64", target="cuda")
    artifact = build_task_cuda(task, None, arch="sm_90")
    stub_fn = ctypes.CFUNCTYPE(ctypes.c_void_p)(lambda: None)
    stub = ctypes.cast(stub_fn, ctypes.c_void_p)
    native.register_everything()
    with ir.Context(), ir.Location.unknown():
        engine = ExecutionEngine(ir.Module.parse(artifact), opt_level=level, shared_libs=[])
        for name in ["mgpuModuleLoad", "mgpuModuleLoadJIT", "mgpuModuleUnload", "mgpuModuleGetFunction",
                     "mgpuLaunchKernel", "mgpuStreamCreate", "mgpuStreamSynchronize", "mgpuStreamDestroy"]:
            engine.raw_register_runtime(name, stub)
        assert engine.raw_lookup(task.func_name) and engine.raw_lookup(BENCH_FUNC)
        del engine  # its destructors (mgpuModuleUnload) call the stub: while it is alive
    del stub_fn

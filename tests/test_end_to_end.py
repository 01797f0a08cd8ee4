"""End to end on real hardware: tune a small matmul, log, compile the best, replay the script."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys

import ansor
import numpy as np
import pytest
from ansor.frontend import workloads
from ansor.measure.measurer import RunOptions


def test_tune_compile_and_replay(tmp_path) -> None:
    src = tmp_path / "mm.mlir"
    src.write_text(workloads.matmul(96, 64, 128))
    log = tmp_path / "mm.jsonl"
    task = ansor.create_task(src)
    res = ansor.tune(task, trials=8, log_path=log, seed=0, batch_size=4, search="random",
                     run_options=RunOptions(repeat=2, min_repeat_ms=5.0, timeout_s=60.0))
    recs = ansor.load_records(log)
    assert len(recs) == 8
    assert all(isinstance(r.key, str) and (r.error is None) == math.isfinite(r.latency) for r in recs)
    assert res.best is not None and res.baseline.error is None

    fn = ansor.compile(str(src), target="cpu", log=log)
    assert fn.tuned and fn.script == res.best.script
    rng = np.random.default_rng(0)
    a = rng.standard_normal((96, 128), dtype=np.float32)
    b = rng.standard_normal((128, 64), dtype=np.float32)
    np.testing.assert_allclose(fn(a, b), a @ b, rtol=1e-4, atol=1e-3)
    untuned = ansor.compile(src)
    assert not untuned.tuned
    np.testing.assert_allclose(untuned(a, b), a @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.skipif(shutil.which("ansor-opt") is None, reason="ansor-opt not installed")
def test_best_script_replays_with_ansor_opt(tmp_path, matmul64) -> None:
    import random

    from ansor.space.schedule import sample
    from ansor.core.loops import tag_ops
    from ansor.targets import generate_sketches
    from mlir import ir

    sk = generate_sketches(matmul64)[0]
    script = sk.script(sample(sk, random.Random(4)).values())
    with ir.Context():
        m = ir.Module.parse(matmul64.ir)
        tag_ops(m)
        payload = str(m)
    (tmp_path / "p.mlir").write_text(payload)
    (tmp_path / "s.mlir").write_text(script)
    p = subprocess.run(["ansor-opt", str(tmp_path / "p.mlir"),
                        f"--transform-preload-library=transform-library-paths={tmp_path / 's.mlir'}",
                        "--transform-interpreter"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "vector.fma" in p.stdout or "vector.contract" in p.stdout or "vector.outerproduct" in p.stdout
    assert "scf.forall" in p.stdout


def test_cli_tune_then_bench(tmp_path) -> None:
    log = tmp_path / "t.jsonl"
    p = subprocess.run([sys.executable, "-m", "ansor.cli", "tune", "--workload", "matmul-128", "--trials", "4",
                        "--batch-size", "4", "--log", str(log), "--min-repeat-ms", "5", "--repeat", "2", "--search", "random"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "best:" in p.stdout and "GFLOP/s" in p.stdout and "(naive loops: " in p.stdout
    assert len(ansor.load_records(log)) == 4
    b = subprocess.run([sys.executable, "-m", "ansor.cli", "bench", "--workload", "matmul-128", "--log", str(log)],
                       capture_output=True, text=True, timeout=600)
    assert b.returncode == 0, b.stderr
    assert "tuned (ansor)" in b.stdout and "numpy" in b.stdout and "naive loops" in b.stdout

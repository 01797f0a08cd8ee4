"""The `ansor` command: bad input gets one clear line and a non-zero exit; the happy path works."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ansor.frontend import workloads


def _ansor(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ansor.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


BAD = {
    "missing": (None, "no such file"),
    "garbage.mlir": ("this is not mlir {", "not valid MLIR"),
    "nofunc.mlir": ("module {}\n", "no public func.func"),
    "two.mlir": (workloads.matmul(8, 8, 8) + workloads.matmul(4, 4, 4).replace("@matmul", "@mm2"), "several public functions"),
    "dynamic.mlir": (
        "func.func @f(%a: tensor<?x4xf32>) -> tensor<?x4xf32> {\n  return %a : tensor<?x4xf32>\n}\n",
        "dynamic shape",
    ),
    "i1.mlir": ("func.func @f(%a: tensor<4xi1>) -> tensor<4xi1> {\n  return %a : tensor<4xi1>\n}\n", "element type i1"),
    "memref.mlir": ("func.func @f(%a: memref<4xf32>) {\n  return\n}\n", "only ranked tensors"),
    "binary.mlir": (b"\x00\xff\xfe binary", "neither MLIR text nor MLIR bytecode"),
    "torn.mlirbc": (b"ML\xefR\x00\x01", "not valid MLIR bytecode"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_one_line_error(tmp_path, name) -> None:
    text, expected = BAD[name]
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    elif text is not None:
        path.write_text(text)
    p = _ansor("tune", str(path), "--trials", "1", "--log", str(tmp_path / "l.jsonl"))
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert expected in lines[0] and "Traceback" not in p.stderr


def test_bytecode_reads_as_its_text(tmp_path) -> None:
    """A model carried as MLIR bytecode (half the size of its text) is the same task as its text."""
    import io

    from ansor.core import native
    from ansor.core.task import create_task
    from mlir import ir

    text = workloads.matmul(8, 16, 4)
    native.register_everything()
    with ir.Context():
        buf = io.BytesIO()
        ir.Module.parse(text).operation.write_bytecode(buf)
    bc = tmp_path / "mm.mlirbc"
    bc.write_bytes(buf.getvalue())
    (tmp_path / "mm.mlir").write_text(text)
    assert create_task(bc).hash == create_task(tmp_path / "mm.mlir").hash
    p = _ansor("tasks", str(bc))
    assert p.returncode == 0 and "matmul" in p.stdout, p.stderr


def test_unknown_workload(tmp_path) -> None:
    p = _ansor("tune", "--workload", "nope-3", "--trials", "1")
    assert p.returncode == 2 and "unknown workload 'nope-3'" in p.stderr


def test_workloads_emit_round_trips(tmp_path) -> None:
    p = _ansor("workloads", "--emit", "gmm-1x128x128x128")
    assert p.returncode == 0 and "linalg.batch_matmul" in p.stdout
    listing = _ansor("workloads")
    assert "matmul-1024" in listing.stdout


def test_sketches_print_holes_and_filled(tmp_path) -> None:
    p = _ansor("sketches", "--workload", "matmul-64")
    assert p.returncode == 0
    assert 'transform.tune.knob<"op1.d0.t1"> options = [' in p.stdout
    q = _ansor("sketches", "--workload", "matmul-64", "--schedule-seed", "1")
    assert 'transform.tune.knob<"op1.d0.t1"> = ' in q.stdout and " from options = [" in q.stdout


def test_tasks_table_and_network_tuning(tmp_path) -> None:
    p = _ansor("tasks", "--workload", "mlp-16x32x4")
    assert p.returncode == 0, p.stderr
    assert "2 tasks (4 calls)" in p.stdout
    import os

    env = {**os.environ, "ANSOR_SYNTHETIC_MEASURE_DELAY": "0", "ANSOR_ALLOW_TEST_HOOKS": "1"}
    log = tmp_path / "mlp.jsonl"
    p = subprocess.run([sys.executable, "-m", "ansor.cli", "tune", "--workload", "mlp-16x32x4", "--trials", "12",
                        "--batch-size", "4", "--search", "random", "--log", str(log)],
                       capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr
    assert "estimated end-to-end latency" in p.stdout
    assert "2 tasks, 12 trials" in p.stdout
    assert len(log.read_text().splitlines()) == 12


ABORTS = """func.func @aborts(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %false = arith.constant false
  %e = tensor.empty() : tensor<8x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    cf.assert %false, "always fails"
    linalg.yield %a : f32
  } -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}
"""


def test_tuning_a_function_whose_untuned_program_fails_stops_at_once(tmp_path) -> None:
    """Candidates are checked against the untuned program's outputs: when it cannot run, tuning
    says so and exits non-zero instead of spending the budget on candidates that all fail."""
    path = tmp_path / "aborts.mlir"
    path.write_text(ABORTS)
    p = _ansor("tune", str(path), "--trials", "16", "--log", str(tmp_path / "a.jsonl"))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "naive loops: failed" in p.stdout
    assert "the untuned program fails" in p.stderr
    assert "none can be measured" in p.stderr


def test_bench_on_cuda_without_a_driver_is_one_line() -> None:
    from ansor.targets.cuda.runtime import has_cuda_device

    if has_cuda_device():
        pytest.skip("this machine has a CUDA driver")
    p = _ansor("bench", "--workload", "matmul-64", "--target", "cuda")
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 1 and len(lines) == 1 and "cannot load the CUDA runtime" in lines[0], p.stderr

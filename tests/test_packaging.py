"""`pip wheel .` with build isolation makes a wheel that installs into a fresh venv and runs.

The pinned MLIR/LLVM wheels are build requirements (pyproject.toml), so the C++ core builds in
pip's isolated environment; the installed library and `ansor-opt` find MLIR in the target
environment through relative RUNPATHs. Slow (a few minutes: two environments receive the
1.7 GB of MLIR/LLVM wheels, from pip's cache after `run.sh setup`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tracked_tree(dest: Path) -> Path:
    """The working tree as `pip install .` sees it, less what git ignores (build/, .venv/).

    Untracked files count too: a tracked file edited to name a new, not yet added source would
    otherwise build from a tree that is neither the commit nor the checkout."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


@pytest.mark.slow
def test_wheel_builds_isolated_and_runs_in_a_fresh_venv(tmp_path: Path) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to list the sources")
    src = _tracked_tree(tmp_path / "src")
    wheels = tmp_path / "wheels"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSOR_NATIVE_LIB", "PYTHONPATH"))}
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check",
                            "-w", str(wheels), str(src)], capture_output=True, text=True, env=env, timeout=1800)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = wheels.glob("ansor_mlir-*.whl")
    names = subprocess.run([sys.executable, "-m", "zipfile", "-l", str(wheel)], capture_output=True, text=True,
                           check=True).stdout
    for part in ("ansor/targets/cpu/rules.py", "ansor_native/libAnsorMLIR.so", "ansor-opt"):
        assert part in names, f"{part} missing from the wheel"

    venv.create(tmp_path / "venv", with_pip=True)
    py = tmp_path / "venv" / "bin" / "python"
    inst = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
                          capture_output=True, text=True, env=env, timeout=1800)
    assert inst.returncode == 0, inst.stderr[-3000:]
    bindir = tmp_path / "venv" / "bin"
    opt = subprocess.run([str(bindir / "ansor-opt"), "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert opt.returncode == 0 and "ansor-annotate-task" in opt.stdout
    run = subprocess.run([str(bindir / "ansor"), "tune", "--workload", "matmul-512", "--trials", "4", "--batch-size", "4",
                          "--log", str(tmp_path / "log.jsonl")], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "best:" in run.stdout and (tmp_path / "log.jsonl").read_text().count("\n") >= 4

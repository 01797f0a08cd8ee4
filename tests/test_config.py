"""Configuration lives in one place: every ANSOR_* variable is read in `config.py`, the docs are
generated from it, and importing the package reads no hardware."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_module_but_config_reads_ansor_variables() -> None:
    offenders = []
    for f in (ROOT / "python" / "ansor").rglob("*.py"):
        if f.name == "config.py":
            continue
        for i, line in enumerate(f.read_text().splitlines(), 1):
            if re.search(r"os\.environ(\.get)?[\[(]\s*[\"']ANSOR_", line) or re.search(r"getenv\(\s*[\"']ANSOR_", line):
                offenders.append(f"{f.relative_to(ROOT)}:{i}")
    assert not offenders, "ANSOR_* read outside config.py: " + ", ".join(offenders)


def test_every_variable_is_documented() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_config_docs.py"), "--check"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    doc = (ROOT / "docs" / "configuration.md").read_text()
    from ansor import config

    assert len(config.VARIABLES) >= 12 and all(f"`{v.env}`" in doc for v in config.VARIABLES)


def test_import_reads_no_hardware() -> None:
    probe = ("import ansor, ansor.cli, ansor.targets.cpu.rules, ansor.targets.cpu.search_space, "
             "ansor.targets.cuda.lowering, ansor.search.evolution, ansor.tuning.scheduler\n"
             "import ansor.targets.cpu.params as p, ansor.targets.cuda.runtime as r\n"
             "print(p.limits.cache_info().currsize, r.device_arch.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "0"]


def test_malformed_integer_is_an_error() -> None:
    out = subprocess.run([sys.executable, "-c", "import ansor.config"], capture_output=True, text=True,
                         env={"ANSOR_WORKER_MEMORY_MB": "lots", "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
                         check=False)
    assert out.returncode != 0 and "ANSOR_WORKER_MEMORY_MB='lots' is not an integer" in out.stderr

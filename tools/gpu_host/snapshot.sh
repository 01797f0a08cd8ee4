#!/bin/bash
# Snapshot HEAD's sources and the native libraries built here into .gpu-x/ (an ignored folder the
# device tool carries to the GPU host; list /.gpu-x/ in .git/info/exclude once per checkout).
#   bash tools/gpu_host/snapshot.sh [EXTRA_PATH...]      # extra paths are copied into .gpu-x/
# On the host (runtime unpacked there once by ../shared/gpu's with-mlir.sh):
#   cd .gpu-x/src && . ../env.sh && $RT python3 -m bench....      or   bash .gpu-x/gpu_tests.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
site=.venv/lib/python3.11/site-packages
rm -rf .gpu-x; mkdir -p .gpu-x/src .gpu-x/lib
git archive HEAD python tests bench run.sh pyproject.toml test_lit tools | tar -x -C .gpu-x/src
cp $site/ansor_native/libAnsorMLIR.so .venv/lib/libiomp5.so .gpu-x/lib/
# The shared runtime bundle lacks libmlir_c_runner_utils.so's dependency: env.sh puts it beside it.
cp $site/mlir/lib/libmlir_apfloat_wrappers.so .gpu-x/lib/
cp tools/gpu_host/env.sh tools/gpu_host/gpu_tests.sh .gpu-x/
git rev-parse --short HEAD > .gpu-x/COMMIT
for f in "$@"; do cp -r "$f" .gpu-x/; done
du -sh .gpu-x

#!/bin/bash
# The GPU test set on the GPU host, one pytest process per file, 4 files at a time; writes
# $OUT/gpu-tests.txt (commit, card, then each file's summary). Run as: bash .gpu-x/gpu_tests.sh
cd "$(dirname "$0")/src"; . ../env.sh
O=${OUT:-/tmp}/gt; mkdir -p $O
{ echo "# commit $(cat ../COMMIT) (the .gpu-x snapshot of HEAD), $(date -u +%FT%TZ)";
  echo "# command: .gpu-x/gpu_tests.sh — one pytest process per file, 4 files at a time: python3 -m pytest -q -p no:cacheprovider -rfEs -m gpu tests/FILE";
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; nproc; } > $O/head.txt
ls tests/test_*.py | xargs grep -l "pytest.mark.gpu" | xargs -P 4 -I{} bash -c "$RT python3 -m pytest -q -p no:cacheprovider -rfEs -m gpu {} > $O/\$(basename {}).txt 2>&1; echo \"== {}: exit \$?\" >> $O/\$(basename {}).txt"
cat $O/head.txt > ${OUT:-/tmp}/gpu-tests.txt
for f in $O/test_*.txt; do echo "== $(basename $f .txt)"; tail -25 $f; done >> ${OUT:-/tmp}/gpu-tests.txt
rm -rf $O
grep -h "^== tests\|passed\|failed" ${OUT:-/tmp}/gpu-tests.txt

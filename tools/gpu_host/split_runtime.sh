#!/bin/bash
# Split ../shared/gpu's MLIR runtime into parts small enough to carry beside the tracked tree (the
# device tool carries at most 64 MiB a call, the tree included: 51.6 MB at b821ee8, 9.4 MB since the
# results logs are xz-compressed (90dd763), so parts 0-3 go in one call and part 4 with .gpu-rtx and
# .gpu-x in the next: `cp .gpu-rt?/p0? /tmp/`, then `cp .gpu-rt4/p04 /tmp/ && cat /tmp/p0? > ...`).
#   bash tools/gpu_host/split_runtime.sh [PART_MB]      # default 12
# writes .gpu-rt0/ .. .gpu-rtN/ (one part each) and .gpu-rtx/ (with-mlir.sh + the xgboost wheel),
# lists them in .git/info/exclude, and prints the device calls that reassemble the runtime on the
# host: one call per part (carry that part), then carry .gpu-rtx with the first real command.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
mb=${1:-12}
src=../shared/gpu
rm -rf .gpu-rt[0-9]* .gpu-rtx /tmp/ansor-rt-split && mkdir -p /tmp/ansor-rt-split .gpu-rtx
split -b "${mb}000000" -d "$src/mlir-rt-cp312.tar.xz" /tmp/ansor-rt-split/p
cp "$src/with-mlir.sh" "$src"/*.whl .gpu-rtx/
i=0
for p in /tmp/ansor-rt-split/p*; do
  mkdir -p ".gpu-rt$i" && cp "$p" ".gpu-rt$i/"
  grep -qx "/.gpu-rt$i/" .git/info/exclude || echo "/.gpu-rt$i/" >> .git/info/exclude
  echo "run(command='cp .gpu-rt$i/$(basename "$p") /tmp/', carry=['.gpu-rt$i'])"
  i=$((i + 1))
done
grep -qx "/.gpu-rtx/" .git/info/exclude || echo "/.gpu-rtx/" >> .git/info/exclude
echo "run(command='cat /tmp/p?? > .gpu-rtx/mlir-rt-cp312.tar.xz && bash .gpu-rtx/with-mlir.sh true && ...', carry=['.gpu-rtx', '.gpu-x'])"

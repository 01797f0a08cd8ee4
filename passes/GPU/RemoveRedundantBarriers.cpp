//===- RemoveRedundantBarriers.cpp - ansor-gpu-remove-redundant-barriers ----------===//
//
// ...; gpu.barrier; ... --(neighbouring segments share no written buffer)--> ...; ...
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuOptUtils.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_GPUREMOVEREDUNDANTBARRIERS
#include "passes/GPU/GpuOptPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;
using namespace mlir::ansor::gpuopt;

namespace {

bool intersects(const llvm::DenseSet<Value> &a, const llvm::DenseSet<Value> &b) {
  return llvm::any_of(a, [&](Value v) { return b.contains(v); });
}

/// The ops between `op` and the nearest barrier of its block before it (`forward` = false) or
/// after it, in block order, and that barrier (nullptr at the block's start or end). Costs the
/// length of that segment only: kernels with unrolled K loops hold thousands of barriers in
/// blocks of 10^5 ops.
std::pair<SmallVector<Operation *>, Operation *> segment(Operation *op, bool forward) {
  SmallVector<Operation *> ops;
  Operation *cur = forward ? op->getNextNode() : op->getPrevNode();
  while (cur && !isa<gpu::BarrierOp>(cur)) {
    ops.push_back(cur);
    cur = forward ? cur->getNextNode() : cur->getPrevNode();
  }
  if (!forward)
    std::reverse(ops.begin(), ops.end());
  return {ops, cur};
}

/// Whether `bar` orders nothing (see GpuOptPasses.td).
bool redundant(gpu::BarrierOp bar, gpu::LaunchOp launch) {
  Block *block = bar->getBlock();
  auto [beforeOps, j0] = segment(bar, /*forward=*/false);
  auto [afterOps, j1] = segment(bar, /*forward=*/true);
  bool top = block == &launch.getBody().front();
  std::optional<Effects> before = effects(beforeOps);
  if ((j0 || top) && before && before->empty())
    return true; // nothing before it to order
  if (!j1)       // the kernel ends here: nothing after it to order; else the segment after runs
                 // to the end of the block (a loop's next iteration...)
    return top && llvm::all_of(afterOps, [](Operation *o) { return isa<gpu::TerminatorOp>(o); });
  std::optional<Effects> after = effects(afterOps);
  if (!before || !after)
    return false;
  if (intersects(before->writes, after->reads) || intersects(before->writes, after->writes) ||
      intersects(before->reads, after->writes))
    return false;
  // the segment before reaches back into the previous iteration
  Operation *beforeLast = block->empty() ? nullptr : block->back().getPrevNode();
  if (!j0 && !top && !(beforeLast && isa<gpu::BarrierOp>(beforeLast)))
    return false;
  return true;
}

/// The barriers whose `redundant` answer can change when `bar` is erased: its neighbours in its
/// block (their segments merge with the one it separated), the block's first barrier (which
/// looks at whether the block ends in a barrier), and in each enclosing block of the launch the
/// barriers around the op that holds `bar` (their segments hold it among their nested ops).
SmallVector<Operation *> affectedBy(gpu::BarrierOp bar, gpu::LaunchOp launch) {
  SmallVector<Operation *> out;
  for (bool forward : {false, true})
    if (Operation *b = segment(bar, forward).second)
      out.push_back(b);
  Block *block = bar->getBlock();
  if (!block->empty()) {
    Operation &front = block->front();
    out.push_back(isa<gpu::BarrierOp>(front) ? &front : segment(&front, /*forward=*/true).second);
  }
  for (Operation *p = block->getParentOp(); p && p != launch.getOperation(); p = p->getParentOp())
    for (bool forward : {false, true})
      if (Operation *b = segment(p, forward).second)
        out.push_back(b);
  llvm::erase(out, nullptr);
  return out;
}

struct GpuRemoveRedundantBarriers
    : public ansor::impl::GpuRemoveRedundantBarriersBase<GpuRemoveRedundantBarriers> {
  void runOnOperation() override {
    // One removal at a time, rescanning from the start: a removal merges two segments. The
    // answers of barriers a removal cannot affect are kept (`affectedBy`): rescanning 1024
    // barriers of an unrolled matmul kernel after each removal, each check walking its block,
    // took 39 s of one candidate's 43 s build. Same removals, same order as recomputing all.
    DenseMap<Operation *, bool> known;
    SmallVector<std::pair<gpu::LaunchOp, SmallVector<Operation *>>> launches;
    for (gpu::LaunchOp launch : collect<gpu::LaunchOp>(getOperation())) {
      SmallVector<Operation *> bars;
      for (gpu::BarrierOp bar : collect<gpu::BarrierOp>(launch))
        bars.push_back(bar);
      launches.push_back({launch, std::move(bars)});
    }
    bool changed = true;
    while (changed) {
      changed = false;
      for (auto &[launch, bars] : launches) {
        for (Operation *&slot : bars) {
          if (!slot)
            continue; // erased
          auto bar = cast<gpu::BarrierOp>(slot);
          auto it = known.find(bar);
          bool isRedundant = it != known.end() ? it->second : (known[bar] = redundant(bar, launch));
          if (isRedundant) {
            for (Operation *op : affectedBy(bar, launch))
              known.erase(op);
            known.erase(bar);
            bar.erase();
            slot = nullptr;
            changed = true;
            break;
          }
        }
        if (changed)
          break;
      }
    }
  }
};

} // namespace

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

/// Whether `bar` orders nothing (see GpuOptPasses.td).
bool redundant(gpu::BarrierOp bar, gpu::LaunchOp launch) {
  Block *block = bar->getBlock();
  SmallVector<Operation *> ops;
  for (Operation &op : *block)
    ops.push_back(&op);
  size_t n = ops.size();
  size_t i = llvm::find(ops, bar.getOperation()) - ops.begin();
  std::optional<size_t> j0, j1; // previous and next barrier of the block
  for (size_t k = 0; k < i; ++k)
    if (isa<gpu::BarrierOp>(ops[k]))
      j0 = k;
  for (size_t k = i + 1; k < n && !j1; ++k)
    if (isa<gpu::BarrierOp>(ops[k]))
      j1 = k;
  bool top = block == &launch.getBody().front();
  ArrayRef<Operation *> all(ops);
  size_t from = j0 ? *j0 + 1 : 0;
  std::optional<Effects> before = effects(all.slice(from, i - from));
  if ((j0 || top) && before && before->empty())
    return true; // nothing before it to order
  if (!j1)       // the kernel ends here: nothing after it to order; else the segment after runs
                 // to the end of the block (a loop's next iteration...)
    return top && llvm::all_of(all.drop_front(i + 1),
                               [](Operation *o) { return isa<gpu::TerminatorOp>(o); });
  std::optional<Effects> after = effects(all.slice(i + 1, *j1 - i - 1));
  if (!before || !after)
    return false;
  if (intersects(before->writes, after->reads) || intersects(before->writes, after->writes) ||
      intersects(before->reads, after->writes))
    return false;
  // the segment before reaches back into the previous iteration
  if (!j0 && !top && !(n >= 2 && isa<gpu::BarrierOp>(ops[n - 2])))
    return false;
  return true;
}

/// The barriers whose `redundant` answer can change when `bar` is erased: its neighbours in its
/// block (their segments merge with the one it separated), the block's first barrier (which
/// looks at whether the block ends in a barrier), and every barrier directly in an enclosing
/// block of the launch (a segment there holds `bar` among its nested ops).
SmallVector<Operation *> affectedBy(gpu::BarrierOp bar, gpu::LaunchOp launch) {
  SmallVector<Operation *> out;
  Block *block = bar->getBlock();
  Operation *prev = nullptr, *first = nullptr;
  bool seen = false;
  for (Operation &op : *block) {
    if (!isa<gpu::BarrierOp>(op))
      continue;
    if (!first && &op != bar.getOperation())
      first = &op;
    if (&op == bar.getOperation()) {
      seen = true;
      if (prev)
        out.push_back(prev);
      continue;
    }
    if (seen) {
      out.push_back(&op);
      break;
    }
    prev = &op;
  }
  if (first)
    out.push_back(first);
  for (Operation *p = block->getParentOp(); p && p != launch.getOperation(); p = p->getParentOp())
    for (Operation &op : *p->getBlock())
      if (isa<gpu::BarrierOp>(op))
        out.push_back(&op);
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
    bool changed = true;
    while (changed) {
      changed = false;
      for (gpu::LaunchOp launch : collect<gpu::LaunchOp>(getOperation())) {
        for (gpu::BarrierOp bar : collect<gpu::BarrierOp>(launch)) {
          auto it = known.find(bar);
          bool isRedundant = it != known.end() ? it->second : (known[bar] = redundant(bar, launch));
          if (isRedundant) {
            for (Operation *op : affectedBy(bar, launch))
              known.erase(op);
            known.erase(bar);
            bar.erase();
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

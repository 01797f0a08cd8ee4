//===- ReuseReadonlyLoads.cpp - ansor-gpu-reuse-readonly-loads -----------------------===//
//
// %a = load %x[i]; gpu.barrier; %b = load %x[i]   (nothing in the launch writes %x's root)
//   --> %a = load %x[i]; gpu.barrier; (uses of %b use %a)
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuOptUtils.h"

#include "llvm/ADT/DenseSet.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_GPUREUSEREADONLYLOADS
#include "passes/GPU/GpuOptPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;
using namespace mlir::ansor::gpuopt;

namespace {

bool isLoad(Operation *op) {
  return isa<vector::TransferReadOp, vector::LoadOp, memref::LoadOp>(op);
}

/// Same op, operands, attributes and result types: the same read.
bool sameRead(Operation *a, Operation *b) {
  return a->getName() == b->getName() && a->getOperands() == b->getOperands() &&
         a->getAttrDictionary() == b->getAttrDictionary() &&
         a->getResultTypes() == b->getResultTypes();
}

/// Reuses the loads of the launch's read-only buffers, block by block (see GpuOptPasses.td).
unsigned reuse(gpu::LaunchOp launch) {
  SmallVector<Operation *> all;
  launch.getBody().walk([&](Operation *op) { all.push_back(op); });
  Effects eff = *effects(all, /*barriersOk=*/true);
  unsigned n = 0;
  launch.getBody().walk([&](Block *block) {
    // earlier loads of this block, by their memref operand
    llvm::DenseMap<Value, SmallVector<Operation *>> seen;
    for (Operation &op : llvm::make_early_inc_range(*block)) {
      if (!isLoad(&op))
        continue;
      Value mem = op.getOperand(0);
      if (eff.writes.contains(memrefRoot(mem)))
        continue;
      SmallVector<Operation *> &earlier = seen[mem];
      auto it = llvm::find_if(earlier, [&](Operation *e) { return sameRead(e, &op); });
      if (it == earlier.end()) {
        earlier.push_back(&op);
        continue;
      }
      op.replaceAllUsesWith(*it);
      op.erase();
      ++n;
    }
  });
  return n;
}

struct GpuReuseReadonlyLoads
    : public ansor::impl::GpuReuseReadonlyLoadsBase<GpuReuseReadonlyLoads> {
  void runOnOperation() override {
    for (gpu::LaunchOp launch : collect<gpu::LaunchOp>(getOperation()))
      reuse(launch);
  }
};

} // namespace

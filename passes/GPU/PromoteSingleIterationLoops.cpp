//===- PromoteSingleIterationLoops.cpp - ansor-gpu-promote-single-iteration-loops ---===//
//
// scf.for %i = %c0 to %c1 step %c1 { body(%i) } --> body(%c0)
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuLoweringBPasses.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_GPUPROMOTESINGLEITERATIONLOOPS
#include "passes/GPU/GpuLoweringBPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;

namespace {

struct GpuPromoteSingleIterationLoops
    : public ansor::impl::GpuPromoteSingleIterationLoopsBase<GpuPromoteSingleIterationLoops> {
  using Base::Base;
  void runOnOperation() override {
    // Innermost first (post-order): promoting an inner loop never erases an outer one.
    SmallVector<scf::ForOp> loops;
    getOperation()->walk<WalkOrder::PostOrder>([&](scf::ForOp loop) { loops.push_back(loop); });
    IRRewriter rewriter(&getContext());
    for (scf::ForOp loop : loops)
      (void)loop.promoteIfSingleIteration(rewriter); // failure: not a single iteration, kept
  }
};

} // namespace

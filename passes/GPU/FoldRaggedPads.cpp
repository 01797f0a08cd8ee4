//===- FoldRaggedPads.cpp - ansor-gpu-fold-ragged-pads ----------------------------===//
//
// tensor.pad {ansor.ragged} (tensor.extract_slice %x[0..] [sizes] [1..]) with %x of the padded
// type --> %x
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuOptUtils.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_GPUFOLDRAGGEDPADS
#include "passes/GPU/GpuOptPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;

namespace {

struct GpuFoldRaggedPads : public ansor::impl::GpuFoldRaggedPadsBase<GpuFoldRaggedPads> {
  void runOnOperation() override {
    SmallVector<tensor::PadOp> pads;
    getOperation()->walk([&](tensor::PadOp pad) {
      if (pad->hasAttr("ansor.ragged"))
        pads.push_back(pad);
    });
    for (tensor::PadOp pad : pads) {
      pad->removeAttr("ansor.ragged");
      auto slice = pad.getSource().getDefiningOp<tensor::ExtractSliceOp>();
      if (!slice || slice.getSource().getType() != pad.getResultType() ||
          llvm::any_of(pad.getStaticLow(), [](int64_t x) { return x != 0; }) ||
          llvm::any_of(slice.getStaticOffsets(), [](int64_t x) { return x != 0; }) ||
          llvm::any_of(slice.getStaticStrides(), [](int64_t x) { return x != 1; }))
        continue;
      pad.getResult().replaceAllUsesWith(slice.getSource());
      pad->erase();
      if (slice->use_empty())
        slice->erase();
    }
  }
};

} // namespace

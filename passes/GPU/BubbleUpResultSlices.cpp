//===- BubbleUpResultSlices.cpp - ansor-gpu-bubble-up-result-slices ----------------===//
//
// tensor.extract_slice of a linalg op's result (through reshapes) --> the op computed on the
// slice only: its operands sliced, loops outside the result whole (upstream's bubble-up
// patterns, linalg and tensor).
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuReductionPasses.h"

#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Interfaces/TilingInterface.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_GPUBUBBLEUPRESULTSLICES
#include "passes/GPU/GpuReductionPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;

namespace {

/// extract_slice(linalg op with one use) -> the op's tile for the slice (its TilingInterface:
/// loops not indexing the result stay whole). (Upstream's linalg pattern is not exported by
/// the MLIR wheel.)
struct SliceOfLinalgOp : OpRewritePattern<tensor::ExtractSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tensor::ExtractSliceOp slice, PatternRewriter &rewriter) const override {
    auto result = dyn_cast<OpResult>(slice.getSource());
    if (!result)
      return failure();
    auto op = dyn_cast<linalg::LinalgOp>(result.getOwner());
    if (!op || !op->hasOneUse() || op.getNumDpsInits() != 1 || !op.hasPureTensorSemantics() ||
        !slice.hasUnitStride())
      return failure();
    auto source = cast<RankedTensorType>(slice.getSourceType());
    if (source.hasStaticShape() && slice.hasZeroOffset() &&
        llvm::equal(slice.getStaticSizes(), source.getShape()))
      return failure(); // the whole result (the rank-reducing view this pattern leaves)
    rewriter.setInsertionPoint(slice);
    FailureOr<TilingResult> tiled = tensor::replaceExtractSliceWithTiledProducer(rewriter, slice, result);
    if (failed(tiled) || tiled->tiledValues.size() != 1)
      return failure();
    Value v = tiled->tiledValues.front();
    if (v.getType() != slice.getType()) { // a rank-reducing slice: drop the unit dims
      auto type = cast<RankedTensorType>(v.getType());
      SmallVector<OpFoldResult> zeros(type.getRank(), rewriter.getIndexAttr(0));
      SmallVector<OpFoldResult> ones(type.getRank(), rewriter.getIndexAttr(1));
      SmallVector<OpFoldResult> sizes;
      for (int64_t s : type.getShape())
        sizes.push_back(rewriter.getIndexAttr(s));
      v = tensor::ExtractSliceOp::create(rewriter, slice.getLoc(), slice.getType(), v, zeros, sizes, ones);
    }
    rewriter.replaceOp(slice, v);
    return success();
  }
};

struct GpuBubbleUpResultSlices
    : public ansor::impl::GpuBubbleUpResultSlicesBase<GpuBubbleUpResultSlices> {
  void runOnOperation() override {
    // first, expand(rank-reducing slice) -> one slice of the full rank; then the slices move up
    // (separate rounds: the two pattern sets undo each other)
    RewritePatternSet reshapes(&getContext());
    tensor::populateReassociativeReshapeFoldingPatterns(reshapes);
    RewritePatternSet bubble(&getContext());
    tensor::populateBubbleUpExtractSliceOpPatterns(bubble);
    bubble.add<SliceOfLinalgOp>(&getContext());
    tensor::populateFoldTensorEmptyPatterns(bubble, /*foldSingleUseOnly=*/false); // slices of empties
    if (failed(applyPatternsGreedily(getOperation(), std::move(reshapes))) ||
        failed(applyPatternsGreedily(getOperation(), std::move(bubble))))
      signalPassFailure();
  }
};

} // namespace

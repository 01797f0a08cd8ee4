//===- CollapseReductionLoops.cpp - ansor-gpu-collapse-reduction-loops ------------===//
//
// linalg.generic with k >= 2 consecutive reduction loops --> the same op over one merged
// reduction loop (inputs through tensor.collapse_shape); kept unit dims of its results become
// unit parallel loops. A reduction to a scalar (no parallel loop, rank-0 results) gets a unit
// parallel loop first: its results are computed as tensor<1xT> and collapsed back.
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuReductionPasses.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_GPUCOLLAPSEREDUCTIONLOOPS
#include "passes/GPU/GpuReductionPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;

namespace {

/// `op` rebuilt over one merged reduction loop (see GpuReductionPasses.td); failure (with an
/// error on `op`) when the merge would not be exact.
LogicalResult collapseReductionLoops(linalg::GenericOp op, IRRewriter &rewriter) {
  auto refuse = [&](StringRef why) -> LogicalResult {
    return op.emitError("cannot merge the reduction loops: ") << why;
  };
  SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
  SmallVector<unsigned> red;
  for (auto [d, it] : llvm::enumerate(iters))
    if (it == utils::IteratorType::reduction)
      red.push_back(d);
  unsigned first = red.front(), k = red.size(), n = iters.size();
  // a reduction to a scalar: every loop reduces and every result is rank 0
  bool scalar = op.getNumParallelLoops() == 0 &&
                llvm::all_of(op.getDpsInitsMutable(), [&](OpOperand &out) {
                  return op.getMatchingIndexingMap(&out).getNumResults() == 0;
                });
  if (red.back() - first + 1 != k)
    return refuse("the reduction loops are not consecutive");
  if (!op.hasPureTensorSemantics())
    return refuse("an op on buffers");
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  for (unsigned d : red)
    if (ShapedType::isDynamic(ranges[d]))
      return refuse("a dynamic reduction loop");
  unsigned units = 0;
  for (OpOperand &out : op.getDpsInitsMutable())
    for (AffineExpr e : op.getMatchingIndexingMap(&out).getResults())
      units += isa<AffineConstantExpr>(e);
  units += scalar; // the scalar's unit row loop
  unsigned newN = n - k + 1 + units, mergedDim = first + units;
  auto newDim = [&](unsigned d) {
    if (d < first)
      return d;
    if (d < first + k)
      return mergedDim;
    return d - k + 1 + units;
  };
  MLIRContext *ctx = op.getContext();
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  for (OpOperand *in : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(in);
    SmallVector<AffineExpr> results;
    SmallVector<ReassociationIndices> groups;
    unsigned seen = 0;
    for (auto [pos, e] : llvm::enumerate(map.getResults())) {
      auto dim = dyn_cast<AffineDimExpr>(e);
      if (!dim && !isa<AffineConstantExpr>(e))
        return refuse("an input indexed by a loop expression");
      bool reduced = dim && dim.getPosition() >= first && dim.getPosition() < first + k;
      // the reduction loops: consecutive results, in loop order
      if ((!reduced && seen != 0 && seen != k) || (reduced && dim.getPosition() != first + seen))
        return refuse("an input reads them out of order");
      if (!reduced) {
        results.push_back(dim ? getAffineDimExpr(newDim(dim.getPosition()), ctx) : e);
        groups.push_back({static_cast<int64_t>(pos)});
        continue;
      }
      if (seen++ == 0) {
        results.push_back(getAffineDimExpr(mergedDim, ctx));
        groups.push_back({});
      }
      groups.back().push_back(static_cast<int64_t>(pos));
    }
    if (seen != 0 && seen != k)
      return refuse("an input reads some of them only");
    Value v = in->get();
    if (seen != 0 && k >= 2)
      v = tensor::CollapseShapeOp::create(rewriter, loc, v, groups);
    inputs.push_back(v);
    maps.push_back(AffineMap::get(newN, 0, results, ctx));
  }
  unsigned unit = first;
  SmallVector<Value> outputs;
  SmallVector<Type> resultTypes;
  for (OpOperand &out : op.getDpsInitsMutable()) {
    Value v = out.get();
    if (scalar) { // tensor<T> -> tensor<1xT>, indexed by the unit row loop
      auto t = cast<RankedTensorType>(v.getType());
      auto t1 = RankedTensorType::get({1}, t.getElementType());
      auto fill = v.getDefiningOp<linalg::FillOp>();
      if (fill && v.hasOneUse()) { // its fill, rebuilt on the row (keeping `ansor.op`)
        OpBuilder::InsertionGuard g(rewriter);
        rewriter.setInsertionPoint(fill);
        Value dest = tensor::ExpandShapeOp::create(rewriter, fill.getLoc(), t1, fill.getOutputs()[0],
                                                   ArrayRef<ReassociationIndices>{});
        auto fresh = linalg::FillOp::create(rewriter, fill.getLoc(), fill.getInputs()[0], dest);
        fresh->setDiscardableAttrs(fill->getDiscardableAttrDictionary());
        outputs.push_back(fresh.getResult(0));
      } else {
        outputs.push_back(tensor::ExpandShapeOp::create(rewriter, loc, t1, v, ArrayRef<ReassociationIndices>{}));
      }
      resultTypes.push_back(t1);
      maps.push_back(AffineMap::get(newN, 0, {getAffineDimExpr(unit, ctx)}, ctx));
      continue;
    }
    outputs.push_back(v);
    resultTypes.push_back(v.getType());
    SmallVector<AffineExpr> results;
    for (AffineExpr e : op.getMatchingIndexingMap(&out).getResults()) {
      if (auto c = dyn_cast<AffineConstantExpr>(e)) {
        if (c.getValue() != 0)
          return refuse("a result indexed by a constant other than 0");
        results.push_back(getAffineDimExpr(unit++, ctx));
      } else if (auto dim = dyn_cast<AffineDimExpr>(e)) {
        results.push_back(getAffineDimExpr(newDim(dim.getPosition()), ctx));
      } else {
        return refuse("a result indexed by a loop expression");
      }
    }
    maps.push_back(AffineMap::get(newN, 0, results, ctx));
  }
  SmallVector<utils::IteratorType> newIters(newN, utils::IteratorType::parallel);
  newIters[mergedDim] = utils::IteratorType::reduction;
  auto fresh = linalg::GenericOp::create(rewriter, loc, resultTypes, inputs, outputs, maps, newIters);
  fresh->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  rewriter.inlineRegionBefore(op.getRegion(), fresh.getRegion(), fresh.getRegion().end());
  // linalg.index: a merged loop's index from the merged one (row-major: the last loop fastest)
  SmallVector<linalg::IndexOp> indices;
  fresh.getRegion().walk([&](linalg::IndexOp idx) { indices.push_back(idx); });
  for (linalg::IndexOp idx : indices) {
    unsigned d = idx.getDim();
    rewriter.setInsertionPoint(idx);
    Value v = linalg::IndexOp::create(rewriter, idx.getLoc(), newDim(d));
    if (d >= first && d < first + k) {
      int64_t stride = 1;
      for (unsigned r = d + 1; r < first + k; ++r)
        stride *= ranges[r];
      if (stride > 1)
        v = arith::DivUIOp::create(rewriter, idx.getLoc(), v,
                                   arith::ConstantIndexOp::create(rewriter, idx.getLoc(), stride));
      if (d > first)
        v = arith::RemUIOp::create(
            rewriter, idx.getLoc(), v,
            arith::ConstantIndexOp::create(rewriter, idx.getLoc(), ranges[d]));
    }
    rewriter.replaceOp(idx, v);
  }
  SmallVector<Value> results(fresh->getResults());
  if (scalar) {
    rewriter.setInsertionPointAfter(fresh);
    for (Value &r : results)
      r = tensor::CollapseShapeOp::create(rewriter, loc, r, ArrayRef<ReassociationIndices>{});
  }
  SmallVector<linalg::FillOp> oldFills;
  for (Value v : op.getOutputs())
    if (auto fill = v.getDefiningOp<linalg::FillOp>(); fill && scalar)
      oldFills.push_back(fill);
  rewriter.replaceOp(op, results);
  for (linalg::FillOp fill : oldFills) // rebuilt on the row above
    if (fill->use_empty())
      rewriter.eraseOp(fill);
  if (scalar) // a generic reading the scalar with a unit loop (log-softmax of one row) reads the row
    for (auto [row, value] : llvm::zip(fresh->getResults(), results))
      for (OpOperand &use : llvm::make_early_inc_range(value.getUses())) {
        auto user = dyn_cast<linalg::GenericOp>(use.getOwner());
        if (!user || !user.isDpsInput(&use) || user.getMatchingIndexingMap(&use).getNumResults() != 0)
          continue;
        SmallVector<int64_t> ranges = user.getStaticLoopRanges();
        SmallVector<utils::IteratorType> iters = user.getIteratorTypesArray();
        auto unit = llvm::find_if(llvm::seq<unsigned>(0, ranges.size()), [&](unsigned d) {
          return ranges[d] == 1 && iters[d] == utils::IteratorType::parallel;
        });
        if (unit == llvm::seq<unsigned>(0, ranges.size()).end())
          continue;
        SmallVector<AffineMap> maps = user.getIndexingMapsArray();
        maps[use.getOperandNumber()] =
            AffineMap::get(ranges.size(), 0, rewriter.getAffineDimExpr(*unit));
        rewriter.modifyOpInPlace(user, [&] {
          use.set(row);
          user.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps));
        });
      }
  return success();
}

struct GpuCollapseReductionLoops
    : public ansor::impl::GpuCollapseReductionLoopsBase<GpuCollapseReductionLoops> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> ops;
    getOperation()->walk([&](linalg::GenericOp op) {
      bool scalar = op.getNumParallelLoops() == 0 && op.getNumLoops() > 0 &&
                    llvm::all_of(op.getDpsInitsMutable(), [&](OpOperand &out) {
                      return op.getMatchingIndexingMap(&out).getNumResults() == 0;
                    });
      if (op.getNumReductionLoops() >= 2 || scalar)
        ops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::GenericOp op : ops)
      if (failed(collapseReductionLoops(op, rewriter)))
        return signalPassFailure();
  }
};

} // namespace

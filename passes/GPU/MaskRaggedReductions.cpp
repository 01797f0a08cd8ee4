//===- MaskRaggedReductions.cpp - ansor-gpu-mask-ragged-reductions ---------------===//
//
// linalg.generic reducing over a loop that reads tensor.pad {ansor.ragged} padding -->
// the same op reading a column mask too (a linalg.generic {ansor.ragged_mask}), whose padding
// iterations combine the combiner's neutral element (or keep the accumulator)
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuOptUtils.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <limits>

namespace mlir::ansor {
#define GEN_PASS_DEF_GPUMASKRAGGEDREDUCTIONS
#include "passes/GPU/GpuOptPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;

namespace {

constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();

/// Per loop of `op`, the count of its iterations that read no ragged padding (kUnbounded where
/// it reads none); failure for padding the pass cannot bound (dynamic sizes, low padding).
FailureOr<SmallVector<int64_t>> raggedBounds(linalg::LinalgOp op) {
  SmallVector<int64_t> bounds(op.getNumLoops(), kUnbounded);
  SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
  for (OpOperand *in : op.getDpsInputOperands()) {
    auto pad = in->get().getDefiningOp<tensor::PadOp>();
    if (!pad || !pad->hasAttr("ansor.ragged"))
      continue;
    AffineMap map = op.getMatchingIndexingMap(in);
    ArrayRef<int64_t> src = pad.getSourceType().getShape();
    ArrayRef<int64_t> low = pad.getStaticLow(), high = pad.getStaticHigh();
    for (auto [axis, expr] : llvm::enumerate(map.getResults())) {
      if (high[axis] == 0 && low[axis] == 0)
        continue;
      auto dim = dyn_cast<AffineDimExpr>(expr);
      unsigned d = dim ? dim.getPosition() : 0;
      bool reduces = dim ? iters[d] == utils::IteratorType::reduction
                         : llvm::any_of(llvm::seq<unsigned>(0, op.getNumLoops()), [&](unsigned l) {
                             return expr.isFunctionOfDim(l) && iters[l] == utils::IteratorType::reduction;
                           });
      if (!reduces)
        continue;
      if (!dim || low[axis] != 0 || ShapedType::isDynamic(high[axis]) || ShapedType::isDynamic(src[axis]))
        return failure();
      bounds[d] = std::min(bounds[d], src[axis]);
    }
  }
  return bounds;
}

/// `op` with one more input per bounded loop `d`: a column mask `M[j] = j < bound` (a
/// `linalg.generic` marked `ansor.ragged_mask`, read at `d`); its body masked with them: past a
/// bound each result combines its combiner's neutral element (`arith::getNeutralElement`) or,
/// with no such combiner, yields the accumulator. The mask is an input, not a `linalg.index` in
/// the body, because `tile_reduction_using_forall` leaves a partial reduction's indices local.
void maskReduction(linalg::GenericOp op, ArrayRef<int64_t> bounds) {
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  OpBuilder b(op);
  unsigned nLoops = op.getNumLoops(), nIn = op.getNumDpsInputs();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<Value> inputs = op.getDpsInputs();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  unsigned nMasks = 0;
  for (auto [d, bound] : llvm::enumerate(bounds)) {
    if (bound == kUnbounded)
      continue;
    Value empty = tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{ranges[d]}, b.getI1Type());
    auto mask = linalg::GenericOp::create(
        b, loc, TypeRange{empty.getType()}, ValueRange{}, ValueRange{empty},
        ArrayRef<AffineMap>{AffineMap::getMultiDimIdentityMap(1, ctx)},
        ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
        [&, bound = bound](OpBuilder &nb, Location l, ValueRange) {
          Value j = linalg::IndexOp::create(nb, l, 0);
          Value ok = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::ult, j,
                                           arith::ConstantIndexOp::create(nb, l, bound));
          linalg::YieldOp::create(nb, l, ok);
        });
    mask->setAttr("ansor.ragged_mask", b.getUnitAttr());
    inputs.push_back(mask.getResult(0));
    maps.insert(maps.begin() + nIn + nMasks, AffineMap::get(nLoops, 0, getAffineDimExpr(d, ctx)));
    ++nMasks;
  }
  auto masked = linalg::GenericOp::create(b, loc, op.getResultTypes(), inputs, op.getDpsInits(), maps,
                                          op.getIteratorTypesArray());
  masked->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  masked.getRegion().takeBody(op.getRegion());
  Block &body = masked.getRegion().front();
  b.setInsertionPointToStart(&body);
  Value inside;
  for (unsigned k = 0; k < nMasks; ++k) {
    Value m = body.insertArgument(nIn + k, b.getI1Type(), loc);
    inside = inside ? arith::AndIOp::create(b, loc, inside, m).getResult() : m;
  }
  op->replaceAllUsesWith(masked->getResults());
  op->erase();

  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  for (OpOperand &init : masked.getDpsInitsMutable()) {
    BlockArgument acc = masked.getMatchingBlockArgument(&init);
    unsigned i = init.getOperandNumber() - masked.getNumDpsInputs();
    Value y = yield.getOperand(i);
    Operation *comb = y.getDefiningOp();
    if (comb && comb->getBlock() == &body && comb->getNumOperands() == 2 && comb->getNumResults() == 1 &&
        (comb->getOperand(0) == acc) != (comb->getOperand(1) == acc) && llvm::hasSingleElement(acc.getUses())) {
      if (std::optional<TypedAttr> neutral = arith::getNeutralElement(comb)) {
        unsigned k = comb->getOperand(0) == acc ? 1 : 0;
        b.setInsertionPoint(comb);
        Value id = arith::ConstantOp::create(b, loc, *neutral);
        comb->setOperand(k, arith::SelectOp::create(b, loc, inside, comb->getOperand(k), id));
        continue;
      }
    }
    b.setInsertionPoint(yield);
    yield->setOperand(i, arith::SelectOp::create(b, loc, inside, y, acc));
  }
}

struct GpuMaskRaggedReductions : public ansor::impl::GpuMaskRaggedReductionsBase<GpuMaskRaggedReductions> {
  void runOnOperation() override {
    SmallVector<std::pair<linalg::GenericOp, SmallVector<int64_t>>> todo;
    WalkResult res = getOperation()->walk([&](linalg::LinalgOp op) {
      if (op.getNumReductionLoops() == 0)
        return WalkResult::advance();
      FailureOr<SmallVector<int64_t>> bounds = raggedBounds(op);
      if (failed(bounds)) {
        op->emitError("ansor-gpu-mask-ragged-reductions: ragged padding of a reduction loop that is not "
                      "static high padding of a plain loop dim");
        return WalkResult::interrupt();
      }
      if (llvm::all_of(*bounds, [](int64_t x) { return x == kUnbounded; }))
        return WalkResult::advance();
      auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
      if (!generic) {
        op->emitError("ansor-gpu-mask-ragged-reductions: reduces over ragged padding but is not a "
                      "linalg.generic (generalize it first)");
        return WalkResult::interrupt();
      }
      todo.emplace_back(generic, *bounds);
      return WalkResult::advance();
    });
    if (res.wasInterrupted())
      return signalPassFailure();
    for (auto &[op, bounds] : todo)
      maskReduction(op, bounds);
  }
};

} // namespace

//===- ConvToNhwc.cpp - ansor-conv-to-nhwc ----------------------------------------===//
//
// linalg.conv_2d_nchw_fchw(x, w, init)
//   --> transpose_back(linalg.conv_2d_nhwc_hwcf(transpose(x), transpose(w), transpose(init)))
// linalg.depthwise_conv_2d_nchw_chw likewise --> depthwise_conv_2d_nhwc_hwc; pooling_nchw_{max,sum}
//   --> pooling_nhwc_{max,sum}
//
// PyTorch models arrive channels-first; the CPU sketches vectorize the innermost output dimension,
// which channels-last makes the (long, contiguous) channel dimension. See Passes.td.
//
// ansor-propagate-nhwc: transpose_back(y) feeding element-wise ops, pads and transposes is moved
// down (element-wise ops and pads run channels-last) until it meets the next convolution's input
// transpose and both vanish. See Passes.td.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_CONVTONHWC
#define GEN_PASS_DEF_PROPAGATENHWC
#include "passes/Passes.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;

namespace {

Value transpose(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> perm) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(type.getDimSize(p));
  Value empty = tensor::EmptyOp::create(b, loc, shape, type.getElementType());
  return linalg::TransposeOp::create(b, loc, v, empty, perm)->getResult(0);
}

// NHWC -> NCHW (what ansor-conv-to-nhwc puts after every convolution) and its inverse.
constexpr std::array<int64_t, 4> kToNchw = {0, 3, 1, 2};
constexpr std::array<int64_t, 4> kToNhwc = {0, 2, 3, 1};

bool staticTensors(Operation *op) {
  return cast<linalg::LinalgOp>(op).hasPureTensorSemantics() &&
         llvm::all_of(op->getOperandTypes(), [](Type t) { return cast<ShapedType>(t).hasStaticShape(); });
}

/// op(x, w, init) -> transpose_back(NhwcOp(transpose(x), transpose(w, filterPerm), transpose(init))),
/// same strides and dilations. An empty `filterPerm` keeps the second operand (a pool's window,
/// which carries only its shape).
template <typename NhwcOp, typename NchwOp>
void toChannelsLast(NchwOp op, ArrayRef<int64_t> filterPerm) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value x = transpose(b, loc, op.getInputs()[0], kToNhwc);
  Value w = filterPerm.empty() ? op.getInputs()[1] : transpose(b, loc, op.getInputs()[1], filterPerm);
  Value init = transpose(b, loc, op.getOutputs()[0], kToNhwc);
  auto nhwc = NhwcOp::create(b, loc, TypeRange{init.getType()}, ValueRange{x, w}, ValueRange{init}, op.getStrides(),
                             op.getDilations());
  op->getResult(0).replaceAllUsesWith(transpose(b, loc, nhwc->getResult(0), kToNchw));
  op->erase();
}

struct ConvToNhwc : public mlir::ansor::impl::ConvToNhwcBase<ConvToNhwc> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation()->walk([&](Operation *op) {
      if (isa<linalg::Conv2DNchwFchwOp, linalg::DepthwiseConv2DNchwChwOp, linalg::PoolingNchwMaxOp,
              linalg::PoolingNchwSumOp>(op) &&
          staticTensors(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      if (auto conv = dyn_cast<linalg::Conv2DNchwFchwOp>(op))
        toChannelsLast<linalg::Conv2DNhwcHwcfOp>(conv, {2, 3, 1, 0}); // F x C x KH x KW -> KH x KW x C x F
      else if (auto dw = dyn_cast<linalg::DepthwiseConv2DNchwChwOp>(op))
        toChannelsLast<linalg::DepthwiseConv2DNhwcHwcOp>(dw, {1, 2, 0}); // C x KH x KW -> KH x KW x C
      else if (auto mx = dyn_cast<linalg::PoolingNchwMaxOp>(op))
        toChannelsLast<linalg::PoolingNhwcMaxOp>(mx, {});
      else
        toChannelsLast<linalg::PoolingNhwcSumOp>(cast<linalg::PoolingNchwSumOp>(op), {});
    }
  }
};

/// The NHWC source of `v` when `v` is `linalg.transpose(src) permutation = [0, 3, 1, 2]`.
Value nhwcSource(Value v) {
  auto t = v.getDefiningOp<linalg::TransposeOp>();
  if (!t || !llvm::equal(t.getPermutation(), kToNchw) || !t.hasPureTensorSemantics())
    return nullptr;
  return t.getInput();
}

/// generic(..., transpose(x, [0,3,1,2]), ...) -> transpose(generic'(..., x, ...), [0,3,1,2]) with
/// generic' iterating (n, h, w, c) instead of (n, c, h, w). Only where the transpose is read
/// through the identity map (the generic iterates (n, c, h, w)): a generic already rewritten
/// iterates (n, h, w, c) and reads the inputs that became transposes later through permuted maps;
/// those are folded by FoldTransposedInput instead of permuting its loops a second time.
struct SinkThroughElementwise : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op, PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 || op.getNumResults() != 1 ||
        op.getNumLoops() != 4 || op.getNumParallelLoops() != 4 || op.hasIndexSemantics())
      return rewriter.notifyMatchFailure(op, "not a rank-4 element-wise generic");
    OpOperand *init = op.getDpsInitOperand(0);
    auto outType = dyn_cast<RankedTensorType>(init->get().getType());
    if (!outType || !outType.hasStaticShape() || !op.getMatchingIndexingMap(init).isIdentity())
      return rewriter.notifyMatchFailure(op, "output is not the identity over a static tensor");
    if (llvm::none_of(op.getDpsInputOperands(), [&](OpOperand *in) {
          return nhwcSource(in->get()) && op.getMatchingIndexingMap(in).isIdentity();
        }))
      return rewriter.notifyMatchFailure(op, "no input is an NHWC->NCHW transpose read in NCHW order");
    MLIRContext *ctx = op.getContext();
    // New loops (n, h, w, c) = e0..e3; old loop d_i = sigma[i] of the new ones.
    AffineMap sigma = AffineMap::get(4, 0,
                                     {getAffineDimExpr(0, ctx), getAffineDimExpr(3, ctx),
                                      getAffineDimExpr(1, ctx), getAffineDimExpr(2, ctx)},
                                     ctx);
    SmallVector<Value> inputs;
    SmallVector<AffineMap> maps;
    for (OpOperand *in : op.getDpsInputOperands()) {
      AffineMap m = op.getMatchingIndexingMap(in);
      if (Value src = nhwcSource(in->get())) {
        // transpose(src)[r0, r1, r2, r3] == src[r0, r2, r3, r1]
        SmallVector<AffineExpr> r(m.getResults());
        m = AffineMap::get(m.getNumDims(), 0, {r[0], r[2], r[3], r[1]}, ctx);
        inputs.push_back(src);
      } else {
        inputs.push_back(in->get());
      }
      maps.push_back(m.compose(sigma));
    }
    Location loc = op.getLoc();
    SmallVector<int64_t> shape;
    for (int64_t p : kToNhwc)
      shape.push_back(outType.getDimSize(p));
    Value out;
    if (Value src = nhwcSource(init->get()))
      out = src;
    else if (init->get().getDefiningOp<tensor::EmptyOp>() || !op.payloadUsesValueFromOperand(init))
      out = tensor::EmptyOp::create(rewriter, loc, shape, outType.getElementType());
    else
      out = transpose(rewriter, loc, init->get(), kToNhwc);
    maps.push_back(rewriter.getMultiDimIdentityMap(4));
    auto nhwc = linalg::GenericOp::create(rewriter, loc, TypeRange{out.getType()}, inputs, ValueRange{out},
                                          maps, op.getIteratorTypesArray());
    rewriter.inlineRegionBefore(op.getRegion(), nhwc.getRegion(), nhwc.getRegion().begin());
    rewriter.replaceOp(op, transpose(rewriter, loc, nhwc->getResult(0), kToNchw));
    return success();
  }
};

/// A generic reading transpose(x, p) through a non-identity map reads x instead, through the map
/// with its results permuted (transpose(x, p)[r_0, ..., r_k] == x[r_{p^-1(0)}, ..., r_{p^-1(k)}]).
struct FoldTransposedInput : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op, PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(op, "not on tensors");
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    bool changed = false;
    rewriter.startOpModification(op);
    for (OpOperand *in : op.getDpsInputOperands()) {
      auto t = in->get().getDefiningOp<linalg::TransposeOp>();
      AffineMap m = maps[in->getOperandNumber()];
      if (!t || !t.hasPureTensorSemantics() || m.isIdentity())
        continue;
      ArrayRef<int64_t> p = t.getPermutation();
      SmallVector<AffineExpr> r(m.getResults()), folded(p.size());
      for (auto [i, pi] : llvm::enumerate(p))
        folded[pi] = r[i];
      maps[in->getOperandNumber()] = AffineMap::get(m.getNumDims(), 0, folded, op.getContext());
      in->set(t.getInput());
      changed = true;
    }
    if (!changed) {
      rewriter.cancelOpModification(op);
      return rewriter.notifyMatchFailure(op, "no transpose read through a permuted map");
    }
    op.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps));
    rewriter.finalizeOpModification(op);
    return success();
  }
};

/// pad(transpose(x, [0,3,1,2])) -> transpose(pad'(x), [0,3,1,2]), pad' padding the permuted dims.
struct SinkThroughPad : public OpRewritePattern<tensor::PadOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tensor::PadOp op, PatternRewriter &rewriter) const override {
    Value src = nhwcSource(op.getSource());
    Value value = op.getConstantPaddingValue();
    if (!src || !value || !op.getLow().empty() || !op.getHigh().empty() || op.getNofold())
      return rewriter.notifyMatchFailure(op, "not a static constant pad of an NHWC->NCHW transpose");
    ArrayRef<int64_t> low = op.getStaticLow(), high = op.getStaticHigh();
    auto resType = op.getResultType();
    SmallVector<OpFoldResult> nlow, nhigh;
    SmallVector<int64_t> shape;
    for (int64_t p : kToNhwc) {
      nlow.push_back(rewriter.getIndexAttr(low[p]));
      nhigh.push_back(rewriter.getIndexAttr(high[p]));
      shape.push_back(resType.getDimSize(p));
    }
    auto type = RankedTensorType::get(shape, resType.getElementType());
    auto pad = tensor::PadOp::create(rewriter, op.getLoc(), type, src, nlow, nhigh, value);
    rewriter.replaceOp(op, transpose(rewriter, op.getLoc(), pad.getResult(), kToNchw));
    return success();
  }
};

/// transpose(transpose(x, p), q) -> transpose(x, p o q), or x when that is the identity.
struct FoldTransposes : public OpRewritePattern<linalg::TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::TransposeOp op, PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<linalg::TransposeOp>();
    if (!inner || !op.hasPureTensorSemantics() || !inner.hasPureTensorSemantics())
      return rewriter.notifyMatchFailure(op, "input is not a transpose");
    ArrayRef<int64_t> p = inner.getPermutation(), q = op.getPermutation();
    SmallVector<int64_t> pq;
    bool identity = true;
    for (auto [i, qi] : llvm::enumerate(q)) {
      pq.push_back(p[qi]);
      identity &= pq.back() == static_cast<int64_t>(i);
    }
    if (identity)
      rewriter.replaceOp(op, inner.getInput());
    else
      rewriter.replaceOp(op, transpose(rewriter, op.getLoc(), inner.getInput(), pq));
    return success();
  }
};

struct PropagateNhwc : public mlir::ansor::impl::PropagateNhwcBase<PropagateNhwc> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SinkThroughElementwise, FoldTransposedInput, SinkThroughPad, FoldTransposes>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

//===- AnsorTransformOps.cpp - transform ops of ansor-mlir ------------------------===//
#include "dialects/AnsorTransformOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

#define GET_OP_CLASSES
#include "dialects/AnsorTransformOps.cpp.inc"

namespace {
DiagnosedSilenceableFailure failOn(transform::DecomposeConv3DOp self, Operation *target, StringRef why) {
  DiagnosedSilenceableFailure diag = self.emitSilenceableError() << why;
  diag.attachNote(target->getLoc()) << "when applied to this op";
  return diag;
}

/// Keeps entry `keep` of a 3-element i64 strides/dilations attribute, as a 1-element one.
DenseIntElementsAttr keepOne(Builder &b, DenseIntElementsAttr attr, unsigned keep) {
  auto values = llvm::to_vector(attr.getValues<int64_t>());
  auto type = RankedTensorType::get({1}, b.getI64Type());
  return DenseIntElementsAttr::get(type, ArrayRef<int64_t>{values[keep]});
}
} // namespace

DiagnosedSilenceableFailure transform::DecomposeConv3DOp::applyToOne(transform::TransformRewriter &rewriter,
                                                                     linalg::LinalgOp target,
                                                                     transform::ApplyToEachResultList &results,
                                                                     transform::TransformState &state) {
  auto conv = dyn_cast<linalg::Conv3DNdhwcDhwcfOp>(target.getOperation());
  if (!conv)
    return failOn(*this, target, "expected linalg.conv_3d_ndhwc_dhwcf");
  if (!conv.hasPureTensorSemantics())
    return failOn(*this, target, "expected tensor semantics");
  auto input = dyn_cast<RankedTensorType>(conv.getInputs()[0].getType());
  auto filter = dyn_cast<RankedTensorType>(conv.getInputs()[1].getType());
  auto output = dyn_cast<RankedTensorType>(conv.getOutputs()[0].getType());
  if (!input || !filter || !output || !input.hasStaticShape() || !filter.hasStaticShape() ||
      !output.hasStaticShape())
    return failOn(*this, target, "expected static shapes");
  // input [N, D, H, W, C], filter [KD, KH, KW, C, F], output [N, OD, OH, OW, F]
  if (input.getDimSize(1) != 1 || input.getDimSize(2) != 1 || filter.getDimSize(0) != 1 ||
      filter.getDimSize(1) != 1 || output.getDimSize(1) != 1 || output.getDimSize(2) != 1)
    return failOn(*this, target, "expected unit depth and height (one output row)");

  Location loc = conv.getLoc();
  rewriter.setInsertionPoint(conv);
  auto drop = [](RankedTensorType t, unsigned a, unsigned b) {
    SmallVector<int64_t> shape;
    for (auto [i, s] : llvm::enumerate(t.getShape()))
      if (i != a && i != b)
        shape.push_back(s);
    return RankedTensorType::get(shape, t.getElementType());
  };
  Value in1 = tensor::createCanonicalRankReducingExtractSliceOp(rewriter, loc, conv.getInputs()[0], drop(input, 1, 2));
  Value w1 = tensor::createCanonicalRankReducingExtractSliceOp(rewriter, loc, conv.getInputs()[1], drop(filter, 0, 1));
  Value out1 = tensor::createCanonicalRankReducingExtractSliceOp(rewriter, loc, conv.getOutputs()[0], drop(output, 1, 2));
  auto conv1 = linalg::Conv1DNwcWcfOp::create(rewriter, loc, out1.getType(), ValueRange{in1, w1}, ValueRange{out1},
                                              keepOne(rewriter, conv.getStrides(), 2),
                                              keepOne(rewriter, conv.getDilations(), 2));
  for (NamedAttribute attr : conv->getDiscardableAttrs())  // ansor.* tags; not linalg's memoized maps
    if (!attr.getName().getValue().starts_with("linalg."))
      conv1->setAttr(attr.getName(), attr.getValue());
  Value back = tensor::createCanonicalRankReducingInsertSliceOp(rewriter, loc, conv1.getResult(0), conv.getOutputs()[0]);
  rewriter.replaceOp(conv, back);
  results.push_back(conv1);
  return DiagnosedSilenceableFailure::success();
}

namespace {
class AnsorTransformExtension : public transform::TransformDialectExtension<AnsorTransformExtension> {
public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(AnsorTransformExtension)
  using Base::Base;

  void init() {
    declareGeneratedDialect<linalg::LinalgDialect>();
    declareGeneratedDialect<tensor::TensorDialect>();
    registerTransformOps<
#define GET_OP_LIST
#include "dialects/AnsorTransformOps.cpp.inc"
        >();
  }
};
} // namespace

void mlir::ansor::registerTransformExtension(DialectRegistry &registry) {
  registry.addExtensions<AnsorTransformExtension>();
}

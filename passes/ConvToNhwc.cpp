//===- ConvToNhwc.cpp - ansor-conv-to-nhwc ----------------------------------------===//
//
// linalg.conv_2d_nchw_fchw(x, w, init)
//   --> transpose_back(linalg.conv_2d_nhwc_hwcf(transpose(x), transpose(w), transpose(init)))
//
// PyTorch models arrive channels-first; the CPU sketches vectorize the innermost output dimension,
// which channels-last makes the (long, contiguous) channel dimension. See Passes.td.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_CONVTONHWC
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

struct ConvToNhwc : public mlir::ansor::impl::ConvToNhwcBase<ConvToNhwc> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<linalg::Conv2DNchwFchwOp> convs;
    getOperation()->walk([&](linalg::Conv2DNchwFchwOp op) {
      if (op.hasPureTensorSemantics() && llvm::all_of(op->getOperandTypes(), [](Type t) {
            return cast<ShapedType>(t).hasStaticShape();
          }))
        convs.push_back(op);
    });
    // Pooling: same input/init/result transposes around the channels-last op (the window
    // operand carries only its shape).
    SmallVector<Operation *> pools;
    getOperation()->walk([&](Operation *op) {
      if (isa<linalg::PoolingNchwMaxOp, linalg::PoolingNchwSumOp>(op) &&
          cast<linalg::LinalgOp>(op).hasPureTensorSemantics() &&
          llvm::all_of(op->getOperandTypes(), [](Type t) { return cast<ShapedType>(t).hasStaticShape(); }))
        pools.push_back(op);
    });
    for (Operation *op : pools) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      auto lop = cast<linalg::LinalgOp>(op);
      Value x = transpose(b, loc, lop.getDpsInputs()[0], {0, 2, 3, 1});
      Value window = lop.getDpsInputs()[1];
      Value init = transpose(b, loc, lop.getDpsInits()[0], {0, 2, 3, 1});
      Operation *pool;
      if (auto mx = dyn_cast<linalg::PoolingNchwMaxOp>(op))
        pool = linalg::PoolingNhwcMaxOp::create(b, loc, TypeRange{init.getType()}, ValueRange{x, window},
                                                ValueRange{init}, mx.getStrides(), mx.getDilations());
      else {
        auto sm = cast<linalg::PoolingNchwSumOp>(op);
        pool = linalg::PoolingNhwcSumOp::create(b, loc, TypeRange{init.getType()}, ValueRange{x, window},
                                                ValueRange{init}, sm.getStrides(), sm.getDilations());
      }
      Value y = transpose(b, loc, pool->getResult(0), {0, 3, 1, 2});
      op->getResult(0).replaceAllUsesWith(y);
      op->erase();
    }
    for (linalg::Conv2DNchwFchwOp op : convs) {
      OpBuilder b(op);
      Location loc = op.getLoc();
      Value x = transpose(b, loc, op.getInputs()[0], {0, 2, 3, 1});
      Value w = transpose(b, loc, op.getInputs()[1], {2, 3, 1, 0});
      Value init = transpose(b, loc, op.getOutputs()[0], {0, 2, 3, 1});
      auto conv = linalg::Conv2DNhwcHwcfOp::create(b, loc, TypeRange{init.getType()}, ValueRange{x, w},
                                                   ValueRange{init}, op.getStrides(), op.getDilations());
      Value y = transpose(b, loc, conv->getResult(0), {0, 3, 1, 2});
      op->getResult(0).replaceAllUsesWith(y);
      op->erase();
    }
  }
};

} // namespace

//===- ExpandMath.cpp - ansor-expand-erf, ansor-expand-exp ------------------------===//
//
// f32 math.erf / math.exp (scalar or vector) --> arith/math polynomial arithmetic
// (see CpuPasses.td). Ops are built in the same order as the Python rewrites they replace.
//
//===----------------------------------------------------------------------------===//
#include "passes/CPU/CpuPasses.h"

#include "mlir/IR/BuiltinTypes.h"
#include <limits>

namespace mlir::ansor {
#define GEN_PASS_DEF_CPUEXPANDERF
#define GEN_PASS_DEF_CPUEXPANDEXP
#include "passes/CPU/CpuPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;

namespace {

/// Constants and contracting arithmetic for f32 or vector<f32> values of type `t`.
struct F32Builder {
  OpBuilder &b;
  Location loc;
  Type t, it;
  arith::FastMathFlagsAttr fm;

  F32Builder(OpBuilder &b, Location loc, Type t) : b(b), loc(loc), t(t) {
    Type i32 = b.getI32Type();
    if (auto vt = dyn_cast<VectorType>(t))
      it = VectorType::get(vt.getShape(), i32);
    else
      it = i32;
    fm = arith::FastMathFlagsAttr::get(b.getContext(), arith::FastMathFlags::contract);
  }
  Value fc(double v) {
    FloatAttr a = b.getF32FloatAttr(static_cast<float>(v));
    if (auto vt = dyn_cast<VectorType>(t))
      return arith::ConstantOp::create(b, loc, t, DenseElementsAttr::get(vt, Attribute(a)));
    return arith::ConstantOp::create(b, loc, t, a);
  }
  Value ic(int64_t v) {
    IntegerAttr a = b.getI32IntegerAttr(static_cast<int32_t>(v));
    if (auto vt = dyn_cast<VectorType>(it))
      return arith::ConstantOp::create(b, loc, it, DenseElementsAttr::get(vt, Attribute(a)));
    return arith::ConstantOp::create(b, loc, it, a);
  }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y, fm); }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y, fm); }
};

bool isF32(Type t) {
  if (auto vt = dyn_cast<VectorType>(t))
    t = vt.getElementType();
  return t.isF32();
}

template <typename OpT, typename Fn> void replaceF32(Operation *root, Fn build) {
  SmallVector<OpT> found;
  root->walk([&](OpT op) {
    if (isF32(op->getResult(0).getType()))
      found.push_back(op);
  });
  for (OpT op : found) {
    OpBuilder b(op);
    Value x = op->getOperand(0);
    F32Builder f(b, op.getLoc(), x.getType());
    Value res = build(f, x);
    op->getResult(0).replaceAllUsesWith(res);
    op->erase();
  }
}

constexpr double kErfP = 0.3275911;
constexpr double kErfA[] = {1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592};
constexpr double kErfTaylor[] = {-1.0 / 1320, 1.0 / 216, -1.0 / 42, 1.0 / 10, -1.0 / 3, 1.0};

constexpr double kExpHi = 88.72283935546875, kExpLo = -87.3365447505531;
constexpr double kExpLn2Hi = 0.693359375, kExpLn2Lo = -2.12194440e-4;
constexpr double kExpPoly[] = {1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
                               4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1};

struct CpuExpandErf : public ansor::impl::CpuExpandErfBase<CpuExpandErf> {
  using Base::Base;
  void runOnOperation() override {
    replaceF32<math::ErfOp>(getOperation(), [](F32Builder &f, Value x) -> Value {
      OpBuilder &b = f.b;
      Location loc = f.loc;
      Value ax = math::AbsFOp::create(b, loc, x);
      Value one = f.fc(1.0);
      Value tt = arith::DivFOp::create(b, loc, one, f.add(f.mul(ax, f.fc(kErfP)), f.fc(1.0)));
      Value p = f.fc(kErfA[0]);
      for (double c : ArrayRef<double>(kErfA).drop_front())
        p = f.add(f.mul(p, tt), f.fc(c));
      Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, f.mul(ax, ax)));
      Value big = math::CopySignOp::create(
          b, loc, f.add(f.fc(1.0), arith::NegFOp::create(b, loc, f.mul(f.mul(p, tt), e))), x);
      Value x2 = f.mul(x, x);
      Value q = f.fc(kErfTaylor[0]);
      for (double c : ArrayRef<double>(kErfTaylor).drop_front())
        q = f.add(f.mul(q, x2), f.fc(c));
      Value small = f.mul(f.mul(q, x), f.fc(1.1283791670955126));
      Value cmp = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, ax, f.fc(0.5));
      return arith::SelectOp::create(b, loc, cmp, small, big);
    });
  }
};

struct CpuExpandExp : public ansor::impl::CpuExpandExpBase<CpuExpandExp> {
  using Base::Base;
  void runOnOperation() override {
    replaceF32<math::ExpOp>(getOperation(), [](F32Builder &f, Value x) -> Value {
      OpBuilder &b = f.b;
      Location loc = f.loc;
      Value xc = arith::MinimumFOp::create(
          b, loc, arith::MaximumFOp::create(b, loc, x, f.fc(kExpLo)), f.fc(kExpHi));
      Value n = math::FloorOp::create(
          b, loc, f.add(f.mul(xc, f.fc(1.44269504088896341)), f.fc(0.5)));
      n = arith::MinimumFOp::create(b, loc, n, f.fc(127.0));
      Value r = f.add(xc, f.mul(n, f.fc(-kExpLn2Hi)));
      r = f.add(r, f.mul(n, f.fc(-kExpLn2Lo)));
      Value p = f.fc(kExpPoly[0]);
      for (double c : ArrayRef<double>(kExpPoly).drop_front())
        p = f.add(f.mul(p, r), f.fc(c));
      Value y = f.add(f.add(f.mul(p, f.mul(r, r)), r), f.fc(1.0));
      Value ni = arith::FPToSIOp::create(b, loc, f.it, n);
      Value sh = arith::ShLIOp::create(b, loc, arith::AddIOp::create(b, loc, ni, f.ic(127)),
                                       f.ic(23));
      Value scale = arith::BitcastOp::create(b, loc, f.t, sh);
      Value res = f.mul(y, scale);
      Value lo = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, f.fc(kExpLo));
      res = arith::SelectOp::create(b, loc, lo, f.fc(0.0), res);
      Value hi = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, f.fc(kExpHi));
      return arith::SelectOp::create(b, loc, hi,
                                     f.fc(std::numeric_limits<double>::infinity()), res);
    });
  }
};

} // namespace

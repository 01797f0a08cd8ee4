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

constexpr double kExpHi = 88.72283935546875, kExpLo = -88.0;
constexpr double kExpMagic = 12582912.0; // 1.5 * 2^23
constexpr double kExpLn2Hi = 0.693359375, kExpLn2Lo = -2.12194440e-4;
constexpr double kExpPoly[] = {1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
                               4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1};

struct CpuExpandErf : public ansor::impl::CpuExpandErfBase<CpuExpandErf> {
  using Base::Base;
  void runOnOperation() override {
    // Every operand is built in its own statement: the Python rewrite creates ops in argument
    // order (left to right), and C++ leaves the order of argument evaluation unspecified.
    replaceF32<math::ErfOp>(getOperation(), [](F32Builder &f, Value x) -> Value {
      OpBuilder &b = f.b;
      Location loc = f.loc;
      Value ax = math::AbsFOp::create(b, loc, x);
      Value one = f.fc(1.0);
      Value cp = f.fc(kErfP);
      Value m = f.mul(ax, cp);
      Value one2 = f.fc(1.0);
      Value den = f.add(m, one2);
      Value tt = arith::DivFOp::create(b, loc, one, den);
      Value p = f.fc(kErfA[0]);
      for (double c : ArrayRef<double>(kErfA).drop_front()) {
        Value pm = f.mul(p, tt);
        Value cc = f.fc(c);
        p = f.add(pm, cc);
      }
      Value sq = f.mul(ax, ax);
      Value nsq = arith::NegFOp::create(b, loc, sq);
      Value e = math::ExpOp::create(b, loc, nsq);
      Value one3 = f.fc(1.0);
      Value pt = f.mul(p, tt);
      Value pte = f.mul(pt, e);
      Value npte = arith::NegFOp::create(b, loc, pte);
      Value sum = f.add(one3, npte);
      Value big = math::CopySignOp::create(b, loc, sum, x);
      Value x2 = f.mul(x, x);
      Value q = f.fc(kErfTaylor[0]);
      for (double c : ArrayRef<double>(kErfTaylor).drop_front()) {
        Value qm = f.mul(q, x2);
        Value cc = f.fc(c);
        q = f.add(qm, cc);
      }
      Value qx = f.mul(q, x);
      Value k = f.fc(1.1283791670955126);
      Value small = f.mul(qx, k);
      Value half = f.fc(0.5);
      Value cmp = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, ax, half);
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
      Value lo = f.fc(kExpLo);
      Value mx = arith::MaximumFOp::create(b, loc, x, lo);
      Value hi = f.fc(kExpHi);
      Value xc = arith::MinimumFOp::create(b, loc, mx, hi);
      Value log2e = f.fc(1.44269504088896341);
      Value xl = f.mul(xc, log2e);
      Value magic = f.fc(kExpMagic);
      Value xm = f.add(xl, magic);
      Value top = f.fc(kExpMagic + 127.0);
      Value tn = arith::MinimumFOp::create(b, loc, xm, top);
      Value magic2 = f.fc(kExpMagic);
      Value n = arith::SubFOp::create(b, loc, tn, magic2);
      Value ln2hi = f.fc(-kExpLn2Hi);
      Value nh = f.mul(n, ln2hi);
      Value r = f.add(xc, nh);
      Value ln2lo = f.fc(-kExpLn2Lo);
      Value nl = f.mul(n, ln2lo);
      r = f.add(r, nl);
      Value p = f.fc(kExpPoly[0]);
      for (double c : ArrayRef<double>(kExpPoly).drop_front()) {
        Value pm = f.mul(p, r);
        Value cc = f.fc(c);
        p = f.add(pm, cc);
      }
      Value pr = f.mul(p, r);
      Value one = f.fc(1.0);
      Value q = f.add(pr, one);
      Value qr = f.mul(q, r);
      Value one2 = f.fc(1.0);
      Value y = f.add(qr, one2);
      Value ti = arith::BitcastOp::create(b, loc, f.it, tn);
      Value i127 = f.ic(127);
      Value biased = arith::AddIOp::create(b, loc, ti, i127);
      Value i23 = f.ic(23);
      Value sh = arith::ShLIOp::create(b, loc, biased, i23);
      Value scale = arith::BitcastOp::create(b, loc, f.t, sh);
      Value res = f.mul(y, scale);
      Value hi2 = f.fc(kExpHi);
      Value isHi = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, hi2);
      Value inf = f.fc(std::numeric_limits<double>::infinity());
      return arith::SelectOp::create(b, loc, isHi, inf, res);
    });
  }
};

} // namespace

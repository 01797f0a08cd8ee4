//===- BlockReductionsToShuffles.cpp - ansor-gpu-block-reductions-to-shuffles -----===//
//
// linalg.reduce S[1,..,T] (every thread, serially) --(own slot, gpu.shuffle xor butterfly,
//   one slot per warp, barrier, T/32 combines)--> D
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuOptUtils.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_GPUBLOCKREDUCTIONSTOSHUFFLES
#include "passes/GPU/GpuOptPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;
using namespace mlir::ansor::gpuopt;

namespace {

/// The constant block size (x, y, z) of `launch`, nullopt if one is not an arith.constant.
std::optional<std::array<int64_t, 3>> blockDims(gpu::LaunchOp launch) {
  std::array<int64_t, 3> out;
  Value dims[3] = {launch.getBlockSizeX(), launch.getBlockSizeY(), launch.getBlockSizeZ()};
  for (int d = 0; d < 3; ++d) {
    auto c = dims[d].getDefiningOp<arith::ConstantOp>();
    auto i = c ? dyn_cast<IntegerAttr>(c.getValue()) : IntegerAttr();
    if (!i)
      return std::nullopt;
    out[d] = i.getInt();
  }
  return out;
}

/// The one binary op of a `linalg.reduce` body combining its two arguments, or null.
Operation *combiner(linalg::ReduceOp red) {
  Block &body = red.getRegion().front();
  if (body.getNumArguments() != 2 || body.getOperations().size() != 2)
    return nullptr;
  Operation *op = &body.front();
  auto yield = dyn_cast<linalg::YieldOp>(body.back());
  if (!yield || op->getNumOperands() != 2 || op->getNumResults() != 1 ||
      yield->getNumOperands() < 1 || yield->getOperand(0) != op->getResult(0))
    return nullptr;
  Value a = body.getArgument(0), b = body.getArgument(1);
  bool ab = op->getOperand(0) == a && op->getOperand(1) == b;
  bool ba = op->getOperand(0) == b && op->getOperand(1) == a;
  return ab || ba ? op : nullptr;
}

/// Rewrites `red` if it is a block-wide reduction of a shared buffer (see GpuOptPasses.td).
bool rewrite(linalg::ReduceOp red, int64_t threads) {
  if (red->getNumOperands() != 2)
    return false;
  Value src = red->getOperand(0), dst = red->getOperand(1);
  auto st = dyn_cast<MemRefType>(src.getType());
  auto dt = dyn_cast<MemRefType>(dst.getType());
  Operation *comb = combiner(red);
  if (!st || !dt || !comb || !isWorkgroup(st) || st.getRank() < 1)
    return false;
  ArrayRef<int64_t> dims = red.getDimensions();
  if (dims.size() != 1 || dims[0] != st.getRank() - 1 || st.getShape().back() != threads ||
      llvm::any_of(st.getShape().drop_back(), [](int64_t x) { return x != 1; }) ||
      llvm::any_of(dt.getShape(), [](int64_t x) { return x != 1; }) ||
      (threads % 32 && !llvm::isPowerOf2_64(threads)))
    return false;
  Block &body = red.getRegion().front();
  OpBuilder b(red);
  Location loc = red.getLoc();
  // comb(in = x, init = acc) with the body's operand order and attributes
  auto combine = [&](Value x, Value acc) {
    IRMapping map;
    map.map(body.getArgument(0), x);
    map.map(body.getArgument(1), acc);
    return b.clone(*comb, map)->getResult(0);
  };
  Type i32 = b.getI32Type();
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  SmallVector<Value> at(st.getRank() - 1, c0);
  at.push_back(tid);
  Value v = memref::LoadOp::create(b, loc, src, at);
  // D's initial value, read before the barrier: a thread of another warp may store the result
  // into D (a row sum's output in global memory) as soon as it is past it.
  SmallVector<Value> zeros(dt.getRank(), c0);
  Value init = memref::LoadOp::create(b, loc, dst, zeros);
  int64_t width = std::min<int64_t>(threads, 32);
  Value w = arith::ConstantIntOp::create(b, loc, i32, width);
  for (int64_t off = width / 2; off >= 1; off /= 2) {
    Value o = arith::ConstantIntOp::create(b, loc, i32, off);
    Value other = gpu::ShuffleOp::create(b, loc, v, o, w, gpu::ShuffleMode::XOR).getShuffleResult();
    v = combine(other, v);
  }
  if (threads > 32) {
    Value c32 = arith::ConstantIndexOp::create(b, loc, 32);
    Value lane = arith::RemUIOp::create(b, loc, tid, c32);
    Value lane0 = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, c0);
    auto ifOp = scf::IfOp::create(b, loc, lane0, /*withElseRegion=*/false);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
      memref::StoreOp::create(b, loc, v, src, at);
    }
    gpu::BarrierOp::create(b, loc);
    SmallVector<Value> slot(st.getRank() - 1, c0);
    slot.push_back(c0);
    v = memref::LoadOp::create(b, loc, src, slot);
    for (int64_t k = 1; k < threads / 32; ++k) {
      slot.back() = arith::ConstantIndexOp::create(b, loc, 32 * k);
      v = combine(memref::LoadOp::create(b, loc, src, slot), v);
    }
  }
  memref::StoreOp::create(b, loc, combine(v, init), dst, zeros);
  red.erase();
  return true;
}

struct GpuBlockReductionsToShuffles
    : public ansor::impl::GpuBlockReductionsToShufflesBase<GpuBlockReductionsToShuffles> {
  void runOnOperation() override {
    for (gpu::LaunchOp launch : collect<gpu::LaunchOp>(getOperation())) {
      std::optional<std::array<int64_t, 3>> dims = blockDims(launch);
      if (!dims || (*dims)[1] != 1 || (*dims)[2] != 1)
        continue;
      for (linalg::ReduceOp red : collect<linalg::ReduceOp>(launch))
        rewrite(red, (*dims)[0]);
    }
  }
};

} // namespace

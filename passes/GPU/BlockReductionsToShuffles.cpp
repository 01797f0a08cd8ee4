//===- BlockReductionsToShuffles.cpp - ansor-gpu-block-reductions-to-shuffles -----===//
//
// linalg.reduce S[1,..,T] (every thread, serially) --(own slot, gpu.shuffle xor butterfly,
//   one slot per warp, barrier, T/32 combines)--> D
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuOptUtils.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
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

/// Whether `v` is a `gpu.thread_id x`.
bool isThreadX(Value v) {
  auto id = v.getDefiningOp<gpu::ThreadIdOp>();
  return id && id.getDimension() == gpu::Dimension::x;
}

/// Whether a buffer root is a thread's own (a `memref.alloca`: `ansor-gpu-private-allocs-to-stack`).
bool isPrivate(Value root) { return root.getDefiningOp<memref::AllocaOp>() != nullptr; }

/// The `gpu.barrier` before `red` when all it orders is each thread's write of its own slot
/// of `src` (`src[0, .., threadIdx.x]`, written through a subview) before the same thread's read
/// of that slot (the rewrite's first load): the ops since the previous barrier touch `src` only
/// through such subviews, the ops up to the next barrier besides `red` not at all, and no other
/// buffer (thread-private ones aside) written on one side of it is accessed on the other --
/// `red`'s destination included, so a row sum whose output in global memory every thread fills
/// before the barrier and combines into after it keeps it. Null otherwise.
gpu::BarrierOp ownSlotBarrier(linalg::ReduceOp red, Value src) {
  // (ops touching thread-private buffers only may sit between the barrier and `red`)
  SmallVector<Operation *> before, after{red};
  Operation *prev = red->getPrevNode();
  for (; prev && !isa<gpu::BarrierOp>(prev); prev = prev->getPrevNode()) {
    std::optional<Effects> e = effects({prev});
    if (!e || llvm::any_of(e->reads, [](Value r) { return !isPrivate(r); }) ||
        llvm::any_of(e->writes, [](Value r) { return !isPrivate(r); }))
      return nullptr;
    after.push_back(prev);
  }
  auto barrier = dyn_cast_or_null<gpu::BarrierOp>(prev);
  if (!barrier)
    return nullptr;
  for (Operation *op = barrier->getPrevNode(); op && !isa<gpu::BarrierOp>(op); op = op->getPrevNode())
    before.push_back(op);
  for (Operation *op = red->getNextNode(); op && !isa<gpu::BarrierOp>(op); op = op->getNextNode())
    after.push_back(op);
  std::optional<Effects> eb = effects(before), ea = effects(after);
  if (!eb || !ea)
    return nullptr;
  Value dst = memrefRoot(red->getOperand(1));
  auto conflict = [&](const Effects &w, const Effects &other) {
    return llvm::any_of(w.writes, [&](Value root) {
      return root != src && !isPrivate(root) && other.touches(root);
    });
  };
  if (conflict(*eb, *ea) || conflict(*ea, *eb) || (!isPrivate(dst) && eb->touches(dst)))
    return nullptr;
  Block *block = red->getBlock();
  for (Operation *user : src.getUsers()) {
    if (user == red)
      continue;
    Operation *top = block->findAncestorOpInBlock(*user);
    if (!top || llvm::is_contained(after, top))
      return nullptr;
    if (!llvm::is_contained(before, top))
      continue;
    auto sv = dyn_cast<memref::SubViewOp>(user);
    if (!sv || sv.getSource() != src)
      return nullptr;
    SmallVector<OpFoldResult> offsets = sv.getMixedOffsets();
    auto last = dyn_cast<Value>(offsets.back());
    bool own = last && isThreadX(last) &&
               llvm::all_of(ArrayRef(offsets).drop_back(),
                            [](OpFoldResult o) { return isConstantIntValue(o, 0); }) &&
               llvm::all_of(sv.getMixedSizes(), [](OpFoldResult o) { return isConstantIntValue(o, 1); });
    if (!own)
      return nullptr;
  }
  return barrier;
}

/// The `linalg.fill` of `dst` before `red` in its block with no access to `dst`'s buffer in
/// between (barriers aside: each thread reads back its own fill), or null.
linalg::FillOp initialFill(linalg::ReduceOp red, Value dst) {
  Value root = memrefRoot(dst);
  SmallVector<Operation *> between;
  for (Operation *op = red->getPrevNode(); op; op = op->getPrevNode()) {
    auto fill = dyn_cast<linalg::FillOp>(op);
    if (fill && fill.getOutputs()[0] == dst) {
      std::optional<Effects> e = effects(between, /*barriersOk=*/true);
      return e && !e->touches(root) ? fill : nullptr;
    }
    between.push_back(op);
  }
  return nullptr;
}

/// Rewrites `red` if it is a block-wide reduction of a shared buffer (see GpuOptPasses.td);
/// `rowGroups`: the launch packs several rows per block (`ansor.rows_per_block` > 1), and the
/// barrier before `red` goes where it only orders own-slot accesses (`ownSlotBarrier`).
bool rewrite(linalg::ReduceOp red, int64_t threads, bool rowGroups) {
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
  // With row groups, a fill of `D` before `red` (a row sum's output in global memory, filled by
  // every thread) is forwarded as `D`'s initial value and dropped: the final store overwrites
  // all of `D`, and no thread then writes `D` before it (so the barrier below need not order
  // a slow thread's fill after a fast one's result).
  linalg::FillOp fill = rowGroups ? initialFill(red, dst) : nullptr;
  Value fillValue = fill ? fill.getInputs()[0] : Value();
  if (fill)
    fill.erase();
  gpu::BarrierOp ownSlot = rowGroups ? ownSlotBarrier(red, src) : nullptr;
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
  Value init = fillValue ? fillValue : memref::LoadOp::create(b, loc, dst, zeros).getResult();
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
  if (ownSlot)
    ownSlot.erase();
  return true;
}

struct GpuBlockReductionsToShuffles
    : public ansor::impl::GpuBlockReductionsToShufflesBase<GpuBlockReductionsToShuffles> {
  void runOnOperation() override {
    for (gpu::LaunchOp launch : collect<gpu::LaunchOp>(getOperation())) {
      std::optional<std::array<int64_t, 3>> dims = blockDims(launch);
      if (!dims || (*dims)[1] != 1 || (*dims)[2] != 1)
        continue;
      auto rows = launch->getAttrOfType<IntegerAttr>("ansor.rows_per_block");
      bool rowGroups = rows && rows.getInt() > 1;
      for (linalg::ReduceOp red : collect<linalg::ReduceOp>(launch))
        rewrite(red, (*dims)[0], rowGroups);
    }
  }
};

} // namespace

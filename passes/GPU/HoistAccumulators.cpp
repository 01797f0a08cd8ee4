//===- HoistAccumulators.cpp - ansor-gpu-hoist-accumulators -----------------------===//
//
// scf.for { read acc; ...; write acc } --(acc carried in iter_args)-->
//   read acc; scf.for iter_args(acc) { ... }; write acc
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuOptUtils.h"

#include "llvm/ADT/MapVector.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_GPUHOISTACCUMULATORS
#include "passes/GPU/GpuOptPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;
using namespace mlir::ansor::gpuopt;

namespace {

/// (source, offsets, sizes) of a unit-stride `memref.subview` with static offsets and sizes.
struct Box {
  Value source;
  ArrayRef<int64_t> offsets, sizes;
};

std::optional<Box> staticBox(Value v) {
  auto sv = v.getDefiningOp<memref::SubViewOp>();
  if (!sv)
    return std::nullopt;
  ArrayRef<int64_t> offs = sv.getStaticOffsets(), sizes = sv.getStaticSizes();
  if (llvm::any_of(offs, ShapedType::isDynamic) || llvm::any_of(sizes, ShapedType::isDynamic) ||
      llvm::any_of(sv.getStaticStrides(), [](int64_t s) { return s != 1; }))
    return std::nullopt;
  return Box{sv.getSource(), offs, sizes};
}

/// Views `a` and `b` (accessed wholly, at index 0) are provably disjoint: static subviews of one
/// source whose boxes do not intersect.
bool disjointViews(Value a, Value b) {
  std::optional<Box> ba = staticBox(a), bb = staticBox(b);
  if (!ba || !bb || ba->source != bb->source || ba->offsets.size() != bb->offsets.size())
    return false;
  for (size_t d = 0; d < ba->offsets.size(); ++d)
    if (ba->offsets[d] + ba->sizes[d] <= bb->offsets[d] ||
        bb->offsets[d] + bb->sizes[d] <= ba->offsets[d])
      return true;
  return false;
}

/// Two subviews of one buffer with the same type (register tiles of one thread).
bool sameShapeViews(Value a, Value b) {
  return a.getDefiningOp<memref::SubViewOp>() && b.getDefiningOp<memref::SubViewOp>() &&
         memrefRoot(a) == memrefRoot(b) && a.getType() == b.getType();
}

using Positions = llvm::MapVector<Value, SmallVector<Operation *, 1>>;

/// Hoists the accumulator read/write pairs out of `loop` (see GpuOptPasses.td); returns how many.
unsigned hoistPairs(scf::ForOp loop) {
  Block *body = loop.getBody();
  DenseMap<Value, SmallVector<std::pair<Operation *, Value>>> byRoot;
  Positions reads, writes; // view -> top-level transfers of it, in body order
  for (Operation &top : *body) {
    top.walk([&](Operation *op) {
      if (isViewOp(op))
        return;
      for (Value v : op->getOperands())
        if (isa<MemRefType>(v.getType()))
          byRoot[memrefRoot(v)].push_back({op, v});
    });
    if (auto r = dyn_cast<vector::TransferReadOp>(top))
      reads[r->getOperand(0)].push_back(r);
    else if (auto w = dyn_cast<vector::TransferWriteOp>(top))
      writes[w->getOperand(1)].push_back(w);
  }
  SmallVector<std::pair<Operation *, Operation *>> pairs;
  for (auto &[mem, rs] : reads) {
    auto wit = writes.find(mem);
    if (wit == writes.end() || rs.size() != 1 || wit->second.size() != 1)
      continue;
    Operation *r = rs.front(), *w = wit->second.front();
    if (w->isBeforeInBlock(r) || !loop.isDefinedOutsideOfLoop(mem) ||
        llvm::any_of(r->getOperands().drop_front(1),
                     [&](Value x) { return !loop.isDefinedOutsideOfLoop(x); }))
      continue;
    if (!sameAccess(r, w, 0, 1, r->getOperands().drop_front(1).drop_back(1),
                    w->getOperands().drop_front(2)) ||
        w->getOperand(0).getType() != r->getResult(0).getType())
      continue;
    bool alone = llvm::all_of(byRoot.lookup(memrefRoot(mem)), [&](auto &use) {
      auto [op, v] = use;
      if (op == r || op == w)
        return true;
      return isa<vector::TransferReadOp, vector::TransferWriteOp>(op) && v != mem &&
             (disjointViews(mem, v) ||
              (reads.count(v) && writes.count(v) && sameShapeViews(mem, v)));
    });
    if (alone)
      pairs.push_back({r, w});
  }
  if (pairs.empty())
    return 0;
  unsigned nOld = body->getNumArguments();
  SmallVector<Value> initial;
  for (auto [r, w] : pairs) {
    r->moveBefore(loop);
    initial.push_back(r->getResult(0));
  }
  scf::ForOp fresh = withMoreIterArgs(loop, initial);
  SmallVector<Value> updated;
  for (auto [k, p] : llvm::enumerate(pairs)) {
    p.first->getResult(0).replaceAllUsesExcept(fresh.getBody()->getArgument(nOld + k), fresh);
    updated.push_back(p.second->getOperand(0));
  }
  appendYieldOperands(fresh, updated);
  unsigned nRes = loop->getNumResults();
  Operation *after = fresh;
  for (auto [k, p] : llvm::enumerate(pairs)) {
    Operation *w = p.second;
    w->moveAfter(after);
    after = w;
    w->setOperand(0, fresh.getResult(nRes + k));
  }
  loop->replaceAllUsesWith(fresh->getResults().take_front(nRes));
  loop.erase();
  return pairs.size();
}

struct GpuHoistAccumulators
    : public ansor::impl::GpuHoistAccumulatorsBase<GpuHoistAccumulators> {
  void runOnOperation() override {
    for (gpu::LaunchOp launch : collect<gpu::LaunchOp>(getOperation()))
      for (scf::ForOp loop : collect<scf::ForOp>(launch)) // inner loops first
        hoistPairs(loop);
  }
};

} // namespace

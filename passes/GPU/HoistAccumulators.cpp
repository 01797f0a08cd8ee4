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

/// Within `body` (top level only): a `vector.transfer_read` of the view the last top-level
/// `vector.transfer_write` wrote (not in shared memory) -- same indices and permutation map, the
/// type written, nothing in between that may touch the buffer -- takes the written value, and a write overwritten by
/// the next access to its view (same access, nothing reading in between) is erased. An access
/// to another view of the same buffer in between is harmless when that view is statically
/// disjoint or another register tile of the thread (see `hoistPairs`); anything else that may
/// touch the buffer (a nested loop, a call, another kind of access) ends the run. A loop body
/// that auto-unrolling left holding several steps of a reduction reads and writes each
/// accumulator once per step; afterwards it reads it once and writes it once, so the pair can
/// leave the loop. Returns how many ops it removed.
unsigned forwardInBody(Block *body) {
  DenseMap<Value, vector::TransferWriteOp> lastWrite; // view -> pending top-level write
  SmallVector<Operation *> dead;
  unsigned removed = 0;
  // An access to `view` ends the pending writes of views of its buffer that may overlap it:
  // statically disjoint views and other register tiles of the thread are not touched.
  auto forgetOverlapping = [&](Value view) {
    Value root = memrefRoot(view);
    SmallVector<Value> drop;
    for (auto &[v, pending] : lastWrite)
      if (v != view && memrefRoot(v) == root && !disjointViews(v, view) && !sameShapeViews(v, view))
        drop.push_back(v);
    for (Value v : drop)
      lastWrite.erase(v);
  };
  // `op` (a transfer of `view`, memref operand `mem`) accesses what the pending write of its
  // view wrote: same indices and map, the written type, neither masked. That write or null.
  auto pendingSame = [&](Operation *op, Value view, unsigned mem, ValueRange indices, Type type,
                         Value mask) -> vector::TransferWriteOp {
    auto it = lastWrite.find(view);
    if (it == lastWrite.end() || mask || it->second.getMask() ||
        !sameAccess(op, it->second, mem, 1, indices, it->second.getIndices()) ||
        it->second.getVector().getType() != type)
      return nullptr;
    return it->second;
  };
  for (Operation &top : llvm::make_early_inc_range(*body)) {
    if (auto r = dyn_cast<vector::TransferReadOp>(top)) {
      Value view = r.getBase();
      if (auto pending = pendingSame(r, view, 0, r.getIndices(), r.getVector().getType(), r.getMask())) {
        r.getVector().replaceAllUsesWith(pending.getVector());
        r->erase();
        ++removed;
        continue;
      }
      // Another read of the view (other indices) or of an overlapping view: the pending write
      // may be what it reads, so it is no longer dead-if-overwritten.
      lastWrite.erase(view);
      forgetOverlapping(view);
      continue;
    }
    if (auto w = dyn_cast<vector::TransferWriteOp>(top)) {
      Value view = w.getBase();
      if (auto pending = pendingSame(w, view, 1, w.getIndices(), w.getVector().getType(), w.getMask())) {
        dead.push_back(pending); // overwritten before anything read it
        ++removed;
      }
      forgetOverlapping(view);
      lastWrite.erase(view);
      // Shared memory is written by other threads too (a barrier in between would publish
      // theirs): only a thread's own buffers (global tiles, registers, the stack) are tracked.
      if (isa<MemRefType>(view.getType()) && !isWorkgroup(view.getType()))
        lastWrite[view] = w;
      continue;
    }
    if (isViewOp(&top))
      continue;
    // Anything else: every buffer it may touch (nested ops included) ends its pending writes.
    std::optional<Effects> eff = effects({&top}, /*barriersOk=*/true);
    if (!eff) {
      lastWrite.clear();
      continue;
    }
    SmallVector<Value> drop;
    for (auto &[v, pending] : lastWrite)
      if (eff->touches(memrefRoot(v)))
        drop.push_back(v);
    for (Value v : drop)
      lastWrite.erase(v);
  }
  for (Operation *op : dead)
    op->erase();
  return removed;
}

/// Hoists the accumulator read/write pairs out of `loop` (see GpuOptPasses.td); returns how many.
unsigned hoistPairs(scf::ForOp loop) {
  Block *body = loop.getBody();
  forwardInBody(body);
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
    if (wit == writes.end() || rs.size() != wit->second.size() || !loop.isDefinedOutsideOfLoop(mem))
      continue;
    // Each read of the view pairs with the one write at its indices (several register tiles on
    // one view: the rows of a guarded, ragged output tile that virtual-thread chunks side by side
    // share); distinct index tuples, loop-invariant, the same vector type on every pair.
    SmallVector<std::pair<Operation *, Operation *>> here;
    for (Operation *r : rs) {
      auto rIdx = r->getOperands().drop_front(1).drop_back(1);
      Operation *w = nullptr;
      unsigned matches = 0;
      for (Operation *cand : wit->second)
        if (sameAccess(r, cand, 0, 1, rIdx, cand->getOperands().drop_front(2))) {
          w = cand;
          ++matches;
        }
      if (matches != 1 || w->isBeforeInBlock(r) ||
          llvm::any_of(r->getOperands().drop_front(1),
                       [&](Value x) { return !loop.isDefinedOutsideOfLoop(x); }) ||
          w->getOperand(0).getType() != r->getResult(0).getType() ||
          r->getResult(0).getType() != rs.front()->getResult(0).getType() ||
          llvm::any_of(here, [&](auto &p) { return p.second == w; }))
        break;
      here.push_back({r, w});
    }
    if (here.size() != rs.size())
      continue;
    bool alone = llvm::all_of(byRoot.lookup(memrefRoot(mem)), [&](auto &use) {
      auto [op, v] = use;
      if (v == mem)
        return llvm::any_of(here, [&](auto &p) { return op == p.first || op == p.second; });
      return isa<vector::TransferReadOp, vector::TransferWriteOp>(op) &&
             (disjointViews(mem, v) ||
              (reads.count(v) && writes.count(v) && sameShapeViews(mem, v)));
    });
    if (alone)
      pairs.append(here.begin(), here.end());
  }
  if (pairs.empty())
    return 0;
  // A tile in shared memory that other threads fill before the loop or read after it (a fused
  // consumer's accumulator tile) was ordered against them by the loop body's barriers; moved out
  // of the loop, its first read and last write need barriers of their own, or the consumer reads
  // the tile before the last k-step's sums land (a race seen as wrong ConvLayer outputs on an H200).
  bool fence = llvm::any_of(pairs, [](auto &p) { return isWorkgroup(p.first->getOperand(0).getType()); }) &&
               loop->walk([](gpu::BarrierOp) { return WalkResult::interrupt(); }).wasInterrupted();
  if (fence)
    OpBuilder(loop).create<gpu::BarrierOp>(loop.getLoc());
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
  if (fence)
    OpBuilder(after->getBlock(), std::next(after->getIterator())).create<gpu::BarrierOp>(fresh.getLoc());
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

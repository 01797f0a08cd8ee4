//===- PrefetchGlobalReads.cpp - ansor-gpu-prefetch-global-reads ------------------===//
//
// scf.for %k { %g = read A[f(%k)]; write %g, S[..]; ... } --(one iteration ahead)-->
//   %g0 = read A[f(lb)]; scf.for %k iter_args(%g = %g0) { write %g, S; %g1 = read A[f(next)]; ... }
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuOptUtils.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSwitch.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_GPUPREFETCHGLOBALREADS
#include "passes/GPU/GpuOptPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;
using namespace mlir::ansor::gpuopt;

namespace {

/// Index and view computations that may be recomputed for another iteration.
bool isPureIndexOp(Operation *op) {
  return llvm::StringSwitch<bool>(op->getName().getStringRef())
      .Cases("affine.apply", "affine.min", "affine.max", "memref.subview", "memref.cast", true)
      .Cases("arith.addi", "arith.subi", "arith.muli", "arith.constant", "arith.select", true)
      .Cases("arith.cmpi", "arith.minsi", "arith.maxsi", "arith.divsi", "arith.remsi", true)
      .Cases("arith.floordivsi", "arith.index_cast", true)
      .Default(false);
}

/// Sorts `ops` (top-level ops of one block) into block order, dropping duplicates.
void sortUnique(SmallVectorImpl<Operation *> &ops) {
  llvm::sort(ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
}

/// Appends to `slice` the top-level ops of `loop`'s body that `v` depends on, if all are pure
/// index/view ops depending on nothing of the loop but its induction variable; false otherwise.
bool sliceInLoop(Value v, scf::ForOp loop, SmallVectorImpl<Operation *> &slice) {
  Value iv = loop.getInductionVar();
  llvm::SmallPtrSet<Operation *, 8> seen;
  SmallVector<Value> stack{v};
  while (!stack.empty()) {
    Value x = stack.pop_back_val();
    Operation *op = x.getDefiningOp();
    if (!op) {
      if (x != iv && !loop.isDefinedOutsideOfLoop(x))
        return false; // another iteration argument
      continue;
    }
    if (!loop->isProperAncestor(op))
      continue;
    if (op->getParentOp() != loop || !isPureIndexOp(op))
      return false;
    if (!seen.insert(op).second)
      continue;
    slice.push_back(op);
    llvm::append_range(stack, op->getOperands());
  }
  return true;
}

/// Clones `slice` and then `read` at `b`'s insertion point with `iv` replaced by `at`; returns
/// the cloned read's value.
Value cloneRead(OpBuilder &b, ArrayRef<Operation *> slice, Operation *read, Value iv, Value at) {
  IRMapping map;
  map.map(iv, at);
  for (Operation *op : slice)
    b.clone(*op, map);
  return b.clone(*read, map)->getResult(0);
}

struct Prefetch {
  Operation *read, *write;
  SmallVector<Operation *> slice;
};

/// Pipelines the qualifying global reads of `loop` (see GpuOptPasses.td); returns how many.
unsigned prefetch(scf::ForOp loop) {
  std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound());
  std::optional<int64_t> ub = getConstantIntValue(loop.getUpperBound());
  std::optional<int64_t> step = getConstantIntValue(loop.getStep());
  if (!loop.getLowerBound().getDefiningOp<arith::ConstantOp>() ||
      !loop.getUpperBound().getDefiningOp<arith::ConstantOp>() ||
      !loop.getStep().getDefiningOp<arith::ConstantOp>() || !lb || !ub || !step ||
      *ub - *lb <= *step)
    return 0;
  Block *body = loop.getBody();
  SmallVector<Operation *> all;
  for (Operation &op : *body)
    all.push_back(&op);
  Effects eff = *effects(all, /*barriersOk=*/true);
  SmallVector<Prefetch> reads;
  for (Operation &op : *body) {
    auto r = dyn_cast<vector::TransferReadOp>(op);
    if (!r || isWorkgroup(r->getOperand(0).getType()) || !r->getResult(0).hasOneUse())
      continue;
    Operation *w = *r->getResult(0).getUsers().begin();
    if (!isa<vector::TransferWriteOp>(w) || w->getParentOp() != loop ||
        !isWorkgroup(w->getOperand(1).getType()))
      continue;
    if (eff.writes.contains(memrefRoot(r->getOperand(0))))
      continue;
    Prefetch p{r, w, {}};
    if (llvm::all_of(r->getOperands(), [&](Value x) { return sliceInLoop(x, loop, p.slice); })) {
      sortUnique(p.slice);
      reads.push_back(std::move(p));
    }
  }
  if (reads.empty())
    return 0;
  Value iv = loop.getInductionVar();
  SmallVector<Value> first;
  OpBuilder b(loop);
  for (Prefetch &p : reads)
    first.push_back(cloneRead(b, p.slice, p.read, iv, loop.getLowerBound()));
  unsigned nOld = body->getNumArguments();
  scf::ForOp fresh = withMoreIterArgs(loop, first);
  Value freshIv = fresh.getInductionVar();
  SmallVector<Value> next;
  for (auto [k, p] : llvm::enumerate(reads)) {
    b.setInsertionPointAfter(p.write);
    Location loc = loop.getLoc();
    // the next iteration's index, clamped to the last iteration (stays in bounds)
    Value nxt = arith::AddIOp::create(b, loc, freshIv, fresh.getStep());
    Value last = arith::SubIOp::create(b, loc, fresh.getUpperBound(), fresh.getStep());
    Value clamped = arith::MinSIOp::create(b, loc, nxt, last);
    next.push_back(cloneRead(b, p.slice, p.read, freshIv, clamped));
    p.read->getResult(0).replaceAllUsesWith(fresh.getBody()->getArgument(nOld + k));
    p.read->erase();
  }
  appendYieldOperands(fresh, next);
  loop->replaceAllUsesWith(fresh->getResults().take_front(loop->getNumResults()));
  loop.erase();
  return reads.size();
}

struct GpuPrefetchGlobalReads
    : public ansor::impl::GpuPrefetchGlobalReadsBase<GpuPrefetchGlobalReads> {
  void runOnOperation() override {
    for (gpu::LaunchOp launch : collect<gpu::LaunchOp>(getOperation()))
      for (scf::ForOp loop : collect<scf::ForOp>(launch))
        prefetch(loop);
  }
};

} // namespace

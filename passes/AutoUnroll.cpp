//===- AutoUnroll.cpp - ansor-auto-unroll -----------------------------------------===//
//
// op {ansor.auto_unroll_max_step = N} --(fully unroll scf.for nests of work <= N)--> op
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/MathExtras.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_AUTOUNROLL
#include "passes/Passes.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;

uint64_t mlir::ansor::bodyVectorRows(scf::ForOp loop) {
  uint64_t rows = 1;
  for (Operation &op : *loop.getBody())
    for (Type t : op.getResultTypes())
      if (auto vec = dyn_cast<VectorType>(t); vec && vec.getRank() > 1)
        rows = std::max<uint64_t>(rows, vec.getNumElements() / vec.getShape().back());
  return rows;
}

namespace {

/// Work of a loop nest (see Passes.td); nullopt = not a compile-time constant (or overflow).
using Work = std::optional<uint64_t>;

/// Work of a linalg op left in a loop body (not vectorized: a pad copy, a fill, an op the
/// schedule kept scalar): the loops it becomes, i.e. the product of its static loop ranges;
/// nullopt if one is dynamic.
Work linalgWork(linalg::LinalgOp op) {
  uint64_t product = 1;
  for (int64_t range : op.getStaticLoopRanges()) {
    bool overflow = false;
    if (ShapedType::isDynamic(range) || range < 0)
      return std::nullopt;
    product = llvm::SaturatingMultiply(product, static_cast<uint64_t>(range), &overflow);
    if (overflow)
      return std::nullopt;
  }
  return product;
}

/// Loops nested in `root` (root included), innermost first, with their work.
SmallVector<std::pair<scf::ForOp, Work>> collectLoops(Operation *root,
                                                      const DenseSet<Operation *> &skip) {
  SmallVector<std::pair<scf::ForOp, Work>> loops;
  DenseMap<Operation *, Work> workOf;
  root->walk<WalkOrder::PostOrder>([&](scf::ForOp loop) {
    Work inner = 0;
    loop.getBody()->walk([&](Operation *op) {
      Work w;
      if (auto child = dyn_cast<scf::ForOp>(op)) {
        if (child->getParentOfType<scf::ForOp>() != loop)
          return; // not directly nested: already folded into its parent loop's work
        w = workOf.lookup(child);
      } else if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
        if (op->getParentOfType<scf::ForOp>() != loop)
          return;
        w = linalgWork(linalgOp);
      } else {
        return;
      }
      bool overflow = false;
      if (inner && w)
        inner = llvm::SaturatingAdd(*inner, *w, &overflow);
      if (!w || overflow)
        inner = std::nullopt;
    });
    Work work;
    std::optional<APInt> trip = loop.getStaticTripCount();
    if (inner && trip && trip->getActiveBits() <= 64) {
      bool overflow = false;
      uint64_t body = std::max<uint64_t>(*inner, bodyVectorRows(loop));
      uint64_t product = llvm::SaturatingMultiply(trip->getZExtValue(), body, &overflow);
      if (!overflow)
        work = product;
    }
    workOf[loop] = work;
    // Annotated ops handled before (nested in this root) keep their own decision.
    if (!skip.contains(loop))
      loops.push_back({loop, work});
  });
  return loops;
}

/// The loops of `root` to unroll: those whose work is <= maxStep (innermost first). With
/// `maxUnrolled` > 0, the straight-line code the unrolled nests leave in `root` -- the sum of the
/// work of every outermost unrolled loop -- stays within it: the largest such nest is kept as a
/// loop (its inner loops stay candidates) until the sum fits. Each nest fits alone, but a register
/// tile unrolled by the schedule leaves one copy of the reduction nest per accumulator, and
/// unrolling all 32 copies of a 576-step nest gave a CUDA convolution candidate 18432 FMAs per
/// thread and more than 90 s in LLVM.
SmallVector<scf::ForOp> toUnroll(Operation *root, uint64_t maxStep, uint64_t maxUnrolled,
                                 const DenseSet<Operation *> &skip) {
  SmallVector<std::pair<scf::ForOp, Work>> loops = collectLoops(root, skip);
  DenseMap<Operation *, uint64_t> chosen;
  for (auto [loop, work] : loops)
    if (work && *work <= maxStep && *loop.getStaticTripCount() != 0)
      chosen[loop] = *work;
  auto outermost = [&](scf::ForOp loop) {
    for (Operation *p = loop->getParentOp(); p && p != root->getParentOp(); p = p->getParentOp())
      if (chosen.count(p))
        return false;
    return true;
  };
  while (maxUnrolled > 0) {
    uint64_t total = 0;
    Operation *largest = nullptr;
    for (auto [loop, work] : loops) {
      if (!chosen.count(loop) || !outermost(loop))
        continue;
      total = llvm::SaturatingAdd(total, chosen[loop]);
      if (!largest || chosen[loop] > chosen[largest])
        largest = loop;
    }
    if (total <= maxUnrolled || !largest)
      break;
    chosen.erase(largest);
  }
  SmallVector<scf::ForOp> out;
  for (auto [loop, work] : loops)
    if (chosen.count(loop))
      out.push_back(loop);
  return out;
}

/// Unrolls the loops `toUnroll` picks. Returns failure if an unroll failed.
LogicalResult unrollNest(ArrayRef<scf::ForOp> loops) {
  for (scf::ForOp loop : loops)
    if (failed(loopUnrollFull(loop)))
      return loop->emitOpError("ansor-auto-unroll: full unrolling failed");
  return success();
}

struct AutoUnroll : public ansor::impl::AutoUnrollBase<AutoUnroll> {
  using Base::Base;

  uint64_t maxUnrolled() const { return maxUnrolledWork > 0 ? static_cast<uint64_t>(maxUnrolledWork) : 0; }

  void runOnOperation() override {
    Operation *anchor = getOperation();
    if (defaultMaxStep < 0) {
      anchor->emitError() << "ansor-auto-unroll: option 'default-max-step' must be >= 0, got "
                          << defaultMaxStep;
      return signalPassFailure();
    }
    // Inner annotated ops first (post-order), so outer ones see their result.
    SmallVector<Operation *> roots;
    anchor->walk<WalkOrder::PostOrder>([&](Operation *op) {
      if (op->hasAttr(AnsorDialect::kAutoUnrollAttrName))
        roots.push_back(op);
    });
    // Loops already decided by an annotated op; an outer root or the default must not redo them.
    DenseSet<Operation *> decided;
    for (Operation *root : roots) {
      Attribute value = root->getAttr(AnsorDialect::kAutoUnrollAttrName);
      if (failed(verifyAutoUnrollAttr(root, value)))
        return signalPassFailure();
      uint64_t maxStep = cast<IntegerAttr>(value).getValue().getZExtValue();
      root->removeAttr(AnsorDialect::kAutoUnrollAttrName);
      // Remember the loops that will survive (not unrolled) before unrolling erases others.
      SmallVector<scf::ForOp> unroll = toUnroll(root, maxStep, maxUnrolled(), decided);
      DenseSet<Operation *> unrolled;
      for (scf::ForOp loop : unroll)
        unrolled.insert(loop);
      SmallVector<Operation *> survivors;
      for (auto [loop, work] : collectLoops(root, decided))
        if (!unrolled.contains(loop))
          survivors.push_back(loop);
      if (failed(unrollNest(unroll)))
        return signalPassFailure();
      decided.insert(survivors.begin(), survivors.end());
    }
    if (defaultMaxStep > 0 &&
        failed(unrollNest(toUnroll(anchor, static_cast<uint64_t>(defaultMaxStep), maxUnrolled(), decided))))
      return signalPassFailure();
  }
};

} // namespace

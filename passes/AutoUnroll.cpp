//===- AutoUnroll.cpp - ansor-auto-unroll -----------------------------------------===//
//
// op {ansor.auto_unroll_max_step = N} --(fully unroll scf.for nests of work <= N,
//     the straight-line code they leave capped by max-unrolled-work)--> op
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
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

/// Work or size of a loop nest (see Passes.td); nullopt = not a compile-time constant (or
/// overflow).
using Work = std::optional<uint64_t>;

/// `a + b` and `a * b` on Work: nullopt when either is, or on overflow.
Work add(Work a, Work b) {
  bool overflow = false;
  uint64_t sum = a && b ? llvm::SaturatingAdd(*a, *b, &overflow) : 0;
  return a && b && !overflow ? Work(sum) : std::nullopt;
}
Work mul(Work a, Work b) {
  bool overflow = false;
  uint64_t product = a && b ? llvm::SaturatingMultiply(*a, *b, &overflow) : 0;
  return a && b && !overflow ? Work(product) : std::nullopt;
}

/// Iterations of a linalg op left in a loop body (not vectorized: a pad copy, a fill, an op the
/// schedule kept scalar): the loops it becomes, i.e. the product of its static loop ranges;
/// nullopt if one is dynamic.
Work linalgWork(linalg::LinalgOp op) {
  Work product = 1;
  for (int64_t range : op.getStaticLoopRanges()) {
    if (ShapedType::isDynamic(range) || range < 0)
      return std::nullopt;
    product = mul(product, static_cast<uint64_t>(range));
  }
  return product;
}

/// Memory instructions of `n` rows of `rowElems` contiguous elements of `elem`: one access per
/// 128 bits of a row (NVPTX's widest load/store; LLVM splits a wider vector load into these).
uint64_t contiguousAccesses(uint64_t n, int64_t rowElems, Type elem) {
  uint64_t bits = elem.isIntOrFloat() ? elem.getIntOrFloatBitWidth() : 32;
  return n * std::max<uint64_t>(1, llvm::divideCeil(static_cast<uint64_t>(rowElems) * bits, 128));
}

/// Scalar elements of `t` (1 for a scalar).
uint64_t elementsOf(Type t) {
  auto vec = dyn_cast<VectorType>(t);
  return vec ? static_cast<uint64_t>(vec.getNumElements()) : 1;
}

/// Memory instructions a vector transfer becomes: `convert-vector-to-scf{full-unroll}` splits
/// an n-D transfer into 1-D ones per row; a row that is contiguous in memory (minor-identity
/// map, in bounds, unit innermost stride) becomes one vector load/store per 128 bits, any other
/// row (a permuted or strided dimension, a masked tail) one scalar access per element.
uint64_t transferSize(VectorTransferOpInterface op) {
  VectorType vec = op.getVectorType();
  if (vec.getRank() == 0)
    return 1;
  auto memref = dyn_cast<MemRefType>(op.getShapedType());
  bool contiguous = memref && op.getPermutationMap().isMinorIdentity() &&
                    op.isDimInBounds(vec.getRank() - 1) && memref.isLastDimUnitStride();
  uint64_t elements = vec.getNumElements();
  int64_t row = vec.getShape().back();
  return contiguous ? contiguousAccesses(elements / row, row, vec.getElementType()) : elements;
}

/// Straight-line code of one op once vectors are lowered to the GPU's scalar instructions (its
/// regions not included): see Passes.td.
Work opSize(Operation *op) {
  if (op->hasTrait<OpTrait::ConstantLike>() || op->hasTrait<OpTrait::IsTerminator>() ||
      isa<ViewLikeOpInterface>(op))
    return 0; // folded into their users' immediates and addresses
  // Moves between vector registers: free once NVPTX keeps one register per element.
  if (isa<vector::BroadcastOp, vector::ExtractOp, vector::InsertOp, vector::ShapeCastOp,
          vector::TransposeOp, vector::ToElementsOp, vector::FromElementsOp,
          vector::ExtractStridedSliceOp, vector::InsertStridedSliceOp>(op))
    return 0;
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
    // Per iteration: a load or store per operand and the payload's scalar ops.
    uint64_t payload = llvm::range_size(linalgOp.getBlock()->without_terminator());
    return mul(linalgWork(linalgOp), op->getNumOperands() + payload);
  }
  if (auto transfer = dyn_cast<VectorTransferOpInterface>(op))
    return transferSize(transfer);
  if (isa<vector::LoadOp, vector::StoreOp>(op)) {
    VectorType vec = isa<vector::LoadOp>(op) ? cast<vector::LoadOp>(op).getVectorType()
                                              : cast<vector::StoreOp>(op).getVectorType();
    return contiguousAccesses(1, vec.getNumElements(), vec.getElementType());
  }
  if (auto contract = dyn_cast<vector::ContractionOp>(op)) {
    SmallVector<int64_t> bounds;
    contract.getIterationBounds(bounds);
    Work product = 1;
    for (int64_t b : bounds)
      product = mul(product, static_cast<uint64_t>(b));
    return product; // one multiply-add per point of its iteration space
  }
  // Anything else (arithmetic, math, reductions, barriers, index code): one instruction per
  // element of its widest vector -- NVPTX has no f32 vector arithmetic, so a vector<16xf32>
  // fma is 16 FMAs -- and 1 for scalar ops.
  uint64_t size = 1;
  for (Type t : op->getOperandTypes())
    size = std::max(size, elementsOf(t));
  for (Type t : op->getResultTypes())
    size = std::max(size, elementsOf(t));
  return size;
}

/// A loop with its work (Ansor's measure, compared with the max step) and size (the straight-line
/// code it leaves when fully unrolled, compared with `max-unrolled-work`).
struct LoopWeight {
  scf::ForOp loop;
  Work work;
  Work size;
};

/// Loops nested in `root` (root included), innermost first, with their work and size.
SmallVector<LoopWeight> collectLoops(Operation *root, const DenseSet<Operation *> &skip) {
  SmallVector<LoopWeight> loops;
  DenseMap<Operation *, std::pair<Work, Work>> weightOf;
  root->walk<WalkOrder::PostOrder>([&](scf::ForOp loop) {
    Work inner = 0, body = 0;
    loop.getBody()->walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (op->getParentOfType<scf::ForOp>() != loop)
        return WalkResult::skip(); // inside a nested loop: already in that loop's weight
      if (auto child = dyn_cast<scf::ForOp>(op)) {
        auto [work, size] = weightOf.lookup(child);
        inner = add(inner, work);
        body = add(body, size);
        return WalkResult::skip();
      }
      if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
        inner = add(inner, linalgWork(linalgOp));
        body = add(body, opSize(op));
        return WalkResult::skip(); // its payload is counted per iteration
      }
      body = add(body, opSize(op)); // nested regions (scf.if) are walked next
      return WalkResult::advance();
    });
    Work trip;
    if (std::optional<APInt> t = loop.getStaticTripCount(); t && t->getActiveBits() <= 64)
      trip = t->getZExtValue();
    Work work = inner ? mul(trip, std::max<uint64_t>(*inner, bodyVectorRows(loop))) : std::nullopt;
    Work size = mul(trip, body);
    weightOf[loop] = {work, size};
    // Annotated ops handled before (nested in this root) keep their own decision.
    if (!skip.contains(loop))
      loops.push_back({loop, work, size});
  });
  return loops;
}

/// The loops of `root` to unroll: those whose work is <= maxStep (innermost first). With
/// `maxUnrolled` > 0, the straight-line code the unrolled nests leave in `root` -- the sum of the
/// sizes of the outermost unrolled loops -- stays within it: the largest such nest is kept as a
/// loop (its inner loops stay candidates) until the sum fits. Each nest fits the max step alone,
/// but a register tile unrolled by the schedule leaves one copy of the reduction nest per
/// accumulator (32 copies of a 576-step nest gave a CUDA convolution candidate 18432 FMAs per
/// thread and more than 90 s in LLVM), and a nest of few steps can hold a large body (a
/// 576-step reduction loop with 16 vector<4xf32> FMAs, shared-memory copies and barriers per step
/// is work 576 but ~100K lines of straight-line code).
SmallVector<scf::ForOp> toUnroll(Operation *root, uint64_t maxStep, uint64_t maxUnrolled,
                                 const DenseSet<Operation *> &skip) {
  SmallVector<LoopWeight> loops = collectLoops(root, skip);
  DenseMap<Operation *, Work> chosen; // loop -> size
  for (LoopWeight l : loops)
    if (l.work && *l.work <= maxStep && *l.loop.getStaticTripCount() != 0)
      chosen[l.loop] = l.size;
  auto outermost = [&](scf::ForOp loop) {
    for (Operation *p = loop->getParentOp(); p && p != root->getParentOp(); p = p->getParentOp())
      if (chosen.count(p))
        return false;
    return true;
  };
  // A size that is not a constant (overflow) is larger than any other.
  auto larger = [](Work a, Work b) { return !a ? b.has_value() : b && *a > *b; };
  while (maxUnrolled > 0) {
    Work total = 0;
    Operation *largest = nullptr;
    for (const LoopWeight &l : loops) {
      if (!chosen.count(l.loop) || !outermost(l.loop))
        continue;
      total = add(total, chosen[l.loop]);
      if (!largest || larger(chosen[l.loop], chosen[largest]))
        largest = l.loop;
    }
    if ((total && *total <= maxUnrolled) || !largest)
      break;
    chosen.erase(largest);
  }
  SmallVector<scf::ForOp> out;
  for (const LoopWeight &l : loops)
    if (chosen.count(l.loop))
      out.push_back(l.loop);
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
      for (const LoopWeight &l : collectLoops(root, decided))
        if (!unrolled.contains(l.loop))
          survivors.push_back(l.loop);
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

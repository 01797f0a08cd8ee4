//===- ForwardInitialValues.cpp - ansor-gpu-forward-initial-values ----------------===//
//
// write %v, C[i]; ...; %r = read C[i]; ...; write %x, C[i] --(no access to C between)-->
//   ...; uses of %r use %v; ...; write %x, C[i]
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuOptUtils.h"

#include "llvm/ADT/MapVector.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_GPUFORWARDINITIALVALUES
#include "passes/GPU/GpuOptPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;
using namespace mlir::ansor::gpuopt;

namespace {

/// Effects of `ops[from, to)` without the erased positions (barriers allowed).
Effects between(ArrayRef<Operation *> ops, size_t from, size_t to,
                const llvm::DenseSet<size_t> &gone) {
  SmallVector<Operation *> live;
  for (size_t j = from; j < to; ++j)
    if (!gone.contains(j))
      live.push_back(ops[j]);
  return *effects(live, /*barriersOk=*/true);
}

/// Whether `v` is a constant with one value in every lane (a fill's value).
bool isSplatConstant(Value v) {
  DenseElementsAttr attr;
  return matchPattern(v, m_Constant(&attr)) && attr.isSplat();
}

/// Whether no live op of `ops[from, to)` may change what a read of `root` sees, but for
/// transfer_writes of `value`, a splat constant: a tile whose rows are written one transfer at a
/// time (a ragged tile's masked row writes, whose clamped rows the effects cannot tell apart)
/// fills the buffer with one value, so a read of one of its writes still sees that value
/// wherever the writes overlap. Reads of `root` do not matter.
bool onlyWritesOf(ArrayRef<Operation *> ops, size_t from, size_t to,
                  const llvm::DenseSet<size_t> &gone, Value root, Value value) {
  for (size_t j = from; j < to; ++j) {
    if (gone.contains(j) || !(*effects({ops[j]}, /*barriersOk=*/true)).writes.contains(root))
      continue;
    auto w = dyn_cast<vector::TransferWriteOp>(ops[j]);
    if (!w || w.getValueToStore() != value || !isSplatConstant(value))
      return false;
  }
  return true;
}

/// Whether an op of `ops[from, to)` other than a transfer_write may write `root` (a loop or call
/// that writes it may also read it first, which `Effects` would not show apart).
bool hasUnknownWrites(ArrayRef<Operation *> ops, size_t from, size_t to,
                      const llvm::DenseSet<size_t> &gone, Value root) {
  for (size_t j = from; j < to; ++j)
    if (!gone.contains(j) && !isa<vector::TransferWriteOp>(ops[j]) &&
        (*effects({ops[j]}, /*barriersOk=*/true)).writes.contains(root))
      return true;
  return false;
}

/// The value every element of the tile holds when `ops[i]`, a transfer_read of a buffer at the
/// top level, reads it, where the block's threads filled it with one value through other views
/// (a fused fill mapped to the threads one way, the accumulators another): every live write to
/// the buffer before it is a transfer_write of a splat constant of one value (at least one), and
/// a barrier lies between the last of them and the read. This assumes what a fused fill is: the
/// output's initial value covering the block's tile, so the block reads back only elements it
/// filled. Null when not so.
TypedAttr filledValue(ArrayRef<Operation *> ops, size_t i, const llvm::DenseSet<size_t> &gone) {
  Value root = memrefRoot(ops[i]->getOperand(0));
  TypedAttr value;
  bool barrierSince = false;
  for (size_t j = 0; j < i; ++j) {
    if (gone.contains(j))
      continue;
    if (isa<gpu::BarrierOp>(ops[j])) {
      barrierSince = true;
      continue;
    }
    if (!(*effects({ops[j]}, /*barriersOk=*/true)).writes.contains(root))
      continue;
    auto w = dyn_cast<vector::TransferWriteOp>(ops[j]);
    DenseElementsAttr attr;
    if (!w || !matchPattern(w.getValueToStore(), m_Constant(&attr)) || !attr.isSplat())
      return {};
    auto v = attr.getSplatValue<TypedAttr>();
    if (value && value != v)
      return {};
    value = v;
    barrierSince = false;
  }
  return barrierSince ? value : TypedAttr();
}

/// Same destination view, indices and permutation map of two transfer_writes.
bool sameWrite(Operation *a, Operation *b) {
  return sameAccess(a, b, 1, 1, a->getOperands().drop_front(2), b->getOperands().drop_front(2));
}

/// Forwards the initial values at the top level of `launch` (see GpuOptPasses.td).
unsigned forward(gpu::LaunchOp launch) {
  SmallVector<Operation *> ops;
  for (Operation &op : launch.getBody().front())
    ops.push_back(&op);
  llvm::DenseMap<Value, SmallVector<size_t>> laterWrites; // view -> write positions
  for (auto [i, o] : llvm::enumerate(ops))
    if (isa<vector::TransferWriteOp>(o))
      laterWrites[o->getOperand(1)].push_back(i);
  llvm::DenseMap<Value, size_t> lastWrite; // view -> position of its last write
  llvm::DenseSet<size_t> erased, gone;     // erased writes; erased positions
  SmallVector<size_t> forwarded;           // initial writes whose read-back was replaced
  unsigned n = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    Operation *r = ops[i];
    if (isa<vector::TransferWriteOp>(r)) {
      lastWrite[r->getOperand(1)] = i;
      continue;
    }
    if (!isa<vector::TransferReadOp>(r))
      continue;
    // a fill through other views (other threads' elements, after a barrier): its splat
    auto fromFill = [&]() {
      auto read = cast<vector::TransferReadOp>(r);
      TypedAttr v = filledValue(ops, i, gone);
      if (!v || v.getType() != read.getVectorType().getElementType())
        return;
      OpBuilder b(r);
      Value splat = arith::ConstantOp::create(
          b, r->getLoc(), DenseElementsAttr::get(read.getVectorType(), v));
      r->getResult(0).replaceAllUsesWith(splat);
      r->erase();
      gone.insert(i);
      ++n;
    };
    auto lw = lastWrite.find(r->getOperand(0));
    if (lw == lastWrite.end()) {
      fromFill();
      continue;
    }
    size_t k = lw->second;
    Operation *w = ops[k];
    Value root = memrefRoot(r->getOperand(0));
    if (erased.contains(k) ||
        !sameAccess(w, r, 1, 0, w->getOperands().drop_front(2),
                    r->getOperands().drop_front(1).drop_back(1)) ||
        w->getOperand(0).getType() != r->getResult(0).getType() ||
        (between(ops, k + 1, i, gone).touches(root) &&
         !onlyWritesOf(ops, k + 1, i, gone, root, w->getOperand(0)))) {
      fromFill();
      continue;
    }
    r->getResult(0).replaceAllUsesWith(w->getOperand(0));
    r->erase();
    gone.insert(i);
    forwarded.push_back(k);
    ++n;
  }
  // A forwarded initial write is dead if the same tile is written again later with no read of
  // the buffer in between (after every read-back is gone: the rows of a tile are read back one
  // after another). Writes in between do not matter: the later write covers this one's lanes.
  for (size_t k : forwarded) {
    Operation *w = ops[k];
    if (erased.contains(k))
      continue;
    Value root = memrefRoot(w->getOperand(1));
    for (size_t j : laterWrites.lookup(w->getOperand(1))) {
      if (j <= k || gone.contains(j))
        continue;
      if (sameWrite(ops[j], w) && !between(ops, k + 1, j, gone).reads.contains(root) &&
          !hasUnknownWrites(ops, k + 1, j, gone, root)) {
        w->erase();
        erased.insert(k);
        gone.insert(k);
      }
      break; // only the next write counts
    }
  }
  return n;
}

struct GpuForwardInitialValues
    : public ansor::impl::GpuForwardInitialValuesBase<GpuForwardInitialValues> {
  void runOnOperation() override {
    for (gpu::LaunchOp launch : collect<gpu::LaunchOp>(getOperation()))
      forward(launch);
  }
};

} // namespace

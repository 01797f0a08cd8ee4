//===- GpuOptUtils.cpp - helpers of the GPU kernel-optimisation passes ------------===//
#include "passes/GPU/GpuOptUtils.h"

using namespace mlir;
using namespace mlir::ansor;

bool gpuopt::isViewOp(Operation *op) {
  return isa<memref::SubViewOp, memref::CastOp, memref::MemorySpaceCastOp,
             memref::ReinterpretCastOp, memref::ExpandShapeOp, memref::CollapseShapeOp>(op);
}

Value gpuopt::memrefRoot(Value v) {
  while (Operation *op = v.getDefiningOp()) {
    if (!isViewOp(op))
      break;
    v = op->getOperand(0);
  }
  return v;
}

bool gpuopt::isWorkgroup(Type t) {
  auto mt = dyn_cast<MemRefType>(t);
  if (!mt || !mt.getMemorySpace())
    return false;
  Attribute ms = mt.getMemorySpace();
  if (auto i = dyn_cast<IntegerAttr>(ms))
    return i.getValue() == 3;
  if (auto a = dyn_cast<gpu::AddressSpaceAttr>(ms))
    return a.getValue() == gpu::AddressSpace::Workgroup;
  return false;
}

std::optional<gpuopt::Effects> gpuopt::effects(ArrayRef<Operation *> ops, bool barriersOk) {
  Effects eff;
  bool nestedBarrier = false;
  for (Operation *top : ops)
    top->walk([&](Operation *op) {
      if (isa<gpu::BarrierOp>(op))
        nestedBarrier = true;
      if (isViewOp(op))
        return;
      bool isRead = isa<vector::TransferReadOp, vector::LoadOp, memref::LoadOp, memref::DimOp,
                        memref::ExtractStridedMetadataOp>(op);
      bool isWrite = isa<vector::TransferWriteOp, vector::StoreOp, memref::StoreOp>(op);
      for (auto [i, v] : llvm::enumerate(op->getOperands())) {
        if (!isa<MemRefType>(v.getType()))
          continue;
        Value root = memrefRoot(v);
        if (isRead) {
          eff.reads.insert(root);
        } else if (!isWrite) { // unknown access: both
          eff.reads.insert(root);
          eff.writes.insert(root);
        } else if (i == 1) {   // the destination of every known store is operand 1
          eff.writes.insert(root);
        } else {
          eff.reads.insert(root);
        }
      }
    });
  if (nestedBarrier && !barriersOk)
    return std::nullopt;
  return eff;
}

bool gpuopt::sameAccess(Operation *a, Operation *b, unsigned memA, unsigned memB,
                        ValueRange idxA, ValueRange idxB) {
  return a->getOperand(memA) == b->getOperand(memB) && idxA.size() == idxB.size() &&
         llvm::equal(idxA, idxB) &&
         a->getAttr("permutation_map") == b->getAttr("permutation_map");
}

scf::ForOp gpuopt::withMoreIterArgs(scf::ForOp loop, ValueRange extra) {
  OpBuilder b(loop);
  SmallVector<Value> inits(loop.getInitArgs());
  inits.append(extra.begin(), extra.end());
  auto fresh = scf::ForOp::create(b, loop.getLoc(), loop.getLowerBound(), loop.getUpperBound(),
                                  loop.getStep(), inits);
  fresh->setAttrs(loop->getAttrDictionary());
  Block *nb = fresh.getBody();
  Block *ob = loop.getBody();
  while (!nb->empty())
    nb->back().erase();
  nb->getOperations().splice(nb->end(), ob->getOperations());
  for (auto [o, n] : llvm::zip(ob->getArguments(), nb->getArguments()))
    o.replaceAllUsesWith(n);
  return fresh;
}

void gpuopt::appendYieldOperands(scf::ForOp loop, ValueRange more) {
  auto old = cast<scf::YieldOp>(loop.getBody()->getTerminator());
  SmallVector<Value> operands(old.getOperands());
  operands.append(more.begin(), more.end());
  OpBuilder b(old);
  scf::YieldOp::create(b, old.getLoc(), operands);
  old.erase();
}

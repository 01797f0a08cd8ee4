//===- PrivateAllocsToStack.cpp - ansor-gpu-private-allocs-to-stack ---------------===//
//
// gpu.launch { memref.alloc : small static, default space } --> memref.alloca (thread-private)
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuOptUtils.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_GPUPRIVATEALLOCSTOSTACK
#include "passes/GPU/GpuOptPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;
using namespace mlir::ansor::gpuopt;

namespace {

/// Bytes of one element: i8..i64, f16, bf16, f32, f64, or a 1-D vector of those; nullopt else.
std::optional<int64_t> elementBytes(Type t) {
  if (auto v = dyn_cast<VectorType>(t)) {
    if (v.getRank() != 1 || v.isScalable())
      return std::nullopt;
    std::optional<int64_t> e = elementBytes(v.getElementType());
    return e ? std::optional<int64_t>(*e * v.getShape()[0]) : std::nullopt;
  }
  if (t.isF16() || t.isBF16() || t.isSignlessInteger(16))
    return 2;
  if (t.isF32() || t.isSignlessInteger(32))
    return 4;
  if (t.isF64() || t.isSignlessInteger(64))
    return 8;
  if (t.isSignlessInteger(8))
    return 1;
  return std::nullopt;
}

/// An i1 buffer's accesses, rewritten onto an i8 buffer `wide` (extui before writes, trunci
/// after reads); false (nothing changed) when a user is not a direct load/store/transfer.
/// MLIR 22's memref-to-LLVM lowering asserts on a `memref.load` of i1 (a ragged reduction's
/// column mask, bufferized into a thread-private buffer when a thread's chunk is 1 element).
bool widenBoolAccesses(memref::AllocaOp narrow, memref::AllocaOp wide) {
  for (Operation *user : narrow->getUsers()) {
    if (!isa<memref::LoadOp, memref::StoreOp, vector::TransferReadOp, vector::TransferWriteOp>(user))
      return false;
    if (auto store = dyn_cast<memref::StoreOp>(user); store && store.getMemRef() != narrow.getResult())
      return false;
  }
  for (auto &op : llvm::make_early_inc_range(narrow->getUses())) {
    Operation *user = op.getOwner();
    OpBuilder b(user);
    Location loc = user->getLoc();
    Type i8 = b.getI8Type();
    auto widen = [&](Type t) -> Type {
      if (auto v = dyn_cast<VectorType>(t))
        return v.clone(i8);
      return i8;
    };
    if (auto load = dyn_cast<memref::LoadOp>(user)) {
      auto w = memref::LoadOp::create(b, loc, wide, load.getIndices());
      load.replaceAllUsesWith(arith::TruncIOp::create(b, loc, load.getType(), w).getResult());
      load.erase();
    } else if (auto store = dyn_cast<memref::StoreOp>(user)) {
      Value v = arith::ExtUIOp::create(b, loc, i8, store.getValueToStore());
      memref::StoreOp::create(b, loc, v, wide, store.getIndices());
      store.erase();
    } else if (auto read = dyn_cast<vector::TransferReadOp>(user)) {
      Value pad = arith::ExtUIOp::create(b, loc, i8, read.getPadding());
      auto w = vector::TransferReadOp::create(b, loc, cast<VectorType>(widen(read.getVectorType())), wide,
                                              read.getIndices(), read.getPermutationMapAttr(), pad,
                                              read.getMask(), read.getInBoundsAttr());
      read.replaceAllUsesWith(arith::TruncIOp::create(b, loc, read.getVectorType(), w).getResult());
      read.erase();
    } else if (auto write = dyn_cast<vector::TransferWriteOp>(user)) {
      Value v = arith::ExtUIOp::create(b, loc, widen(write.getVectorType()), write.getVector());
      vector::TransferWriteOp::create(b, loc, v, wide, write.getIndices(), write.getPermutationMapAttr(),
                                      write.getMask(), write.getInBoundsAttr());
      write.erase();
    }
  }
  return true;
}

struct GpuPrivateAllocsToStack
    : public ansor::impl::GpuPrivateAllocsToStackBase<GpuPrivateAllocsToStack> {
  using Base::Base;
  void runOnOperation() override {
    for (gpu::LaunchOp launch : collect<gpu::LaunchOp>(getOperation()))
      for (memref::AllocOp alloc : collect<memref::AllocOp>(launch)) {
        MemRefType mt = alloc.getType();
        if (!mt.hasStaticShape() || mt.getMemorySpace())
          continue;
        // an element type of unknown size counts 8 bytes
        if (mt.getNumElements() * elementBytes(mt.getElementType()).value_or(8) > maxBytes)
          continue;
        OpBuilder b(alloc);
        auto stack = memref::AllocaOp::create(b, alloc.getLoc(), mt);
        for (Operation *user : llvm::make_early_inc_range(alloc->getUsers()))
          if (isa<memref::DeallocOp>(user))
            user->erase();
        alloc->replaceAllUsesWith(stack);
        alloc.erase();
        if (mt.getElementType().isInteger(1)) { // i1 -> i8 storage, where every access is direct
          OpBuilder sb(stack);
          auto wide = memref::AllocaOp::create(sb, stack.getLoc(), MemRefType::get(mt.getShape(), sb.getI8Type()));
          if (widenBoolAccesses(stack, wide))
            stack.erase();
          else
            wide.erase();
        }
      }
  }
};

} // namespace

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
      }
  }
};

} // namespace

//===- WorkgroupAttributions.cpp - ansor-gpu-workgroup-attributions ---------------===//
//
// gpu.launch { memref.alloc {ansor.smem} : memref<..., workgroup> } --> workgroup(%wg : memref<..., 3>)
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuLoweringBPasses.h"
#include "passes/GPU/GpuOptUtils.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_GPUWORKGROUPATTRIBUTIONS
#include "passes/GPU/GpuLoweringBPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;

namespace {

struct GpuWorkgroupAttributions
    : public ansor::impl::GpuWorkgroupAttributionsBase<GpuWorkgroupAttributions> {
  using Base::Base;
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    Attribute shared = IntegerAttr::get(IntegerType::get(ctx, 64), 3);
    for (gpu::LaunchOp launch : gpuopt::collect<gpu::LaunchOp>(getOperation())) {
      if (launch.getNumPrivateAttributions()) {
        launch.emitError("gpu.launch with private attributions is not supported");
        return signalPassFailure();
      }
      for (memref::AllocOp alloc : gpuopt::collect<memref::AllocOp>(launch)) {
        MemRefType t = alloc.getType();
        if (!gpuopt::isWorkgroup(t))
          continue;
        std::string ty;
        llvm::raw_string_ostream(ty) << t;
        if (!alloc->hasAttr("ansor.smem")) {
          alloc.emitError("per-thread buffer " + ty + " in shared memory (not a cached tile)");
          return signalPassFailure();
        }
        if (!t.hasStaticShape()) {
          alloc.emitError("dynamic shared-memory allocation " + ty);
          return signalPassFailure();
        }
        // Same shape and element type, identity layout, memory space spelled `3 : i64` (what
        // the Python rewrite built with MemRefType.get).
        auto wgType = MemRefType::get(t.getShape(), t.getElementType(), MemRefLayoutAttrInterface(),
                                      shared);
        BlockArgument arg = launch.addWorkgroupAttribution(wgType, UnknownLoc::get(ctx));
        for (Operation *user : llvm::make_early_inc_range(alloc->getUsers()))
          if (isa<memref::DeallocOp>(user))
            user->erase();
        if (wgType != t) {
          OpBuilder b(alloc);
          Value cast = memref::MemorySpaceCastOp::create(b, alloc.getLoc(), t, arg);
          alloc->replaceAllUsesWith(ValueRange{cast});
        } else {
          alloc->replaceAllUsesWith(ValueRange{arg});
        }
        alloc.erase();
      }
    }
  }
};

} // namespace

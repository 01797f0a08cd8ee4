//===- WorkgroupAttributions.cpp - ansor-gpu-workgroup-attributions ---------------===//
//
// gpu.launch { memref.alloc {ansor.smem} : memref<..., workgroup> } --> workgroup(%wg : memref<..., 3>)
// gpu.launch { linalg.copy/memref.copy outs(%wg) at the block level; X } --> { copy; gpu.barrier; X }
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuLoweringBPasses.h"
#include "passes/GPU/GpuOptUtils.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

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
      // A copy into a shared buffer at the block level runs in every thread, each over the
      // whole buffer; the threads' own writes of their parts that follow would race with the
      // slower threads' copies. Bufferization leaves such a copy where it cannot tell that a
      // block's accumulator tile starts undefined (a fused consumer read through a reshape:
      // the tile's old contents are copied in, then every thread fills its part with zeros; a
      // slow thread's copy overwrote other threads' zeros with the poisoned output, and the
      // grouped conv + BN of tests/test_gpu_rule_gaps.py left unwritten outputs on an H200,
      // results/gpu-tests/gconv-diag-2dfee8e.txt). A barrier after the copy orders them.
      Block &body = launch.getBody().front();
      for (Operation &op : llvm::make_early_inc_range(body)) {
        Value dst;
        if (auto c = dyn_cast<linalg::CopyOp>(op))
          dst = c.getOutputs()[0];
        else if (auto c = dyn_cast<memref::CopyOp>(op))
          dst = c.getTarget();
        if (!dst || !gpuopt::isWorkgroup(cast<MemRefType>(dst.getType())))
          continue;
        Operation *next = op.getNextNode();
        if (next && isa<gpu::BarrierOp>(next))
          continue;
        OpBuilder b(ctx);
        b.setInsertionPointAfter(&op);
        gpu::BarrierOp::create(b, op.getLoc());
      }
    }
  }
};

} // namespace

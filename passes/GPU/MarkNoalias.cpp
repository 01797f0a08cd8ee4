//===- MarkNoalias.cpp - ansor-gpu-mark-noalias ------------------------------------===//
//
// gpu.module { llvm.func @k(%p: !llvm.ptr) attributes {gpu.kernel} } --> %p: !llvm.ptr {llvm.noalias}
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuLoweringBPasses.h"
#include "passes/GPU/GpuOptUtils.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_GPUMARKNOALIAS
#include "passes/GPU/GpuLoweringBPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;

namespace {

struct GpuMarkNoalias : public ansor::impl::GpuMarkNoaliasBase<GpuMarkNoalias> {
  using Base::Base;
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    for (gpu::GPUModuleOp gm : gpuopt::collect<gpu::GPUModuleOp>(getOperation()))
      for (LLVM::LLVMFuncOp f : gpuopt::collect<LLVM::LLVMFuncOp>(gm)) {
        if (!f->hasAttr("gpu.kernel") || f.getBody().empty())
          continue;
        for (BlockArgument a : f.getBody().front().getArguments())
          if (isa<LLVM::LLVMPointerType>(a.getType()))
            f.setArgAttr(a.getArgNumber(), "llvm.noalias", UnitAttr::get(ctx));
      }
  }
};

} // namespace

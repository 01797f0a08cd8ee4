//===- SinkConstants.cpp - ansor-gpu-sink-constants --------------------------------===//
//
// %c = arith.constant ...; gpu.launch { use(%c) } --> gpu.launch { %c' = arith.constant ...; use(%c') }
// (and a memref.get_global of a constant global likewise)
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuLoweringBPasses.h"
#include "passes/GPU/GpuOptUtils.h"

#include "llvm/ADT/DenseMap.h"

#include <tuple>

namespace mlir::ansor {
#define GEN_PASS_DEF_GPUSINKCONSTANTS
#include "passes/GPU/GpuLoweringBPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;

namespace {

struct GpuSinkConstants : public ansor::impl::GpuSinkConstantsBase<GpuSinkConstants> {
  using Base::Base;
  void runOnOperation() override {
    for (gpu::LaunchOp launch : gpuopt::collect<gpu::LaunchOp>(getOperation())) {
      Block &body = launch.getBody().front();
      Operation *first = &body.front();
      // (op name, value attribute, type) -> the clone at the start of the body
      llvm::DenseMap<std::tuple<StringRef, Attribute, Type>, Operation *> clones;
      SmallVector<Operation *> inner;
      launch->walk([&](Operation *op) { inner.push_back(op); });
      for (Operation *op : inner) {
        if (op == launch.getOperation())
          continue;
        for (OpOperand &use : op->getOpOperands()) {
          Operation *owner = use.get().getDefiningOp();
          if (!owner || launch->isProperAncestor(owner))
            continue;
          StringRef name = owner->getName().getStringRef();
          // a constant global (a weight of the task): read in the kernel, where outlining
          // copies the global into the GPU module (a device global), not through a host pointer
          bool global = false;
          if (auto g = dyn_cast<memref::GetGlobalOp>(owner)) {
            auto def = SymbolTable::lookupNearestSymbolFrom<memref::GlobalOp>(owner, g.getNameAttr());
            global = def && def.getConstant();
          }
          if (name != "arith.constant" && name != "ub.poison" && !global)
            continue;
          auto key = std::make_tuple(name, owner->getAttr(global ? "name" : "value"), use.get().getType());
          Operation *&clone = clones[key];
          if (!clone) {
            OpBuilder b(first);
            clone = b.clone(*owner);
          }
          use.set(clone->getResult(0));
        }
      }
    }
  }
};

} // namespace

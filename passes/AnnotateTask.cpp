//===- AnnotateTask.cpp - ansor-annotate-task ----------------------------------------===//
//
// func.func --(name, weight option, flops of its Linalg ops, structural hash)--> ansor.task
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/xxhash.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_ANNOTATETASK
#include "passes/Passes.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;

namespace {

/// Arithmetic ops of one payload execution: arith/math ops except constants and casts.
int64_t countPayloadOps(linalg::LinalgOp op) {
  int64_t count = 0;
  op->getRegion(0).walk([&](Operation *inner) {
    Dialect *dialect = inner->getDialect();
    if (!dialect || !isa<arith::ArithDialect, math::MathDialect>(dialect))
      return;
    if (isa<arith::ConstantOp, CastOpInterface>(inner))
      return;
    ++count;
  });
  return count;
}

/// Flops of `func`, or failure (diagnosed) on a dynamic loop range or overflow.
FailureOr<int64_t> countFlops(func::FuncOp func) {
  int64_t total = 0;
  WalkResult result = func.walk([&](linalg::LinalgOp op) {
    if (op->getNumRegions() == 0)
      return WalkResult::advance();
    int64_t points = 1;
    for (int64_t range : op.getStaticLoopRanges()) {
      if (ShapedType::isDynamic(range)) {
        op->emitError("ansor-annotate-task: cannot count the flops of an op with a dynamic "
                      "loop range");
        return WalkResult::interrupt();
      }
      if (llvm::MulOverflow(points, range, points)) {
        op->emitError("ansor-annotate-task: flop count overflows int64");
        return WalkResult::interrupt();
      }
    }
    int64_t opFlops;
    if (llvm::MulOverflow(points, countPayloadOps(op), opFlops) ||
        llvm::AddOverflow(total, opFlops, total)) {
      op->emitError("ansor-annotate-task: flop count overflows int64");
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (result.wasInterrupted())
    return failure();
  return total;
}

/// Hex xxh3-64 of the function type and body in generic form without locations. The function's
/// name and attributes are not printed; SSA names are never kept by MLIR, so they cannot enter.
std::string structuralHash(func::FuncOp func) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << func.getFunctionType() << "\n";
  OpPrintingFlags flags;
  flags.printGenericOpForm().enableDebugInfo(false);
  AsmState state(func, flags);
  for (Operation &op : func.getBody().front()) {
    op.print(os, state);
    os << "\n";
  }
  for (Block &block : llvm::drop_begin(func.getBody().getBlocks())) {
    // Multi-block bodies (after lowering to cf): hash every block's ops too.
    os << "^bb(" << block.getNumArguments() << ")\n";
    for (Operation &op : block) {
      op.print(os, state);
      os << "\n";
    }
  }
  std::string hex;
  llvm::raw_string_ostream hos(hex);
  hos << llvm::format_hex_no_prefix(llvm::xxh3_64bits(text), 16);
  return hex;
}

struct AnnotateTask : public ansor::impl::AnnotateTaskBase<AnnotateTask> {
  using Base::Base;

  void runOnOperation() override {
    if (weight < 1) {
      getOperation()->emitError() << "ansor-annotate-task: option 'weight' must be >= 1, got "
                                  << weight;
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> funcs;
    getOperation()->walk([&](func::FuncOp func) {
      if (!func.isExternal())
        funcs.push_back(func);
    });
    bool failed = false;
    for (func::FuncOp func : funcs) {
      FailureOr<int64_t> flops = countFlops(func);
      if (llvm::failed(flops)) {
        failed = true;
        continue;
      }
      auto task = TaskAttr::get(&getContext(), func.getSymName(), weight, *flops,
                                structuralHash(func));
      func->setAttr(AnsorDialect::kTaskAttrName, task);
    }
    if (failed)
      signalPassFailure();
  }
};

} // namespace

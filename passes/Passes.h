//===- Passes.h - ansor-mlir passes -----------------------------------*- C++ -*-===//
#ifndef ANSOR_PASSES_PASSES_H
#define ANSOR_PASSES_PASSES_H

#include "dialects/AnsorDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/Pass.h"

namespace mlir::ansor {
#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Registers every ansor pass with the global pass registry. Idempotent, thread-safe
/// (`registerAnsorPasses()`, generated, asserts on a second call).
void registerAnsorPassesOnce();
} // namespace mlir::ansor

#endif // ANSOR_PASSES_PASSES_H

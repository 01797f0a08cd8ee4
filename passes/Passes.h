//===- Passes.h - ansor-mlir passes -----------------------------------*- C++ -*-===//
#ifndef ANSOR_PASSES_PASSES_H
#define ANSOR_PASSES_PASSES_H

#include "dialects/AnsorDialect.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/Pass.h"

#include <array>
#include <vector>

namespace mlir::ansor {
#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Registers every ansor pass with the global pass registry. Idempotent, thread-safe
/// (`registerAnsorPasses()`, generated, asserts on a second call).
void registerAnsorPassesOnce();

/// Unrolling weight of one iteration of `loop`'s own body (nested loops excluded): the number of
/// 1-D vector rows of its largest vector value (product of all but the last dimension; >= 1).
/// An n-D vector op becomes that many 1-D ops after `convert-vector-to-scf{full-unroll}`, so a
/// loop around a 8x16 register tile is 8 statements per iteration, not 1.
uint64_t bodyVectorRows(scf::ForOp loop);

/// Length of a program-feature row of `ansor-extract-features` (a compile-time constant).
constexpr int64_t kNumProgramFeatures = 169;
/// Number of features per statement row (== kNumProgramFeatures).
int64_t numFeatures();
/// Name of feature `i` (static storage), or nullptr when out of range.
const char *featureName(int64_t i);
/// One row per storing statement nested in `root` (in walk order; `stmts` gets the statement
/// ops). Values are raw, or log2(1 + |x|) when `logScale`. See Passes.td for the definitions.
LogicalResult extractFeatureRows(Operation *root,
                                 std::vector<std::array<float, kNumProgramFeatures>> &rows,
                                 SmallVectorImpl<Operation *> &stmts, bool logScale);
} // namespace mlir::ansor

#endif // ANSOR_PASSES_PASSES_H

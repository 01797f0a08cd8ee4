//===- CpuPasses.h - CPU per-build math rewrites (helper cpu) --*- C++ -*-===//
#ifndef ANSOR_PASSES_CPU_CPUPASSES_H
#define ANSOR_PASSES_CPU_CPUPASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Pass/Pass.h"

namespace mlir::ansor {
#define GEN_PASS_DECL
#include "passes/CPU/CpuPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/CPU/CpuPasses.h.inc"
} // namespace mlir::ansor

#endif // ANSOR_PASSES_CPU_CPUPASSES_H

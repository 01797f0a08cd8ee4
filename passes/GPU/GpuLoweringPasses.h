//===- GpuLoweringPasses.h - GPU lowering fix-ups ------------------------*- C++ -*-===//
#ifndef ANSOR_PASSES_GPU_GPULOWERINGPASSES_H
#define ANSOR_PASSES_GPU_GPULOWERINGPASSES_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace mlir::ansor {
#define GEN_PASS_DECL
#include "passes/GPU/GpuLoweringPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/GPU/GpuLoweringPasses.h.inc"
} // namespace mlir::ansor

#endif // ANSOR_PASSES_GPU_GPULOWERINGPASSES_H

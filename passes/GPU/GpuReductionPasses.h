//===- GpuReductionPasses.h - GPU reduction rewrites ---------------*- C++ -*-===//
#ifndef ANSOR_PASSES_GPU_GPUREDUCTIONPASSES_H
#define ANSOR_PASSES_GPU_GPUREDUCTIONPASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace mlir::ansor {
#define GEN_PASS_DECL
#include "passes/GPU/GpuReductionPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/GPU/GpuReductionPasses.h.inc"
} // namespace mlir::ansor

#endif // ANSOR_PASSES_GPU_GPUREDUCTIONPASSES_H

//===- GpuLoweringBPasses.h - GPU lowering fix-ups (helper gpu-b) --*- C++ -*-===//
#ifndef ANSOR_PASSES_GPU_GPULOWERINGBPASSES_H
#define ANSOR_PASSES_GPU_GPULOWERINGBPASSES_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/Pass.h"

namespace mlir::ansor {
#define GEN_PASS_DECL
#include "passes/GPU/GpuLoweringBPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/GPU/GpuLoweringBPasses.h.inc"
} // namespace mlir::ansor

#endif // ANSOR_PASSES_GPU_GPULOWERINGBPASSES_H

//===- Passes.cpp - registration of ansor-mlir passes -----------------------------===//
#include "passes/Passes.h"
#include "passes/CPU/CpuPasses.h"
#include "passes/GPU/GpuLoweringPasses.h"
#include "passes/GPU/GpuLoweringBPasses.h"
#include "passes/GPU/GpuOptUtils.h"
#include "passes/GPU/GpuReductionPasses.h"

#include <mutex>

void mlir::ansor::registerAnsorPassesOnce() {
  // The global registry asserts on a second registration of the same argument.
  static std::once_flag once;
  std::call_once(once, [] {
    registerAnsorPasses();
    registerAnsorGpuOptPasses();
    registerAnsorCpuPasses();
    registerAnsorGpuLoweringPasses();
    registerAnsorGpuLoweringBPasses();
    registerAnsorGpuReductionPasses();
  });
}

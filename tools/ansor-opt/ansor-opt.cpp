//===- ansor-opt.cpp - mlir-opt with the ansor dialect and passes -----------------===//
//
// Replays schedules outside Python: every upstream dialect, extension and pass (the transform
// interpreter included) plus ours. Links libMLIR.so, not libAnsorMLIR.so (which links the
// Python bindings' copy of MLIR).
//
//===----------------------------------------------------------------------------===//
#include "dialects/AnsorDialect.h"
#include "dialects/AnsorTransformOps.h"
#include "passes/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses(); // includes transform-interpreter
  mlir::ansor::registerAnsorPassesOnce();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry); // transform ops of linalg, scf, vector, ...
  registry.insert<mlir::ansor::AnsorDialect>();
  mlir::ansor::registerTransformExtension(registry); // transform.ansor.*

  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "ansor-mlir optimizer driver\n", registry));
}

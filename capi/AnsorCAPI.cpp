//===- AnsorCAPI.cpp - C API of libAnsorMLIR.so -----------------------------------===//
#include "capi/AnsorCAPI.h"

#include "dialects/AnsorDialect.h"
#include "passes/Passes.h"

#include "mlir/CAPI/IR.h"
#include "llvm/Config/llvm-config.h"

#define ANSOR_STR2(x) #x
#define ANSOR_STR(x) ANSOR_STR2(x)

void ansorRegisterDialects(MlirDialectRegistry registry) {
  unwrap(registry)->insert<mlir::ansor::AnsorDialect>();
}

void ansorRegisterPasses(void) { mlir::ansor::registerAnsorPassesOnce(); }

const char *ansorVersion(void) {
  return "0.1.0 (MLIR " ANSOR_STR(LLVM_VERSION_MAJOR) "." ANSOR_STR(LLVM_VERSION_MINOR) "." ANSOR_STR(
      LLVM_VERSION_PATCH) ")";
}

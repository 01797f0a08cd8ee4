//===- AnsorCAPI.cpp - C API of libAnsorMLIR.so -----------------------------------===//
#include "capi/AnsorCAPI.h"

#include "dialects/AnsorDialect.h"
#include "dialects/AnsorTransformOps.h"
#include "passes/Passes.h"

#include "mlir/CAPI/IR.h"
#include "llvm/Config/llvm-config.h"

#include <cstring>

#define ANSOR_STR2(x) #x
#define ANSOR_STR(x) ANSOR_STR2(x)

void ansorRegisterDialects(MlirDialectRegistry registry) {
  unwrap(registry)->insert<mlir::ansor::AnsorDialect>();
  mlir::ansor::registerTransformExtension(*unwrap(registry));
}

void ansorRegisterPasses(void) { mlir::ansor::registerAnsorPassesOnce(); }

const char *ansorVersion(void) {
  return "0.1.0 (MLIR " ANSOR_STR(LLVM_VERSION_MAJOR) "." ANSOR_STR(LLVM_VERSION_MINOR) "." ANSOR_STR(
      LLVM_VERSION_PATCH) ")";
}

int64_t ansorNumFeatures(void) { return mlir::ansor::numFeatures(); }

const char *ansorFeatureName(int64_t i) { return mlir::ansor::featureName(i); }

int64_t ansorExtractFeatures(MlirOperation root, float *out, int64_t max_rows) {
  mlir::Operation *op = unwrap(root);
  if (!op || (max_rows > 0 && !out))
    return -1;
  std::vector<std::array<float, mlir::ansor::kNumProgramFeatures>> rows;
  llvm::SmallVector<mlir::Operation *> stmts;
  if (mlir::failed(mlir::ansor::extractFeatureRows(op, rows, stmts, /*logScale=*/true)))
    return -1;
  int64_t n = static_cast<int64_t>(rows.size());
  for (int64_t i = 0; i < n && i < max_rows; ++i)
    std::memcpy(out + i * mlir::ansor::kNumProgramFeatures, rows[i].data(),
                sizeof(float) * mlir::ansor::kNumProgramFeatures);
  return n;
}

//===- AnsorCAPI.h - C API of libAnsorMLIR.so ---------------------------*- C -*-===//
//
// The seam between Python (ctypes) and the C++ core. Plain C types only, so one build of the
// library loads under every CPython version.
//
//===----------------------------------------------------------------------------===//
#ifndef ANSOR_CAPI_ANSORCAPI_H
#define ANSOR_CAPI_ANSORCAPI_H

#include "mlir-c/IR.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Inserts the `ansor` dialect into `registry` (e.g. the Python bindings' global registry).
MLIR_CAPI_EXPORTED void ansorRegisterDialects(MlirDialectRegistry registry);

/// Registers the ansor passes (ansor-annotate-task, ansor-auto-unroll) with MLIR's global pass
/// registry, so `PassManager.parse` finds them. Idempotent.
MLIR_CAPI_EXPORTED void ansorRegisterPasses(void);

/// Version of the native library, e.g. "0.1.0 (MLIR 22)". Static storage; do not free.
MLIR_CAPI_EXPORTED const char *ansorVersion(void);

/// Length of one program-feature row (Ansor's features, see `ansor-extract-features`).
MLIR_CAPI_EXPORTED int64_t ansorNumFeatures(void);

/// Name of feature `i` (e.g. "float_mad", "B0.bytes"), or NULL when out of range. Static
/// storage; do not free.
MLIR_CAPI_EXPORTED const char *ansorFeatureName(int64_t i);

/// Extracts one log2(1+x)-scaled feature row per storing statement nested in `root` (a module
/// or function after its transform script was applied). Writes up to `max_rows` rows of
/// `ansorNumFeatures()` floats to `out` (row-major) and returns the total number of rows (rows
/// beyond `max_rows` are counted, not written: retry with a larger buffer), or -1 on error.
MLIR_CAPI_EXPORTED int64_t ansorExtractFeatures(MlirOperation root, float *out, int64_t max_rows);

#ifdef __cplusplus
}
#endif

#endif // ANSOR_CAPI_ANSORCAPI_H

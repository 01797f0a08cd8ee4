//===- AnsorCAPI.h - C API of libAnsorMLIR.so ---------------------------*- C -*-===//
//
// The seam between Python (ctypes) and the C++ core. Plain C types only, so one build of the
// library loads under every CPython version.
//
//===----------------------------------------------------------------------------===//
#ifndef ANSOR_CAPI_ANSORCAPI_H
#define ANSOR_CAPI_ANSORCAPI_H

#include "mlir-c/IR.h"

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

#ifdef __cplusplus
}
#endif

#endif // ANSOR_CAPI_ANSORCAPI_H

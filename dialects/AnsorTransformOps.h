//===- AnsorTransformOps.h - transform ops of ansor-mlir --------------*- C++ -*-===//
#ifndef ANSOR_DIALECTS_ANSORTRANSFORMOPS_H
#define ANSOR_DIALECTS_ANSORTRANSFORMOPS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Transform/IR/TransformDialect.h"
#include "mlir/Dialect/Transform/Interfaces/TransformInterfaces.h"
#include "mlir/IR/DialectRegistry.h"

#define GET_OP_CLASSES
#include "dialects/AnsorTransformOps.h.inc"

namespace mlir::ansor {
/// Adds the `transform.ansor.*` ops to the transform dialect of every context using `registry`.
void registerTransformExtension(DialectRegistry &registry);
} // namespace mlir::ansor

#endif // ANSOR_DIALECTS_ANSORTRANSFORMOPS_H

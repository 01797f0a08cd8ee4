//===- AnsorDialect.h - the ansor dialect -----------------------------*- C++ -*-===//
#ifndef ANSOR_DIALECTS_ANSORDIALECT_H
#define ANSOR_DIALECTS_ANSORDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include "dialects/AnsorDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/AnsorAttrs.h.inc"

namespace mlir::ansor {
/// Checks the value of an `ansor.auto_unroll_max_step` attribute on `op`: a non-negative integer
/// on an operation with regions. Shared by the dialect verifier and `ansor-auto-unroll`.
LogicalResult verifyAutoUnrollAttr(Operation *op, Attribute value);
} // namespace mlir::ansor

#endif // ANSOR_DIALECTS_ANSORDIALECT_H

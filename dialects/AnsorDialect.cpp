//===- AnsorDialect.cpp - the ansor dialect ---------------------------------------===//
#include "dialects/AnsorDialect.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::ansor;

#include "dialects/AnsorDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/AnsorAttrs.cpp.inc"

void AnsorDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/AnsorAttrs.cpp.inc"
      >();
}

LogicalResult TaskAttr::verify(function_ref<InFlightDiagnostic()> emitError, StringRef name,
                               IntegerAttr weight, IntegerAttr flops, StringRef hash) {
  if (name.empty())
    return emitError() << "#ansor.task: 'name' must not be empty";
  for (auto [field, value] : {std::pair{"weight", weight}, std::pair{"flops", flops}})
    if (!value || !value.getType().isSignlessInteger(64))
      return emitError() << "#ansor.task: '" << field << "' must be an i64 integer";
  if (weight.getInt() < 1)
    return emitError() << "#ansor.task: 'weight' must be >= 1, got " << weight.getInt();
  if (flops.getInt() < 0)
    return emitError() << "#ansor.task: 'flops' must be >= 0, got " << flops.getInt();
  return success();
}

LogicalResult mlir::ansor::verifyAutoUnrollAttr(Operation *op, Attribute value) {
  auto intAttr = dyn_cast<IntegerAttr>(value);
  if (!intAttr || !isa<IntegerType>(intAttr.getType()))
    return op->emitOpError() << "'" << AnsorDialect::kAutoUnrollAttrName
                             << "' must be an integer attribute, got " << value;
  if (intAttr.getValue().isNegative())
    return op->emitOpError() << "'" << AnsorDialect::kAutoUnrollAttrName
                             << "' must be non-negative, got " << intAttr.getInt();
  if (op->getNumRegions() == 0)
    return op->emitOpError() << "'" << AnsorDialect::kAutoUnrollAttrName
                             << "' must be attached to an operation with regions (a loop)";
  return success();
}

LogicalResult AnsorDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  if (attr.getName() == kTaskAttrName) {
    if (!isa<TaskAttr>(attr.getValue()))
      return op->emitOpError() << "'" << kTaskAttrName << "' must be a #ansor.task attribute, got "
                               << attr.getValue();
    if (!isa<func::FuncOp>(op))
      return op->emitOpError() << "'" << kTaskAttrName << "' is only valid on 'func.func'";
    return success();
  }
  if (attr.getName() == kAutoUnrollAttrName)
    return verifyAutoUnrollAttr(op, attr.getValue());
  return success(); // other ansor.* attributes are free-form
}

//===- AnsorTransformOps.td - transform ops of ansor-mlir -------*- tablegen -*-===//
//
// Transform-dialect ops the sketches need and MLIR 22 does not have, registered as a transform
// dialect extension (`transform.ansor.*`).
//
//===----------------------------------------------------------------------------===//

#ifndef ANSOR_TRANSFORM_OPS_TD
#define ANSOR_TRANSFORM_OPS_TD

include "mlir/Dialect/Transform/IR/TransformDialect.td"
include "mlir/Dialect/Transform/Interfaces/TransformInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/OpBase.td"

def DecomposeConv3DOp : Op<Transform_Dialect, "ansor.decompose_conv3d",
    [FunctionalStyleTransformOpTrait,
     MemoryEffectsOpInterface,
     TransformOpInterface,
     TransformEachOpTrait,
     ReportTrackingListenerFailuresOpTrait]> {
  let summary = "Rewrites a unit-depth, unit-height 3-D convolution tile as a 1-D convolution";
  let description = [{
    `transform.structured.decompose` turns 2-D convolutions whose window height and output
    height are 1 into `linalg.conv_1d_*`, the only form MLIR 22's vectorizer handles; 3-D
    convolutions have no such rewrite. This op takes `linalg.conv_3d_ndhwc_dhwcf` ops whose
    output depth and height, filter depth and height (and so the input depth and height) are
    all 1 — a register tile of one output row — and rewrites each into `linalg.conv_1d_nwc_wcf`
    between rank-reducing `tensor.extract_slice`s and a `tensor.insert_slice`, keeping the
    op's discardable attributes. Tensor semantics only.

    #### Return modes

    Produces a silenceable failure for an op of another kind, with dynamic shapes or
    non-unit depth/height; the returned handle points to the new 1-D convolutions.
  }];

  let arguments = (ins TransformHandleTypeInterface:$target);
  let results = (outs TransformHandleTypeInterface:$transformed);
  let assemblyFormat = "$target attr-dict `:` functional-type(operands, results)";

  let extraClassDeclaration = [{
    ::mlir::DiagnosedSilenceableFailure applyToOne(
        ::mlir::transform::TransformRewriter &rewriter,
        ::mlir::linalg::LinalgOp target,
        ::mlir::transform::ApplyToEachResultList &results,
        ::mlir::transform::TransformState &state);
  }];
}

#endif // ANSOR_TRANSFORM_OPS_TD

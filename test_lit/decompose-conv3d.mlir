// RUN: %ansor-opt %s -split-input-file -transform-interpreter -canonicalize -verify-diagnostics | FileCheck %s

// transform.ansor.decompose_conv3d: a 3-D convolution tile of one output row (unit output depth
// and height, unit filter depth and height) becomes a 1-D convolution over the row, keeping the
// W stride and dilation and the op's discardable attributes; the vectorizer handles only that.
// CHECK-LABEL: func.func @row
// CHECK-SAME: (%[[X:.*]]: tensor<1x1x1x9x3xf32>, %[[W:.*]]: tensor<1x1x3x3x8xf32>, %[[O:.*]]: tensor<1x1x1x4x8xf32>)
// CHECK-DAG: %[[X1:.*]] = tensor.extract_slice %[[X]][0, 0, 0, 0, 0] [1, 1, 1, 9, 3] [1, 1, 1, 1, 1] : tensor<1x1x1x9x3xf32> to tensor<1x9x3xf32>
// CHECK-DAG: %[[W1:.*]] = tensor.extract_slice %[[W]][0, 0, 0, 0, 0] [1, 1, 3, 3, 8] [1, 1, 1, 1, 1] : tensor<1x1x3x3x8xf32> to tensor<3x3x8xf32>
// CHECK-DAG: %[[O1:.*]] = tensor.extract_slice %[[O]][0, 0, 0, 0, 0] [1, 1, 1, 4, 8] [1, 1, 1, 1, 1] : tensor<1x1x1x4x8xf32> to tensor<1x4x8xf32>
// CHECK: %[[C:.*]] = linalg.conv_1d_nwc_wcf {ansor.op = 3 : i64, dilations = dense<1> : tensor<1xi64>, strides = dense<2> : tensor<1xi64>}
// CHECK-SAME: ins(%[[X1]], %[[W1]] : tensor<1x9x3xf32>, tensor<3x3x8xf32>) outs(%[[O1]] : tensor<1x4x8xf32>)
// CHECK: %[[R:.*]] = tensor.insert_slice %[[C]] into %[[O]]
// CHECK: return %[[R]]
func.func @row(%x: tensor<1x1x1x9x3xf32>, %w: tensor<1x1x3x3x8xf32>, %o: tensor<1x1x1x4x8xf32>) -> tensor<1x1x1x4x8xf32> {
  %0 = linalg.conv_3d_ndhwc_dhwcf {ansor.op = 3 : i64, dilations = dense<1> : tensor<3xi64>, strides = dense<[1, 1, 2]> : tensor<3xi64>}
      ins(%x, %w : tensor<1x1x1x9x3xf32>, tensor<1x1x3x3x8xf32>) outs(%o : tensor<1x1x1x4x8xf32>) -> tensor<1x1x1x4x8xf32>
  return %0 : tensor<1x1x1x4x8xf32>
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %c = transform.structured.match ops{["linalg.conv_3d_ndhwc_dhwcf"]} in %root : (!transform.any_op) -> !transform.any_op
    %d = transform.ansor.decompose_conv3d %c : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}

// -----

// More than one output row: a silenceable failure naming the reason (checked by -verify-diagnostics).
func.func @two_rows(%x: tensor<1x1x2x9x3xf32>, %w: tensor<1x1x3x3x8xf32>, %o: tensor<1x1x2x7x8xf32>) -> tensor<1x1x2x7x8xf32> {
  // expected-note @below {{when applied to this op}}
  %0 = linalg.conv_3d_ndhwc_dhwcf {dilations = dense<1> : tensor<3xi64>, strides = dense<1> : tensor<3xi64>}
      ins(%x, %w : tensor<1x1x2x9x3xf32>, tensor<1x1x3x3x8xf32>) outs(%o : tensor<1x1x2x7x8xf32>) -> tensor<1x1x2x7x8xf32>
  return %0 : tensor<1x1x2x7x8xf32>
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %c = transform.structured.match ops{["linalg.conv_3d_ndhwc_dhwcf"]} in %root : (!transform.any_op) -> !transform.any_op
    // expected-error @below {{expected unit depth and height (one output row)}}
    %d = transform.ansor.decompose_conv3d %c : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}

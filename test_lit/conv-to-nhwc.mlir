// RUN: %ansor-opt %s -split-input-file -ansor-conv-to-nhwc -canonicalize | FileCheck %s

// The input, filter and init are transposed to channels-last, the result back; the transposed
// zero init folds into a fill of the channels-last shape.
// CHECK-LABEL: func.func @conv(
// CHECK-SAME:      %[[X:.*]]: tensor<1x8x10x10xf32>, %[[W:.*]]: tensor<16x8x3x3xf32>)
// CHECK:         %[[XT:.*]] = linalg.transpose ins(%[[X]] : tensor<1x8x10x10xf32>) outs(%{{.*}} : tensor<1x10x10x8xf32>) permutation = [0, 2, 3, 1]
// CHECK:         %[[WT:.*]] = linalg.transpose ins(%[[W]] : tensor<16x8x3x3xf32>) outs(%{{.*}} : tensor<3x3x8x16xf32>) permutation = [2, 3, 1, 0]
// CHECK:         %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<1x4x4x16xf32>)
// CHECK:         %[[Y:.*]] = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
// CHECK-SAME:      ins(%[[XT]], %[[WT]] : tensor<1x10x10x8xf32>, tensor<3x3x8x16xf32>) outs(%[[Z]] : tensor<1x4x4x16xf32>)
// CHECK:         %[[R:.*]] = linalg.transpose ins(%[[Y]] : tensor<1x4x4x16xf32>) outs(%{{.*}} : tensor<1x16x4x4xf32>) permutation = [0, 3, 1, 2]
// CHECK:         return %[[R]]
func.func @conv(%x: tensor<1x8x10x10xf32>, %w: tensor<16x8x3x3xf32>) -> tensor<1x16x4x4xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x16x4x4xf32>
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32>
  %y = linalg.conv_2d_nchw_fchw {strides = dense<2> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x8x10x10xf32>, tensor<16x8x3x3xf32>) outs(%z : tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32>
  return %y : tensor<1x16x4x4xf32>
}

// -----

// Dynamic shapes are left alone.
// CHECK-LABEL: func.func @dynamic(
// CHECK:         linalg.conv_2d_nchw_fchw
func.func @dynamic(%x: tensor<?x8x10x10xf32>, %w: tensor<16x8x3x3xf32>, %z: tensor<?x16x8x8xf32>) -> tensor<?x16x8x8xf32> {
  %y = linalg.conv_2d_nchw_fchw {strides = dense<1> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<?x8x10x10xf32>, tensor<16x8x3x3xf32>) outs(%z : tensor<?x16x8x8xf32>) -> tensor<?x16x8x8xf32>
  return %y : tensor<?x16x8x8xf32>
}

// -----

// CHECK-LABEL: func.func @maxpool(
// CHECK:         %[[XT:.*]] = linalg.transpose ins(%{{.*}} : tensor<1x4x8x8xf32>) outs(%{{.*}} : tensor<1x8x8x4xf32>) permutation = [0, 2, 3, 1]
// CHECK:         %[[P:.*]] = linalg.pooling_nhwc_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
// CHECK-SAME:      ins(%[[XT]], %{{.*}} : tensor<1x8x8x4xf32>, tensor<3x3xf32>)
// CHECK:         linalg.transpose ins(%[[P]] : tensor<1x3x3x4xf32>) outs(%{{.*}} : tensor<1x4x3x3xf32>) permutation = [0, 3, 1, 2]
func.func @maxpool(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x3x3xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<1x4x3x3xf32>
  %z = linalg.fill ins(%ninf : f32) outs(%e : tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
  %w = tensor.empty() : tensor<3x3xf32>
  %y = linalg.pooling_nchw_max {strides = dense<2> : vector<2xi64>, dilations = dense<1> : vector<2xi64>}
      ins(%x, %w : tensor<1x4x8x8xf32>, tensor<3x3xf32>) outs(%z : tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %y : tensor<1x4x3x3xf32>
}

// -----

// Depthwise (torch's groups == channels): the C x KH x KW filter becomes KH x KW x C.
// CHECK-LABEL: func.func @depthwise(
// CHECK-SAME:      %[[X:.*]]: tensor<1x6x9x9xf32>, %[[W:.*]]: tensor<6x3x3xf32>)
// CHECK:         %[[XT:.*]] = linalg.transpose ins(%[[X]] : tensor<1x6x9x9xf32>) outs(%{{.*}} : tensor<1x9x9x6xf32>) permutation = [0, 2, 3, 1]
// CHECK:         %[[WT:.*]] = linalg.transpose ins(%[[W]] : tensor<6x3x3xf32>) outs(%{{.*}} : tensor<3x3x6xf32>) permutation = [1, 2, 0]
// CHECK:         %[[Y:.*]] = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
// CHECK-SAME:      ins(%[[XT]], %[[WT]] : tensor<1x9x9x6xf32>, tensor<3x3x6xf32>) outs(%{{.*}} : tensor<1x4x4x6xf32>)
// CHECK:         %[[R:.*]] = linalg.transpose ins(%[[Y]] : tensor<1x4x4x6xf32>) outs(%{{.*}} : tensor<1x6x4x4xf32>) permutation = [0, 3, 1, 2]
// CHECK:         return %[[R]]
func.func @depthwise(%x: tensor<1x6x9x9xf32>, %w: tensor<6x3x3xf32>) -> tensor<1x6x4x4xf32> {
  %c0 = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x6x4x4xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e : tensor<1x6x4x4xf32>) -> tensor<1x6x4x4xf32>
  %y = linalg.depthwise_conv_2d_nchw_chw {strides = dense<2> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x6x9x9xf32>, tensor<6x3x3xf32>) outs(%z : tensor<1x6x4x4xf32>) -> tensor<1x6x4x4xf32>
  return %y : tensor<1x6x4x4xf32>
}

// RUN: %ansor-opt %s -split-input-file -ansor-conv-to-nhwc -ansor-propagate-nhwc -canonicalize | FileCheck %s

// Two convolutions with a per-channel affine + ReLU between them (a ResNet block's BN/ReLU):
// the activations stay channels-last; the only transposes left are the model's input and output
// (and the constant filter transposes, which the importer folds into the weights).
// CHECK-LABEL: func.func @two_convs(
// CHECK-SAME:      %[[X:.*]]: tensor<1x8x10x10xf32>
// CHECK:         %[[XT:.*]] = linalg.transpose ins(%[[X]] : tensor<1x8x10x10xf32>) outs(%{{.*}} : tensor<1x10x10x8xf32>) permutation = [0, 2, 3, 1]
// CHECK:         %[[C1:.*]] = linalg.conv_2d_nhwc_hwcf {{.*}} ins(%[[XT]], %{{.*}} : tensor<1x10x10x8xf32>, tensor<3x3x8x16xf32>)
// CHECK:         %[[E:.*]] = linalg.generic {{.*}} ins(%[[C1]], %{{.*}} : tensor<1x8x8x16xf32>, tensor<16x1x1xf32>) outs(%{{.*}} : tensor<1x8x8x16xf32>)
// CHECK:           arith.addf
// CHECK:           arith.maximumf
// CHECK:         %[[P:.*]] = tensor.pad %[[E]] low[0, 1, 1, 0] high[0, 1, 1, 0]
// CHECK:         } : tensor<1x8x8x16xf32> to tensor<1x10x10x16xf32>
// CHECK:         %[[C2:.*]] = linalg.conv_2d_nhwc_hwcf {{.*}} ins(%[[P]], %{{.*}} : tensor<1x10x10x16xf32>, tensor<3x3x16x4xf32>)
// CHECK:         %[[R:.*]] = linalg.transpose ins(%[[C2]] : tensor<1x8x8x4xf32>) outs(%{{.*}} : tensor<1x4x8x8xf32>) permutation = [0, 3, 1, 2]
// CHECK:         return %[[R]]
// CHECK-NOT:     linalg.transpose
#bc = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @two_convs(%x: tensor<1x8x10x10xf32>, %w1: tensor<16x8x3x3xf32>, %b: tensor<16x1x1xf32>,
                     %w2: tensor<4x16x3x3xf32>) -> tensor<1x4x8x8xf32> {
  %cst = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<1x16x8x8xf32>
  %z1 = linalg.fill ins(%cst : f32) outs(%e1 : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %y1 = linalg.conv_2d_nchw_fchw {strides = dense<1> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
      ins(%x, %w1 : tensor<1x8x10x10xf32>, tensor<16x8x3x3xf32>) outs(%z1 : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #bc, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%y1, %b : tensor<1x16x8x8xf32>, tensor<16x1x1xf32>) outs(%e1 : tensor<1x16x8x8xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %s = arith.addf %in, %bias : f32
    %r = arith.maximumf %s, %cst : f32
    linalg.yield %r : f32
  } -> tensor<1x16x8x8xf32>
  %p = tensor.pad %a low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
    tensor.yield %cst : f32
  } : tensor<1x16x8x8xf32> to tensor<1x16x10x10xf32>
  %e2 = tensor.empty() : tensor<1x4x8x8xf32>
  %z2 = linalg.fill ins(%cst : f32) outs(%e2 : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %y2 = linalg.conv_2d_nchw_fchw {strides = dense<1> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
      ins(%p, %w2 : tensor<1x16x10x10xf32>, tensor<4x16x3x3xf32>) outs(%z2 : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return %y2 : tensor<1x4x8x8xf32>
}

// -----

// A residual add of two NCHW activations that both come from convolutions runs channels-last
// and reads neither through a transpose; a reduction (global average pool) is not element-wise
// and keeps its input transpose.
// CHECK-LABEL: func.func @residual_then_pool(
// CHECK:         %[[A:.*]] = linalg.conv_2d_nhwc_hwcf
// CHECK:         %[[B:.*]] = linalg.conv_2d_nhwc_hwcf
// CHECK:         %[[S:.*]] = linalg.generic {{.*}} ins(%[[A]], %[[B]] : tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>)
// CHECK:         %[[T:.*]] = linalg.transpose ins(%[[S]] : tensor<1x4x4x8xf32>) outs(%{{.*}} : tensor<1x8x4x4xf32>) permutation = [0, 3, 1, 2]
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%[[T]] : tensor<1x8x4x4xf32>)
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#red = affine_map<(d0, d1, d2, d3) -> (d0, d1)>
func.func @residual_then_pool(%x: tensor<1x8x4x4xf32>, %w1: tensor<8x8x1x1xf32>, %w2: tensor<8x8x1x1xf32>) -> tensor<1x8xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x8x4x4xf32>
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %a = linalg.conv_2d_nchw_fchw {strides = dense<1> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
      ins(%x, %w1 : tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) outs(%z : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %b = linalg.conv_2d_nchw_fchw {strides = dense<1> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
      ins(%x, %w2 : tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) outs(%z : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%a, %b : tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32>) outs(%e : tensor<1x8x4x4xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %t = arith.addf %i, %j : f32
    linalg.yield %t : f32
  } -> tensor<1x8x4x4xf32>
  %e2 = tensor.empty() : tensor<1x8xf32>
  %z2 = linalg.fill ins(%cst : f32) outs(%e2 : tensor<1x8xf32>) -> tensor<1x8xf32>
  %m = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%s : tensor<1x8x4x4xf32>) outs(%z2 : tensor<1x8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %t = arith.addf %i, %o : f32
    linalg.yield %t : f32
  } -> tensor<1x8xf32>
  return %m : tensor<1x8xf32>
}

// -----

// A residual block (conv -> bias -> conv -> bias + shortcut -> conv): the add is rewritten after
// one of its inputs and reads the other through a permuted map once that one becomes a transpose;
// every op stays channels-last (a second loop permutation would leave an N,H,C,W tensor and a pad
// of its H and W at the wrong positions).
// CHECK-LABEL: func.func @residual_block(
// CHECK-NOT:     tensor<1x6x8x6xf32>
// CHECK-NOT:     outs(%{{.*}} : tensor<1x8x6x6xf32>)
// CHECK:         tensor.pad %{{.*}} low[0, 1, 1, 0] high[0, 1, 1, 0]
// CHECK:         } : tensor<1x6x6x8xf32> to tensor<1x8x8x8xf32>
// CHECK:         linalg.transpose ins(%{{.*}} : tensor<1x6x6x8xf32>) outs(%{{.*}} : tensor<1x8x6x6xf32>) permutation = [0, 3, 1, 2]
// CHECK-NEXT:    return
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#bc = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>
func.func @residual_block(%x: tensor<1x8x6x6xf32>, %w: tensor<8x8x1x1xf32>, %w3: tensor<8x8x3x3xf32>, %b: tensor<8x1x1xf32>) -> tensor<1x8x6x6xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x8x6x6xf32>
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<1x8x6x6xf32>) -> tensor<1x8x6x6xf32>
  %c1 = linalg.conv_2d_nchw_fchw {strides = dense<1> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x8x6x6xf32>, tensor<8x8x1x1xf32>) outs(%z : tensor<1x8x6x6xf32>) -> tensor<1x8x6x6xf32>
  %s = linalg.generic {indexing_maps = [#id, #bc, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%c1, %b : tensor<1x8x6x6xf32>, tensor<8x1x1xf32>) outs(%e : tensor<1x8x6x6xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %t = arith.addf %i, %j : f32
    linalg.yield %t : f32
  } -> tensor<1x8x6x6xf32>
  %c2 = linalg.conv_2d_nchw_fchw {strides = dense<1> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
      ins(%s, %w : tensor<1x8x6x6xf32>, tensor<8x8x1x1xf32>) outs(%z : tensor<1x8x6x6xf32>) -> tensor<1x8x6x6xf32>
  %a = linalg.generic {indexing_maps = [#id, #bc, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%c2, %b, %s : tensor<1x8x6x6xf32>, tensor<8x1x1xf32>, tensor<1x8x6x6xf32>) outs(%e : tensor<1x8x6x6xf32>) {
  ^bb0(%i: f32, %j: f32, %k: f32, %o: f32):
    %t = arith.addf %i, %j : f32
    %u = arith.addf %t, %k : f32
    %r = arith.maximumf %u, %cst : f32
    linalg.yield %r : f32
  } -> tensor<1x8x6x6xf32>
  %p = tensor.pad %a low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
    tensor.yield %cst : f32
  } : tensor<1x8x6x6xf32> to tensor<1x8x8x8xf32>
  %c3 = linalg.conv_2d_nchw_fchw {strides = dense<1> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
      ins(%p, %w3 : tensor<1x8x8x8xf32>, tensor<8x8x3x3xf32>) outs(%z : tensor<1x8x6x6xf32>) -> tensor<1x8x6x6xf32>
  return %c3 : tensor<1x8x6x6xf32>
}

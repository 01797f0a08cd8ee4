// RUN: ansor-opt %s --ansor-gpu-own-fill-destinations | FileCheck %s

// The fill's tensor.empty is shared with the matmul's destination: the fill gets its own.
// CHECK-LABEL: func.func @shared
// CHECK: %[[E:.*]] = tensor.empty() : tensor<8x8xf32>
// CHECK: %[[E2:.*]] = tensor.empty() : tensor<8x8xf32>
// CHECK: %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E2]] : tensor<8x8xf32>)
// CHECK: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<8x4xf32>, tensor<4x8xf32>) outs(%[[F]] : tensor<8x8xf32>)
// CHECK: linalg.add ins(%{{.*}}, %{{.*}} : tensor<8x8xf32>, tensor<8x8xf32>) outs(%[[E]] : tensor<8x8xf32>)
func.func @shared(%a: tensor<8x4xf32>, %b: tensor<4x8xf32>, %c: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %m = linalg.matmul ins(%a, %b : tensor<8x4xf32>, tensor<4x8xf32>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  %r = linalg.add ins(%m, %c : tensor<8x8xf32>, tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// A tensor.empty used only by the fill stays as it is.
// CHECK-LABEL: func.func @alone
// CHECK-COUNT-1: tensor.empty
// CHECK-NOT: tensor.empty
func.func @alone() -> tensor<8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  return %f : tensor<8xf32>
}

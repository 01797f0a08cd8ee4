// RUN: ansor-opt %s --split-input-file --ansor-gpu-fold-ragged-pads | FileCheck %s

// A marked pad of a zero-offset slice of a value of the pad's type: that value.
// CHECK-LABEL: func.func @fold(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<8x8xf32>
// CHECK-NOT: tensor.pad
// CHECK-NOT: tensor.extract_slice
// CHECK: return %[[X]] : tensor<8x8xf32>
func.func @fold(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %z = arith.constant 0.0 : f32
  %s = tensor.extract_slice %x[0, 0] [5, 6] [1, 1] : tensor<8x8xf32> to tensor<5x6xf32>
  %p = tensor.pad %s low[0, 0] high[3, 2] {
  ^bb0(%i: index, %j: index):
    tensor.yield %z : f32
  } {ansor.ragged} : tensor<5x6xf32> to tensor<8x8xf32>
  return %p : tensor<8x8xf32>
}

// -----

// Not marked (an input's padding): kept. Marked, but of a slice at an offset, or padded to
// another shape: kept, without the mark.
// CHECK-LABEL: func.func @keep(
// CHECK: tensor.pad
// CHECK-NOT: ansor.ragged
// CHECK: tensor.pad
// CHECK-NOT: ansor.ragged
// CHECK: tensor.pad
// CHECK-NOT: ansor.ragged
// CHECK: return
func.func @keep(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<9x8xf32>) {
  %z = arith.constant 0.0 : f32
  %s = tensor.extract_slice %x[0, 0] [5, 6] [1, 1] : tensor<8x8xf32> to tensor<5x6xf32>
  %a = tensor.pad %s low[0, 0] high[3, 2] {
  ^bb0(%i: index, %j: index):
    tensor.yield %z : f32
  } : tensor<5x6xf32> to tensor<8x8xf32>
  %t = tensor.extract_slice %x[1, 0] [5, 6] [1, 1] : tensor<8x8xf32> to tensor<5x6xf32>
  %b = tensor.pad %t low[0, 0] high[3, 2] {
  ^bb0(%i: index, %j: index):
    tensor.yield %z : f32
  } {ansor.ragged} : tensor<5x6xf32> to tensor<8x8xf32>
  %c = tensor.pad %s low[0, 0] high[4, 2] {
  ^bb0(%i: index, %j: index):
    tensor.yield %z : f32
  } {ansor.ragged} : tensor<5x6xf32> to tensor<9x8xf32>
  return %a, %b, %c : tensor<8x8xf32>, tensor<8x8xf32>, tensor<9x8xf32>
}

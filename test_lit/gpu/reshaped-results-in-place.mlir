// RUN: %ansor-opt %s -split-input-file -ansor-gpu-reshaped-results-in-place | FileCheck %s

// A per-row sum returned as 1x128x1: the kernel writes through the expanded view of its host
// buffer, which is then copied out. It now writes the out-param itself.
// CHECK-LABEL: func.func @sum_keepdim
// CHECK-SAME: (%{{.*}}: memref<128x768xf32>, %[[OUT:.*]]: memref<1x128x1xf32>)
// CHECK-NOT: memref.alloc
// CHECK: gpu.launch
// CHECK: memref.subview %[[OUT]][0, %{{.*}}, 0] [1, 1, 1]
// CHECK-NOT: memref.copy
// CHECK: return
func.func @sum_keepdim(%x: memref<128x768xf32>, %out: memref<1x128x1xf32>) {
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %zero = arith.constant 0.0 : f32
  %alloc = memref.alloc() : memref<128xf32>
  %e = memref.expand_shape %alloc [[0, 1, 2]] output_shape [1, 128, 1] : memref<128xf32> into memref<1x128x1xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c128, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %v = memref.subview %e[0, %bx, 0] [1, 1, 1] [1, 1, 1] : memref<1x128x1xf32> to memref<1x1x1xf32, strided<[128, 1, 1], offset: ?>>
    %c0 = arith.constant 0 : index
    memref.store %zero, %v[%c0, %c0, %c0] : memref<1x1x1xf32, strided<[128, 1, 1], offset: ?>>
    gpu.terminator
  }
  memref.copy %e, %out : memref<1x128x1xf32> to memref<1x128x1xf32>
  return
}

// -----

// The kernel writes the host buffer itself (1x128x1x768) and it is copied out collapsed: the
// buffer becomes the expanded view of the out-param.
// CHECK-LABEL: func.func @collapsed_result
// CHECK-SAME: %[[OUT:.*]]: memref<1x128x768xf32>)
// CHECK-NEXT: %[[V:.*]] = memref.expand_shape %[[OUT]] {{\[\[}}0], [1, 2], [3]] output_shape [1, 128, 1, 768]
// CHECK-NOT: memref.alloc
// CHECK: memref.store %{{.*}}, %[[V]]
// CHECK-NOT: memref.copy
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @collapsed_result(%out: memref<1x128x768xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %alloc = memref.alloc() : memref<1x128x1x768xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %zero, %alloc[%c0, %c0, %c0, %c0] : memref<1x128x1x768xf32>
    gpu.terminator
  }
  %c = memref.collapse_shape %alloc [[0], [1, 2], [3]] : memref<1x128x1x768xf32> into memref<1x128x768xf32>
  memref.copy %c, %out : memref<1x128x768xf32> to memref<1x128x768xf32>
  memref.dealloc %alloc : memref<1x128x1x768xf32>
  return
}

// -----

// The out-param is read by something else too (or the copy is not whole): left alone.
// CHECK-LABEL: func.func @out_used_twice
// CHECK: memref.alloc
// CHECK: memref.copy
func.func @out_used_twice(%out: memref<1x4xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %alloc = memref.alloc() : memref<4xf32>
  %e = memref.expand_shape %alloc [[0, 1]] output_shape [1, 4] : memref<4xf32> into memref<1x4xf32>
  memref.copy %e, %out : memref<1x4xf32> to memref<1x4xf32>
  %r = memref.load %out[%c0, %c0] : memref<1x4xf32>
  return %r : f32
}

// RUN: %ansor-opt %s -split-input-file -ansor-gpu-row-values-into-launch | FileCheck %s

// One row (one block): the row's sum, which every thread computes itself, was allocated outside
// the launch. It moves to the start of the launch body; its dealloc goes.
// CHECK-LABEL: func.func @one_row
// CHECK-NOT: memref.alloc
// CHECK: gpu.launch
// CHECK-NEXT: %[[S:.*]] = memref.alloc() : memref<1xf32>
// CHECK: linalg.fill ins(%{{.*}}) outs(%[[S]] : memref<1xf32>)
// CHECK: gpu.terminator
// CHECK-NOT: memref.dealloc
func.func @one_row(%out: memref<1x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  %s = memref.alloc() : memref<1xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) {
    linalg.fill ins(%zero : f32) outs(%s : memref<1xf32>)
    %v = memref.load %s[%c0] : memref<1xf32>
    memref.store %v, %out[%c0, %tx] : memref<1x8xf32>
    gpu.terminator
  } {ansor.row_values}
  memref.dealloc %s : memref<1xf32>
  return
}

// -----

// Left alone: a launch of several blocks, a launch the sketch did not mark, and a buffer also
// used after the launch.
// CHECK-LABEL: func.func @left_alone
// CHECK-COUNT-3: memref.alloc() : memref<1xf32>
// CHECK: gpu.launch
func.func @left_alone(%out: memref<4xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<1xf32>
  %b = memref.alloc() : memref<1xf32>
  %c = memref.alloc() : memref<1xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    linalg.fill ins(%zero : f32) outs(%a : memref<1xf32>)
    gpu.terminator
  } {ansor.row_values}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    linalg.fill ins(%zero : f32) outs(%b : memref<1xf32>)
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    linalg.fill ins(%zero : f32) outs(%c : memref<1xf32>)
    gpu.terminator
  } {ansor.row_values}
  %r = memref.load %c[%c0] : memref<1xf32>
  return %r : f32
}

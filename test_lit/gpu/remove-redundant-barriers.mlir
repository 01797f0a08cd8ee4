// RUN: %ansor-opt %s -split-input-file -ansor-gpu-remove-redundant-barriers | FileCheck %s

// Straight-line kernel: the first barrier orders nothing before it, the second separates copies
// to two different shared buffers, the last ends the kernel; the one between the store to %sA
// and its load stays.
// CHECK-LABEL: func.func @straight
// CHECK: gpu.launch
// CHECK-NEXT: memref.store %{{.*}}, %[[SA:.*]][%c0]
// CHECK-NEXT: memref.store %{{.*}}, %{{.*}}[%c0]
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: memref.load %[[SA]][%c1]
// CHECK-NEXT: memref.store
// CHECK-NEXT: gpu.terminator
func.func @straight(%out: memref<4xf32>, %v: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
             workgroup(%sA : memref<4xf32, 3>, %sB : memref<4xf32, 3>) {
    gpu.barrier
    memref.store %v, %sA[%c0] : memref<4xf32, 3>
    gpu.barrier
    memref.store %v, %sB[%c0] : memref<4xf32, 3>
    gpu.barrier
    %x = memref.load %sA[%c1] : memref<4xf32, 3>
    memref.store %x, %out[%c0] : memref<4xf32>
    gpu.barrier
    gpu.terminator
  }
  return
}

// -----

// In a loop body ending with a barrier, the previous iteration is ordered: the first barrier
// (between a store to %sA and a load of %sB) goes. Without the trailing barrier it stays (its
// segment before reaches back into the previous iteration).
// CHECK-LABEL: func.func @loops
// CHECK: scf.for
// CHECK-NEXT: memref.store %{{.*}}, %[[SA:.*]][%{{.*}}]
// CHECK-NEXT: memref.load
// CHECK-NEXT: memref.store
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: }
// CHECK: scf.for
// CHECK-NEXT: memref.store
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: memref.load
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: memref.store
// CHECK-NEXT: }
func.func @loops(%out: memref<4xf32>, %v: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
             workgroup(%sA : memref<4xf32, 3>, %sB : memref<4xf32, 3>) {
    scf.for %i = %c0 to %c4 step %c1 {
      memref.store %v, %sA[%i] : memref<4xf32, 3>
      gpu.barrier
      %x = memref.load %sB[%c0] : memref<4xf32, 3>
      memref.store %x, %out[%i] : memref<4xf32>
      gpu.barrier
    }
    scf.for %i = %c0 to %c4 step %c1 {
      memref.store %v, %sA[%i] : memref<4xf32, 3>
      gpu.barrier
      %x = memref.load %sB[%c0] : memref<4xf32, 3>
      gpu.barrier
      memref.store %x, %out[%i] : memref<4xf32>
    }
    gpu.terminator
  }
  return
}

// -----

// Negative: the segment after the first barrier holds a nested barrier (it is not straight-line
// code), and the last barrier does not end the kernel: all three stay.
// CHECK-LABEL: func.func @nested
// CHECK: gpu.launch
// CHECK-NEXT: memref.store
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: scf.if
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: memref.store
// CHECK-NEXT: gpu.terminator
func.func @nested(%v: f32, %cond: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
             workgroup(%sA : memref<4xf32, 3>, %sB : memref<4xf32, 3>) {
    memref.store %v, %sA[%c0] : memref<4xf32, 3>
    gpu.barrier
    scf.if %cond {
      gpu.barrier
    }
    gpu.barrier
    memref.store %v, %sB[%c1] : memref<4xf32, 3>
    gpu.terminator
  }
  return
}

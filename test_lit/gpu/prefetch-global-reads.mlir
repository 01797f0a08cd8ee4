// RUN: %ansor-opt %s -split-input-file -ansor-gpu-prefetch-global-reads | FileCheck %s

// A global read stored to shared memory, its row an index computation on the induction
// variable: the first is read before the loop (at iv = lb), the next one right after the store
// (at min(iv + step, ub - step)), carried in an iteration argument.
// CHECK-LABEL: func.func @prefetch
// CHECK-SAME: (%[[A:.*]]: memref<64x4xf32>,
// CHECK: gpu.launch
// CHECK-NEXT: %[[ROW0:.*]] = arith.addi %c0, %c1 : index
// CHECK-NEXT: %[[FIRST:.*]] = vector.transfer_read %[[A]][%[[ROW0]], %c0]
// CHECK-NEXT: scf.for %[[K:.*]] = %c0 to %c64 step %c8 iter_args(%[[G:.*]] = %[[FIRST]]) -> (vector<4xf32>) {
// CHECK-NEXT: arith.addi %[[K]], %c1
// CHECK-NEXT: vector.transfer_write %[[G]], %[[SA:.*]][%c0, %c0]
// CHECK-NEXT: %[[N:.*]] = arith.addi %[[K]], %c8 : index
// CHECK-NEXT: %[[L:.*]] = arith.subi %c64, %c8 : index
// CHECK-NEXT: %[[M:.*]] = arith.minsi %[[N]], %[[L]] : index
// CHECK-NEXT: %[[ROW1:.*]] = arith.addi %[[M]], %c1 : index
// CHECK-NEXT: %[[NEXT:.*]] = vector.transfer_read %[[A]][%[[ROW1]], %c0]
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: vector.transfer_read %[[SA]]
// CHECK: scf.yield %[[NEXT]] : vector<4xf32>
func.func @prefetch(%A: memref<64x4xf32>, %out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
             workgroup(%sA : memref<8x4xf32, 3>) {
    scf.for %k = %c0 to %c64 step %c8 {
      %row = arith.addi %k, %c1 : index
      %g = vector.transfer_read %A[%row, %c0], %pad : memref<64x4xf32>, vector<4xf32>
      vector.transfer_write %g, %sA[%c0, %c0] : vector<4xf32>, memref<8x4xf32, 3>
      gpu.barrier
      %x = vector.transfer_read %sA[%c1, %c0], %pad : memref<8x4xf32, 3>, vector<4xf32>
      vector.transfer_write %x, %out[%c0] : vector<4xf32>, memref<4xf32>
      gpu.barrier
    }
    gpu.terminator
  }
  return
}

// -----

// Negative: a single iteration (nothing to overlap), a buffer the loop also writes, an index
// that depends on an iteration argument, a store to global memory: the loops stay as they are.
// CHECK-LABEL: func.func @no_prefetch
// CHECK-NOT: arith.minsi
// CHECK: scf.for %{{.*}} = %c0 to %c8 step %c8 {
// CHECK-NEXT: vector.transfer_read
// CHECK: scf.for %{{.*}} = %c0 to %c64 step %c8 {
// CHECK-NEXT: vector.transfer_read
// CHECK: scf.for %{{.*}} = %c0 to %c64 step %c8 iter_args(%{{.*}}) -> (index) {
// CHECK-NEXT: vector.transfer_read
// CHECK: scf.for %{{.*}} = %c0 to %c64 step %c8 {
// CHECK-NEXT: vector.transfer_read
// CHECK-NOT: arith.minsi
func.func @no_prefetch(%A: memref<64x4xf32>, %B: memref<64x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
             workgroup(%sA : memref<8x4xf32, 3>) {
    scf.for %k = %c0 to %c8 step %c8 {
      %g = vector.transfer_read %A[%k, %c0], %pad : memref<64x4xf32>, vector<4xf32>
      vector.transfer_write %g, %sA[%c0, %c0] : vector<4xf32>, memref<8x4xf32, 3>
    }
    scf.for %k = %c0 to %c64 step %c8 {
      %g = vector.transfer_read %A[%k, %c0], %pad : memref<64x4xf32>, vector<4xf32>
      vector.transfer_write %g, %sA[%c0, %c0] : vector<4xf32>, memref<8x4xf32, 3>
      memref.store %pad, %A[%c0, %c0] : memref<64x4xf32>
    }
    %r = scf.for %k = %c0 to %c64 step %c8 iter_args(%i = %c0) -> (index) {
      %g = vector.transfer_read %A[%i, %c0], %pad : memref<64x4xf32>, vector<4xf32>
      vector.transfer_write %g, %sA[%c0, %c0] : vector<4xf32>, memref<8x4xf32, 3>
      %n = arith.addi %i, %c1 : index
      scf.yield %n : index
    }
    scf.for %k = %c0 to %c64 step %c8 {
      %g = vector.transfer_read %A[%k, %c0], %pad : memref<64x4xf32>, vector<4xf32>
      vector.transfer_write %g, %B[%c0, %c0] : vector<4xf32>, memref<64x4xf32>
    }
    gpu.terminator
  }
  return
}

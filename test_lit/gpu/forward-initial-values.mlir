// RUN: %ansor-opt %s -split-input-file -ansor-gpu-forward-initial-values | FileCheck %s

// The initial value written to the accumulator tile (a fused fill) and read straight back by the
// same thread: the read uses the value, and the write goes (the tile is written again later,
// nothing reads the buffer in between). The barrier does not matter: the thread reads back its
// own write.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[C:.*]]: memref<4x4xf32>
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<4xf32>
// CHECK: gpu.launch
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: %[[R:.*]] = scf.for %{{.*}} iter_args(%{{.*}} = %[[ZERO]])
// CHECK-NOT: vector.transfer_read %[[C]]
// CHECK: vector.transfer_write %[[R]], %[[C]][%c0, %c0]
// CHECK-NEXT: gpu.terminator
func.func @forward(%C: memref<4x4xf32>, %A: memref<4xf32, 3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %pad = arith.constant 0.0 : f32
  %zero = arith.constant dense<0.0> : vector<4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    vector.transfer_write %zero, %C[%c0, %c0] : vector<4xf32>, memref<4x4xf32>
    gpu.barrier
    %acc = vector.transfer_read %C[%c0, %c0], %pad : memref<4x4xf32>, vector<4xf32>
    %r = scf.for %k = %c0 to %c8 step %c1 iter_args(%a = %acc) -> (vector<4xf32>) {
      %x = vector.transfer_read %A[%c0], %pad : memref<4xf32, 3>, vector<4xf32>
      %s = arith.addf %a, %x : vector<4xf32>
      scf.yield %s : vector<4xf32>
    }
    vector.transfer_write %r, %C[%c0, %c0] : vector<4xf32>, memref<4x4xf32>
    gpu.terminator
  }
  return
}

// -----

// The value is forwarded, but the initial write stays: something reads the buffer before the
// tile is written again.
// CHECK-LABEL: func.func @forward_keep_write
// CHECK-SAME: (%[[C:.*]]: memref<4x4xf32>
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<4xf32>
// CHECK: gpu.launch
// CHECK-NEXT: vector.transfer_write %[[ZERO]], %[[C]][%c0, %c0]
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[ZERO]], %[[ZERO]]
// CHECK-NEXT: memref.load %[[C]]
// CHECK-NEXT: memref.store
// CHECK-NEXT: vector.transfer_write %[[S]], %[[C]][%c0, %c0]
func.func @forward_keep_write(%C: memref<4x4xf32>, %out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %pad = arith.constant 0.0 : f32
  %zero = arith.constant dense<0.0> : vector<4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    vector.transfer_write %zero, %C[%c0, %c0] : vector<4xf32>, memref<4x4xf32>
    %acc = vector.transfer_read %C[%c0, %c0], %pad : memref<4x4xf32>, vector<4xf32>
    %s = arith.addf %acc, %acc : vector<4xf32>
    %y = memref.load %C[%c1, %c1] : memref<4x4xf32>
    memref.store %y, %out[] : memref<f32>
    vector.transfer_write %s, %C[%c0, %c0] : vector<4xf32>, memref<4x4xf32>
    gpu.terminator
  }
  return
}

// -----

// Negative: another store to the buffer between the write and the read, and a read at other
// indices: nothing is forwarded.
// CHECK-LABEL: func.func @no_forward
// CHECK: gpu.launch
// CHECK-NEXT: vector.transfer_write
// CHECK-NEXT: memref.store
// CHECK-NEXT: vector.transfer_read
// CHECK-NEXT: vector.transfer_write
// CHECK-NEXT: vector.transfer_read
func.func @no_forward(%C: memref<4x4xf32>, %f: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %pad = arith.constant 0.0 : f32
  %zero = arith.constant dense<0.0> : vector<4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    vector.transfer_write %zero, %C[%c0, %c0] : vector<4xf32>, memref<4x4xf32>
    memref.store %f, %C[%c1, %c1] : memref<4x4xf32>
    %a = vector.transfer_read %C[%c0, %c0], %pad : memref<4x4xf32>, vector<4xf32>
    vector.transfer_write %a, %C[%c0, %c0] : vector<4xf32>, memref<4x4xf32>
    %b = vector.transfer_read %C[%c1, %c0], %pad : memref<4x4xf32>, vector<4xf32>
    vector.transfer_write %b, %C[%c1, %c0] : vector<4xf32>, memref<4x4xf32>
    gpu.terminator
  }
  return
}

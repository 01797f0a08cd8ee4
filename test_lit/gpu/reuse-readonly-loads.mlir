// RUN: %ansor-opt %s -split-input-file -ansor-gpu-reuse-readonly-loads | FileCheck %s

// A row kernel's phases read the thread's columns of %x again after each barrier: nothing in the
// launch writes %x, so the later identical loads reuse the first ones (scalar and vector, in the
// launch body and in a nested loop's own body). %y is written: its reads stay.
// CHECK-LABEL: func.func @phases
// CHECK-SAME: (%[[X:[a-z0-9]+]]: memref<4x197xf32>, %[[Y:[a-z0-9]+]]: memref<4x197xf32>
// CHECK: gpu.launch
// CHECK: %[[A:.*]] = memref.load %[[X]]
// CHECK: %[[V:.*]] = vector.transfer_read %[[X]]
// CHECK: memref.load %[[Y]]
// CHECK: gpu.barrier
// CHECK-NOT: memref.load %[[X]]
// CHECK-NOT: vector.transfer_read %[[X]]
// CHECK: memref.load %[[Y]]
// CHECK: arith.addf %[[A]], %[[A]]
// CHECK: scf.for
// CHECK: memref.load %[[X]]
// CHECK-NOT: memref.load %[[X]]
// CHECK: scf.yield
func.func @phases(%x: memref<4x197xf32>, %y: memref<4x197xf32>, %o: memref<4x197xf32>, %r: index, %j: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %pad = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %a = memref.load %x[%r, %j] : memref<4x197xf32>
    %v = vector.transfer_read %x[%r, %j], %pad : memref<4x197xf32>, vector<4xf32>
    %y0 = memref.load %y[%r, %j] : memref<4x197xf32>
    memref.store %a, %y[%r, %j] : memref<4x197xf32>
    gpu.barrier
    %b = memref.load %x[%r, %j] : memref<4x197xf32>
    %w = vector.transfer_read %x[%r, %j], %pad : memref<4x197xf32>, vector<4xf32>
    %y1 = memref.load %y[%r, %j] : memref<4x197xf32>
    %s = arith.addf %a, %b : f32
    %t = arith.addf %s, %y1 : f32
    %u = arith.addf %t, %y0 : f32
    memref.store %u, %o[%r, %j] : memref<4x197xf32>
    vector.transfer_write %w, %o[%r, %c0] : vector<4xf32>, memref<4x197xf32>
    %acc = scf.for %i = %c0 to %c4 step %c1 iter_args(%z = %pad) -> (f32) {
      %p = memref.load %x[%i, %j] : memref<4x197xf32>
      gpu.barrier
      %q = memref.load %x[%i, %j] : memref<4x197xf32>
      %pq = arith.addf %p, %q : f32
      %zz = arith.addf %z, %pq : f32
      scf.yield %zz : f32
    }
    memref.store %acc, %o[%c0, %c0] : memref<4x197xf32>
    gpu.terminator
  }
  return
}

// -----

// Negative: an op of unknown effects takes %x (it may write it): every read stays.
// CHECK-LABEL: func.func @unknown_writer
// CHECK-COUNT-2: memref.load %{{.*}}[%{{.*}}] : memref<8xf32>
func.func @unknown_writer(%x: memref<8xf32>, %o: memref<8xf32>, %i: index) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %a = memref.load %x[%i] : memref<8xf32>
    linalg.fill ins(%a : f32) outs(%x : memref<8xf32>)
    %b = memref.load %x[%i] : memref<8xf32>
    memref.store %b, %o[%i] : memref<8xf32>
    gpu.terminator
  }
  return
}

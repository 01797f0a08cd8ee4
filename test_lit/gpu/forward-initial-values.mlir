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

// -----

// A ragged tile's accumulator rows (`ansor-gpu-guard-padded-reads`: masked 1-D writes of clamped
// rows of C, which may be the same row): every row's fill is forwarded although the other rows'
// writes of the same splat come between a row's write and its read-back, and every fill write
// goes (the final writes cover them; nothing reads C in between).
// CHECK-LABEL: func.func @ragged_rows
// CHECK-SAME: (%[[C:.*]]: memref<5x7xf32>
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<4xf32>
// CHECK: gpu.launch
// CHECK-NOT: vector.transfer_write %[[ZERO]]
// CHECK-NOT: vector.transfer_read %{{.*}} : memref<7xf32
// CHECK: scf.for %{{.*}} iter_args(%{{.*}} = %[[ZERO]], %{{.*}} = %[[ZERO]])
// CHECK: vector.transfer_write
// CHECK-NEXT: vector.transfer_write
// CHECK-NEXT: gpu.terminator
func.func @ragged_rows(%C: memref<5x7xf32>, %A: memref<4xf32, 3>, %r0: index, %r1: index, %j: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %pad = arith.constant 0.0 : f32
  %zero = arith.constant dense<0.0> : vector<4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %row0 = memref.subview %C[%r0, 0] [1, 7] [1, 1] : memref<5x7xf32> to memref<7xf32, strided<[1], offset: ?>>
    vector.transfer_write %zero, %row0[%j] : vector<4xf32>, memref<7xf32, strided<[1], offset: ?>>
    %row1 = memref.subview %C[%r1, 0] [1, 7] [1, 1] : memref<5x7xf32> to memref<7xf32, strided<[1], offset: ?>>
    vector.transfer_write %zero, %row1[%j] : vector<4xf32>, memref<7xf32, strided<[1], offset: ?>>
    gpu.barrier
    %a0 = vector.transfer_read %row0[%j], %pad : memref<7xf32, strided<[1], offset: ?>>, vector<4xf32>
    %a1 = vector.transfer_read %row1[%j], %pad : memref<7xf32, strided<[1], offset: ?>>, vector<4xf32>
    %r:2 = scf.for %k = %c0 to %c8 step %c1 iter_args(%x0 = %a0, %x1 = %a1) -> (vector<4xf32>, vector<4xf32>) {
      %x = vector.transfer_read %A[%c0], %pad : memref<4xf32, 3>, vector<4xf32>
      %s0 = arith.addf %x0, %x : vector<4xf32>
      %s1 = arith.addf %x1, %x : vector<4xf32>
      scf.yield %s0, %s1 : vector<4xf32>, vector<4xf32>
    }
    vector.transfer_write %r#0, %row0[%j] : vector<4xf32>, memref<7xf32, strided<[1], offset: ?>>
    vector.transfer_write %r#1, %row1[%j] : vector<4xf32>, memref<7xf32, strided<[1], offset: ?>>
    gpu.terminator
  }
  return
}

// -----

// Negative: between row 0's fill and its read-back, row 1 (which may be the same row) is written
// with another value: row 0's read-back stays; row 1's is forwarded.
// CHECK-LABEL: func.func @ragged_rows_other_value
// CHECK: gpu.launch
// CHECK: vector.transfer_write %{{.*}}, %[[ROW0:[a-z_0-9]+]][
// CHECK: vector.transfer_write %{{.*}}, %[[ROW1:[a-z_0-9]+]][
// CHECK-NEXT: vector.transfer_read %[[ROW0]]
// CHECK-NOT: vector.transfer_read %[[ROW1]]
func.func @ragged_rows_other_value(%C: memref<5x7xf32>, %r0: index, %r1: index, %j: index) {
  %pad = arith.constant 0.0 : f32
  %c1 = arith.constant 1 : index
  %zero = arith.constant dense<0.0> : vector<4xf32>
  %one = arith.constant dense<1.0> : vector<4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %row0 = memref.subview %C[%r0, 0] [1, 7] [1, 1] : memref<5x7xf32> to memref<7xf32, strided<[1], offset: ?>>
    vector.transfer_write %zero, %row0[%j] : vector<4xf32>, memref<7xf32, strided<[1], offset: ?>>
    %row1 = memref.subview %C[%r1, 0] [1, 7] [1, 1] : memref<5x7xf32> to memref<7xf32, strided<[1], offset: ?>>
    vector.transfer_write %one, %row1[%j] : vector<4xf32>, memref<7xf32, strided<[1], offset: ?>>
    %a0 = vector.transfer_read %row0[%j], %pad : memref<7xf32, strided<[1], offset: ?>>, vector<4xf32>
    %a1 = vector.transfer_read %row1[%j], %pad : memref<7xf32, strided<[1], offset: ?>>, vector<4xf32>
    %s = arith.addf %a0, %a1 : vector<4xf32>
    vector.transfer_write %s, %row0[%j] : vector<4xf32>, memref<7xf32, strided<[1], offset: ?>>
    gpu.terminator
  }
  return
}

// -----

// The fill mapped to the threads one way (a 16-wide row each) and the accumulators another (two
// 4-wide chunks 8 apart): after the barrier, the read-backs through other views get the fill's
// value, a splat of their own type. The fill's writes stay (other threads' elements).
// CHECK-LABEL: func.func @filled_through_other_views
// CHECK-SAME: (%[[C:[a-z0-9]+]]: memref<4x16xf32>
// CHECK: gpu.launch
// CHECK-NEXT: vector.transfer_write %{{.*}}, %[[C]]
// CHECK-NEXT: gpu.barrier
// CHECK-NOT: vector.transfer_read %[[C]]
// CHECK: arith.addf %{{.*}}, %{{.*}} : vector<4xf32>
func.func @filled_through_other_views(%C: memref<4x16xf32>, %r: index, %j: index) {
  %c1 = arith.constant 1 : index
  %pad = arith.constant 0.0 : f32
  %zero16 = arith.constant dense<0.0> : vector<16xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    vector.transfer_write %zero16, %C[%tx, %c1] : vector<16xf32>, memref<4x16xf32>
    gpu.barrier
    %a = vector.transfer_read %C[%r, %j], %pad : memref<4x16xf32>, vector<4xf32>
    %b = vector.transfer_read %C[%r, %tx], %pad : memref<4x16xf32>, vector<4xf32>
    %s = arith.addf %a, %b : vector<4xf32>
    vector.transfer_write %s, %C[%r, %j] : vector<4xf32>, memref<4x16xf32>
    gpu.terminator
  }
  return
}

// -----

// Negative: no barrier between the fill (another thread's elements) and the read-back, or a
// write of another value: the reads stay.
// CHECK-LABEL: func.func @filled_no_barrier
// CHECK: vector.transfer_read
// CHECK-LABEL: func.func @filled_other_value
// CHECK: gpu.barrier
// CHECK-NEXT: vector.transfer_read
func.func @filled_no_barrier(%C: memref<4x16xf32>, %r: index, %j: index) {
  %c1 = arith.constant 1 : index
  %pad = arith.constant 0.0 : f32
  %zero16 = arith.constant dense<0.0> : vector<16xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    vector.transfer_write %zero16, %C[%tx, %c1] : vector<16xf32>, memref<4x16xf32>
    %a = vector.transfer_read %C[%r, %j], %pad : memref<4x16xf32>, vector<4xf32>
    vector.transfer_write %a, %C[%r, %j] : vector<4xf32>, memref<4x16xf32>
    gpu.terminator
  }
  return
}
func.func @filled_other_value(%C: memref<4x16xf32>, %r: index, %j: index) {
  %c1 = arith.constant 1 : index
  %pad = arith.constant 0.0 : f32
  %zero16 = arith.constant dense<0.0> : vector<16xf32>
  %one4 = arith.constant dense<1.0> : vector<4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    vector.transfer_write %zero16, %C[%tx, %c1] : vector<16xf32>, memref<4x16xf32>
    vector.transfer_write %one4, %C[%tx, %j] : vector<4xf32>, memref<4x16xf32>
    gpu.barrier
    %a = vector.transfer_read %C[%r, %j], %pad : memref<4x16xf32>, vector<4xf32>
    vector.transfer_write %a, %C[%r, %j] : vector<4xf32>, memref<4x16xf32>
    gpu.terminator
  }
  return
}

// RUN: %ansor-opt %s -split-input-file -verify-diagnostics -ansor-gpu-pack-rows-into-blocks | FileCheck %s

// R = 2 rows of 8 along block x, 64 threads a row: grid 8 -> 4, block (64, 1, 1) -> (64, 2, 1);
// the row is block x * 2 + thread y (the launch's block-id argument and gpu.block_id alike);
// thread y and block dim y of before read 0 and 1, grid dim x reads 8; the shared buffer gets a
// row per group and every access moves to the group's row (load, store, dynamic-offset subview,
// a linalg op on the whole buffer through its slice); barriers at the top level and in a loop
// of constant bounds stay.
// CHECK-LABEL: func.func @two_rows
// CHECK-DAG: %[[G4:.*]] = arith.constant 4 : index
// CHECK-DAG: %[[B2:.*]] = arith.constant 2 : index
// CHECK: gpu.launch blocks(%{{[^)]*}}) in (%{{[^ ]*}} = %[[G4]],
// CHECK-SAME: threads(%{{[^)]*}}) in (%{{[^ ]*}} = %{{[^,]*}}, %{{[^ ]*}} = %[[B2]],
// CHECK-SAME: workgroup(%[[S:.*]] : memref<2x64xf32, 3>)
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : index
// CHECK: %[[BX:.*]] = gpu.block_id x
// CHECK-NEXT: %[[TY:.*]] = gpu.thread_id y
// CHECK-NEXT: %[[R:.*]] = arith.constant 2 : index
// CHECK-NEXT: %[[M:.*]] = arith.muli %[[BX]], %[[R]] : index
// CHECK-NEXT: %[[ROW:.*]] = arith.addi %[[M]], %[[TY]] : index
// CHECK-NOT: gpu.block_id
// CHECK: %[[TX:.*]] = gpu.thread_id x
// CHECK: memref.load %{{.*}}[%[[ROW]], %[[TX]]] : memref<8x64xf32>
// CHECK: %[[Y0:.*]] = arith.addi %{{[^,]*}}, %[[TY]] : index
// CHECK-NEXT: memref.store %{{.*}}, %[[S]][%[[Y0]], %[[TX]]] : memref<2x64xf32, 3>
// CHECK: gpu.barrier
// CHECK: %[[Y1:.*]] = arith.addi %{{[^,]*}}, %[[TY]] : index
// CHECK-NEXT: memref.subview %[[S]][%[[Y1]], %[[TX]]] [1, 1] [1, 1] : memref<2x64xf32, 3> to memref<1x1xf32, strided<[64, 1], offset: ?>, 3>
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK: %[[SL:.*]] = memref.subview %[[S]][%[[TY]], 0] [1, 64] [1, 1]
// CHECK-NEXT: linalg.fill ins(%{{.*}} : f32) outs(%[[SL]]
// CHECK: memref.store %[[C0]], %{{.*}}[%[[ROW]]]
// CHECK-NEXT: memref.store %[[C1]], %{{.*}}[%[[ROW]]]
// CHECK-NEXT: memref.store %[[C8]], %{{.*}}[%[[ROW]]]
// CHECK-NOT: ansor.rows_per_block
func.func @two_rows(%X: memref<8x64xf32>, %Y: memref<8x64xf32>, %I: memref<8xindex>) {
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %f0 = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c8, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1)
             workgroup(%S : memref<1x64xf32, 3>) {
    %c0 = arith.constant 0 : index
    %b = gpu.block_id x
    %t = gpu.thread_id x
    %v = memref.load %X[%b, %t] : memref<8x64xf32>
    memref.store %v, %S[%c0, %t] : memref<1x64xf32, 3>
    gpu.barrier
    %sv = memref.subview %S[0, %t] [1, 1] [1, 1] : memref<1x64xf32, 3> to memref<1x1xf32, strided<[64, 1], offset: ?>, 3>
    %w = memref.load %sv[%c0, %c0] : memref<1x1xf32, strided<[64, 1], offset: ?>, 3>
    memref.store %w, %Y[%bx, %t] : memref<8x64xf32>
    %c2 = arith.constant 2 : index
    scf.for %i = %c0 to %c2 step %c1 {
      gpu.barrier
    }
    linalg.fill ins(%f0 : f32) outs(%S : memref<1x64xf32, 3>)
    %y = gpu.thread_id y
    %dy = gpu.block_dim y
    %gdx = gpu.grid_dim x
    memref.store %y, %I[%b] : memref<8xindex>
    memref.store %dy, %I[%b] : memref<8xindex>
    memref.store %gdx, %I[%b] : memref<8xindex>
    gpu.terminator
  } {ansor.rows_per_block = 2 : i64}
  return
}

// -----

// R = 1: the launch stays as it was, the attribute goes.
// CHECK-LABEL: func.func @one_row
// CHECK: gpu.launch
// CHECK-SAME: workgroup(%{{.*}} : memref<1x64xf32, 3>)
// CHECK-NOT: gpu.thread_id y
// CHECK: gpu.block_id x
// CHECK-NOT: ansor.rows_per_block
func.func @one_row(%X: memref<8x64xf32>) {
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c8, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1)
             workgroup(%S : memref<1x64xf32, 3>) {
    %c0 = arith.constant 0 : index
    %b = gpu.block_id x
    %v = memref.load %X[%b, %tx] : memref<8x64xf32>
    memref.store %v, %S[%c0, %tx] : memref<1x64xf32, 3>
    gpu.terminator
  } {ansor.rows_per_block = 1 : i64}
  return
}

// -----

func.func @half_warp_rows(%X: memref<8x16xf32>) {
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  // expected-error @+1 {{cannot pack 2 rows per block: 16 threads per row (a row group must be whole warps)}}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c8, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c16, %sy = %c1, %sz = %c1) {
    gpu.terminator
  } {ansor.rows_per_block = 2 : i64}
  return
}

// -----

func.func @rows_not_divided(%X: memref<6x32xf32>) {
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c32 = arith.constant 32 : index
  // expected-error @+1 {{cannot pack 4 rows per block: 6 blocks along x (R must divide them)}}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c6, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    gpu.terminator
  } {ansor.rows_per_block = 4 : i64}
  return
}

// -----

// A barrier under a branch on the row's data: row groups would diverge at it.
func.func @divergent_barrier(%X: memref<8x32xf32>) {
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c32 = arith.constant 32 : index
  %f0 = arith.constant 0.0 : f32
  // expected-error @+1 {{cannot pack 2 rows per block: a gpu.barrier under scf.if whose control depends on the row}}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c8, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %c0 = arith.constant 0 : index
    %v = memref.load %X[%c0, %c0] : memref<8x32xf32>
    %p = arith.cmpf ogt, %v, %f0 : f32
    scf.if %p {
      gpu.barrier
    }
    gpu.terminator
  } {ansor.rows_per_block = 2 : i64}
  return
}

// -----

// A shared buffer without a leading unit dim to split among the row groups.
func.func @no_row_dim(%X: memref<8x32xf32>) {
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c32 = arith.constant 32 : index
  // expected-error @+1 {{cannot pack 2 rows per block: shared buffer memref<32xf32, 3> has no leading unit dim to give each row group its own}}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c8, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1)
             workgroup(%S : memref<32xf32, 3>) {
    %v = memref.load %S[%tx] : memref<32xf32, 3>
    gpu.terminator
  } {ansor.rows_per_block = 2 : i64}
  return
}

// -----

// A shared buffer still allocated in the body (before ansor-gpu-workgroup-attributions): it
// would be one buffer for every row group.
func.func @allocated_in_body(%X: memref<8x32xf32>) {
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c32 = arith.constant 32 : index
  // expected-error @+1 {{cannot pack 2 rows per block: a shared buffer allocated in the body (not a workgroup attribution yet)}}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c8, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %S = memref.alloc() : memref<1x32xf32, 3>
    gpu.terminator
  } {ansor.rows_per_block = 2 : i64}
  return
}

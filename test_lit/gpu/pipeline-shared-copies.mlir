// RUN: %ansor-opt %s -split-input-file -ansor-gpu-pipeline-shared-copies | FileCheck %s

// Two stages (the launch's attribute): the shared tile gets a stage dimension, the first tile is
// copied with cp.async (16 bytes: aligned rows of 4 floats) before the loop, and each iteration
// waits for its tile, meets one barrier, copies the next tile (its row clamped to the last
// iteration's) into the other stage and computes on its own; all copies are waited for after
// the loop.
// CHECK-LABEL: func.func @two_stages
// CHECK-SAME: (%[[A:.*]]: memref<64x4xf32>,
// CHECK: workgroup(%[[S:.*]] : memref<2x8x4xf32, 3>)
// CHECK: gpu.barrier
// CHECK: %[[S0:.*]] = memref.subview %[[S]][0, 0, 0] [1, 8, 4] [1, 1, 1]
// CHECK: nvgpu.device_async_copy %[[A]][{{.*}}], %[[S0]][%c0, %c0], 4 {bypassL1}
// CHECK: %[[G0:.*]] = nvgpu.device_async_create_group{{ *$}}
// CHECK: scf.for %[[K:.*]] = %c0 to %c64 step %c8 {
// CHECK: %[[I:.*]] = arith.divui
// CHECK: %[[CUR:.*]] = arith.remui %[[I]], %c2
// CHECK: %[[NXT:.*]] = arith.remui
// CHECK: %[[SC:.*]] = memref.subview %[[S]][%[[CUR]], 0, 0] [1, 8, 4] [1, 1, 1]
// CHECK: %[[SN:.*]] = memref.subview %[[S]][%[[NXT]], 0, 0] [1, 8, 4] [1, 1, 1]
// CHECK: nvgpu.device_async_wait %[[G0]] {numGroups = 0 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK: %[[AT:.*]] = arith.addi %[[K]], %c8
// CHECK-NEXT: %[[CLAMP:.*]] = arith.minsi %[[AT]], %c56
// CHECK-NEXT: %[[ROW:.*]] = arith.addi %[[CLAMP]], %c1
// CHECK-NEXT: nvgpu.device_async_copy %[[A]][%[[ROW]], %c0], %[[SN]][%c0, %c0], 4 {bypassL1}
// CHECK-NEXT: nvgpu.device_async_create_group
// CHECK-NEXT: vector.transfer_read %[[SC]][%c1, %c0]
// CHECK-NOT: gpu.barrier
// CHECK: }
// CHECK-NEXT: nvgpu.device_async_wait %[[G0]] {numGroups = 0 : i32}
func.func @two_stages(%A: memref<64x4xf32>, %out: memref<4xf32>) {
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
      %g = vector.transfer_read %A[%row, %c0], %pad {in_bounds = [true]} : memref<64x4xf32>, vector<4xf32>
      vector.transfer_write %g, %sA[%c0, %c0] {in_bounds = [true]} : vector<4xf32>, memref<8x4xf32, 3>
      gpu.barrier
      %x = vector.transfer_read %sA[%c1, %c0], %pad : memref<8x4xf32, 3>, vector<4xf32>
      vector.transfer_write %x, %out[%c0] : vector<4xf32>, memref<4xf32>
      gpu.barrier
    }
    gpu.terminator
  } {ansor.pipeline_stages = 2 : i64}
  return
}

// -----

// Three stages: two tiles before the loop (the second at the clamped iv: one group each), a
// wait leaving one group in flight. Rows of 3 floats (a stride not a multiple of 4): 4-byte
// copies, L1 kept. A view of the tile made outside the loop is rebuilt on the current stage.
// CHECK-LABEL: func.func @three_stages
// CHECK: workgroup(%[[S:.*]] : memref<3x8x3xf32, 3>)
// CHECK: nvgpu.device_async_copy {{.*}}, 1 :
// CHECK-NOT: bypassL1
// CHECK: nvgpu.device_async_create_group
// CHECK: nvgpu.device_async_copy {{.*}}, 1 :
// CHECK: nvgpu.device_async_create_group
// CHECK: scf.for
// CHECK: %[[SC:.*]] = memref.subview %[[S]][%{{.*}}, 0, 0] [1, 8, 3] [1, 1, 1]
// CHECK: %[[ROWV:.*]] = memref.subview %[[SC]][2, 0] [1, 3] [1, 1]
// CHECK: nvgpu.device_async_wait {{.*}} {numGroups = 1 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK: arith.addi %{{.*}}, %c16
// CHECK: vector.transfer_read %[[ROWV]]
func.func @three_stages(%A: memref<64x3xf32>, %out: memref<3xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
             workgroup(%sA : memref<8x3xf32, 3>) {
    %v = memref.subview %sA[2, 0] [1, 3] [1, 1] : memref<8x3xf32, 3> to memref<1x3xf32, strided<[3, 1], offset: 6>, 3>
    scf.for %k = %c0 to %c64 step %c8 {
      %g = vector.transfer_read %A[%k, %c0], %pad {in_bounds = [true]} : memref<64x3xf32>, vector<3xf32>
      vector.transfer_write %g, %sA[%c0, %c0] {in_bounds = [true]} : vector<3xf32>, memref<8x3xf32, 3>
      gpu.barrier
      %x = vector.transfer_read %v[%c0, %c0], %pad : memref<1x3xf32, strided<[3, 1], offset: 6>, 3>, vector<3xf32>
      vector.transfer_write %x, %out[%c0] : vector<3xf32>, memref<3xf32>
      gpu.barrier
    }
    gpu.terminator
  } {ansor.pipeline_stages = 3 : i64}
  return
}

// -----

// A guarded read (a padded input: a clamped load and a select) goes through registers: loaded
// after the barrier, stored into the next stage at the end of the body. No cp.async.
// CHECK-LABEL: func.func @through_registers
// CHECK: workgroup(%[[S:.*]] : memref<2x8x4xf32, 3>)
// CHECK-NOT: nvgpu
// CHECK: scf.for
// CHECK: %[[SC:.*]] = memref.subview %[[S]][%{{.*}}, 0, 0] [1, 8, 4] [1, 1, 1]
// CHECK-NEXT: %[[SN:.*]] = memref.subview %[[S]][%{{.*}}, 0, 0] [1, 8, 4] [1, 1, 1]
// CHECK: gpu.barrier
// CHECK: %[[G:.*]] = vector.transfer_read %{{.*}} : memref<61x4xf32>, vector<4xf32>
// CHECK: %[[SEL:.*]] = arith.select %{{.*}}, %[[G]], %{{.*}} : vector<4xf32>
// CHECK: vector.transfer_read %[[SC]]
// CHECK: vector.transfer_write %[[SEL]], %[[SN]][%c0, %c0] {{.*}}3>{{$}}
// CHECK-NEXT: }
func.func @through_registers(%A: memref<61x4xf32>, %out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c60 = arith.constant 60 : index
  %c61 = arith.constant 61 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  %zero = arith.constant dense<0.0> : vector<4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
             workgroup(%sA : memref<8x4xf32, 3>) {
    scf.for %k = %c0 to %c64 step %c8 {
      %in = arith.cmpi ult, %k, %c61 : index
      %r = arith.minsi %k, %c60 : index
      %g = vector.transfer_read %A[%r, %c0], %pad {in_bounds = [true]} : memref<61x4xf32>, vector<4xf32>
      %s = arith.select %in, %g, %zero : vector<4xf32>
      vector.transfer_write %s, %sA[%c0, %c0] {in_bounds = [true]} : vector<4xf32>, memref<8x4xf32, 3>
      gpu.barrier
      %x = vector.transfer_read %sA[%c1, %c0], %pad : memref<8x4xf32, 3>, vector<4xf32>
      vector.transfer_write %x, %out[%c0] : vector<4xf32>, memref<4xf32>
      gpu.barrier
    }
    gpu.terminator
  } {ansor.pipeline_stages = 2 : i64}
  return
}

// -----

// A copy of fewer vectors than threads sits in a guard (an scf.if on a condition from outside
// the loop): the guard is rebuilt around the copies of each tile. A 2x4 vector is copied row by
// row.
// CHECK-LABEL: func.func @guarded_rows
// CHECK: workgroup(%[[S:.*]] : memref<2x8x4xf32, 3>)
// CHECK: scf.if %[[P:.*]] {
// CHECK: nvgpu.device_async_copy {{.*}}, 4 {bypassL1}
// CHECK: nvgpu.device_async_copy {{.*}}, 4 {bypassL1} {{.*}}3>{{$}}
// CHECK-NEXT: }
// CHECK-NEXT: nvgpu.device_async_create_group
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK: scf.if %[[P]] {
// CHECK-NEXT: %[[ROW:.*]] = arith.addi
// CHECK-NEXT: nvgpu.device_async_copy %{{.*}}[%[[ROW]], %c0]
// CHECK: %[[ROW2:.*]] = arith.addi %[[ROW]], %c1
// CHECK-NEXT: arith.addi
// CHECK-NEXT: nvgpu.device_async_copy %{{.*}}[%[[ROW2]], %c0]{{.*}}3>{{$}}
// CHECK-NEXT: }
// CHECK-NEXT: nvgpu.device_async_create_group
// CHECK-NOT: scf.if
// CHECK: vector.transfer_read
func.func @guarded_rows(%A: memref<64x4xf32>, %out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1)
             workgroup(%sA : memref<8x4xf32, 3>) {
    %p = arith.cmpi ult, %tx, %c4 : index
    %r = arith.muli %tx, %c2 : index
    scf.for %k = %c0 to %c64 step %c8 {
      scf.if %p {
        %row = arith.addi %k, %r : index
        %g = vector.transfer_read %A[%row, %c0], %pad {in_bounds = [true, true]} : memref<64x4xf32>, vector<2x4xf32>
        vector.transfer_write %g, %sA[%r, %c0] {in_bounds = [true, true]} : vector<2x4xf32>, memref<8x4xf32, 3>
      }
      gpu.barrier
      %x = vector.transfer_read %sA[%c1, %c0], %pad : memref<8x4xf32, 3>, vector<4xf32>
      vector.transfer_write %x, %out[%c0] : vector<4xf32>, memref<4xf32>
      gpu.barrier
    }
    gpu.terminator
  } {ansor.pipeline_stages = 2 : i64}
  return
}

// -----

// Left alone: another write to the shared tile inside the loop (not a copy of global memory),
// and a launch without the attribute.
// CHECK-LABEL: func.func @left_alone
// CHECK: workgroup(%{{.*}} : memref<8x4xf32, 3>)
// CHECK-NOT: nvgpu
// CHECK: workgroup(%{{.*}} : memref<8x4xf32, 3>)
// CHECK-NOT: nvgpu
func.func @left_alone(%A: memref<64x4xf32>, %out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
             workgroup(%sA : memref<8x4xf32, 3>) {
    scf.for %k = %c0 to %c64 step %c8 {
      %g = vector.transfer_read %A[%k, %c0], %pad {in_bounds = [true]} : memref<64x4xf32>, vector<4xf32>
      vector.transfer_write %g, %sA[%c0, %c0] {in_bounds = [true]} : vector<4xf32>, memref<8x4xf32, 3>
      gpu.barrier
      %x = vector.transfer_read %sA[%c1, %c0], %pad : memref<8x4xf32, 3>, vector<4xf32>
      vector.transfer_write %x, %sA[%c1, %c0] : vector<4xf32>, memref<8x4xf32, 3>
      gpu.barrier
    }
    gpu.terminator
  } {ansor.pipeline_stages = 2 : i64}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1)
             workgroup(%sA : memref<8x4xf32, 3>) {
    scf.for %k = %c0 to %c64 step %c8 {
      %g = vector.transfer_read %A[%k, %c0], %pad {in_bounds = [true]} : memref<64x4xf32>, vector<4xf32>
      vector.transfer_write %g, %sA[%c0, %c0] {in_bounds = [true]} : vector<4xf32>, memref<8x4xf32, 3>
      gpu.barrier
      %x = vector.transfer_read %sA[%c1, %c0], %pad : memref<8x4xf32, 3>, vector<4xf32>
      vector.transfer_write %x, %out[%c0] : vector<4xf32>, memref<4xf32>
      gpu.barrier
    }
    gpu.terminator
  }
  return
}

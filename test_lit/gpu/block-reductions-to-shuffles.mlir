// RUN: %ansor-opt %s -split-input-file -ansor-gpu-block-reductions-to-shuffles | FileCheck %s

// 64 threads: each takes its slot and the initial value (before the barrier: another warp may
// store the result to D once past it), 5 xor shuffles (32-lane warps), lane 0 of each warp
// stores the warp's result, a barrier, slots 0 and 32 combined in warp order, then the initial
// value.
// The combiner keeps its operand order (input, accumulator) and attributes.
// CHECK-LABEL: func.func @shuffles
// CHECK-SAME: (%[[D:.*]]: memref<1xf32>)
// CHECK: gpu.launch
// CHECK-SAME: workgroup(%[[S:.*]] : memref<1x64xf32, 3>)
// CHECK-NEXT: %[[TID:.*]] = gpu.thread_id x
// CHECK-NEXT: %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[V0:.*]] = memref.load %[[S]][%[[C0]], %[[TID]]]
// CHECK-NEXT: %[[INIT:.*]] = memref.load %[[D]][%[[C0]]]
// CHECK-NEXT: %[[W:.*]] = arith.constant 32 : i32
// CHECK-NEXT: %[[O16:.*]] = arith.constant 16 : i32
// CHECK-NEXT: %[[X16:.*]], %{{.*}} = gpu.shuffle xor %[[V0]], %[[O16]], %[[W]] : f32
// CHECK-NEXT: %[[V1:.*]] = arith.addf %[[X16]], %[[V0]] fastmath<contract> : f32
// CHECK-COUNT-4: gpu.shuffle xor
// CHECK: %[[V5:.*]] = arith.addf
// CHECK-NEXT: %[[C32:.*]] = arith.constant 32 : index
// CHECK-NEXT: %[[LANE:.*]] = arith.remui %[[TID]], %[[C32]]
// CHECK-NEXT: %[[IS0:.*]] = arith.cmpi eq, %[[LANE]], %[[C0]]
// CHECK-NEXT: scf.if %[[IS0]] {
// CHECK-NEXT: memref.store %[[V5]], %[[S]][%[[C0]], %[[TID]]]
// CHECK-NEXT: }
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: %[[P0:.*]] = memref.load %[[S]][%[[C0]], %[[C0]]]
// CHECK-NEXT: %[[C32B:.*]] = arith.constant 32 : index
// CHECK-NEXT: %[[P1:.*]] = memref.load %[[S]][%[[C0]], %[[C32B]]]
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %[[P1]], %[[P0]] fastmath<contract> : f32
// CHECK-NEXT: %[[ALL:.*]] = arith.addf %[[SUM]], %[[INIT]] fastmath<contract> : f32
// CHECK-NEXT: memref.store %[[ALL]], %[[D]][%[[C0]]]
// CHECK-NOT: linalg.reduce
func.func @shuffles(%D: memref<1xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1)
             workgroup(%S : memref<1x64xf32, 3>) {
    linalg.reduce ins(%S : memref<1x64xf32, 3>) outs(%D : memref<1xf32>) dimensions = [1]
      (%in: f32, %acc: f32) {
        %s = arith.addf %in, %acc fastmath<contract> : f32
        linalg.yield %s : f32
      }
    gpu.terminator
  }
  return
}

// -----

// 16 threads (a power of two under a warp): shuffles of width 16, no barrier; the combiner's
// operands the other way round (accumulator, input) stay that way.
// CHECK-LABEL: func.func @half_warp
// CHECK: %[[INIT:.*]] = memref.load %{{.*}}[] : memref<f32>
// CHECK: %[[W:.*]] = arith.constant 16 : i32
// CHECK-NEXT: %[[O8:.*]] = arith.constant 8 : i32
// CHECK-NEXT: %[[X8:.*]], %{{.*}} = gpu.shuffle xor %[[V0:.*]], %[[O8]], %[[W]] : f32
// CHECK-NEXT: arith.maximumf %[[V0]], %[[X8]] : f32
// CHECK-COUNT-3: gpu.shuffle xor
// CHECK-NOT: gpu.barrier
// CHECK: %[[ALL:.*]] = arith.maximumf %[[INIT]], %{{.*}} : f32
// CHECK-NEXT: memref.store %[[ALL]], %{{.*}}[] : memref<f32>
// CHECK-NOT: linalg.reduce
func.func @half_warp(%D: memref<f32>) {
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c16, %sy = %c1, %sz = %c1)
             workgroup(%S : memref<16xf32, 3>) {
    linalg.reduce ins(%S : memref<16xf32, 3>) outs(%D : memref<f32>) dimensions = [0]
      (%in: f32, %acc: f32) {
        %s = arith.maximumf %acc, %in : f32
        linalg.yield %s : f32
      }
    gpu.terminator
  }
  return
}

// -----

// Negative: a 2-D block, 48 threads (neither a warp multiple nor a power of two), a reduction of
// a buffer not in shared memory.
// CHECK-LABEL: func.func @no_shuffles
// CHECK-NOT: gpu.shuffle
// CHECK-COUNT-3: linalg.reduce
// CHECK-NOT: gpu.shuffle
func.func @no_shuffles(%D: memref<1xf32>, %G: memref<1x32xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %c48 = arith.constant 48 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c2, %sz = %c1)
             workgroup(%S : memref<1x32xf32, 3>) {
    linalg.reduce ins(%S : memref<1x32xf32, 3>) outs(%D : memref<1xf32>) dimensions = [1]
      (%in: f32, %acc: f32) {
        %s = arith.addf %in, %acc : f32
        linalg.yield %s : f32
      }
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c48, %sy = %c1, %sz = %c1)
             workgroup(%S : memref<1x48xf32, 3>) {
    linalg.reduce ins(%S : memref<1x48xf32, 3>) outs(%D : memref<1xf32>) dimensions = [1]
      (%in: f32, %acc: f32) {
        %s = arith.addf %in, %acc : f32
        linalg.yield %s : f32
      }
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    linalg.reduce ins(%G : memref<1x32xf32>) outs(%D : memref<1xf32>) dimensions = [1]
      (%in: f32, %acc: f32) {
        %s = arith.addf %in, %acc : f32
        linalg.yield %s : f32
      }
    gpu.terminator
  }
  return
}

// -----

// A launch packing rows per block (`ansor.rows_per_block` > 1): the barrier before the
// reduction only ordered each thread's write of its own slot before its own read of it (ops on
// private buffers between them aside), so it goes. 32 threads: no barrier left.
// CHECK-LABEL: func.func @own_slot_barrier
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : memref<1x1xf32, strided<[32, 1], offset: ?>, 3>)
// CHECK-NEXT: linalg.copy
// CHECK-NEXT: %[[TID:.*]] = gpu.thread_id x
// CHECK-NOT: gpu.barrier
// CHECK: gpu.shuffle xor
// CHECK-NOT: gpu.barrier
// CHECK: gpu.terminator
func.func @own_slot_barrier(%P: memref<1xf32>) {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %f0 = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1)
             workgroup(%S : memref<1x32xf32, 3>) {
    %D = memref.alloca() : memref<1xf32>
    %D2 = memref.alloca() : memref<1xf32>
    %t = gpu.thread_id x
    %slot = memref.subview %S[0, %t] [1, 1] [1, 1] : memref<1x32xf32, 3> to memref<1x1xf32, strided<[32, 1], offset: ?>, 3>
    linalg.fill ins(%f0 : f32) outs(%slot : memref<1x1xf32, strided<[32, 1], offset: ?>, 3>)
    gpu.barrier
    linalg.copy ins(%D2 : memref<1xf32>) outs(%D : memref<1xf32>)
    linalg.reduce ins(%S : memref<1x32xf32, 3>) outs(%D : memref<1xf32>) dimensions = [1]
      (%in: f32, %acc: f32) {
        %s = arith.addf %in, %acc : f32
        linalg.yield %s : f32
      }
    gpu.terminator
  } {ansor.rows_per_block = 2 : i64}
  return
}

// -----

// A row sum's output in global memory, filled by every thread before the barrier: the fill is
// forwarded as the initial value and dropped (the final store overwrites it), so no thread
// writes it before its result and the barrier goes too.
// CHECK-LABEL: func.func @row_sum_fill_forwarded
// CHECK-SAME: (%[[G:.*]]: memref<1xf32>)
// CHECK: %[[F0:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NOT: linalg.fill ins(%{{.*}} : f32) outs(%[[G]]
// CHECK-NOT: gpu.barrier
// CHECK-NOT: memref.load %[[G]]
// CHECK-COUNT-5: gpu.shuffle xor
// CHECK: %[[ALL:.*]] = arith.addf %{{.*}}, %[[F0]] : f32
// CHECK-NEXT: memref.store %[[ALL]], %[[G]][%{{.*}}]
func.func @row_sum_fill_forwarded(%G: memref<1xf32>) {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %f0 = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1)
             workgroup(%S : memref<1x32xf32, 3>) {
    linalg.fill ins(%f0 : f32) outs(%G : memref<1xf32>)
    %t = gpu.thread_id x
    %slot = memref.subview %S[0, %t] [1, 1] [1, 1] : memref<1x32xf32, 3> to memref<1x1xf32, strided<[32, 1], offset: ?>, 3>
    linalg.fill ins(%f0 : f32) outs(%slot : memref<1x1xf32, strided<[32, 1], offset: ?>, 3>)
    gpu.barrier
    linalg.reduce ins(%S : memref<1x32xf32, 3>) outs(%G : memref<1xf32>) dimensions = [1]
      (%in: f32, %acc: f32) {
        %s = arith.addf %in, %acc : f32
        linalg.yield %s : f32
      }
    gpu.terminator
  } {ansor.rows_per_block = 2 : i64}
  return
}

// -----

// Packing rows too, but the global destination is read after its fill, before the barrier (so
// the fill stays): a thread past the barrier could combine into it before a slower one's fill,
// so the barrier stays; so does one before a reduction whose slots were written at another
// thread's place.
// CHECK-LABEL: func.func @barrier_kept
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : memref<1xf32>)
// CHECK-NEXT: arith.constant 0 : index
// CHECK-NEXT: memref.load
// CHECK-NEXT: gpu.barrier
// CHECK: gpu.shuffle xor
// CHECK: memref.subview %{{.*}}[0, 5] [1, 1] [1, 1] : memref<1x32xf32, 3>
// CHECK: gpu.barrier
// CHECK: gpu.shuffle xor
func.func @barrier_kept(%G: memref<1xf32>) {
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %f0 = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1)
             workgroup(%S : memref<1x32xf32, 3>, %S2 : memref<1x32xf32, 3>) {
    %t = gpu.thread_id x
    %slot = memref.subview %S[0, %t] [1, 1] [1, 1] : memref<1x32xf32, 3> to memref<1x1xf32, strided<[32, 1], offset: ?>, 3>
    linalg.fill ins(%f0 : f32) outs(%slot : memref<1x1xf32, strided<[32, 1], offset: ?>, 3>)
    linalg.fill ins(%f0 : f32) outs(%G : memref<1xf32>)
    %c0 = arith.constant 0 : index
    %g = memref.load %G[%c0] : memref<1xf32>
    gpu.barrier
    linalg.reduce ins(%S : memref<1x32xf32, 3>) outs(%G : memref<1xf32>) dimensions = [1]
      (%in: f32, %acc: f32) {
        %s = arith.addf %in, %acc : f32
        linalg.yield %s : f32
      }
    %other = memref.subview %S2[0, 5] [1, 1] [1, 1] : memref<1x32xf32, 3> to memref<1x1xf32, strided<[32, 1], offset: 5>, 3>
    linalg.fill ins(%f0 : f32) outs(%other : memref<1x1xf32, strided<[32, 1], offset: 5>, 3>)
    gpu.barrier
    %D = memref.alloca() : memref<1xf32>
    linalg.reduce ins(%S2 : memref<1x32xf32, 3>) outs(%D : memref<1xf32>) dimensions = [1]
      (%in: f32, %acc: f32) {
        %s = arith.addf %in, %acc : f32
        linalg.yield %s : f32
      }
    gpu.terminator
  } {ansor.rows_per_block = 2 : i64}
  return
}

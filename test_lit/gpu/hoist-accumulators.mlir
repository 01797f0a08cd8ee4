// RUN: %ansor-opt %s -split-input-file -ansor-gpu-hoist-accumulators | FileCheck %s

// An accumulator tile read and written once per iteration at loop-invariant indices: carried in
// registers, read before and written after the loop.
// CHECK-LABEL: func.func @hoist
// CHECK-SAME: (%[[C:.*]]: memref<4x4xf32>,
// CHECK: gpu.launch
// CHECK-NEXT: %[[INIT:.*]] = vector.transfer_read %[[C]][%c0, %c0]
// CHECK-NEXT: %[[RES:.*]] = scf.for %{{.*}} = %c0 to %c64 step %c8 iter_args(%[[ACC:.*]] = %[[INIT]]) -> (vector<4x4xf32>) {
// CHECK-NOT: %[[C]]
// CHECK: %[[S:.*]] = arith.addf %[[ACC]], %{{.*}} : vector<4x4xf32>
// CHECK-NEXT: scf.yield %[[S]] : vector<4x4xf32>
// CHECK-NEXT: } {tag}
// CHECK-NEXT: vector.transfer_write %[[RES]], %[[C]][%c0, %c0]
// CHECK-NEXT: gpu.terminator
func.func @hoist(%C: memref<4x4xf32>, %A: memref<64x4xf32, 3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    scf.for %k = %c0 to %c64 step %c8 {
      %acc = vector.transfer_read %C[%c0, %c0], %pad : memref<4x4xf32>, vector<4x4xf32>
      %a = vector.transfer_read %A[%k, %c0], %pad : memref<64x4xf32, 3>, vector<4x4xf32>
      %s = arith.addf %acc, %a : vector<4x4xf32>
      vector.transfer_write %s, %C[%c0, %c0] : vector<4x4xf32>, memref<4x4xf32>
    } {tag}
    gpu.terminator
  }
  return
}

// -----

// Two register tiles of one thread (statically disjoint subviews of one buffer) in a nest: both
// pairs leave the inner loop, then the outer one (innermost loops first).
// CHECK-LABEL: func.func @nest
// CHECK: gpu.launch
// CHECK-NEXT: %[[T0:.*]] = memref.subview %{{.*}}[0, 0] [2, 4]
// CHECK-NEXT: %[[T1:.*]] = memref.subview %{{.*}}[2, 0] [2, 4]
// CHECK-NEXT: %[[I0:.*]] = vector.transfer_read %[[T0]]
// CHECK-NEXT: %[[I1:.*]] = vector.transfer_read %[[T1]]
// CHECK-NEXT: %[[R:.*]]:2 = scf.for %{{.*}} iter_args(%[[O0:.*]] = %[[I0]], %[[O1:.*]] = %[[I1]])
// CHECK-NEXT: %[[Q:.*]]:2 = scf.for %{{.*}} iter_args(%[[A0:.*]] = %[[O0]], %[[A1:.*]] = %[[O1]])
// CHECK-NEXT: %[[S0:.*]] = arith.addf %[[A0]], %[[A1]]
// CHECK-NEXT: %[[S1:.*]] = arith.mulf %[[A1]], %[[A0]]
// CHECK-NEXT: scf.yield %[[S0]], %[[S1]]
// CHECK: scf.yield %[[Q]]#0, %[[Q]]#1
// CHECK: vector.transfer_write %[[R]]#0, %[[T0]]
// CHECK-NEXT: vector.transfer_write %[[R]]#1, %[[T1]]
// CHECK-NEXT: gpu.terminator
func.func @nest(%C: memref<4x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %pad = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %t0 = memref.subview %C[0, 0] [2, 4] [1, 1] : memref<4x4xf32> to memref<2x4xf32, strided<[4, 1]>>
    %t1 = memref.subview %C[2, 0] [2, 4] [1, 1] : memref<4x4xf32> to memref<2x4xf32, strided<[4, 1], offset: 8>>
    scf.for %i = %c0 to %c4 step %c1 {
      scf.for %j = %c0 to %c4 step %c1 {
        %a0 = vector.transfer_read %t0[%c0, %c0], %pad : memref<2x4xf32, strided<[4, 1]>>, vector<2x4xf32>
        %a1 = vector.transfer_read %t1[%c0, %c0], %pad : memref<2x4xf32, strided<[4, 1], offset: 8>>, vector<2x4xf32>
        %s0 = arith.addf %a0, %a1 : vector<2x4xf32>
        %s1 = arith.mulf %a1, %a0 : vector<2x4xf32>
        vector.transfer_write %s0, %t0[%c0, %c0] : vector<2x4xf32>, memref<2x4xf32, strided<[4, 1]>>
        vector.transfer_write %s1, %t1[%c0, %c0] : vector<2x4xf32>, memref<2x4xf32, strided<[4, 1], offset: 8>>
      }
    }
    gpu.terminator
  }
  return
}

// -----

// Negative: another access to the accumulator's buffer in the loop (a scalar load), and a pair
// whose indices depend on the induction variable: nothing moves.
// CHECK-LABEL: func.func @no_hoist
// CHECK-NOT: iter_args
// CHECK: scf.for
// CHECK-NEXT: vector.transfer_read
// CHECK-NEXT: memref.load
// CHECK: scf.for
// CHECK-NEXT: vector.transfer_read
// CHECK-NOT: iter_args
func.func @no_hoist(%C: memref<4x4xf32>, %D: memref<64x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    scf.for %k = %c0 to %c64 step %c8 {
      %acc = vector.transfer_read %C[%c0, %c0], %pad : memref<4x4xf32>, vector<4x4xf32>
      %x = memref.load %C[%c1, %c1] : memref<4x4xf32>
      %b = vector.broadcast %x : f32 to vector<4x4xf32>
      %s = arith.addf %acc, %b : vector<4x4xf32>
      vector.transfer_write %s, %C[%c0, %c0] : vector<4x4xf32>, memref<4x4xf32>
    }
    scf.for %k = %c0 to %c64 step %c8 {
      %acc = vector.transfer_read %D[%k, %c0], %pad : memref<64x4xf32>, vector<4x4xf32>
      %s = arith.addf %acc, %acc : vector<4x4xf32>
      vector.transfer_write %s, %D[%k, %c0] : vector<4x4xf32>, memref<64x4xf32>
    }
    gpu.terminator
  }
  return
}

// -----

// A body that auto-unrolling left holding two reduction steps reads and writes the accumulator
// twice: the second read takes the first write's value, the first write is dead, and the one
// remaining pair leaves the loop (before: a global read-modify-write per step, whose thousands of
// accesses also made LLVM's LoopLoadElimination take 18 s on one convolution candidate).
// CHECK-LABEL: func.func @unrolled_steps
// CHECK-SAME: (%[[C:.*]]: memref<4xf32>,
// CHECK: %[[INIT:.*]] = vector.transfer_read %[[C]][%c0]
// CHECK-NEXT: %[[RES:.*]] = scf.for %{{.*}} iter_args(%[[ACC:.*]] = %[[INIT]]) -> (vector<4xf32>) {
// CHECK-NOT: %[[C]]
// CHECK: %[[S1:.*]] = arith.addf %[[ACC]], %{{.*}} : vector<4xf32>
// CHECK-NOT: %[[C]]
// CHECK: %[[S2:.*]] = arith.addf %[[S1]], %{{.*}} : vector<4xf32>
// CHECK-NEXT: scf.yield %[[S2]] : vector<4xf32>
// CHECK: vector.transfer_write %[[RES]], %[[C]][%c0]
func.func @unrolled_steps(%C: memref<4xf32>, %A: memref<64x4xf32, 3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    scf.for %k = %c0 to %c64 step %c2 {
      %acc = vector.transfer_read %C[%c0], %pad : memref<4xf32>, vector<4xf32>
      %a = vector.transfer_read %A[%k, %c0], %pad : memref<64x4xf32, 3>, vector<4xf32>
      %s = arith.addf %acc, %a : vector<4xf32>
      vector.transfer_write %s, %C[%c0] : vector<4xf32>, memref<4xf32>
      %k1 = arith.addi %k, %c1 : index
      %acc1 = vector.transfer_read %C[%c0], %pad : memref<4xf32>, vector<4xf32>
      %b = vector.transfer_read %A[%k1, %c0], %pad : memref<64x4xf32, 3>, vector<4xf32>
      %s1 = arith.addf %acc1, %b : vector<4xf32>
      vector.transfer_write %s1, %C[%c0] : vector<4xf32>, memref<4xf32>
    }
    gpu.terminator
  }
  return
}

// -----

// No forwarding through an access that may overlap (a read of the same buffer elsewhere), and
// none in shared memory (other threads write it): both pairs stay in the loop.
// CHECK-LABEL: func.func @no_forwarding
// CHECK: scf.for
// CHECK-NEXT: vector.transfer_read %arg0[%c0]
// CHECK: vector.transfer_write %{{.*}}, %arg0[%c0]
// CHECK: vector.transfer_read %arg0[%arg
// CHECK-NEXT: vector.transfer_read %arg0[%c0]
// CHECK: vector.transfer_write %{{.*}}, %arg0[%c0]
// CHECK: scf.for
// CHECK-NEXT: vector.transfer_read %arg1[%c0]
// CHECK: vector.transfer_write %{{.*}}, %arg1[%c0]
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: vector.transfer_read %arg1[%c0]
// CHECK: vector.transfer_write %{{.*}}, %arg1[%c0]
// CHECK: gpu.terminator
func.func @no_forwarding(%C: memref<8xf32>, %S: memref<4xf32, 3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    scf.for %k = %c0 to %c64 step %c2 {
      %acc = vector.transfer_read %C[%c0], %pad : memref<8xf32>, vector<4xf32>
      %s = arith.addf %acc, %acc : vector<4xf32>
      vector.transfer_write %s, %C[%c0] : vector<4xf32>, memref<8xf32>
      %o = vector.transfer_read %C[%k], %pad : memref<8xf32>, vector<4xf32>
      %acc1 = vector.transfer_read %C[%c0], %pad : memref<8xf32>, vector<4xf32>
      %s1 = arith.addf %acc1, %o : vector<4xf32>
      vector.transfer_write %s1, %C[%c0] : vector<4xf32>, memref<8xf32>
    }
    scf.for %k = %c0 to %c64 step %c2 {
      %x = vector.transfer_read %S[%c0], %pad : memref<4xf32, 3>, vector<4xf32>
      %y = arith.addf %x, %x : vector<4xf32>
      vector.transfer_write %y, %S[%c0] : vector<4xf32>, memref<4xf32, 3>
      gpu.barrier
      %x1 = vector.transfer_read %S[%c0], %pad : memref<4xf32, 3>, vector<4xf32>
      %y1 = arith.addf %x1, %x1 : vector<4xf32>
      vector.transfer_write %y1, %S[%c0] : vector<4xf32>, memref<4xf32, 3>
    }
    gpu.terminator
  }
  return
}

// -----

// A thread's accumulator tile inside the block's shared tile (a fused consumer reads it after the
// loop, with another thread mapping): moved out of a loop that holds a barrier, its read and
// write get barriers of their own. Without the second one the consumer read the tile before the
// last k-step's sums landed (wrong ConvLayer outputs on an H200).
// CHECK-LABEL: func.func @shared_tile
// CHECK: gpu.launch
// CHECK: vector.transfer_write %{{.*}}, %[[T:.*]][%c0] : vector<4xf32>, memref<4xf32, strided<[1], offset: ?>, 3>
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: %[[INIT:.*]] = vector.transfer_read %[[T]][%c0]
// CHECK-NEXT: %[[RES:.*]] = scf.for %{{.*}} iter_args(%{{.*}} = %[[INIT]])
// CHECK: gpu.barrier
// CHECK: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: vector.transfer_write %[[RES]], %[[T]][%c0]
// CHECK-NEXT: gpu.barrier
// CHECK: vector.transfer_read %{{.*}}[%c0], %{{.*}} : memref<4xf32, strided<[1], offset: ?>, 3>, vector<4xf32>
// CHECK: gpu.terminator
func.func @shared_tile(%out: memref<64xf32>, %A: memref<64x4xf32, 3>, %tile: memref<64xf32, 3>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  %zero = arith.constant dense<0.0> : vector<4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c16, %sy = %c1, %sz = %c1) {
    %mine = affine.apply affine_map<(d0) -> (d0 * 4)>(%tx)
    %t = memref.subview %tile[%mine] [4] [1] : memref<64xf32, 3> to memref<4xf32, strided<[1], offset: ?>, 3>
    vector.transfer_write %zero, %t[%c0] : vector<4xf32>, memref<4xf32, strided<[1], offset: ?>, 3>
    gpu.barrier
    scf.for %k = %c0 to %c64 step %c8 {
      gpu.barrier
      %acc = vector.transfer_read %t[%c0], %pad : memref<4xf32, strided<[1], offset: ?>, 3>, vector<4xf32>
      %a = vector.transfer_read %A[%k, %c0], %pad : memref<64x4xf32, 3>, vector<4xf32>
      %s = arith.addf %acc, %a : vector<4xf32>
      vector.transfer_write %s, %t[%c0] : vector<4xf32>, memref<4xf32, strided<[1], offset: ?>, 3>
    }
    // the consumer: thread tx reads another thread's elements
    %other = affine.apply affine_map<(d0) -> ((d0 * 4 + 4) mod 64)>(%tx)
    %u = memref.subview %tile[%other] [4] [1] : memref<64xf32, 3> to memref<4xf32, strided<[1], offset: ?>, 3>
    %v = vector.transfer_read %u[%c0], %pad : memref<4xf32, strided<[1], offset: ?>, 3>, vector<4xf32>
    %o = memref.subview %out[%mine] [4] [1] : memref<64xf32> to memref<4xf32, strided<[1], offset: ?>>
    vector.transfer_write %v, %o[%c0] : vector<4xf32>, memref<4xf32, strided<[1], offset: ?>>
    gpu.terminator
  }
  return
}

// -----

// Two register tiles on one view at their own indices (a guarded row of a ragged output tile that
// two virtual-thread chunks share, each at its columns): both pairs leave the loop. A view with a
// read at indices it never writes keeps its accesses in the loop.
// CHECK-LABEL: func.func @row_chunks
// CHECK-SAME: (%[[C:.*]]: memref<1000x1000xf32>, %{{.*}}: memref<64x4xf32, 3>, %[[R:.*]]: index, %[[I:.*]]: index, %[[J:.*]]: index)
// CHECK: %[[ROW:.*]] = memref.subview %[[C]][%[[R]], 0] [1, 1000]
// CHECK-NEXT: %[[A0:.*]] = vector.transfer_read %[[ROW]][%[[I]]]
// CHECK-NEXT: %[[B0:.*]] = vector.transfer_read %[[ROW]][%[[J]]]
// CHECK-NEXT: %[[RES:.*]]:2 = scf.for %{{.*}} iter_args(%[[A:.*]] = %[[A0]], %[[B:.*]] = %[[B0]]) -> (vector<4xf32>, vector<4xf32>) {
// CHECK-NOT: %[[ROW]]
// CHECK: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: vector.transfer_write %[[RES]]#0, %[[ROW]][%[[I]]]
// CHECK-NEXT: vector.transfer_write %[[RES]]#1, %[[ROW]][%[[J]]]
// CHECK: %[[ROW2:.*]] = memref.subview %[[C]][%[[J]], 0] [1, 1000]
// CHECK-NOT: iter_args
// CHECK: scf.for
// CHECK-NEXT: vector.transfer_read %[[ROW2]][%[[I]]]
// CHECK-NEXT: vector.transfer_read %[[ROW2]][%[[J]]]
func.func @row_chunks(%C: memref<1000x1000xf32>, %A: memref<64x4xf32, 3>, %r: index, %i: index, %j: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %row = memref.subview %C[%r, 0] [1, 1000] [1, 1] : memref<1000x1000xf32> to memref<1000xf32, strided<[1], offset: ?>>
    scf.for %k = %c0 to %c64 step %c8 {
      %a = vector.transfer_read %row[%i], %pad : memref<1000xf32, strided<[1], offset: ?>>, vector<4xf32>
      %b = vector.transfer_read %row[%j], %pad : memref<1000xf32, strided<[1], offset: ?>>, vector<4xf32>
      %x = vector.transfer_read %A[%k, %c0], %pad {in_bounds = [true]} : memref<64x4xf32, 3>, vector<4xf32>
      %s = arith.addf %a, %x : vector<4xf32>
      %t = arith.mulf %b, %x : vector<4xf32>
      vector.transfer_write %s, %row[%i] : vector<4xf32>, memref<1000xf32, strided<[1], offset: ?>>
      vector.transfer_write %t, %row[%j] : vector<4xf32>, memref<1000xf32, strided<[1], offset: ?>>
    }
    %row2 = memref.subview %C[%j, 0] [1, 1000] [1, 1] : memref<1000x1000xf32> to memref<1000xf32, strided<[1], offset: ?>>
    scf.for %k = %c0 to %c64 step %c8 {
      %a = vector.transfer_read %row2[%i], %pad : memref<1000xf32, strided<[1], offset: ?>>, vector<4xf32>
      %b = vector.transfer_read %row2[%j], %pad : memref<1000xf32, strided<[1], offset: ?>>, vector<4xf32>
      %s = arith.addf %a, %b : vector<4xf32>
      vector.transfer_write %s, %row2[%i] : vector<4xf32>, memref<1000xf32, strided<[1], offset: ?>>
    }
    gpu.terminator
  }
  return
}

// RUN: %ansor-opt %s -split-input-file -allow-unregistered-dialect -ansor-auto-unroll=max-unrolled-work=64 \
// RUN:   -canonicalize | FileCheck %s
// RUN: %ansor-opt %s -split-input-file -allow-unregistered-dialect -ansor-auto-unroll -canonicalize \
// RUN:   | FileCheck %s --check-prefix=NOCAP

// max-unrolled-work caps the size of the unrolled code (what it becomes as scalar GPU code), not
// Ansor's work (iterations). Without the cap (the CPU pipeline) only the work counts: every loop
// below has work <= its max step and unrolls whole (NOCAP).

// A reduction step the way the CUDA sketch leaves it: copy a tile to shared memory, barrier,
// vector<4xf32> FMAs, barrier. Work of %k = 16 * 2 = 32 <= 64, but each step is 15 instructions
// (an index multiply, 2 copy accesses, 2 barriers, the inner loop's 2 * (a shared read + 4 FMAs)):
// size 240 > 64, so %k stays a loop and only the barrier-free inner loop unrolls (size 10).
// Counted as work, a 576-step loop of this shape unrolled into a CUDA kernel of 1729 barriers and
// ~108K lines.
// CHECK-LABEL: func.func @reduction_step_with_barriers
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK-COUNT-2: vector.fma
// CHECK: gpu.barrier
// CHECK-NOT: vector.fma
// CHECK-NOT: scf.for
// NOCAP-LABEL: func.func @reduction_step_with_barriers
// NOCAP-NOT: scf.for
// NOCAP-COUNT-32: gpu.barrier
// NOCAP-NOT: gpu.barrier
func.func @reduction_step_with_barriers(%g: memref<64xf32>, %acc0: vector<4xf32>) -> vector<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  %f0 = arith.constant 0.0 : f32
  %shared = memref.alloca() : memref<4xf32, 3>
  %r = scf.for %k = %c0 to %c16 step %c1 iter_args(%acc = %acc0) -> vector<4xf32> {
    %off = arith.muli %k, %c4 : index
    %tile = vector.transfer_read %g[%off], %f0 {in_bounds = [true]} : memref<64xf32>, vector<4xf32>
    vector.transfer_write %tile, %shared[%c0] {in_bounds = [true]} : vector<4xf32>, memref<4xf32, 3>
    gpu.barrier
    %s = scf.for %j = %c0 to %c2 step %c1 iter_args(%a = %acc) -> vector<4xf32> {
      %x = vector.transfer_read %shared[%c0], %f0 {in_bounds = [true]} : memref<4xf32, 3>, vector<4xf32>
      %f = vector.fma %x, %x, %a : vector<4xf32>
      scf.yield %f : vector<4xf32>
    }
    gpu.barrier
    scf.yield %s : vector<4xf32>
  } {ansor.auto_unroll_max_step = 64 : i64}
  return %r : vector<4xf32>
}

// -----

// Vector arithmetic weighs its elements (NVPTX has no f32 vector arithmetic): 8 steps of a
// vector<16xf32> fma are size 128 > 64 and stay a loop; of a vector<4xf32> fma, size 32, unroll.
// CHECK-LABEL: func.func @wide_fma
// CHECK: scf.for
// CHECK-LABEL: func.func @narrow_fma
// CHECK-NOT: scf.for
// CHECK-COUNT-8: vector.fma
// NOCAP-LABEL: func.func @wide_fma
// NOCAP-NOT: scf.for
// NOCAP-COUNT-8: vector.fma
func.func @wide_fma(%v: vector<16xf32>) -> vector<16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %r = scf.for %i = %c0 to %c8 step %c1 iter_args(%a = %v) -> vector<16xf32> {
    %f = vector.fma %v, %v, %a : vector<16xf32>
    scf.yield %f : vector<16xf32>
  } {ansor.auto_unroll_max_step = 8 : i64}
  return %r : vector<16xf32>
}
func.func @narrow_fma(%v: vector<4xf32>) -> vector<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %r = scf.for %i = %c0 to %c8 step %c1 iter_args(%a = %v) -> vector<4xf32> {
    %f = vector.fma %v, %v, %a : vector<4xf32>
    scf.yield %f : vector<4xf32>
  } {ansor.auto_unroll_max_step = 8 : i64}
  return %r : vector<4xf32>
}

// -----

// A transfer weighs the memory instructions it becomes: a vector<2x8xf32> read of contiguous rows
// is 2 rows x 2 loads of 128 bits (8 steps of it, an index multiply and a use: 8 * (4 + 2) = 48,
// unrolled); from a memref with innermost stride 2 it is 16 scalar loads (8 * (16 + 2) = 144 > 64,
// a loop). Their work is 8 * 2 rows = 16, the max step.
// CHECK-LABEL: func.func @contiguous_rows
// CHECK-NOT: scf.for
// CHECK-COUNT-8: "use.it"
// CHECK-LABEL: func.func @strided_rows
// CHECK: scf.for
// CHECK-COUNT-1: "use.it"
// CHECK-NOT: "use.it"
// NOCAP-LABEL: func.func @strided_rows
// NOCAP-NOT: scf.for
// NOCAP-COUNT-8: "use.it"
func.func @contiguous_rows(%m: memref<16x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %f0 = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c8 step %c1 {
    %row = arith.muli %i, %c2 : index
    %t = vector.transfer_read %m[%row, %c0], %f0 {in_bounds = [true, true]} : memref<16x8xf32>, vector<2x8xf32>
    %e = vector.extract %t[1, 7] : f32 from vector<2x8xf32>
    "use.it"(%e) : (f32) -> ()
  } {ansor.auto_unroll_max_step = 16 : i64}
  return
}
func.func @strided_rows(%m: memref<16x8xf32, strided<[16, 2]>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %f0 = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c8 step %c1 {
    %row = arith.muli %i, %c2 : index
    %t = vector.transfer_read %m[%row, %c0], %f0 {in_bounds = [true, true]} : memref<16x8xf32, strided<[16, 2]>>, vector<2x8xf32>
    %e = vector.extract %t[1, 7] : f32 from vector<2x8xf32>
    "use.it"(%e) : (f32) -> ()
  } {ansor.auto_unroll_max_step = 16 : i64}
  return
}

// -----

// Constants, views and moves between vector registers cost nothing: 32 steps of a subview, a
// broadcast, an extract and one use are size 32 <= 64 (counted by elements they would be 192).
// CHECK-LABEL: func.func @free_ops
// CHECK-NOT: scf.for
// CHECK-COUNT-32: "use.it"
func.func @free_ops(%m: memref<32xf32>, %x: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  scf.for %i = %c0 to %c32 step %c1 {
    %sv = memref.subview %m[%i] [1] [1] : memref<32xf32> to memref<1xf32, strided<[1], offset: ?>>
    %b = vector.broadcast %x : f32 to vector<4xf32>
    %e = vector.extract %b[1] : f32 from vector<4xf32>
    "use.it"(%sv, %e) : (memref<1xf32, strided<[1], offset: ?>>, f32) -> ()
  } {ansor.auto_unroll_max_step = 32 : i64}
  return
}

// -----

// A linalg op left in a body weighs its iterations times a load or store per operand: a copy of
// 8 elements is 16 per step, 8 steps are 128 > 64 (its work, 8 * 8 = 64, fits the max step).
// CHECK-LABEL: func.func @linalg_copy
// CHECK: scf.for
// CHECK-COUNT-1: linalg.copy
// CHECK-NOT: linalg.copy
// NOCAP-LABEL: func.func @linalg_copy
// NOCAP-NOT: scf.for
// NOCAP-COUNT-8: linalg.copy
func.func @linalg_copy(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    linalg.copy ins(%a : memref<8xf32>) outs(%b : memref<8xf32>)
  } {ansor.auto_unroll_max_step = 64 : i64}
  return
}

// -----

// vector.contract weighs its multiply-adds (4 x 4 x 8 = 128 a step: 2 steps are 256 > 64, a loop;
// by its widest operand, 32, they would be 64 and unroll); a vector.load of 16 contiguous f32 is
// 4 accesses of 128 bits (8 steps of it, an index multiply and a use: 8 * 6 = 48, unrolled; by
// elements, 8 * 18 = 144).
// CHECK-LABEL: func.func @contract
// CHECK: scf.for
// CHECK-COUNT-1: vector.contract
// CHECK-NOT: vector.contract
// CHECK-LABEL: func.func @wide_load
// CHECK-NOT: scf.for
// CHECK-COUNT-8: vector.load
// NOCAP-LABEL: func.func @contract
// NOCAP-NOT: scf.for
// NOCAP-COUNT-2: vector.contract
#lhs = affine_map<(m, n, k) -> (m, k)>
#rhs = affine_map<(m, n, k) -> (k, n)>
#acc = affine_map<(m, n, k) -> (m, n)>
func.func @contract(%a: vector<4x8xf32>, %b: vector<8x4xf32>, %c0v: vector<4x4xf32>) -> vector<4x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %r = scf.for %i = %c0 to %c2 step %c1 iter_args(%acc = %c0v) -> vector<4x4xf32> {
    %d = vector.contract {indexing_maps = [#lhs, #rhs, #acc], iterator_types = ["parallel", "parallel", "reduction"],
                          kind = #vector.kind<add>} %a, %b, %acc : vector<4x8xf32>, vector<8x4xf32> into vector<4x4xf32>
    scf.yield %d : vector<4x4xf32>
  } {ansor.auto_unroll_max_step = 8 : i64}
  return %r : vector<4x4xf32>
}
func.func @wide_load(%m: memref<128xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %off = arith.muli %i, %c16 : index
    %v = vector.load %m[%off] : memref<128xf32>, vector<16xf32>
    %e = vector.extract %v[3] : f32 from vector<16xf32>
    "use.it"(%e) : (f32) -> ()
  } {ansor.auto_unroll_max_step = 8 : i64}
  return
}

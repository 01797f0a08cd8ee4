// RUN: %ansor-opt %s -split-input-file -ansor-feature-cleanup | FileCheck %s
// RUN: %ansor-opt %s -split-input-file -ansor-feature-cleanup -ansor-extract-features \
// RUN:   | FileCheck %s --check-prefix=FEAT

// Single-iteration loops (an scf.forall with unit dims only, an scf.for of one step) are
// inlined; the zero-fill written into the reduction's tile is then forwarded to its read.
// CHECK-LABEL: func.func @unit_loops
// CHECK-NOT: scf.forall
// CHECK-NOT: scf.for
// CHECK-NOT: vector.transfer_read %{{.*}} : tensor<4xf32>
// CHECK: vector.multi_reduction <add>
// FEAT: // stmt 0 (vector.transfer_write):
// FEAT-NOT: num_loops
// FEAT-NOT: // stmt 1
func.func @unit_loops(%x: tensor<4x8xf32>, %init: tensor<4xf32>) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %pad = arith.constant 0.0 : f32
  %zero = arith.constant dense<0.0> : vector<4xf32>
  %r = scf.forall (%i) in (1) shared_outs(%o = %init) -> (tensor<4xf32>) {
    %s = scf.for %k = %c0 to %c1 step %c1 iter_args(%acc = %o) -> (tensor<4xf32>) {
      %w = vector.transfer_write %zero, %acc[%c0] {in_bounds = [true]} : vector<4xf32>, tensor<4xf32>
      %v = vector.transfer_read %x[%c0, %c0], %pad {in_bounds = [true, true]} : tensor<4x8xf32>, vector<4x8xf32>
      %a = vector.transfer_read %w[%c0], %pad {in_bounds = [true]} : tensor<4xf32>, vector<4xf32>
      %m = vector.multi_reduction <add>, %v, %a [1] : vector<4x8xf32> to vector<4xf32>
      %w2 = vector.transfer_write %m, %w[%c0] {in_bounds = [true]} : vector<4xf32>, tensor<4xf32>
      scf.yield %w2 : tensor<4xf32>
    }
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %s into %o[0] [4] [1] : tensor<4xf32> into tensor<4xf32>
    }
  }
  return %r : tensor<4xf32>
}

// -----

// Loops that run more than once stay, and so do unit dims of a forall with other dims (the
// feature extractor skips those itself).
// CHECK-LABEL: func.func @real_loops
// CHECK: scf.forall (%{{.*}}, %{{.*}}) in (1, 2)
// CHECK: scf.for
// FEAT: // stmt 0 (vector.transfer_write):
// FEAT-SAME: par_num=1 par_prod=2
// FEAT-SAME: num_loops=2
func.func @real_loops(%x: tensor<2x8xf32>, %init: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %pad = arith.constant 0.0 : f32
  %r = scf.forall (%u, %i) in (1, 2) shared_outs(%o = %init) -> (tensor<2x8xf32>) {
    %row = tensor.extract_slice %o[%i, 0] [1, 8] [1, 1] : tensor<2x8xf32> to tensor<1x8xf32>
    %s = scf.for %k = %c0 to %c8 step %c1 iter_args(%acc = %row) -> (tensor<1x8xf32>) {
      %v = vector.transfer_read %x[%i, %k], %pad {in_bounds = [true]} : tensor<2x8xf32>, vector<1xf32>
      %w = vector.transfer_write %v, %acc[%c0, %k] {in_bounds = [true]} : vector<1xf32>, tensor<1x8xf32>
      scf.yield %w : tensor<1x8xf32>
    }
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %s into %o[%i, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<2x8xf32>
    }
  }
  return %r : tensor<2x8xf32>
}

// -----

// The marks a cached script prefix leaves on the payload ops it hands over (`ansor.prefix.*`)
// are removed; other discardable attributes stay.
// CHECK-LABEL: func.func @prefix_marks
// CHECK: linalg.fill {ansor.op = 0 : i64} ins
// CHECK-NOT: ansor.prefix
// CHECK: return
func.func @prefix_marks(%init: tensor<4xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill {ansor.op = 0 : i64, ansor.prefix.c12.h0} ins(%zero : f32) outs(%init : tensor<4xf32>) -> tensor<4xf32>
  return %f : tensor<4xf32>
}

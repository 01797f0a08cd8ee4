// RUN: %ansor-opt %s -ansor-gpu-promote-single-iteration-loops | FileCheck %s

// One-iteration loops (what convert-vector-to-scf leaves) become their body, their iter_args
// and results forwarded; a loop of two iterations, or of an unknown trip count, stays.
// CHECK-LABEL: func.func @loops
// CHECK-SAME: (%[[A:.*]]: memref<4xf32>, %[[N:.*]]: index, %[[X:.*]]: f32)
// CHECK-NOT: scf.for %{{.*}} = %c0 to %c1
// CHECK: %[[S:.*]] = arith.addf %[[X]], %[[X]] : f32
// CHECK: memref.store %[[S]], %[[A]][%c0]
// CHECK: scf.for %{{.*}} = %c0 to %c2 step %c1
// CHECK: scf.for %{{.*}} = %c0 to %[[N]] step %c1
// CHECK: return %[[S]]
func.func @loops(%a: memref<4xf32>, %n: index, %x: f32) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %r = scf.for %i = %c0 to %c1 step %c1 iter_args(%acc = %x) -> (f32) {
    %s = arith.addf %acc, %x : f32
    scf.for %j = %c0 to %c1 step %c1 {
      memref.store %s, %a[%j] : memref<4xf32>
    }
    scf.yield %s : f32
  }
  scf.for %k = %c0 to %c2 step %c1 {
    memref.store %x, %a[%k] : memref<4xf32>
  }
  scf.for %k = %c0 to %n step %c1 {
    memref.store %x, %a[%c1] : memref<4xf32>
  }
  return %r : f32
}

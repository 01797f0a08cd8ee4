// RUN: %ansor-opt %s -ansor-gpu-sink-constants | FileCheck %s

// Constants (and ub.poison) used inside the launch are cloned at the start of its body, one
// clone per value and type, in the order of their first use in a post-order walk (the
// store inside the loop before the loop's bounds); the launch's own
// operands (grid and block sizes) and a use outside the launch keep the outer constant; an
// inner constant is not touched.
// CHECK-LABEL: func.func @sink
// CHECK: %[[C1:.*]] = arith.constant 1 : index
// CHECK: %[[C8:.*]] = arith.constant 8 : index
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %[[C1]], {{.*}} = %[[C1]], {{.*}} = %[[C1]])
// CHECK-NEXT: %[[P:.*]] = ub.poison : f32
// CHECK-NEXT: %[[K0:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[K8:.*]] = arith.constant 8 : index
// CHECK-NEXT: %[[K1:.*]] = arith.constant 1 : index
// CHECK-NEXT: %[[I:.*]] = arith.constant 2.0
// CHECK-NEXT: scf.for %{{.*}} = %[[K0]] to %[[K8]] step %[[K1]]
// CHECK-NEXT: memref.store %[[P]], %{{.*}}[%[[K0]]]
// CHECK-NEXT: memref.store %[[I]]
// CHECK: memref.store %[[P]], %{{.*}}[%[[K1]]]
// CHECK: gpu.terminator
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[C8]]]
func.func @sink(%m: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %p = ub.poison : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %two = arith.constant 2.0 : f32
    scf.for %i = %c0 to %c8 step %c1 {
      memref.store %p, %m[%c0] : memref<16xf32>
      memref.store %two, %m[%i] : memref<16xf32>
    }
    memref.store %p, %m[%c1] : memref<16xf32>
    gpu.terminator
  }
  %f = arith.constant 1.0 : f32
  memref.store %f, %m[%c8] : memref<16xf32>
  return
}

// A constant global (a task's weight) read in the launch: its get_global is cloned into the
// launch (outlining then copies the global into the GPU module); a mutable global is not.
memref.global "private" constant @w : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
memref.global "private" @state : memref<4xf32> = dense<0.0>
// CHECK-LABEL: func.func @weights
// CHECK: %[[S:.*]] = memref.get_global @state
// CHECK: gpu.launch
// CHECK: %[[W:.*]] = memref.get_global @w : memref<4xf32>
// CHECK: memref.load %[[W]]
// CHECK: memref.load %[[S]]
func.func @weights(%out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %w = memref.get_global @w : memref<4xf32>
  %s = memref.get_global @state : memref<4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1) threads(%tx, %ty, %tz) in (%u = %c1, %v = %c1, %w2 = %c1) {
    %a = memref.load %w[%c0] : memref<4xf32>
    %b = memref.load %s[%c0] : memref<4xf32>
    %c = arith.addf %a, %b : f32
    memref.store %c, %out[%c0] : memref<4xf32>
    gpu.terminator
  }
  return
}

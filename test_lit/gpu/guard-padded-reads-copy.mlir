// RUN: ansor-opt %s --ansor-gpu-guard-padded-reads | FileCheck %s

// A linalg.copy reading a padded buffer (a whole tile copied to shared memory by each thread)
// becomes loops first; their loads are guarded like any other read.
// CHECK-LABEL: func.func @copy_reader(
// CHECK-SAME: %[[SRC:[a-z0-9]+]]: memref<3x5xf32>
// CHECK-NOT: memref.alloc()
// CHECK-NOT: linalg.copy
// CHECK: scf.for
// CHECK: scf.for
// CHECK: %[[X:.*]] = memref.load %[[SRC]][%{{.*}}, %{{.*}}] : memref<3x5xf32>
// CHECK: %[[V:.*]] = arith.select %{{.*}}, %[[X]], %{{.*}} : f32
// CHECK: memref.store %[[V]], %{{.*}} : memref<4x8xf32, 3>
func.func @copy_reader(%src: memref<3x5xf32>, %dst: memref<4x8xf32, 3>) {
  %z = arith.constant 0.0 : f32
  %buf = memref.alloc() : memref<4x8xf32>
  linalg.fill ins(%z : f32) outs(%buf : memref<4x8xf32>)
  %in = memref.subview %buf[0, 0] [3, 5] [1, 1] : memref<4x8xf32> to memref<3x5xf32, strided<[8, 1]>>
  memref.copy %src, %in : memref<3x5xf32> to memref<3x5xf32, strided<[8, 1]>>
  linalg.copy ins(%buf : memref<4x8xf32>) outs(%dst : memref<4x8xf32, 3>)
  return
}

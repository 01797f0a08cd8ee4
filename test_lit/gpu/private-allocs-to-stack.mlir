// RUN: %ansor-opt %s -split-input-file -ansor-gpu-private-allocs-to-stack | FileCheck %s
// RUN: %ansor-opt %s -split-input-file -ansor-gpu-private-allocs-to-stack=max-bytes=2048 | FileCheck %s --check-prefix=BIG

// A small per-thread buffer in a kernel goes to the stack (its dealloc with it); a buffer over
// the limit, a shared one and one outside the kernel stay.
// CHECK-LABEL: func.func @private
// CHECK: memref.alloc() : memref<2xf32>
// CHECK: gpu.launch
// CHECK-NEXT: %[[S:.*]] = memref.alloca() : memref<4xf32>
// CHECK-NEXT: memref.store %{{.*}}, %[[S]]
// CHECK-NEXT: %[[V:.*]] = memref.alloca() : memref<2xvector<4xf32>>
// CHECK-NEXT: %[[L:.*]] = memref.alloc() : memref<512xf32>
// CHECK-NEXT: %[[W:.*]] = memref.alloc() : memref<4xf32, 3>
// CHECK-NOT: memref.dealloc %[[S]]
// CHECK: memref.dealloc %[[L]]
// CHECK-NEXT: gpu.terminator
// BIG-LABEL: func.func @private
// BIG: memref.alloca() : memref<4xf32>
// BIG: memref.alloca() : memref<512xf32>
// BIG: memref.alloc() : memref<4xf32, 3>
func.func @private(%v: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %outside = memref.alloc() : memref<2xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %s = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
    memref.store %v, %s[%c0] : memref<4xf32>
    %vec = memref.alloc() : memref<2xvector<4xf32>>
    %large = memref.alloc() : memref<512xf32>
    %shared = memref.alloc() : memref<4xf32, 3>
    memref.dealloc %s : memref<4xf32>
    memref.dealloc %large : memref<512xf32>
    gpu.terminator
  }
  return
}

// -----

// A thread-private i1 buffer (a ragged reduction's mask) is stored as i8: MLIR 22's
// memref-to-LLVM lowering asserts on a memref.load of i1. Writes widen, reads narrow.
// CHECK-LABEL: func.func @mask
// CHECK: gpu.launch
// CHECK: %[[M:.*]] = memref.alloca() : memref<1xi8>
// CHECK: %[[W:.*]] = arith.extui %{{.*}} : i1 to i8
// CHECK: memref.store %[[W]], %[[M]][%c0] : memref<1xi8>
// CHECK: %[[L:.*]] = memref.load %[[M]][%c0] : memref<1xi8>
// CHECK: %[[B:.*]] = arith.trunci %[[L]] : i8 to i1
// CHECK: arith.select %[[B]]
// CHECK-NOT: memref<1xi1>
func.func @mask(%v: f32, %t: index, %out: memref<1xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c97 = arith.constant 97 : index
  %z = arith.constant 0.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %m = memref.alloc() : memref<1xi1>
    %in = arith.cmpi ult, %t, %c97 : index
    memref.store %in, %m[%c0] : memref<1xi1>
    %b = memref.load %m[%c0] : memref<1xi1>
    %s = arith.select %b, %v, %z : f32
    memref.store %s, %out[%c0] : memref<1xf32>
    memref.dealloc %m : memref<1xi1>
    gpu.terminator
  }
  return
}

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

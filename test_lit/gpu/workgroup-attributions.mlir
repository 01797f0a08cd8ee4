// RUN: %ansor-opt %s -split-input-file -verify-diagnostics -ansor-gpu-workgroup-attributions | FileCheck %s

// Two cached tiles become workgroup attributions in memory space 3, in program order (the
// nested one too); the one spelled `3` is used directly, the `#gpu.address_space<workgroup>`
// one through a memory_space_cast; their deallocs go. A private buffer and one outside the
// kernel stay.
// CHECK-LABEL: func.func @tiles
// CHECK: memref.alloc() {ansor.smem} : memref<8xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.launch
// CHECK-SAME: workgroup(%[[A:.*]] : memref<16x16xf32, 3>, %[[B:.*]] : memref<4xf16, 3>)
// CHECK-NEXT: %[[C:.*]] = memref.memory_space_cast %[[A]] : memref<16x16xf32, 3> to memref<16x16xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT: memref.store %{{.*}}, %[[C]]
// CHECK-NEXT: %[[P:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT: scf.for
// CHECK-NEXT: memref.store %{{.*}}, %[[B]]
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.dealloc %[[A]]
// CHECK-NOT: memref.dealloc %[[B]]
// CHECK: memref.dealloc %[[P]]
// CHECK-NEXT: gpu.terminator
func.func @tiles(%v: f32, %h: f16) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %outside = memref.alloc() {ansor.smem} : memref<8xf32, #gpu.address_space<workgroup>>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %a = memref.alloc() {ansor.smem} : memref<16x16xf32, #gpu.address_space<workgroup>>
    memref.store %v, %a[%c0, %c0] : memref<16x16xf32, #gpu.address_space<workgroup>>
    %p = memref.alloc() : memref<4xf32>
    scf.for %i = %c0 to %c2 step %c1 {
      %b = memref.alloc() {ansor.smem} : memref<4xf16, 3>
      memref.store %h, %b[%i] : memref<4xf16, 3>
      memref.dealloc %b : memref<4xf16, 3>
    }
    memref.dealloc %a : memref<16x16xf32, #gpu.address_space<workgroup>>
    memref.dealloc %p : memref<4xf32>
    gpu.terminator
  }
  return
}

// -----

// Negative: a launch without shared allocations is left alone (no attribute added).
// CHECK-LABEL: func.func @none
// CHECK: gpu.launch blocks
// CHECK-NOT: workgroup(
// CHECK: memref.alloc() : memref<4xf32>
// CHECK-NOT: workgroup_attributions
func.func @none() {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %p = memref.alloc() : memref<4xf32>
    gpu.terminator
  }
  return
}

// -----

// A shared buffer that is not a cached tile is an error.
func.func @per_thread() {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    // expected-error @+1 {{per-thread buffer memref<4xf32, 3> in shared memory (not a cached tile)}}
    %p = memref.alloc() : memref<4xf32, 3>
    gpu.terminator
  }
  return
}

// -----

// A dynamic shared allocation is an error.
func.func @dynamic(%n: index) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    // expected-error @+1 {{dynamic shared-memory allocation memref<?xf32, 3>}}
    %p = memref.alloc(%n) {ansor.smem} : memref<?xf32, 3>
    gpu.terminator
  }
  return
}

// -----

// A copy into a shared tile at the block level (every thread copies the whole tile: a block's
// accumulator tile whose old contents bufferization copied in) gets a barrier before the threads
// write their parts (the grouped conv + BN race, results/gpu-tests/gconv-diag-2dfee8e.txt); a copy
// already followed by a barrier, and one inside a thread's loop, get none.
// CHECK-LABEL: func.func @copy_in
// CHECK: gpu.launch
// CHECK: linalg.copy
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: memref.store
// CHECK: memref.copy
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: memref.load
// CHECK: scf.for
// CHECK-NEXT: memref.copy
// CHECK-NEXT: }
// CHECK-NOT: gpu.barrier
// CHECK: gpu.terminator
func.func @copy_in(%src: memref<4x4xf32>, %v: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c2, %sy = %c1, %sz = %c1) {
    %a = memref.alloc() {ansor.smem} : memref<4x4xf32, 3>
    linalg.copy ins(%src : memref<4x4xf32>) outs(%a : memref<4x4xf32, 3>)
    memref.store %v, %a[%tx, %c0] : memref<4x4xf32, 3>
    %b = memref.alloc() {ansor.smem} : memref<4x4xf32, 3>
    memref.copy %src, %b : memref<4x4xf32> to memref<4x4xf32, 3>
    gpu.barrier
    %x = memref.load %b[%tx, %c0] : memref<4x4xf32, 3>
    scf.for %i = %c0 to %c2 step %c1 {
      memref.copy %src, %a : memref<4x4xf32> to memref<4x4xf32, 3>
    }
    gpu.terminator
  }
  return
}

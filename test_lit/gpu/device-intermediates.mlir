// RUN: ansor-opt %s --split-input-file --ansor-gpu-device-intermediates | FileCheck %s
// RUN: ansor-opt %s --split-input-file --ansor-gpu-device-intermediates=workspace=false | FileCheck %s --check-prefix=PERCALL

// A buffer between two launches (a task of several kernels): a trailing argument of the public
// function, the caller's workspace; no allocation in the function (per call: a device allocation
// freed before the return).
// CHECK-LABEL: func.func @between
// CHECK-SAME: (%[[A:.*]]: memref<8xf32>, %[[OUT:.*]]: memref<8xf32>, %[[BUF:.*]]: memref<8xf32>)
// CHECK-SAME: attributes {ansor.workspace = 1 : i64}
// CHECK-NOT: alloc
// CHECK: gpu.launch
// CHECK: memref.store %{{.*}}, %[[BUF]]
// CHECK: gpu.launch
// CHECK: memref.load %[[BUF]]
// CHECK-NOT: dealloc
// CHECK: return
// PERCALL-LABEL: func.func @between
// PERCALL-SAME: (%[[A:.*]]: memref<8xf32>, %[[OUT:.*]]: memref<8xf32>)
// PERCALL-NOT: memref.alloc
// PERCALL: %[[T0:.*]] = gpu.wait async
// PERCALL: %[[BUF:.*]], %[[T1:.*]] = gpu.alloc async [%[[T0]]] () : memref<8xf32>
// PERCALL: gpu.wait [%[[T1]]]
// PERCALL: gpu.launch
// PERCALL: memref.store %{{.*}}, %[[BUF]]
// PERCALL: gpu.launch
// PERCALL: memref.load %[[BUF]]
// PERCALL: %[[T2:.*]] = gpu.wait async
// PERCALL: %[[T3:.*]] = gpu.dealloc async [%[[T2]]] %[[BUF]] : memref<8xf32>
// PERCALL: gpu.wait [%[[T3]]]
// PERCALL-NEXT: return
func.func @between(%a: memref<8xf32>, %out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %tmp = memref.alloc() : memref<8xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1) threads(%tx, %ty, %tz) in (%u = %c1, %v = %c1, %w = %c1) {
    %v0 = memref.load %a[%c0] : memref<8xf32>
    memref.store %v0, %tmp[%c0] : memref<8xf32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1) threads(%tx, %ty, %tz) in (%u = %c1, %v = %c1, %w = %c1) {
    %v1 = memref.load %tmp[%c0] : memref<8xf32>
    memref.store %v1, %out[%c0] : memref<8xf32>
    gpu.terminator
  }
  return
}

// -----

// Its dealloc is erased (per call: becomes the device free); a view used inside the launch is
// fine. Two buffers: two trailing arguments, in allocation order.
// CHECK-LABEL: func.func @dealloc_and_view
// CHECK-SAME: (%[[OUT:.*]]: memref<4xf32>, %[[BUF:.*]]: memref<8xf32>, %[[BUF2:.*]]: memref<2xf32>)
// CHECK-SAME: attributes {ansor.workspace = 2 : i64}
// CHECK: memref.subview %[[BUF]]
// CHECK: gpu.launch
// CHECK: memref.store %{{.*}}, %[[BUF2]]
// CHECK-NOT: dealloc
// CHECK: return
// PERCALL-LABEL: func.func @dealloc_and_view
// PERCALL: %[[BUF:.*]], %{{.*}} = gpu.alloc async
// PERCALL: memref.subview %[[BUF]]
// PERCALL: gpu.launch
// PERCALL: gpu.dealloc async [%{{.*}}] %[[BUF]]
// PERCALL-NOT: memref.dealloc
func.func @dealloc_and_view(%out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %tmp = memref.alloc() : memref<8xf32>
  %half = memref.subview %tmp[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  %two = memref.alloc() : memref<2xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1) threads(%tx, %ty, %tz) in (%u = %c1, %v = %c1, %w = %c1) {
    %v1 = memref.load %half[%c0] : memref<4xf32, strided<[1]>>
    memref.store %v1, %two[%c0] : memref<2xf32>
    memref.store %v1, %out[%c0] : memref<4xf32>
    gpu.terminator
  }
  memref.dealloc %tmp : memref<8xf32>
  return
}

// -----

// A buffer the host reads too stays a host allocation (for ansor-gpu-check-host-allocs to
// refuse); so does a function without a launch.
// CHECK-LABEL: func.func @host_use
// CHECK-SAME: (%{{.*}}: memref<8xf32>) {
// CHECK: memref.alloc() : memref<8xf32>
// CHECK-NOT: gpu.alloc
// CHECK-LABEL: func.func @no_launch
// CHECK: memref.alloc() : memref<8xf32>
func.func @host_use(%out: memref<8xf32>) {
  %c1 = arith.constant 1 : index
  %tmp = memref.alloc() : memref<8xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1) threads(%tx, %ty, %tz) in (%u = %c1, %v = %c1, %w = %c1) {
    gpu.terminator
  }
  memref.copy %tmp, %out : memref<8xf32> to memref<8xf32>
  return
}
func.func @no_launch(%out: memref<8xf32>) {
  %tmp = memref.alloc() : memref<8xf32>
  memref.copy %tmp, %out : memref<8xf32> to memref<8xf32>
  return
}

// -----

// A private function's callers cannot pass a workspace: its buffer is allocated per call.
// CHECK-LABEL: func.func private @inner
// CHECK-SAME: (%{{.*}}: memref<8xf32>) {
// CHECK: gpu.alloc async
// CHECK: gpu.launch
// CHECK: gpu.dealloc async
func.func private @inner(%out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %tmp = memref.alloc() : memref<8xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1) threads(%tx, %ty, %tz) in (%u = %c1, %v = %c1, %w = %c1) {
    %v1 = memref.load %tmp[%c0] : memref<8xf32>
    memref.store %v1, %out[%c0] : memref<8xf32>
    gpu.terminator
  }
  return
}

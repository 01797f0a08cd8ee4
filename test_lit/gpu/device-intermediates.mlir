// RUN: ansor-opt %s --split-input-file --ansor-gpu-device-intermediates | FileCheck %s

// A buffer between two launches (a task of several kernels): allocated on the device, freed
// before the return.
// CHECK-LABEL: func.func @between
// CHECK-SAME: (%[[A:.*]]: memref<8xf32>, %[[OUT:.*]]: memref<8xf32>)
// CHECK-NOT: memref.alloc
// CHECK: %[[T0:.*]] = gpu.wait async
// CHECK: %[[BUF:.*]], %[[T1:.*]] = gpu.alloc async [%[[T0]]] () : memref<8xf32>
// CHECK: gpu.wait [%[[T1]]]
// CHECK: gpu.launch
// CHECK: memref.store %{{.*}}, %[[BUF]]
// CHECK: gpu.launch
// CHECK: memref.load %[[BUF]]
// CHECK: %[[T2:.*]] = gpu.wait async
// CHECK: %[[T3:.*]] = gpu.dealloc async [%[[T2]]] %[[BUF]] : memref<8xf32>
// CHECK: gpu.wait [%[[T3]]]
// CHECK-NEXT: return
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

// Its dealloc becomes the device free; a view used inside the launch is fine.
// CHECK-LABEL: func.func @dealloc_and_view
// CHECK: %[[BUF:.*]], %{{.*}} = gpu.alloc async
// CHECK: memref.subview %[[BUF]]
// CHECK: gpu.launch
// CHECK: gpu.dealloc async [%{{.*}}] %[[BUF]]
// CHECK-NOT: memref.dealloc
func.func @dealloc_and_view(%out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %tmp = memref.alloc() : memref<8xf32>
  %half = memref.subview %tmp[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1) threads(%tx, %ty, %tz) in (%u = %c1, %v = %c1, %w = %c1) {
    %v1 = memref.load %half[%c0] : memref<4xf32, strided<[1]>>
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

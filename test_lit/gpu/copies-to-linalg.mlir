// RUN: ansor-opt %s --ansor-gpu-copies-to-linalg | FileCheck %s

// CHECK-LABEL: func.func @kernel_copy
// CHECK: gpu.launch
// CHECK-NOT: memref.copy
// CHECK: linalg.copy {cast = #linalg.type_fn<cast_signed>} ins(%{{.*}} : memref<4xf32, strided<[8]>>) outs(%{{.*}} : memref<4xf32, 3>)
// CHECK: gpu.terminator
func.func @kernel_copy(%src: memref<4xf32, strided<[8]>>) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1) threads(%tx, %ty, %tz) in (%u = %c1, %v = %c1, %w = %c1) {
    %dst = memref.alloc() : memref<4xf32, 3>
    memref.copy %src, %dst : memref<4xf32, strided<[8]>> to memref<4xf32, 3>
    gpu.terminator
  }
  return
}

// A host-side copy (outside any launch) is left alone.
// CHECK-LABEL: func.func @host_copy
// CHECK: memref.copy
// CHECK-NOT: linalg.copy
func.func @host_copy(%a: memref<4xf32>, %b: memref<4xf32>) {
  memref.copy %a, %b : memref<4xf32> to memref<4xf32>
  return
}

// RUN: not ansor-opt %s --ansor-gpu-check-host-allocs 2>&1 | FileCheck %s
// RUN: not ansor-opt %s --split-input-file --ansor-gpu-check-host-allocs 2>&1 | FileCheck %s --check-prefix=SPLIT

// CHECK: error: intermediate buffer memref<8xf32> between GPU kernels (host allocation): not supported on the cuda target
func.func @host_buffer(%a: memref<8xf32>) {
  %c1 = arith.constant 1 : index
  %tmp = memref.alloc() : memref<8xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1) threads(%tx, %ty, %tz) in (%u = %c1, %v = %c1, %w = %c1) {
    gpu.terminator
  }
  return
}

// -----

// SPLIT: error: 'linalg.fill' outside any gpu.launch (not mapped to the GPU)
func.func @host_compute(%a: memref<8xf32>) {
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%a : memref<8xf32>)
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1) threads(%tx, %ty, %tz) in (%u = %c1, %v = %c1, %w = %c1) {
    gpu.terminator
  }
  return
}

// -----

// A function without launches may allocate on the host (no error for it).
// SPLIT-NOT: error: intermediate buffer memref<4xf32>
func.func @no_kernels() {
  %t = memref.alloc() : memref<4xf32>
  return
}

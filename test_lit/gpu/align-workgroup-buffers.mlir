// RUN: ansor-opt %s --ansor-gpu-align-workgroup-buffers | FileCheck %s

// Global memref arguments and workgroup attributions get llvm.align = 16; other arguments get an
// empty dictionary; existing argument attributes are kept.
// CHECK: gpu.func @k(%{{.*}}: memref<16xf32> {llvm.align = 16 : i64, llvm.noalias}, %{{.*}}: index, %{{.*}}: memref<16xf32> {llvm.align = 16 : i64}) workgroup(%{{.*}} : memref<64xf32, 3> {llvm.align = 16 : i64})
gpu.module @m {
  gpu.func @k(%a: memref<16xf32> {llvm.noalias}, %i: index, %b: memref<16xf32>) workgroup(%s: memref<64xf32, 3>) kernel {
    gpu.return
  }
}

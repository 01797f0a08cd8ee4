// RUN: %ansor-opt %s -ansor-gpu-mark-noalias | FileCheck %s

// Pointer arguments of a kernel get llvm.noalias (existing argument attributes kept); integer
// arguments, a non-kernel device function and a host function are untouched.
// CHECK-LABEL: gpu.module @kernels
// CHECK: llvm.func @k(%{{.*}}: !llvm.ptr {llvm.align = 16 : i64, llvm.noalias}, %{{.*}}: i64, %{{.*}}: !llvm.ptr {llvm.noalias})
// CHECK: llvm.func @helper(%{{.*}}: !llvm.ptr)
// CHECK: llvm.func @host(%{{.*}}: !llvm.ptr)
module attributes {gpu.container_module} {
  gpu.module @kernels {
    llvm.func @k(%a: !llvm.ptr {llvm.align = 16 : i64}, %n: i64, %b: !llvm.ptr) attributes {gpu.kernel} {
      llvm.return
    }
    llvm.func @helper(%a: !llvm.ptr) {
      llvm.return
    }
  }
  llvm.func @host(%a: !llvm.ptr) {
    llvm.return
  }
}

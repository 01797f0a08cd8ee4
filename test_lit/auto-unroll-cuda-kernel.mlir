// RUN: %ansor-opt %s -allow-unregistered-dialect -ansor-auto-unroll=max-unrolled-work=2048 -canonicalize | FileCheck %s

// A sampled CUDA candidate of matmul-1024 (seed 1, candidate 13 of `bench.ptx_candidates`: a thread
// tile of 1x16, K steps of 2, `auto_unroll_max_step` 1024) as the CUDA lowering hands it to
// `ansor-auto-unroll{max-unrolled-work=2048}`. The K loop's work is 512 * 2 = 1024, within the max
// step and, counted as work, within the cap: it unrolled into 1537 barriers and took 43 s to PTX
// (38.7 s in a barrier pass, since made linear). Counted as code, a step is ~67 instructions (the
// two shared-memory copies, three barriers, the accumulator's read and write, two steps of 16
// FMAs), 512 steps ~34K > 2048: the K loop stays a loop and only the inner 2-step loop unrolls.
// CHECK-LABEL: func.func @matmul
// CHECK: gpu.launch
// CHECK: gpu.barrier
// CHECK: scf.for
// CHECK-COUNT-2: gpu.barrier
// CHECK-COUNT-2: vector.fma
// CHECK: gpu.barrier
// CHECK-NEXT: }
// CHECK-NOT: gpu.barrier
// CHECK-NOT: scf.for
// CHECK: gpu.terminator
#map = affine_map<()[s0] -> (s0 * 2)>
#map1 = affine_map<()[s0] -> (s0 * 256)>
#map2 = affine_map<()[s0] -> (s0 * 16)>
#map3 = affine_map<()[s0, s1] -> (s0 + s1 * 16)>
#map4 = affine_map<()[s0, s1] -> (s0 * 8 + s1 * 128)>
module {
  func.func @matmul(%arg0: memref<1024x1024xf32>, %arg1: memref<1024x1024xf32>, %arg2: memref<1024x1024xf32>) attributes {llvm.emit_c_interface} {
    %c512 = arith.constant 512 : index
    %c4 = arith.constant 4 : index
    %c16 = arith.constant 16 : index
    %c2 = arith.constant 2 : index
    %c1024 = arith.constant 1024 : index
    %cst = arith.constant dense<0.000000e+00> : vector<1x16xf32>
    %0 = ub.poison : f32
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %cst_0 = arith.constant 0.000000e+00 : f32
    gpu.launch blocks(%arg3, %arg4, %arg5) in (%arg9 = %c4, %arg10 = %c512, %arg11 = %c1) threads(%arg6, %arg7, %arg8) in (%arg12 = %c16, %arg13 = %c2, %arg14 = %c1) workgroup(%arg15 : memref<2x2xf32, 3>, %arg16 : memref<2x256xf32, 3>) {
      %block_id_x = gpu.block_id  x
      %block_id_y = gpu.block_id  y
      %1 = affine.apply #map()[%block_id_y]
      %2 = affine.apply #map1()[%block_id_x]
      %subview = memref.subview %arg0[%1, 0] [2, 1024] [1, 1] : memref<1024x1024xf32> to memref<2x1024xf32, strided<[1024, 1], offset: ?>>
      %subview_1 = memref.subview %arg1[0, %2] [1024, 256] [1, 1] : memref<1024x1024xf32> to memref<1024x256xf32, strided<[1024, 1], offset: ?>>
      %subview_2 = memref.subview %arg2[%1, %2] [2, 256] [1, 1] : memref<1024x1024xf32> to memref<2x256xf32, strided<[1024, 1], offset: ?>>
      %thread_id_x = gpu.thread_id  x
      %thread_id_y = gpu.thread_id  y
      %3 = affine.apply #map2()[%thread_id_x]
      %subview_3 = memref.subview %subview_2[%thread_id_y, %3] [1, 16] [1, 1] : memref<2x256xf32, strided<[1024, 1], offset: ?>> to memref<1x16xf32, strided<[1024, 1], offset: ?>>
      vector.transfer_write %cst, %subview_3[%c0, %c0] {in_bounds = [true, true]} : vector<1x16xf32>, memref<1x16xf32, strided<[1024, 1], offset: ?>>
      gpu.barrier
      scf.for %arg17 = %c0 to %c1024 step %c2 {
        %subview_4 = memref.subview %subview[0, %arg17] [2, 2] [1, 1] : memref<2x1024xf32, strided<[1024, 1], offset: ?>> to memref<2x2xf32, strided<[1024, 1], offset: ?>>
        %subview_5 = memref.subview %subview_1[%arg17, 0] [2, 256] [1, 1] : memref<1024x256xf32, strided<[1024, 1], offset: ?>> to memref<2x256xf32, strided<[1024, 1], offset: ?>>
        %4 = affine.apply #map3()[%thread_id_x, %thread_id_y]
        %5 = arith.cmpi ult, %4, %c2 : index
        scf.if %5 {
          %subview_10 = memref.subview %subview_4[%4, 0] [1, 2] [1, 1] : memref<2x2xf32, strided<[1024, 1], offset: ?>> to memref<1x2xf32, strided<[1024, 1], offset: ?>>
          %10 = vector.transfer_read %subview_10[%c0, %c0], %cst_0 {in_bounds = [true, true]} : memref<1x2xf32, strided<[1024, 1], offset: ?>>, vector<1x2xf32>
          %subview_11 = memref.subview %arg15[%4, 0] [1, 2] [1, 1] : memref<2x2xf32, 3> to memref<1x2xf32, strided<[2, 1], offset: ?>, 3>
          vector.transfer_write %10, %subview_11[%c0, %c0] {in_bounds = [true, true]} : vector<1x2xf32>, memref<1x2xf32, strided<[2, 1], offset: ?>, 3>
        }
        gpu.barrier
        %6 = affine.apply #map4()[%thread_id_x, %thread_id_y]
        %subview_6 = memref.subview %subview_5[0, %6] [2, 8] [1, 1] : memref<2x256xf32, strided<[1024, 1], offset: ?>> to memref<2x8xf32, strided<[1024, 1], offset: ?>>
        %7 = vector.transfer_read %subview_6[%c0, %c0], %cst_0 {in_bounds = [true, true]} : memref<2x8xf32, strided<[1024, 1], offset: ?>>, vector<2x8xf32>
        %subview_7 = memref.subview %arg16[0, %6] [2, 8] [1, 1] : memref<2x256xf32, 3> to memref<2x8xf32, strided<[256, 1], offset: ?>, 3>
        vector.transfer_write %7, %subview_7[%c0, %c0] {in_bounds = [true, true]} : vector<2x8xf32>, memref<2x8xf32, strided<[256, 1], offset: ?>, 3>
        gpu.barrier
        %subview_8 = memref.subview %arg15[%thread_id_y, 0] [1, 2] [1, 1] : memref<2x2xf32, 3> to memref<1x2xf32, strided<[2, 1], offset: ?>, 3>
        %subview_9 = memref.subview %arg16[0, %3] [2, 16] [1, 1] : memref<2x256xf32, 3> to memref<2x16xf32, strided<[256, 1], offset: ?>, 3>
        %8 = vector.transfer_read %subview_3[%c0, %c0], %0 {in_bounds = [true, true]} : memref<1x16xf32, strided<[1024, 1], offset: ?>>, vector<1x16xf32>
        %9 = scf.for %arg18 = %c0 to %c2 step %c1 iter_args(%arg19 = %8) -> (vector<1x16xf32>) {
          %subview_10 = memref.subview %subview_8[0, %arg18] [1, 1] [1, 1] : memref<1x2xf32, strided<[2, 1], offset: ?>, 3> to memref<1x1xf32, strided<[2, 1], offset: ?>, 3>
          %subview_11 = memref.subview %subview_9[%arg18, 0] [1, 16] [1, 1] : memref<2x16xf32, strided<[256, 1], offset: ?>, 3> to memref<1x16xf32, strided<[256, 1], offset: ?>, 3>
          %10 = vector.transfer_read %subview_10[%c0, %c0], %0 {in_bounds = [true, true]} : memref<1x1xf32, strided<[2, 1], offset: ?>, 3>, vector<1x1xf32>
          %11 = vector.transfer_read %subview_11[%c0, %c0], %0 {in_bounds = [true, true]} : memref<1x16xf32, strided<[256, 1], offset: ?>, 3>, vector<1x16xf32>
          %12 = vector.extract %11[0] : vector<16xf32> from vector<1x16xf32>
          %13 = vector.extract %10[0, 0] : f32 from vector<1x1xf32>
          %14 = vector.broadcast %13 : f32 to vector<16xf32>
          %15 = vector.extract %arg19[0] : vector<16xf32> from vector<1x16xf32>
          %16 = vector.fma %14, %12, %15 : vector<16xf32>
          %17 = vector.broadcast %16 : vector<16xf32> to vector<1x16xf32>
          scf.yield %17 : vector<1x16xf32>
        } {ansor.r1 = 0 : i64}
        vector.transfer_write %9, %subview_3[%c0, %c0] {in_bounds = [true, true]} : vector<1x16xf32>, memref<1x16xf32, strided<[1024, 1], offset: ?>>
        gpu.barrier
      }
      gpu.terminator
    } {ansor.auto_unroll_max_step = 1024 : i64}
    return
  }
}

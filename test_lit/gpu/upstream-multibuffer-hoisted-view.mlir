// RUN: %ansor-opt %s -transform-interpreter | FileCheck %s
// Upstream behaviour (MLIR 22) that ansor-gpu-pipeline-shared-copies works around:
// `transform.memref.multibuffer` (the multi-buffering under upstream's cp.async pipeline,
// `transform.nvgpu.pipeline_shared_memory_copies`) silently leaves an allocation alone when a
// user of it sits outside the loop, and LICM hoists the views of our shared tiles out of the R0
// loop. No error, no change: our pass gives the buffers their stage dimension itself and
// rebuilds hoisted views on the stage. If this test starts failing, upstream handles hoisted
// views and its pipeline may be worth another look.

// CHECK-LABEL: func.func @hoisted_view
// CHECK: memref.alloc() : memref<8x4xf32, 3>
// CHECK-NOT: memref<2x8x4xf32, 3>
// CHECK-LABEL: func.func @view_in_loop
// CHECK: memref.alloc() : memref<2x8x4xf32, 3>
func.func @hoisted_view(%A: memref<64x4xf32>, %out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  %sA = memref.alloc() : memref<8x4xf32, 3>
  %v = memref.subview %sA[0, 0] [1, 4] [1, 1] : memref<8x4xf32, 3> to memref<1x4xf32, strided<[4, 1]>, 3>
  scf.for %k = %c0 to %c64 step %c8 {
    %g = vector.transfer_read %A[%k, %c0], %pad {in_bounds = [true, true]} : memref<64x4xf32>, vector<1x4xf32>
    vector.transfer_write %g, %v[%c0, %c0] {in_bounds = [true, true]} : vector<1x4xf32>, memref<1x4xf32, strided<[4, 1]>, 3>
    %x = vector.transfer_read %sA[%c1, %c0], %pad : memref<8x4xf32, 3>, vector<4xf32>
    vector.transfer_write %x, %out[%c0] : vector<4xf32>, memref<4xf32>
  }
  return
}

func.func @view_in_loop(%A: memref<64x4xf32>, %out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %pad = arith.constant 0.0 : f32
  %sA = memref.alloc() : memref<8x4xf32, 3>
  scf.for %k = %c0 to %c64 step %c8 {
    %v = memref.subview %sA[0, 0] [1, 4] [1, 1] : memref<8x4xf32, 3> to memref<1x4xf32, strided<[4, 1]>, 3>
    %g = vector.transfer_read %A[%k, %c0], %pad {in_bounds = [true, true]} : memref<64x4xf32>, vector<1x4xf32>
    vector.transfer_write %g, %v[%c0, %c0] {in_bounds = [true, true]} : vector<1x4xf32>, memref<1x4xf32, strided<[4, 1]>, 3>
    %x = vector.transfer_read %sA[%c1, %c0], %pad : memref<8x4xf32, 3>, vector<4xf32>
    vector.transfer_write %x, %out[%c0] : vector<4xf32>, memref<4xf32>
  }
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %a = transform.structured.match ops{["memref.alloc"]} in %root : (!transform.any_op) -> !transform.op<"memref.alloc">
    %b = transform.memref.multibuffer %a {factor = 2 : i64, skip_analysis} : (!transform.op<"memref.alloc">) -> !transform.any_op
    transform.yield
  }
}

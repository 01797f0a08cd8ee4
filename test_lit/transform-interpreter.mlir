// RUN: %ansor-opt %s -split-input-file -transform-interpreter -canonicalize | FileCheck %s
// RUN: %ansor-opt %s -split-input-file -transform-interpreter -ansor-auto-unroll -canonicalize \
// RUN:   | FileCheck %s --check-prefix=UNROLL

// A sketch-like script: tile a 64x64x64 matmul by [16, 32, 8] with scf.for loops, then mark the
// innermost (k) loop with Ansor's unrolling pragma. k has 64 / 8 = 8 iterations, each a
// 16x8x32 matmul that becomes 4096 iterations of loops later: work 8 * 4096 = 32768 <= 32768.
// CHECK-LABEL: func.func @matmul
// CHECK-DAG: %[[C16:.*]] = arith.constant 16 : index
// CHECK-DAG: %[[C32:.*]] = arith.constant 32 : index
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : index
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[C16]]
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[C32]]
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[C8]]
// CHECK: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<16x8xf32>, tensor<8x32xf32>) outs(%{{.*}} : tensor<16x32xf32>)
// CHECK: } {ansor.auto_unroll_max_step = 32768 : i64}
// UNROLL-LABEL: func.func @matmul
// UNROLL-COUNT-2: scf.for
// UNROLL-NOT: scf.for
// UNROLL-COUNT-8: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<16x8xf32>, tensor<8x32xf32>)
// UNROLL-NOT: linalg.matmul
// UNROLL-NOT: ansor.auto_unroll_max_step
// UNROLL: return
func.func @matmul(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>, %c: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<64x64xf32>, tensor<64x64xf32>)
                     outs(%c : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %0 : tensor<64x64xf32>
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %mm = transform.structured.match ops{["linalg.matmul"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %tiled, %li, %lj, %lk = transform.structured.tile_using_for %mm tile_sizes [16, 32, 8]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    %n = transform.param.constant 32768 : i64 -> !transform.param<i64>
    transform.annotate %lk "ansor.auto_unroll_max_step" = %n
        : !transform.any_op, !transform.param<i64>
    transform.yield
  }
}

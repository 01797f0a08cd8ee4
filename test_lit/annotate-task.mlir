// RUN: %ansor-opt %s -split-input-file -ansor-annotate-task -verify-diagnostics | FileCheck %s
// RUN: %ansor-opt %s -split-input-file -ansor-annotate-task=weight=3 -verify-diagnostics \
// RUN:   | FileCheck %s --check-prefix=WEIGHT

// matmul 1024^3: 1024^3 points x (mulf + addf) = 2 * 1024^3.
// CHECK-LABEL: func.func @matmul_1024
// CHECK-SAME: ansor.task = #ansor.task<name = "matmul_1024", weight = 1 : i64, flops = 2147483648 : i64, hash = "{{[0-9a-f]+}}">
// WEIGHT-LABEL: func.func @matmul_1024
// WEIGHT-SAME: #ansor.task<name = "matmul_1024", weight = 3 : i64, flops = 2147483648 : i64
func.func @matmul_1024(%a: tensor<1024x1024xf32>, %b: tensor<1024x1024xf32>,
                       %c: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<1024x1024xf32>, tensor<1024x1024xf32>)
                     outs(%c : tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  return %0 : tensor<1024x1024xf32>
}

// -----

// Same body under another name and other SSA names: same hash. Other shapes: another hash.
// CHECK-LABEL: func.func @mm_a
// CHECK-SAME: flops = 128 : i64, hash = "[[HASH:[0-9a-f]+]]"
// CHECK-LABEL: func.func @mm_b
// CHECK-SAME: flops = 128 : i64, hash = "[[HASH]]"
// CHECK-LABEL: func.func @mm_c
// CHECK-NOT: [[HASH]]
// CHECK: return
func.func @mm_a(%a: tensor<8x4xf32>, %b: tensor<4x2xf32>, %c: tensor<8x2xf32>) -> tensor<8x2xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<8x4xf32>, tensor<4x2xf32>)
                     outs(%c : tensor<8x2xf32>) -> tensor<8x2xf32>
  return %0 : tensor<8x2xf32>
}
func.func @mm_b(%x: tensor<8x4xf32>, %y: tensor<4x2xf32>, %z: tensor<8x2xf32>) -> tensor<8x2xf32> {
  %r = linalg.matmul ins(%x, %y : tensor<8x4xf32>, tensor<4x2xf32>)
                     outs(%z : tensor<8x2xf32>) -> tensor<8x2xf32> loc("elsewhere.py":3:4)
  return %r : tensor<8x2xf32>
}
func.func @mm_c(%a: tensor<8x4xf32>, %b: tensor<4x4xf32>, %c: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<8x4xf32>, tensor<4x4xf32>)
                     outs(%c : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// Fused subgraph: fill (0 flops) + matmul 16x8x4 (2 * 512) + bias-add-relu on 16x8 (addf +
// maximumf = 2 per point; the constant and the extf cast do not count): 1024 + 256 = 1280.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @fused
// CHECK-SAME: name = "fused", weight = 1 : i64, flops = 1280 : i64
func.func @fused(%a: tensor<16x4xf32>, %b: tensor<4x8xf32>, %bias: tensor<8xf16>) -> tensor<16x8xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<16x8xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<16x8xf32>) -> tensor<16x8xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<16x4xf32>, tensor<4x8xf32>)
                      outs(%acc : tensor<16x8xf32>) -> tensor<16x8xf32>
  %out = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %bias : tensor<16x8xf32>, tensor<8xf16>) outs(%init : tensor<16x8xf32>) {
  ^bb0(%x: f32, %bh: f16, %o: f32):
    %c0 = arith.constant 0.0 : f32
    %bf = arith.extf %bh : f16 to f32
    %s = arith.addf %x, %bf : f32
    %r = arith.maximumf %s, %c0 : f32
    linalg.yield %r : f32
  } -> tensor<16x8xf32>
  return %out : tensor<16x8xf32>
}

// -----

// Integer ops and memrefs count the same way: 2 * 4 * 4 * 4 = 128; math ops count 1 each
// (exp on 4x4 = 16). Declarations get no task.
// CHECK-LABEL: func.func private @external
// CHECK-NOT: ansor.task
// CHECK-LABEL: func.func @int_matmul
// CHECK-SAME: flops = 128 : i64
// CHECK-LABEL: func.func @exp
// CHECK-SAME: flops = 16 : i64
func.func private @external(tensor<4xf32>) -> tensor<4xf32>
func.func @int_matmul(%a: memref<4x4xi32>, %b: memref<4x4xi32>, %c: memref<4x4xi32>) {
  linalg.matmul ins(%a, %b : memref<4x4xi32>, memref<4x4xi32>) outs(%c : memref<4x4xi32>)
  return
}
func.func @exp(%a: tensor<4x4xf32>, %o: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = linalg.exp ins(%a : tensor<4x4xf32>) outs(%o : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @dynamic(%a: tensor<?x4xf32>, %b: tensor<4x4xf32>, %c: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{ansor-annotate-task: cannot count the flops of an op with a dynamic loop range}}
  %0 = linalg.matmul ins(%a, %b : tensor<?x4xf32>, tensor<4x4xf32>)
                     outs(%c : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

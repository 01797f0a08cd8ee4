// RUN: ansor-opt %s --split-input-file --verify-diagnostics --ansor-gpu-collapse-reduction-loops \
// RUN:   | FileCheck %s

// A keepdim global average pool: h, w merged into one loop of 49; the result's kept unit dims
// become unit parallel loops before it; the op keeps its ansor.op tag.
// CHECK-DAG: #[[IN:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
// CHECK-DAG: #[[OUT:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @gap_keepdim(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<1x8x7x7xf32>
// CHECK: %[[C:.+]] = tensor.collapse_shape %[[X]] {{\[}}[0], [1], [2, 3]] : tensor<1x8x7x7xf32> into tensor<1x8x49xf32>
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME: ins(%[[C]] : tensor<1x8x49xf32>)
// CHECK-SAME: {ansor.op = 1 : i64}
func.func @gap_keepdim(%x: tensor<1x8x7x7xf32>, %f: tensor<1x8x1x1xf32>) -> tensor<1x8x1x1xf32> {
  %s = linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>,
                                        affine_map<(n, c, h, w) -> (n, c, 0, 0)>],
                       iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%x : tensor<1x8x7x7xf32>) outs(%f : tensor<1x8x1x1xf32>) attrs = {ansor.op = 1 : i64} {
  ^bb0(%a: f32, %o: f32):
    %t = arith.addf %a, %o : f32
    linalg.yield %t : f32
  } -> tensor<1x8x1x1xf32>
  return %s : tensor<1x8x1x1xf32>
}

// -----

// A norm over m x n read with the batch dim last, a broadcast input (no reduction dim) and the
// index of a merged loop: the index from the merged one (row-major), the other input's map
// renumbered.
// CHECK-DAG: #[[X:.+]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-DAG: #[[B:.+]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @norm_index(
// CHECK: tensor.collapse_shape %{{.+}} {{\[}}[0, 1], [2]] : tensor<4x6x2xf32> into tensor<24x2xf32>
// CHECK: linalg.generic {indexing_maps = [#[[X]], #[[B]], #[[B]]], iterator_types = ["parallel", "reduction"]}
// CHECK: %[[R:.+]] = linalg.index 1 : index
// CHECK: %[[M:.+]] = arith.divui %[[R]], %c6 : index
// CHECK-NOT: arith.remui %[[M]]
// CHECK: %[[R2:.+]] = linalg.index 1 : index
// CHECK: %[[N:.+]] = arith.remui %[[R2]], %c6{{.*}} : index
// CHECK: arith.addi %[[M]], %[[N]] : index
func.func @norm_index(%x: tensor<4x6x2xf32>, %b: tensor<2xf32>, %f: tensor<2xf32>) -> tensor<2xf32> {
  %s = linalg.generic {indexing_maps = [affine_map<(b, m, n) -> (m, n, b)>, affine_map<(b, m, n) -> (b)>,
                                        affine_map<(b, m, n) -> (b)>],
                       iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%x, %b : tensor<4x6x2xf32>, tensor<2xf32>) outs(%f : tensor<2xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %k = arith.addi %i, %j : index
    %ki = arith.index_cast %k : index to i32
    %kf = arith.sitofp %ki : i32 to f32
    %p = arith.mulf %a, %kf : f32
    %q = arith.addf %p, %c : f32
    %t = arith.addf %q, %o : f32
    linalg.yield %t : f32
  } -> tensor<2xf32>
  return %s : tensor<2xf32>
}

// -----

// One reduction loop: untouched.
// CHECK-LABEL: func.func @one_loop(
// CHECK-NOT: tensor.collapse_shape
// CHECK: iterator_types = ["parallel", "reduction"]
func.func @one_loop(%x: tensor<4x6xf32>, %f: tensor<4xf32>) -> tensor<4xf32> {
  %s = linalg.generic {indexing_maps = [affine_map<(m, n) -> (m, n)>, affine_map<(m, n) -> (m)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x6xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.addf %a, %o : f32
    linalg.yield %t : f32
  } -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// The reduction loops indexed in the other order: no exact merge.
func.func @transposed(%x: tensor<4x2x6xf32>, %f: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{cannot merge the reduction loops: an input reads them out of order}}
  %s = linalg.generic {indexing_maps = [affine_map<(b, m, n) -> (b, n, m)>, affine_map<(b, m, n) -> (b)>],
                       iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%x : tensor<4x2x6xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.addf %a, %o : f32
    linalg.yield %t : f32
  } -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// Reduction loops not next to each other.
func.func @apart(%x: tensor<4x6x2xf32>, %f: tensor<6xf32>) -> tensor<6xf32> {
  // expected-error @+1 {{cannot merge the reduction loops: the reduction loops are not consecutive}}
  %s = linalg.generic {indexing_maps = [affine_map<(b, m, n) -> (b, m, n)>, affine_map<(b, m, n) -> (m)>],
                       iterator_types = ["reduction", "parallel", "reduction"]}
      ins(%x : tensor<4x6x2xf32>) outs(%f : tensor<6xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.addf %a, %o : f32
    linalg.yield %t : f32
  } -> tensor<6xf32>
  return %s : tensor<6xf32>
}

// -----

// The reduction loops read as non-adjacent dims of an input.
func.func @split_input(%x: tensor<6x4x2xf32>, %f: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{cannot merge the reduction loops: an input reads them out of order}}
  %s = linalg.generic {indexing_maps = [affine_map<(b, m, n) -> (m, b, n)>, affine_map<(b, m, n) -> (b)>],
                       iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%x : tensor<6x4x2xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.addf %a, %o : f32
    linalg.yield %t : f32
  } -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// A reduction to a scalar over one loop: a unit row loop first; the fill is rebuilt on the row
// (keeping ansor.op) and the result collapsed back to rank 0.
func.func @scalar_max(%x: tensor<1000xf32>) -> tensor<f32> {
  %z = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<f32>
  %f = linalg.fill {ansor.op = 0 : i64} ins(%z : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>],
                       iterator_types = ["reduction"]}
      ins(%x : tensor<1000xf32>) outs(%f : tensor<f32>) attrs = {ansor.op = 1 : i64} {
  ^bb0(%a: f32, %o: f32):
    %s = arith.maximumf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}

// CHECK-LABEL: func.func @scalar_max(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<1000xf32>
// CHECK: %[[E:.*]] = tensor.empty() : tensor<f32>
// CHECK: %[[E1:.*]] = tensor.expand_shape %[[E]] [] output_shape [1] : tensor<f32> into tensor<1xf32>
// CHECK: %[[F:.*]] = linalg.fill {ansor.op = 0 : i64} ins(%{{.*}} : f32) outs(%[[E1]] : tensor<1xf32>) -> tensor<1xf32>
// CHECK: %[[R:.*]] = linalg.generic {indexing_maps = [#[[IN:map[0-9]*]], #[[OUT:map[0-9]*]]], iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<1000xf32>) outs(%[[F]] : tensor<1xf32>) attrs = {ansor.op = 1 : i64}
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[R]] [] : tensor<1xf32> into tensor<f32>
// CHECK: return %[[C]]

// -----

// A sum of a whole 2-D tensor: its two loops merged (the input collapsed) and a unit row loop.
func.func @scalar_sum(%x: tensor<97x197xf32>, %init: tensor<f32>) -> tensor<f32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>],
                       iterator_types = ["reduction", "reduction"]}
      ins(%x : tensor<97x197xf32>) outs(%init : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}

// CHECK-LABEL: func.func @scalar_sum(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<97x197xf32>, %[[I:[a-z0-9]+]]: tensor<f32>
// CHECK: %[[XC:.*]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1]] : tensor<97x197xf32> into tensor<19109xf32>
// CHECK: %[[I1:.*]] = tensor.expand_shape %[[I]] [] output_shape [1] : tensor<f32> into tensor<1xf32>
// CHECK: %[[R:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[XC]] : tensor<19109xf32>) outs(%[[I1]] : tensor<1xf32>)
// CHECK: tensor.collapse_shape %[[R]] [] : tensor<1xf32> into tensor<f32>

// -----

// A generic reading the scalar with a unit loop (a log-softmax of one row) reads the reduction's
// row at that loop instead of its collapse to 0-d.
func.func @scalar_read_by_row(%x: tensor<1x35xf32>) -> tensor<1x35xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>],
                       iterator_types = ["reduction", "reduction"]}
      ins(%x : tensor<1x35xf32>) outs(%f : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %a, %o : f32
    linalg.yield %v : f32
  } -> tensor<f32>
  %e1 = tensor.empty() : tensor<1x35xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : tensor<1x35xf32>, tensor<f32>) outs(%e1 : tensor<1x35xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.subf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<1x35xf32>
  return %y : tensor<1x35xf32>
}
// CHECK-LABEL: func.func @scalar_read_by_row(
// CHECK:         %[[S:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<1xf32>)
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
// CHECK-SAME:        ins(%arg0, %[[S]] : tensor<1x35xf32>, tensor<1xf32>)

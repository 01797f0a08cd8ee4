// RUN: ansor-opt %s --split-input-file --ansor-gpu-bubble-up-result-slices --canonicalize | FileCheck %s

// A row-wise op and its per-row reduction, of which the function returns row 0 through a
// reshape: both ops are computed on that row only, keeping their tags; the reduction stays whole.
func.func @class_token(%x: tensor<1x8x16xf32>) -> tensor<1x1x16xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %f = linalg.fill {ansor.op = 0 : i64} ins(%z : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %xc = tensor.collapse_shape %x [[0, 1], [2]] : tensor<1x8x16xf32> into tensor<8x16xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%xc : tensor<8x16xf32>) outs(%f : tensor<8xf32>) attrs = {ansor.op = 1 : i64} {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %a, %o : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %eo = tensor.empty() : tensor<8x16xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%xc, %s : tensor<8x16xf32>, tensor<8xf32>) outs(%eo : tensor<8x16xf32>) attrs = {ansor.op = 2 : i64} {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.subf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  %r = tensor.extract_slice %y[0, 0] [1, 16] [1, 1] : tensor<8x16xf32> to tensor<16xf32>
  %out = tensor.expand_shape %r [[0, 1, 2]] output_shape [1, 1, 16] : tensor<16xf32> into tensor<1x1x16xf32>
  return %out : tensor<1x1x16xf32>
}
// CHECK-LABEL: func.func @class_token(
// CHECK:         linalg.fill {ansor.op = 0 : i64} {{.*}} -> tensor<1xf32>
// CHECK:         %[[S:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK-SAME:        ins(%{{.*}} : tensor<1x16xf32>) outs(%{{.*}} : tensor<1xf32>) {{.*}}ansor.op = 1 : i64
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %[[S]] : tensor<1x16xf32>, tensor<1xf32>) outs(%{{.*}} : tensor<1x16xf32>) {{.*}}ansor.op = 2 : i64
// CHECK-NOT:     tensor<8x16xf32>
// CHECK:         return

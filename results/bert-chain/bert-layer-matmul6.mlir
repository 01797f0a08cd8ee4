#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d1)>
#map2 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map3 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#map4 = affine_map<(d0, d1, d2) -> (d2)>
module {
  func.func @main__t7(%arg0: tensor<128x3072xf32>, %arg1: tensor<3072x768xf32>, %arg2: tensor<768xf32>, %arg3: tensor<1x128x768xf32>, %arg4: tensor<768xf32>, %arg5: tensor<768xf32>) -> tensor<1x128x768xf32> {
    %cst = arith.constant 9.9999999999999998E-13 : f64
    %cst_0 = arith.constant 7.680000e+02 : f32
    %cst_1 = arith.constant 7.680000e+02 : f64
    %cst_2 = arith.constant 0.000000e+00 : f64
    %cst_3 = arith.constant 0.000000e+00 : f32
    %0 = tensor.empty() : tensor<128x768xf32>
    %1 = linalg.fill ins(%cst_3 : f32) outs(%0 : tensor<128x768xf32>) -> tensor<128x768xf32>
    %2 = tensor.empty() : tensor<1x128x768xf32>
    %3 = tensor.empty() : tensor<1x128x768xf64>
    %4 = tensor.empty() : tensor<1x128x1xf64>
    %5 = linalg.fill ins(%cst_2 : f64) outs(%4 : tensor<1x128x1xf64>) -> tensor<1x128x1xf64>
    %6 = tensor.empty() : tensor<1x128x1xf32>
    %7 = linalg.fill ins(%cst_3 : f32) outs(%6 : tensor<1x128x1xf32>) -> tensor<1x128x1xf32>
    %8 = linalg.matmul ins(%arg0, %arg1 : tensor<128x3072xf32>, tensor<3072x768xf32>) outs(%1 : tensor<128x768xf32>) -> tensor<128x768xf32>
    %9 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%8, %arg2 : tensor<128x768xf32>, tensor<768xf32>) outs(%0 : tensor<128x768xf32>) {
    ^bb0(%in: f32, %in_4: f32, %out: f32):
      %27 = arith.addf %in, %in_4 : f32
      linalg.yield %27 : f32
    } -> tensor<128x768xf32>
    %expanded = tensor.expand_shape %9 [[0, 1], [2]] output_shape [1, 128, 768] : tensor<128x768xf32> into tensor<1x128x768xf32>
    %10 = linalg.generic {indexing_maps = [#map2, #map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg3, %expanded : tensor<1x128x768xf32>, tensor<1x128x768xf32>) outs(%2 : tensor<1x128x768xf32>) {
    ^bb0(%in: f32, %in_4: f32, %out: f32):
      %27 = arith.addf %in, %in_4 : f32
      linalg.yield %27 : f32
    } -> tensor<1x128x768xf32>
    %11 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%10 : tensor<1x128x768xf32>) outs(%3 : tensor<1x128x768xf64>) {
    ^bb0(%in: f32, %out: f64):
      %27 = arith.extf %in : f32 to f64
      linalg.yield %27 : f64
    } -> tensor<1x128x768xf64>
    %12 = linalg.generic {indexing_maps = [#map2, #map3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%11 : tensor<1x128x768xf64>) outs(%5 : tensor<1x128x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %27 = arith.addf %in, %out : f64
      linalg.yield %27 : f64
    } -> tensor<1x128x1xf64>
    %13 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%12 : tensor<1x128x1xf64>) outs(%4 : tensor<1x128x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %27 = arith.divf %in, %cst_1 : f64
      linalg.yield %27 : f64
    } -> tensor<1x128x1xf64>
    %14 = linalg.generic {indexing_maps = [#map2, #map3, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%11, %13 : tensor<1x128x768xf64>, tensor<1x128x1xf64>) outs(%3 : tensor<1x128x768xf64>) {
    ^bb0(%in: f64, %in_4: f64, %out: f64):
      %27 = arith.subf %in, %in_4 : f64
      linalg.yield %27 : f64
    } -> tensor<1x128x768xf64>
    %15 = linalg.generic {indexing_maps = [#map2, #map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%14, %14 : tensor<1x128x768xf64>, tensor<1x128x768xf64>) outs(%3 : tensor<1x128x768xf64>) {
    ^bb0(%in: f64, %in_4: f64, %out: f64):
      %27 = arith.mulf %in, %in_4 : f64
      linalg.yield %27 : f64
    } -> tensor<1x128x768xf64>
    %16 = linalg.generic {indexing_maps = [#map2, #map3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%15 : tensor<1x128x768xf64>) outs(%5 : tensor<1x128x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %27 = arith.addf %in, %out : f64
      linalg.yield %27 : f64
    } -> tensor<1x128x1xf64>
    %17 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%16 : tensor<1x128x1xf64>) outs(%4 : tensor<1x128x1xf64>) {
    ^bb0(%in: f64, %out: f64):
      %27 = arith.divf %in, %cst_1 : f64
      linalg.yield %27 : f64
    } -> tensor<1x128x1xf64>
    %18 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%17 : tensor<1x128x1xf64>) outs(%6 : tensor<1x128x1xf32>) {
    ^bb0(%in: f64, %out: f32):
      %27 = arith.truncf %in : f64 to f32
      linalg.yield %27 : f32
    } -> tensor<1x128x1xf32>
    %19 = linalg.generic {indexing_maps = [#map2, #map3], iterator_types = ["parallel", "parallel", "reduction"]} ins(%10 : tensor<1x128x768xf32>) outs(%7 : tensor<1x128x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %27 = arith.addf %in, %out : f32
      linalg.yield %27 : f32
    } -> tensor<1x128x1xf32>
    %20 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%19 : tensor<1x128x1xf32>) outs(%6 : tensor<1x128x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %27 = arith.divf %in, %cst_0 : f32
      linalg.yield %27 : f32
    } -> tensor<1x128x1xf32>
    %21 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%18 : tensor<1x128x1xf32>) outs(%6 : tensor<1x128x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %27 = arith.truncf %cst : f64 to f32
      %28 = arith.addf %in, %27 : f32
      linalg.yield %28 : f32
    } -> tensor<1x128x1xf32>
    %22 = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%21 : tensor<1x128x1xf32>) outs(%6 : tensor<1x128x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %27 = math.rsqrt %in : f32
      linalg.yield %27 : f32
    } -> tensor<1x128x1xf32>
    %23 = linalg.generic {indexing_maps = [#map2, #map3, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%10, %20 : tensor<1x128x768xf32>, tensor<1x128x1xf32>) outs(%2 : tensor<1x128x768xf32>) {
    ^bb0(%in: f32, %in_4: f32, %out: f32):
      %27 = arith.subf %in, %in_4 : f32
      linalg.yield %27 : f32
    } -> tensor<1x128x768xf32>
    %24 = linalg.generic {indexing_maps = [#map2, #map3, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%23, %22 : tensor<1x128x768xf32>, tensor<1x128x1xf32>) outs(%2 : tensor<1x128x768xf32>) {
    ^bb0(%in: f32, %in_4: f32, %out: f32):
      %27 = arith.mulf %in, %in_4 : f32
      linalg.yield %27 : f32
    } -> tensor<1x128x768xf32>
    %25 = linalg.generic {indexing_maps = [#map2, #map4, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%24, %arg4 : tensor<1x128x768xf32>, tensor<768xf32>) outs(%2 : tensor<1x128x768xf32>) {
    ^bb0(%in: f32, %in_4: f32, %out: f32):
      %27 = arith.mulf %in, %in_4 : f32
      linalg.yield %27 : f32
    } -> tensor<1x128x768xf32>
    %26 = linalg.generic {indexing_maps = [#map2, #map4, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%25, %arg5 : tensor<1x128x768xf32>, tensor<768xf32>) outs(%2 : tensor<1x128x768xf32>) {
    ^bb0(%in: f32, %in_4: f32, %out: f32):
      %27 = arith.addf %in, %in_4 : f32
      linalg.yield %27 : f32
    } -> tensor<1x128x768xf32>
    return %26 : tensor<1x128x768xf32>
  }
}

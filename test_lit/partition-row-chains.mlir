// RUN: %ansor-opt %s -split-input-file -ansor-partition | FileCheck %s --check-prefixes=CHECK,CHAIN
// RUN: %ansor-opt %s -split-input-file -ansor-partition=row-chains=false | FileCheck %s --check-prefixes=CHECK,SPLIT

// ansor-partition's row-chains (the default): a row reduction over the rows of a group joins it,
// so a chain of reductions and element-wise ops over the same rows is one task;
// row-chains=false splits it at each reduction (the old partitioning).

// Softmax (max, exp(x - max), sum, divide): one task; split, the sum starts a second one.
// CHECK-LABEL: func.func @softmax(
// CHAIN-NEXT:    %[[R:.*]] = call @softmax__t0(%{{.*}})
// CHAIN-NEXT:    return %[[R]]
// CHAIN:       func.func private @softmax__t0(
// CHAIN:         arith.maximumf
// CHAIN:         math.exp
// CHAIN:         arith.addf
// CHAIN:         arith.divf
// CHAIN:         return
// CHAIN-NOT:   func.func private @softmax__t1(
// SPLIT:         %[[E:.*]] = call @softmax__t0(%{{.*}})
// SPLIT-NEXT:    %[[R:.*]] = call @softmax__t1(%[[E]])
// SPLIT-NEXT:    return %[[R]]
// SPLIT:       func.func private @softmax__t0(
// SPLIT:         math.exp
// SPLIT:       func.func private @softmax__t1(
// SPLIT:         arith.divf
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<4xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %mx = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%f1 : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %o : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mx : tensor<4x8xf32>, tensor<4xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %p = math.exp %d : f32
    linalg.yield %p : f32
  } -> tensor<4x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %sm = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%ex : tensor<4x8xf32>) outs(%f2 : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %dv = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ex, %sm : tensor<4x8xf32>, tensor<4xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %q = arith.divf %a, %b : f32
    linalg.yield %q : f32
  } -> tensor<4x8xf32>
  return %dv : tensor<4x8xf32>
}

// -----

// LayerNorm, two-pass: the row sum of x, the row sum of (x - mean)^2 (it reads x, an argument,
// and the mean: it reduces the same rows as the sum), the normalization. One task; split, two.
// CHECK-LABEL: func.func @layernorm(
// CHAIN-NEXT:    %[[R:.*]] = call @layernorm__t0(%{{.*}}, %{{.*}})
// CHAIN-NEXT:    return %[[R]]
// CHAIN:       func.func private @layernorm__t0(
// CHAIN-COUNT-3: linalg.generic
// CHAIN:         math.rsqrt
// CHAIN-NOT:   func.func private @layernorm__t1(
// SPLIT:         call @layernorm__t0(
// SPLIT:         call @layernorm__t1(
// SPLIT:       func.func private @layernorm__t0(
// SPLIT:       func.func private @layernorm__t1(
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
#col = affine_map<(i, j) -> (j)>
func.func @layernorm(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %inv = arith.constant 0.125 : f32
  %e1 = tensor.empty() : tensor<4xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %sq = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %sum : tensor<4x8xf32>, tensor<4xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%a: f32, %s: f32, %o: f32):
    %mean = arith.mulf %s, %inv : f32
    %d = arith.subf %a, %mean : f32
    %p = arith.mulf %d, %d : f32
    %r = arith.addf %o, %p : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #row, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum, %sq, %g : tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<8xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %s: f32, %q: f32, %gg: f32, %o: f32):
    %mean = arith.mulf %s, %inv : f32
    %var = arith.mulf %q, %inv : f32
    %rs = math.rsqrt %var : f32
    %d = arith.subf %a, %mean : f32
    %n = arith.mulf %d, %rs : f32
    %r = arith.mulf %n, %gg : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// The moments the other way round: the mean of squares anchors the group, its consumer also reads
// the row sum, a later reduction over the same rows used only there: it joins as a producer.
// CHECK-LABEL: func.func @moments(
// CHAIN-NEXT:    %[[R:.*]] = call @moments__t0(%{{.*}})
// CHAIN-NEXT:    return %[[R]]
// CHAIN-NOT:   func.func private @moments__t1(
// SPLIT:         call @moments__t0(
// SPLIT:         call @moments__t1(
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
func.func @moments(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<4xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %sq = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %p = arith.mulf %a, %a : f32
    %s = arith.addf %p, %o : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sq, %sum : tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %q: f32, %s: f32, %o: f32):
    %d = arith.subf %a, %s : f32
    %r = arith.mulf %d, %q : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Attention scores + softmax: a batch matmul, a scale, then the softmax over its output rows, with
// keepdim (d0, d1, 0) maps as torch-mlir writes them: one task anchored by the batch matmul.
// CHECK-LABEL: func.func @attention(
// CHAIN-NEXT:    %[[R:.*]] = call @attention__t0(%{{.*}}, %{{.*}})
// CHAIN-NEXT:    return %[[R]]
// CHAIN:       func.func private @attention__t0({{.*}} attributes {ansor.group = "linalg.batch_matmul"}
// CHAIN:         linalg.batch_matmul
// CHAIN:         arith.maximumf
// CHAIN:         arith.divf
// CHAIN-NOT:   func.func private @attention__t1(
// SPLIT:         call @attention__t0(
// SPLIT:         call @attention__t1(
// SPLIT:         call @attention__t2(
#id3 = affine_map<(b, i, j) -> (b, i, j)>
#keep = affine_map<(b, i, j) -> (b, i, 0)>
func.func @attention(%q: tensor<2x4x8xf32>, %k: tensor<2x8x4xf32>) -> tensor<2x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.35 : f32
  %e = tensor.empty() : tensor<2x4x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %s = linalg.batch_matmul ins(%q, %k : tensor<2x4x8xf32>, tensor<2x8x4xf32>) outs(%z : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %sc = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s : tensor<2x4x4xf32>) outs(%e : tensor<2x4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %scale : f32
    linalg.yield %m : f32
  } -> tensor<2x4x4xf32>
  %e1 = tensor.empty() : tensor<2x4x1xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %mx = linalg.generic {indexing_maps = [#id3, #keep], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%sc : tensor<2x4x4xf32>) outs(%f1 : tensor<2x4x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %o : f32
    linalg.yield %m : f32
  } -> tensor<2x4x1xf32>
  %ex = linalg.generic {indexing_maps = [#id3, #keep, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%sc, %mx : tensor<2x4x4xf32>, tensor<2x4x1xf32>) outs(%e : tensor<2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %p = math.exp %d : f32
    linalg.yield %p : f32
  } -> tensor<2x4x4xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %sm = linalg.generic {indexing_maps = [#id3, #keep], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%ex : tensor<2x4x4xf32>) outs(%f2 : tensor<2x4x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.addf %a, %o : f32
    linalg.yield %t : f32
  } -> tensor<2x4x1xf32>
  %dv = linalg.generic {indexing_maps = [#id3, #keep, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%ex, %sm : tensor<2x4x4xf32>, tensor<2x4x1xf32>) outs(%e : tensor<2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<2x4x4xf32>
  return %dv : tensor<2x4x4xf32>
}

// -----

// Other rows: the column sums of a matmul's output (its loops (j, i), reading (i, j): no identity
// read of a member) and a second matmul stay tasks of their own either way.
// CHECK-LABEL: func.func @columns(
// CHECK:         call @columns__t0(
// CHECK:         call @columns__t1(
// CHECK:         call @columns__t2(
#id = affine_map<(i, j) -> (i, j)>
#tr = affine_map<(j, i) -> (i, j)>
#first = affine_map<(j, i) -> (j)>
func.func @columns(%a: tensor<8x4xf32>, %b: tensor<4x8xf32>, %c: tensor<8x8xf32>) -> (tensor<8xf32>, tensor<8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %m = linalg.matmul ins(%a, %b : tensor<8x4xf32>, tensor<4x8xf32>) outs(%z : tensor<8x8xf32>) -> tensor<8x8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m : tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.maximumf %x, %zero : f32
    linalg.yield %y : f32
  } -> tensor<8x8xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %cs = linalg.generic {indexing_maps = [#tr, #first], iterator_types = ["parallel", "reduction"]}
      ins(%r : tensor<8x8xf32>) outs(%f : tensor<8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %x, %o : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %m2 = linalg.matmul ins(%r, %c : tensor<8x8xf32>, tensor<8x8xf32>) outs(%z : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %cs, %m2 : tensor<8xf32>, tensor<8x8xf32>
}

// -----

// A convolution's NHWC output reduced over its channels (a LayerNorm over channels, ConvNeXt's):
// a tile of the reduction's rows (pixels) is a tile of the convolution's, so it joins, like a
// softmax joins a matmul. Split: two tasks.
// CHECK-LABEL: func.func @conv_channel_norm(
// CHAIN-NEXT:    %[[R:.*]] = call @conv_channel_norm__t0(%{{.*}}, %{{.*}})
// CHAIN-NEXT:    return %[[R]]
// CHAIN-NOT:   func.func private @conv_channel_norm__t1(
// SPLIT:         call @conv_channel_norm__t0(
// SPLIT:         call @conv_channel_norm__t1(
#id4 = affine_map<(n, h, w, c) -> (n, h, w, c)>
#pix = affine_map<(n, h, w, c) -> (n, h, w)>
func.func @conv_channel_norm(%x: tensor<1x6x6x3xf32>, %w: tensor<3x3x3x8xf32>) -> tensor<1x4x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x4x4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %c = linalg.conv_2d_nhwc_hwcf {strides = dense<1> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x6x6x3xf32>, tensor<3x3x3x8xf32>) outs(%z : tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %e1 = tensor.empty() : tensor<1x4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e1 : tensor<1x4x4xf32>) -> tensor<1x4x4xf32>
  %sq = linalg.generic {indexing_maps = [#id4, #pix], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%c : tensor<1x4x4x8xf32>) outs(%f : tensor<1x4x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %p = arith.mulf %a, %a : f32
    %s = arith.addf %p, %o : f32
    linalg.yield %s : f32
  } -> tensor<1x4x4xf32>
  %y = linalg.generic {indexing_maps = [#id4, #pix, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%c, %sq : tensor<1x4x4x8xf32>, tensor<1x4x4xf32>) outs(%e : tensor<1x4x4x8xf32>) {
  ^bb0(%a: f32, %q: f32, %o: f32):
    %r = math.rsqrt %q : f32
    %n = arith.mulf %a, %r : f32
    linalg.yield %n : f32
  } -> tensor<1x4x4x8xf32>
  return %y : tensor<1x4x4x8xf32>
}

// -----

// A channels-first model's convolution (run NHWC, transposed back to NCHW) + relu, then a global
// average pool over h, w of the NCHW tensor (ResNet's): the pool's rows are columns of the
// convolution's output (the transpose is not row-aligned), so it stays a task of its own.
// CHECK-LABEL: func.func @conv_pool(
// CHECK:         %[[C:.*]] = call @conv_pool__t0(%{{.*}}, %{{.*}}) : {{.*}} -> tensor<1x8x4x4xf32>
// CHECK-NEXT:    %[[P:.*]] = call @conv_pool__t1(%[[C]])
// CHECK-NEXT:    return %[[P]]
#id4 = affine_map<(n, h, w, c) -> (n, h, w, c)>
#plane = affine_map<(n, c, h, w) -> (n, c)>
#nchw = affine_map<(n, c, h, w) -> (n, c, h, w)>
func.func @conv_pool(%x: tensor<1x6x6x3xf32>, %w: tensor<3x3x3x8xf32>) -> tensor<1x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x4x4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %c = linalg.conv_2d_nhwc_hwcf {strides = dense<1> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x6x6x3xf32>, tensor<3x3x3x8xf32>) outs(%z : tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  %r = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%c : tensor<1x4x4x8xf32>) outs(%e : tensor<1x4x4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x4x4x8xf32>
  %et = tensor.empty() : tensor<1x8x4x4xf32>
  %t = linalg.transpose ins(%r : tensor<1x4x4x8xf32>) outs(%et : tensor<1x8x4x4xf32>) permutation = [0, 3, 1, 2]
  %e1 = tensor.empty() : tensor<1x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e1 : tensor<1x8xf32>) -> tensor<1x8xf32>
  %p = linalg.generic {indexing_maps = [#nchw, #plane], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%t : tensor<1x8x4x4xf32>) outs(%f : tensor<1x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<1x8xf32>
  return %p : tensor<1x8xf32>
}

// RUN: %ansor-opt %s -split-input-file -ansor-partition | FileCheck %s

// Anchor + fill initialiser + element-wise consumer chain -> one task; the scalar constant and
// the empty tensor are cloned into it.
// CHECK-LABEL: func.func @mm_bias_relu(
// CHECK-SAME:      %[[A:.*]]: tensor<8x4xf32>, %[[B:.*]]: tensor<4x2xf32>, %[[BIAS:.*]]: tensor<2xf32>)
// CHECK-NEXT:    %[[R:.*]] = call @mm_bias_relu__t0(%[[A]], %[[B]], %[[BIAS]])
// CHECK-NEXT:    return %[[R]]
// CHECK:       func.func private @mm_bias_relu__t0({{.*}}) -> tensor<8x2xf32> attributes {ansor.group = "linalg.matmul"}
// CHECK:         arith.constant 0.0
// CHECK:         tensor.empty
// CHECK:         linalg.fill
// CHECK:         linalg.matmul
// CHECK:         linalg.generic
// CHECK:         return
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (j)>
func.func @mm_bias_relu(%a: tensor<8x4xf32>, %b: tensor<4x2xf32>, %bias: tensor<2xf32>) -> tensor<8x2xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x2xf32>
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<8x2xf32>) -> tensor<8x2xf32>
  %m = linalg.matmul ins(%a, %b : tensor<8x4xf32>, tensor<4x2xf32>) outs(%z : tensor<8x2xf32>) -> tensor<8x2xf32>
  %r = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %bias : tensor<8x2xf32>, tensor<2xf32>) outs(%e : tensor<8x2xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %t = arith.maximumf %s, %cst : f32
    linalg.yield %t : f32
  } -> tensor<8x2xf32>
  return %r : tensor<8x2xf32>
}

// -----

// Two identical layers and a residual add: the add joins the second matmul's chain (its other
// operand, the first task's result, is defined earlier); the weight constant stays in the
// parent and is passed in; the tasks are numbered in program order.
// CHECK-LABEL: func.func @two_layers(
// CHECK:         %[[W:.*]] = arith.constant dense_resource<w> : tensor<4x4xf32>
// CHECK:         %[[T0:.*]] = call @two_layers__t0(%{{.*}}, %[[W]])
// CHECK:         %[[T1:.*]] = call @two_layers__t1(%[[T0]], %[[W]])
// CHECK:         return %[[T1]]
// CHECK:       func.func private @two_layers__t0(%{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK-NOT:     linalg.generic
// CHECK:         return
// CHECK:       func.func private @two_layers__t1(%{{.*}}: tensor<2x4xf32>, %{{.*}}: tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK:         linalg.matmul
// CHECK:         linalg.generic
#id = affine_map<(i, j) -> (i, j)>
func.func @two_layers(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %cst = arith.constant 0.0 : f32
  %w = arith.constant dense_resource<w> : tensor<4x4xf32>
  %e = tensor.empty() : tensor<2x4xf32>
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %m0 = linalg.matmul ins(%x, %w : tensor<2x4xf32>, tensor<4x4xf32>) outs(%z : tensor<2x4xf32>) -> tensor<2x4xf32>
  %z1 = linalg.fill ins(%cst : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %m1 = linalg.matmul ins(%m0, %w : tensor<2x4xf32>, tensor<4x4xf32>) outs(%z1 : tensor<2x4xf32>) -> tensor<2x4xf32>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m1, %m0 : tensor<2x4xf32>, tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}
{-#
  dialect_resources: {
    builtin: {
      w: "0x040000000000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F"
    }
  }
#-}

// -----

// Softmax: the max-reduce anchors a task that also takes the negation producing its input
// (all its users end up in the group), the (sub, exp) consumer, and (row-chains, the default) the
// sum-reduce over the rows of exp with the division. The reshape stays in the parent. (Split at
// each reduction with row-chains=false: partition-row-chains.mlir.)
// CHECK-LABEL: func.func @softmax(
// CHECK:         %[[S:.*]] = call @softmax__t0(%{{.*}})
// CHECK-NEXT:    tensor.collapse_shape %[[S]]
// CHECK:       func.func private @softmax__t0({{.*}}) -> tensor<4x8xf32> attributes {ansor.group = "linalg.generic"}
// CHECK:         arith.negf
// CHECK:         arith.maximumf
// CHECK:         math.exp
// CHECK:         arith.addf
// CHECK:         arith.divf
// CHECK:         return
// CHECK-NOT:   func.func private @softmax__t1(
#id = affine_map<(i, j) -> (i, j)>
#red = affine_map<(i, j) -> (i)>
func.func @softmax(%in: tensor<4x8xf32>) -> tensor<32xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<4x8xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%in : tensor<4x8xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  } -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %mx = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%f1 : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %o : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %ex = linalg.generic {indexing_maps = [#id, #red, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mx : tensor<4x8xf32>, tensor<4xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %p = math.exp %d : f32
    linalg.yield %p : f32
  } -> tensor<4x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %sm = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["parallel", "reduction"]}
      ins(%ex : tensor<4x8xf32>) outs(%f2 : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %dv = linalg.generic {indexing_maps = [#id, #red, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ex, %sm : tensor<4x8xf32>, tensor<4xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %q = arith.divf %a, %b : f32
    linalg.yield %q : f32
  } -> tensor<4x8xf32>
  %c = tensor.collapse_shape %dv [[0, 1]] : tensor<4x8xf32> into tensor<32xf32>
  return %c : tensor<32xf32>
}

// -----

// No Linalg op: untouched.
// CHECK-LABEL: func.func @plain(
// CHECK-NEXT:    arith.addf
// CHECK-NEXT:    return
// CHECK-NOT:   func.func private
func.func @plain(%a: f32) -> f32 {
  %s = arith.addf %a, %a : f32
  return %s : f32
}

// -----

// An element-wise op with no anchor is a task of its own; a fill nobody fuses is one too.
// CHECK-LABEL: func.func @eltwise(
// CHECK:         call @eltwise__t0(
// CHECK:       func.func private @eltwise__t0({{.*}}) -> tensor<37x53xf32> attributes {ansor.group = "linalg.generic"}
// CHECK:         math.tanh
#id = affine_map<(i, j) -> (i, j)>
func.func @eltwise(%a: tensor<37x53xf32>) -> tensor<37x53xf32> {
  %e = tensor.empty() : tensor<37x53xf32>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<37x53xf32>) outs(%e : tensor<37x53xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = math.tanh %x : f32
    linalg.yield %y : f32
  } -> tensor<37x53xf32>
  return %t : tensor<37x53xf32>
}

// -----

// One zero-filled init shared by two matmuls is cloned into both tasks; an element-wise op on
// constants only (a folded batch-norm scale, say) stays in the parent.
// CHECK-LABEL: func.func @shared_fill(
// CHECK:         %[[S:.*]] = linalg.generic
// CHECK:         call @shared_fill__t0(%{{.*}}, %[[S]])
// CHECK:         call @shared_fill__t1(
// CHECK-NOT:     linalg.fill
// CHECK:       func.func private @shared_fill__t0(
// CHECK:         linalg.fill
// CHECK:         linalg.matmul
// CHECK:       func.func private @shared_fill__t1(
// CHECK:         linalg.fill
// CHECK:         linalg.matmul
#v = affine_map<(i) -> (i)>
func.func @shared_fill(%a: tensor<8x4xf32>, %b: tensor<4x2xf32>) -> (tensor<8x2xf32>, tensor<8x2xf32>) {
  %cst = arith.constant 0.0 : f32
  %p = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %ev = tensor.empty() : tensor<2xf32>
  %sc = linalg.generic {indexing_maps = [#v, #v], iterator_types = ["parallel"]}
      ins(%p : tensor<2xf32>) outs(%ev : tensor<2xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = math.sqrt %x : f32
    linalg.yield %r : f32
  } -> tensor<2xf32>
  %e = tensor.empty() : tensor<8x2xf32>
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<8x2xf32>) -> tensor<8x2xf32>
  %m0 = linalg.matmul ins(%a, %b : tensor<8x4xf32>, tensor<4x2xf32>) outs(%z : tensor<8x2xf32>) -> tensor<8x2xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%m0, %sc : tensor<8x2xf32>, tensor<2xf32>) outs(%e : tensor<8x2xf32>) {
  ^bb0(%x: f32, %s: f32, %o: f32):
    %r = arith.mulf %x, %s : f32
    linalg.yield %r : f32
  } -> tensor<8x2xf32>
  %m1 = linalg.matmul ins(%a, %b : tensor<8x4xf32>, tensor<4x2xf32>) outs(%z : tensor<8x2xf32>) -> tensor<8x2xf32>
  return %y, %m1 : tensor<8x2xf32>, tensor<8x2xf32>
}

// -----

// A reconverging element-wise DAG behind a reshape joins the matmul: y = x * erf(x) on
// x = expand(matmul) uses x twice; the final reshape stays in the parent.
// CHECK-LABEL: func.func @gelu_like(
// CHECK:         %[[T:.*]] = call @gelu_like__t0(
// CHECK-NEXT:    %[[C:.*]] = tensor.collapse_shape %[[T]]
// CHECK-NEXT:    return %[[C]]
// CHECK:       func.func private @gelu_like__t0({{.*}}) -> tensor<1x8x2xf32>
// CHECK:         linalg.matmul
// CHECK:         tensor.expand_shape
// CHECK:         math.erf
// CHECK:         arith.mulf
// CHECK:         return
#id3 = affine_map<(b, i, j) -> (b, i, j)>
func.func @gelu_like(%a: tensor<8x4xf32>, %b: tensor<4x2xf32>) -> tensor<16xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x2xf32>
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<8x2xf32>) -> tensor<8x2xf32>
  %m = linalg.matmul ins(%a, %b : tensor<8x4xf32>, tensor<4x2xf32>) outs(%z : tensor<8x2xf32>) -> tensor<8x2xf32>
  %x = tensor.expand_shape %m [[0, 1], [2]] output_shape [1, 8, 2] : tensor<8x2xf32> into tensor<1x8x2xf32>
  %e3 = tensor.empty() : tensor<1x8x2xf32>
  %er = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<1x8x2xf32>) outs(%e3 : tensor<1x8x2xf32>) {
  ^bb0(%p: f32, %o: f32):
    %r = math.erf %p : f32
    linalg.yield %r : f32
  } -> tensor<1x8x2xf32>
  %y = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %er : tensor<1x8x2xf32>, tensor<1x8x2xf32>) outs(%e3 : tensor<1x8x2xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.mulf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<1x8x2xf32>
  %c = tensor.collapse_shape %y [[0, 1, 2]] : tensor<1x8x2xf32> into tensor<16xf32>
  return %c : tensor<16xf32>
}

// -----

// A multi-result element-wise op reading strided windows of a padded tensor and writing its
// results into the slices of one destination (Winograd's input transform): the pad, the windows,
// the destination's slices and the slice stores all join its task, so the pieces are written in
// place; the consumer matmul gets the assembled tensor.
// CHECK-LABEL: func.func @windows(
// CHECK:         %[[V:.*]] = call @windows__t0(%{{.*}}) : (tensor<1x4x4x2xf32>) -> tensor<2x1x2x2x2xf32>
// CHECK-NOT:     tensor.extract_slice
// CHECK-NOT:     tensor.insert_slice
// CHECK:         call @windows__t1(
// CHECK:       func.func private @windows__t0({{.*}}) -> tensor<2x1x2x2x2xf32> attributes {ansor.group = "linalg.generic"}
// CHECK:         %[[D:.*]] = tensor.empty() : tensor<2x1x2x2x2xf32>
// CHECK:         tensor.pad
// CHECK-COUNT-2: tensor.extract_slice %padded
// CHECK-COUNT-2: tensor.extract_slice %[[D]]
// CHECK:         linalg.generic
// CHECK-COUNT-2: tensor.insert_slice
// CHECK:         return
#id4 = affine_map<(n, h, w, c) -> (n, h, w, c)>
func.func @windows(%x: tensor<1x4x4x2xf32>, %w: tensor<2x8x3xf32>) -> tensor<2x1x3xf32> {
  %zero = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 0, 0, 0] high[0, 1, 1, 0] {
  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
    tensor.yield %zero : f32
  } : tensor<1x4x4x2xf32> to tensor<1x5x5x2xf32>
  %s0 = tensor.extract_slice %p[0, 0, 0, 0] [1, 2, 2, 2] [1, 2, 2, 1] : tensor<1x5x5x2xf32> to tensor<1x2x2x2xf32>
  %s1 = tensor.extract_slice %p[0, 1, 1, 0] [1, 2, 2, 2] [1, 2, 2, 1] : tensor<1x5x5x2xf32> to tensor<1x2x2x2xf32>
  %v0 = tensor.empty() : tensor<2x1x2x2x2xf32>
  %o0 = tensor.extract_slice %v0[0, 0, 0, 0, 0] [1, 1, 2, 2, 2] [1, 1, 1, 1, 1] : tensor<2x1x2x2x2xf32> to tensor<1x2x2x2xf32>
  %o1 = tensor.extract_slice %v0[1, 0, 0, 0, 0] [1, 1, 2, 2, 2] [1, 1, 1, 1, 1] : tensor<2x1x2x2x2xf32> to tensor<1x2x2x2xf32>
  %r:2 = linalg.generic {indexing_maps = [#id4, #id4, #id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%s0, %s1 : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) outs(%o0, %o1 : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %d: f32):
    %sum = arith.addf %a, %b : f32
    %dif = arith.subf %a, %b : f32
    linalg.yield %sum, %dif : f32, f32
  } -> (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>)
  %v1 = tensor.insert_slice %r#0 into %v0[0, 0, 0, 0, 0] [1, 1, 2, 2, 2] [1, 1, 1, 1, 1] : tensor<1x2x2x2xf32> into tensor<2x1x2x2x2xf32>
  %v = tensor.insert_slice %r#1 into %v1[1, 0, 0, 0, 0] [1, 1, 2, 2, 2] [1, 1, 1, 1, 1] : tensor<1x2x2x2xf32> into tensor<2x1x2x2x2xf32>
  %v3 = tensor.collapse_shape %v [[0], [1, 2, 3], [4]] : tensor<2x1x2x2x2xf32> into tensor<2x4x2xf32>
  %e = tensor.empty() : tensor<2x1x3xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x1x3xf32>) -> tensor<2x1x3xf32>
  %flat = tensor.collapse_shape %v3 [[0], [1, 2]] : tensor<2x4x2xf32> into tensor<2x8xf32>
  %f3 = tensor.expand_shape %flat [[0], [1, 2]] output_shape [2, 1, 8] : tensor<2x8xf32> into tensor<2x1x8xf32>
  %m = linalg.batch_matmul ins(%f3, %w : tensor<2x1x8xf32>, tensor<2x8x3xf32>) outs(%z : tensor<2x1x3xf32>) -> tensor<2x1x3xf32>
  return %m : tensor<2x1x3xf32>
}

// -----

// A reduction computed over whole tiles that overhang the output (Winograd's output transform on
// an odd size), collapsed and cropped: the crop joins the reduction's task as a view, and the
// element-wise consumer behind it joins too; the parent only calls.
// CHECK-LABEL: func.func @crop(
// CHECK-NEXT:    %[[R:.*]] = call @crop__t0(%{{.*}}) : (tensor<1x2x2x2x2x4xf32>) -> tensor<1x3x3x4xf32>
// CHECK-NEXT:    return %[[R]]
// CHECK:       func.func private @crop__t0({{.*}}) -> tensor<1x3x3x4xf32> attributes {ansor.group = "linalg.generic"}
// CHECK:         linalg.generic {{.*}}"reduction"
// CHECK:         tensor.collapse_shape
// CHECK:         tensor.extract_slice %{{.*}}[0, 0, 0, 0] [1, 3, 3, 4] [1, 1, 1, 1]
// CHECK:         arith.maximumf
// CHECK:         return
#m6 = affine_map<(n, h, p, w, q, k, a) -> (n, h, p, w, q, k)>
func.func @crop(%x: tensor<1x2x2x2x2x4xf32>) -> tensor<1x3x3x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e6 = tensor.empty() : tensor<1x2x2x2x2xf32>
  %e = tensor.empty() : tensor<1x2x2x2x2x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x2x2x2x4xf32>) -> tensor<1x2x2x2x2x4xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(n, h, p, w, q, k, a) -> (n, h, p, w, q, a)>, #m6],
      iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%x : tensor<1x2x2x2x2x4xf32>) outs(%z : tensor<1x2x2x2x2x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.addf %a, %o : f32
    linalg.yield %t : f32
  } -> tensor<1x2x2x2x2x4xf32>
  %y4 = tensor.collapse_shape %s [[0], [1, 2], [3, 4], [5]] : tensor<1x2x2x2x2x4xf32> into tensor<1x4x4x4xf32>
  %y = tensor.extract_slice %y4[0, 0, 0, 0] [1, 3, 3, 4] [1, 1, 1, 1] : tensor<1x4x4x4xf32> to tensor<1x3x3x4xf32>
  %o = tensor.empty() : tensor<1x3x3x4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(n, h, w, c) -> (n, h, w, c)>, affine_map<(n, h, w, c) -> (n, h, w, c)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%y : tensor<1x3x3x4xf32>) outs(%o : tensor<1x3x3x4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x3x3x4xf32>
  return %r : tensor<1x3x3x4xf32>
}

// -----

// Leading pieces (`t[a, b]` over all trailing dims: Winograd's output transform reading the
// batched products) are views in the consumer's task, not copies made in the parent; a group
// without an anchor is named after its multi-result op.
// CHECK-LABEL: func.func @pieces(
// CHECK:         %[[E:.*]] = tensor.expand_shape
// CHECK-NOT:     tensor.extract_slice
// CHECK:         call @pieces__t0(%[[E]]) : (tensor<2x2x6xf32>) -> tensor<6xf32>
// CHECK:       func.func private @pieces__t0(%{{.*}}: tensor<2x2x6xf32>) -> tensor<6xf32> attributes {ansor.group = "linalg.generic"}
// CHECK-COUNT-2: tensor.extract_slice %arg0[
// CHECK:         linalg.generic
func.func @pieces(%m: tensor<4x6xf32>) -> tensor<6xf32> {
  %m3 = tensor.expand_shape %m [[0, 1], [2]] output_shape [2, 2, 6] : tensor<4x6xf32> into tensor<2x2x6xf32>
  %p0 = tensor.extract_slice %m3[0, 1, 0] [1, 1, 6] [1, 1, 1] : tensor<2x2x6xf32> to tensor<6xf32>
  %p1 = tensor.extract_slice %m3[1, 0, 0] [1, 1, 6] [1, 1, 1] : tensor<2x2x6xf32> to tensor<6xf32>
  %e = tensor.empty() : tensor<6xf32>
  %r:2 = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
      iterator_types = ["parallel"]} ins(%p0, %p1 : tensor<6xf32>, tensor<6xf32>) outs(%e, %e : tensor<6xf32>, tensor<6xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %d: f32):
    %s = arith.addf %a, %b : f32
    %t = arith.subf %a, %b : f32
    linalg.yield %s, %t : f32, f32
  } -> (tensor<6xf32>, tensor<6xf32>)
  %o = tensor.empty() : tensor<6xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
      iterator_types = ["parallel"]} ins(%r#0, %r#1 : tensor<6xf32>, tensor<6xf32>) outs(%o : tensor<6xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m2 = arith.mulf %a, %b : f32
    linalg.yield %m2 : f32
  } -> tensor<6xf32>
  return %sum : tensor<6xf32>
}

// -----

// A leading piece read by an anchor stays in the parent (only element-wise ops take pieces in).
// CHECK-LABEL: func.func @piece_into_matmul(
// CHECK:         %[[P:.*]] = tensor.extract_slice %arg0[1, 0, 0] [1, 4, 4]
// CHECK:         call @piece_into_matmul__t0(%[[P]], %arg1)
func.func @piece_into_matmul(%w: tensor<2x4x4xf32>, %x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %p = tensor.extract_slice %w[1, 0, 0] [1, 4, 4] [1, 1, 1] : tensor<2x4x4xf32> to tensor<4x4xf32>
  %e = tensor.empty() : tensor<4x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m = linalg.matmul ins(%p, %x : tensor<4x4xf32>, tensor<4x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %m : tensor<4x4xf32>
}

// -----

// A fill of a reshaped fresh destination (torch-mlir's grouped convolution: the 1x8x4x4 result
// tensor expanded to 1x2x4x4x4) is an initialiser like any fill: cloned into the task, not an argument.
// CHECK-LABEL: func.func @grouped_conv_fill(
// CHECK:         call @grouped_conv_fill__t0(%arg0, %arg1)
// CHECK-LABEL: func.func private @grouped_conv_fill__t0(
// CHECK-SAME:      %{{.*}}: tensor<1x2x4x6x6xf32>, %{{.*}}: tensor<2x4x4x3x3xf32>)
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<1x8x4x4xf32>
// CHECK:         %[[X:.*]] = tensor.expand_shape %[[E]]
// CHECK:         linalg.fill ins(%{{.*}} : f32) outs(%[[X]] : tensor<1x2x4x4x4xf32>)
// CHECK:         linalg.conv_2d_ngchw_gfchw
func.func @grouped_conv_fill(%x: tensor<1x2x4x6x6xf32>, %w: tensor<2x4x4x3x3xf32>) -> tensor<1x8x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x8x4x4xf32>
  %ex = tensor.expand_shape %e [[0], [1, 2], [3], [4]] output_shape [1, 2, 4, 4, 4] : tensor<1x8x4x4xf32> into tensor<1x2x4x4x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%ex : tensor<1x2x4x4x4xf32>) -> tensor<1x2x4x4x4xf32>
  %c = linalg.conv_2d_ngchw_gfchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%x, %w : tensor<1x2x4x6x6xf32>, tensor<2x4x4x3x3xf32>) outs(%z : tensor<1x2x4x4x4xf32>) -> tensor<1x2x4x4x4xf32>
  %r = tensor.collapse_shape %c [[0], [1, 2], [3], [4]] : tensor<1x2x4x4x4xf32> into tensor<1x8x4x4xf32>
  return %r : tensor<1x8x4x4xf32>
}

// RUN: ansor-opt %s --split-input-file --ansor-gpu-mask-ragged-reductions --verify-diagnostics | FileCheck %s

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// A row max over 197 columns padded to 256: one more input, the column mask j < 197, and the
// padding combines -inf (maximumf's identity, not the padding value 0, which would win over an
// all-negative row). The op keeps its attributes.
// CHECK-DAG: #[[$ID1:.+]] = affine_map<(d0) -> (d0)>
// CHECK-DAG: #[[$COL:.+]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @row_max(
// CHECK: %[[E:.+]] = tensor.empty() : tensor<256xi1>
// CHECK: %[[M:.+]] = linalg.generic {indexing_maps = [#[[$ID1]]], iterator_types = ["parallel"]} outs(%[[E]] : tensor<256xi1>) attrs =  {ansor.ragged_mask}
// CHECK: %[[J:.+]] = linalg.index 0 : index
// CHECK: %[[C197:.+]] = arith.constant 197 : index
// CHECK: %[[OK:.+]] = arith.cmpi ult, %[[J]], %[[C197]] : index
// CHECK: linalg.yield %[[OK]] : i1
// CHECK: linalg.generic {indexing_maps = [#{{.+}}, #[[$COL]], #{{.+}}], iterator_types = ["parallel", "reduction"]} ins(%{{.+}}, %[[M]] : tensor<7x256xf32>, tensor<256xi1>) outs(%{{.+}} : tensor<7xf32>) attrs =  {ansor.op = 1 : i64}
// CHECK: ^bb0(%[[IN:.+]]: f32, %[[MK:.+]]: i1, %[[ACC:.+]]: f32):
// CHECK: %[[NINF:.+]] = arith.constant 0xFF800000 : f32
// CHECK: %[[V:.+]] = arith.select %[[MK]], %[[IN]], %[[NINF]] : f32
// CHECK: %[[R:.+]] = arith.maximumf %[[ACC]], %[[V]] : f32
// CHECK: linalg.yield %[[R]] : f32
func.func @row_max(%x: tensor<7x197xf32>, %init: tensor<7xf32>) -> tensor<7xf32> {
  %z = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 0] high[0, 59] {
  ^bb0(%i: index, %j: index):
    tensor.yield %z : f32
  } {ansor.ragged} : tensor<7x197xf32> to tensor<7x256xf32>
  %r = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%p : tensor<7x256xf32>) outs(%init : tensor<7xf32>) attrs = {ansor.op = 1 : i64} {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %acc, %in : f32
    linalg.yield %m : f32
  } -> tensor<7xf32>
  return %r : tensor<7xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// LayerNorm's sum of squares: the element-wise part is masked, the sum adds 0 past the end;
// a row min adds +inf; an integer max the lowest i32.
// CHECK-LABEL: func.func @sq_min_imax(
// CHECK: ^bb0(%{{.+}}: f32, %{{.+}}: f32, %[[OK:.+]]: i1, %{{.+}}: f32):
// CHECK: %[[SQ:.+]] = arith.mulf
// CHECK: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[V:.+]] = arith.select %[[OK]], %[[SQ]], %[[ZERO]] : f32
// CHECK: arith.addf %{{.+}}, %[[V]] : f32
// CHECK: ^bb0(%{{.+}}: f32, %[[OK2:.+]]: i1, %{{.+}}: f32):
// CHECK: %[[PINF:.+]] = arith.constant 0x7F800000 : f32
// CHECK: %[[W:.+]] = arith.select %[[OK2]], %{{.+}}, %[[PINF]] : f32
// CHECK: arith.minimumf %[[W]], %{{.+}} : f32
// CHECK: ^bb0(%{{.+}}: i32, %[[OK3:.+]]: i1, %{{.+}}: i32):
// CHECK: %[[IMIN:.+]] = arith.constant -2147483648 : i32
// CHECK: %[[U:.+]] = arith.select %[[OK3]], %{{.+}}, %[[IMIN]] : i32
// CHECK: arith.maxsi %{{.+}}, %[[U]] : i32
func.func @sq_min_imax(%x: tensor<7x1000xf32>, %mean: tensor<7xf32>, %n: tensor<7x1000xi32>, %init: tensor<7xf32>,
                       %iinit: tensor<7xi32>) -> (tensor<7xf32>, tensor<7xf32>, tensor<7xi32>) {
  %z = arith.constant 0.0 : f32
  %zi = arith.constant 0 : i32
  %p = tensor.pad %x low[0, 0] high[0, 24] {
  ^bb0(%i: index, %j: index):
    tensor.yield %z : f32
  } {ansor.ragged} : tensor<7x1000xf32> to tensor<7x1024xf32>
  %pi = tensor.pad %n low[0, 0] high[0, 24] {
  ^bb0(%i: index, %j: index):
    tensor.yield %zi : i32
  } {ansor.ragged} : tensor<7x1000xi32> to tensor<7x1024xi32>
  %q = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%p, %mean : tensor<7x1024xf32>, tensor<7xf32>) outs(%init : tensor<7xf32>) {
  ^bb0(%in: f32, %m: f32, %acc: f32):
    %d = arith.subf %in, %m : f32
    %sq = arith.mulf %d, %d : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<7xf32>
  %mn = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%p : tensor<7x1024xf32>) outs(%init : tensor<7xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.minimumf %in, %acc : f32
    linalg.yield %m : f32
  } -> tensor<7xf32>
  %mx = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%pi : tensor<7x1024xi32>) outs(%iinit : tensor<7xi32>) {
  ^bb0(%in: i32, %acc: i32):
    %m = arith.maxsi %acc, %in : i32
    linalg.yield %m : i32
  } -> tensor<7xi32>
  return %q, %mn, %mx : tensor<7xf32>, tensor<7xf32>, tensor<7xi32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// No binary combiner with a neutral element (a "last positive value" scan): the padding keeps
// the accumulator.
// CHECK-LABEL: func.func @no_identity(
// CHECK: ^bb0(%{{.+}}: f32, %[[OK:.+]]: i1, %[[ACC:.+]]: f32):
// CHECK: %[[R:.+]] = arith.select %{{.+}}, %{{.+}}, %[[ACC]] : f32
// CHECK: %[[Y:.+]] = arith.select %[[OK]], %[[R]], %[[ACC]] : f32
// CHECK: linalg.yield %[[Y]] : f32
func.func @no_identity(%x: tensor<7x197xf32>, %init: tensor<7xf32>) -> tensor<7xf32> {
  %z = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 0] high[0, 59] {
  ^bb0(%i: index, %j: index):
    tensor.yield %z : f32
  } {ansor.ragged} : tensor<7x197xf32> to tensor<7x256xf32>
  %r = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%p : tensor<7x256xf32>) outs(%init : tensor<7xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %pos = arith.cmpf ogt, %in, %z : f32
    %r = arith.select %pos, %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<7xf32>
  return %r : tensor<7xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// Left alone: a reduction reading an unmarked pad (a convolution's zero padding is data), and
// an element-wise op reading a marked one (its results past the end are never stored).
// CHECK-LABEL: func.func @untouched(
// CHECK-NOT: ansor.ragged_mask
// CHECK-NOT: arith.select %{{.+}}, %{{.+}}, %{{.+}} : f32
// CHECK: return
func.func @untouched(%x: tensor<7x197xf32>, %init: tensor<7xf32>, %o: tensor<7x256xf32>) -> (tensor<7xf32>, tensor<7x256xf32>) {
  %z = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 0] high[0, 59] {
  ^bb0(%i: index, %j: index):
    tensor.yield %z : f32
  } : tensor<7x197xf32> to tensor<7x256xf32>
  %r = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%p : tensor<7x256xf32>) outs(%init : tensor<7xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %acc, %in : f32
    linalg.yield %m : f32
  } -> tensor<7xf32>
  %q = tensor.pad %x low[0, 0] high[0, 59] {
  ^bb0(%i: index, %j: index):
    tensor.yield %z : f32
  } {ansor.ragged} : tensor<7x197xf32> to tensor<7x256xf32>
  %e = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%q : tensor<7x256xf32>) outs(%o : tensor<7x256xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = math.exp %in : f32
    linalg.yield %m : f32
  } -> tensor<7x256xf32>
  return %r, %e : tensor<7xf32>, tensor<7x256xf32>
}

// -----

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>

// Ragged padding at the low end of a reduction loop: not a row's tail, refused.
func.func @low_padding(%x: tensor<7x197xf32>, %init: tensor<7xf32>) -> tensor<7xf32> {
  %z = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 3] high[0, 56] {
  ^bb0(%i: index, %j: index):
    tensor.yield %z : f32
  } {ansor.ragged} : tensor<7x197xf32> to tensor<7x256xf32>
  // expected-error @+1 {{ansor-gpu-mask-ragged-reductions: ragged padding of a reduction loop that is not static high padding of a plain loop dim}}
  %r = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%p : tensor<7x256xf32>) outs(%init : tensor<7xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %acc, %in : f32
    linalg.yield %m : f32
  } -> tensor<7xf32>
  return %r : tensor<7xf32>
}

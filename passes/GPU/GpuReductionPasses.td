//===- GpuReductionPasses.td - GPU reduction rewrites --------------*- tablegen -*-===//
//
// Rewrites the transform scripts of the GPU cross-thread reduction rule
// (python/ansor/targets/cuda/reduction.py) apply to the payload before tiling it.
//
//===----------------------------------------------------------------------------===//
#ifndef ANSOR_GPU_REDUCTION_PASSES_TD
#define ANSOR_GPU_REDUCTION_PASSES_TD

include "mlir/Pass/PassBase.td"

def GpuCollapseReductionLoops : Pass<"ansor-gpu-collapse-reduction-loops"> {
  let summary = "Merge the reduction loops of a linalg.generic into one loop";
  let description = [{
    The cross-thread reduction rule splits one column loop over a block's threads; a global
    average pool (a sum over `h, w`) or a norm over `m x n` reduces over two or more. Every
    `linalg.generic` with `k >= 2` reduction loops is rebuilt with those loops merged into one
    loop of their product's extent, at the first one's position; each constant-0 result of its
    output maps (a kept unit dim: `(n, c, h, w) -> (n, c, 0, 0)`) becomes a new unit parallel
    loop, placed before the merged loop (`tile_reduction_using_forall` aborts on a result map
    with a constant). Each input indexed by the reduction loops is read through a
    `tensor.collapse_shape` merging the dims they index; `linalg.index` of a merged loop becomes
    a division/remainder of the merged index. The op keeps its discardable attributes
    (`ansor.op`), operands' values and result types.

    The merge is exact only when the reduction loops are consecutive and every input either
    indexes none of them or all of them as consecutive results in loop order, by plain dims
    (maps otherwise projected permutations; inputs may also hold constants); any other generic
    with several reduction loops fails the pass with a one-line error
    (`cannot merge the reduction loops: ...`). (Run it after
    `linalg-fuse-elementwise-ops`, which expands such a merge back through the reshape.)

    ```mlir
    // before
    %s = linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>,
                                          affine_map<(n, c, h, w) -> (n, c, 0, 0)>],
                         iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
        ins(%x : tensor<1x8x7x7xf32>) outs(%f : tensor<1x8x1x1xf32>) {ansor.op = 1 : i64} ...
    // after
    %xc = tensor.collapse_shape %x [[0], [1], [2, 3]] : tensor<1x8x7x7xf32> into tensor<1x8x49xf32>
    %s = linalg.generic {indexing_maps = [affine_map<(n, c, u0, u1, r) -> (n, c, r)>,
                                          affine_map<(n, c, u0, u1, r) -> (n, c, u0, u1)>],
                         iterator_types = ["parallel", "parallel", "parallel", "parallel",
                                           "reduction"]}
        ins(%xc : tensor<1x8x49xf32>) outs(%f : tensor<1x8x1x1xf32>) {ansor.op = 1 : i64} ...
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // ANSOR_GPU_REDUCTION_PASSES_TD

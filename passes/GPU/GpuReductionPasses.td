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
    with a constant). A reduction to a scalar (every loop a reduction, every result rank 0: a
    whole tensor's sum or max), even over a single loop, gets a unit parallel loop first (the
    cross-thread reduction rule's one row): its inits are read as `tensor<1xT>` through a
    `tensor.expand_shape` and its results collapsed back to `tensor<T>`; a `linalg.generic`
    reading such a scalar (a 0-result map) and having a unit parallel loop reads the
    `tensor<1xT>` row at its first unit loop instead (a log-softmax of one row: the output then
    fuses with the reduction into the row's block). Each input indexed by
    the reduction loops (two or more) is read through a
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

def GpuBubbleUpResultSlices : Pass<"ansor-gpu-bubble-up-result-slices"> {
  let summary = "Compute only the slice of a linalg op's result that the function returns";
  let description = [{
    A task that returns a slice of a row-wise op's result (ViT's final LayerNorm, then the
    class token: row 0 of 197) has the cross-thread reduction rule compute every row into an
    intermediate buffer the slice then reads (refused on the GPU: a host allocation between
    kernels). Upstream's bubble-up patterns move each `tensor.extract_slice` above its producer,
    through `tensor.collapse_shape` / `tensor.expand_shape` (tensor) and through a linalg op with
    one use and one init (linalg: the op cloned on its operands' slices, the loops that do not
    index the result kept whole, so reductions stay exact); discardable attributes (`ansor.op`)
    stay on the clones. The rule's script runs it first; the ops then compute the slice's rows.

    ```mlir
    // before
    %y = linalg.generic {...} ins(%x : tensor<197x192xf32>) outs(%e : tensor<197x192xf32>) {ansor.op = 2 : i64}
    %s = tensor.extract_slice %y[0, 0] [1, 192] [1, 1] : tensor<197x192xf32> to tensor<1x192xf32>
    // after
    %xs = tensor.extract_slice %x[0, 0] [1, 192] [1, 1] : tensor<197x192xf32> to tensor<1x192xf32>
    %s = linalg.generic {...} ins(%xs : tensor<1x192xf32>) outs(...) {ansor.op = 2 : i64}
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect", "::mlir::affine::AffineDialect"];
}

def GpuPackRowsIntoBlocks : Pass<"ansor-gpu-pack-rows-into-blocks"> {
  let summary = "Run R rows of a one-row-per-block kernel in one block, a row group each";
  let description = [{
    The cross-thread reduction rule maps one row per block: a launch of grid (G, gy, gz) and
    block (T, 1, 1) whose blocks are independent, the row being block id x. Short rows leave
    such a block little work; the rows-per-block knob (`python/ansor/targets/cuda/reduction.py`)
    marks the launch `ansor.rows_per_block = R`, and this pass packs R of those blocks into one:
    grid (G / R, gy, gz), block (T, R, 1). Row group `y = threadIdx.y` of block `b` runs what
    block `b R + y` ran; `threadIdx.y` and `blockDim.y` of before read 0 and 1, `gridDim.x`
    reads G. (R must divide G: spare row groups redoing the last row would race where a row's
    result is read back and combined in global memory, as a row sum's is.) Every shared buffer `memref<1 x ..., 3>` (a workgroup attribution: the
    rule's buffers have a leading unit row dim) becomes `memref<R x ..., 3>` and each access
    (load, store, vector transfer, dynamic-offset subview; a linalg op on the whole buffer takes
    its slice) moves to row `y`, so row groups never share a slot. With T a multiple of 32 each
    warp lies in one row group, so the warp shuffles of `ansor-gpu-block-reductions-to-shuffles`
    stay within a row; a barrier is reached by every thread when no control flow around it
    depends on the row or on loaded data, which the pass checks.

    The attribute is removed; R = 1 leaves the launch as it is. A launch it cannot pack
    (non-constant sizes, a block not (T, 1, 1), T not a multiple of 32, R not dividing G,
    R T > 1024, a barrier
    under row-dependent control flow, a shared buffer without a leading unit dim, used
    otherwise or still allocated in the body) fails the pass with a one-line error (`cannot pack R rows per block: ...`).

    Before (R = 2, G = 8):
    ```mlir
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c8, ...) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, ...)
        workgroup(%S : memref<1x64xf32, 3>) {
      %v = memref.load %X[%bx, %tx] ...   memref.store %v, %S[%c0, %tx] ...
    } {ansor.rows_per_block = 2 : i64}
    ```
    After: grid x `%c4`, block y `%c2`; `%row = %bx' * 2 + %ty'`; `memref.load %X[%row, %tx]`,
    `memref.store %v, %S[%c0 + %ty', %tx]` with `%S : memref<2x64xf32, 3>`.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
                           "::mlir::memref::MemRefDialect"];
}

#endif // ANSOR_GPU_REDUCTION_PASSES_TD

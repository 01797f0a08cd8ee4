//===- GpuOptPasses.td - GPU kernel-optimisation rewrites ----------*- tablegen -*-===//
//
// The rewrites a fast SGEMM-style kernel needs, run on `gpu.launch` bodies on memrefs (before
// gpu-kernel-outlining), between the transform script and the NVVM lowering. Ported from the
// Python rewrites of the CUDA lowering, behaviour unchanged (see tools/gpu_ptx_corpus.py
// for the equivalence check against them).
//
//===----------------------------------------------------------------------------===//
#ifndef ANSOR_GPU_OPT_PASSES_TD
#define ANSOR_GPU_OPT_PASSES_TD

include "mlir/Pass/PassBase.td"

def GpuHoistAccumulators : Pass<"ansor-gpu-hoist-accumulators"> {
  let summary = "Keep a thread's accumulator tiles in registers across the reduction loop";
  let description = [{
    Inside every `gpu.launch`, for every `scf.for` (innermost first, so a pair hoisted out of a
    loop may then leave its parent), hoists the `vector.transfer_read` / `vector.transfer_write`
    pairs of accumulator tiles out of the loop: the read moves before the loop and becomes the
    initial value of a new iteration argument, the write moves after the loop and stores the
    loop's new result. Without it every iteration of the shared-memory reduction loop reloads and
    stores the accumulators (global memory or a stack buffer).

    First, within each loop body, a read of the view the last top-level write wrote (same
    indices, map and type, no possibly overlapping access in between; not shared memory) takes
    the written value, and a write overwritten before anything reads it is erased: a body that
    auto-unrolling left holding several reduction steps then reads and writes each accumulator
    once. (Without this, such a convolution candidate kept a global read-modify-write per step;
    its ~7000 accesses in one loop made LLVM's LoopLoadElimination take 18 of its 22 s to PTX.)

    A pair is one read and one write at the top level of the body, on the same view defined
    outside the loop, at the same loop-invariant indices and permutation map, write after read,
    writing the type read. Several pairs may share one view at distinct index tuples (one read and
    one write each, all of one vector type): the rows of a guarded ragged output tile, which
    virtual-thread chunks side by side read and write at their own columns (without this, such a
    tile kept a global read-modify-write of every accumulator per shared-memory step). Any other
    access to the same underlying buffer inside the loop must be
    a transfer on another view that is either a statically disjoint subview (static offsets and
    sizes, unit strides, boxes not intersecting) or another accumulator tile (a subview of the
    same type, itself read and written at the top level): tiling makes one thread's register
    tiles disjoint.

    A pair on shared memory (a fused consumer's accumulator tile, which other threads fill before
    the loop and read after it) hoisted out of a loop that holds a `gpu.barrier` gets a
    `gpu.barrier` before its read and one after its write: the loop's own barriers no longer order
    them against the other threads (`ansor-gpu-remove-redundant-barriers` drops those that order
    nothing).

    Before:
    ```mlir
    scf.for %k = %c0 to %c64 step %c8 {
      %acc = vector.transfer_read %C[%c0, %c0], %pad : memref<4x4xf32>, vector<4x4xf32>
      %r = vector.contract ... %a, %b, %acc
      vector.transfer_write %r, %C[%c0, %c0] : vector<4x4xf32>, memref<4x4xf32>
    }
    ```
    After:
    ```mlir
    %acc0 = vector.transfer_read %C[%c0, %c0], %pad : memref<4x4xf32>, vector<4x4xf32>
    %res = scf.for %k = %c0 to %c64 step %c8 iter_args(%acc = %acc0) -> (vector<4x4xf32>) {
      %r = vector.contract ... %a, %b, %acc
      scf.yield %r : vector<4x4xf32>
    }
    vector.transfer_write %res, %C[%c0, %c0] : vector<4x4xf32>, memref<4x4xf32>
    ```
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::vector::VectorDialect"];
}

def GpuForwardInitialValues : Pass<"ansor-gpu-forward-initial-values"> {
  let summary = "Forward an accumulator's initial value to its read-back in the same thread";
  let description = [{
    At the top level of every `gpu.launch` body: a `vector.transfer_read` of the view a previous
    top-level `vector.transfer_write` wrote (same indices and permutation map, same vector type),
    with no write to that buffer in between (nested ops included; barriers do not matter, the
    thread reads back its own write) other than writes of the same splat constant (a ragged
    tile's masked rows, whose clamped rows may coincide), is replaced by the written value. When
    the same tile is written again later at the same indices and nothing in between reads the
    buffer, the initial write is erased too. A read with no such write of its own view gets a
    splat of the buffer's fill when every earlier write to the buffer is a splat of that one
    value and a barrier follows the last of them (a fused fill mapped to the threads unlike the
    accumulators, e.g. virtual-thread chunks; this assumes a block reads back only what its own
    fill covered, which a fused fill of the block's output tile does). This drops a round trip
    through global memory per accumulator: the fused `linalg.fill` of the output is written,
    read back before the reduction loop, and finally overwritten.

    Before:
    ```mlir
    vector.transfer_write %zero, %C[%i, %j] : vector<4xf32>, memref<64x64xf32>
    %acc = vector.transfer_read %C[%i, %j], %pad : memref<64x64xf32>, vector<4xf32>
    %res = scf.for ... iter_args(%a = %acc) ...
    vector.transfer_write %res, %C[%i, %j] : vector<4xf32>, memref<64x64xf32>
    ```
    After:
    ```mlir
    %res = scf.for ... iter_args(%a = %zero) ...
    vector.transfer_write %res, %C[%i, %j] : vector<4xf32>, memref<64x64xf32>
    ```
  }];
  let dependentDialects = ["::mlir::vector::VectorDialect"];
}

def GpuReuseReadonlyLoads : Pass<"ansor-gpu-reuse-readonly-loads"> {
  let summary = "One load per address of a buffer the kernel never writes, across barriers";
  let description = [{
    In every block of a `gpu.launch` body: a `vector.transfer_read`, `vector.load` or
    `memref.load` identical to an earlier one of the same block (same op, operands, attributes
    and result types) reads the same values when nothing in the launch writes the buffer it
    reads (its root memref: no store, transfer_write, or op of unknown effects on it anywhere in
    the launch); its uses take the earlier result and it is erased. CSE does not do this: the
    barriers between a row kernel's phases (the max, the exp and sum, the output) may write
    memory. Kernel arguments are separate device allocations (`ansor-gpu-check-host-allocs`), so
    a buffer's root tells its writers apart. A softmax row's thread then loads its columns once
    instead of once per phase, and the `exp(x - max)` of the sum and of the output become one
    (the `cse` after it).

    Before:
    ```mlir
    %a = memref.load %x[%i] : memref<197xf32>
    gpu.barrier
    %b = memref.load %x[%i] : memref<197xf32>
    ```
    After:
    ```mlir
    %a = memref.load %x[%i] : memref<197xf32>
    gpu.barrier
    (uses of %b use %a)
    ```
  }];
}

def GpuRemoveRedundantBarriers : Pass<"ansor-gpu-remove-redundant-barriers"> {
  let summary = "Drop gpu.barrier ops that order no conflicting buffer accesses";
  let description = [{
    Removes, one at a time until none qualifies (in walk order, restarting after each removal),
    every `gpu.barrier` inside a `gpu.launch` such that, with the segments before and after it
    running up to the previous and the next barrier of the same block:

    * the segment before accesses no buffer and starts at a barrier or at the top of the kernel;
    * or it is the last op of the kernel's body before `gpu.terminator`;
    * or neither segment contains a nested barrier, the segment after ends at a barrier, no
      buffer written by one segment is accessed by the other (buffers are the roots of memref
      views; an op with memref operands that is not a known load or store both reads and writes
      them), and the segment before starts at a barrier, at the top of the kernel, or (in a loop
      body) the block's last-but-one op is a barrier (so the previous iteration is ordered).

    E.g. the barrier between the cooperative copies of two different shared tiles.

    Before:
    ```mlir
    gpu.barrier
    vector.transfer_write %a, %sA[...] : vector<4xf32>, memref<8x32xf32, 3>
    gpu.barrier
    vector.transfer_write %b, %sB[...] : vector<4xf32>, memref<32x8xf32, 3>
    gpu.barrier
    ```
    After:
    ```mlir
    gpu.barrier
    vector.transfer_write %a, %sA[...] : vector<4xf32>, memref<8x32xf32, 3>
    vector.transfer_write %b, %sB[...] : vector<4xf32>, memref<32x8xf32, 3>
    gpu.barrier
    ```
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def GpuPrefetchGlobalReads : Pass<"ansor-gpu-prefetch-global-reads"> {
  let summary = "Software-pipeline the global reads of cooperative shared-memory copies";
  let description = [{
    In an `scf.for` inside a `gpu.launch` with constant bounds and at least two iterations
    (ub - lb > step), a `vector.transfer_read` of a non-shared buffer at the top level of the body,
    whose only use is a `vector.transfer_write` to shared memory (address space 3 or
    `#gpu.address_space<workgroup>`) at the top level of the same body, whose operands depend on
    nothing of the loop but its induction variable through pure index/view ops at the top level
    of the body, and whose buffer nothing in the loop writes, is issued one iteration ahead:
    the first read (index ops cloned with iv = lb) before the loop, carried in a new iteration
    argument; the next one (iv' = min(iv + step, ub - step), so the last iteration re-reads its
    own tile, in bounds) right after the current value was stored. Its latency then overlaps the
    computation on the current tile. All such reads of a loop share one new loop.

    Before:
    ```mlir
    scf.for %k = %c0 to %c64 step %c8 {
      %g = vector.transfer_read %A[%i, %k], %pad : memref<64x64xf32>, vector<4xf32>
      vector.transfer_write %g, %sA[%t, %c0] : vector<4xf32>, memref<8x8xf32, 3>
      ...
    }
    ```
    After:
    ```mlir
    %g0 = vector.transfer_read %A[%i, %c0], %pad : memref<64x64xf32>, vector<4xf32>
    scf.for %k = %c0 to %c64 step %c8 iter_args(%g = %g0) -> (vector<4xf32>) {
      vector.transfer_write %g, %sA[%t, %c0] : vector<4xf32>, memref<8x8xf32, 3>
      %n = arith.addi %k, %c8 : index
      %l = arith.subi %c64, %c8 : index
      %k1 = arith.minsi %n, %l : index
      %g1 = vector.transfer_read %A[%i, %k1], %pad : memref<64x64xf32>, vector<4xf32>
      ...
      scf.yield %g1 : vector<4xf32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

def GpuPipelineSharedCopies : Pass<"ansor-gpu-pipeline-shared-copies"> {
  let summary = "Multi-buffer the shared-memory tiles of a reduction loop (cp.async pipeline)";
  let description = [{
    In every `gpu.launch` whose `ansor.pipeline_stages` attribute (set by the GPU sketch's
    `stages` knob; the `stages` option overrides it) is N >= 2, an `scf.for` with constant
    bounds and at least two iterations whose top-level stores to shared memory are all
    `vector.transfer_write`s into views (memref.subview chains, defined outside the loop) of
    workgroup attributions, of values computed in the iteration from global memory (pure ops
    and reads of buffers the loop does not write, at the top level of the body, depending on
    nothing of the loop but its induction variable), is pipelined over N copies of those
    buffers: each buffer gets a leading dimension of N (its other uses must be reads inside
    the loop), the first N-1 tiles are stored into stages 0..N-2 before the loop (after a
    barrier: the buffers may still be read by an earlier run of the loop), and iteration i
    waits for tile i, meets one barrier (the body's own barriers are dropped), issues tile
    i+N-1 (its iv clamped to the last iteration: in bounds, and never into the stage being read)
    into stage (i+N-1) mod N, and computes on stage i mod N. One barrier per iteration instead
    of two.

    A copy of a plain global `vector.transfer_read` (in bounds, minor identity, a vector of
    shape 1x..x1xn) becomes `nvgpu.device_async_copy` (cp.async) of the largest chunk of 4, 8
    or 16 bytes that divides the vector and whose alignment at both ends is proven (powers of
    two dividing the indices: constants, affine.apply, add/mul, loop induction variables; the
    roots are function arguments and attributions, at least 16-byte aligned; 16 bytes bypass
    L1), one `nvgpu.device_async_create_group` per tile and `nvgpu.device_async_wait`
    {numGroups = N-2} before the barrier (all groups after the loop). Other copies (guarded
    reads of a padded input: clamped loads + selects) go through registers: loaded after the
    barrier, stored into the next stage at the end of the body. A loop with any other write to
    shared memory, a nested barrier or another use of the buffers is left alone. Run after
    `ansor-gpu-remove-redundant-barriers` and before `ansor-gpu-prefetch-global-reads`.

    Before (N = 2):
    ```mlir
    scf.for %k = %c0 to %c64 step %c8 {
      %g = vector.transfer_read %A[%i, %k], %pad {in_bounds = [true]} : memref<64x64xf32>, vector<4xf32>
      vector.transfer_write %g, %sA[%t, %c0] {in_bounds = [true]} : vector<4xf32>, memref<8x8xf32, 3>
      gpu.barrier
      ... reads of %sA ...
      gpu.barrier
    }
    ```
    After:
    ```mlir
    gpu.barrier
    %c = nvgpu.device_async_copy %A[%i, %c0], %sA2[%c0, %t, %c0], 4 {bypassL1} : memref<64x64xf32> to memref<2x8x8xf32, 3>
    %g0 = nvgpu.device_async_create_group %c
    scf.for %k = %c0 to %c64 step %c8 {
      %cur = memref.subview %sA2[(%k / 8) mod 2, 0, 0] [1, 8, 8] [1, 1, 1] : ...
      %nxt = memref.subview %sA2[(%k / 8 + 1) mod 2, 0, 0] [1, 8, 8] [1, 1, 1] : ...
      nvgpu.device_async_wait %g0 {numGroups = 0 : i32}
      gpu.barrier
      %k1 = arith.minsi (%k + 8), %c56 : index
      %c1 = nvgpu.device_async_copy %A[%i, %k1], %nxt[%t, %c0], 4 {bypassL1} : ...
      %g1 = nvgpu.device_async_create_group %c1
      ... reads of %cur ...
    }
    nvgpu.device_async_wait %g0 {numGroups = 0 : i32}
    ```
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"0",
           "Shared buffers per tile (0: the launch's `ansor.pipeline_stages`; < 2: nothing)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect",
                           "::mlir::nvgpu::NVGPUDialect", "::mlir::gpu::GPUDialect",
                           "::mlir::vector::VectorDialect"];
}

def GpuSwizzleBlocks : Pass<"ansor-gpu-swizzle-blocks"> {
  let summary = "Launch blocks in groups of block rows (L2 reuse of both operands' panels)";
  let description = [{
    For a `gpu.launch` with a constant 2-D grid (gx, gy, 1), gx >= 2, gy >= 2 and gy a multiple
    of `group`, that uses `gpu.block_id`: the linear block id l = y * gx + x is remapped to
    y' = (l / (group * gx)) * group + (l % (group * gx)) % group,
    x' = (l % (group * gx)) / group (column-major inside a group of `group` block rows), and
    every `gpu.block_id x` / `y` is replaced by x' / y'. The blocks resident at one time then
    share the panels of both operands in L2. A bijection of block ids, so any kernel stays
    correct. `group` <= 1 (the default 0) turns the pass off; the CUDA lowering passes
    `ANSOR_CUDA_SWIZZLE`.

    Before:
    ```mlir
    gpu.launch blocks(...) in (%gx = %c4, %gy = %c8, %gz = %c1) ... {
      %x = gpu.block_id x
      %y = gpu.block_id y
      ...
    }
    ```
    After (`group=8`): `%x`, `%y` computed from fresh `gpu.block_id x`, `y` ops at the top of the
    body with `arith.muli/addi/divui/remui`.
  }];
  let options = [
    Option<"group", "group", "int64_t", /*default=*/"0",
           "Block rows per group; 0 or 1: off (SWIZZLE_GROUP in the CUDA lowering)">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect"];
}

def GpuPrivateAllocsToStack : Pass<"ansor-gpu-private-allocs-to-stack"> {
  let summary = "Small per-thread memref.alloc inside gpu.launch -> memref.alloca";
  let description = [{
    Bufferization gives a value every thread of a block computes the same way (a row's sum after
    a cross-thread reduction: each thread merges the partial sums itself) a `memref.alloc` inside
    the launch; the NVVM lowering has no device `malloc` we want. Every `memref.alloc` inside a
    `gpu.launch` of a static shape in the default memory space whose size is at most `max-bytes`
    (element bytes: 1, 2, 4, 8 for i8..i64, f16, bf16, f32, f64, n times that for a 1-D
    `vector<n x T>`, 8 for any other element type) becomes a `memref.alloca` of the same type
    (no alignment attribute), and its `memref.dealloc`s are erased. LLVM promotes it to
    registers.

    Before:
    ```mlir
    %m = memref.alloc() : memref<1xf32>
    ...
    memref.dealloc %m : memref<1xf32>
    ```
    After:
    ```mlir
    %m = memref.alloca() : memref<1xf32>
    ```
  }];
  let options = [
    Option<"maxBytes", "max-bytes", "int64_t", /*default=*/"1024",
           "Largest buffer (bytes) moved to the stack (MAX_PRIVATE_BYTES)">
  ];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def GpuBlockReductionsToShuffles : Pass<"ansor-gpu-block-reductions-to-shuffles"> {
  let summary = "Merge a block's partial results with warp shuffles instead of a serial reduce";
  let description = [{
    `tile_reduction_using_forall` over the threads leaves, after bufferization and the mapping,
    every thread's partial result in a shared buffer `S[1, .., T]` (slot = `threadIdx.x`), a
    barrier, and a `linalg.reduce` of `S` over its last dimension into a `D[1, .., 1]` that every
    thread runs on its own (T shared loads and a serial chain of T combines per thread).

    For a launch with a constant block (T, 1, 1), T a multiple of 32 or a power of two, such a
    `linalg.reduce` (one binary combiner of its two block arguments) becomes: each thread loads
    its slot and `D`'s initial value (read before the barrier below: a thread of another warp
    may store to `D` as soon as it is past it, and `D` may be a row sum's output in global
    memory); a butterfly of `gpu.shuffle xor` (offsets width/2 .. 1, width = min(T, 32))
    combines within the warp; if T > 32 each warp's lane 0 stores the warp's result in its own
    slot, a `gpu.barrier`, and every thread combines the T/32 warp results (slots 0, 32, ..., in
    warp order); finally the result is combined with `D`'s initial value and stored to `D`.
    Combines keep the body's operand order (input, accumulator) and attributes. Other
    reductions are left as they are (still correct).

    In a launch packing rows per block (`ansor.rows_per_block` > 1: the row sketch's `rows`
    knob, packed later by `ansor-gpu-pack-rows-into-blocks`), the barrier before the reduction
    (the one after the threads' partial results) is dropped too where all it orders is each
    thread's write of its own slot (`S[0, .., threadIdx.x]`, through a subview) before its own
    read of it: the ops since the previous barrier touch `S` only that way, the ops up to the
    next one (ops on thread-private buffers between the barrier and the reduction included) not
    at all, and no other buffer, `D` included, written on one side is accessed on the other.
    Before that, a `linalg.fill` of `D` earlier in the block with no access to `D` in between
    (a row sum's output in global memory, filled by every thread) is forwarded as `D`'s
    initial value and erased: the final store overwrites all of `D`, and no thread then writes
    `D` before its result (so no barrier has to order a slow thread's fill before a fast one's
    result). With 32 threads a row the row groups then never wait for each other.
    One-row-per-block launches keep every fill and barrier.

    Before:
    ```mlir
    linalg.reduce ins(%S : memref<1x64xf32, 3>) outs(%D : memref<1xf32>) dimensions = [1]
      (%in: f32, %acc: f32) { %s = arith.addf %in, %acc : f32  linalg.yield %s : f32 }
    ```
    After: `memref.load %S[%c0, %tid]`, `memref.load %D[%c0]`, 5 x (`gpu.shuffle xor` + `arith.addf`), lane 0 of each
    warp stores to `%S[%c0, %tid]`, `gpu.barrier`, loads of `%S[%c0, %c0]` and `%S[%c0, %c32]`
    combined, then `%D[%c0] = addf(result, initial value)`.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
                           "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect"];
}

def GpuGuardPaddedReads : Pass<"ansor-gpu-guard-padded-reads", "::mlir::ModuleOp"> {
  let summary = "Fuse every tensor.pad producer into its readers as guarded loads";
  let description = [{
    Bufferization turns `tensor.pad` into a host buffer filled with the padding value and a copy
    of the source into its interior. In every top-level `func.func`, such a buffer (static-shape
    non-workgroup `memref.alloc`; a `linalg.fill` or constant `linalg.map` fill; one static
    unit-stride `memref.subview` used only as the target of one `memref.copy` from a same-rank
    source; fill, copy and alloc in one block, fill first) is removed: each `memref.load` and
    `vector.transfer_read` of it (through `memref.subview`s) reads the source at the shifted
    indices clamped into it, and selects the padding value where an in-bounds test on the padded
    dims fails (`arith.select`, no branch: unrolled tiles stay one block); a
    vector read is split into 1-D pieces along its last dim, or into elements where that dim is
    padded or strided; a linalg op or a `memref.copy` that only reads the buffer (a whole tile's
    copy to shared memory, a one-element tile's copy) is lowered to loops first. Any other use fails the pass with the message the Python
    rewrite raised.

    A result computed into a padded buffer (ragged GPU tiles: the tiled op padded to a multiple
    of the block tile, `targets/cuda/rules.py`) is the other side: a static non-workgroup
    `memref.alloc` whose zero-offset, unit-stride `memref.subview` is copied (`memref.copy`, same
    block) into a destination of the subview's shape after the kernels. Each load, store and
    transfer of it (inside a `gpu.launch` or not) becomes 1-D transfers along one row of the destination
    (a rank-reducing `memref.subview` per row, so `ansor-gpu-hoist-accumulators` still pairs a
    thread's accumulator reads and writes), `in_bounds = [false]`: lanes past the row's end are
    masked (masked loads and stores, no branch). A row outside the destination is clamped into
    it for the view and accessed at the row's end, so every lane is masked. The buffer, the
    copy and its view are removed, and so are a copy into the interior from an uninitialised
    buffer (a padded `tensor.empty`) and a fill outside the kernels where nothing reads the
    buffer (the kernels write every element copied out); any other use fails the pass. A linalg
    op or `memref.copy` accessing the buffer inside the kernels (a one-element tile left as a
    copy) is lowered to loops first, and a load whose value nothing uses (a lowered copy's load
    of its output) is dropped, not counted as a read of the fill.

    ```mlir
    // before
    %buf = memref.alloc() : memref<128x256xf32>
    gpu.launch ... {
      vector.transfer_write %acc, %tile[%c0, %c0] {in_bounds = [true, true]}
          : vector<4x4xf32>, memref<4x4xf32, strided<[256, 1], offset: ?>>
    }
    %in = memref.subview %buf[0, 0] [97, 197] [1, 1] : ...
    memref.copy %in, %out : memref<97x197xf32, strided<[256, 1]>> to memref<97x197xf32>
    // after: per row r of the tile, with %i = the row's index
    %ok = arith.cmpi ult, %i, %c97 : index
    %row = memref.subview %out[min(%i, 96), 0] [1, 197] [1, 1] : ... to memref<197xf32, ...>
    %j = arith.select %ok, %col, %c197 : index
    vector.transfer_write %acc_r, %row[%j] {in_bounds = [false]} : vector<4xf32>, memref<197xf32, ...>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect", "::mlir::vector::VectorDialect"];
}

def GpuFoldRaggedPads : Pass<"ansor-gpu-fold-ragged-pads"> {
  let summary = "Read a padded op's padded result where a ragged consumer pads its slice";
  let description = [{
    With ragged GPU tiles (`targets/cuda/rules.py`) an op and its fused element-wise consumer
    are both padded to a multiple of the block tile; the consumer then reads
    `tensor.pad(tensor.extract_slice(%padded_result))`. Each `tensor.pad` marked `ansor.ragged`
    (by the script) whose source is a zero-offset, unit-stride `tensor.extract_slice` of a value
    of the pad's own type, padded only at the high end, is replaced by that value: the padding
    region then holds the op's out-of-range results instead of the padding value, which only
    the consumer's out-of-range results read (they are never stored). Other marked pads lose
    the mark and stay.

    ```mlir
    // before
    %s = tensor.extract_slice %mm[0, 0] [97, 197] [1, 1] : tensor<128x256xf32> to tensor<97x197xf32>
    %p = tensor.pad %s low[0, 0] high[31, 59] { ... } {ansor.ragged} : tensor<97x197xf32> to tensor<128x256xf32>
    // after: %mm used in place of %p
    ```
  }];
}

def GpuMaskRaggedReductions : Pass<"ansor-gpu-mask-ragged-reductions"> {
  let summary = "Make a reduction over ragged padding combine its identity there";
  let description = [{
    With ragged rows (`targets/cuda/reduction.py`) every op of a row-wise subgraph is padded
    along the columns to a multiple of the threads (`pad_tiling_interface`), so a reduction
    over the columns also iterates over the padding, whose values (the padding value, or a
    padded producer's out-of-range results) must not reach its result. Every
    `linalg.generic` reading a `tensor.pad` marked `ansor.ragged` (by the script; static high
    padding) along a reduction loop `d` gets one more input: a column mask
    `M[j] = j < bound` (a `linalg.generic` over the padded extent marked `ansor.ragged_mask`,
    `bound` the pad's source size), read at `d`. (An input, not a `linalg.index` in the body:
    `tile_reduction_using_forall` leaves a partial reduction's indices local to its chunk; an
    input is sliced like the data. The script fuses the mask into the thread loops.) Where a
    result is yielded by one binary op combining its accumulator (once) with a value `v`, `v`
    becomes `select(M, v, e)` with `e` that op's neutral element (`arith::getNeutralElement`:
    0 for `addf`, -inf for `maximumf`, +inf for `minimumf`, NaN for `maxnumf`, ...: the value
    the partial results of `tile_reduction_using_forall` start from), which keeps the
    reduction recognisable to the vectorizer; any other result yields
    `select(M, result, accumulator)`. Run before `ansor-gpu-fold-ragged-pads` (which drops the
    pads of padded producers). Ragged padding the pass cannot bound (dynamic, low) along a
    reduction loop, and a named op reducing over it, fail the pass.

    ```mlir
    // before: a row max over 197 columns padded to 256
    %p = tensor.pad %x low[0, 0] high[0, 59] { ... } {ansor.ragged} : tensor<7x197xf32> to tensor<7x256xf32>
    linalg.generic {... iterator_types = ["parallel", "reduction"]} ins(%p : tensor<7x256xf32>) ... {
    ^bb0(%in: f32, %acc: f32):
      %m = arith.maximumf %acc, %in : f32
      linalg.yield %m : f32
    }
    // after
    %mask = linalg.generic {... iterator_types = ["parallel"]} outs(%e : tensor<256xi1>) {
    ^bb0(%o: i1):
      %j = linalg.index 0 : index
      %ok = arith.cmpi ult, %j, %c197 : index
      linalg.yield %ok : i1
    } {ansor.ragged_mask}
    linalg.generic {...} ins(%p, %mask : tensor<7x256xf32>, tensor<256xi1>) ... {
    ^bb0(%in: f32, %ok: i1, %acc: f32):
      %v = arith.select %ok, %in, %cst_ninf : f32
      %m = arith.maximumf %acc, %v : f32
      linalg.yield %m : f32
    }
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // ANSOR_GPU_OPT_PASSES_TD

//===- Passes.td - ansor-mlir passes ------------------------------*- tablegen -*-===//
#ifndef ANSOR_PASSES_TD
#define ANSOR_PASSES_TD

include "mlir/Pass/PassBase.td"

def AnnotateTask : Pass<"ansor-annotate-task"> {
  let summary = "Attach #ansor.task (name, weight, flops, structural hash) to functions";
  let description = [{
    For every `func.func` with a body (the anchor op itself when it is one, else every function
    nested in it) attaches `ansor.task = #ansor.task<...>`, replacing any previous one:

    * `name`: the function's symbol name;
    * `weight`: the `weight` option;
    * `flops`: sum over the Linalg ops in the function (`LinalgOp` interface) of
      (product of the static loop ranges) x (number of arithmetic ops in the payload region).
      Counted payload ops are all `arith` and `math` ops except `arith.constant` and casts
      (`CastOpInterface`), so `linalg.matmul` counts 2 per point (mul + add) and a 1024^3 matmul
      gives 2147483648. A Linalg op with a dynamic loop range is an error. Other ops count 0.
    * `hash`: 16 hex digits of xxh3-64 over the function type and the body printed in generic
      form without locations. SSA names, locations and the function's own name and attributes
      do not enter it: two copies of a subgraph under different names share it.

    Before:
    ```mlir
    func.func @mm(%a: tensor<8x4xf32>, %b: tensor<4x2xf32>, %c: tensor<8x2xf32>) -> tensor<8x2xf32> {
      %0 = linalg.matmul ins(%a, %b : tensor<8x4xf32>, tensor<4x2xf32>)
                         outs(%c : tensor<8x2xf32>) -> tensor<8x2xf32>
      return %0 : tensor<8x2xf32>
    }
    ```
    After (`ansor-annotate-task{weight=3}`):
    ```mlir
    func.func @mm(...) -> tensor<8x2xf32> attributes {ansor.task = #ansor.task<name = "mm",
        weight = 3 : i64, flops = 128 : i64, hash = "...">} { ... }
    ```
  }];
  let options = [
    Option<"weight", "weight", "int64_t", /*default=*/"1",
           "Weight of the task(s): how often the function occurs in the model (>= 1)">
  ];
  let dependentDialects = ["::mlir::ansor::AnsorDialect"];
}

def AutoUnroll : Pass<"ansor-auto-unroll"> {
  let summary = "Fully unroll small scf.for nests under ansor.auto_unroll_max_step (Ansor's pragma)";
  let description = [{
    Implements Ansor's `auto_unroll_max_step` pragma. A schedule puts the discardable attribute
    `ansor.auto_unroll_max_step = N` on an op with regions (usually a loop, via
    `transform.annotate`). For every such op (inner annotated ops first) the pass considers the
    `scf.for` loops nested in it, the op itself included, innermost first, and **fully unrolls**
    loop L when `work(L) <= N`, where

        work(L) = trip(L) * max(1, rows(L), sum of work(C) over the scf.for loops and linalg ops C directly nested in L)

    computed on the IR before any unrolling (for a perfect nest of scalar code: the product of
    the trip counts, i.e. the number of innermost iterations). `rows(L)` is the number of 1-D
    vector rows of the largest n-D vector value defined directly in L's body (a `vector<8x16xf32>`
    register tile counts 8): each becomes one 1-D op per row once vectors are lowered, so a
    vectorized body weighs what its unrolled code will. (Without this, Ansor's step 512 fully
    unrolled nests around 2-D register tiles into tens of thousands of instructions and LLVM took
    more than 30 s to compile convolution candidates.) A linalg op left in a body (one the
    schedule did not vectorize: it becomes loops later) weighs the product of its loop ranges;
    counted as 1, a 512-step unroll around such ops once gave LLVM 35k lines and a 30 s timeout
    for a 1-D convolution of 16 channels. A loop whose trip count is not a compile-time
    constant has infinite work: neither it nor any loop around it is unrolled. Loops with zero
    iterations are left alone. Since work only grows outwards, a loop is unrolled only after all
    loops inside it were. Loop-carried values (`iter_args`, e.g. vector accumulators) are threaded
    through the unrolled copies. The attribute is removed afterwards (`N = 0` just removes it).

    With option `max-unrolled-work=M` (M > 0), the straight-line code left in one annotated op is
    capped too, measured by what it becomes as scalar GPU code, not by work: while the sizes of
    its outermost unrolled loops sum to more than M, the largest of them stays a loop (its inner
    loops may still unroll), where

        size(L) = trip(L) * (sum of size(C) over the scf.for loops C directly nested in L
                             + sum of cost(op) over L's other ops, nested regions included)
        cost(op) = 0 for constants, views (memref.subview), terminators and moves between vector
                     registers (vector.broadcast / extract / insert / shape_cast / transpose /
                     to_elements / from_elements / extract_strided_slice / insert_strided_slice);
                   a vector transfer, load or store: one access per 128 bits of each contiguous
                     row (minor-identity map, in bounds, unit innermost stride: what
                     `convert-vector-to-scf{full-unroll}` and NVPTX make of it), else one per element;
                   vector.contract: the points of its iteration space;
                   a linalg op: its iterations * (its operands + its payload ops);
                   any other op (arithmetic, math, barriers, index code): the elements of its
                     widest vector operand or result (NVPTX has no f32 vector arithmetic: a
                     vector<16xf32> fma is 16 FMAs), 1 for scalars.

    Each loop fits the max step alone, but a register tile unrolled by the schedule leaves one
    copy of the reduction nest per accumulator (32 copies of a 576-step nest were 18432 FMAs per
    thread and over 90 s in LLVM), and work counts a vectorized step as about one op: a
    576-step reduction loop whose body held shared-memory copies, 16 vector<4xf32> FMAs and two
    barriers was work 576 and became a kernel of 1729 barriers and ~108K lines (32 s to PTX).
    The CUDA target passes M = 2048 (`ANSOR_CUDA_MAX_UNROLLED_WORK`); the CPU pipeline passes
    no cap, so there only work counts.

    With option `default-max-step=N` (N > 0), loops outside every annotated op are handled as if
    the anchor op carried `ansor.auto_unroll_max_step = N`. The default 0 touches only annotated
    ops.

    Before (`N = 8`, work(j) = 2, work(i) = 2 * 2 = 4 <= 8):
    ```mlir
    scf.for %i = %c0 to %c2 step %c1 {
      scf.for %j = %c0 to %c2 step %c1 {
        "test.use"(%i, %j) : (index, index) -> ()
      }
    } {ansor.auto_unroll_max_step = 8 : i64}
    ```
    After: four straight-line `"test.use"` ops with indices (0,0) (0,1) (1,0) (1,1).
  }];
  let options = [
    Option<"defaultMaxStep", "default-max-step", "int64_t", /*default=*/"0",
           "Max step applied to loops outside any annotated op (0: leave them alone)">,
    Option<"maxUnrolledWork", "max-unrolled-work", "int64_t", /*default=*/"0",
           "Cap on the straight-line code unrolling leaves in one annotated op: the sum of the "
           "sizes (scalar GPU instructions, see the description) of its outermost unrolled "
           "loops; the largest nests stay loops until it fits (0: no cap, Ansor's per-loop rule "
           "alone)">
  ];
  let dependentDialects = ["::mlir::ansor::AnsorDialect", "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
}

def FeatureCleanup : Pass<"ansor-feature-cleanup"> {
  let summary = "The folds feature extraction needs after a transform script, without full canonicalize";
  let description = [{
    A greedy rewrite with the canonicalization patterns of the ops a scheduled payload is made
    of (`scf.for` / `scf.forall` / `scf.if`, `tensor` slices, pads and casts, `vector` transfers,
    `affine.apply` / `min` / `max`) plus every op's folder, and no region simplification. It
    stands in for `canonicalize` between a candidate's transform script and
    `ansor-extract-features`: `canonicalize` tries the patterns of every loaded dialect and
    simplifies regions, which took about half of the time per candidate (1.5-4.5 ms of a
    3-7 ms total on matmul and convolution sketches); this pass keeps the folds that change
    features (unit loops removed, transfer store-to-load forwarding, slices of slices, pad
    result types) at a fraction of the cost. The feature extractor itself ignores single-iteration
    loops and reads sizes through `tensor.cast`s, so the features of most candidates equal those
    after full canonicalization (tests/test_features.py checks a sample of sketches).
    It also removes the discardable `ansor.prefix.*` attributes with which a cached script
    prefix marks the payload ops it hands to the rest of the script (`search/features.py`).
  }];
  let dependentDialects = ["::mlir::affine::AffineDialect", "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect", "::mlir::tensor::TensorDialect"];
}

def ExtractFeatures : Pass<"ansor-extract-features"> {
  let summary = "Print Ansor's program features, one row per storing statement";
  let description = [{
    Computes Ansor's per-statement program features (OSDI 2020, Appendix B) on a scheduled
    payload: the IR after its transform script was applied (tensors, `scf.forall` / `scf.for`,
    `vector` ops, `tensor.extract_slice` / `insert_slice`, leftover `linalg` ops), before
    `ansor-auto-unroll`. The pass prints one line per statement to stdout,
    `// stmt N (op): name=value ...`, listing only non-zero features (raw values unless
    `log-scale`). The C API (`ansorExtractFeatures`) returns the same rows, log2(1+x)-scaled,
    as float32 rows of a fixed length (165; names from `ansorFeatureName`): Ansor's 134,
    then the tensor-core kernel's 31 (`tc*`, zero unless the function is annotated).

    **Statements** (walk order): every `vector.transfer_write`; every `tensor.insert_slice` /
    `tensor.parallel_insert_slice` whose source is copied data (not the result of a write,
    insert, linalg op, loop, or `tensor.empty`); every leftover `linalg` op and `tensor.pad`,
    whose iteration domain (static loop ranges / result shape) is appended to the enclosing
    loops as serial loops.

    **Loops of a statement**: `scf.for` (one loop) and `scf.forall` / `scf.parallel` (one
    parallel loop per dimension) enclosing its deepest op. The ops of a transfer_write
    statement are its backward slice through vector and scalar values (through `scf.for`
    iter_args and results, `scf.if`), stopping at reads (`vector.transfer_read`,
    `tensor.extract`), constants and other statements' results; so a reduction loop whose
    result is written after it (a hoisted register accumulator) belongs to the statement.
    Trip counts are static (dynamic: 1). Execution count of an op = product of the trip counts
    of its enclosing loops. A loop (or forall dimension) with exactly one iteration is not a
    loop: it is skipped and its variable is its lower bound, as after canonicalization (which
    folds it away, unroll pragma included). Sizes that are dynamic in the type but constant in
    the IR (a `tensor.cast` to a static type, a slice's constant size operand, an
    `affine.min` / `max` of constants) count as static, so the features of uncanonicalized IR
    (after `ansor-feature-cleanup`) equal those after `canonicalize`.

    Features (`B<i>.` for buffers i = 0..4):
    * compute: `float_mad` (vector.fma, math.fma, vector.contract: product of iteration
      bounds, vector.outerproduct with acc), `float_addsub`, `float_mul`, `float_divmod`,
      `float_cmp` (cmpf, min/max, float select, min/max reductions), `float_math` (math
      dialect), `int_ops` (arith on non-index integers): each op counts executions x lanes.
    * `vec_num` (stored-vector dims > 1), `vec_prod` (its elements), `vec_len` (its last dim),
      `vec_pos_{none,inner,middle,outer}` (last dim > 1: inner; only the first dim > 1:
      outer; else middle).
    * `unroll_max_step`: `ansor.auto_unroll_max_step` of the nearest annotated ancestor of the
      store; `unroll_num` / `unroll_prod` / `unroll_len`: count, trip product and innermost
      trip of the statement's `scf.for` loops inside that ancestor whose unroll work (as in
      `ansor-auto-unroll`) is <= the max step.
    * `par_num` / `par_prod` / `par_len`: parallel loop count, trip product, innermost parallel
      trip; `par_pos_{none,inner,middle,outer}`: position of the outermost parallel loop.
    * `loop_prod` (product of all trips), `num_loops`, `innermost_len`.
    * buffers: an access is mapped to its **buffer** (function argument, `tensor.empty`,
      `tensor.pad`, ...) through `extract_slice` (offsets add up, rank-reduced dims dropped),
      loop `iter_args` / `shared_outs` / results, and the destinations of writes and inserts;
      offsets are linear in the loop variables (affine.apply / addi / muli; div and mod
      approximated). The region an access touches when loops l..n iterate is, per buffer dim,
      min(dim size, box + sum |coef| x step x (trip - 1)). Per buffer, sorted by `bytes`
      (top 5): `acc_{read,write,rw}` one-hot; `bytes` = sum of executions x box elements x
      element bytes; `unique_bytes` = region at the outermost level (bytes); `lines` = sum
      over accesses of (executions / innermost trip) x 64-byte lines of the region of the
      innermost loop (rows x ceil(last-dim bytes / 64)); `unique_lines` = lines of the
      outermost region. Reuse: `reuse_loop` when some loop with trip > 1 does not move the
      access (the innermost such loop L: `reuse_ct` = trip(L), `reuse_dis_iter` = product of
      the trips inside L, `reuse_dis_bytes` = bytes all buffers touch in one iteration of L);
      else `reuse_serial` when the statement accesses the buffer more than once (`reuse_ct` =
      accesses - 1, distance 1 iteration and the bytes of one innermost iteration); else
      `reuse_none`. `*_d_reuse_ct` = bytes, unique_bytes, lines, unique_lines divided by
      max(reuse_ct, 1). `stride` (elements) of the largest access: 1 when the access box
      spans the buffer's last dim, else the row-major stride of the innermost dim it spans,
      else |offset change| per iteration of the innermost loop that moves it (0: none).
    * `ai_0`..`ai_9`: arithmetic intensity FLOPs / bytes (FLOPs: 2 per mad, 1 per other op;
      bytes: touched bytes of all buffers) per iteration of each loop level, from the
      innermost statement body to the whole nest, linearly resampled to 10 points.
    * `alloc_size` (bytes), `alloc_outer_prod` (trip product around the allocation),
      `alloc_prod` (their product), `alloc_inner_prod` (outer_prod / alloc_outer_prod) of the
      written buffer when it is local (`tensor.empty` / `tensor.pad` / `alloc_tensor` that is
      not returned); `outer_prod` / `num_outer_loops`: trip product and count of the loops
      around the store op itself.
    * The tensor-core (wgmma + TMA) kernel, on every statement of a function the tensor-core
      sketch's script annotated (`ansor.tc.bm`, `.bn`, `.wgm`, `.stages`, `.wait`, `.group`,
      `.ws`, `.persist`, `.splitk`, `.tw`; `python/ansor/targets/cuda/tensorcore.py`, whose
      kernel is generated at lowering), zero elsewhere: its text is not in the IR, so these
      slots are computed from the knobs and the problem, M x N x K (a batch; a convolution's
      pixels x CO x taps*C) read from the buffers the contraction's operands view. `tc` (1),
      `tc_bm`, `tc_bn`, `tc_bk` (64: the block tile), `tc_warpgroups` / `tc_warpgroup_rows`
      (consumer warpgroups, bm / wgm rows each), `tc_mma_n` (wgmma is m64 n=bn k16),
      `tc_mma_per_kblock` (bm/64 x 4 wgmma per block) / `tc_mma_per_tile` (x k-blocks),
      `tc_acc_per_thread` (f32 accumulators), `tc_threads` (128 x (warpgroups + ws)),
      the knobs `tc_stages`, `tc_wait`, `tc_group`, `tc_ws`, `tc_persist`, `tc_splitk`, `tc_tw`;
      `tc_kblocks` (64-deep k-blocks of one block: its share of K under split-K),
      `tc_staged` (the accumulators go through a shared-memory tile: fused epilogue, ragged tile,
      convolution or split-K), `tc_smem_bytes` (max of stages x (bm + bn) x 64 x 2 and the
      staged bm x (bn + 8) f32 tile), `tc_tma_bytes` (TMA bytes per k-block), `tc_tiles`
      (output tiles, batches included), `tc_blocks` (launched: tiles x splitk, or min(tiles,
      132) when persistent), `tc_blocks_per_sm` (by shared memory, registers at 40 + accumulators
      per thread, threads), `tc_sm_fill` (min(blocks, 132) / 132), `tc_waves` (ceil(blocks /
      (132 x blocks per SM)); persistent: tiles per block), `tc_wave_eff` (busy block slots of
      those waves), `tc_tile_eff` (M x N / (tiles x bm x bn)), `tc_intensity` (MMA FLOPs per TMA
      byte of a k-block), `tc_flops_per_tile` (MMA FLOPs of one block). The card is an H100/H200
      SXM (132 SMs, 228 KB shared memory and 64K registers per SM).
    * Then `pipeline_stages`: the `ansor.pipeline_stages` of the statement's nearest
      annotated ancestor (the CUDA-core GPU sketch's launch: shared-memory buffers per cached
      tile, `ansor-gpu-pipeline-shared-copies`), 0 where there is none.
    * Then `rows_per_block`: the `ansor.rows_per_block` of the statement's nearest
      annotated ancestor (the row sketch's launch: rows one block runs, packed after these loops
      by `ansor-gpu-pack-rows-into-blocks`), 0 where there is none.
    * The last two, `launch_blocks` and `launch_threads`: the blocks of the grid and the
      threads per block of the statement's nearest enclosing `gpu.launch` (products of its
      constant sizes; 0 where there is none, or a size is not constant). The other features of
      a kernel statement are per thread; these say how many threads run them.

    Example: `scf.for %i = 0 to 4 { scf.for %j = 0 to 8 { transfer_write (fma of two
    vector<4xf32> reads) } }` gives `float_mad=128 loop_prod=32 num_loops=2 vec_prod=4 ...`.
  }];
  let options = [
    Option<"logScale", "log-scale", "bool", /*default=*/"false",
           "Print log2(1 + |x|) of each feature instead of the raw value">
  ];
}

def Partition : Pass<"ansor-partition", "::mlir::ModuleOp"> {
  let summary = "Split each public function into fusion groups outlined as private task functions";
  let description = [{
    Ansor/Relay-style task extraction. In every public `func.func` with a single-block body, the
    top-level ops are grouped:

    * an **anchor** is a Linalg op with a reduction loop (contraction, convolution, pooling,
      reduction); it starts a group;
    * the anchor's **producers** join it when every use of their results is in the group:
      `linalg.fill` initialisers, `tensor.pad`, all-parallel (element-wise, broadcast,
      transpose) Linalg ops, windows (`tensor.extract_slice`, not rank-reducing) of a pad or
      with a stride > 1, and leading pieces (`t[a, b]` over all trailing dims, unit strides: a
      contiguous view; into element-wise ops only), recursively;
    * its **element-wise consumers** join it: while every user outside the group of a group
      member is an all-parallel Linalg op (other operands may come from anywhere), all of them are
      added (with their sole-use producers; `tensor.expand_shape` / `collapse_shape` between them
      count as element-wise, and so does a `tensor.insert_slice` storing a member's result into
      a tensor the group builds, and a crop: an `extract_slice` of the leading corner, same rank,
      unit strides, as a Winograd output computed in overhanging tiles); the group is then cut back to the largest such state
      in which exactly one member -- the last in block order -- has uses outside the group. So a
      chain (bias, batch-norm, relu) joins, and so does a DAG that reconverges (GELU's
      `x * 0.5 * (1 + erf(x / sqrt 2))` uses `x` twice);
    * with `row-chains` (the default), a **row reduction over the same rows** joins like an
      element-wise consumer (other operands from anywhere), and like an element-wise producer when
      every use is in the group: a Linalg reduction with static loop ranges, its reduction loops
      the trailing ones, its results indexed by the leading (row) loops in order, and an input
      indexed by the identity (it reads whole rows), such that
      - every operand it takes from the group is read through a *row map* (its dims are the
        leading loops in order, constants allowed: the identity, a per-row value `(d0, d1)` or
        keepdim `(d0, d1, 0)` broadcast along the row) and is *row-aligned*: a result of the seed,
        of a reshape of a row-aligned value, or of a member Linalg op reading every member value
        through a row map and writing through one (not of a transpose);
      - its loop ranges are the shape of a row-aligned member value (softmax's sum of `exp(x -
        max)` over a matmul's output rows) or the loop ranges of a member row reduction with as
        many reduction loops (a layer norm's variance next to its mean).
      So softmax, log-softmax, LayerNorm, RMSNorm, attention scores + softmax (a matmul or
      batch-matmul anchor, then the row reductions of its output) are one group each, scheduled
      as one task (the CPU reduction-chain sketch fuses its rows). The rule does not look at the
      anchor's kind: a convolution's NHWC output `[n,h,w,c]` reduced over its trailing dims by the
      identity (a LayerNorm over channels, a GroupNorm over a reshape `[n,h,w,G,c/G]`) joins the
      convolution's group like a softmax joins a matmul's -- a tile of the reduction's rows is a
      tile of the convolution's. A global average pool after a channels-first model's convolution
      (ResNet's) does not: it reduces `h, w` of the transpose back to NCHW of the NHWC
      convolution, whose rows are columns of the convolution's output (a convolution left NCHW
      would take it: `h, w` are then its own trailing dims); nor does a pooling op (windowed
      input maps), nor a reduction whose loop ranges match no member. `row-chains=false` keeps
      such chains in separate groups (an ablation: `ansor tune --split`);
    * all-parallel Linalg ops left over start groups of their own (same producer/consumer rules;
      those reading windows or pieces first, so that the views and the pad join their consumer),
      except ops computing only from constants (batch-norm parameters folded at run time): they
      stay in the parent; so do `linalg.fill`s, which are cloned into every group using them.

    So only the last op of a group has uses outside it. Each group is outlined into a private
    function `@<func>__t<K>` (K counts groups in program order) placed after its parent and
    replaced by a `func.call` at the position of its last op. Operands defined outside the group
    become arguments, except `tensor.empty`, static slices of those (the destinations of a
    multi-result op writing one tensor's pieces), scalar constants and splat / small (<= 64
    elements) inline `dense` tensor constants, which are cloned into the callee. Larger constants and every
    `dense_resource` constant (weights) stay in the parent and are passed in. Ops outside every group (reshapes, constants, `tensor.pad` of
    nothing tunable, calls) stay in the parent. Functions without a Linalg op are left alone.
    Each callee carries `ansor.group`: the name of its anchor, else of its multi-result Linalg op,
    else of its last Linalg op.

    Before:
    ```mlir
    func.func @f(%a: tensor<8x4xf32>, %b: tensor<4x2xf32>) -> tensor<8x2xf32> {
      %e = tensor.empty() : tensor<8x2xf32>
      %z = linalg.fill ins(%cst : f32) outs(%e : tensor<8x2xf32>) -> tensor<8x2xf32>
      %m = linalg.matmul ins(%a, %b : ...) outs(%z : tensor<8x2xf32>) -> tensor<8x2xf32>
      %r = linalg.generic {... parallel ...} ins(%m : ...) outs(%e : ...) { maximumf ... }
      return %r : tensor<8x2xf32>
    }
    ```
    After:
    ```mlir
    func.func @f(%a: tensor<8x4xf32>, %b: tensor<4x2xf32>) -> tensor<8x2xf32> {
      %0 = call @f__t0(%a, %b) : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
      return %0 : tensor<8x2xf32>
    }
    func.func private @f__t0(%arg0: tensor<8x4xf32>, %arg1: tensor<4x2xf32>) -> tensor<8x2xf32>
        attributes {ansor.group = "linalg.matmul"} { ... fill, matmul, generic ... }
    ```
  }];
  let options = [
    Option<"maxInlineElements", "max-inline-elements", "int64_t", /*default=*/"64",
           "Tensor constants with at most this many elements are cloned into the task function">,
    Option<"rowChains", "row-chains", "bool", /*default=*/"true",
           "Row reductions over a group's rows join it (softmax, layer norm: one task); false splits "
           "such chains at each reduction (the old partitioning, an ablation)">
  ];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def ConvToNhwc : Pass<"ansor-conv-to-nhwc"> {
  let summary = "Rewrite channels-first 2-D convolutions as channels-last ones between transposes";
  let description = [{
    Every `linalg.conv_2d_nchw_fchw` on statically shaped tensors becomes a
    `linalg.conv_2d_nhwc_hwcf` (same strides and dilations) whose input, filter and init are
    `linalg.transpose`s of the originals and whose result is transposed back to NCHW;
    `linalg.pooling_nchw_{max,sum}` likewise become `pooling_nhwc_{max,sum}`, and
    `linalg.depthwise_conv_2d_nchw_chw` (filter C x KH x KW) becomes `depthwise_conv_2d_nhwc_hwc`
    (filter KH x KW x C). The CPU
    sketches vectorize the innermost output dimension: channels-last makes it the channel
    dimension (long, contiguous in the filter) instead of a short image row read with a stride.
    `canonicalize` folds the transpose of a `linalg.fill` init; a transpose of a constant filter
    is folded into the constant by the importer (`frontend.fold_weight_transposes`); the input and
    output transposes join the convolution's task as element-wise producer / consumer
    (`ansor-partition`).

    Before:
    ```mlir
    %y = linalg.conv_2d_nchw_fchw {strides = dense<1> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
        ins(%x, %w : tensor<1x8x10x10xf32>, tensor<16x8x3x3xf32>) outs(%z : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
    ```
    After: `%y = linalg.transpose ins(linalg.conv_2d_nhwc_hwcf ins(transpose(%x), transpose(%w))
    outs(transpose(%z)) : tensor<1x8x8x16xf32>) permutation = [0, 3, 1, 2]`.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect"];
}

def PropagateNhwc : Pass<"ansor-propagate-nhwc"> {
  let summary = "Move NHWC->NCHW transposes down through element-wise ops until they cancel";
  let description = [{
    After `ansor-conv-to-nhwc` every convolution of a channels-first model sits between an input
    transpose to NHWC and an output transpose back to NCHW, so the activations between two
    convolutions cross memory twice more than needed (an output transpose in one task, an input
    transpose in the next). This pass keeps them channels-last:

    - an all-parallel `linalg.generic` with an identity output map, rank 4, no `linalg.index`,
      reading a `linalg.transpose` with permutation [0, 3, 1, 2] (NHWC -> NCHW) is rewritten to
      iterate in NHWC order: it reads that transpose's source directly, its other inputs through
      permuted indexing maps, and its result is transposed back after it;
    - `tensor.pad` (constant value, static) of such a transpose becomes the transpose of a pad of
      the source, with the low/high amounts permuted;
    - `linalg.transpose` of a `linalg.transpose` becomes one transpose, or nothing when the two
      permutations cancel.

    Batch-norm/ReLU/residual-add chains between the convolutions of a ResNet then stay NHWC;
    transposes remain only at the model's input and output and before ops that are not
    element-wise (a global average pool written as a reduction).
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect"];
}

#endif // ANSOR_PASSES_TD

module attributes {transform.with_named_sequence} {
  // sketch s0: gpu_multi_level_tiling(op1) (GPU)
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.consumed}) {
    %k_op1_d1_t1 = transform.tune.knob<"op1.d1.t1"> = 16 : i64 from options = [1, 2, 4, 8, 16, 32, 64, 97, 128] -> !transform.param<i64>
    %k_op1_d1_t2 = transform.tune.knob<"op1.d1.t2"> = 4 : i64 from options = [1, 2, 4, 8, 16, 32, 64, 97, 128] -> !transform.param<i64>
    %k_op1_d1_t3 = transform.tune.knob<"op1.d1.t3"> = 1 : i64 from options = [1, 2, 4, 8, 16, 32, 64, 97, 128] -> !transform.param<i64>
    %k_op1_d1_t4 = transform.tune.knob<"op1.d1.t4"> = 1 : i64 from options = [1, 2, 4, 8, 16, 32, 64, 97, 128] -> !transform.param<i64>
    %k_op1_d2_t1 = transform.tune.knob<"op1.d2.t1"> = 4 : i64 from options = [1, 2, 4, 8, 16, 32, 64, 97, 128] -> !transform.param<i64>
    %k_op1_d2_t2 = transform.tune.knob<"op1.d2.t2"> = 4 : i64 from options = [1, 2, 4, 8, 16, 32, 64, 97, 128] -> !transform.param<i64>
    %k_op1_d2_t3 = transform.tune.knob<"op1.d2.t3"> = 2 : i64 from options = [1, 2, 4, 8, 16, 32, 64, 97, 128] -> !transform.param<i64>
    %k_op1_d2_t4 = transform.tune.knob<"op1.d2.t4"> = 1 : i64 from options = [1, 2, 4, 8, 16, 32, 64, 97, 128] -> !transform.param<i64>
    %k_op1_d3_t1 = transform.tune.knob<"op1.d3.t1"> = 32 : i64 from options = [1, 2, 4, 8, 16, 29, 32] -> !transform.param<i64>
    %k_op1_d3_t2 = transform.tune.knob<"op1.d3.t2"> = 32 : i64 from options = [1, 2, 4, 8, 16, 29, 32] -> !transform.param<i64>
    %k_op1_d3_t3 = transform.tune.knob<"op1.d3.t3"> = 2 : i64 from options = [1, 2, 4, 8, 16, 29, 32] -> !transform.param<i64>
    %k_op1_d3_t4 = transform.tune.knob<"op1.d3.t4"> = 2 : i64 from options = [1, 2, 4, 8, 16, 29, 32] -> !transform.param<i64>
    %k_op1_d4_t1 = transform.tune.knob<"op1.d4.t1"> = 3 : i64 from options = [1, 3] -> !transform.param<i64>
    %k_op1_d4_t2 = transform.tune.knob<"op1.d4.t2"> = 1 : i64 from options = [1, 3] -> !transform.param<i64>
    %k_op1_d5_t1 = transform.tune.knob<"op1.d5.t1"> = 3 : i64 from options = [1, 3] -> !transform.param<i64>
    %k_op1_d5_t2 = transform.tune.knob<"op1.d5.t2"> = 1 : i64 from options = [1, 3] -> !transform.param<i64>
    %k_op1_d6_t1 = transform.tune.knob<"op1.d6.t1"> = 1 : i64 from options = [1, 13] -> !transform.param<i64>
    %k_op1_d6_t2 = transform.tune.knob<"op1.d6.t2"> = 1 : i64 from options = [1, 13] -> !transform.param<i64>
    %k_op1_unroll = transform.tune.knob<"op1.unroll"> = 16 : i64 from options = [0, 16, 64, 512, 1024] -> !transform.param<i64>
    %k_op1_stages = transform.tune.knob<"op1.stages"> = 2 : i64 from options = [1, 2, 3] -> !transform.param<i64>
    %m1 = transform.structured.match attributes{ansor.op = 1 : i64} in %root : (!transform.any_op) -> !transform.any_op
    // ragged tiles: loops [1, 2, 3] padded to a multiple of the block tile
    %padded2, %pad3 = transform.structured.pad_tiling_interface %m1 to padding_sizes [0, 16, 4, 32, 0, 0, 0] pad_to_multiple_of {padding_values = [0.0 : f32, 0.0 : f32, 0.0 : f32]} : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %f4 = transform.structured.match ops{["func.func"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %f4 {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    %fill5 = transform.get_producer_of_operand %padded2[2] : (!transform.any_op) -> !transform.any_op
    // S0: blocks (d3->x, d2->y, d1->z)
    %t6, %forall7 = transform.structured.tile_using_forall %padded2 tile_sizes [0, 16, 4, 32, 0, 0, 0] (mapping = [#gpu.block<z>, #gpu.block<y>, #gpu.block<x>]) : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %fused8, %c9 = transform.structured.fuse_into_containing_op %fill5 into %forall7 : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)
    // the initialiser: one row per thread
    %t10, %forall11 = transform.structured.tile_using_forall %fused8 num_threads [0, 4, 2, 16] (mapping = [#gpu.thread<z>, #gpu.thread<y>, #gpu.thread<x>]) : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    // R0: the shared-memory tile of the reduction
    %t12, %l13:1 = transform.structured.tile_using_for %t6 tile_sizes [0, 0, 0, 0, 0, 0, 1] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    // cache read: inputs [0, 1] into shared memory, copied by all threads
    %padded14, %pad15, %cb16 = transform.structured.pad %t12 {padding_values = [0.0 : f32, 0.0 : f32, 0.0 : f32], padding_dimensions = [0, 1, 2, 3, 4, 5, 6], nofold_flags = [1, 1, 0], copy_back_op = "none"} : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    %p17 = transform.get_producer_of_operand %padded14[0] : (!transform.any_op) -> !transform.any_op
    %t18, %forall19 = transform.structured.tile_using_forall %p17 tile_sizes [0, 1, 1, 0] (mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]) : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %if20 = transform.structured.match ops{["scf.if"]} in %forall19 : (!transform.any_op) -> !transform.any_op
    transform.scf.take_assumed_branch %if20 take_else_branch : (!transform.any_op) -> ()
    %p21 = transform.get_producer_of_operand %padded14[1] : (!transform.any_op) -> !transform.any_op
    %t22, %forall23 = transform.structured.tile_using_forall %p21 tile_sizes [1, 1, 0, 4] (mapping = [#gpu.thread<linear_dim_2>, #gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]) : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %if24 = transform.structured.match ops{["scf.if"]} in %forall23 : (!transform.any_op) -> !transform.any_op
    transform.scf.take_assumed_branch %if24 take_else_branch : (!transform.any_op) -> ()
    // S1: virtual threads (a serial loop over strided chunks)
    %t25, %l26:1 = transform.structured.tile_using_for %padded14 tile_sizes [0, 4, 0, 0, 0, 0, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %cst27 = transform.param.constant 0 : i64 -> !transform.param<i64>
    transform.annotate %l26#0 "ansor.unroll_full" = %cst27 : !transform.any_op, !transform.param<i64>
    // S2: threads
    %t28, %forall29 = transform.structured.tile_using_forall %t25 tile_sizes [0, 1, 2, 2, 0, 0, 0] (mapping = [#gpu.thread<z>, #gpu.thread<y>, #gpu.thread<x>]) : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    // S3: loop inside the thread over register tiles; unmapped space loops step by one
    %t30, %l31:1 = transform.structured.tile_using_for %t28 tile_sizes [0, 0, 1, 0, 0, 0, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %cst32 = transform.param.constant 1 : i64 -> !transform.param<i64>
    transform.annotate %l31#0 "ansor.unroll_full" = %cst32 : !transform.any_op, !transform.param<i64>
    // R1, R2: the accumulator stays in registers across both
    %t33, %l34:2 = transform.structured.tile_using_for %t30 tile_sizes [0, 0, 0, 0, 1, 1, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    %cst35 = transform.param.constant 0 : i64 -> !transform.param<i64>
    transform.annotate %l34#0 "ansor.r1" = %cst35 : !transform.any_op, !transform.param<i64>
    %cst36 = transform.param.constant 1 : i64 -> !transform.param<i64>
    transform.annotate %l34#1 "ansor.r1" = %cst36 : !transform.any_op, !transform.param<i64>
    // a windowed op with unit row tiles is a 1-D one: the vectorizer takes only those
    %dec37 = transform.structured.decompose %t33 : (!transform.any_op) -> !transform.any_op
    // vectorize: register tile (contraction -> outer-product FMAs), copies, initialiser
    transform.sequence %t10 : !transform.any_op failures(suppress) {
    ^bb0(%v: !transform.any_op):
      transform.structured.vectorize %v : !transform.any_op
    }
    transform.structured.vectorize %dec37 : !transform.any_op
    %f38 = transform.structured.match ops{["func.func"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %f38 {
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.vector.reduction_to_contract
    } : !transform.any_op
    transform.apply_patterns to %f38 {
      transform.apply_patterns.vector.lower_contraction lowering_strategy = outerproduct
      transform.apply_patterns.vector.lower_outerproduct
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    // decomposed convolution: the accumulator is not hoisted
    // the copies last: canonicalization would fold a tensor copy's read/write pair back into a copy
    transform.structured.vectorize %t18 vector_sizes [1, 1, 1, 1] : !transform.any_op
    transform.structured.vectorize %t22 vector_sizes [1, 1, 1, 4] : !transform.any_op
    %smem39, %new40 = transform.structured.bufferize_to_allocation %forall19 {memory_space = 3, bufferize_destination_only, emit_dealloc} : !transform.any_op
    %alloc41 = transform.get_defining_op %smem39 : (!transform.any_value) -> !transform.any_op
    transform.annotate %alloc41 "ansor.smem" : !transform.any_op
    %smem42, %new43 = transform.structured.bufferize_to_allocation %forall23 {memory_space = 3, bufferize_destination_only, emit_dealloc} : !transform.any_op
    %alloc44 = transform.get_defining_op %smem42 : (!transform.any_value) -> !transform.any_op
    transform.annotate %alloc44 "ansor.smem" : !transform.any_op
    // bufferize, then map to the GPU
    transform.bufferization.eliminate_empty_tensors %f38 : !transform.any_op
    transform.apply_dce to %f38 : !transform.any_op
    transform.apply_cse to %f38 : !transform.any_op
    %bufd45 = transform.bufferization.one_shot_bufferize layout{IdentityLayoutMap} %root {bufferize_function_boundaries = true} : (!transform.any_op) -> !transform.any_op
    %f46 = transform.structured.match ops{["func.func"]} in %bufd45 : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %f46 {
      transform.apply_patterns.vector.lower_masked_transfers
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %f46 : !transform.any_op
    // n-D broadcasts the NVVM lowering cannot take (alone: canonicalization folds them back)
    transform.apply_patterns to %f46 {
      transform.apply_patterns.vector.lower_broadcast
    } : !transform.any_op
    %launch47 = transform.gpu.map_forall_to_blocks %f46 generate_gpu_launch : (!transform.any_op) -> !transform.any_op
    %launch48 = transform.gpu.map_nested_forall_to_threads %launch47 block_dims = [16, 2, 4] : (!transform.any_op) -> !transform.any_op
    // S1 and S3 fully unrolled: the thread's whole tile of accumulators stays in registers
    // (like TVM's virtual threads and Ansor's local cache-write stage)
    %u49 = transform.structured.match ops{["scf.for"]} attributes{ansor.unroll_full = 0 : i64} in %launch48 : (!transform.any_op) -> !transform.any_op
    transform.loop.unroll %u49 {factor = 4} : !transform.any_op
    %u50 = transform.structured.match ops{["scf.for"]} attributes{ansor.unroll_full = 1 : i64} in %launch48 : (!transform.any_op) -> !transform.any_op
    transform.loop.unroll %u50 {factor = 2} : !transform.any_op
    transform.annotate %launch48 "ansor.auto_unroll_max_step" = %k_op1_unroll : !transform.any_op, !transform.param<i64>
    // stages > 1: R0 tiles multi-buffered in shared memory, the next ones copied (cp.async) while
    // this one is computed on (ansor-gpu-pipeline-shared-copies)
    transform.annotate %launch48 "ansor.pipeline_stages" = %k_op1_stages : !transform.any_op, !transform.param<i64>
    transform.yield
  }
}

// RUN: %ansor-opt %s -split-input-file -ansor-extract-features -o /dev/null | FileCheck %s

// A 2-level nest (i: 4, j: 8 step 4) writing fma(a, b, c) as vector<4xf32> into c.
// 32 executions x 4 lanes = 128 mul-adds. Unroll work(j) = 8 <= 16 < work(i) = 32: one loop.
// Buffers: c is read and written (1024 bytes over 32 iterations, 512 unique, 4 rows x 2 lines);
// one innermost iteration touches 3 x 16 bytes. FLOPs/byte = 256 / 1536 at every level.
// CHECK-LABEL: // func @fma_nest
// CHECK-NEXT: // stmt 0 (vector.transfer_write): float_mad=128 vec_num=1 vec_prod=4 vec_len=4
// CHECK-SAME: vec_pos_inner=1 unroll_max_step=16 unroll_num=1 unroll_prod=8 unroll_len=8
// CHECK-SAME: par_pos_none=1 loop_prod=32 num_loops=2 innermost_len=8
// CHECK-SAME: B0.acc_rw=1 B0.bytes=1024 B0.unique_bytes=512 B0.lines=16 B0.unique_lines=8
// CHECK-SAME: B0.reuse_serial=1 B0.reuse_dis_iter=1 B0.reuse_dis_bytes=48 B0.reuse_ct=1
// CHECK-SAME: B0.bytes_d_reuse_ct=1024 B0.unique_bytes_d_reuse_ct=512 B0.lines_d_reuse_ct=16
// CHECK-SAME: B0.unique_lines_d_reuse_ct=8 B0.stride=1
// CHECK-SAME: B1.acc_read=1 B1.bytes=512 B1.unique_bytes=512 B1.lines=8 B1.unique_lines=8 B1.reuse_none=1
// CHECK-SAME: B2.acc_read=1 B2.bytes=512
// CHECK-SAME: ai_0=0.166667 {{.*}} ai_9=0.166667 outer_prod=32 num_outer_loops=2{{$}}
func.func @fma_nest(%a: tensor<4x32xf32>, %b: tensor<4x32xf32>, %c: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %p = ub.poison : f32
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%t = %c) -> (tensor<4x32xf32>) {
    %r2 = scf.for %j = %c0 to %c32 step %c4 iter_args(%t2 = %t) -> (tensor<4x32xf32>) {
      %va = vector.transfer_read %a[%i, %j], %p {in_bounds = [true]} : tensor<4x32xf32>, vector<4xf32>
      %vb = vector.transfer_read %b[%i, %j], %p {in_bounds = [true]} : tensor<4x32xf32>, vector<4xf32>
      %vc = vector.transfer_read %t2[%i, %j], %p {in_bounds = [true]} : tensor<4x32xf32>, vector<4xf32>
      %f = vector.fma %va, %vb, %vc : vector<4xf32>
      %w = vector.transfer_write %f, %t2[%i, %j] {in_bounds = [true]} : vector<4xf32>, tensor<4x32xf32>
      scf.yield %w : tensor<4x32xf32>
    }
    scf.yield %r2 : tensor<4x32xf32>
  } {ansor.auto_unroll_max_step = 16 : i64}
  return %r : tensor<4x32xf32>
}

// -----

// scf.forall over 8 row blocks of 8 rows, a serial loop over the rows: 64 executions of a
// vector<16xf32> add (1024 adds). The parallel_insert_slice only moves the loop's result.
// Each buffer: 4096 bytes, 64 lines (one 64-byte line per row), no reuse. 0.125 FLOPs/byte.
// CHECK-LABEL: // func @forall_rows
// CHECK-NEXT: // stmt 0 (vector.transfer_write): float_addsub=1024 vec_num=1 vec_prod=16 vec_len=16
// CHECK-SAME: vec_pos_inner=1 par_num=1 par_prod=8 par_len=8 par_pos_outer=1
// CHECK-SAME: loop_prod=64 num_loops=2 innermost_len=8
// CHECK-SAME: B0.acc_read=1 B0.bytes=4096 B0.unique_bytes=4096 B0.lines=64 B0.unique_lines=64 B0.reuse_none=1
// CHECK-SAME: B1.acc_write=1 B1.bytes=4096 B1.unique_bytes=4096 B1.lines=64 B1.unique_lines=64 B1.reuse_none=1
// CHECK-SAME: ai_0=0.125 {{.*}} ai_9=0.125 outer_prod=64 num_outer_loops=2{{$}}
// CHECK-NOT: stmt 1
func.func @forall_rows(%a: tensor<64x16xf32>) -> tensor<64x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %p = ub.poison : f32
  %e = tensor.empty() : tensor<64x16xf32>
  %r = scf.forall (%i) in (8) shared_outs(%o = %e) -> (tensor<64x16xf32>) {
    %off = affine.apply affine_map<(d0) -> (d0 * 8)>(%i)
    %sa = tensor.extract_slice %a[%off, 0] [8, 16] [1, 1] : tensor<64x16xf32> to tensor<8x16xf32>
    %so = tensor.extract_slice %o[%off, 0] [8, 16] [1, 1] : tensor<64x16xf32> to tensor<8x16xf32>
    %t = scf.for %k = %c0 to %c8 step %c1 iter_args(%acc = %so) -> (tensor<8x16xf32>) {
      %v = vector.transfer_read %sa[%k, %c0], %p {in_bounds = [true]} : tensor<8x16xf32>, vector<16xf32>
      %s = arith.addf %v, %v : vector<16xf32>
      %w = vector.transfer_write %s, %acc[%k, %c0] {in_bounds = [true]} : vector<16xf32>, tensor<8x16xf32>
      scf.yield %w : tensor<8x16xf32>
    }
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %t into %o[%off, 0] [8, 16] [1, 1] : tensor<8x16xf32> into tensor<64x16xf32>
    }
  }
  return %r : tensor<64x16xf32>
}

// -----

// A vectorized copy (32 rows of vector<32xf32>) into a local tensor.empty, then a leftover
// linalg.exp over it: a 32x32 serial nest with 1024 math ops.
// CHECK-LABEL: // func @copy_then_exp
// CHECK-NEXT: // stmt 0 (vector.transfer_write): vec_num=1 vec_prod=32 vec_len=32 vec_pos_inner=1
// CHECK-SAME: par_pos_none=1 loop_prod=32 num_loops=1 innermost_len=32
// CHECK-SAME: B0.acc_read=1 B0.bytes=4096 B0.unique_bytes=4096 B0.lines=64 B0.unique_lines=64
// CHECK-SAME: B1.acc_write=1 B1.bytes=4096
// CHECK-SAME: alloc_size=4096 alloc_prod=4096 alloc_outer_prod=1 alloc_inner_prod=32 outer_prod=32 num_outer_loops=1{{$}}
// CHECK-NEXT: // stmt 1 (linalg.exp): float_math=1024 vec_pos_none=1 par_pos_none=1
// CHECK-SAME: loop_prod=1024 num_loops=2 innermost_len=32
// CHECK-SAME: B0.acc_read=1 B0.bytes=4096 B0.unique_bytes=4096 B0.lines=64 B0.unique_lines=64 B0.reuse_none=1
// CHECK-SAME: B0.bytes_d_reuse_ct=4096 B0.unique_bytes_d_reuse_ct=4096 B0.lines_d_reuse_ct=64 B0.unique_lines_d_reuse_ct=64 B0.stride=1
// CHECK-SAME: B1.acc_write=1
// CHECK-SAME: ai_0=0.125 {{.*}} ai_9=0.125 outer_prod=1{{$}}
func.func @copy_then_exp(%a: tensor<32x32xf32>, %out: tensor<32x32xf32>) -> tensor<32x32xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %p = ub.poison : f32
  %e = tensor.empty() : tensor<32x32xf32>
  %t = scf.for %i = %c0 to %c32 step %c1 iter_args(%x = %e) -> (tensor<32x32xf32>) {
    %v = vector.transfer_read %a[%i, %c0], %p {in_bounds = [true]} : tensor<32x32xf32>, vector<32xf32>
    %w = vector.transfer_write %v, %x[%i, %c0] {in_bounds = [true]} : vector<32xf32>, tensor<32x32xf32>
    scf.yield %w : tensor<32x32xf32>
  }
  %r = linalg.exp ins(%t : tensor<32x32xf32>) outs(%out : tensor<32x32xf32>) -> tensor<32x32xf32>
  return %r : tensor<32x32xf32>
}

// -----

// A gather body with an op without results (torch-mlir's index bound `cf.assert`): it is not
// compute, and used to abort the extractor (a null result type), so no gather candidate had features.
// CHECK-LABEL: // func @gather_with_assert
// CHECK-NEXT: // stmt 0 (linalg.generic): int_ops=16 vec_pos_none=1 par_pos_none=1 loop_prod=16
func.func @gather_with_assert(%table: tensor<100x8xf32>, %ids: tensor<2xi64>, %out: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%ids : tensor<2xi64>) outs(%out : tensor<2x8xf32>) {
    ^bb0(%id: i64, %o: f32):
      %c100 = arith.constant 100 : i64
      %ok = arith.cmpi slt, %id, %c100 : i64
      cf.assert %ok, "index out of bounds"
      %row = arith.index_cast %id : i64 to index
      %col = linalg.index 1 : index
      %v = tensor.extract %table[%row, %col] : tensor<100x8xf32>
      linalg.yield %v : f32
  } -> tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}

// -----

// A function the tensor-core sketch's script annotated (`ansor.tc.*`, knobs of the wgmma + TMA
// kernel) and tiled like the kernel: 128x128 blocks, k-blocks of 64, split-K 2. Every statement
// of it gets the kernel's slots: 8 wgmma (m64n128k16) per k-block, 1024 / 64 / 2 = 8 k-blocks per
// block, 3 stages of (128 + 128) x 64 f16 = 98304 bytes of shared memory (more than the staged
// 128 x (128 + 8) f32 tile split-K sums through), 32 KB of TMA loads per k-block, 2 x 4 tiles x 2
// = 16 blocks, 2 per SM (shared memory), 16 of 132 SMs busy, 16 / 264 slots of the one wave.
// CHECK-LABEL: // func @tc_matmul
// CHECK-NEXT: // stmt 0 (linalg.fill): {{.*}} outer_prod=1 tc=1 tc_bm=128 tc_bn=128 tc_bk=64
// CHECK-SAME: tc_warpgroups=1 tc_warpgroup_rows=128 tc_mma_n=128 tc_mma_per_kblock=8 tc_mma_per_tile=64
// CHECK-SAME: tc_acc_per_thread=128 tc_threads=128 tc_stages=3 tc_group=1 tc_splitk=2 tc_kblocks=8
// CHECK-SAME: tc_staged=1 tc_smem_bytes=98304 tc_tma_bytes=32768 tc_tiles=8 tc_blocks=16
// CHECK-SAME: tc_blocks_per_sm=2 tc_sm_fill=0.121212 tc_waves=1 tc_wave_eff=0.0606061 tc_tile_eff=1
// CHECK-SAME: tc_intensity=64 tc_flops_per_tile=1.67772e+07{{$}}
// CHECK-NEXT: // stmt 1 (linalg.matmul): {{.*}} tc=1 tc_bm=128 {{.*}} tc_splitk=2 {{.*}} tc_flops_per_tile=1.67772e+07{{$}}
func.func @tc_matmul(%arg0: tensor<256x1024xf16>, %arg1: tensor<1024x512xf16>) -> tensor<256x512xf32>
    attributes {ansor.tc.bm = 128 : i64, ansor.tc.bn = 128 : i64, ansor.tc.group = 1 : i64,
                ansor.tc.persist = 0 : i64, ansor.tc.splitk = 2 : i64, ansor.tc.stages = 3 : i64,
                ansor.tc.wait = 0 : i64, ansor.tc.wgm = 1 : i64, ansor.tc.ws = 0 : i64} {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c1024 = arith.constant 1024 : index
  %cst = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : tensor<256x512xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<256x512xf32>) -> tensor<256x512xf32>
  %2 = scf.forall (%i, %j) in (2, 4) shared_outs(%o = %1) -> (tensor<256x512xf32>) {
    %m0 = affine.apply affine_map<(d0) -> (d0 * 128)>(%i)
    %n0 = affine.apply affine_map<(d0) -> (d0 * 128)>(%j)
    %a = tensor.extract_slice %arg0[%m0, 0] [128, 1024] [1, 1] : tensor<256x1024xf16> to tensor<128x1024xf16>
    %b = tensor.extract_slice %arg1[0, %n0] [1024, 128] [1, 1] : tensor<1024x512xf16> to tensor<1024x128xf16>
    %c = tensor.extract_slice %o[%m0, %n0] [128, 128] [1, 1] : tensor<256x512xf32> to tensor<128x128xf32>
    %3 = scf.for %k = %c0 to %c1024 step %c64 iter_args(%acc = %c) -> (tensor<128x128xf32>) {
      %ak = tensor.extract_slice %a[0, %k] [128, 64] [1, 1] : tensor<128x1024xf16> to tensor<128x64xf16>
      %bk = tensor.extract_slice %b[%k, 0] [64, 128] [1, 1] : tensor<1024x128xf16> to tensor<64x128xf16>
      %4 = linalg.matmul ins(%ak, %bk : tensor<128x64xf16>, tensor<64x128xf16>) outs(%acc : tensor<128x128xf32>) -> tensor<128x128xf32>
      scf.yield %4 : tensor<128x128xf32>
    }
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %3 into %o[%m0, %n0] [128, 128] [1, 1] : tensor<128x128xf32> into tensor<256x512xf32>
    }
  } {mapping = [#gpu.block<y>, #gpu.block<x>]}
  return %2 : tensor<256x512xf32>
}

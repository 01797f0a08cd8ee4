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

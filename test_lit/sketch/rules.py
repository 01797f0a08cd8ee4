# RUN: %python %s | FileCheck %s
# The sketches each CPU derivation rule produces: matmul (+relu), conv2d (+bias+relu), a
# 2-norm (rfactor) and a softmax. Scripts are printed with their holes (transform.tune.knob).

import random

import ansor
from ansor.frontend import workloads
from ansor.space.schedule import sample
from ansor.targets import generate_sketches

MATMUL_RELU = """func.func @mm_relu(%A: tensor<64x32xf32>, %B: tensor<32x16xf32>) -> tensor<64x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<64x16xf32>) -> tensor<64x16xf32>
  %mm = linalg.matmul ins(%A, %B : tensor<64x32xf32>, tensor<32x16xf32>) outs(%init : tensor<64x16xf32>) -> tensor<64x16xf32>
  %e2 = tensor.empty() : tensor<64x16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]} ins(%mm : tensor<64x16xf32>) outs(%e2 : tensor<64x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %m = arith.maximumf %x, %zero : f32
    linalg.yield %m : f32
  } -> tensor<64x16xf32>
  return %r : tensor<64x16xf32>
}
"""

SOFTMAX = """func.func @softmax(%x: tensor<8x128xf32>) -> tensor<8x128xf32> {
  %ninf = arith.constant -3.0e38 : f32
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<8xf32>
  %i1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %max = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                         iterator_types = ["parallel", "reduction"]} ins(%x : tensor<8x128xf32>) outs(%i1 : tensor<8xf32>) {
  ^bb0(%a: f32, %m: f32):
    %r = arith.maximumf %a, %m : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<8x128xf32>
  %ex = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>],
                        iterator_types = ["parallel", "parallel"]} ins(%x, %max : tensor<8x128xf32>, tensor<8xf32>) outs(%e2 : tensor<8x128xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %s = arith.subf %a, %m : f32
    %e = math.exp %s : f32
    linalg.yield %e : f32
  } -> tensor<8x128xf32>
  %i3 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                         iterator_types = ["parallel", "reduction"]} ins(%ex : tensor<8x128xf32>) outs(%i3 : tensor<8xf32>) {
  ^bb0(%a: f32, %s: f32):
    %r = arith.addf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>],
                         iterator_types = ["parallel", "parallel"]} ins(%ex, %sum : tensor<8x128xf32>, tensor<8xf32>) outs(%e2 : tensor<8x128xf32>) {
  ^bb0(%a: f32, %s: f32, %o: f32):
    %r = arith.divf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<8x128xf32>
  return %out : tensor<8x128xf32>
}
"""


def show(title: str, source: str, filled: bool = False) -> None:
    task = ansor.create_task(source)
    sketches = generate_sketches(task)
    print(f"// ===== {title}: " + " | ".join(f"{s.name}: {' + '.join(s.rules)}" for s in sketches))
    print(sketches[0].script())
    if filled:
        print(sketches[0].script(sample(sketches[0], random.Random(0)).values()))


show("matmul", workloads.matmul(64, 32, 16), filled=True)
# CHECK-LABEL: // ===== matmul: s0: multi_level_tiling(op1) | s1: multi_level_tiling_packed(op1) | skip: skip
# CHECK: %[[I1:.+]] = transform.tune.knob<"op1.d0.t1"> options = [1, 2, 4, 8, 16, 32, 64] -> !transform.param<i64>
# CHECK: %[[J3:.+]] = transform.tune.knob<"op1.d1.t3"> options = [1, 2, 4, 8, 16, 32] -> !transform.param<i64>
# CHECK: %[[K1:.+]] = transform.tune.knob<"op1.d2.t1"> options = [1, 2, 4, 8, 16] -> !transform.param<i64>
# CHECK: %[[U:.+]] = transform.tune.knob<"op1.unroll"> options = [0, 16, 64, 512]
# CHECK: %[[OP:.+]] = transform.structured.match attributes{ansor.op = 1 : i64}
# CHECK: transform.structured.tile_using_forall %[[OP]] tile_sizes [%[[I1]], %{{.+}}, 0]
# CHECK: %[[FILL:.+]] = transform.structured.match attributes{ansor.op = 0 : i64}
# CHECK: transform.structured.fuse_into_containing_op %[[FILL]]
# CHECK: transform.annotate %{{.+}} "ansor.auto_unroll_max_step" = %[[U]]
# CHECK: tile_sizes [0, 0, %[[K1]]]
# CHECK: tile_sizes [%{{.+}}, %[[J3]], 0]
# CHECK: tile_sizes [0, 0, 1]
# CHECK: transform.annotate %{{.+}} "ansor.r1"
# CHECK: transform.structured.vectorize
# CHECK: transform.apply_patterns.vector.reduction_to_contract
# CHECK: lowering_strategy = outerproduct
# CHECK: transform.loop.hoist_loop_invariant_subsets
# CHECK: transform.yield
# The filled script: every knob resolved.
# CHECK: transform.tune.knob<"op1.d0.t1"> = {{[0-9]+}} : i64 from options = [1, 2, 4, 8, 16, 32, 64]
# CHECK: transform.tune.knob<"op1.unroll"> = {{(0|16|64|512)}} : i64 from options
# CHECK-NOT: transform.tune.knob<"{{.*}}"> options

show("matmul+relu", MATMUL_RELU)
# CHECK-LABEL: // ===== matmul+relu: s0: multi_level_tiling_with_fusion(op1<-op2@1) | s1: multi_level_tiling_with_fusion(op1<-op2@2) | skip: skip
# CHECK: // stage op #1 (linalg.matmul): mlt, consumer #2 fused at level 1
# CHECK: %[[RELU:.+]] = transform.structured.match attributes{ansor.op = 2 : i64}
# CHECK: %{{.+}}, %[[F:.+]] = transform.structured.tile_using_forall %[[RELU]]
# CHECK: %[[MM:.+]] = transform.structured.match attributes{ansor.op = 1 : i64}
# CHECK: transform.structured.fuse_into_containing_op %[[MM]] into %[[F]]

show("conv2d", workloads.get("c2d-1x9x9x3x4x3x2x1"))

# A 2-D convolution's register tile is one output row, decomposed into a 1-D convolution before
# vectorization (MLIR 22 vectorizes 1-D convolutions only); no packed variant (a packed conv is a
# linalg.generic, which neither decomposes nor vectorizes).
# CHECK-LABEL: // ===== conv2d: s0: multi_level_tiling(op1) | skip: skip
# CHECK: transform.tune.knob<"pad0.loc"> options = [0, 1]
# CHECK: // stage op #1 (linalg.conv_2d_nhwc_hwcf): mlt
# CHECK: tile_using_forall %{{.+}} tile_sizes [%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, 0, 0, 0]
# CHECK: // pad #0: fused into the S0 loop when knob pad0.loc = 1
# CHECK: transform.structured.match attributes{ansor.pad = 0 : i64}
# CHECK-COUNT-3: transform.annotate %{{.+}} "ansor.r1"
# CHECK: %[[DEC:.+]] = transform.structured.decompose
# CHECK: transform.sequence %[[DEC]] : !transform.any_op failures(suppress)
# CHECK-NEXT: ^bb0(%v: !transform.any_op):
# CHECK-NEXT: transform.structured.vectorize %v

show("conv3d", workloads.get("c3d-1x4x9x9x3x4x3x2x1"))

# A 3-D convolution's register tile is one output row too (output depth and height tiles 1), turned
# into a 1-D convolution by our transform op (upstream decompose has no 3-D rule).
# CHECK-LABEL: // ===== conv3d: s0: multi_level_tiling(op1) | skip: skip
# CHECK: // stage op #1 (linalg.conv_3d_ndhwc_dhwcf): mlt
# CHECK-COUNT-4: transform.annotate %{{.+}} "ansor.r1"
# CHECK: %[[DEC3:.+]] = transform.ansor.decompose_conv3d
# CHECK: transform.sequence %[[DEC3]] : !transform.any_op failures(suppress)
# CHECK-NEXT: ^bb0(%v: !transform.any_op):
# CHECK-NEXT: transform.structured.vectorize %v

show("2-norm", workloads.get("nrm-1x64x128"))
# CHECK-LABEL: // ===== 2-norm: s0: tile(op2) + rfactor(op1) | s1: tile(op2) + tile(op1) | skip: skip
# CHECK: // stage op #1 (linalg.generic): rfactor
# CHECK: transform.structured.tile_reduction_using_for %{{.+}} by tile_sizes = [0, {op1.d1.t1}, {op1.d2.t1}]
# CHECK: transform.get_parent_op %{{.+}} {nth_parent = 2 : i64, op_name = "scf.for"}

show("softmax", SOFTMAX)
# The two row reductions have little parallelism (8 rows of 128): rfactor or plain tiling each.
# The whole softmax is also a reduction chain: max, exp and sum fused into the division's
# parallel loop over rows (a further sketch, after the unfused ones).
# CHECK-LABEL: // ===== softmax: s0: tile(op5) + rfactor(op4) + tile(op2) + rfactor(op1) | s1: tile(op5) + rfactor(op4) + tile(op2) + tile(op1) | s2: tile(op5) + tile(op4) + tile(op2) + rfactor(op1) | s3: tile(op5) + tile(op4) + tile(op2) + tile(op1) | s4: reduction_chain(op5<-op4,op2,op1) | skip: skip
# CHECK: // stage op #5 (linalg.generic): tile
# CHECK: // stage op #4 (linalg.generic): rfactor
# CHECK: // stage op #2 (linalg.generic): tile
# CHECK: // stage op #1 (linalg.generic): rfactor

chain = generate_sketches(ansor.create_task(SOFTMAX))[4]
print("// ===== softmax chain")
print(chain.script())
# CHECK-LABEL: // ===== softmax chain
# CHECK: %[[ROWS:.+]] = transform.tune.knob<"op5.d0.t1"> options = [1, 2, 4, 8]
# CHECK: %[[V:.+]] = transform.tune.knob<"op5.d1.t1"> options = [1, 2, 4, 8, 16, 32, 64, 128]
# CHECK: transform.tune.knob<"op4.d1.t1">
# CHECK: transform.tune.knob<"op2.d1.t1">
# CHECK: transform.tune.knob<"op1.d1.t1">
# CHECK: // stage op #5 (linalg.generic): chain
# CHECK: %[[DIV:.+]] = transform.structured.match attributes{ansor.op = 5 : i64}
# CHECK: %{{.+}}, %[[F:.+]] = transform.structured.tile_using_forall %[[DIV]] tile_sizes [%[[ROWS]], 0]
# CHECK: %[[SUM:.+]] = transform.structured.match attributes{ansor.op = 4 : i64}
# CHECK: %{{.+}}, %[[F2:.+]] = transform.structured.fuse_into_containing_op %[[SUM]] into %[[F]]
# CHECK: %[[EXP:.+]] = transform.structured.match attributes{ansor.op = 2 : i64}
# CHECK: %{{.+}}, %[[F3:.+]] = transform.structured.fuse_into_containing_op %[[EXP]] into %[[F2]]
# CHECK: %[[MAX:.+]] = transform.structured.match attributes{ansor.op = 1 : i64}
# CHECK: transform.structured.fuse_into_containing_op %[[MAX]] into %[[F3]]
# CHECK: tile_sizes [1, {op5.d1.t1}]
# each row reduction: one row, then a vector of partials across the row (rfactor in the chain)
# CHECK: tile_sizes [1, 0]
# CHECK: tile_reduction_using_for %{{.+}} by tile_sizes = [0, {op4.d1.t1}]
# CHECK: tile_sizes [1, {op2.d1.t1}]
# CHECK: tile_sizes [1, 0]
# CHECK: tile_reduction_using_for %{{.+}} by tile_sizes = [0, {op1.d1.t1}]
# CHECK-COUNT-8: transform.structured.vectorize %v

task = ansor.create_task(workloads.matmul(64, 32, 16))
packed = generate_sketches(task)[1]
values = {k.name: k.options[0] for k in packed.knobs}
values.update({"op1.d1.t1": 32, "op1.d1.t2": 16, "op1.d1.t3": 8})
print("// ===== packed matmul, filled")
print(packed.script(values))
# CHECK-LABEL: // ===== packed matmul, filled
# CHECK: %[[PK:.+]] = transform.structured.pack %{{.+}} packed_sizes = [0, 8, 0]
# CHECK: transform.get_producer_of_operand %[[PK]][1]
# CHECK: transform.structured.pack_transpose %{{.+}} with_compute_op(%[[PK]]) outer_perm = [1, 0]
# CHECK: transform.structured.lower_pack
# CHECK: transform.structured.lower_unpack
# CHECK: transform.structured.tile_using_forall %{{.+}} tile_sizes [1, 4, 0, 0]
# CHECK: tile_sizes [1, 2, 0, 0]
# CHECK: tile_sizes [1, 1, 0, 0]

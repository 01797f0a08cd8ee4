# RUN: %python %s | FileCheck %s
# The cuda target without a GPU: the GPU sketch of a matmul (holes), one filled schedule lowered
# to PTX (shared-memory tiles, barriers, FMAs), and a fused conv2d + bn + relu.

import ansor
from ansor.frontend import workloads
from ansor.targets.cuda.lowering import emit_ptx
from ansor.targets import generate_sketches

mm = ansor.create_task(workloads.get("matmul-256"), name="matmul-256", target="cuda")
sk = generate_sketches(mm)[0]
print(sk.script())
# CHECK-LABEL: // sketch s0: gpu_multi_level_tiling(op1) (GPU)
# CHECK: transform.tune.knob<"op1.d0.t1"> options = [1, 2, 4, 8, 16, 32, 64, 128, 256]
# CHECK: transform.tune.knob<"op1.unroll"> options = [0, 16, 64, 512, 1024]
# CHECK: tile_using_forall {{.*}} (mapping = [#gpu.block<y>, #gpu.block<x>])
# CHECK: transform.structured.pad
# CHECK: tile_using_forall {{.*}} (mapping = [#gpu.thread<y>, #gpu.thread<x>])
# CHECK: bufferize_to_allocation {{.*}} {memory_space = 3
# CHECK: transform.gpu.map_forall_to_blocks {{.*}} generate_gpu_launch
# CHECK: transform.gpu.map_nested_forall_to_threads

values = {"op1.d0.t1": 64, "op1.d0.t2": 64, "op1.d0.t3": 4, "op1.d0.t4": 4,
          "op1.d1.t1": 64, "op1.d1.t2": 64, "op1.d1.t3": 4, "op1.d1.t4": 4,
          "op1.d2.t1": 16, "op1.d2.t2": 4, "op1.unroll": 16}
print(emit_ptx(mm, sk.script(values), arch="sm_90"))
# CHECK-LABEL: .target sm_90
# CHECK: .visible .entry matmul_kernel(
# CHECK-DAG: .shared .align 16 .b8 {{.*}}[4096];
# CHECK-DAG: .shared .align 16 .b8 {{.*}}[4096];
# CHECK: st.shared
# CHECK: bar.sync 0;
# CHECK: ld.shared
# CHECK: fma.rn.f32
# CHECK: ret;

cl = ansor.create_task(workloads.get("convlayer-1x56x56x64x128x1x1x0"), name="cl", target="cuda")
csk = generate_sketches(cl)[0]
print(csk.rule)
# CHECK: gpu_multi_level_tiling_with_fusion(op1<-op2)
print(emit_ptx(cl, csk.script(csk.sample(__import__("random").Random(0)).values()), arch="sm_90"))
# CHECK: .visible .entry conv2d_bn_relu_kernel(
# CHECK: max.{{.*}}f32

# The classic SGEMM configuration (128x128 block tile, 8x8 accumulators per thread = 256 threads,
# K tile 8) is in the search space, and its kernel has what a fast SGEMM needs: 128-bit global
# loads stored as 128-bit shared stores, the next K tile's loads issued before the computation
# on the current one (prefetch), 128-bit shared reads, the accumulators in registers across the
# whole reduction (no local memory, C written once after the loop) and the K tile unrolled.
big = ansor.create_task(workloads.get("matmul-1024"), name="matmul-1024", target="cuda")
bsk = generate_sketches(big)[0]
classic = {"op1.d0.t1": 128, "op1.d0.t2": 128, "op1.d0.t3": 8, "op1.d0.t4": 8,
           "op1.d1.t1": 128, "op1.d1.t2": 128, "op1.d1.t3": 8, "op1.d1.t4": 8,
           "op1.d2.t1": 8, "op1.d2.t2": 8, "op1.unroll": 1024}
print("classic:", bsk.validate(classic))
# CHECK-LABEL: classic: None
print(emit_ptx(big, bsk.script(classic), arch="sm_90"))
# CHECK: .visible .entry matmul_kernel(
# CHECK-NOT: .local
# CHECK: ld.global.v4.b32
# CHECK: ld.global.v4.b32
# CHECK-NOT: st.global
# CHECK: $L__BB0_1:
# CHECK-NEXT: st.shared.v4.b32
# CHECK: ld.global.v4.b32
# CHECK: st.shared.v4.b32
# CHECK: ld.global.v4.b32
# CHECK: bar.sync 0;
# CHECK: ld.shared.v4.b32
# CHECK-COUNT-512: fma.rn.f32
# CHECK-NOT: ld.global
# CHECK: bar.sync 0;
# CHECK: bra
# CHECK-COUNT-16: st.global.v4.b32
# CHECK-NOT: .local
# CHECK: ret;

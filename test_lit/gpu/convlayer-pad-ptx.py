# RUN: %python %s | FileCheck %s
# The cuda target without a GPU: a 3x3 ConvLayer whose convolution reads a `tensor.pad` result.
# The pad is fused into the convolution's reads as guarded loads (no padded buffer, no host work):
# every read of the padded input becomes a read of the input at indices clamped into it and a
# select of the padding value where an unsigned range test on the padded dims fails (no branch).
# Since 46ca6cf the image is cached in shared memory, so these are the copy's reads: 4 channels a
# vector where the tile allows (before, each thread's own scalar reads of its windows).

import ansor
from ansor.core import native as _native
from ansor.frontend import workloads
from ansor.targets.cuda.lowering import emit_ptx, lower_to_gpu_ir
from ansor.targets.cuda.rules import default_script
from ansor.targets import generate_sketches
from mlir import ir

cl = ansor.create_task(workloads.get("convlayer-1x56x56x64x128x3x2x1"), name="cl", target="cuda")
sk = generate_sketches(cl)[0]
print(sk.rule)
# CHECK: gpu_multi_level_tiling_with_fusion(op1<-op2)

_native.register_everything()
with ir.Context(), ir.Location.unknown():
    text = str(lower_to_gpu_ir(cl, default_script(cl)))
print("padded buffer:", "memref<1x58x58x64xf32>" in text)
# CHECK: padded buffer: False
for line in text.splitlines():
    if ("arith.cmpi ult" in line or "vector.transfer_read %arg0[" in line or "arith.minsi" in line
            or ("scf.if" in line or "arith.select" in line) and "vector<" in line):
        print(line.strip())

# CHECK-NOT: scf.if {{.*}} -> (vector
# CHECK: arith.cmpi ult, {{.*}}, %c56
# CHECK: arith.minsi {{.*}}, %c55
# CHECK: arith.cmpi ult, {{.*}}, %c56
# CHECK: arith.minsi {{.*}}, %c55
# CHECK: [[V:%.*]] = vector.transfer_read %arg0[
# CHECK-NEXT: arith.select {{.*}}, [[V]], {{.*}} : vector<{{[0-9]+}}xf32>
# CHECK-NOT: scf.if {{.*}} -> (vector

ptx = emit_ptx(cl, default_script(cl), arch="sm_90")
print(ptx)
# CHECK-LABEL: .visible .entry conv2d_bn_relu_kernel(
# CHECK: .shared
# CHECK: setp.{{(gt|lt)}}.u64 {{.*}}, {{55|56}};
# CHECK: ld.global.b32
# CHECK: fma.rn.f32
# CHECK: max.{{.*}}f32
# CHECK: ret;

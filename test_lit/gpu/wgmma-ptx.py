# RUN: %python %s | FileCheck %s
# The tensor-core sketch without a GPU: an f16 matmul's wgmma + TMA kernel, lowered to PTX, has
# the structure issue 27 asks for (warpgroup MMAs fed by bulk tensor copies through an mbarrier
# pipeline, accumulators in registers: no local memory), with and without the persistent,
# warp-specialised variant.

import ansor
from ansor.frontend import workloads
from ansor.targets import generate_sketches
from ansor.targets.cuda.lowering import emit_ptx

task = ansor.create_task(workloads.get("matmul-256x512x1024-f16"), name="mm16", target="cuda")
sk = generate_sketches(task)[0]
print(sk.name)
# CHECK: tc0
base = dict(sk.sample(__import__("random").Random(0)).values())
# the persistent variant runs whole tiles (no split K): pinned, not left to the sampler's draw
for extra in ({}, {"tc.ws": 1, "tc.persist": 1, "tc.splitk": 1}):
    values = {**base, **{k: v for k, v in extra.items() if k in base}}
    print("// variant", sorted(k for k in extra if k != "tc.splitk"))
    print(emit_ptx(task, sk.script(values), arch="sm_90"))
# CHECK-LABEL: // variant []
# CHECK: .target sm_90a
# CHECK: .entry
# CHECK: mbarrier.init
# CHECK: cp.async.bulk.tensor
# CHECK: mbarrier.try_wait
# CHECK: wgmma.fence
# CHECK: wgmma.mma_async.sync.aligned.{{m64n[0-9]+k16}}.f32.f16.f16
# CHECK: wgmma.commit_group
# CHECK: wgmma.wait_group
# CHECK-NOT: .local
# CHECK-LABEL: // variant ['tc.persist', 'tc.ws']
# CHECK: .entry
# CHECK: cp.async.bulk.tensor
# CHECK: wgmma.mma_async.sync.aligned
# The consumers hand each stage back to the producer warpgroup through its "empty" barrier.
# CHECK: mbarrier.arrive.shared.b64
# CHECK-NOT: .local

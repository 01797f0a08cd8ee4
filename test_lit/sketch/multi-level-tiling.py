# RUN: %python %s | FileCheck %s
# The multi-level tiling sketch of a matmul: knobs as holes, then the same script filled.

import random

import ansor
from ansor import workloads
from ansor.annotation import sample
from ansor.sketch import generate_sketches

task = ansor.create_task(workloads.matmul(64, 32, 16))
sketches = generate_sketches(task)
print("// sketches:", ", ".join(s.name for s in sketches))
mlt = sketches[0]
print(mlt.script())
print(mlt.script(sample(mlt, random.Random(0)).values()))

# CHECK-LABEL: // sketches: mlt_op1, skip
# CHECK: transform.named_sequence @__transform_main
# CHECK: %[[I1:.+]] = transform.tune.knob<"d0.t1"> options = [1, 2, 4, 8, 16, 32, 64] -> !transform.param<i64>
# CHECK: %[[J3:.+]] = transform.tune.knob<"d1.t3"> options = [1, 2, 4, 8, 16, 32] -> !transform.param<i64>
# CHECK: %[[K1:.+]] = transform.tune.knob<"d2.t1"> options = [1, 2, 4, 8, 16] -> !transform.param<i64>
# CHECK: %[[U:.+]] = transform.tune.knob<"unroll"> options = [0, 16, 64, 512]
# CHECK: %[[OP:.+]] = transform.structured.match attributes{ansor.op = 1 : i64}
# CHECK: transform.structured.tile_using_forall %[[OP]] tile_sizes [%[[I1]], %{{.+}}, 0]
# CHECK: transform.structured.fuse_into_containing_op
# CHECK: transform.annotate %{{.+}} "ansor.auto_unroll_max_step" = %[[U]]
# CHECK: transform.structured.tile_using_for %{{.+}} tile_sizes [0, 0, %[[K1]]]
# CHECK: tile_sizes [0, 0, 1]
# CHECK: transform.annotate %{{.+}} "ansor.r1"
# CHECK: transform.structured.vectorize_children_and_apply_patterns
# CHECK: lowering_strategy = outerproduct
# CHECK: transform.loop.hoist_loop_invariant_subsets
# CHECK: transform.yield

# The filled script: every knob resolved.
# CHECK: transform.tune.knob<"d0.t1"> = {{[0-9]+}} : i64 from options = [1, 2, 4, 8, 16, 32, 64]
# CHECK: transform.tune.knob<"unroll"> = {{(0|16|64|512)}} : i64 from options
# CHECK-NOT: transform.tune.knob<"{{.*}}"> options

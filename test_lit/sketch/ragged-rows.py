# RUN: %python %s | FileCheck %s
# The cuda target's cross-thread reduction script for a ragged row (targets/cuda/reduction.py):
# softmax over rows of 197 columns, the untuned default (224 threads): every op along the
# columns padded to 224, the reductions masked (ansor-gpu-mask-ragged-reductions) before the
# producers' pads are folded, the column masks fused into the block and into each reduction's
# thread loop; a row of 1024 columns renders as before (no padding).

from ansor.core.task import create_task
from ansor.frontend import workloads
from ansor.targets.cuda.rules import default_script

print(default_script(create_task(workloads.get("softmax-7x197"), name="softmax197", target="cuda")))
print("// -----")
print(default_script(create_task(workloads.get("softmax-7x1024"), name="softmax1024", target="cuda")))

# CHECK: // ragged rows: 224 threads do not divide 197 columns; every op along them is padded to 224
# CHECK-COUNT-4: transform.structured.pad_tiling_interface %{{.+}} to padding_sizes [0, 224] pad_to_multiple_of
# CHECK: %[[F1:.+]] = transform.apply_registered_pass "ansor-gpu-mask-ragged-reductions" to %{{.+}}
# CHECK: %[[F2:.+]] = transform.apply_registered_pass "ansor-gpu-fold-ragged-pads" to %[[F1]]
# CHECK: transform.apply_patterns to %[[F2]] {
# CHECK: transform.structured.tile_using_forall %{{.+}} tile_sizes [1, 0] (mapping = [#gpu.block<x>])
# CHECK: %[[MASK:.+]] = transform.structured.match attributes{ansor.ragged_mask} in %root
# CHECK: transform.structured.fuse_into_containing_op %[[MASK]] into
# CHECK: %{{.+}}, %[[PART:.+]], %{{.+}}, %{{.+}} = transform.structured.tile_reduction_using_forall %{{.+}} by num_threads = [0, 224]
# CHECK: // and its column mask (its last input)
# CHECK-NEXT: transform.get_producer_of_operand %[[PART]][1]
# CHECK: tile_reduction_using_forall %{{.+}} by num_threads = [0, 224]
# CHECK: // and its column mask (its last input)
# CHECK: transform.gpu.map_nested_forall_to_threads %{{.+}} block_dims = [224, 1, 1]
# CHECK-LABEL: // -----
# CHECK-NOT: pad_tiling_interface
# CHECK-NOT: ansor.ragged
# CHECK: tile_reduction_using_forall %{{.+}} by num_threads = [0, 256]
# CHECK: block_dims = [256, 1, 1]

"""The CUDA target: Ansor's GPU rules (SSSRRSRS, cross-thread reductions), NVVM/PTX lowering,
the MLIR CUDA runtime.

    CudaTarget.generate_sketches --rules.generate_gpu_sketches--> [GpuSketch | RowSketch, skip]
    CudaTarget.compile           --lowering.compile_task_cuda--> CudaKernel (device buffers)
    CudaTarget.reference_task    --> the same task on the CPU (trusted reference outputs)
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ansor.targets import Target

if TYPE_CHECKING:
    from ansor.core.task import SearchTask
    from ansor.space.sketch import Sketch
    from ansor.targets import Kernel


class CudaTarget(Target):
    name = "cuda"
    #: TVM v0.19 `sketch_policy.cc`, GPU: MutateTileSize 0.90, MutateAutoUnroll 0.10 (no compute
    #: location or parallel mutations: block/thread binding is part of the tile sizes)
    mutation_weights = {"tile": 0.90, "unroll": 0.10}
    #: the CUDA driver reserves far more virtual memory than any cap we would set
    worker_memory_mb = 0
    baseline_name = "default GPU schedule"
    supports_compile = False
    #: Off until the GPU rules schedule a fused chain with an anchor: BERT's matmul + LayerNorm
    #: would get only the one-row-per-block reduction sketch, its attention task only the default
    #: schedule (the CPU's `reduction_chain` sketch has no GPU counterpart for those yet).
    row_chains = False

    def generate_sketches(self, task: SearchTask) -> list[Sketch]:
        from ansor.targets.cuda.rules import generate_gpu_sketches

        return generate_gpu_sketches(task)

    def compile(self, task: SearchTask, script: str | None) -> Kernel:
        from ansor.targets.cuda.lowering import compile_task_cuda

        return compile_task_cuda(task, script)

    def reference_task(self, task: SearchTask) -> SearchTask:
        return dataclasses.replace(task, target="cpu")

    def host_info(self) -> dict[str, Any]:
        from ansor.targets.cuda.runtime import gpu_name

        return {"gpu": gpu_name()}

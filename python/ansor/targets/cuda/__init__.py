"""The CUDA target: Ansor's GPU rules (SSSRRSRS, cross-thread reductions), NVVM/PTX lowering,
the MLIR CUDA runtime.

    CudaTarget.generate_sketches --rules.generate_gpu_sketches--> [GpuSketch | RowSketch, skip]
    CudaTarget.compile           --lowering.compile_task_cuda--> CudaKernel (device buffers)
    CudaTarget.build / .load     --lowering.build_task_cuda (any machine: script -> PTX + host
                                   LLVM dialect, bytecode) / load_task_cuda (the GPU: JIT)--> CudaKernel
    CudaTarget.compile_network   --network.compile_network (a partitioned model: every task's kernel
                                   on device buffers, weights folded once on the CPU)--> CudaNetwork
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
    supports_compile = True
    #: Off until the GPU rules schedule a fused chain with an anchor: BERT's matmul + LayerNorm
    #: would get only the one-row-per-block reduction sketch, its attention task only the default
    #: schedule (the CPU's `reduction_chain` sketch has no GPU counterpart for those yet).
    row_chains = False
    #: Channels-first models stay channels-first: the channels-last rewrite leaves the model
    #: input's pad + NCHW->NHWC transpose in the first convolution's task, which no GPU rule
    #: fuses (ResNet-18, MobileNet-V2: their first task had no GPU schedule), while the GPU
    #: sketches tile an NCHW convolution like any other (no vector lanes along the channels).
    default_layout = "keep"
    #: MLIR 22's tile_reduction_using_forall aborts on BERT's keepdim softmax sums otherwise
    fold_unit_reduction_dims = True

    def generate_sketches(self, task: SearchTask) -> list[Sketch]:
        from ansor.targets.cuda.rules import generate_gpu_sketches

        return generate_gpu_sketches(task)

    def compile(self, task: SearchTask, script: str | None) -> Kernel:
        from ansor.targets.cuda.lowering import compile_task_cuda

        return compile_task_cuda(task, script)

    #: Builders lower to PTX (`lowering.build_task_cuda`), runners only JIT the host code.
    supports_artifacts = True

    def default_builders(self) -> int:
        """All cores but two (the runner's and the driver's): builds are CPU work and do not
        disturb a GPU timing the way they would a CPU one, and a CUDA candidate's build (MLIR
        lowering + NVPTX, 0.1-30 s) is most of its measurement."""
        import os

        return max(1, (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1) - 2)

    def default_runners(self) -> int:
        """Two: one verifies and times while the other loads its next candidate (the host JIT and
        module load, 30-70 ms). On an H200 this left every candidate's latency where one runner
        put it (median ratio 0.998-1.002, results/build-pool/README.md, c6108af) and raised
        candidates per minute 1.4-1.9x for fast kernels."""
        return 2

    def build(self, task: SearchTask, script: str | None) -> bytes:
        from ansor.targets.cuda.lowering import build_task_cuda

        return build_task_cuda(task, script)

    def load(self, task: SearchTask, artifact: bytes) -> Kernel:
        from ansor.targets.cuda.lowering import load_task_cuda

        return load_task_cuda(task, artifact)

    def compile_network(self, task: SearchTask, callees: dict[str, SearchTask],
                        scripts: dict[str, str | None], *, profile: bool = False) -> Kernel:
        if profile:
            raise ValueError("profiling a compiled model per task is CPU-only (targets/cpu/profile.py)")
        from ansor.targets.cuda.network import compile_network

        return compile_network(task, callees, scripts)

    def reference_task(self, task: SearchTask) -> SearchTask:
        return dataclasses.replace(task, target="cpu")

    def host_info(self) -> dict[str, Any]:
        from ansor.targets.cuda.runtime import gpu_name

        return {"gpu": gpu_name()}

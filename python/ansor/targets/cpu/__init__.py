"""The CPU target: Ansor's CPU rules, LLVM + OpenMP lowering, the host's vector width.

    CpuTarget.generate_sketches --rules.generate_sketches--> [CpuSketch]
    CpuTarget.compile           --lowering.compile_task--> CompiledKernel (ExecutionEngine, native loop)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ansor.targets import Target

if TYPE_CHECKING:
    from ansor.core.task import SearchTask
    from ansor.space.sketch import Sketch
    from ansor.targets import Kernel

#: TVM v0.19 `sketch_policy.cc`, CPU: MutateTileSize 0.90, MutateComputeLocation 0.05,
#: MutateAutoUnroll 0.04, MutateParallel 0.01.
CPU_MUTATION_WEIGHTS: dict[str, float] = {"tile": 0.90, "location": 0.05, "unroll": 0.04, "parallel": 0.01}


class CpuTarget(Target):
    name = "cpu"
    mutation_weights = CPU_MUTATION_WEIGHTS
    supports_cache_flush = True
    baseline_name = "naive loops"
    supports_compile = True

    def evict(self, arrays: list) -> bool:
        from ansor.targets.cpu import cacheflush

        if not cacheflush.available():
            return False
        cacheflush.evict(arrays)
        return True

    def generate_sketches(self, task: SearchTask) -> list[Sketch]:
        from ansor.targets.cpu.rules import generate_sketches

        return generate_sketches(task)

    def compile(self, task: SearchTask, script: str | None) -> Kernel:
        from ansor.targets.cpu.lowering import compile_task

        return compile_task(task, script)

    supports_artifacts = True

    def build(self, task: SearchTask, script: str | None) -> bytes:
        from ansor.targets.cpu.lowering import build_task

        return build_task(task, script)

    def load(self, task: SearchTask, artifact: bytes) -> Kernel:
        from ansor.targets.cpu.lowering import load_task

        return load_task(task, artifact)

    def set_threads(self, n: int | None) -> None:
        from ansor.targets.cpu.lowering import set_threads

        set_threads(n)

    def compile_network(self, task: SearchTask, callees: dict[str, SearchTask],
                        scripts: dict[str, str | None], *, profile: bool = False) -> Kernel:
        from ansor.targets.cpu.lowering import compile_network

        return compile_network(task, callees, scripts, profile=profile)

    def describe(self) -> str:
        from ansor.targets.cpu import params

        return f"cpu ({params.VECTOR_BITS}-bit vectors)"

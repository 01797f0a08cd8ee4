"""Targets as plugins: everything that differs between CPU and GPU, chosen once per task.

    SearchTask.target ("cpu" | "cuda") --get_target--> Target
        .generate_sketches(task)      derivation rules          (targets/<name>/rules.py)
        .compile(task, script)        script -> runnable Kernel (targets/<name>/lowering.py)
        .build(task, script) -> bytes --load(task, artifact)--> Kernel   the same in two halves,
                                      on two machines (`measure/builder.py`, `measure/runner.py`)
        .reference_task(task)         where the reference outputs are computed
        .mutation_weights             the evolutionary search's mutation mix
        .supports_cache_flush, .evict(arrays), .worker_memory_mb, .describe(), .host_info()

Generic code (search, measurement, tuning, compile, CLI) imports only this module; the
target packages are imported on first use, by name, from `_REGISTRY`, so `import ansor` loads
no target code and `targets/cpu` and `targets/cuda` never import each other.
"""

from __future__ import annotations

import abc
import importlib
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from ansor.core.task import SearchTask
    from ansor.space.sketch import Sketch

#: target name -> "module:class" of its `Target`
_REGISTRY: dict[str, str] = {
    "cpu": "ansor.targets.cpu:CpuTarget",
    "cuda": "ansor.targets.cuda:CudaTarget",
}


class UnknownTargetError(ValueError):
    """A target name that no plugin provides."""


class Kernel(Protocol):
    """A compiled program: `run` it (outputs: poisoned arrays to write into), `time` n calls."""

    def run(self, inputs: list[np.ndarray], outputs: list[np.ndarray] | None = None) -> list[np.ndarray]: ...

    def time(self, inputs: list[np.ndarray], number: int) -> float: ...

    def alloc_outputs(self) -> list[np.ndarray]: ...


class Target(abc.ABC):
    """One kind of hardware: its rules, lowering, limits and search policy."""

    #: the string stored in `SearchTask.target` and in records
    name: str
    #: mutation kind -> weight of the evolutionary search (`search/evolution.py`)
    mutation_weights: dict[str, float]
    #: whether `RunOptions.cache_flush` applies (TVM's flush is CPU-only)
    supports_cache_flush: bool = False

    def evict(self, arrays: list) -> bool:
        """Evict `arrays` (numpy) from every cache level, leaving the rest of the caches alone
        (`cache_flush="weights"`); False where this target cannot (the caller then evicts all)."""
        return False
    #: address-space cap of a measurement worker in MB; None: `config.WORKER_MEMORY_MB`
    worker_memory_mb: int | None = None
    #: what "the untuned program" is called in progress output and reports
    baseline_name: str = "untuned program"
    #: `extract_tasks(winograd=...)` default for this target (0: direct convolutions). Off on the
    #: CPU: on a Zen 5 host (AVX-512, 2 cores) the Winograd ResNet-18 ran 0.82x the direct one
    #: end to end although its tasks, each timed warm alone, summed to 0.6x (the transforms move
    #: ~5x the bytes of a direct convolution and run memory-bound inside the model); on the AVX2
    #: host before it, 1.41x faster (docs/models.md, "Winograd convolutions").
    default_winograd: int = 0
    #: `extract_tasks(layout=...)` default: "nhwc" rewrites channels-first convolutions and pooling
    #: channels-last (the CPU sketches vectorize over the channels: ~3x the GFLOP/s of NCHW on
    #: ResNet-18's 3x3 convolutions); "keep" leaves the model's layout.
    default_layout: str = "nhwc"
    #: whether `extract_tasks` folds the unit dims of a task whose reduction keeps them (a
    #: constant in its result map): the GPU works around an upstream assertion that way
    #: (`partition._fold_unit_reduction_dims`); the CPU rules handle such maps as they are.
    fold_unit_reduction_dims: bool = False
    #: `extract_tasks(split=...)` default: whether row-wise reduction chains (softmax, LayerNorm,
    #: attention scores + softmax) join their group (`ansor-partition`'s `row-chains`).
    row_chains: bool = True
    #: whether `ansor.compile` can build whole programs for it
    supports_compile: bool = False

    @abc.abstractmethod
    def generate_sketches(self, task: SearchTask) -> list[Sketch]:
        """All sketches of `task`; the last one is the `skip` fallback."""

    @abc.abstractmethod
    def compile(self, task: SearchTask, script: str | None) -> Kernel:
        """Apply `script` (None: the untuned program) and build. Raises `LoweringError`."""

    def set_threads(self, n: int | None) -> None:
        """Threads the compiled programs of this process use (None: all cores)."""

    #: whether `build`/`load` split `compile` in two (else a runner compiles from the script)
    supports_artifacts: bool = False

    def default_builders(self) -> int:
        """Build-ahead worker processes a tuning run on this machine uses unless told (`--builders`):
        none by default, the runner's worker builds each candidate before timing it."""
        return 0

    def default_runners(self) -> int:
        """Runner worker processes a tuning run on this machine uses unless told (`--runners`): one
        (a second would load its candidate beside a timing: on a CPU that disturbs it)."""
        return 1

    def build(self, task: SearchTask, script: str | None) -> bytes:
        """The machine-independent half of `compile`: apply `script` and lower, returning an
        artifact that `load` turns into a Kernel on another process or machine with the same
        MLIR. Raises `LoweringError`."""
        raise NotImplementedError(f"target {self.name!r} has no build artifacts")

    def load(self, task: SearchTask, artifact: bytes) -> Kernel:
        """The other half: the Kernel of an artifact made by `build`. Raises `LoweringError`."""
        raise NotImplementedError(f"target {self.name!r} has no build artifacts")

    def compile_network(self, task: SearchTask, callees: dict[str, SearchTask],
                        scripts: dict[str, str | None], *, profile: bool = False) -> Kernel:
        """A whole model in one module, each callee with its script (`ansor.compile`); `profile`:
        with timers around the callees' calls (CPU: `targets/cpu/profile.py`)."""
        raise NotImplementedError(f"target {self.name!r} cannot compile whole models yet")

    def reference_task(self, task: SearchTask) -> SearchTask | None:
        """The task whose untransformed program computes trusted reference outputs on this
        host (None: `task` itself, compiled with `compile(task, None)`)."""
        return None

    def describe(self) -> str:
        """One line for progress output: the target and what its limits follow."""
        return self.name

    def host_info(self) -> dict[str, Any]:
        """What a record should say about the device (provenance)."""
        return {}


_instances: dict[str, Target] = {}


def target_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def get_target(name: str) -> Target:
    """The `Target` called `name`. Raises `UnknownTargetError` with a one-line message."""
    t = _instances.get(name)
    if t is not None:
        return t
    spec = _REGISTRY.get(name)
    if spec is None:
        raise UnknownTargetError(f"unknown target {name!r} (known: {', '.join(_REGISTRY)})")
    module, cls = spec.split(":")
    t = _instances[name] = getattr(importlib.import_module(module), cls)()
    return t


def generate_sketches(task: SearchTask) -> list[Sketch]:
    """The sketches of `task` under its target's derivation rules."""
    return get_target(task.target).generate_sketches(task)


def compile_task(task: SearchTask, script: str | None) -> Kernel:
    """`task` with `script` applied (None: untuned), built for its target."""
    return get_target(task.target).compile(task, script)

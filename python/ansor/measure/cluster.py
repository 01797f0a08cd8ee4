"""Measurement on a Ray cluster: builder actors on every node, one runner actor per GPU or CPU node.

    [MeasureInput] --driver (dispatcher, back-pressure)--> BuilderActor.build (any node: apply +
        lower, `builder.py`) --BuildResult + artifact ref--> RunnerActor.run (the target hardware:
        JIT, verify, time, `runner.py`) --MeasureResult--> driver --on_result--> the tuner's log

Ray is the broker (scheduling, object transfer, failure detection); this module only decides
what goes where. The driver alone writes the log: results are streamed back to it and handed to
`on_result` as each arrives. A builder or runner actor that dies (its node removed, its process
killed) has its candidates re-queued on the others, a candidate is reported exactly once, and
one that loses `max_attempts` actors becomes a `crash` result rather than hanging the run.
Candidates are dispatched with back-pressure: each builder holds at most `_PER_BUILDER` calls,
each runner `_PER_RUNNER`, and at most two built-but-not-run candidates wait per runner.

Runners are one per node offering a CPU (target "cpu") or one per GPU (target "cuda", Ray's
`num_gpus`); `resources` restricts them to nodes that declare those Ray resources (how a cluster
names its hardware). Every runner reports its hardware (CPU model, cores, GPU name) and its
ansor and MLIR versions: runners of different hardware for one task are refused (`ClusterError` at the
start; a later joiner that differs is left out with a warning), since their latencies do not
compare. Nodes that join later get actors at the next batch.

Ray is imported here only: `ansor tune` without `--cluster` never loads it (tests/test_ray.py).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import logging
import math
import os
import platform
import time
from dataclasses import dataclass
from typing import Any

from ansor.core.task import SearchTask
from ansor.measure.builder import BuildResult, LocalBuilder
from ansor.measure.measurer import MeasureError, MeasureInput, Measurer, MeasureResult, OnResult, RunOptions
from ansor.measure.runner import LocalRunner

log = logging.getLogger(__name__)

#: Calls queued on one builder actor / one runner actor at a time (one working, one waiting).
_PER_BUILDER = 2
_PER_RUNNER = 2


class ClusterError(RuntimeError):
    """The cluster cannot measure this task (no node to run on, mixed hardware, bad address)."""


def parse_cluster(spec: str) -> str | None:
    """The Ray address of a `--cluster` value: "ray" -> None (the cluster this machine belongs
    to, `RAY_ADDRESS` or a running `ray start`; else a fresh one-machine instance), "ray://HOST:PORT"
    (Ray Client) or "ray:HOST:PORT" (a head node's GCS address) -> the address. Raises ValueError."""
    if spec == "ray":
        return None
    if spec.startswith("ray://") and len(spec) > len("ray://"):
        return spec
    if spec.startswith("ray:") and ":" in spec[4:]:
        return spec[4:]
    raise ValueError(f"unknown --cluster {spec!r} (expected 'ray', 'ray://HOST:PORT' or 'ray:HOST:PORT')")


def _node_name(node_id: str) -> str:
    return f"{platform.node()}:{node_id[:8]}"


def software() -> dict[str, str | None]:
    """What must agree between the driver, builders and runners for an artifact to mean the same
    everywhere: the ansor version and the MLIR build (not the commit: a development tree moves)."""
    import importlib.metadata

    from ansor.measure.provenance import package_version

    try:
        mlir = importlib.metadata.version("xtc-mlir-python-bindings")
    except importlib.metadata.PackageNotFoundError:
        mlir = None  # a runtime unpacked by hand (the GPU host's .gpu/)
    return {"ansor": package_version(), "mlir": mlir}


class BuilderActor:
    """A Ray actor around a one-worker `LocalBuilder`."""

    def __init__(self, options: RunOptions, memory_mb: int | None) -> None:
        self._builder = LocalBuilder(1, options, memory_mb=memory_mb)

    def identity(self) -> dict[str, Any]:
        return software()

    def build(self, inp: MeasureInput) -> tuple[BuildResult, bytes | None]:
        """(the result without its artifact, the artifact): two Ray objects, so the driver reads
        the small one and hands the large one to a runner without fetching it."""
        res = self._builder.submit(inp).result()
        return dataclasses.replace(res, artifact=None), res.artifact


class RunnerActor:
    """A Ray actor around a `LocalRunner` on one node (one GPU: Ray sets CUDA_VISIBLE_DEVICES)."""

    def __init__(self, options: RunOptions, memory_mb: int | None, target: str) -> None:
        import ray

        self._runner = LocalRunner(options, memory_mb=memory_mb)
        self.target = target
        self.node = _node_name(ray.get_runtime_context().get_node_id())

    def identity(self) -> dict[str, Any]:
        """The hardware (what must agree between runners) and the node's name."""
        from ansor.measure.provenance import host

        h = host(self.target)
        return {"cpu": h["cpu"], "cores": h["cores"], "gpu": h.get("gpu"), **software(), "node": self.node}

    def baseline(self, task: SearchTask) -> MeasureResult:
        return dataclasses.replace(self._runner.baseline(task), node=self.node)

    def run(self, inp: MeasureInput, build: BuildResult, artifact: bytes | None, best: float) -> MeasureResult:
        res = self._runner.run(inp, dataclasses.replace(build, artifact=artifact), best=best)
        return dataclasses.replace(res, node=self.node)


#: What must agree between every runner of a task (besides `software()`).
HARDWARE_FIELDS = ("cpu", "cores", "gpu")


def hardware_mismatch(identities: list[dict[str, Any]]) -> str | None:
    """None when every runner identity agrees on `HARDWARE_FIELDS` and the ansor build; else a
    one-line description naming two nodes that differ."""
    if not identities:
        return None
    first = identities[0]
    for other in identities[1:]:
        diff = [f for f in (*HARDWARE_FIELDS, "ansor", "mlir") if other.get(f) != first.get(f)]
        if diff:
            a = ", ".join(f"{f}={first.get(f)!r}" for f in diff)
            b = ", ".join(f"{f}={other.get(f)!r}" for f in diff)
            return f"node {first.get('node')} has {a} but node {other.get('node')} has {b}"
    return None


@dataclass(eq=False)
class _Actor:
    handle: Any
    node_id: str
    in_flight: int = 0


@functools.cache
def _remote_classes() -> tuple[Any, Any]:
    import ray

    return ray.remote(BuilderActor), ray.remote(RunnerActor)


def _infrastructure(exc: BaseException) -> bool:
    """Whether a Ray error comes from the cluster (a dead actor, node or object) rather than from
    a bug in the actor's code, which is raised to the caller."""
    import ray

    if isinstance(exc, ray.exceptions.RayTaskError):
        return isinstance(exc.cause, ray.exceptions.RayError)
    return isinstance(exc, ray.exceptions.RayError)


class RayMeasurer(Measurer):
    """Measures on the nodes of a Ray cluster; `tune(task, measurer=RayMeasurer())`.

    `address`: where the cluster is (`parse_cluster`; None: `ray.init()`'s default); an already
    initialised Ray is used as it is. `builders_per_node`: builder actors per node;
    `resources`: Ray resources a node must declare to get a runner; `max_attempts`: actors a
    candidate may lose before it is reported as a crash; `memory_mb`: each worker process's cap.
    """

    kind = "ray"

    def __init__(self, address: str | None = None, *, options: RunOptions | None = None,
                 builders_per_node: int = 1, resources: dict[str, float] | None = None,
                 memory_mb: int | None = None, max_attempts: int = 3,
                 init_kwargs: dict[str, Any] | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise ClusterError("RayMeasurer needs Ray: pip install 'ansor-mlir[ray]'") from None
        if builders_per_node < 1:
            raise ValueError(f"builders_per_node must be >= 1, not {builders_per_node}")
        self.options = options or RunOptions()
        self.builders_per_node = builders_per_node
        self.resources = dict(resources or {})
        self.memory_mb = memory_mb
        self.max_attempts = max_attempts
        self._own_ray = not ray.is_initialized()
        if self._own_ray:
            try:
                ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False,
                         **(init_kwargs or {}))
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise ClusterError(f"cannot reach the Ray cluster at {address or 'auto'}: "
                                   f"{str(exc).splitlines()[0]}") from None
        self._builders: list[_Actor] = []
        self._runners: list[_Actor] = []
        self._refused: set[str] = set()  # node ids whose runner was refused
        self._target: str | None = None
        self._identity: dict[str, Any] | None = None
        self._baselines: dict[str, MeasureResult] = {}
        self._best: dict[str, float] = {}
        self._turn = 0
        self.requeued = 0  # candidates re-dispatched after losing their actor (for tests/reports)

    # -- actors ----------------------------------------------------------------------------

    def _start_actors(self, target: str) -> None:
        """Actors for alive nodes that have none yet; drops those of dead nodes. The first call
        raises ClusterError for mixed runner hardware or a cluster with no node to run on."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if self._target is not None and target != self._target:
            raise ClusterError(f"this RayMeasurer runs {self._target} tasks, not {target} "
                               "(one measurer per target)")
        self._target = target
        builder_cls, runner_cls = _remote_classes()
        mem = self._memory_mb(target)
        # The developer knobs (config.py) of the driver hold on every node: the driver renders the
        # scripts, the nodes lower and run them, and both must see the same settings.
        env = {"env_vars": {k: v for k, v in os.environ.items() if k.startswith("ANSOR_")}}
        alive = {n["NodeID"]: n for n in ray.nodes() if n.get("Alive")}
        self._builders = [a for a in self._builders if a.node_id in alive]
        self._runners = [a for a in self._runners if a.node_id in alive]
        new_builders, new_runners = [], []
        for node_id, n in alive.items():
            res = n.get("Resources", {})
            pin = NodeAffinitySchedulingStrategy(node_id, soft=False)
            if res.get("CPU", 0) >= 1 and not any(a.node_id == node_id for a in self._builders):
                for _ in range(self.builders_per_node):
                    h = builder_cls.options(num_cpus=0, scheduling_strategy=pin, runtime_env=env).remote(self.options, mem)
                    new_builders.append(_Actor(h, node_id))
            if node_id in self._refused or any(a.node_id == node_id for a in self._runners):
                continue
            if not all(res.get(k, 0) >= v for k, v in self.resources.items()):
                continue
            if target == "cuda":
                slots = [{"num_gpus": 1}] * int(res.get("GPU", 0))
            else:
                slots = [{"num_cpus": 0}] if res.get("CPU", 0) >= 1 else []
            for s in slots:
                h = runner_cls.options(scheduling_strategy=pin, runtime_env=env, **s).remote(self.options, mem, target)
                new_runners.append(_Actor(h, node_id))
        if new_builders:
            ids = ray.get([a.handle.identity.remote() for a in new_builders], timeout=300)
            here = software()
            for a, i in zip(new_builders, ids, strict=True):
                if i != here:
                    raise ClusterError(f"a builder on node {a.node_id[:8]} runs ansor {i} but the driver {here}: "
                                       "install the same build on every node")
            self._builders += new_builders
        if new_runners:
            ids = ray.get([a.handle.identity.remote() for a in new_runners], timeout=300)
            first = self._identity is None
            if first:
                bad = hardware_mismatch(ids)
                if bad is not None:
                    for a in new_runners:
                        ray.kill(a.handle)
                    raise ClusterError(f"runners of one task must be identical hardware: {bad} "
                                       "(select one kind with RayMeasurer(resources=...))")
                self._identity = ids[0]
                self._runners += new_runners
            else:
                for a, i in zip(new_runners, ids, strict=True):
                    bad = hardware_mismatch([self._identity, i])
                    if bad is None:
                        self._runners.append(a)
                    else:
                        log.warning("leaving out a runner joining the cluster: %s", bad)
                        self._refused.add(a.node_id)
                        ray.kill(a.handle)
        if not self._runners:
            raise ClusterError(f"no node of the Ray cluster can run {target} candidates"
                               + (f" with resources {self.resources}" if self.resources else ""))
        if not self._builders:
            raise ClusterError("no node of the Ray cluster has a CPU to build on")

    def _least_loaded(self, pool: list[_Actor], limit: int) -> _Actor | None:
        """The actor of `pool` with the fewest calls in flight (below `limit`), taking turns
        among equals so every node gets work; None when all are full."""
        if not pool:
            return None
        self._turn += 1
        k = self._turn % len(pool)
        best = min(pool[k:] + pool[:k], key=lambda a: a.in_flight)
        return best if best.in_flight < limit else None

    def _memory_mb(self, target: str) -> int:
        """The worker processes' memory cap: as given, else the target's (CUDA: none), else the
        driver's `config.WORKER_MEMORY_MB` (a node's own config may differ)."""
        from ansor import config
        from ansor.targets import get_target

        if self.memory_mb is not None:
            return self.memory_mb
        t = get_target(target).worker_memory_mb
        return t if t is not None else config.WORKER_MEMORY_MB

    def _drop(self, actor: _Actor) -> None:
        import ray

        for pool in (self._builders, self._runners):
            if actor in pool:
                pool.remove(actor)
        try:
            ray.kill(actor.handle)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def _alive(self, actor: _Actor) -> bool:
        import ray

        try:
            ray.get(actor.handle.identity.remote(), timeout=30)
            return True
        except Exception as exc:  # noqa: BLE001 - any failure to answer: treat as dead
            log.warning("a Ray actor on node %s is gone: %s", actor.node_id[:8], str(exc).splitlines()[0])
            return False

    # -- Measurer --------------------------------------------------------------------------

    def baseline(self, task: SearchTask) -> MeasureResult:
        """Every runner computes the task's reference outputs; the first one's untuned latency."""
        import ray

        if task.hash not in self._baselines:
            self._start_actors(task.target)
            while True:
                runners = list(self._runners)
                refs = [a.handle.baseline.remote(task) for a in runners]
                try:
                    self._baselines[task.hash] = ray.get(refs)[0]
                    break
                except Exception as exc:
                    if not _infrastructure(exc):
                        raise
                    for a in runners:
                        if not self._alive(a):
                            self._drop(a)
                    self._start_actors(task.target)
        return self._baselines[task.hash]

    def provenance(self, task: SearchTask) -> dict[str, Any]:
        from ansor.measure.provenance import provenance

        p = provenance(self.kind, threads=self.options.threads, cache_flush=self.options.cache_flush,
                       target=task.target)
        ident = self._identity or {}
        if ident:  # the runners' hardware, not the driver's
            p.update(cpu=ident["cpu"], gpu=ident.get("gpu"), threads=self.options.threads or ident["cores"])
        return p

    def measure(self, inputs: list[MeasureInput], on_result: OnResult | None = None) -> list[MeasureResult]:
        import ray

        n = len(inputs)
        results: list[MeasureResult | None] = [None] * n
        for task in {i.task.hash: i.task for i in inputs}.values():
            self.baseline(task)
        if n:
            self._start_actors(inputs[0].task.target)  # nodes that joined since the last batch
        attempts = [0] * n
        to_build = collections.deque(range(n))
        built: collections.deque[tuple[int, BuildResult, Any]] = collections.deque()
        building: dict[Any, tuple[int, _Actor, Any]] = {}  # status ref -> (i, builder, artifact ref)
        running: dict[Any, tuple[int, _Actor, float]] = {}  # result ref -> (i, runner, sent at)
        hang_s = 3 * self.options.timeout_s + 60
        done = 0

        def finish(i: int, res: MeasureResult) -> None:
            nonlocal done
            results[i] = res
            done += 1
            if res.error is None:
                h = inputs[i].task.hash
                self._best[h] = min(self._best.get(h, math.inf), res.latency)
            if on_result is not None:
                on_result(i, res)

        def lost(i: int, actor: _Actor, exc: BaseException) -> None:
            if not _infrastructure(exc):
                raise exc
            if not self._alive(actor):
                self._drop(actor)
            attempts[i] += 1
            if attempts[i] >= self.max_attempts:
                finish(i, MeasureResult(error=MeasureError.CRASH, error_msg=(
                    f"lost {attempts[i]} Ray actors: {str(exc).splitlines()[0]}")[:500]))
            else:
                self.requeued += 1
                to_build.append(i)

        while done < n:
            if not self._runners or not self._builders:
                self._start_actors(inputs[0].task.target)
            while to_build and len(built) + len(building) < 2 * len(self._runners):  # builds ahead
                b = self._least_loaded(self._builders, _PER_BUILDER)
                if b is None:
                    break
                i = to_build.popleft()
                status, art = b.handle.build.options(num_returns=2).remote(inputs[i])
                building[status] = (i, b, art)
                b.in_flight += 1
            while built:
                r = self._least_loaded(self._runners, _PER_RUNNER)
                if r is None:
                    break
                i, br, art = built.popleft()
                best = self._best.get(inputs[i].task.hash, math.inf)
                running[r.handle.run.remote(inputs[i], br, art, best)] = (i, r, time.monotonic())
                r.in_flight += 1
            ready, _ = ray.wait([*building, *running], num_returns=1, timeout=1.0)
            if ready:  # everything else that is ready too
                ready, _ = ray.wait([*building, *running], num_returns=len(building) + len(running), timeout=0)
            for ref in ready:
                if ref in building:
                    i, b, art = building.pop(ref)
                    b.in_flight -= 1
                    try:
                        br: BuildResult = ray.get(ref)
                    except Exception as exc:
                        lost(i, b, exc)
                        continue
                    if br.error is not None:  # a candidate that does not build never reaches a runner
                        finish(i, MeasureResult(error=br.error, error_msg=br.error_msg, build_s=br.build_s,
                                                total_s=br.build_s))
                    else:
                        built.append((i, br, art))
                else:
                    i, r, _ = running.pop(ref)
                    r.in_flight -= 1
                    try:
                        finish(i, ray.get(ref))
                    except Exception as exc:
                        lost(i, r, exc)
            now = time.monotonic()
            for ref, (i, r, sent) in list(running.items()):
                if now - sent > hang_s and r in self._runners:
                    log.warning("runner on node %s silent for %.0f s: replacing it", r.node_id[:8], now - sent)
                    self._drop(r)  # its calls now fail with a dead-actor error and are re-queued
        return [r for r in results if r is not None]

    def close(self) -> None:
        import ray

        for a in self._builders + self._runners:
            try:
                ray.kill(a.handle)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self._builders, self._runners = [], []
        if self._own_ray and ray.is_initialized():
            ray.shutdown()

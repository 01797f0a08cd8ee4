"""Measurement throughput: builders measured on this machine, a cluster's dispatcher simulated.

    python -m bench.ray_scaling [--candidates 24] [--rounds 5] [--ray] [--out results/ray/scaling.json]
    python -m bench.ray_scaling --resimulate results/ray/scaling.json   # part 3 again from parts 1-2

Part 1, MEASURED here: the same random candidates of a CPU matmul measured by `LocalMeasurer`
with 0 (the runner's worker builds), 1 and 2 builder processes, and with `--ray` by `RayMeasurer`
on a one-node local Ray instance with 1 and 2 builder actors; candidates/s per configuration,
median (min-max) over alternating rounds. The runner uses one thread, so a builder has a core
(on a machine shared with other processes it may not: the load average is recorded). Then, one
candidate at a time, how a compile divides between the builder and the runner's JIT.

Part 2, the driver's own costs, MEASURED here: one search round of the learned search (evolution
+ features + cost-model training) with the synthetic measurer (no measurement at all), one log
append (write + fsync), and Ray's cost per candidate on loopback (a build call and a run call
through no-op actors, pipelined from one driver thread).

Part 3, SIMULATED (no cluster was run): a discrete-event model of one driver feeding N runners
and N builders (one of each per node), N = 1, 4, 16, 64, with per-candidate build and run times
drawn from real logs (results/**/*.jsonl and *.jsonl.xz: `build_s`, `total_s - build_s`; a logged compile
divided by part 1's builder share on the CPU, all of it on the runner for CUDA, which has no
artifacts yet), the driver's costs of part 2 (the search round of a trained model), and the
tuner's synchronous rounds of `--batch` candidates (search, then measure the batch). It shows
where the driver, not the runners, bounds the throughput.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, ROOT, host_line, host_meta, random_inputs, write_results


def measured_throughput(workload: str, n: int, rounds: int, use_ray: bool) -> dict[str, Any]:
    """Candidates/s of each configuration, per round (rounds alternate the configurations)."""
    import ansor
    from ansor.frontend import workloads
    from ansor.measure.measurer import LocalMeasurer, RunOptions

    load_before = list(os.getloadavg())  # other processes on a shared machine take cores from the builders
    task = ansor.create_task(workloads.get(workload))
    opts = RunOptions(threads=1, repeat=3, min_repeat_ms=20.0)
    warm = random_inputs(task, 2, seed=999)
    configs: dict[str, Any] = {f"local, {b} builders": (lambda b=b: LocalMeasurer(opts, builders=b)) for b in (0, 1, 2)}
    if use_ray:
        import ray

        from ansor.measure.cluster import RayMeasurer

        ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
        for b in (1, 2):
            configs[f"ray (1 node), {b} builders"] = lambda b=b: RayMeasurer(options=opts, builders_per_node=b)
    measurers = {k: make() for k, make in configs.items()}
    per_round: dict[str, list[float]] = {k: [] for k in configs}
    errors: dict[str, int] = {}
    try:
        for m in measurers.values():  # references, worker and actor start-up: not timed
            m.baseline(task)
            m.measure(warm)
        for r in range(rounds):
            inputs = random_inputs(task, n, seed=r)
            order = list(measurers)
            order = order[r % len(order):] + order[: r % len(order)]
            for k in order:
                t0 = time.perf_counter()
                res = measurers[k].measure(inputs)
                per_round[k].append(len(inputs) / (time.perf_counter() - t0))
                errors[k] = errors.get(k, 0) + sum(x.error is not None for x in res)
                print(f"  round {r}: {k}: {per_round[k][-1]:.2f} candidates/s", flush=True)
    finally:
        for m in measurers.values():
            m.close()
        if use_ray:
            import ray

            ray.shutdown()
    return {"workload": workload, "candidates_per_round": n, "run_options": opts.__dict__,
            "split": _split(task, opts, n),
            "candidates_per_s": per_round, "failed_candidates": errors, "load_average_before": load_before,
            "load_average_after": list(os.getloadavg())}


def _split(task: Any, opts: Any, n: int) -> dict[str, float]:
    """How a compile divides between builder and runner, one candidate at a time (nothing else
    running): the builder's seconds (apply + lower), the runner's load + JIT of the artifact, and
    the runner's whole compile without a builder; `builder_share` = builder / whole compile."""
    from ansor.measure.builder import BuildResult, LocalBuilder
    from ansor.measure.runner import LocalRunner

    inputs = random_inputs(task, n, seed=0)
    builder, runner = LocalBuilder(1, opts), LocalRunner(opts)
    try:
        runner.baseline(task)
        builds = builder.build(inputs)
        split = [runner.run(i, b) for i, b in zip(inputs, builds, strict=True)]
        whole = [runner.run(i, BuildResult()) for i in inputs]
    finally:
        builder.close()
        runner.close()
    b = sum(x.build_s for x in builds)
    load = sum(r.build_s for r in split) - b  # the runner's load + JIT (its build_s includes the builder's)
    c = sum(r.build_s for r in whole)
    return {"builder_s": b / n, "runner_load_s": load / n, "whole_compile_s": c / n, "builder_share": b / c}


def driver_costs(workload: str, batch: int, rounds: int, use_ray: bool) -> dict[str, Any]:
    """Seconds the driver spends per search round, per log append and per Ray dispatch."""
    import ansor
    from ansor.frontend import workloads
    from ansor.measure.measurer import SyntheticMeasurer
    from ansor.tuning.progress import ProgressCallback
    from ansor.tuning.records import Record, RecordWriter

    task = ansor.create_task(workloads.get(workload))
    stamps: list[float] = []

    class Stamp(ProgressCallback):
        def on_batch(self, *a: Any) -> None:
            stamps.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        ansor.tune(task, trials=batch * rounds + 1, batch_size=batch, measurer=SyntheticMeasurer(0.0),
                   log_path=Path(tmp) / "s.jsonl", callback=Stamp())
        search_s = [b - a for a, b in zip([t0, *stamps], stamps, strict=False)]
        recs = ansor.load_records(Path(tmp) / "s.jsonl")[:50]
        with RecordWriter(Path(tmp) / "w.jsonl") as w:
            t1 = time.perf_counter()
            for r in recs:
                w.append(Record(r.key, r.task, r.schedule, r.script, r.result, provenance=r.provenance))
            append_s = (time.perf_counter() - t1) / len(recs)
    out: dict[str, Any] = {"search_round_s": search_s, "log_append_s": append_s, "batch": batch}
    if use_ray:
        out["ray_dispatch_s"] = _ray_dispatch_cost()
    return out


def _ray_dispatch_cost(n: int = 400) -> float:
    """Driver seconds per candidate for a build call (2 returns) and a run call through no-op
    actors on a local Ray instance, at most 4 candidates in flight, as the dispatcher does."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    try:
        @ray.remote(num_cpus=0)
        class Noop:
            def build(self, x: int) -> tuple[int, bytes]:
                return x, b"\0" * 50_000  # an artifact of a small candidate's size

            def run(self, x: int, art: bytes) -> int:
                return x

        b, r = Noop.remote(), Noop.remote()
        ray.get([b.run.remote(0, b""), r.run.remote(0, b"")])  # both actors started
        t0 = time.perf_counter()
        pending: list = []
        for i in range(n):
            s, art = b.build.options(num_returns=2).remote(i)
            ray.get(s)
            pending.append(r.run.remote(i, art))
            if len(pending) >= 4:
                done, pending = ray.wait(pending, num_returns=1)
                ray.get(done)
        ray.get(pending)
        return (time.perf_counter() - t0) / n
    finally:
        ray.shutdown()


def log_times(pattern: str) -> list[tuple[float, float]]:
    """(build seconds, run seconds) of every successful record in the logs matching `pattern`
    (`*.jsonl`: the compressed `*.jsonl.xz` / `*.jsonl.gz` logs too)."""
    from ansor.tuning.records import open_log

    out = []
    found = {f for ext in ("", ".xz", ".gz") for f in glob.glob(str(ROOT / pattern) + ext, recursive=True)}
    for f in sorted(found):
        with open_log(f) as fh:
            lines = fh.read().splitlines()
        for line in lines:
            try:
                r = json.loads(line)["result"]
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
            if r.get("error") is None and r.get("total_s", 0) > r.get("build_s", 0) > 0:
                out.append((float(r["build_s"]), float(r["total_s"]) - float(r["build_s"])))
    return out


def simulate(times: list[tuple[float, float]], nodes: int, *, batch: int, rounds: int, search_s: float,
             dispatch_s: float, append_s: float, builder_share: float, seed: int = 0) -> dict[str, float]:
    """One driver, `nodes` builders and `nodes` runners; each round the driver searches for
    `search_s`, then dispatches the batch (`dispatch_s` of driver time each), builders and runners
    take the first free one, and the driver logs each result (`append_s`) as it comes. Of a
    logged `build_s` (the whole compile, logged by a runner that built), the builder does
    `builder_share`, the runner the rest (its JIT) before its logged run time."""
    rng = random.Random(seed)
    clock = 0.0
    driver_busy = runner_busy = 0.0
    for _ in range(rounds):
        clock += search_s
        driver_busy += search_s
        builders = [clock] * nodes
        runners = [clock] * nodes
        driver = clock
        finish = []
        for _ in range(batch):
            compile_s, run = rng.choice(times)
            build, run = builder_share * compile_s, (1 - builder_share) * compile_s + run
            driver += dispatch_s
            k = min(range(nodes), key=builders.__getitem__)
            built = max(builders[k], driver) + build
            builders[k] = built
            j = min(range(nodes), key=runners.__getitem__)
            runners[j] = max(runners[j], built) + run
            runner_busy += run
            finish.append(runners[j])
        for t in sorted(finish):  # results are logged in the order they arrive
            driver = max(driver, t) + append_s
        driver_busy += batch * (dispatch_s + append_s)
        clock = driver
    return {"nodes": nodes, "candidates_per_s": batch * rounds / clock,
            "driver_busy": driver_busy / clock, "runner_utilisation": runner_busy / (nodes * clock)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="matmul-256")
    ap.add_argument("--candidates", type=int, default=24, help="candidates per measured round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ray", action="store_true", help="also measure RayMeasurer and Ray's dispatch cost")
    ap.add_argument("--batch", type=int, default=64, help="the tuner's batch in the simulation (Ansor's 64)")
    ap.add_argument("--search-rounds", type=int, default=5, help="learned-search rounds timed for the driver cost")
    ap.add_argument("--out", default=str(RESULTS / "ray" / "scaling.json"))
    ap.add_argument("--resimulate", metavar="JSON", help="take parts 1 and 2 from this results file; simulate again")
    a = ap.parse_args()
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # Ray on loopback only
    if a.resimulate:  # parts 1 and 2 from an earlier results file, part 3 again
        old = json.loads(Path(a.resimulate).read_text())
        meta, real, drv = old["host"], old["measured"], old["driver"]
        real.setdefault("measured_by", old["command"])
    else:
        meta = host_meta(1)
        print("part 1 (measured on this machine): builders")
        real = measured_throughput(a.workload, a.candidates, a.rounds, a.ray)
        print("part 2 (measured on this machine): the driver's costs")
        drv = driver_costs(a.workload, a.batch, a.search_rounds, a.ray)
    print(host_line(meta))
    # The first rounds search with an untrained model (fast); a long run's rounds are the trained ones.
    trained = drv["search_round_s"][2:] or drv["search_round_s"]
    search_s = statistics.median(trained)
    dispatch_s = drv.get("ray_dispatch_s", 0.0)
    from ansor.targets import get_target

    sims: dict[str, Any] = {}
    for label, pattern in (("cpu", "results/bert-chain/*.jsonl"), ("cuda", "results/tensor-core/*.jsonl")):
        times = log_times(pattern)
        share = real["split"]["builder_share"] if get_target(label).supports_artifacts else 0.0
        kw = {"batch": a.batch, "rounds": 20, "dispatch_s": dispatch_s, "append_s": drv["log_append_s"],
              "builder_share": share}
        sims[label] = {"log_pattern": pattern, "records": len(times), "builder_share": share,
                       "compile_s_mean": statistics.mean(t[0] for t in times),
                       "run_s_mean": statistics.mean(t[1] for t in times),
                       "search_round_s": search_s,
                       "by_nodes": [simulate(times, n, search_s=search_s, **kw) for n in (1, 4, 16, 64)],
                       "by_nodes_free_search": [simulate(times, n, search_s=0.0, **kw) for n in (1, 4, 16, 64)],
                       "by_nodes_batch_8n": [simulate(times, n, search_s=search_s, **{**kw, "batch": max(a.batch, 8 * n)})
                                             for n in (1, 4, 16, 64)]}
    path = write_results(Path(a.out), "ray-scaling", meta, {"measured": real, "driver": drv, "simulated": sims})

    def med(xs: list[float]) -> str:
        return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"

    print(f"\nMEASURED, {real['workload']}, {real['candidates_per_round']} candidates a round, "
          f"{len(next(iter(real['candidates_per_s'].values())))} rounds, runner 1 thread "
          f"(load average {real['load_average_before'][0]:.2f} before, {real['load_average_after'][0]:.2f} after):")
    print("| configuration | candidates/s, median (min-max) | failed |\n|---|---|---|")
    for k, v in real["candidates_per_s"].items():
        print(f"| {k} | {med(v)} | {real['failed_candidates'][k]} |")
    sp = real["split"]
    print(f"\nMEASURED split, one candidate at a time: builder {sp['builder_s']:.3f} s, runner load + JIT "
          f"{sp['runner_load_s']:.3f} s, whole compile in the runner {sp['whole_compile_s']:.3f} s "
          f"(builder share {sp['builder_share']:.2f})")
    print(f"MEASURED driver costs: search round ({a.batch} candidates, learned, synthetic measurer) "
          f"{' / '.join(f'{x:.2f}' for x in drv['search_round_s'])} s (trained-model rounds: median {search_s:.2f} s); "
          f"log append {drv['log_append_s'] * 1e3:.2f} ms"
          + (f"; Ray dispatch {dispatch_s * 1e3:.2f} ms per candidate" if "ray_dispatch_s" in drv else ""))
    for label, s in sims.items():
        print(f"\nSIMULATED ({label} compile/run times from {s['records']} records of {s['log_pattern']}: "
              f"mean compile {s['compile_s_mean']:.3f} s (builder share {s['builder_share']:.2f}), "
              f"mean run {s['run_s_mean']:.3f} s; batch {a.batch}; search round {search_s:.2f} s):")
        print("| nodes (runner + builder each) | candidates/s | driver busy | runner utilisation "
              "| candidates/s if search were free | candidates/s, batch 8 x nodes (same search time) |\n|---|---|---|---|---|---|")
        for row, free, big in zip(s["by_nodes"], s["by_nodes_free_search"], s["by_nodes_batch_8n"], strict=True):
            print(f"| {row['nodes']} | {row['candidates_per_s']:.2f} | {row['driver_busy']:.0%} | "
                  f"{row['runner_utilisation']:.0%} | {free['candidates_per_s']:.2f} | {big['candidates_per_s']:.2f} |")
    print(f"\nwrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


if __name__ == "__main__":
    sys.exit(main())

"""End-to-end network benchmark: tune a whole model under the task scheduler, run it, compare.

    network NAME --ansor import (torch-mlir, own process)--> model.mlir --extract_tasks--> tasks
    tasks --TaskScheduler(gradient) and TaskScheduler(round-robin), same trials--> two logs + curves
    best records --compile_network--> tuned model; the naive loops (untransformed model);
    PyTorch eager, TorchScript frozen and torch.compile (own process, bench.torch_network)
    --> numerics checked against PyTorch, a table of medians (min–max) over >= 5 alternating
        rounds, the estimate as logged and with the best records re-measured now, tuning
        curves (PNG), results/network-STEM.json (tools/render_results.py)

Tuning runs in this process; the timings then run in a fresh one (the script re-runs itself with
--report-only): XGBoost's OpenMP runtime, loaded by the tuner, slows our kernels in its process.

Usage: python -m bench.network resnet18 --trials 400 [--threads 2] [--strategies gradient,round-robin]
       [--pretrain LOG,...]   (cost model trained on earlier logs first; logs go to NAME-pre.*)
       [--torch-variants eager,jit,compile] [--rounds 5] [--results FILE]
NAME is a built-in network (`ansor import --list`) or a built-in linalg workload such as
mlp-64x256x4 (then there is no PyTorch column). Logs, the model and the plot go to bench/out/.
Every program is timed the same way in each round: the median of 20 Python-level calls after
0.1 s of warm-up calls (ours: `compile_network(...)(*inputs)`; the naive loops: one call). PyTorch's
stronger variant (TorchScript frozen: conv-bn folded; torch.compile: Inductor) is headlined;
one that cannot run here is reported with the reason, not timed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

#: bench/torch_network.py's variants, as the table names them.
TORCH_LABELS = {"eager": "PyTorch eager", "jit": "TorchScript frozen", "compile": "torch.compile"}


def _torch_child(name: str, inputs: list[np.ndarray], threads: int, variants: str, tmp: str):
    """The PyTorch process (bench.torch_network --serve): its hello says which variants run."""
    from bench.common import Child, module_argv

    paths = []
    for i, a in enumerate(inputs):
        paths.append(os.path.join(tmp, f"x{i}.npy"))
        np.save(paths[-1], a)
    out = os.path.join(tmp, "y.npy")
    child = Child(module_argv("bench.torch_network", name, "--threads", str(threads), "--inputs", *paths,
                              "--out", out, "--variants", variants, "--serve"),
                  env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    return child, (np.load(out) if child.hello.get("available") else None)


def _log_curve(net, log: Path) -> list[tuple[int, float]]:
    """(trials, estimated latency) after each record of `log`, replayed in the order measured:
    sum over tasks of weight x best latency so far, defined once every task has a record. The
    same estimate the scheduler reports, rebuilt from a log (a run continued with --resume
    included)."""
    from ansor.tuning.records import load_records

    weight = {t.hash: t.weight for t in net.tasks}
    best: dict[str, float] = {}
    curve = []
    for i, r in enumerate(load_records(log), 1):
        if r.task.hash not in weight:
            continue
        if np.isfinite(r.latency):
            best[r.task.hash] = min(best.get(r.task.hash, np.inf), r.latency)
        if len(best) == len(weight):
            curve.append((i, sum(weight[h] * lat for h, lat in best.items())))
    return curve


def _reach(curve: list[tuple[int, float]], target: float) -> int | None:
    for trials, est in curve:
        if est <= target * (1 + 1e-9):
            return trials
    return None


def _estimate_now(net, log: Path, threads: int, cache_flush: bool = False) -> tuple[float, float]:
    """Σ weight · latency of each task's best record: as logged, and re-measured now by the
    tuner's measurer. The logged sum is a sum of minima of noisy timings taken over the whole
    run, so on a drifting host it can be far below what the tasks take at report time."""
    from ansor.measure.measurer import MeasureInput, RunOptions, create_measurer
    from ansor.tuning.records import best_record, load_records

    recs = load_records(log)
    logged = now = 0.0
    measurer = create_measurer(RunOptions(threads=threads, cache_flush=cache_flush))
    try:
        for t in net.tasks:
            r = best_record(recs, t.hash, t.target, current_only=True)
            res = measurer.baseline(t) if r is None else measurer.measure([MeasureInput(t, r.schedule, r.script)])[0]
            logged += t.weight * (r.latency if r is not None else res.latency)
            now += t.weight * res.latency
    finally:
        measurer.close()
    return logged, now


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("name")
    p.add_argument("--trials", type=int, default=400)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--batch-size", type=int, default=64, help="upper bound of trials per round (Ansor's 64)")
    p.add_argument("--strategies", default="gradient,round-robin",
                   help="task schedulers to compare, each from scratch; a '-no-transfer' suffix "
                        "(e.g. gradient-no-transfer) turns off transfer between tasks (ablation)")
    p.add_argument("--search", default="learned", choices=["learned", "random"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--resume", action="store_true",
                   help="keep existing logs; their records count toward --trials (default: start fresh)")
    p.add_argument("--report-only", action="store_true",
                   help="no tuning: rebuild each listed strategy's tuning curve from its log, compile the "
                        "best one's records and time them against the naive loops and PyTorch")
    p.add_argument("--rounds", type=int, default=5,
                   help="alternating timing rounds at the end, >= 5 (the host is shared: timings drift by "
                        "tens of percent between minutes, so each ratio is taken within a round)")
    p.add_argument("--torch-variants", default="eager,jit,compile",
                   help="PyTorch baselines: eager, jit (torch.jit.freeze of script/trace), compile (torch.compile)")
    p.add_argument("--results", help="results file (default results/network-STEM.json)")
    p.add_argument("--population", type=int, default=2048, help="evolutionary search population (Ansor: 2048)")
    p.add_argument("--generations", type=int, default=4, help="evolutionary search generations (Ansor: 4)")
    p.add_argument("--winograd", type=int, default=0, choices=[0, 2, 4],
                   help="3x3 stride-1 convolutions by Winograd F(t x t, 3x3), t <= M (default 0: direct; "
                        "logs NAME-wM.*.jsonl)")
    p.add_argument("--compare", default="",
                   help="comma-separated log stems in bench/out (e.g. resnet18,resnet18-w4-cold) whose tuned models "
                        "are timed in the same rounds (-w4 / -w2 in a stem: that Winograd setting); default: "
                        "NAME (the direct model) when Winograd is on and its log exists")
    p.add_argument("--pretrain", default="",
                   help="comma-separated logs to pre-train the cost model on (`tuner.pretrain`); logs go to NAME-pre.*")
    p.add_argument("--cache-flush", action="store_true",
                   help="measure every candidate after flushing the CPU caches (TVM's enable_cpu_cache_flush: "
                        "weights and inputs come from memory, as inside the network; logs NAME[-wM]-cold.*.jsonl)")
    a = p.parse_args()
    if a.rounds < 5:
        p.error("--rounds: tables hold medians over >= 5 alternating rounds")
    stem = (a.name + (f"-w{a.winograd}" if a.winograd else "") + ("-cold" if a.cache_flush else "")
            + ("-pre" if a.pretrain else ""))
    import ansor  # noqa: F401 (registers the dialect and passes)
    from ansor.compile import compile_network
    from ansor.frontend.partition import extract_tasks, task_table
    from ansor.measure.measurer import RunOptions, create_measurer
    from ansor.measure.provenance import cpu_model
    from ansor.search.cost_model import XGBModel
    from ansor.targets.cpu.params import VECTOR_BITS
    from ansor.tuning.scheduler import SchedulerTable, TaskScheduler
    from ansor.tuning.tuner import pretrain

    from bench.common import (
        CALL,
        NAIVE,
        OUT,
        alternate,
        best_record_lines,
        host_meta,
        model_text,
        reexec_fresh,
        render,
        results_path,
        time_calls,
        write_results,
    )

    OUT.mkdir(parents=True, exist_ok=True)
    text, is_torch = model_text(a.name)
    net = extract_tasks(text, name=a.name, winograd=a.winograd)
    print(task_table(net))
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, {VECTOR_BITS}-bit vector limits; {a.threads} threads for every program; "
          f"{a.search} search (population {a.population}, {a.generations} generations), "
          f"rounds of <= {a.batch_size} trials")

    curves: dict[str, list[tuple[int, float]]] = {}
    logs: dict[str, Path] = {}
    if a.report_only:
        for strategy in a.strategies.split(","):
            logs[strategy] = OUT / f"{stem}.{strategy}.jsonl"
            if not logs[strategy].exists():
                print(f"error: --report-only needs {logs[strategy]}", file=sys.stderr)
                return 2
            curves[strategy] = _log_curve(net, logs[strategy])  # the whole log, resumed runs included
    measurer = create_measurer(RunOptions(threads=a.threads, cache_flush=a.cache_flush))
    try:
        for strategy in [] if a.report_only else a.strategies.split(","):
            log = OUT / f"{stem}.{strategy}.jsonl"
            if log.exists() and not a.resume:
                log.unlink()
            t0 = time.perf_counter()
            base, transfer = strategy.removesuffix("-no-transfer"), not strategy.endswith("-no-transfer")
            model = XGBModel(seed=a.seed)
            if a.pretrain:
                n, n_tasks = pretrain(model, a.pretrain.split(","), target="cpu")
                print(f"cost model pre-trained on {n} programs of {n_tasks} tasks")
            res = TaskScheduler(net.tasks, strategy=base, seed=a.seed).tune(
                a.trials, batch_size=a.batch_size, log_path=log, measurer=measurer,
                callback=SchedulerTable(table_every=1000), search=a.search, transfer=transfer,
                cost_model=model if a.search == "learned" else "xgb",
                search_options={"population": a.population, "generations": a.generations})
            curves[strategy], logs[strategy] = res.history, log
            print(f"== {strategy}: {res.trials} trials in {time.perf_counter() - t0:.0f} s, "
                  f"estimated {res.estimated_latency() * 1e3:.3f} ms")
    finally:
        measurer.close()
    if not a.report_only:
        # Time in a fresh process: the tuner loaded XGBoost's OpenMP runtime here, which slows our
        # kernels in this process 1.3-3x, unevenly (small-cnn: rounds of 0.06 and 0.20 ms).
        reexec_fresh("--report-only")

    best_strategy = min(curves, key=lambda s: curves[s][-1][1]) if curves else next(iter(logs))
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(s.shape).astype(s.numpy_dtype()) for s in net.inputs]
    tuned = compile_network(net, logs[best_strategy], threads=a.threads)
    untuned = compile_network(net, None, threads=a.threads)
    y_tuned, y_untuned = tuned(*inputs), untuned(*inputs)
    # Other tuned variants of this network (--compare; by default the direct model's log, when Winograd is
    # on and that log is at hand): timed in the same rounds.
    stems = [c for c in a.compare.split(",") if c] or (
        [a.name] if a.winograd and (OUT / f"{a.name}.{best_strategy}.jsonl").exists() else [])
    others = {}
    for other in stems:
        wg = 4 if "-w4" in other else 2 if "-w2" in other else 0
        olog = OUT / f"{other}.{best_strategy}.jsonl"
        if not olog.exists():
            print(f"error: --compare {other}: no {olog}", file=sys.stderr)
            return 2
        others[other] = compile_network(extract_tasks(text, name=a.name, winograd=wg), olog, threads=a.threads)
    check = f"tuned vs naive loops max |diff| {float(np.max(np.abs(y_tuned - y_untuned))):.2e}"
    cands = {CALL: lambda: time_calls(tuned, inputs)[0]}
    for o, fn in others.items():
        cands[f"ours, {o}"] = lambda fn=fn: time_calls(fn, inputs)[0]
    cands[NAIVE] = lambda: untuned.time(*inputs, number=1)  # (one call: no warm-up, a slow program)
    tmp = tempfile.TemporaryDirectory()
    child, torch_info, torch_notes, layouts = None, {}, {}, {}
    if is_torch:
        child, y_torch = _torch_child(a.name, inputs, a.threads, a.torch_variants, tmp.name)
        hello = child.hello
        torch_info = hello.get("info", {})
        torch_notes = {TORCH_LABELS.get(v, v): n for v, n in hello.get("notes", {}).items()}
        for v, how in hello.get("how", {}).items():
            if v in hello.get("variants", []) and v != "eager":
                torch_notes[TORCH_LABELS.get(v, v)] = how
        for v in hello.get("variants", []):
            label = TORCH_LABELS.get(v, v)
            layouts[label] = []

            def ask(v=v, label=label) -> float:
                ans = child.ask({"variant": v})
                layouts[label].append(ans["layout"])
                return ans["median_s"]

            cands[label] = ask
        if y_torch is None:
            print(f"error: PyTorch could not run {a.name}: {hello.get('notes')}", file=sys.stderr)
            return 1
        err = max(float(np.max(np.abs(y - y_torch))) for y in [y_tuned] + [fn(*inputs) for fn in others.values()])
        scale = float(np.max(np.abs(y_torch)))
        check += f"; tuned vs PyTorch max |diff| {err:.2e} (max |y| {scale:.2f})"
        if err > 1e-3 * max(scale, 1.0):
            print(f"error: tuned {a.name} differs from PyTorch: {check}", file=sys.stderr)
            return 1
    print(check)
    print(f"timing: {a.rounds} alternating rounds of {', '.join(cands)}", flush=True)
    try:
        times = alternate(cands, a.rounds, on_round=lambda r, this: print(
            f"round {r + 1}: " + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in this.items()), flush=True))
    finally:
        if child is not None:
            child.close()
        tmp.cleanup()
    logged, now = _estimate_now(net, logs[best_strategy], a.threads, a.cache_flush)
    print(f"estimate: {logged * 1e3:.3f} ms from the log (sum of each task's fastest measurement, "
          f"taken whenever it was), {now * 1e3:.3f} ms with the same records re-measured now")
    # the log's trials (resumed runs included): the last point of the curve rebuilt from it
    n_trials = curves[best_strategy][-1][0] if curves.get(best_strategy) else "?"
    body = {"title": f"{a.name}: end to end vs PyTorch ({n_trials} trials per strategy)",
            "settings": {"trials": n_trials, "strategies": a.strategies, "best_strategy": best_strategy,
                         "rounds": a.rounds, "threads": a.threads, "calls": 20, "winograd": a.winograd,
                         "cache_flush": a.cache_flush, "search": a.search, "seed": a.seed},
            "flops": net.flops, "tasks": len(net.tasks), "torch_info": torch_info, "torch_notes": torch_notes,
            "torch_layout": layouts, "check": check,
            "estimate_s": {"logged": logged, "remeasured": now},
            "times": times, "records": best_record_lines([logs[best_strategy]], net.tasks)}
    path = write_results(results_path(f"network-{stem}", a.results), "network", host_meta(a.threads), body)
    print()
    print(render(json.loads(path.read_text())))
    print(f"results: {path}")
    if "gradient" in curves and "round-robin" in curves:
        target = curves["round-robin"][-1][1]
        reach = _reach(curves["gradient"], target)
        total = curves["round-robin"][-1][0]
        print(f"gradient reaches round-robin's final estimate ({target * 1e3:.3f} ms) at "
              + (f"{reach} trials = {reach / max(total, 1):.0%} of {total}" if reach else "never (within the budget)"))
    for s, c in curves.items():
        if s.endswith("-no-transfer") and s.removesuffix("-no-transfer") in curves:
            on = curves[s.removesuffix("-no-transfer")]
            reach = _reach(on, c[-1][1])
            print(f"transfer: {s.removesuffix('-no-transfer')} {on[-1][1] * 1e3:.3f} ms vs {s} {c[-1][1] * 1e3:.3f} ms "
                  f"estimated after {c[-1][0]} trials; with transfer it reaches the final estimate without at "
                  + (f"{reach} trials ({reach / max(c[-1][0], 1):.0%})" if reach else "never"))

    if not curves:
        return 0
    try:
        import matplotlib
    except ImportError:
        print("(no tuning-curve plot: matplotlib is not installed)")
        return 0

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for s, c in curves.items():
        ax.plot([t for t, _ in c], [e * 1e3 for _, e in c], label=s)
    ax.set_xlabel("measured trials")
    ax.set_ylabel("estimated end-to-end latency (ms)")
    ax.set_yscale("log")
    ax.set_title(f"{a.name}: task scheduling ({cpu_model()[:40]}, {a.threads} threads)")
    ax.legend()
    fig.tight_layout()
    png = OUT / f"network_{stem}.png"
    fig.savefig(png, dpi=120)
    print(f"plot: {png}")
    return 0


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.network NAME [--help]")
    sys.exit(main())

"""The `ansor` command line.

    ansor tune FILE.mlir | --workload NAME  --trials N --log LOG.jsonl [--seed S] [--strategy gradient|round-robin] [--split]
               [--cluster ray|ray://HOST:PORT] [--builders N] [--runners N] [--tf32]
    ansor tasks FILE.mlir | --workload NAME [--split]
    ansor bench FILE.mlir | --workload NAME --log LOG.jsonl [--split] [--tf32]
    ansor workloads [--emit NAME]
    ansor sketches FILE.mlir | --workload NAME [--schedule-seed S]
    ansor import model.py:make_model --input-shape 1x3x224x224 -o model.mlir [--elide-weights]
    ansor import --network resnet18 -o resnet18.mlir

Bad input ends with one line on stderr naming the problem and a non-zero exit status.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from ansor.targets import get_target, target_names

EXIT_BAD_INPUT = 2


def _source(args: argparse.Namespace) -> tuple[str, str]:
    """(MLIR text or path, display name) from FILE or --workload."""
    from ansor.frontend import workloads

    if getattr(args, "workload", None):
        return workloads.get(args.workload), args.workload
    if not args.file:
        raise ValueError("give a .mlir FILE or --workload NAME (see `ansor workloads`)")
    path = Path(args.file)
    if not path.exists():
        raise ValueError(f"{path}: no such file")
    if path.is_dir():
        raise ValueError(f"{path}: is a directory, not an .mlir file")
    from ansor.core.task import TaskError, read_mlir_file

    try:
        return read_mlir_file(path), str(path)
    except TaskError as exc:
        raise ValueError(str(exc)) from None


def _task(args: argparse.Namespace):
    from ansor.core.task import create_task

    text, name = _source(args)
    return create_task(text if getattr(args, "workload", None) else Path(args.file), func=args.func,
                       target=args.target, name=Path(name).stem if not args.workload else name,
                       tf32=getattr(args, "tf32", False))


def _network(args: argparse.Namespace, log: str | None = None):
    """The source partitioned into tasks (`partition.Network`); with `log`, as the log was tuned
    (direct or Winograd convolutions, unless --winograd says)."""
    from ansor.compile import extract_for_log

    text, name = _source(args)
    return extract_for_log(text if getattr(args, "workload", None) else Path(args.file), log,
                           winograd=getattr(args, "winograd", None), func=args.func, target=args.target,
                           name=Path(name).stem if not args.workload else name,
                           split=getattr(args, "split", None), tf32=getattr(args, "tf32", False))


def cmd_tasks(args: argparse.Namespace) -> int:
    from ansor.frontend.partition import task_table

    print(task_table(_network(args)))
    return 0


def _tuning_options(args: argparse.Namespace, run_options, *, transfer: bool = True):
    """The search settings of `ansor tune`'s flags, as one `TuningOptions`."""
    from ansor.tuning.options import TuningOptions

    return TuningOptions(search=args.search, crossover=args.crossover, batch_size=args.batch_size,
                         run_options=run_options, cost_model=_cost_model(args), transfer=transfer,
                         cluster=args.cluster, builders=args.builders, runners=args.runners)


def _tune_network(args: argparse.Namespace, net, opts) -> int:
    from ansor.tuning.scheduler import SchedulerTable, TaskScheduler

    log_path = args.log or f"{net.name}.{args.target}.jsonl"
    sched = TaskScheduler(net.tasks, strategy=args.strategy, seed=args.seed,
                          early_stopping=args.early_stopping)
    res = sched.tune(args.trials, log_path=log_path, callback=SchedulerTable(),
                     options=_tuning_options(args, opts, transfer=args.transfer))
    untuned = sum(t.weight * r.baseline.latency for t, r in zip(net.tasks, res.results, strict=True)
                  if r.baseline.error is None)
    failed = res.failed_tasks()
    estimate = (f"{res.estimated_latency() * 1e3:.3f} ms" if not failed else
                f"unknown: {len(failed)} task(s) cannot run ({', '.join(failed)}; errors in the log)")
    print(f"{net.name}: {len(net.tasks)} tasks, {res.trials} trials; estimated latency {estimate} "
          f"(untuned {untuned * 1e3:.3f} ms)")
    print(f"log: {log_path}")
    return 0


def _cost_model(args: argparse.Namespace):
    """The cost model to tune with: "xgb", or with `--pretrain LOG` one already trained on those
    logs' records."""
    if not args.pretrain:
        return "xgb"
    if args.search != "learned":
        raise ValueError("--pretrain trains the learned search's cost model: drop it or --search random")
    from ansor.search.cost_model import XGBModel
    from ansor.tuning.tuner import pretrain

    model = XGBModel(seed=args.seed)
    n, n_tasks = pretrain(model, args.pretrain, target=args.target)
    print(f"cost model pre-trained on {n} programs of {n_tasks} tasks ({', '.join(args.pretrain)})")
    if n == 0:
        print(f"warning: no usable {args.target} record in {', '.join(args.pretrain)}: "
              "the model starts untrained", file=sys.stderr)
    return model


def _setup_target(args: argparse.Namespace) -> None:
    """cuda: the architecture for the workers (`--arch`), and no address-space cap on them (the
    CUDA driver reserves far more virtual memory than any cap we would set)."""
    from ansor import config
    from ansor.targets import get_target

    target = get_target(getattr(args, "target", "cpu"))
    if getattr(args, "arch", None):
        config.set_cuda_arch(args.arch)
    if target.worker_memory_mb is not None:
        config.WORKER_MEMORY_MB = target.worker_memory_mb


def cmd_tune(args: argparse.Namespace) -> int:
    from ansor.measure.measurer import RunOptions
    from ansor.tuning.progress import JsonProgress, TableProgress
    from ansor.tuning.tuner import tune

    _setup_target(args)
    if args.cache_flush and not get_target(args.target).supports_cache_flush:
        flag = "--cache-flush-weights" if args.cache_flush == "weights" else "--cache-flush"
        raise ValueError(f"{flag} does not apply to --target {args.target}")
    opts = RunOptions(number=args.number, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms,
                      cache_flush=args.cache_flush,
                      timeout_s=args.timeout, threads=args.threads)
    builders = args.builders if args.builders is not None else get_target(args.target).default_builders()
    runners = args.runners if args.runners is not None else get_target(args.target).default_runners()
    if builders and args.cluster is None and not args.json:
        print(f"measuring with {builders} builder processes ahead of {runners} runner{'s' if runners > 1 else ''} "
              "(--builders N / --runners N to change)")
    net = None if args.one_task else _network(args)
    if net is not None and len(net.calls) > 1:  # a model: tune its tasks under the task scheduler
        return _tune_network(args, net, opts)
    task = _task(args)
    # One task that extraction rewrote (channels-last, Winograd): tune what `ansor.compile` looks up.
    if net is not None and net.tasks[0].hash != task.hash:
        return _tune_network(args, net, opts)
    cb = JsonProgress() if args.json else TableProgress(verbose=args.verbose)
    log_path = args.log or f"{task.name}.{task.target}.jsonl"
    res = tune(task, trials=args.trials, log_path=log_path, seed=args.seed, callback=cb,
               options=_tuning_options(args, opts))
    if not args.json:
        print(f"log: {log_path}")
    return 1 if res.unrunnable else 0


def cmd_bench(args: argparse.Namespace) -> int:
    import numpy as np

    from ansor.measure.baselines import numpy_function
    from ansor.compile import CompiledFunction
    from ansor.measure.measurer import make_inputs
    from ansor.tuning.records import best_record, load_records, warn_if_mixed
    from ansor.measure.verify import check_task_outputs

    net = _network(args, args.log)
    if net is not None and len(net.calls) > 1:
        return _bench_network(args, net)
    task = _task(args)
    if net is not None and net.tasks[0].hash != task.hash:  # one task that extraction rewrote, as `cmd_tune` decides
        return _bench_network(args, net)
    records = load_records(args.log) if args.log else []
    if args.log:
        warn_if_mixed(records, args.log)
    rec = best_record(records, task.hash, task.target, current_only=True) if args.log else None
    if args.log and rec is None:
        print(f"warning: {args.log} has no successful record for {task.name}: tuned = untuned", file=sys.stderr)
    threads = args.threads or os.cpu_count() or 1
    tuned = CompiledFunction(task, rec, threads)
    untuned = CompiledFunction(task, None, threads)
    inputs = make_inputs(task)
    refs = _same_outputs(task, tuned, untuned, inputs, "program")
    if refs is None:
        return 1

    def best_of(fn, reps: int = 5) -> float:
        fn()
        t = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            t.append(time.perf_counter() - t0)
        return min(t)

    t_tuned = min(tuned.time(*inputs, number=args.number) for _ in range(3))
    t_untuned = untuned.time(*inputs, number=1)
    rows = [("tuned (ansor)", t_tuned), ("naive loops", t_untuned)]
    npf = numpy_function(task)
    if npf is not None:
        npout = npf(*inputs)
        if check_task_outputs(task, [np.asarray(npout)], refs[:1]) is None:
            rows.append(("numpy", best_of(lambda: npf(*inputs))))
    print(f"{task.name}: {task.flops / 1e9:.3f} GFLOP, {threads} threads, verified against the untuned program")
    if npf is not None:
        from ansor.measure.baselines import describe_numpy_blas, numpy_blas

        print(f"numpy's BLAS: {describe_numpy_blas(numpy_blas())}")
    print(f"{'program':<16} {'latency':>12} {'GFLOP/s':>9} {'tuned speedup':>14}")
    for name, t in rows:
        print(f"{name:<16} {t * 1e3:>9.3f} ms {task.flops / t / 1e9:>9.2f} {t / t_tuned:>13.2f}x")
    return 0


def _same_outputs(task, tuned, untuned, inputs: list, what: str) -> list | None:
    """The untuned outputs, or None (with an error line) when the tuned program's differ
    (`verify.check_task_outputs`: the tuner's criterion)."""
    from ansor.measure.verify import check_task_outputs

    ref, out = untuned(*inputs), tuned(*inputs)
    refs = list(ref) if isinstance(ref, tuple) else [ref]
    outs = list(out) if isinstance(out, tuple) else [out]
    bad = check_task_outputs(task, outs, refs)
    if bad:
        print(f"error: tuned {what} is wrong: {bad}", file=sys.stderr)
        return None
    return refs


def _bench_network(args: argparse.Namespace, net) -> int:
    from ansor.compile import compile_network
    from ansor.measure.measurer import make_inputs

    threads = args.threads or os.cpu_count() or 1
    tuned = compile_network(net, args.log, threads=threads)
    untuned = compile_network(net, None, threads=threads)
    whole = net.as_task()
    inputs = make_inputs(whole)
    if _same_outputs(whole, tuned, untuned, inputs, "model") is None:
        return 1
    t_tuned = min(tuned.time(*inputs, number=args.number) for _ in range(3))
    t_untuned = untuned.time(*inputs, number=1)
    print(f"{net.name}: {len(net.tasks)} tasks ({tuned.tuned_tasks} tuned), {net.flops / 1e9:.3f} GFLOP, "
          f"{threads} threads, verified against the untuned model")
    print(f"{'program':<16} {'latency':>12} {'GFLOP/s':>9} {'tuned speedup':>14}")
    for name, t in (("tuned (ansor)", t_tuned), ("naive loops", t_untuned)):
        print(f"{name:<16} {t * 1e3:>9.3f} ms {net.flops / t / 1e9:>9.2f} {t / t_tuned:>13.2f}x")
    est, missing = network_estimate(net, tuned.records)
    if est > 0:
        note = f" ({missing} untuned tasks not counted)" if missing else ""
        print(f"tuned estimate {est * 1e3:.3f} ms = sum over tasks of weight x logged latency{note}; "
              f"measured end to end {t_tuned * 1e3:.3f} ms: {t_tuned / est:.2f}x the estimate "
              f"(gap {(t_tuned - est) * 1e3:+.3f} ms)")
        hint = _warm_estimate_hint(net, tuned.records)
        if hint and not getattr(args, "retime", False):
            print(hint)
    if getattr(args, "retime", False):
        for label, t in _retimed_estimates(net, tuned.records, threads).items():
            print(f"re-timed estimate, {label}: {t * 1e3:.3f} ms: measured end to end is {t_tuned / t:.2f}x "
                  f"(gap {(t_tuned - t) * 1e3:+.3f} ms)")
    if getattr(args, "profile", False):
        profiled = compile_network(net, args.log, threads=threads, profile=True)
        prof = min((profiled.profile(*inputs, number=args.number) for _ in range(3)), key=lambda p: p.wall)
        print(f"profile (the best of 3 timings of {args.number} calls, per model call; 'logged': the tuner's "
              f"warm, alone latency):")
        print(prof.table())
    return 0


def _warm_estimate_hint(net, records: dict) -> str | None:
    """A note when the estimate counts as cached the weights that a model call reads from memory:
    the log was measured warm, and the tasks' inputs other than their first (their weights, what
    `--cache-flush-weights` evicts) add up to more than the last-level cache per model call. It
    points to `--retime` rather than to tuning with `--cache-flush-weights`: single cold calls
    rank candidates less precisely (results/arena/README.md)."""
    import numpy as np

    from ansor.measure.measurer import largest_cache_bytes

    recs = [r for r in records.values() if r is not None]
    llc = largest_cache_bytes()
    if not recs or not llc or any((r.provenance or {}).get("cache_flush") for r in recs):
        return None
    weights = sum(int(np.prod(x.shape)) * np.dtype(x.numpy_dtype()).itemsize
                  for i in net.calls.values() for x in net.tasks[i].inputs[1:])
    if weights <= llc:
        return None
    return (f"note: a model call reads {weights / 2**20:.1f} MiB of task inputs other than each task's first "
            f"(its weights), more than the {llc / 2**20:.0f} MiB last-level cache, but the log timed every task "
            f"warm with them cached; add --retime for an estimate that reads them from memory")


def _retimed_estimates(net, records: dict, threads: int) -> dict[str, float]:
    """The estimate again from each tuned task's schedule compiled alone and timed now by the
    tuner's own timing (`time_kernel`, median of the repeats), warm and with every input but the
    first evicted (`cache_flush="weights"`): what the log would say if tuned here, today."""
    import statistics

    from ansor.measure.measurer import RunOptions, make_inputs, time_kernel

    modes = {"warm, alone (as the log was timed)": RunOptions(repeat=5, min_repeat_ms=50),
             "weights evicted (--cache-flush-weights)": RunOptions(repeat=5, cache_flush="weights")}
    if any((r.provenance or {}).get("cache_flush") is True for r in records.values() if r is not None):
        modes["everything evicted (--cache-flush)"] = RunOptions(repeat=5, cache_flush="all")
    sums = dict.fromkeys(modes, 0.0)
    for t in net.tasks:
        rec = records.get(t.hash)
        if rec is None:
            continue
        target = get_target(t.target)
        target.set_threads(threads)
        kernel = target.compile(t, rec.script)
        ins = make_inputs(t)
        for label, opts in modes.items():
            sums[label] += t.weight * statistics.median(time_kernel(kernel, ins, opts))
    return sums


def network_estimate(net, records: dict) -> tuple[float, int]:
    """(sum over tasks of weight x best logged latency, tasks without a record): what the task
    scheduler optimises, to set against the measured end-to-end time."""
    est, missing = 0.0, 0
    for t in net.tasks:
        rec = records.get(t.hash)
        if rec is None:
            missing += 1
        else:
            est += t.weight * rec.latency
    return est, missing


def cmd_workloads(args: argparse.Namespace) -> int:
    from ansor.frontend import workloads

    if args.emit:
        sys.stdout.write(workloads.get(args.emit))
        return 0
    for name, desc in workloads.describe():
        print(f"{name:<34} {desc}")
    return 0


def cmd_sketches(args: argparse.Namespace) -> int:
    import random

    from ansor.space.schedule import sample
    from ansor.targets import generate_sketches

    task = _task(args)
    for sk in generate_sketches(task):
        print(f"// ===== sketch {sk.name} ({sk.rule})")
        if args.schedule_seed is not None and sk.knobs:
            print(sk.script(sample(sk, random.Random(args.schedule_seed)).values()))
        else:
            print(sk.script() or "// (no transform: the untransformed program)")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from ansor.frontend import torch_import as frontend

    if args.list:
        from ansor.frontend.models import describe

        for name, desc in describe():
            print(f"{name:<14} {desc}")
        return 0
    if bool(args.spec) == bool(args.network):
        raise ValueError("give a model spec path/to/model.py:make_model or --network NAME (see --list)")
    t0 = time.perf_counter()
    if args.network:
        if args.input_shape:
            raise ValueError(f"--input-shape does not apply to --network {args.network}: its shapes are built in")
        text = frontend.import_network(args.network, elide_weights=args.elide_weights, func_name=args.func_name)
    else:
        parsed = [frontend.parse_input_shape(s) for s in args.input_shape or []]
        text = frontend.import_file(args.spec, [s for s, _ in parsed], input_dtypes=[d for _, d in parsed],
                                    elide_weights=args.elide_weights, func_name=args.func_name)
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text)
        print(f"{args.output}: {len(text) / 2**20:.1f} MiB of MLIR in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ansor", description="Ansor auto-scheduling on MLIR.")
    p.add_argument("-v", "--verbose", action="count", default=1, help="more output (-vv: every failure)")
    sub = p.add_subparsers(dest="cmd", required=True)

    def split_arg(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--split", action="store_true", default=None,
                        help="keep row-wise reduction chains in separate tasks (the old partitioning; an ablation; "
                             "the default on targets whose rules cannot schedule them fused yet: cuda)")

    def tf32_arg(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--tf32", action="store_true",
                        help="let f32 contractions run on TF32 tensor cores (10-bit mantissas; cuda, sm_90; off: "
                             "exact fp32); part of every task's identity in the log")

    def source_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("file", nargs="?", help="a .mlir file with one public func.func on tensors")
        sp.add_argument("--workload", help="a built-in workload instead of FILE (see `ansor workloads`)")
        sp.add_argument("--func", help="the function to tune when FILE has several public ones")
        sp.add_argument("--target", default="cpu", choices=list(target_names()),
                        help="where the program runs: cpu, or cuda (an NVIDIA GPU; default cpu)")
        sp.add_argument("--arch", help="cuda: GPU architecture such as sm_90 (default: asked from the device)")
        sp.add_argument("--threads", type=int, default=0, help="OpenMP threads (default: all cores)")
        sp.add_argument("--winograd", type=int, default=None, choices=[0, 2, 4], metavar="M",
                        help="for a model: compute 3x3 stride-1 convolutions with constant weights by "
                             "Winograd F(txt, 3x3), t <= M (default 0: direct; `bench` with a log: as the "
                             "log was tuned)")

    t = sub.add_parser("tune", help="tune a function and log every measured candidate",
                       description="Tune a function and log every measured candidate. On CPU the search's vector "
                                   "limits follow the host (AVX-512: 32-lane rows; else AVX2's 16); set "
                                   "ANSOR_VECTOR_BITS=256 or 512 to choose.")
    source_args(t)
    t.add_argument("--trials", type=int, default=200,
                   help="candidates to measure in total, the log's records included (default 200)")
    t.add_argument("--log", help="JSON-lines log to append to and resume from (default NAME.TARGET.jsonl)")
    t.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    t.add_argument("--batch-size", type=int, default=64, help="candidates per measured batch (default 64, Ansor's)")
    t.add_argument("--number", type=int, default=1, help="calls averaged per measurement (default 1)")
    t.add_argument("--repeat", type=int, default=3, help="measurements per candidate (default 3)")
    t.add_argument("--min-repeat-ms", type=float, default=100.0, help="raise --number until a measurement takes this long")
    t.add_argument("--timeout", type=float, default=30.0, help="seconds allowed per candidate (build + run)")
    t.add_argument("--cache-flush", action="store_const", const="all", default=False,
                   help="cpu: time each of --repeat calls after evicting every CPU cache (inputs, "
                        "outputs, code all cold; use its own --log)")
    t.add_argument("--cache-flush-weights", dest="cache_flush", action="store_const", const="weights",
                   help="cpu: time each of --repeat calls after evicting every input but the first "
                        "(TVM's enable_cpu_cache_flush): a model's task reads its weights from memory, "
                        "its input from cache, as inside a model whose weights exceed the last-level "
                        "cache (use its own --log)")
    t.add_argument("--search", choices=["learned", "random"], default="learned",
                   help="learned: evolutionary search guided by the XGBoost cost model (Ansor); "
                        "random: uniform random annotations (default learned)")
    t.add_argument("--no-crossover", dest="crossover", action="store_false",
                   help="evolutionary search without crossover (ablation)")
    t.add_argument("--pretrain", action="append", default=[], metavar="LOG",
                   help="train the cost model on this earlier log's records (any tasks, same target) before "
                        "the first round, so that round is already guided (repeatable; TVM's load_log_file)")
    t.add_argument("--no-transfer", dest="transfer", action="store_false",
                   help="for a model: no transfer of schedules between similar tasks (ablation)")
    t.add_argument("--json", action="store_true", help="JSON progress events instead of a table")
    t.add_argument("--cluster", metavar="ray|ray://HOST:PORT",
                   help="measure on a Ray cluster (needs ansor-mlir[ray]): 'ray' = this machine's cluster "
                        "(RAY_ADDRESS, a running `ray start`, else a local one), ray://HOST:PORT = Ray Client, "
                        "ray:HOST:PORT = a head node's address")
    t.add_argument("--builders", type=int, default=None, metavar="N",
                   help="build-ahead worker processes on this machine (0: the runner builds; default: 0 on "
                        "the CPU, all cores but two for CUDA), or with --cluster, builder actors per node")
    t.add_argument("--runners", type=int, default=None, metavar="N",
                   help="runner processes sharing the device: one verifies and times while the next loads its "
                        "candidate (default: 1 on the CPU, the CUDA target's default on a GPU)")
    t.add_argument("--strategy", choices=["gradient", "round-robin"], default="gradient",
                   help="for a model: how the trials are spread over its tasks (default gradient, Ansor's)")
    t.add_argument("--one-task", action="store_true",
                   help="tune the whole function as one task (a fused subgraph) instead of partitioning it")
    split_arg(t)
    tf32_arg(t)
    t.add_argument("--early-stopping", type=int, default=None,
                   help="for a model: stop when the estimated latency has not improved for this many trials")
    t.set_defaults(fn=cmd_tune)

    ts = sub.add_parser("tasks", help="partition a model into tasks and print them (task, shapes, GFLOP, weight)")
    source_args(ts)
    split_arg(ts)
    ts.set_defaults(fn=cmd_tasks)

    b = sub.add_parser("bench", help="time the best logged schedule against the naive loops (untransformed program) and numpy")
    source_args(b)
    b.add_argument("--log", help="the tuning log (plain, or compressed: .jsonl.xz / .jsonl.gz)")
    b.add_argument("--number", type=int, default=10, help="calls per timing (default 10)")
    b.add_argument("--profile", action="store_true",
                   help="for a model: also time every task's call inside the model and the parent's own ops "
                        "(a build with per-call timers), next to each task's logged latency")
    b.add_argument("--retime", action="store_true",
                   help="for a model: also re-time every task's logged schedule alone, now, warm and with "
                        "its weights evicted (--cache-flush-weights), and print both sums next to the "
                        "measured time (on another day or machine the log's latencies may not hold)")
    split_arg(b)
    tf32_arg(b)
    b.set_defaults(fn=cmd_bench)

    w = sub.add_parser("workloads", help="list built-in workloads, or print one as MLIR")
    w.add_argument("--emit", metavar="NAME", help="print workload NAME as a .mlir module")
    w.set_defaults(fn=cmd_workloads)

    s = sub.add_parser("sketches", help="print the sketches (transform scripts with holes) of a function")
    source_args(s)
    s.add_argument("--schedule-seed", type=int, help="fill the holes with a random annotation from this seed")
    s.set_defaults(fn=cmd_sketches)

    m = sub.add_parser("import", help="export a PyTorch model to linalg-on-tensors MLIR (needs ansor-mlir[torch])")
    m.add_argument("spec", nargs="?", help="path/to/model.py:make_model (a function returning an nn.Module)")
    m.add_argument("--input-shape", action="append", metavar="SHAPE",
                   help="one per model input, like 1x3x224x224 (f32) or 1x128xi64")
    m.add_argument("--network", help="a built-in network instead of a spec (see --list)")
    m.add_argument("--list", action="store_true", help="list the built-in networks")
    m.add_argument("-o", "--output", help="the .mlir file to write (default: stdout)")
    m.add_argument("--elide-weights", action="store_true",
                   help="print large weights as __elided__ (for reading; the result does not compile)")
    m.add_argument("--func-name", default="main", help="name of the exported function (default main)")
    m.set_defaults(fn=cmd_import)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.verbose <= 1 else logging.INFO,
                        format="%(levelname)s: %(message)s")
    from ansor.tuning.records import LogError
    from ansor.core.task import TaskError
    from ansor.measure.cluster import ClusterError
    from ansor.core.mlir import LoweringError

    try:
        return int(args.fn(args) or 0)
    except (TaskError, LogError, ValueError, KeyError, ClusterError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"ansor: error: {msg}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except LoweringError as exc:  # `bench` / `compile` of a program that does not build or load here
        print(f"ansor: error: {str(exc).splitlines()[0] if str(exc) else 'lowering failed'}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ansor: interrupted (the log keeps every finished measurement; rerun to resume)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""Shared helpers of the benchmarks: timing rounds that alternate between candidates, medians with
their range, geometric means, the host header, the BLAS in use, and the results/ files.

    candidates {label: () -> seconds} --alternate(rounds)--> {label: [seconds per round]}
        --stats / fmt--> "median (min–max)"      --write_results--> results/NAME.json
    results/NAME.json --render (tools/render_results.py)--> the markdown table the script prints

Every table a benchmark prints holds medians over >= 5 alternating rounds with their range: a
shared host drifts by tens of percent between minutes, so each round times every candidate once,
back to back (the order rotates from round to round), and ratios are taken within a round.

A baseline that needs torch runs in a process of its own (`Child`): torch's OpenMP runtime next
to ours in one process slows both sides 1.3-1.7x, unevenly. Between two candidates `alternate`
pauses `SETTLE_S`: the OpenMP runtime our kernels use keeps its threads spinning 200 ms after a
parallel region (KMP_BLOCKTIME), which would steal a core from the next candidate. Every timing
then starts with `WARMUP_S` of untimed calls (`warm_up`), on both sides.

The benchmarks run as modules of the `bench` package from the repository root (`python -m
bench.NAME`) and import what they share from here (`from bench.common import ...`): the timing
rounds, the search settings, the helper processes (the PyTorch baselines, re-timing in a fresh
process), the suite's labels and entries, and the results/ files. Nothing here imports torch at
module level; `torch_blas` and the GPU baselines import it when called (inside a torch process).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
#: Logs, imported models, plots and scratch files of the benchmarks (git-ignored).
OUT = ROOT / "bench" / "out"
#: Labels of the timed candidates, as results files and tables name them.
CALL, NATIVE, TORCH, NAIVE = "ours, Python call", "ours, native loop", "PyTorch eager", "naive loops"
#: Seconds of pause between two timed candidates (see the module doc).
SETTLE_S = 0.3
#: Seconds of calls before a candidate is timed, on each side alike. After a pause (`SETTLE_S`)
#: the first tens of milliseconds of our 2-thread kernels can run several times slower (small-cnn
#: here: 0.20-0.29 ms instead of 0.05 ms for a whole median of 20 calls); 0.1 s of calls first
#: removed it.
WARMUP_S = 0.1
#: Kernels whose median (ours or the baseline's) is under this many seconds are left out of the
#: second suite geomean: there a Python-level call's overhead, not the kernel, decides.
SMALL_S = 50e-6


# --------------------------------------------------------------------------- timing


def calls_for(fn: Callable[[], object], seconds: float = 0.1) -> int:
    """How many calls of `fn` take about `seconds` (one warm call measured; at least 1)."""
    t0 = time.perf_counter()
    fn()
    return max(1, int(seconds / max(time.perf_counter() - t0, 1e-7)))


def warm_up(fn: Callable[[], object], seconds: float = WARMUP_S, min_calls: int = 3) -> None:
    """Call `fn` for about `seconds` (at least `min_calls` times) before it is timed."""
    t0 = time.perf_counter()
    k = 0
    while k < min_calls or time.perf_counter() - t0 < seconds:
        fn()
        k += 1


def loop_time(fn: Callable[[], object], *, seconds: float = 0.1, repeats: int = 5, number: int | None = None) -> float:
    """Seconds per call of `fn`, called from Python in a loop of about `seconds` (or `number`
    calls): the best of `repeats` loops, after `warm_up`. This is how PyTorch eager is timed, so
    it is how our compiled callables are timed next to it."""
    warm_up(fn)
    n = number or calls_for(fn, seconds)
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def native_time(compiled: Any, inputs: list, *, seconds: float = 0.1, repeats: int = 5,
                number: int | None = None) -> float:
    """Seconds per call of a compiled kernel in its native timing loop (`CompiledFunction.time`,
    as the tuner times it): the best of `repeats` loops of about `seconds` (or `number` calls),
    after `warm_up` (skipped for a slow kernel timed once: `repeats` 1)."""
    if repeats > 1:
        warm_up(lambda: compiled.time(*inputs, number=1))
    if number is None:
        t0 = time.perf_counter()
        compiled.time(*inputs, number=1)
        number = max(1, int(seconds / max(time.perf_counter() - t0, 1e-7)))
    return min(compiled.time(*inputs, number=number) for _ in range(repeats))


def alternate(candidates: dict[str, Callable[[], float]], rounds: int, *, settle_s: float = SETTLE_S,
              on_round: Callable[[int, dict[str, float]], None] | None = None) -> dict[str, list[float]]:
    """Time every candidate once per round, `rounds` rounds; round r starts at candidate r (mod the
    count), so no candidate always runs first. Each callable returns its own timing in seconds
    (or None: dropped from then on, e.g. a baseline that cannot run). Returns {label: [s, ...]}."""
    labels = list(candidates)
    times: dict[str, list[float]] = {label: [] for label in labels}
    dead: set[str] = set()
    for r in range(rounds):
        this: dict[str, float] = {}
        for i in range(len(labels)):
            label = labels[(r + i) % len(labels)]
            if label in dead:
                continue
            if settle_s:
                time.sleep(settle_s)
            t = candidates[label]()
            if t is None:
                dead.add(label)
                times.pop(label, None)
                continue
            times[label].append(float(t))
            this[label] = float(t)
        if on_round is not None:
            on_round(r, this)
    return times


def time_calls(fn: Callable[..., object], inputs: list, repeat: int = 20) -> tuple[float, float]:
    """(median, min) seconds of `repeat` single Python-level calls `fn(*inputs)` after `warm_up`:
    how a whole compiled network is timed, and how bench/torch_network.py times PyTorch's."""
    warm_up(lambda: fn(*inputs))
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*inputs)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


# --------------------------------------------------------------------------- statistics


def stats(ts: Iterable[float]) -> dict[str, float]:
    """{"median", "min", "max"} of per-round values (nan when there are none)."""
    xs = [x for x in ts if x is not None and math.isfinite(x)]
    if not xs:
        return {"median": math.nan, "min": math.nan, "max": math.nan}
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def per_round_ratio(num: list[float], den: list[float]) -> list[float]:
    """num[r] / den[r] for each round both have."""
    return [a / b for a, b in zip(num, den, strict=False) if b and math.isfinite(a) and math.isfinite(b)]


def ratio(times: dict[str, list[float]], num: str, den: str) -> float:
    """Median over rounds of times[num] / times[den] (nan when either side is missing)."""
    if num not in times or den not in times:
        return math.nan
    return statistics.median(a / b for a, b in zip(times[num], times[den], strict=False))


def fmt(ts: Iterable[float] | None, scale: float = 1e3, digits: int = 3, unit: str = "") -> str:
    """"median (min–max)" of per-round values times `scale` ('-' when there are none)."""
    if ts is None:
        return "-"
    s = stats(ts)
    if not math.isfinite(s["median"]):
        return "-"
    return f"{s['median'] * scale:.{digits}f}{unit} ({s['min'] * scale:.{digits}f}–{s['max'] * scale:.{digits}f})"


def geomean(xs: Iterable[float]) -> float:
    xs = [x for x in xs if x is not None and math.isfinite(x) and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else math.nan


# --------------------------------------------------------------------------- host, versions


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def host_meta(threads: int, target: str = "cpu") -> dict[str, Any]:
    """The machine and software a result comes from: `ansor.measure.provenance.host` (CPU model, cores,
    GPU for a CUDA target), the vector width the search targets, the commit, versions."""
    from ansor.measure import provenance
    from ansor.targets.cpu.params import VECTOR_BITS

    return {**provenance.host(target), "vector_bits": VECTOR_BITS, "threads": threads,
            "commit": provenance.git_commit(), "ansor": provenance.package_version(),
            "python": ".".join(map(str, sys.version_info[:3])), "numpy": _version("numpy"), "torch": _version("torch")}


def host_line(meta: dict[str, Any]) -> str:
    """One line naming the host and software of `host_meta`."""
    gpu = f" | GPU {meta['gpu']}" if meta.get("gpu") else ""
    sw = ", ".join(f"{k} {meta[k]}" for k in ("numpy", "torch") if meta.get(k))
    return (f"host: {meta['cpu']} | {meta['cores']} cores | {meta.get('vector_bits', '?')}-bit vectors{gpu} | "
            f"threads used: {meta['threads']} | commit {meta.get('commit') or '?'} | ansor {meta.get('ansor')}"
            + (f" | {sw}" if sw else ""))


# --------------------------------------------------------------------------- search settings


def add_search_args(ap: argparse.ArgumentParser) -> None:
    """The search settings of the tuning benchmarks (suite, ragged_tiles, search_efficiency): the
    round size, the evolutionary search's population and generations, and the cost model's
    warm-up, with Ansor's defaults."""
    ap.add_argument("--batch-size", type=int, default=64, help="measurements per search round")
    ap.add_argument("--population", type=int, default=2048, help="evolutionary search population")
    ap.add_argument("--generations", type=int, default=4, help="evolutionary search generations")
    ap.add_argument("--warmup-samples", type=int, default=100,
                    help="measured programs before the cost model's predictions replace random scores")


def tune_kwargs(args: argparse.Namespace, seed: int = 0) -> dict:
    """Keyword arguments of `ansor.tune` for `add_search_args`' settings (a fresh cost model per call)."""
    from ansor.search.cost_model import XGBModel

    return {
        "batch_size": args.batch_size,
        "cost_model": XGBModel(few_shot_threshold=args.warmup_samples, seed=seed),
        "search_options": {"population": args.population, "generations": args.generations},
    }


def best_so_far(log: str | Path) -> list[float]:
    """The best latency of a tuning log after each of its records, in log order (seconds)."""
    import ansor

    best, out = math.inf, []
    for r in ansor.load_records(log):
        best = min(best, r.latency)
        out.append(best)
    return out


def random_inputs(task: Any, n: int, seed: int) -> list:
    """`n` measure inputs of `task` drawn by the seeded random search (the same in every run)."""
    from ansor.measure.measurer import MeasureInput
    from ansor.search.policy import RandomSearch
    from ansor.targets import generate_sketches

    sketches = generate_sketches(task)
    by = {s.name: s for s in sketches}
    return [MeasureInput(task, s, by[s.sketch].script(s.values()))
            for s in RandomSearch(sketches, seed=seed, measured=set()).next_batch(n)]


# --------------------------------------------------------------------------- models, modules by path


def load_module(path: Path, name: str) -> Any:
    """The module at `path`, loaded by path (not through a package, so nothing else is imported:
    tools/render_results.py, the built-in networks' models.py in a torch process)."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def ansor_source(*parts: str) -> Path:
    """A file of the installed `ansor` package, found without importing `ansor` (whose import
    loads MLIR)."""
    spec = importlib.util.find_spec("ansor")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("ansor")
    return Path(spec.origin).parent.joinpath(*parts)


def model_text(name: str, out: Path = OUT) -> tuple[str, bool]:
    """(MLIR text, is a PyTorch network) of `name`: a built-in network (imported by `ansor import`
    into OUT/NAME.mlir once, then read from there) or a built-in linalg workload."""
    from ansor.frontend import torch_import as frontend
    from ansor.frontend import workloads
    from ansor.frontend.models import NETWORKS

    if name in NETWORKS:
        path = out / f"{name}.mlir"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            path.write_text(frontend.import_network(name))
            print(f"imported {name} in {time.perf_counter() - t0:.1f} s -> {path}")
        return path.read_text(), True
    return workloads.get(name), False


# --------------------------------------------------------------------------- BLAS

#: OpenBLAS core types (threadpoolctl's `architecture`) -> the vector width of their SGEMM kernel.
def numpy_blas() -> dict[str, Any]:
    """`ansor.measure.baselines.numpy_blas` (imported here only when called: the torch helper processes
    that import this module keep MLIR out)."""
    from ansor.measure.baselines import numpy_blas as info

    return info()


def describe_numpy_blas(info: dict[str, Any]) -> str:
    from ansor.measure.baselines import describe_numpy_blas as describe

    return describe(info)


def torch_blas() -> dict[str, Any]:
    """(Call inside a torch process.) torch's matmul library: the MKL version string where torch
    links MKL (x86 builds; f32 `torch.matmul` runs MKL's SGEMM), the ATen CPU capability (the
    widest vector ISA torch's own kernels dispatch), and what MKL detected (its Intel-CPU and Zen
    checks, read from the symbols torch exports; MKL does not report its code path)."""
    import ctypes

    import torch

    out: dict[str, Any] = {"torch": torch.__version__, "threads": torch.get_num_threads(),
                           "mkl": torch.backends.mkl.is_available(), "onednn": torch.backends.mkldnn.is_available()}
    try:
        out["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    except AttributeError:
        pass
    try:
        lib = ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"))
        buf = ctypes.create_string_buffer(256)
        lib.MKL_Get_Version_String(buf, 256)
        out["mkl_version"] = buf.value.decode(errors="replace").strip()
        for sym, key in (("mkl_serv_intel_cpu_true", "mkl_sees_intel_cpu"), ("mkl_serv_cpuiszen", "mkl_sees_zen")):
            f = getattr(lib, sym)
            f.restype = ctypes.c_int
            out[key] = bool(f())
    except (OSError, AttributeError):
        pass
    return out


def describe_torch_blas(info: dict[str, Any]) -> str:
    if not info:
        return "torch: not available"
    mkl = info.get("mkl_version", "MKL" if info.get("mkl") else "no MKL")
    mkl = mkl.replace("Intel(R) oneAPI Math Kernel Library Version", "oneMKL").split(" for ")[0]
    seen = []
    if "mkl_sees_intel_cpu" in info:
        seen.append("MKL detects an Intel CPU" if info["mkl_sees_intel_cpu"] else "MKL detects a non-Intel CPU")
    if info.get("mkl_sees_zen"):
        seen.append("its Zen path")
    return (f"torch {info.get('torch')} -> {mkl} SGEMM ({', '.join(seen) or 'code path not reported'}); "
            f"ATen CPU capability {info.get('cpu_capability', '?')}, {info.get('threads')} threads")


# --------------------------------------------------------------------------- helper processes


class Child:
    """A helper process (a torch baseline) that answers one JSON line per JSON request line on
    its stdout; lines that are not JSON (library chatter) are skipped. Started once, asked once
    per round, so a baseline that compiles (TorchScript, torch.compile) compiles once."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env)
        self.hello = self._read()

    def _read(self) -> dict:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except json.JSONDecodeError:
                    continue
        err = self.proc.stderr.read() if self.proc.stderr else ""
        self.proc.wait()
        tail = (err.strip().splitlines() or ["(no output)"])[-1]
        what = self.argv[2] if self.argv[1:2] == ["-m"] else Path(self.argv[1]).name
        raise RuntimeError(f"{what} exited ({self.proc.returncode}): {tail}")

    def ask(self, request: dict | None = None) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request or {}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # type: ignore[union-attr]
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> Child:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(hello: dict, handle: Callable[[dict], dict]) -> None:
    """The child's side of `Child`: print `hello`, then answer each request line until stdin closes."""
    print(json.dumps(hello), flush=True)
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(handle(json.loads(line))), flush=True)


def module_argv(module: str, *args: str) -> list[str]:
    """The command line of a child process running the bench module `module` (e.g.
    "bench.torch_ops") with this interpreter: `python -m`, as the benchmarks are run; the child
    inherits the working directory and PYTHONPATH that let this process import `bench`."""
    return [sys.executable, "-m", module, *args]


def start_torch_op(name: str, inputs: list, threads: int, tmp: Path) -> tuple[Child, Any] | None:
    """A PyTorch-eager process for workload `name` (bench/torch_ops.py --serve) that answers
    `.ask()` with one timing ({"latency_s", "layout", "per_layout"}), and the output it computed
    (the workload's layout); its `.hello["info"]` describes torch's BLAS (`torch_blas`). None when
    PyTorch has no equivalent of `name`. Raises OSError or RuntimeError when torch cannot start."""
    import numpy as np

    tmp.mkdir(parents=True, exist_ok=True)
    paths = [str(tmp / f"in{i}.npy") for i in range(len(inputs))]
    for path, arr in zip(paths, inputs, strict=True):
        np.save(path, arr)
    out = tmp / "torch.npy"
    child = Child(module_argv("bench.torch_ops", name, "--threads", str(threads), "--inputs", *paths,
                              "--out", str(out), "--serve"),
                  env={**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)})
    if not child.hello.get("available"):
        child.close()
        return None
    return child, np.load(out)


def retime_in_child(name: str, logs: dict[str, list[Path]], rounds: int, threads: int, tmp: Path,
                    naive: bool = False) -> dict:
    """bench/retime.py's `time_alternating` in a fresh process (this one may hold torch, XGBoost or
    a tuner): the best record of each label's logs compiled, checked against PyTorch, and timed in
    `rounds` alternating rounds with PyTorch eager. Returns {"times": {label: [native-loop s per
    round], "torch": [...]}, "calls": {label: [Python-call s per round]}, "naive": [...] (with
    `naive`), "agree": "yes" or why not, "torch_layout": [...], "torch_info": {...}}."""
    spec = json.dumps({label: [str(p) for p in paths] for label, paths in logs.items()})
    child = subprocess.run(module_argv("bench.retime", "--child", name, spec, "--rounds", str(rounds),
                                       "--threads", str(threads), "--tmp", str(tmp),
                                       *([] if naive else ["--no-naive"])),
                           capture_output=True, text=True, check=False)
    if child.returncode != 0:
        raise SystemExit(f"{name}: re-timing failed: {(child.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(child.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- results/


def best_record_lines(logs: Iterable[str | Path], tasks: Iterable[Any]) -> list[dict]:
    """The best current record of each task (`records.best_record`, current sketch version) in
    `logs`, as the log's own JSON line: each holds the task, the schedule and the replayable
    transform script, so `ansor.compile(..., log=those lines)` rebuilds the tuned program."""
    from ansor.tuning.records import best_record, load_records, open_log

    logs = [Path(p) for p in logs]
    recs = [r for p in logs for r in load_records(p)]
    want = {}
    for t in tasks:
        r = best_record(recs, t.hash, t.target, current_only=True)
        if r is not None:
            want[r.key] = r
    out, seen = [], set()
    for p in logs:
        with open_log(p) as f:  # plain, or .jsonl.xz / .jsonl.gz
            lines = f.read().splitlines()
        for line in lines:
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                continue
            r = want.get(d.get("key"))
            lat = (d.get("result") or {}).get("latency")
            if r is not None and r.key not in seen and lat is not None and math.isclose(lat, r.latency, rel_tol=1e-12):
                out.append(d)
                seen.add(r.key)
    return out


def suite_entry(name: str, task: Any, paths: list[Path], timed: dict) -> dict:
    """One workload of a suite results file from `retime_in_child`'s answer (label "tuned"):
    per-round timings under the table's labels, the best record (the replayable transform
    script), and how PyTorch ran."""
    from ansor.tuning.records import load_records

    times = {CALL: timed["calls"]["tuned"], NATIVE: timed["times"]["tuned"]}
    if "torch" in timed["times"]:
        times[TORCH] = timed["times"]["torch"]
    if "naive" in timed:
        times[NAIVE] = timed["naive"]
    measured = sum(r.task.hash == task.hash for p in paths for r in load_records(p))
    return {"name": name, "flops": task.flops, "logs": [str(p) for p in paths], "trials": measured,
            "agree": timed["agree"],
            "torch_layout": timed.get("torch_layout", []), "times": times,
            "records": best_record_lines(paths, [task])}


def command_line() -> str:
    """The command that ran this benchmark, from the repository root (the one the user typed,
    when `reexec_fresh` re-started the script): `python -m bench.NAME ARGS`."""
    if os.environ.get("ANSOR_BENCH_COMMAND"):
        return os.environ["ANSOR_BENCH_COMMAND"]
    if module := _main_module():
        return shlex.join(["python", "-m", module, *sys.argv[1:]])
    script = Path(sys.argv[0]).resolve()
    try:
        script_s = str(script.relative_to(ROOT))
    except ValueError:
        script_s = str(script)
    return shlex.join(["python", script_s, *sys.argv[1:]])


def _main_module() -> str | None:
    """The module `python -m` runs in this process (e.g. "bench.matmul"), or None."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec.name if spec is not None else None


def reexec_fresh(flag: str = "--report-only") -> None:
    """Replace this process by the same script with `flag` added (timing and report only), so the
    timings run in a fresh process: after tuning, XGBoost's OpenMP runtime stays loaded beside
    ours and slows our kernels here 1.3-2.7x (matmul-1024: 55 ms instead of 20 ms)."""
    os.environ.setdefault("ANSOR_BENCH_COMMAND", command_line())
    sys.stdout.flush()
    sys.stderr.flush()
    module = _main_module()
    head = ["-m", module] if module else [sys.argv[0]]
    os.execv(sys.executable, [sys.executable, *head, *sys.argv[1:], flag])


def results_path(name: str, override: str | None = None) -> Path:
    return Path(override) if override else RESULTS / f"{name}.json"


def write_results(path: Path, kind: str, meta: dict[str, Any], body: dict[str, Any]) -> Path:
    """Write one headline table's results file: what ran it, where, when, and `body` (per-round
    timings of every candidate and baseline, best records). Per-round lists stay on one line."""
    data = {"kind": kind, "command": command_line(),
            "date": datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat(),
            "host": meta, **body}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(data) + "\n")
    return path


def dumps(data: Any) -> str:
    """JSON with objects indented, lists of numbers (per-round timings) on one line, and each
    element of a "records" list (a log line) on one line: compact and still diff-able."""
    def enc(x: Any, ind: str) -> str:
        inner = ind + " "
        if isinstance(x, dict) and x:
            items = [f"{inner}{json.dumps(str(k))}: {enc_records(v, inner) if k == 'records' else enc(v, inner)}"
                     for k, v in x.items()]
            return "{\n" + ",\n".join(items) + "\n" + ind + "}"
        if isinstance(x, list) and any(isinstance(v, (dict, list)) for v in x):
            return "[\n" + ",\n".join(inner + enc(v, inner) for v in x) + "\n" + ind + "]"
        if isinstance(x, float):
            return json.dumps(float(f"{x:.6g}")) if math.isfinite(x) else "null"
        if isinstance(x, list):
            return "[" + ", ".join(enc(v, ind) for v in x) + "]"
        return json.dumps(x)

    def enc_records(x: Any, ind: str) -> str:
        if not isinstance(x, list) or not x:
            return json.dumps(x)
        inner = ind + " "
        return "[\n" + ",\n".join(inner + json.dumps(v, sort_keys=True) for v in x) + "\n" + ind + "]"

    return enc(data, "")


def render(data: dict[str, Any]) -> str:
    """The markdown table of a results file, as tools/render_results.py renders it into docs."""
    return load_module(ROOT / "tools" / "render_results.py", "render_results").render(data)


# --------------------------------------------------------------------------- GPU baselines (PyTorch on CUDA)


def torch_tensor(a, dev: str = "cpu"):
    """A numpy array as a torch tensor on `dev` (bf16 arrays, ml_dtypes', through their bits)."""
    import numpy as np
    import torch

    a = np.ascontiguousarray(a)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16).to(dev)
    return torch.from_numpy(a).to(dev)


#: Families of `workloads._FAMILIES` that get no PyTorch baseline, and why (`torch_cuda_fn`
#: answers None for them). tests/test_bench_baselines.py fails for any other family without one.
TORCH_NO_BASELINE = {"mlp": "a toy network with embedded weights, not one operator"}


def _torch_np(like=None):
    """The map of a PyTorch result to numpy: f16/bf16 through f32 into `like`, the workload's
    half dtype (torch has no numpy bf16); anything else as it is."""
    import torch

    def back(y):
        if y.dtype in (torch.float16, torch.bfloat16):
            return y.float().cpu().numpy().astype(like)
        return y.cpu().numpy()

    return back


def _channels_first(x):
    """An NLC / NHWC / NDHWC tensor as a contiguous NCL / NCHW / NCDHW copy (made once, untimed)."""
    return x.permute(0, x.dim() - 1, *range(1, x.dim() - 1)).contiguous()


def _channels_last_back(like):
    """The map of a channels-first PyTorch result back to the workload's channels-last layout."""
    to_np = _torch_np(like)
    return lambda y: to_np(y.permute(0, *range(2, y.dim()), 1).contiguous())


def _conv_weight(w, order):
    """A channels-last filter as PyTorch's [CO, CI, k...] (contiguous, made once)."""
    return w.permute(*order).contiguous()


def _mm_f32(a, b, batched: bool):
    """A (batched) GEMM of half `a`, `b` with the f32 result the task has: cuBLAS with f32 output
    on CUDA (as tensor cores accumulate; a PyTorch without `out_dtype` there: half output, widened);
    on the CPU, which has no `out_dtype` kernel, the f32 product of the operands widened once,
    outside the timed call (the tests' check of the baseline, not a timing)."""
    import torch

    mm = torch.bmm if batched else torch.mm
    if a.device.type == "cuda":
        def run():
            try:
                return mm(a, b, out_dtype=torch.float32)
            except TypeError:  # a PyTorch without out_dtype: half output, then widened
                return mm(a, b).float()

        return run
    af, bf = a.float(), b.float()
    return lambda: mm(af, bf)


def _tb_matmul(v, etype, t, inputs):  # cuBLAS GEMM
    a, b = t
    if etype:
        return _mm_f32(a, b, batched=False), _torch_np()
    return (lambda: a @ b), _torch_np()


def _tb_matmul_nt(v, etype, t, inputs):  # C = A @ B^T: cuBLAS takes B transposed, no copy
    a, b = t
    return (lambda: a @ b.t()), _torch_np()


def _tb_gmm(v, etype, t, inputs):  # cuBLAS batched GEMM
    a, b = t
    if etype:
        return _mm_f32(a, b, batched=True), _torch_np()
    import torch

    return (lambda: torch.bmm(a, b)), _torch_np()


def _tb_mmgelu(v, etype, t, inputs):  # cuBLAS addmm (bias in its epilogue) + a GELU kernel (exact erf)
    import torch
    import torch.nn.functional as F

    a, b, bias = t
    return (lambda: F.gelu(torch.addmm(bias, a, b))), _torch_np(inputs[0].dtype)


def _tb_c1d(v, etype, t, inputs):  # NLC, W [k, CI, CO] -> cuDNN conv1d on NCL, W [CO, CI, k]
    import torch.nn.functional as F

    s, p = v[-2], v[-1]
    x, w = _channels_first(t[0]), _conv_weight(t[1], (2, 1, 0))
    return (lambda: F.conv1d(x, w, stride=s, padding=p)), _channels_last_back(inputs[0].dtype)


def _conv2d(dilation: int = 1, groups: int = 1):
    """C2D / DIL / GRP: NHWC, W [k, k, CI/groups, CO] -> cuDNN conv2d (NCHW, W [CO, CI/groups, k, k])."""
    def build(v, etype, t, inputs):
        import torch
        import torch.nn.functional as F

        s, p = v[-2], v[-1]
        like = inputs[0].dtype
        if etype:  # half tensors: channels_last views of the workload's NHWC data (no copy), half result
            x = t[0].permute(0, 3, 1, 2)
            w = t[1].permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)
        else:
            x, w = _channels_first(t[0]), _conv_weight(t[1], (3, 2, 0, 1))
        return ((lambda: F.conv2d(x, w, stride=s, padding=p, dilation=dilation, groups=groups)),
                _channels_last_back(like))

    return build


def _tb_c3d(v, etype, t, inputs):  # NDHWC, W [k, k, k, CI, CO] -> cuDNN conv3d
    import torch.nn.functional as F

    s, p = v[-2], v[-1]
    x, w = _channels_first(t[0]), _conv_weight(t[1], (4, 3, 0, 1, 2))
    return (lambda: F.conv3d(x, w, stride=s, padding=p)), _channels_last_back(inputs[0].dtype)


def _tb_dep(v, etype, t, inputs):  # NHWC, W [k, k, C] -> cuDNN conv2d with groups = C, W [C, 1, k, k]
    import torch.nn.functional as F

    s, p = v[-2], v[-1]
    x, w = _channels_first(t[0]), _conv_weight(t[1], (2, 0, 1)).unsqueeze(1)
    c = x.shape[1]
    return (lambda: F.conv2d(x, w, stride=s, padding=p, groups=c)), _channels_last_back(inputs[0].dtype)


def _tb_t2d(v, etype, t, inputs):
    """NHWC; the filter argument is W pre-arranged (`workloads.t2d_filter`): PyTorch's weight
    [CI, CO, k, k] from `workloads.t2d_torch_weight` -> cuDNN conv_transpose2d."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    from ansor.frontend import workloads

    k, s, p = v[-3], v[-2], v[-1]
    wk = torch.from_numpy(workloads.t2d_torch_weight(np.asarray(inputs[1]), k, s, p))  # [kh, kw, CI, CO]
    x, w = _channels_first(t[0]), _conv_weight(wk, (2, 3, 0, 1)).to(t[1].device)
    return (lambda: F.conv_transpose2d(x, w, stride=s, padding=p)), _channels_last_back(inputs[0].dtype)


def _tb_cap(v, etype, t, inputs):
    """CAP: Y[n,h,w,i,j,co] = sum pad(X)[n, h*s+rh, w*s+rw, i, ck, ci] * W[rh,rw,ck,j,ci,co] is one
    cuDNN conv2d over the batch (n, i), input channels (ck, ci) and output channels (j, co)."""
    import torch.nn.functional as F

    s, p = v[-2], v[-1]
    x, w = t  # X [N,H,W,c,c,CI], W [k,k,c,c,CI,CO]
    n, h, wd, c, _, ci = x.shape
    k, co = w.shape[0], w.shape[-1]
    xb = x.permute(0, 3, 4, 5, 1, 2).reshape(n * c, c * ci, h, wd).contiguous()      # [(n,i), (ck,ci), H, W]
    wb = w.permute(3, 5, 2, 4, 0, 1).reshape(c * co, c * ci, k, k).contiguous()     # [(j,co), (ck,ci), k, k]
    to_np = _torch_np(inputs[0].dtype)

    def back(y):  # [(n,i), (j,co), OH, OW] -> [N, OH, OW, i, j, CO]
        oh, ow = y.shape[-2:]
        return to_np(y.reshape(n, c, c, co, oh, ow).permute(0, 4, 5, 1, 2, 3).contiguous())

    return (lambda: F.conv2d(xb, wb, stride=s, padding=p)), back


def _tb_convlayer(v, etype, t, inputs):  # cuDNN conv2d, then the folded batch norm and ReLU
    import torch
    import torch.nn.functional as F

    s, p = v[-2], v[-1]
    x, w = _channels_first(t[0]), _conv_weight(t[1], (3, 2, 0, 1))
    scale, shift = t[2][None, :, None, None], t[3][None, :, None, None]
    return ((lambda: torch.relu(F.conv2d(x, w, stride=s, padding=p) * scale + shift)),
            _channels_last_back(inputs[0].dtype))


def _tb_nrm(v, etype, t, inputs):  # Y[b] = sqrt(sum_{m,n} X[b,m,n]^2)
    import torch

    (x,) = t
    return (lambda: torch.linalg.vector_norm(x, ord=2, dim=(1, 2))), _torch_np()


def _tb_tbs(v, etype, t, inputs):  # Q, K [B,S,H,D] -> softmax(Q^T K) [B,H,S,S]: cuBLAS bmm + softmax
    import torch

    q, k = t
    return (lambda: torch.softmax(q.permute(0, 2, 1, 3) @ k.permute(0, 2, 3, 1), dim=-1)), _torch_np(inputs[0].dtype)


def _tb_softmax(v, etype, t, inputs):
    import torch

    (x,) = t
    return (lambda: torch.softmax(x, dim=-1)), _torch_np()


def _tb_logsoftmax(v, etype, t, inputs):
    import torch

    (x,) = t
    return (lambda: torch.log_softmax(x, dim=-1)), _torch_np()


def _tb_layernorm(v, etype, t, inputs):  # eps 1e-5 (`workloads.layernorm_gelu`)
    import torch.nn.functional as F

    x, g, b = t
    n = x.shape[-1]
    return (lambda: F.layer_norm(x, (n,), g, b, eps=1e-5)), _torch_np()


def _tb_lngelu(v, etype, t, inputs):  # LayerNorm (eps 1e-5) + GELU, tanh approximation
    import torch.nn.functional as F

    x, g, b = t
    n = x.shape[-1]
    return (lambda: F.gelu(F.layer_norm(x, (n,), g, b, eps=1e-5), approximate="tanh")), _torch_np()


def _tb_rmsnorm(v, etype, t, inputs):  # x / sqrt(mean(x^2) + 1e-6) * gamma (`workloads.rmsnorm`)
    import torch.nn.functional as F

    x, g = t
    n = x.shape[-1]
    return (lambda: F.rms_norm(x, (n,), g, eps=1e-6)), _torch_np()


def _tb_rowsum(v, etype, t, inputs):
    import torch

    (x,) = t
    return (lambda: torch.sum(x, dim=-1)), _torch_np()


def _tb_colsum(v, etype, t, inputs):
    import torch

    (x,) = t
    return (lambda: torch.sum(x, dim=0)), _torch_np()


def _tb_attention(v, etype, t, inputs):  # softmax(Q K) V: cuBLAS GEMM, softmax, GEMM
    import torch

    q, k, val = t
    return (lambda: torch.softmax(q @ k, dim=-1) @ val), _torch_np()


def _tb_conv_relu_pool(v, etype, t, inputs):  # cuDNN conv2d, ReLU, then the sum over H, W
    import torch
    import torch.nn.functional as F

    s, p = v[-2], v[-1]
    x, w = _channels_first(t[0]), _conv_weight(t[1], (3, 2, 0, 1))
    return (lambda: torch.relu(F.conv2d(x, w, stride=s, padding=p)).sum(dim=(2, 3))), _torch_np()


def _tb_matmul_rowsum(v, etype, t, inputs):
    a, b = t
    return (lambda: (a @ b).sum(dim=-1)), _torch_np()


def _tb_matmul_sumall(v, etype, t, inputs):
    a, b = t
    return (lambda: (a @ b).sum()), _torch_np()


def _tb_two_matmuls(v, etype, t, inputs):
    x, w1, w2 = t
    return (lambda: (x @ w1) * (x @ w2)), _torch_np()


#: family -> builder (sizes from the name, element-type suffix, torch tensors on the device, the
#: numpy inputs) -> (run, to_workload_layout): the PyTorch call a user writes for the workload.
TORCH_BASELINES: dict[str, Callable[..., tuple[Callable[[], Any], Callable[[Any], Any]]]] = {
    "matmul": _tb_matmul, "matmul_nt": _tb_matmul_nt, "gmm": _tb_gmm, "mmgelu": _tb_mmgelu,
    "c1d": _tb_c1d, "c2d": _conv2d(), "dil": _conv2d(dilation=2), "grp": _conv2d(groups=4),
    "c3d": _tb_c3d, "dep": _tb_dep, "t2d": _tb_t2d, "cap": _tb_cap, "convlayer": _tb_convlayer,
    "nrm": _tb_nrm, "tbs": _tb_tbs, "softmax": _tb_softmax, "logsoftmax": _tb_logsoftmax,
    "layernorm": _tb_layernorm, "lngelu": _tb_lngelu, "rmsnorm": _tb_rmsnorm,
    "rowsum": _tb_rowsum, "colsum": _tb_colsum, "attention": _tb_attention, "conv_relu_pool": _tb_conv_relu_pool,
    "matmul_rowsum": _tb_matmul_rowsum, "matmul_sumall": _tb_matmul_sumall, "two_matmuls": _tb_two_matmuls,
}


def torch_baseline_missing(name: str) -> str | None:
    """Why workload `name` has no PyTorch baseline in `torch_cuda_fn` (None when it has one)."""
    fam = name.partition("-")[0]
    if fam in TORCH_BASELINES:
        return None
    return f"no PyTorch baseline for family {fam!r}: {TORCH_NO_BASELINE.get(fam, 'none written yet')}"


def torch_cuda_fn(name: str, inputs: list, dev: str):
    """(run, to_workload_layout) of workload `name` in PyTorch on device `dev` (the GPU
    benchmarks' baseline: cuBLAS/cuDNN; "cpu" works too, as tests/test_bench_baselines.py checks
    every family there), or None when there is none (`torch_baseline_missing` says why).
    `inputs` are the workload's numpy arrays (`make_inputs` + `workloads.valid_inputs`); layouts
    are converted here, once, outside `run`; `to_workload_layout(run())` is the workload's output."""
    fam, _, dims = name.partition("-")
    dims, _, etype = dims.partition("-")  # matmul-4096-f16: half inputs (f32 result for matmul/gmm)
    build = TORCH_BASELINES.get(fam)
    if build is None:
        return None
    v = [int(x) for x in dims.split("x") if x]
    return build(v, etype, [torch_tensor(a, dev) for a in inputs], inputs)


def time_torch_cuda(run: Callable[[], object], reps: int = 50) -> tuple[float, float]:
    """(seconds per call with CUDA events over `reps` back-to-back calls, seconds per call with a
    synchronize after each call)."""
    import torch

    for _ in range(3):
        run()
    torch.cuda.synchronize()
    best_ev = float("inf")
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            run()
        end.record()
        torch.cuda.synchronize()
        best_ev = min(best_ev, start.elapsed_time(end) / 1e3 / reps)
    best_sync = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            run()
            torch.cuda.synchronize()
        best_sync = min(best_sync, (time.perf_counter() - t0) / reps)
    return best_ev, best_sync

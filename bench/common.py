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

Benchmarks import this module as `common` (they put bench/ on `sys.path`, as they do for their
other helpers); nothing here imports torch, except `torch_blas` (called inside a torch process).
"""

from __future__ import annotations

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
    """The machine and software a result comes from: `ansor.provenance.host` (CPU model, cores,
    GPU for a CUDA target), the vector width the search targets, the commit, versions."""
    from ansor.measure import provenance
    from ansor.targets.cpu.sketch import VECTOR_BITS

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


# --------------------------------------------------------------------------- BLAS

#: OpenBLAS core types (threadpoolctl's `architecture`) -> the vector width of their SGEMM kernel.
def numpy_blas() -> dict[str, Any]:
    """`ansor.baselines.numpy_blas` (imported here only when called: the torch helper processes
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
        raise RuntimeError(f"{Path(self.argv[1]).name} exited ({self.proc.returncode}): {tail}")

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


# --------------------------------------------------------------------------- results/


def best_record_lines(logs: Iterable[str | Path], tasks: Iterable[Any]) -> list[dict]:
    """The best current record of each task (`records.best_record`, current sketch version) in
    `logs`, as the log's own JSON line: each holds the task, the schedule and the replayable
    transform script, so `ansor.compile(..., log=those lines)` rebuilds the tuned program."""
    from ansor.tuning.records import best_record, load_records

    logs = [Path(p) for p in logs]
    recs = [r for p in logs for r in load_records(p)]
    want = {}
    for t in tasks:
        r = best_record(recs, t.hash, t.target, current_only=True)
        if r is not None:
            want[r.key] = r
    out, seen = [], set()
    for p in logs:
        for line in p.read_text().splitlines():
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


def command_line() -> str:
    """The command that ran this benchmark, relative to the repository root (the one the user
    typed, when `reexec_fresh` re-started the script)."""
    if os.environ.get("ANSOR_BENCH_COMMAND"):
        return os.environ["ANSOR_BENCH_COMMAND"]
    script = Path(sys.argv[0]).resolve()
    try:
        script_s = str(script.relative_to(ROOT))
    except ValueError:
        script_s = str(script)
    return shlex.join(["python", script_s, *sys.argv[1:]])


def reexec_fresh(flag: str = "--report-only") -> None:
    """Replace this process by the same script with `flag` added (timing and report only), so the
    timings run in a fresh process: after tuning, XGBoost's OpenMP runtime stays loaded beside
    ours and slows our kernels here 1.3-2.7x (matmul-1024: 55 ms instead of 20 ms)."""
    os.environ.setdefault("ANSOR_BENCH_COMMAND", command_line())
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, sys.argv[0], *sys.argv[1:], flag])


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
            items = [f"{inner}{json.dumps(k)}: {enc_records(v, inner) if k == 'records' else enc(v, inner)}"
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
    spec = importlib.util.spec_from_file_location("render_results", ROOT / "tools" / "render_results.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.render(data)

#!/usr/bin/env python3
"""Render the headline tables from the results files (results/*.json) into docs/results.md.

    python tools/render_results.py                  # rewrite docs/results.md from every results/*.json
    python tools/render_results.py results/X.json   # print that file's table
    python tools/render_results.py --check          # exit 1 when docs/results.md is not what the files render
    python tools/render_results.py --records results/X.json > best.jsonl
        # the best record of each task, as log lines: `ansor.compile(src, log="best.jsonl")` (or
        # `ansor bench --log best.jsonl`) rebuilds the tuned programs the table timed

A results file is written by a benchmark (bench/common.py `write_results`): the command, the host,
the commit, the date, the timings of every candidate and baseline in each round, and the best
records. Every number in a table is derived here from those per-round timings: a median over the
rounds with its range (min–max), or the median of the per-round ratios. The benchmarks print
their table through this module too, so what a run prints is what the docs show.

Needs only the standard library.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
DOC = ROOT / "docs" / "results.md"

CALL, NATIVE, TORCH, NAIVE = "ours, Python call", "ours, native loop", "PyTorch eager", "naive loops"
SMALL_S = 50e-6


def _finite(xs) -> list[float]:
    return [x for x in (xs or []) if x is not None and math.isfinite(x)]


def med(xs) -> float:
    xs = _finite(xs)
    return statistics.median(xs) if xs else math.nan


def rng(xs, scale: float = 1e3, digits: int | None = None, unit: str = "") -> str:
    """"median (min–max)" of per-round values times `scale` (by default with 4 significant
    digits in the median)."""
    xs = _finite(xs)
    if not xs:
        return "-"
    m = statistics.median(xs) * scale
    if digits is None:
        digits = min(6, max(0, 3 - math.floor(math.log10(abs(m))))) if m else 3
    return (f"{m:.{digits}f}{unit} "
            f"({min(xs) * scale:.{digits}f}–{max(xs) * scale:.{digits}f})")


def ratios(num, den) -> list[float]:
    """num[r] / den[r] per round."""
    return [a / b for a, b in zip(num or [], den or [], strict=False)
            if a is not None and b and math.isfinite(a) and math.isfinite(b)]


def ratio_cell(num, den) -> str:
    rs = ratios(num, den)
    if not rs:
        return "-"
    return f"{statistics.median(rs):.2f}x ({min(rs):.2f}–{max(rs):.2f})"


def geomean(xs) -> float:
    xs = [x for x in _finite(xs) if x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else math.nan


def gm(xs) -> str:
    g = geomean(xs)
    return f"{g:.2f}x" if math.isfinite(g) else "-"


def host_line(h: dict) -> str:
    gpu = f" | GPU {h['gpu']}" if h.get("gpu") else ""
    sw = ", ".join(f"{k} {h[k]}" for k in ("numpy", "torch") if h.get(k))
    return (f"{h.get('cpu', '?')} | {h.get('cores', '?')} cores | {h.get('vector_bits', '?')}-bit vectors{gpu} | "
            f"{h.get('threads', '?')} threads | commit {h.get('commit') or '?'} | ansor {h.get('ansor', '?')}"
            + (f" | {sw}" if sw else ""))


def _provenance(data: dict) -> list[str]:
    return [f"- host: {host_line(data.get('host', {}))}",
            f"- date: {data.get('date', '?')}",
            f"- command: `{data.get('command', '?')}`"]


# --------------------------------------------------------------------------- suite (suite.py, retime.py)


def render_suite(data: dict) -> str:
    s = data.get("settings", {})
    rounds, trials = s.get("rounds", "?"), s.get("trials")
    small = s.get("small_s", SMALL_S)
    lines = [f"### {data.get('title', 'Suite')}", ""]
    lines += _provenance(data)
    lines += [(f"- {'trials per workload: ' + str(trials) + '; ' if trials else ''}{rounds} alternating rounds "
              f"per workload, each round {s.get('per_round', '?')}; cells: median (min–max) over the rounds; "
              "ratios: median (min–max) of the per-round ratios"),
              (f"- PyTorch: {_torch_line(data.get('torch_info') or {})}; one-op forms where they exist, "
              "the faster memory layout for convolutions, in its own process"),
              (f"- {CALL}: `ansor.compile(...)(*args)` called from Python (output allocation included), "
              f"timed like PyTorch eager; {NATIVE}: the same kernel in its native timing loop (as the tuner "
              "times it); naive loops: the untransformed program (secondary)"),
              "",
              (f"| workload | GFLOP | {CALL} ms | {TORCH} ms | PyTorch / ours (call) | {NATIVE} ms "
              f"| PyTorch / ours (native) | {NAIVE} ms | same result |"),
              "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    call_r, nat_r, call_big, nat_big, small_names = [], [], [], [], []
    for w in data.get("workloads", []):
        t = w.get("times", {})
        rc, rn = ratios(t.get(TORCH), t.get(CALL)), ratios(t.get(TORCH), t.get(NATIVE))
        is_small = min(med(t.get(NATIVE)), med(t.get(TORCH)) if TORCH in t else math.inf) < small
        if rc:
            call_r.append(statistics.median(rc))
            nat_r.append(statistics.median(rn))
            if is_small:
                small_names.append(w["name"])
            else:
                call_big.append(call_r[-1])
                nat_big.append(nat_r[-1])
        lines.append(f"| {w['name']}{' (<50 µs)' if is_small else ''} | {w.get('flops', 0) / 1e9:.4g} "
                     f"| {rng(t.get(CALL))} | {rng(t.get(TORCH))} | {ratio_cell(t.get(TORCH), t.get(CALL))} "
                     f"| {rng(t.get(NATIVE))} | {ratio_cell(t.get(TORCH), t.get(NATIVE))} "
                     f"| {rng(t.get(NAIVE))} | {w.get('agree', '-')} |")
    loads = [x for w in data.get("workloads", []) if "load_avg" in w
             for x in (w["load_avg"]["before"][0], w["load_avg"]["after"][0])]
    if loads:
        lines += ["", f"Host 1-minute load average around the timing rounds: {min(loads):.2f}–{max(loads):.2f}."]
    lines += ["",
              (f"**geomean PyTorch eager / ours (Python call): {gm(call_r)} over {len(call_r)} workloads; "
              f"{gm(call_big)} over the {len(call_big)} of at least {small * 1e6:.0f} µs** "
              f"(left out: {', '.join(small_names) or 'none'}; a workload is under {small * 1e6:.0f} µs when "
              "ours in its native loop or PyTorch is)"),
              (f"geomean PyTorch eager / ours (native loop): {gm(nat_r)} over {len(nat_r)} workloads; "
              f"{gm(nat_big)} over the {len(nat_big)} of at least {small * 1e6:.0f} µs")]
    return "\n".join(lines)


def _torch_line(info: dict) -> str:
    if not info:
        return "not available"
    mkl = info.get("mkl_version", "")
    mkl = mkl.replace("Intel(R) oneAPI Math Kernel Library Version", "oneMKL").split(" for ")[0].split("-")[0]
    return (f"torch {info.get('torch', '?')}, {info.get('threads', '?')} threads, ATen CPU capability "
            f"{info.get('cpu_capability', '?')}" + (f", {mkl}" if mkl else ""))


# --------------------------------------------------------------------------- matmul.py


def render_matmul(data: dict) -> str:
    s = data.get("settings", {})
    flops, peak = data["flops"], data.get("fma_peak_gflops")
    t = data["times"]
    desc = data.get("baselines", {})
    lines = [f"### {data.get('title', 'matmul')}", ""]
    lines += _provenance(data)
    lines += [(f"- trials: {s.get('trials', '?')}; {s.get('rounds', '?')} alternating rounds, each round the best of "
              "5 loops of ~0.1 s per program after 0.1 s of warm-up calls (naive loops: one loop); cells: median (min–max) over the rounds"),
              f"- measured f32 FMA peak: {peak:.1f} GFLOP/s ({s.get('threads', '?')} threads, "
              f"{data.get('fma_peak_vector_bits', '?')}-bit vectors; `ansor.targets.cpu.lowering.fma_peak_gflops`, the best of "
              f"{len(data.get('fma_peak_rounds') or [peak])} measurements: before tuning and after each round)"
              if peak else "- FMA peak: not measured"]
    for label, d in desc.items():
        lines.append(f"- {label}: {d}")
    lines += ["",
              "| program | library (kernel) | ms | GFLOP/s | % of FMA peak | ours (Python call) / it, GFLOP/s |",
              "|---|---|---:|---:|---:|---:|"]
    kernels = data.get("kernels", {})
    for label, ts in t.items():
        m = med(ts)
        gf = flops / m / 1e9 if m and math.isfinite(m) else math.nan
        share = f"{100 * gf / peak:.0f}%" if peak and math.isfinite(gf) else "-"
        vs = "-" if label == CALL else ratio_cell(ts, t.get(CALL))
        lines.append(f"| {label} | {kernels.get(label, '-')} | {rng(ts)} | {gf:.1f} | {share} | {vs} |")
    best = _strongest(t)
    if best is not None:
        strong, rs, strong_s = best
        gf = flops / strong_s / 1e9
        lines += ["", f"**headline: ours (Python call) / {strong} ({kernels.get(strong, '?')}, the stronger baseline "
                  f"here, {100 * gf / peak:.0f}% of FMA peak): {statistics.median(rs):.2f}x GFLOP/s "
                  f"({min(rs):.2f}–{max(rs):.2f})**" if peak else
                  f"**headline: ours / {strong}: {statistics.median(rs):.2f}x**"]
    for note in data.get("notes", []):
        lines.append(f"\n{note}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- network.py


def _strongest(t: dict) -> tuple[str, list[float], float] | None:
    """The fastest baseline (not ours, not the naive loops) of a times table: (its label, its
    per-round time / ours-as-a-Python-call ratios, its median seconds); None without one."""
    base = {k: med(v) for k, v in t.items() if not k.startswith("ours") and k != NAIVE and _finite(v)}
    if not base or CALL not in t:
        return None
    strong = min(base, key=base.get)
    return strong, ratios(t[strong], t[CALL]), base[strong]


def render_network(data: dict) -> str:
    s = data.get("settings", {})
    flops, t = data["flops"], data["times"]
    lines = [f"### {data.get('title', 'network')}", ""]
    lines += _provenance(data)
    lines += [(f"- {data.get('tasks', '?')} tasks; {s.get('trials', '?')} trials per strategy "
              f"({s.get('strategies', '?')}; records of {s.get('best_strategy', '?')}); "
              f"{s.get('rounds', '?')} alternating rounds, each round the median of {s.get('calls', 20)} "
              "Python-level calls per program after 0.1 s of warm-up calls (naive loops: one call); cells: median (min–max) over the rounds"),
              (f"- PyTorch: {_torch_line(data.get('torch_info') or {})}; each in its own process, the faster "
              "memory layout")]
    for label, note in (data.get("torch_notes") or {}).items():
        lines.append(f"- {label}: {note}")
    if data.get("check"):
        lines.append(f"- numerics: {data['check']}")
    lines += ["", "| program | ms | GFLOP/s | its time / ours (Python call) |", "|---|---:|---:|---:|"]
    for label, ts in t.items():
        m = med(ts)
        vs = "-" if label == CALL else ratio_cell(ts, t.get(CALL))
        lines.append(f"| {label} | {rng(ts)} | {flops / m / 1e9 if math.isfinite(m) else math.nan:.2f} | {vs} |")
    best = _strongest(t)
    if best is not None:
        strong, rs, _ = best
        lines += ["", (f"**headline: ours (Python call) runs {statistics.median(rs):.2f}x ({min(rs):.2f}–{max(rs):.2f}) "
                  f"as fast as {strong}, the strongest PyTorch baseline here** (its time / ours, median of the "
                  "per-round ratios)")]
    return "\n".join(lines)


def render_gpu_mutation(data: dict) -> str:
    """bench/gpu_mutation.py: two mutation policies of the GPU search, same seeds and budget."""
    lines = [f"### GPU mutation policy: {data['workload']}, {data['trials']} trials x seeds {data['seeds']}", "",
             *_provenance(data), "",
             "| policy | weights | tuner's best per seed (ms) | best program re-timed (median, range) |",
             "|---|---|---|---|"]
    final = data.get("final", {})
    for p, w in data["policies"].items():
        curves = data["curves_s"].get(p, {})
        per_seed = ", ".join(f"{c[-1] * 1e3:.3f}" for _, c in sorted(curves.items()) if c and c[-1])
        f = final.get(p, {})
        lines.append(f"| {p} | {', '.join(f'{k} {v}' for k, v in w.items())} | {per_seed} | {rng(f.get('rounds_s') or [], 1e6, 1, ' µs')} |")
    pols = list(data["policies"])
    if len(pols) == 2 and all(final.get(p, {}).get("rounds_s") for p in pols):
        a, b = (final[p]["rounds_s"] for p in pols)
        lines += ["", f"{pols[0]} / {pols[1]}: **{med(a) / med(b):.3f}x** latency (medians of the re-timed rounds)"]
    return "\n".join(lines)


RENDERERS = {"suite": render_suite, "matmul": render_matmul, "network": render_network,
             "gpu-mutation": render_gpu_mutation}


def render(data: dict) -> str:
    kind = data.get("kind")
    if kind not in RENDERERS:
        raise ValueError(f"unknown results kind {kind!r} (known: {', '.join(RENDERERS)})")
    return RENDERERS[kind](data)


def render_doc(files: list[Path]) -> str:
    parts = ["# Results", "",
             ("Generated by `python tools/render_results.py` from the tracked files in `results/` (one per table); "
             "do not edit by hand. Each file holds the command that produced it, the host, the commit, the date, "
             "the per-round timings of every candidate and baseline, and the best record of each task (the "
             "replayable transform script): `python tools/render_results.py --records results/FILE.json > best.jsonl` "
             "writes them as a log that `ansor.compile(..., log='best.jsonl')` rebuilds the tuned programs from. "
             "`results/README.md` lists the commands of the headline runs."), ""]
    for f in files:
        data = json.loads(f.read_text())
        if not isinstance(data, dict) or data.get("kind") not in RENDERERS:
            print(f"{f}: not a benchmark results file (no known 'kind'): left out of the doc", file=sys.stderr)
            continue
        parts += [f"## `results/{f.name}`", "", render(data), ""]
    return "\n".join(parts).rstrip() + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", type=Path, help="print these files' tables (default: rewrite the doc)")
    ap.add_argument("--records", type=Path, metavar="FILE", help="print FILE's best records as JSON lines")
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/results.md is out of date")
    ap.add_argument("--doc", type=Path, default=DOC)
    a = ap.parse_args()
    if a.records:
        data = json.loads(a.records.read_text())
        recs = data.get("records") or [r for w in data.get("workloads", []) for r in w.get("records", [])]
        for r in recs:
            print(json.dumps(r, sort_keys=True))
        return 0
    if a.files:
        for f in a.files:
            print(render(json.loads(f.read_text())))
            print()
        return 0
    files = sorted(RESULTS.glob("*.json"))
    text = render_doc(files)
    if a.check:
        if not a.doc.exists() or a.doc.read_text() != text:
            print(f"{a.doc} is out of date: run python tools/render_results.py", file=sys.stderr)
            return 1
        return 0
    a.doc.parent.mkdir(parents=True, exist_ok=True)
    a.doc.write_text(text)
    print(f"wrote {a.doc} ({len(files)} results files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

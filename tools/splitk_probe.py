"""Why do split-K clusters of 8 (and TF32 split-K 4) leave wrong outputs? (GPU host; --dry-run anywhere)

    python3 tools/splitk_probe.py --out DIR [--repeat 10] [--cases a,b] [--variants x,y] [--budget-s 85]
    python3 tools/splitk_probe.py --out DIR --dry-run        # build every case x variant to PTX only

Builds the tensor-core kernel (`tensorcore.kernel_text`) of a few split-K annotations -- the decode
GEMM 16x4096x4096 f16 with clusters of 8 (refused by `validate_tc`, bypassed here, in this process
only), a known-good clusters-of-4 control, and the TF32 matmul-4096 bm128 bn64 splitk 4 that failed
in a tuning run -- once per *variant* of the emitter (monkeypatches of `tensorcore._Kernel`, never
an edit of tensorcore.py), runs each build `--repeat` times into outputs poisoned with 12345.0
(NaN is the sentinel of `measure/verify.py`; a distinct finite value tells "never written" from
"read garbage") and reports, per run, the wrong elements: how many, how many still hold the poison,
how many are NaN/inf, which output tiles and which positions inside the tile (row, column of the
bm x bn tile; the staged tile's byte offset) they fall on, and which cluster rank's threads store them.

Variants (each a set of patches; `all` = every patch):
    baseline     the emitter as it is
    mbarinit     `nvvm.fence.mbarrier.init` (fence.mbarrier_init.release.cluster) and a cluster
                 arrive.relaxed/wait after the mbarrier init (CUTLASS's order for clusters > 1)
    proxyfence   `fence.proxy.async.shared::cta` before the accumulators are staged over the stages
                 TMA wrote (generic writes after async-proxy writes)
    ctabarrier   a block-wide `gpu.barrier` before the first cluster arrive
    fences       mbarinit + proxyfence + ctabarrier (every ordering idea, no layout change)
    dynshift     the dynamic shared buffer (stages, staged tile) starts at the next 1024-byte boundary
                 after the address of `gpu.dynamic_shared_memory` (dynamic smem size + 1024): the
                 mbarriers (`nvgpu.mbarrier.create`, a static `__mbarrier` global) no longer share
                 bytes with it. MLIR 22 + NVPTX emit the dynamic-smem global as a *1-byte static*
                 `.shared .align 16 .b8 __dynamic_shmem__0;`, ptxas puts it at 0x400 and `__mbarrier`
                 right behind it at 0x408 (ptxas -v: 40 bytes smem; SASS: mbarrier.init at 0x408,
                 stage 0 / the staged tile at 0x400), so stage 0's A box and row 0, columns 2..9 of
                 the staged f32 tile lie on the mbarriers.
    all          dynshift + fences

The dry run (no GPU) builds every case x variant to PTX, reports each build's counts of
`barrier.cluster`, `fence`, `mapa`, `ld.shared::cluster`, the shared declarations, and where ptxas
is found its static shared memory (`ptxas -v`), and writes the PTX next to the report.

Reading the report: a line per (case, variant, run) with `wrong`, `poison` (still 12345.0: never
stored), `nan`/`inf` (a sum that read garbage -- an initialised mbarrier's upper word, 0x7FFFF800
for an arrival count of 1, is a NaN as f32; f16 data read as f32 never is), `finite` (wrong but
finite), `first` (the first wrong element and its value), `tiles` (output tiles with a wrong
element), `whole` (8-column vectors wrong in every lane: never stored, or summed from a garbage
row), `tile-row0` (wrong elements in row 0 of their tile: the A box's row 0 and the staged tile's
row 0 hold the bytes over the mbarriers), `bar-bytes` (wrong elements whose staged-tile byte offset
lies on the mbarriers: [8, 8 + 8 x barriers)), `rank` (the cluster rank whose threads store them in
the reduction), the most frequent (row, col) inside the bm x bn tile and the in-tile rows hit.
Then a summary per case: runs with wrong outputs per variant. A variant with 0 wrong in every run
where baseline is wrong is the fix (or hides the race). The overlap predicts: wrong elements in
tile row 0 only (all columns of the tile where a stage's A row 0 was clobbered; columns 3, 5, 7, 9
NaN where the staged tile was), none with `dynshift` / `all`, no effect of the fences alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "python") not in sys.path:
    sys.path.insert(0, str(ROOT / "python"))

POISON = 12345.0

#: name -> (workload, tf32, knobs). The decode GEMM has 64 k-blocks (8 per block at splitk 8).
CASES: dict[str, tuple[str, bool, dict[str, int]]] = {
    # (in the order they run: past --budget-s the rest is skipped)
    "decode-64x64-sk8": ("matmul-16x4096x4096-f16", False, dict(bm=64, bn=64, stages=4, splitk=8)),
    "tf32-4096-128x64-sk4": ("matmul-4096", True, dict(bm=128, bn=64, wgm=2, ws=1, stages=3, wait=1, splitk=4)),
    "decode-64x64-sk4-control": ("matmul-16x4096x4096-f16", False, dict(bm=64, bn=64, stages=4, splitk=4)),
    "decode-64x128-sk8": ("matmul-16x4096x4096-f16", False, dict(bm=64, bn=128, stages=4, splitk=8)),
    "decode-64x256-sk8": ("matmul-16x4096x4096-f16", False, dict(bm=64, bn=256, stages=4, splitk=8)),
    "decode-64x128-ws-sk8": ("matmul-16x4096x4096-f16", False, dict(bm=64, bn=128, stages=4, wait=1, ws=1, splitk=8)),
}

PATCHES = ("mbarinit", "proxyfence", "ctabarrier", "dynshift")
VARIANTS: dict[str, tuple[str, ...]] = {
    "baseline": (),
    "mbarinit": ("mbarinit",),
    "proxyfence": ("proxyfence",),
    "ctabarrier": ("ctabarrier",),
    "fences": ("mbarinit", "proxyfence", "ctabarrier"),
    "dynshift": ("dynshift",),
    "all": PATCHES,
}

#: Bytes the dynamic buffer may move by (dynshift): one 1024-byte boundary (128-byte swizzle atoms
#: and the wgmma descriptors need the stages 1024-byte aligned).
SHIFT = 1024


# ----------------------------------------------------------------------------------------------
# The emitter's variants


def _setup() -> None:
    """In this process only: split-K 8 in the options, `validate_tc` bypassed for the kernel build."""
    from ansor.targets.cuda import lowering
    from ansor.targets.cuda import tensorcore as tc

    if 8 not in tc.OPTIONS["splitk"]:
        tc.OPTIONS["splitk"] = tuple(tc.OPTIONS["splitk"]) + (8,)
    lowering.validate_tc = lambda p, v: None


@contextlib.contextmanager
def variant(patches: tuple[str, ...]):
    """`tensorcore._Kernel` with `patches` applied (restored on exit)."""
    from ansor.targets.cuda import tensorcore as tc

    K = tc._Kernel
    names = ("barriers", "stage_tile", "cluster_reduce", "module")
    orig = {n: K.__dict__[n] for n in names}

    def barriers(self, I):
        orig["barriers"](self, I)
        if "dynshift" in patches:
            i = next(i for i, ln in enumerate(self.lines) if ln.strip().startswith("%dyn = memref.memory_space_cast"))
            size = max(self.depth * self.stage, tc.staged_tile_bytes(self.bm, self.bn) if self.staged else 0)
            self.lines[i:i + 1] = [
                f"{I}%dync = memref.memory_space_cast %dyn0 : memref<?xi8, #gpu.address_space<workgroup>> "
                "to memref<?xi8, 3>",
                f"{I}%dyna = memref.extract_aligned_pointer_as_index %dync : memref<?xi8, 3> -> index",
                f"{I}%dynm = arith.constant {SHIFT - 1} : index",
                f"{I}%dyn1 = arith.constant 1 : index",
                f"{I}%dyno = arith.ori %dyna, %dynm : index",
                f"{I}%dynb = arith.addi %dyno, %dyn1 : index",
                f"{I}%dynsh = arith.subi %dynb, %dyna : index",
                f"{I}%dynlen = arith.constant {size} : index",
                f"{I}%dyn = memref.view %dync[%dynsh][%dynlen] : memref<?xi8, 3> to memref<?xi8, 3>",
            ]
        if "mbarinit" in patches:
            assert self.lines[-1].strip() == "gpu.barrier", self.lines[-1]
            extra = [f"{I}nvvm.fence.mbarrier.init"]
            if self.splitk > 1:
                extra += [f"{I}nvvm.cluster.arrive.relaxed {{aligned}}", f"{I}nvvm.cluster.wait {{aligned}}"]
            self.lines[-1:] = extra + [f"{I}gpu.barrier"]

    def stage_tile(self, I, consumers):
        n = len(self.lines)
        orig["stage_tile"](self, I, consumers)
        if "proxyfence" in patches:
            self.lines.insert(n, f"{I}nvvm.fence.proxy {{kind = #nvvm.proxy_kind<async.shared>, "
                                 "space = #nvvm.shared_space<cta>}")

    def cluster_reduce(self, I):
        n = len(self.lines)
        orig["cluster_reduce"](self, I)
        if "ctabarrier" in patches:
            self.lines.insert(n, f"{I}gpu.barrier")

    def module(self, func_name, I):
        text = orig["module"](self, func_name, I)
        if "dynshift" in patches:
            text = re.sub(r"%smem = arith.constant (\d+) : i32",
                          lambda m: f"%smem = arith.constant {int(m.group(1)) + SHIFT} : i32", text, count=1)
        return text

    for n, f in (("barriers", barriers), ("stage_tile", stage_tile), ("cluster_reduce", cluster_reduce),
                 ("module", module)):
        setattr(K, n, f)
    try:
        yield
    finally:
        for n, f in orig.items():
            setattr(K, n, f)


def _task(case: str):
    import ansor
    from ansor.frontend import workloads

    name, tf32, _ = CASES[case]
    return ansor.create_task(workloads.get(name), name=name, target="cuda", tf32=tf32)


def _script(task, knobs: dict[str, int]) -> str:
    from ansor.targets import generate_sketches
    from ansor.targets.cuda.tensorcore import DEFAULT, TcSketch

    sk = next(s for s in generate_sketches(task) if isinstance(s, TcSketch))
    return sk.script({f"tc.{k}": v for k, v in {**DEFAULT, **knobs}.items()})


# ----------------------------------------------------------------------------------------------
# Builds (worker processes)


def _build_one(case: str, vname: str, arch: str, ptx_only: bool) -> tuple[str, str, bytes | str | None, str, float]:
    """(case, variant, artifact bytes or PTX text or None, error, seconds)."""
    t0 = time.time()
    try:
        _setup()
        from ansor.targets.cuda import lowering

        task = _task(case)
        script = _script(task, CASES[case][2])
        with variant(VARIANTS[vname]):
            if ptx_only:
                out = lowering.emit_ptx(task, script, arch=arch)
            else:
                out = lowering.build_task_cuda(task, script, arch=arch)
        return case, vname, out, "", time.time() - t0
    except Exception as exc:  # noqa: BLE001 -- one failed build must not stop the others
        msg = f"{type(exc).__name__}: {str(exc)[:1500]}"
        return case, vname, None, msg, time.time() - t0


def build_all(pairs: list[tuple[str, str]], arch: str, ptx_only: bool, jobs: int) -> dict:
    import multiprocessing

    res = {}
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, min(jobs, len(pairs))), mp_context=ctx) as ex:
        futs = [ex.submit(_build_one, c, v, arch, ptx_only) for c, v in pairs]
        for f in futs:
            try:
                c, v, out, err, dt = f.result()
            except Exception as exc:  # noqa: BLE001 -- a worker that died
                c, v = pairs[futs.index(f)]
                out, err, dt = None, f"worker died: {exc}", 0.0
            res[(c, v)] = (out, err, dt)
    return res


# ----------------------------------------------------------------------------------------------
# The report


class Report:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, line: str = "") -> None:
        with self.lock:
            print(line, flush=True)
            self.lines.append(line)
            self.path.write_text("\n".join(self.lines) + "\n")


def ptx_key_lines(ptx: str) -> str:
    keys = ("barrier.cluster", "fence", "mapa", "ld.shared::cluster", "mbarrier.init", "bar.sync",
            "cp.async.bulk.tensor", "wgmma.mma_async")
    counts = " ".join(f"{k}={ptx.count(k)}" for k in keys)
    decl = "; ".join(sorted({ln.strip() for ln in ptx.splitlines() if re.match(r"\s*(\.extern\s+)?\.shared\s", ln)}))
    return f"{counts}\n      shared decls: {decl}"


def ptxas_smem(ptx: str, arch: str, tmp: Path) -> str:
    ptxas = shutil.which("ptxas")
    if not ptxas:
        return "(no ptxas)"
    src = tmp / "probe.ptx"
    src.write_text(ptx)
    try:
        r = subprocess.run([ptxas, f"-arch={arch if arch.endswith('a') else arch + 'a'}", "-v", str(src), "-o",
                            str(tmp / "probe.cubin")], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(ptxas failed: {exc})"
    m = re.findall(r"Used \d+ registers.*", r.stdout + r.stderr)
    return m[0] if m else (r.stdout + r.stderr).strip().splitlines()[-1:] and (r.stdout + r.stderr).strip()[-200:]


def tolerance(task, ref):
    """Per-element tolerance of `ref` (finite): `verify.check_task_outputs`'s criterion (atol from
    the reduction length and the reference's RMS, rtol by dtype; TF32's rtol on a TF32 task)."""
    import math

    import numpy as np

    from ansor.measure import verify

    rt = verify.default_rtol(ref.dtype)
    if task.tf32:
        rt = max(verify.TF32_RTOL, rt)
    r = ref.astype(np.float64)
    at = rt * math.sqrt(max(verify.reduction_length(task), 1)) * float(np.sqrt(np.mean(r * r)))
    return (at + rt * np.abs(r)).astype(np.float32)


def _top(keys, n: int = 8) -> list:
    """The `n` most frequent rows of the int array `keys` (1-D or 2-D), with their counts."""
    import numpy as np

    u, cnt = np.unique(keys, axis=0, return_counts=True)
    order = np.argsort(-cnt, kind="stable")[:n]
    return [(u[i].tolist() if u.ndim > 1 else int(u[i]), int(cnt[i])) for i in order]


def analyse(out, ref, tol, task, knobs: dict[str, int]) -> dict:
    """The wrong elements of one run (2-D output; `ref` finite, `tol` from `tolerance`)."""
    import numpy as np

    with np.errstate(invalid="ignore"):
        wrong = ~(np.abs(out.astype(np.float32) - ref) <= tol)  # NaN/inf: wrong
    n = int(np.count_nonzero(wrong))
    d = {"wrong": n}
    if not n:
        return d
    rows, cols = np.nonzero(wrong)
    o = out[rows, cols].astype(np.float64)
    d["poison"] = int((o == POISON).sum())
    d["nan"] = int(np.isnan(o).sum())
    d["inf"] = int(np.isinf(o).sum())
    d["finite_wrong"] = n - d["poison"] - d["nan"] - d["inf"]
    bm, bn = knobs["bm"], knobs["bn"]
    wgm, ws, sk = knobs.get("wgm", 1), knobs.get("ws", 0), knobs["splitk"]
    ri, ci = rows % bm, cols % bn
    d["first"] = [int(rows[0]), int(cols[0])]
    d["first_value"] = float(o[0])
    tiles = np.unique(np.stack([rows // bm, cols // bn], 1), axis=0)
    d["tiles"] = int(len(tiles))
    d["tile_list"] = [tuple(t) for t in tiles[:12].tolist()]
    d["in_tile_top"] = _top(np.stack([ri, ci], 1))
    d["in_tile_rows"] = np.unique(ri)[:16].tolist()
    d["tile_row0"] = int((ri == 0).sum())  # row 0 of the A box / staged tile lies on the mbarriers
    d["in_tile_cols_mod64"] = _top(ci % 64, 10)
    # the staged tile's byte offset of each wrong element (rows padded by 8 f32) and the mbarriers'
    # bytes behind the dynamic buffer's base ([8, 8 + 8 x barriers): `__mbarrier` at 0x408)
    nbar = knobs.get("stages", 3) * (1 + ws + (1 if task.tf32 else 0))
    off = (ri * (bn + 8) + ci) * 4
    d["bar_bytes"] = int(((off >= 8) & (off < 8 + 8 * nbar)).sum())
    d["first_1k_bytes"] = int((off < 1024).sum())
    # the reduction's vectors: e = row * (bn / 8) + col / 8, stored by thread e of the cluster's
    # threads one after another (rank = (e // threads) % cluster)
    threads = 128 * (wgm + ws)
    e = ri * (bn // 8) + ci // 8
    d["rank"] = [tuple(x) for x in _top((e // threads) % sk, sk)]
    # whole vectors (never stored, or a whole vector read wrong) or single lanes?
    _, per_vec = np.unique(rows.astype(np.int64) * (1 << 20) + cols // 8, return_counts=True)
    d["vectors"] = int(len(per_vec))
    d["whole_vectors"] = int((per_vec == 8).sum())
    return d


def fmt_run(d: dict) -> str:
    if not d["wrong"]:
        return "wrong=0"
    return (f"wrong={d['wrong']} poison={d['poison']} nan={d['nan']} inf={d['inf']} finite={d['finite_wrong']} "
            f"first={tuple(d['first'])}={d['first_value']:.6g} tiles={d['tiles']} vectors={d['vectors']} "
            f"(whole {d['whole_vectors']}) tile-row0={d['tile_row0']} bar-bytes={d['bar_bytes']} first-1KiB={d['first_1k_bytes']} "
            f"rank={d['rank']}\n          in-tile top (row, col): {d['in_tile_top']}  rows: {d['in_tile_rows']}"
            f"\n          cols%64 top: {d['in_tile_cols_mod64']}  tiles: {d['tile_list']}")


# ----------------------------------------------------------------------------------------------
# The GPU part: one child process per case (a hang or a fault costs only that case)


def child(case: str, art_dir: Path, variants: list[str], repeat: int, result: Path) -> None:
    import numpy as np

    _setup()
    from ansor.measure.measurer import reference_outputs
    from ansor.targets.cuda.lowering import load_task_cuda

    task = _task(case)
    knobs = CASES[case][2]
    inputs, refs, _ = reference_outputs(task)
    ref = np.asarray(refs[0]).astype(np.float32)
    tol = tolerance(task, ref)
    results = {}
    for v in variants:
        f = art_dir / f"{case}--{v}.mlirbc"
        if not f.exists():
            continue
        entry = {"runs": []}
        results[v] = entry
        try:
            kernel = load_task_cuda(task, f.read_bytes())
        except Exception as exc:  # noqa: BLE001
            entry["error"] = f"load: {type(exc).__name__}: {str(exc)[:400]}"
            result.write_text(json.dumps(results))
            continue
        for _ in range(repeat):
            try:
                outs = [np.full(s.shape, POISON, dtype=s.numpy_dtype()) for s in task.outputs]
                t0 = time.time()
                out = kernel.run(inputs, outs)[0]
                d = analyse(np.asarray(out), ref, tol, task, knobs)
                d["s"] = round(time.time() - t0, 3)
            except Exception as exc:  # noqa: BLE001 -- a fault poisons the context: stop this case
                entry["error"] = f"run: {type(exc).__name__}: {str(exc)[:400]}"
                result.write_text(json.dumps(results))
                return
            entry["runs"].append(d)
            result.write_text(json.dumps(results))


# ----------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--dry-run", action="store_true", help="build every case x variant to PTX, no GPU")
    ap.add_argument("--budget-s", type=float, default=85.0, help="stop starting cases past this many seconds")
    ap.add_argument("--case-timeout-s", type=float, default=30.0, help="a case's child process (a hung kernel)")
    ap.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 4))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--art", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    a = ap.parse_args()
    cases = [c for c in a.cases.split(",") if c]
    variants = [v for v in a.variants.split(",") if v]
    if a.child:
        child(a.child, Path(a.art), variants, a.repeat, Path(a.result))
        return

    t_start = time.time()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rep = Report(out / "splitk_probe.txt")
    for c in cases:
        if c not in CASES:
            sys.exit(f"unknown case {c}; cases: {', '.join(CASES)}")
    for v in variants:
        if v not in VARIANTS:
            sys.exit(f"unknown variant {v}; variants: {', '.join(VARIANTS)}")

    from ansor.targets.cuda.runtime import DEFAULT_ARCH, device_arch

    arch = DEFAULT_ARCH if a.dry_run else device_arch()
    rep(f"splitk_probe: {'dry run (PTX only)' if a.dry_run else 'GPU run'}, arch {arch}, repeat {a.repeat}, "
        f"poison {POISON}")
    for c in cases:
        rep(f"  case {c}: {CASES[c][0]}{' (tf32)' if CASES[c][1] else ''} {CASES[c][2]}")
    rep(f"  variants: {', '.join(f'{v}={list(VARIANTS[v])}' for v in variants)}")

    pairs = [(c, v) for c in cases for v in variants]
    builds = build_all(pairs, arch, a.dry_run, a.jobs)
    rep(f"built {sum(1 for x in builds.values() if x[0] is not None)} of {len(pairs)} in "
        f"{time.time() - t_start:.1f} s")
    for (c, v), (art, err, dt) in builds.items():
        if art is None:
            rep(f"  BUILD FAILED {c} / {v} ({dt:.1f} s): {err}")

    if a.dry_run:
        tmp = out / "ptx"
        tmp.mkdir(exist_ok=True)
        for (c, v), (ptx, err, dt) in builds.items():
            if ptx is None:
                continue
            (tmp / f"{c}--{v}.ptx").write_text(ptx)
            rep(f"  {c} / {v} ({dt:.1f} s): {ptx_key_lines(ptx)}")
            rep(f"      ptxas: {ptxas_smem(ptx, arch, tmp)}")
        rep(f"done in {time.time() - t_start:.1f} s")
        return

    art = out / "artifacts"
    art.mkdir(exist_ok=True)
    for (c, v), (blob, _, _) in builds.items():
        if blob is not None:
            (art / f"{c}--{v}.mlirbc").write_bytes(blob)

    summary: dict[str, dict[str, str]] = {}
    for c in cases:
        left = a.budget_s - (time.time() - t_start)
        if left < 8:
            rep(f"case {c}: skipped, budget spent ({time.time() - t_start:.0f} s)")
            continue
        res = out / f"result-{c}.json"
        res.unlink(missing_ok=True)
        cmd = [sys.executable, str(Path(__file__).resolve()), "--out", str(out), "--child", c, "--art", str(art),
               "--result", str(res), "--repeat", str(a.repeat), "--variants", ",".join(variants)]
        t0 = time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=min(left, a.case_timeout_s),
                               env={**os.environ})
            tail = (p.stdout + p.stderr).strip().splitlines()[-6:]
            status = f"rc {p.returncode}"
        except subprocess.TimeoutExpired as exc:
            tail = ((exc.stdout or b"").decode(errors="replace") + (exc.stderr or b"").decode(errors="replace")
                    ).strip().splitlines()[-6:]
            status = f"TIMED OUT after {min(left, a.case_timeout_s):.0f} s (a hung kernel, or the budget)"
        rep(f"case {c} ({CASES[c][0]} {CASES[c][2]}): {status}, {time.time() - t0:.1f} s")
        if status != "rc 0":
            for ln in tail:
                rep(f"    | {ln}")
        results = json.loads(res.read_text()) if res.exists() else {}
        summary[c] = {}
        for v in variants:
            if (c, v) in builds and builds[(c, v)][0] is None:
                summary[c][v] = "build failed"
                continue
            e = results.get(v)
            if e is None:
                summary[c][v] = "not run"
                rep(f"  {v}: not run")
                continue
            runs = e["runs"]
            for i, d in enumerate(runs):
                rep(f"  {v} run {i}: {fmt_run(d)}")
            if "error" in e:
                rep(f"  {v}: ERROR {e['error']}")
            nw = [d["wrong"] for d in runs]
            summary[c][v] = (f"{sum(1 for x in nw if x)}/{len(nw)} runs wrong"
                             + (f" (wrong {min(nw)}..{max(nw)}, poison {sum(d.get('poison', 0) for d in runs)}, "
                                f"nonfinite {sum(d.get('nan', 0) + d.get('inf', 0) for d in runs)}, "
                                f"tile-row0 {sum(d.get('tile_row0', 0) for d in runs)}, "
                                f"bar-bytes {sum(d.get('bar_bytes', 0) for d in runs)}, "
                                f"total {sum(nw)})" if any(nw) else "")
                             + (" ERROR" if "error" in e else ""))
    rep("")
    rep("SUMMARY (runs with wrong outputs / runs)")
    for c, row in summary.items():
        rep(f"  {c}:")
        for v, s in row.items():
            rep(f"    {v:11s} {s}")
    rep(f"done in {time.time() - t_start:.1f} s")


if __name__ == "__main__":
    try:
        main()
    except Exception:  # noqa: BLE001 -- say what broke, the report so far is on disk
        traceback.print_exc()
        sys.exit(1)

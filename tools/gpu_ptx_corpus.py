"""Equivalence corpus for the GPU rewrites ported to C++ (helpers gpu-a and gpu-b).

    (task, schedule) pairs --run the CUDA lowering with each ported Python rewrite hooked-->
        <out>/<case>.<rewrite>.in.mlir   (the module right before the rewrite)
        <out>/<case>.<rewrite>.py.mlir   (the module right after the Python rewrite)
        <out>/<case>.ptx                 (the PTX of the whole pipeline)
    --compare mode: ansor-opt --<pass> on every .in.mlir, then canonicalize,cse on both sides-->
        identical / different per (case, rewrite); and PTX of two corpus dirs compared per case.

Usage:
    python tools/gpu_ptx_corpus.py dump OUT [--samples N] [--cpp] [--more]
        (--cpp: the C++ passes, run in-process through the PassManager, replace the Python
        rewrites, so OUT/*.ptx is the PTX the wired-in pipeline gives)
    python tools/gpu_ptx_corpus.py compare OUT ANSOR_OPT [--raw]
    python tools/gpu_ptx_corpus.py ptxdiff DIR_A DIR_B
"""

from __future__ import annotations

import argparse
import difflib
import random
import subprocess
import sys
from pathlib import Path

#: Python rewrite name -> (C++ pass pipeline element, which argument the Python call gets).
REWRITES: dict[str, str] = {
    "workgroup_allocs_to_attributions": "ansor-gpu-workgroup-attributions",
    "sink_constants_into_launches": "ansor-gpu-sink-constants",
    "mark_kernel_pointers_noalias": "ansor-gpu-mark-noalias",  # dumped with ANSOR_CUDA_NOALIAS=1
}

TASKS = [
    "matmul-64", "matmul-128", "matmul-512", "matmul-37x29x53", "matmul_nt-64x48x40",
    "c2d-1x14x14x8x16x3x1x1", "c2d-1x7x7x16x8x3x2x1", "convlayer-1x14x14x8x16x3x2x1",
    "lngelu-8x256", "softmax-8x128", "tbs-1x32x2x16",
]
#: More shapes (`--more`): bigger matmuls, batch matmul, 1-D, depthwise, grouped, dilated convs.
MORE_TASKS = [
    "matmul-256", "matmul-1024", "gmm-2x64x64x32", "c1d-1x32x8x16x3x1x1", "dep-1x14x14x16x3x1x1",
    "grp-1x14x14x16x16x3x1x1", "dil-1x14x14x8x16x3x1x2", "softmax-12x197", "lngelu-16x768",
]


def _gpu_modules():
    """(lowering module with `_lower_module`, module holding the rewrites) before/after the move."""
    try:
        from ansor.targets.cuda import lowering, rewrites  # type: ignore
        return lowering, rewrites
    except ImportError:
        from ansor import gpu_lowering
        return gpu_lowering, gpu_lowering


def _cases(samples: int, tasks: list[str]):
    try:
        from ansor.core.task import create_task
        from ansor.frontend import workloads
        from ansor.space.schedule import sample
        from ansor.targets import generate_sketches
        from ansor.targets.cuda.rules import default_script
    except ImportError:  # before the `layout:` move
        from ansor import workloads  # type: ignore[no-redef]
        from ansor.annotation import sample  # type: ignore[no-redef]
        from ansor.gpu_rules import default_script  # type: ignore[no-redef]
        from ansor.rules import generate_sketches  # type: ignore[no-redef]
        from ansor.task import create_task  # type: ignore[no-redef]

    for name in tasks:
        task = create_task(workloads.get(name), name=name.replace("-", "_"), target="cuda")
        try:
            yield f"{name}.default", task, default_script(task)
        except Exception as exc:  # noqa: BLE001 - a task without a default schedule
            print(f"# {name}: no default script: {exc}", file=sys.stderr)
        sk = generate_sketches(task)[0]
        if sk.name == "skip":  # no GPU sketch applies (e.g. a prime row length): nothing to sample
            continue
        rng = random.Random(0)
        for k in range(samples):
            try:
                yield f"{name}.s{k}", task, sk.script(sample(sk, rng).values())
            except Exception as exc:  # noqa: BLE001
                print(f"# {name}.s{k}: {exc}", file=sys.stderr)


def _cpp(fn: str):
    """A stand-in for Python rewrite `fn` running its C++ port in-process."""
    from mlir import passmanager

    def run(module, *args, **kw):
        ps = REWRITES[fn]
        if fn == "swizzle_blocks":
            ps += "{group=" + str(args[0] if args else kw.get("group", 8)) + "}"
        passmanager.PassManager.parse(f"builtin.module({ps})").run(module.operation)
        return 0

    return run


def dump(out: Path, samples: int, cpp: bool = False, more: bool = False) -> None:
    from mlir import ir

    lowering, rewrites = _gpu_modules()
    out.mkdir(parents=True, exist_ok=True)
    current = {"case": ""}
    originals = {}
    for fn in REWRITES:
        if not cpp and not hasattr(rewrites, fn):
            continue  # ported and wired in: the pipeline runs the C++ pass itself
        original = _cpp(fn) if cpp else getattr(rewrites, fn)
        originals[fn] = original

        def hooked(module, *args, _fn=fn, _orig=original, **kw):
            base = out / f"{current['case']}.{_fn}"
            Path(f"{base}.in.mlir").write_text(str(module))
            if _fn == "swizzle_blocks":
                Path(f"{base}.arg").write_text(str(args[0] if args else kw.get("group", 8)))
            n = _orig(module, *args, **kw)
            Path(f"{base}.py.mlir").write_text(str(module))
            return n

        for mod in {id(lowering): lowering, id(rewrites): rewrites}.values():
            if hasattr(mod, fn):
                setattr(mod, fn, hooked)
    for case, task, script in _cases(samples, MORE_TASKS if more else TASKS):
        current["case"] = case
        try:
            ptx = lowering.emit_ptx(task, script, arch="sm_90")
            (out / f"{case}.ptx").write_text(ptx)
            print(f"{case}: ok")
        except Exception as exc:  # noqa: BLE001 - a failed lowering is a result
            (out / f"{case}.err").write_text(str(exc))
            print(f"{case}: lowering failed: {str(exc)[:200]}")
    del ir


def _opt(ansor_opt: str, path: Path, passes: str) -> str:
    r = subprocess.run([ansor_opt, str(path), f"--pass-pipeline=builtin.module({passes})"],
                       check=False, capture_output=True, text=True)
    if r.returncode:
        return "ERROR: " + r.stderr
    return r.stdout


def compare(out: Path, ansor_opt: str, raw: bool = False) -> int:
    """C++ pass vs Python rewrite per dumped module, both normalised by canonicalize,cse (with
    `raw`, only re-printed: op order and dead ops must match too)."""
    norm = "" if raw else ",canonicalize,cse"
    same = diff = 0
    for inp in sorted(out.glob("*.in.mlir")):
        stem = inp.name[: -len(".in.mlir")]
        fn = stem.rsplit(".", 1)[1]
        ps = REWRITES[fn]
        if fn == "swizzle_blocks":
            ps += "{group=" + (out / f"{stem}.arg").read_text() + "}"
        cpp = _opt(ansor_opt, inp, ps + norm)
        py = _opt(ansor_opt, out / f"{stem}.py.mlir", norm[1:])
        changed = _opt(ansor_opt, inp, norm[1:]) != py
        if cpp == py and not cpp.startswith("ERROR"):
            same += 1
            print(f"same {stem}{' (rewrote)' if changed else ' (no-op)'}")
        else:
            diff += 1
            print(f"DIFF {stem}")
            sys.stdout.writelines(list(difflib.unified_diff(py.splitlines(True), cpp.splitlines(True),
                                                            "python", "c++", n=2))[:60])
    print(f"# {same} identical, {diff} different")
    return diff


def ptxdiff(a: Path, b: Path) -> int:
    same = diff = 0
    for pa in sorted(a.glob("*.ptx")):
        pb = b / pa.name
        if not pb.exists():
            print(f"MISSING {pa.name}")
            diff += 1
        elif pa.read_text() == pb.read_text():
            same += 1
        else:
            diff += 1
            print(f"DIFF {pa.name}")
    print(f"# {same} identical PTX, {diff} different")
    return diff


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("out", type=Path)
    d.add_argument("--samples", type=int, default=3)
    d.add_argument("--cpp", action="store_true")
    d.add_argument("--more", action="store_true", help="the MORE_TASKS corpus instead of TASKS")
    c = sub.add_parser("compare")
    c.add_argument("out", type=Path)
    c.add_argument("ansor_opt")
    c.add_argument("--raw", action="store_true")
    x = sub.add_parser("ptxdiff")
    x.add_argument("a", type=Path)
    x.add_argument("b", type=Path)
    args = p.parse_args()
    if args.cmd == "dump":
        dump(args.out, args.samples, args.cpp, args.more)
    elif args.cmd == "compare":
        sys.exit(1 if compare(args.out, args.ansor_opt, args.raw) else 0)
    else:
        sys.exit(1 if ptxdiff(args.a, args.b) else 0)


if __name__ == "__main__":
    main()

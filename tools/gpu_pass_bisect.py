"""Which of our GPU lowering passes makes a logged candidate compute wrong answers? (GPU host)

    python3 tools/gpu_pass_bisect.py LOG.cuda.jsonl[.xz] [--errors wrong_answer] [--ok 2] [--repeat 3] [--json OUT]
                                     [--variants all|none|PASS,...] [--isolate]

Takes the log's candidates whose record has one of `--errors` (and `--ok` correct ones per task, as
a control), builds each once per variant of `lowering._lower_module` -- as it is, and with one of
our passes left out (`SKIPPABLE`) -- in spawned worker processes, runs every build `--repeat`
times into NaN-poisoned outputs and counts the elements that differ from the task's untuned CPU
program. A pass whose absence makes a wrong candidate right is the suspect (or one that hides a
race: the counts of several repeats tell a deterministic bug from a racy one).
`--variants none` only replays the candidates with today's lowering (did a fix fix them?);
`--isolate` runs each candidate in a child process, so one that kills its process (the `crash`
records) is reported as such and the others still run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor

#: Our passes a candidate stays well-formed without (each is an optimisation, not a lowering step),
#: and `infer-access-alignment` (`lowering.infer_access_alignment`: the alignment we promise LLVM).
SKIPPABLE = ("ansor-gpu-hoist-accumulators", "ansor-gpu-forward-initial-values",
             "ansor-gpu-remove-redundant-barriers", "ansor-gpu-reuse-readonly-loads",
             "ansor-gpu-prefetch-global-reads", "ansor-auto-unroll",
             "ansor-gpu-sink-constants", "ansor-gpu-swizzle-blocks", "ansor-gpu-pipeline-shared-copies",
             "loop-invariant-code-motion", "infer-access-alignment")


def split_pipeline(pipeline: str) -> list[str]:
    """The top-level passes of a comma-separated pipeline (commas inside `{...}` or `(...)` kept)."""
    parts, depth, cur = [], 0, ""
    for ch in pipeline:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch in "{(" and 1 or (ch in "})" and -1 or 0)
        cur += ch
    return [*parts, cur] if cur else parts


def without(pipeline: str, skip: str) -> str:
    """`pipeline` with every top-level pass named `skip` removed ("" when nothing is left)."""
    return ",".join(p for p in split_pipeline(pipeline) if p.split("{", 1)[0].strip() != skip)


def _build(task_json: dict, script: str, skip: str, arch: str) -> tuple[bytes | None, str]:
    from ansor.core.task import SearchTask
    from ansor.targets.cuda import lowering

    real = lowering.run_passes

    def run_passes(module, pipeline: str, stage: str) -> None:
        kept = without(pipeline, skip) if skip else pipeline
        if kept:
            real(module, kept, stage)

    lowering.run_passes = run_passes
    if skip == "infer-access-alignment":
        lowering.infer_access_alignment = lambda module: None
    try:
        return lowering.build_task_cuda(SearchTask.from_json(task_json), script, arch=arch), ""
    except Exception as exc:  # noqa: BLE001 -- reported per build
        return None, str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log")
    ap.add_argument("--errors", default="wrong_answer")
    ap.add_argument("--ok", type=int, default=1, help="correct candidates per task as a control")
    ap.add_argument("--limit", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--variants", default="all", help="all, none (today's lowering only) or passes to leave out")
    ap.add_argument("--isolate", action="store_true", help="one child process per candidate")
    ap.add_argument("--jobs", type=int, default=1, help="with --isolate: children at a time")
    ap.add_argument("--index", type=int, help=argparse.SUPPRESS)  # the child of --isolate
    args = ap.parse_args()

    import numpy as np

    from ansor.core.task import SearchTask
    from ansor.measure import verify
    from ansor.targets import get_target
    from ansor.targets.cuda.lowering import load_task_cuda
    from ansor.targets.cuda.runtime import device_arch
    from ansor.tuning.records import open_log

    with open_log(args.log) as f:  # plain, or .jsonl.xz / .jsonl.gz
        recs = [json.loads(line) for line in f if line.strip()]
    errors = set(args.errors.split(","))
    bad = [r for r in recs if r["result"].get("error") in errors and r.get("script")][: args.limit]
    names = {r["task"]["name"] for r in bad}
    control = []
    for n in sorted(names):
        control += [r for r in recs if r["task"]["name"] == n and not r["result"].get("error") and r.get("script")][: args.ok]
    cands = [(r, r["result"].get("error") or "ok") for r in bad + control]
    variants = ("",) + {"all": SKIPPABLE, "none": ()}.get(args.variants, tuple(args.variants.split(",")))
    if args.isolate:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max(1, args.jobs)) as threads:
            table = list(threads.map(lambda c: _isolated(c[0], *c[1]), enumerate(cands)))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"log": args.log, "variants": list(variants), "rows": table}, f, indent=1)
        return
    if args.index is not None:
        cands = [cands[args.index]]
    arch = device_arch()
    jobs = {}
    with ProcessPoolExecutor(max(1, min(16, len(cands) * len(variants))),
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        for i, (r, _) in enumerate(cands):
            for v in variants:
                jobs[(i, v)] = pool.submit(_build, r["task"], r["script"], v, arch)
        built = {k: f.result() for k, f in jobs.items()}
    refs: dict[str, np.ndarray] = {}
    table = []
    for i, (r, was) in enumerate(cands):
        task = SearchTask.from_json(r["task"])
        rng = np.random.default_rng(0)
        inputs = [rng.standard_normal(s.shape).astype(s.numpy_dtype()) for s in task.inputs]
        if task.hash not in refs:
            refs[task.hash] = get_target("cpu").compile(dataclasses.replace(task, target="cpu"), None).run(inputs)[0]
        ref = refs[task.hash]
        # the measurer's criterion (`verify.check_task_outputs`): rtol by dtype (TF32's on a TF32
        # task), atol from the reduction length; a fixed f32 tolerance counted f16 rounding as wrong
        rtol = max(verify.TF32_RTOL, verify.default_rtol(ref.dtype)) if task.tf32 else None
        k = verify.reduction_length(task)
        row = {"task": task.name, "logged": was, "knobs": r["schedule"]["knobs"], "wrong": {}}
        for v in variants:
            artifact, err = built[(i, v)]
            if artifact is None:
                row["wrong"][v or "all passes"] = f"build: {err}"
                continue
            kernel = load_task_cuda(task, artifact)
            counts = []
            for _ in range(args.repeat):
                (out,) = kernel.run(inputs, [np.full(task.outputs[0].shape, np.nan, task.outputs[0].numpy_dtype())])
                counts.append(verify.wrong_elements(out, ref, rtol=rtol, reduction=k))
            row["wrong"][v or "all passes"] = counts
        table.append(row)
        if args.index is not None:
            print("ROW " + json.dumps(row), flush=True)
        print(f"{task.name:<22} {was:<13} " + "  ".join(f"{k.replace('ansor-gpu-', '').replace('ansor-', '')}={v}"
                                                         for k, v in row["wrong"].items()), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"log": args.log, "variants": list(variants), "rows": table}, f, indent=1)


def _isolated(i: int, r: dict, was: str) -> dict:
    """Candidate `i` of this command line, bisected in a child process (its row, or how it died)."""
    import subprocess

    argv = [a for a in sys.argv[1:] if a != "--isolate"]
    for opt in ("--json", "--jobs"):
        if opt in argv:
            k = argv.index(opt)
            del argv[k:k + 2]
    proc = subprocess.run([sys.executable, __file__, *argv, "--index", str(i)], capture_output=True, text=True)
    rows = [json.loads(line[4:]) for line in proc.stdout.splitlines() if line.startswith("ROW ")]
    if rows:
        print(proc.stdout.splitlines()[-1], flush=True)
        return rows[0]
    why = f"child died (exit {proc.returncode}): " + (proc.stderr.strip().splitlines() or [""])[-1][:200]
    print(f"{r['task']['name']:<22} {was:<13} {why}", flush=True)
    return {"task": r["task"]["name"], "logged": was, "knobs": r["schedule"]["knobs"], "died": why}


if __name__ == "__main__":
    sys.exit(main())

"""Acceptance run of built-in networks, as a new user would try them: import, partition, compile
untuned for the CPU and check against PyTorch, and build every task for CUDA (default program and
a few sampled schedules), each step isolated in its own process and its failure kept as one line.

    network --ansor import (torch-mlir, own process)--> NAME.mlir
    NAME.mlir --extract_tasks(cpu)--> tasks --ansor.compile (untuned)--> outputs vs PyTorch's
    NAME.mlir --extract_tasks(cuda)--> tasks --build_task_cuda(default_script | sampled sketch)-->
        PTX, one process per case (an MLIR abort costs one case): ok / refused / crash / timeout
    --> a table per network, and --json FILE with every case

Usage (from the repository root):
    python -m bench.network_acceptance squeezenet1.1 efficientnet-b0 ... [--samples 2]
        [--stages import,cpu,cuda] [--jobs 2] [--timeout 120] [--json results/networks-acceptance/acceptance.json]

Tuning is `python -m bench.network NAME --trials N ...` (the same timing rounds as the README's
network results); results/networks-acceptance/README.md lists both commands.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from bench.common import OUT, ROOT, host_line, host_meta

#: Where the imported models, task lists and reference outputs go.
WORK = OUT / "acceptance"
#: Our exception types: a refusal by one of them, in one line, is clean.
OURS = {"LoweringError", "TaskError", "SamplingError", "UnknownTargetError", "CompileError", "VerificationError"}


def _one_line(exc: BaseException) -> dict:
    import traceback

    tb = traceback.extract_tb(exc.__traceback__)
    msg = str(exc)
    return {"status": "error", "type": type(exc).__name__, "message": msg, "lines": len(msg.strip().splitlines()),
            "where": f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""}


def _inputs(name: str) -> list:
    import numpy as np

    from ansor.frontend.models import NETWORKS

    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(np.float32) for s in NETWORKS[name][1]]


# ----------------------------------------------------------------------------------------------
# Worker side: one step in a process of its own, printing `RESULT <json>`


def _cpu(name: str) -> dict:
    """Partition for the CPU, compile untuned, run on the seeded inputs (outputs saved as .npy)."""
    import numpy as np

    import ansor
    from ansor.frontend.partition import extract_tasks

    mlir = WORK / f"{name}.mlir"
    t0 = time.perf_counter()
    net = extract_tasks(mlir, name=name)
    part_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    fn = ansor.compile(mlir)
    comp_s = time.perf_counter() - t0
    outs = fn(*_inputs(name))
    outs = outs if isinstance(outs, tuple) else (outs,)
    for i, o in enumerate(outs):
        np.save(WORK / f"{name}.ours_{i}.npy", np.asarray(o))
    return {"tasks": len(net.tasks), "calls": len(net.calls), "gflop": net.flops / 1e9,
            "partition_s": round(part_s, 1), "compile_s": round(comp_s, 1), "outputs": len(outs)}


def _cuda_tasks(name: str) -> dict:
    """Partition for CUDA; each task (JSON) and its sketches' names go to NAME.cuda-tasks.json."""
    from ansor.frontend.partition import extract_tasks
    from ansor.targets import generate_sketches

    net = extract_tasks(WORK / f"{name}.mlir", name=name, target="cuda")
    rows = []
    for t in net.tasks:
        try:
            sketches = [s.name for s in generate_sketches(t)]
            err = None
        except Exception as exc:  # noqa: BLE001 - recorded per task
            sketches, err = [], _one_line(exc)
        rows.append({"task": t.to_json(), "sketches": sketches, "error": err})
    (WORK / f"{name}.cuda-tasks.json").write_text(json.dumps(rows))
    return {"tasks": len(net.tasks), "calls": len(net.calls)}


def _cuda_build(name: str, index: int, sketch: str | None, seed: int | None) -> dict:
    import random

    from ansor.core.task import SearchTask
    from ansor.targets import generate_sketches
    from ansor.targets.cuda.lowering import build_task_cuda
    from ansor.targets.cuda.rules import default_script

    row = json.loads((WORK / f"{name}.cuda-tasks.json").read_text())[index]
    task = SearchTask.from_json(row["task"])
    if sketch is None:
        script = default_script(task)
    else:
        sk = next(s for s in generate_sketches(task) if s.name == sketch)
        values = sk.sample(random.Random(seed)).values()
        err = sk.validate(values)
        if err:
            raise AssertionError(f"sampled annotation refused by validate: {err}")
        script = sk.script(values)
    t0 = time.perf_counter()
    art = build_task_cuda(task, script, arch="sm_90")
    return {"bytes": len(art), "build_s": round(time.perf_counter() - t0, 2)}


def _worker(spec: str) -> int:
    case = json.loads(spec)
    os.environ.setdefault("ANSOR_CUDA_BINARY", "ptx")
    try:
        if case["step"] == "cpu":
            out = _cpu(case["name"])
        elif case["step"] == "cuda-tasks":
            out = _cuda_tasks(case["name"])
        else:
            out = _cuda_build(case["name"], case["index"], case.get("sketch"), case.get("seed"))
        res = {"status": "ok", **out}
    except BaseException as exc:  # noqa: BLE001 - classified by the driver
        res = _one_line(exc)
    sys.stdout.write("RESULT " + json.dumps(res) + "\n")
    sys.stdout.flush()
    return 0


# ----------------------------------------------------------------------------------------------
# Driver side


def _run(case: dict, timeout: float) -> tuple[str, dict]:
    """(class, result) of one case run in a worker process: ok, refused, crash or timeout."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-m", "bench.network_acceptance", "--worker", json.dumps(case)],
                           capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return "timeout", {"seconds": round(time.perf_counter() - t0, 1)}
    took = round(time.perf_counter() - t0, 1)
    m = re.search(r"^RESULT (.*)$", p.stdout, re.M)
    if m is None:
        tail = " | ".join([ln for ln in p.stderr.splitlines() if ln.strip()][-3:])[-300:]
        return "crash", {"message": f"exit {p.returncode}: {tail}", "seconds": took}
    res = json.loads(m.group(1))
    res["seconds"] = took
    if res["status"] == "ok":
        return "ok", res
    clean = res["type"] in OURS and res["lines"] == 1
    return ("refused" if clean else "crash"), res


def _detail(res: dict) -> str:
    if "type" in res:
        return f"{res['type']}: {res['message'].strip().splitlines()[0] if res['message'].strip() else ''} [{res['where']}]"
    return res.get("message", "")


def _import(name: str, timeout: float) -> tuple[str, str, float]:
    from ansor.frontend.torch_import import import_network

    t0 = time.perf_counter()
    try:
        text = import_network(name, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - the import's failure is the network's result
        return "failed", f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}", time.perf_counter() - t0
    (WORK / f"{name}.mlir").write_text(text)
    return "ok", f"{len(text) / 2**20:.1f} MiB", time.perf_counter() - t0


def _check(name: str, n_out: int) -> dict:
    import numpy as np

    from ansor.frontend.torch_import import torch_reference

    ref = torch_reference(name, _inputs(name))
    ours = [np.load(WORK / f"{name}.ours_{i}.npy") for i in range(n_out)]
    if len(ref) != len(ours):
        return {"ok": False, "why": f"{len(ours)} outputs, PyTorch has {len(ref)}"}
    diff = max(float(np.max(np.abs(o.astype(np.float64) - r))) for o, r in zip(ours, ref, strict=True))
    scale = max(float(np.max(np.abs(r))) for r in ref)
    return {"ok": diff <= 1e-4 * max(1.0, scale), "max_abs_diff": diff, "max_abs_ref": scale}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("names", nargs="*")
    ap.add_argument("--stages", default="import,cpu,cuda")
    ap.add_argument("--samples", type=int, default=2, help="sampled schedules per sketch of each CUDA task")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per step or CUDA build")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    if a.worker is not None:
        return _worker(a.worker)
    WORK.mkdir(parents=True, exist_ok=True)
    stages = set(a.stages.split(","))
    report: dict = {"host": host_line(host_meta(2)), "networks": {}}
    if a.json and a.json.exists():
        report = json.loads(a.json.read_text())
    for name in a.names:
        row = report["networks"].setdefault(name, {})
        print(f"== {name}", flush=True)
        if "import" in stages:
            st, detail, took = _import(name, a.timeout)
            row["import"] = {"status": st, "detail": detail, "seconds": round(took, 1)}
            print(f"import   {st} {detail} ({took:.0f} s)", flush=True)
            if st != "ok":
                continue
        if "cpu" in stages:
            cls, res = _run({"step": "cpu", "name": name}, a.timeout)
            row["cpu"] = {"class": cls, **res}
            if cls == "ok":
                row["cpu"]["check"] = _check(name, res["outputs"])
                print(f"cpu      {res['tasks']} tasks ({res['calls']} calls, {res['gflop']:.3f} GFLOP), "
                      f"compile {res['compile_s']} s, {row['cpu']['check']}", flush=True)
            else:
                print(f"cpu      {cls}: {_detail(res)}", flush=True)
        if "cuda" in stages:
            cls, part = _run({"step": "cuda-tasks", "name": name}, a.timeout)
            row["cuda"] = {"class": cls, **part, "cases": []}
            if cls != "ok":
                print(f"cuda     partition {cls}: {_detail(part)}", flush=True)
                continue
            tasks = json.loads((WORK / f"{name}.cuda-tasks.json").read_text())
            cases = []
            for i, t in enumerate(tasks):
                if t["error"] is not None:
                    row["cuda"]["cases"].append({"task": t["task"]["name"], "case": "sketches", "class": "refused"
                                                 if t["error"]["type"] in OURS else "crash", "detail": _detail(t["error"])})
                cases.append({"step": "cuda-build", "name": name, "index": i})
                for sk in t["sketches"]:
                    if sk != "skip":
                        cases += [{"step": "cuda-build", "name": name, "index": i, "sketch": sk, "seed": s}
                                  for s in range(a.samples)]
            with cf.ThreadPoolExecutor(max_workers=a.jobs) as pool:
                futs = {pool.submit(_run, c, a.timeout): c for c in cases}
                for fut in cf.as_completed(futs):
                    c, (k, res) = futs[fut], fut.result()
                    label = "default" if c.get("sketch") is None else f"{c['sketch']}.seed{c['seed']}"
                    tname = tasks[c["index"]]["task"]["name"]
                    row["cuda"]["cases"].append({"task": tname, "case": label, "class": k, "detail": _detail(res),
                                                 "seconds": res.get("seconds")})
                    if k != "ok":
                        print(f"cuda     {k:8s} {tname} [{label}] {_detail(res)}", flush=True)
            counts: dict[str, int] = {}
            for c in row["cuda"]["cases"]:
                counts[c["class"]] = counts.get(c["class"], 0) + 1
            row["cuda"]["counts"] = counts
            print(f"cuda     {part['tasks']} tasks, {len(row['cuda']['cases'])} cases: {counts}", flush=True)
        if a.json:
            a.json.parent.mkdir(parents=True, exist_ok=True)
            a.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.network_acceptance [--help]")
    sys.exit(main())

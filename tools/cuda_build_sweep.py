"""Acceptance-style robustness sweep of the CUDA target: odd shapes, half types, TF32, fused and
custom ops, each built to PTX on this machine (no GPU needed).

For every workload (built-in families at odd sizes, plus a few hand-written fused ops) it creates
the CUDA task, generates its sketches and builds, each in its own process with a time limit (an
MLIR assertion aborts the process): the untuned program (`default_script`) and `--samples` seeded
random annotations of every sketch (`sk.sample(random.Random(seed))`), through
`lowering.build_task_cuda` (what a tuner's builder runs: the kernels to PTX and the host side),
plus the cost model's features of the script (`featurize`, CPU-side). A workload whose function
partitions into several tasks (`extract_tasks`: one per anchor op and its fused ops, as `ansor
tune FILE` and `ansor.compile` run it, one GPU kernel each), or into one task that extraction
rewrote, gets one more case, `[net]`: every task's untuned program built the same way. Each case is classified:

    ok        built (and featurized)
    refused   a clean refusal: one of our errors (LoweringError, TaskError, SamplingError, ...)
              with a one-line message naming the task, an op or a shape
    crash     an abort or a signal, an exception that is not ours, a multi-line message or
              one naming nothing
    timeout   over `--timeout` seconds

Usage:
    python tools/cuda_build_sweep.py [--quick] [--jobs N] [--timeout S] [--samples K]
                                     [--only SUBSTR ...] [--json OUT] [--src CHECKOUT] [-v]
    python tools/cuda_build_sweep.py --one '<case json>'      (one case, the worker mode)

The exit status is 1 when a case crashed or timed out.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# ----------------------------------------------------------------------------------------------
# Hand-written fused / custom ops no workload family covers

_CUSTOM: dict[str, str] = {
    # a transpose of odd extents
    "transpose-97x197": """
func.func @tr(%x: tensor<97x197xf32>) -> tensor<197x97xf32> {
  %e = tensor.empty() : tensor<197x97xf32>
  %r = linalg.transpose ins(%x : tensor<97x197xf32>) outs(%e : tensor<197x97xf32>) permutation = [1, 0]
  return %r : tensor<197x97xf32>
}
""",
    # an element-wise f16 op with a broadcast bias and erf (GELU, exact form)
    "ew-f16-gelu-7x1023": """
func.func @ewh(%x: tensor<7x1023xf16>, %b: tensor<1023xf16>) -> tensor<7x1023xf16> {
  %e = tensor.empty() : tensor<7x1023xf16>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<7x1023xf16>, tensor<1023xf16>) outs(%e : tensor<7x1023xf16>) {
  ^bb0(%a: f16, %c: f16, %o: f16):
    %s = arith.addf %a, %c : f16
    %w = arith.extf %s : f16 to f32
    %k = arith.constant 0.70710678 : f32
    %h = arith.constant 0.5 : f32
    %one = arith.constant 1.0 : f32
    %t = arith.mulf %w, %k : f32
    %er = math.erf %t : f32
    %p = arith.addf %er, %one : f32
    %q = arith.mulf %w, %p : f32
    %y = arith.mulf %q, %h : f32
    %yh = arith.truncf %y : f32 to f16
    linalg.yield %yh : f16
  } -> tensor<7x1023xf16>
  return %r : tensor<7x1023xf16>
}
""",
    # an integer matmul
    "matmul-i32-33x65x17": """
func.func @mmi(%a: tensor<33x17xi32>, %b: tensor<17x65xi32>) -> tensor<33x65xi32> {
  %z = arith.constant 0 : i32
  %e = tensor.empty() : tensor<33x65xi32>
  %f = linalg.fill ins(%z : i32) outs(%e : tensor<33x65xi32>) -> tensor<33x65xi32>
  %r = linalg.matmul ins(%a, %b : tensor<33x17xi32>, tensor<17x65xi32>) outs(%f : tensor<33x65xi32>) -> tensor<33x65xi32>
  return %r : tensor<33x65xi32>
}
""",
    # f16 in, f16 accumulation (no widening)
    "matmul-f16acc-64x72x40": """
func.func @mmh(%a: tensor<64x40xf16>, %b: tensor<40x72xf16>) -> tensor<64x72xf16> {
  %z = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<64x72xf16>
  %f = linalg.fill ins(%z : f16) outs(%e : tensor<64x72xf16>) -> tensor<64x72xf16>
  %r = linalg.matmul ins(%a, %b : tensor<64x40xf16>, tensor<40x72xf16>) outs(%f : tensor<64x72xf16>) -> tensor<64x72xf16>
  return %r : tensor<64x72xf16>
}
""",
    # a bias + ReLU on a 3-D batch (broadcast over two dims)
    "bias-relu-3x97x13": """
func.func @br(%x: tensor<3x97x13xf32>, %b: tensor<13xf32>) -> tensor<3x97x13xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x97x13xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (i, j, k)>, affine_map<(i, j, k) -> (k)>,
                                        affine_map<(i, j, k) -> (i, j, k)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %b : tensor<3x97x13xf32>, tensor<13xf32>) outs(%e : tensor<3x97x13xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %y = arith.maximumf %s, %z : f32
    linalg.yield %y : f32
  } -> tensor<3x97x13xf32>
  return %r : tensor<3x97x13xf32>
}
""",
    # a bf16 row sum accumulating in f32
    "rowsum-bf16-5x1000": """
func.func @rsb(%x: tensor<5x1000xbf16>) -> tensor<5xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<5xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<5xf32>) -> tensor<5xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<5x1000xbf16>) outs(%f : tensor<5xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %w = arith.extf %a : bf16 to f32
    %s = arith.addf %w, %o : f32
    linalg.yield %s : f32
  } -> tensor<5xf32>
  return %r : tensor<5xf32>
}
""",
    # a row max with a 1-D input: a whole-tensor reduction to a scalar
    "max-all-1000": """
func.func @mx(%x: tensor<1000xf32>) -> tensor<f32> {
  %z = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<f32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>],
                       iterator_types = ["reduction"]}
      ins(%x : tensor<1000xf32>) outs(%f : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.maximumf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}
""",
    # a matvec
    "matvec-1023x257": """
func.func @mv(%a: tensor<1023x257xf32>, %x: tensor<257xf32>) -> tensor<1023xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1023xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1023xf32>) -> tensor<1023xf32>
  %r = linalg.matvec ins(%a, %x : tensor<1023x257xf32>, tensor<257xf32>) outs(%f : tensor<1023xf32>) -> tensor<1023xf32>
  return %r : tensor<1023xf32>
}
""",
}

# ----------------------------------------------------------------------------------------------
# The workload list: (name, tf32). Names of `_CUSTOM` or of `workloads.get`.

_QUICK: list[tuple[str, bool]] = [
    ("matmul-1x1x1", False), ("matmul-97x197x61", False), ("matmul-1x1023x1000", False),
    ("matmul-97x197x61", True), ("matmul-197x768x768-f16", False), ("matmul-1000x1000x1000-bf16", False),
    ("matmul-97x197x61-f16", False), ("mmgelu-97x197x61-f16", False), ("gmm-3x97x197x61", False),
    ("gmm-2x128x128x72-f16", False), ("c2d-2x13x13x17x9x3x2x1", False), ("c2d-1x14x14x3x64x7x2x3-f16", False),
    ("c2d-2x28x28x64x128x3x2x1-f16", False), ("dep-1x15x15x7x3x2x1", False), ("c1d-1x97x7x5x3x2x1", False),
    ("c3d-1x5x9x9x3x7x3x1x1", False), ("t2d-1x5x5x7x3x4x2x1", False), ("softmax-97x197", False),
    ("softmax-1x1", False), ("lngelu-3x1023", False), ("rowsum-1x50257", False), ("nrm-3x97x197", False),
    ("tbs-1x197x3x64-f16", False), ("tbs-2x7x3x5", False),
    ("colsum-97x197", False), ("ew-f16-gelu-7x1023", False), ("matmul-i32-33x65x17", False),
]

_MORE: list[tuple[str, bool]] = [
    # matmuls: unit, prime, ragged, vocabulary, skinny
    ("matmul-3x7x5", False), ("matmul-257x1x257", False), ("matmul-1023x3x97", False),
    ("matmul-7x50257x64", False), ("matmul-1000x1000x1000", False), ("matmul-1x1x1000", False),
    ("matmul_nt-97x197x61", False), ("matmul_nt-1x1x1", False),
    # half types: K/N not multiples of 8 or 64, unit M, decode
    ("matmul-1x8x8-f16", False), ("matmul-3x1024x1000-bf16", False), ("matmul-257x264x72-f16", False),
    ("matmul-1x1x1-bf16", False), ("matmul-16x4096x4096-f16", False), ("matmul-1000x1000x1000-f16", False),
    # TF32
    ("matmul-1000x1000x1000", True), ("matmul-128x136x72", True), ("matmul-1x1x1", True),
    ("gmm-2x128x128x64", True), ("c2d-1x9x9x64x64x1x1x0", True), ("mmgelu-97x197x61", True),
    # fused consumers
    ("mmgelu-7x13x11", False), ("mmgelu-1x768x3072-bf16", False), ("mmgelu-197x768x768-f16", False),
    # batch matmuls
    ("gmm-1x1x1x1", False), ("gmm-4x64x64x64-bf16", False), ("gmm-12x197x197x64-f16", False),
    ("gmm-3x7x5x3-f16", False),
    # convolutions: odd channels, strides, padding, dilation, batch, half types
    ("c2d-1x7x7x3x5x3x1x1", False), ("c2d-1x1x1x1x1x1x1x0", False), ("c2d-1x56x56x64x64x3x1x1-f16", False),
    ("c2d-1x15x15x64x72x3x2x1-bf16", False), ("c2d-3x8x8x64x64x3x1x1-f16", False),
    ("c2d-2x16x16x64x64x3x2x0-f16", False), ("c2d-1x7x7x64x8x7x1x3-f16", False),
    ("c2d-1x97x97x3x5x3x1x1", False), ("c2d-1x224x224x3x64x7x2x3", False),
    ("dil-1x15x15x7x9x3x1x2", False), ("dil-1x14x14x64x64x3x1x2", False),
    ("grp-1x14x14x12x20x3x2x1", False), ("dep-2x28x28x3x5x1x2", False), ("dep-1x7x7x1x3x1x1", False),
    ("c1d-2x257x3x1x5x1x2", False), ("c3d-1x3x7x7x5x3x1x2x0", False), ("t2d-1x3x3x5x9x3x1x0", False),
    ("t2d-2x7x7x3x5x4x2x1", False), ("cap-1x7x7x8x8x3x1x1", False), ("convlayer-2x13x13x5x7x3x2x1", False),
    ("convlayer-1x1x1x1x1x1x1x0", False),
    # row-wise ops
    ("softmax-3x7", False), ("softmax-7x50257", False), ("softmax-2x1023", False), ("softmax-1x1000", False),
    ("lngelu-1x1", False), ("lngelu-97x197", False), ("layernorm-1x768", False), ("layernorm-3x3", False),
    ("rmsnorm-7x257", False), ("rmsnorm-1x1", False), ("logsoftmax-3x1000", False), ("logsoftmax-1x7", False),
    ("rowsum-1x1", False), ("rowsum-97x197", False), ("nrm-1x1x1", False), ("nrm-2x1000x3", False),
    # attention scores + softmax
    ("tbs-1x197x12x64", False), ("tbs-1x128x2x64-bf16", False), ("tbs-1x1x1x1-f16", False),
    ("tbs-2x197x2x72-f16", False), ("tbs-1x1000x1x64-f16", False),
    # models
    ("mlp-3x97x2", False),
    # several GPU kernels as one task (built-in workloads: docs/gpu.md, rule 4)
    ("matmul_rowsum-33x65x17", False), ("matmul_sumall-33x65x17", False), ("attention-16x33x8", False),
    ("conv_relu_pool-1x10x10x8x16x3x1x0", False), ("two_matmuls-8x24x16", False),
    # custom
    ("transpose-97x197", False), ("matmul-f16acc-64x72x40", False), ("bias-relu-3x97x13", False),
    ("rowsum-bf16-5x1000", False), ("max-all-1000", False),
    ("matvec-1023x257", False),
]

#: Our exception types: a refusal by one of them with a clear message is clean.
_OURS = {"LoweringError", "TaskError", "SamplingError", "KeyError", "UnknownTargetError"}


def _source(name: str) -> str:
    if name in _CUSTOM:
        return _CUSTOM[name]
    from ansor.frontend import workloads

    return workloads.get(name)


def _label(name: str, tf32: bool) -> str:
    return name + ("+tf32" if tf32 else "")


# ----------------------------------------------------------------------------------------------
# Worker side (one process per case)


def _task(name: str, tf32: bool):
    import ansor

    return ansor.create_task(_source(name), name=re.sub(r"[^A-Za-z0-9_]", "_", name), target="cuda", tf32=tf32)


def _plan(name: str, tf32: bool) -> dict:
    """The task's sketches (names); task creation and sketch generation are checked here."""
    from ansor.targets import generate_sketches

    task = _task(name, tf32)
    try:
        from ansor.frontend.partition import extract_tasks

        net = extract_tasks(_source(name), target="cuda", tf32=tf32)
        # several tasks, or one that extraction rewrote (what `ansor tune FILE` tunes then)
        calls = 2 if len(net.calls) > 1 or net.tasks[0].hash != task.hash else 1
    except Exception:  # noqa: BLE001 - the single task's cases still run
        calls = 1
    return {"sketches": [s.name for s in generate_sketches(task)], "calls": calls}


def _build_net(name: str, tf32: bool) -> dict:
    """Every task of the partitioned function, its untuned program built (what `ansor.compile`
    builds for a model before tuning)."""
    from ansor.frontend.partition import extract_tasks
    from ansor.targets.cuda.lowering import build_task_cuda
    from ansor.targets.cuda.rules import default_script

    net = extract_tasks(_source(name), target="cuda", tf32=tf32)
    t0 = time.perf_counter()
    size = sum(len(build_task_cuda(t, default_script(t), arch="sm_90")) for t in net.tasks)
    return {"bytes": size, "build_s": round(time.perf_counter() - t0, 2), "tasks": len(net.tasks)}


def _build(name: str, tf32: bool, sketch: str | None, seed: int | None) -> dict:
    import random

    from ansor.search.features import featurize
    from ansor.targets import generate_sketches
    from ansor.targets.cuda.lowering import build_task_cuda
    from ansor.targets.cuda.rules import default_script

    task = _task(name, tf32)
    if sketch is None:
        script = default_script(task)
    else:
        sk = next(s for s in generate_sketches(task) if s.name == sketch)
        values = sk.sample(random.Random(seed)).values()
        err = sk.validate(values)
        if err:  # sampling must only give valid annotations
            raise AssertionError(f"sampled annotation refused by validate: {err}")
        script = sk.script(values)
    t0 = time.perf_counter()
    art = build_task_cuda(task, script, arch="sm_90")
    took = time.perf_counter() - t0
    feats = featurize(task, [script])
    if feats[0] is None:
        raise AssertionError("featurize gave no row for a script that builds")
    return {"bytes": len(art), "build_s": round(took, 2)}


def _one(spec: str) -> int:
    """Worker mode: run one case, print one line `RESULT <json>`."""
    case = json.loads(spec)
    os.environ.setdefault("ANSOR_CUDA_BINARY", "ptx")
    src = os.environ.get("ANSOR_SWEEP_SRC")
    if src:  # `--src`: that checkout's package, ahead of the editable install's redirecting finder
        sys.meta_path[:] = [f for f in sys.meta_path if "Redirecting" not in type(f).__name__]
        sys.path.insert(0, str(Path(src) / "python"))
    try:
        if case["kind"] == "plan":
            out = _plan(case["name"], case["tf32"])
        elif case["kind"] == "net":
            out = _build_net(case["name"], case["tf32"])
        else:
            out = _build(case["name"], case["tf32"], case.get("sketch"), case.get("seed"))
        res = {"status": "ok", **out}
    except BaseException as exc:  # noqa: BLE001 - classified by the driver
        import traceback

        tb = traceback.extract_tb(exc.__traceback__)
        where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
        res = {"status": "error", "type": type(exc).__name__, "message": str(exc), "where": where,
               "stage": getattr(exc, "stage", None)}
    sys.stdout.write("RESULT " + json.dumps(res) + "\n")
    sys.stdout.flush()
    return 0


# ----------------------------------------------------------------------------------------------
# Driver side


def _names_something(msg: str, case: dict) -> bool:
    """Whether a refusal's message names the task, an op or a shape."""
    task_name = re.sub(r"[^A-Za-z0-9_]", "_", case["name"])
    fam = case["name"].split("-")[0]
    return bool(task_name in msg or fam in msg or re.search(r"\d+x\d+|\b[a-z]+\.[a-z_]+\b|linalg|tensor<|\bop\b", msg))


def classify(case: dict, rc: int | None, stdout: str, stderr: str, timed_out: bool) -> tuple[str, str]:
    if timed_out:
        return "timeout", ""
    m = re.search(r"^RESULT (.*)$", stdout, re.M)
    if m is None:
        why = f"signal {-rc} ({signal.Signals(-rc).name})" if rc is not None and rc < 0 else f"exit {rc}"
        tail = [ln for ln in stderr.splitlines() if ln.strip()][-3:]
        return "crash", why + ": " + " | ".join(tail)[-400:]
    res = json.loads(m.group(1))
    if res["status"] == "ok":
        return "ok", ""
    msg, typ = res["message"], res["type"]
    detail = f"{typ}: {msg.splitlines()[0] if msg else ''} [{res['where']}]"
    if typ not in _OURS:
        return "crash", detail
    if "\n" in msg.strip() or not msg.strip() or not _names_something(msg, case):
        return "crash", detail + " (message: multi-line or names nothing)"
    return "refused", detail


def _run_case(case: dict, timeout: float) -> tuple[dict, str, str, float]:
    t0 = time.perf_counter()
    env = dict(os.environ)
    try:
        p = subprocess.run([sys.executable, __file__, "--one", json.dumps(case)], capture_output=True, text=True,
                           timeout=timeout, env=env, cwd=ROOT)
        cls, detail = classify(case, p.returncode, p.stdout, p.stderr, False)
        if cls == "ok" and case["kind"] == "plan":
            plan = json.loads(re.search(r"^RESULT (.*)$", p.stdout, re.M).group(1))
            case["sketches"], case["calls"] = plan["sketches"], plan.get("calls", 1)
    except subprocess.TimeoutExpired:
        cls, detail = classify(case, None, "", "", True)
    return case, cls, detail, time.perf_counter() - t0


def _case_label(case: dict) -> str:
    lab = _label(case["name"], case["tf32"])
    if case["kind"] in ("plan", "net"):
        return f"{lab} [{case['kind']}]"
    return f"{lab} [{'default' if case.get('sketch') is None else case['sketch'] + '.seed' + str(case['seed'])}]"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--quick", action="store_true", help="a smaller workload list and one sample per sketch")
    p.add_argument("--jobs", type=int, default=max(1, os.cpu_count() or 1))
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    p.add_argument("--samples", type=int, default=None, help="random annotations per sketch (3; --quick: 1)")
    p.add_argument("--only", nargs="*", default=None, help="workloads whose label contains one of these")
    p.add_argument("--json", type=Path, default=None, help="write every case's class and detail here")
    p.add_argument("--src", type=Path, default=None,
                   help="run the workers on the package of this checkout (e.g. a git worktree of an older commit)")
    p.add_argument("-v", "--verbose", action="store_true", help="print every case, not only the failures")
    args = p.parse_args(argv)
    if args.one is not None:
        return _one(args.one)
    if args.src is not None:
        os.environ["ANSOR_SWEEP_SRC"] = str(args.src.resolve())

    work = list(_QUICK) if args.quick else list(_QUICK) + list(_MORE)
    if args.only:
        work = [w for w in work if any(s in _label(*w) for s in args.only)]
    samples = args.samples if args.samples is not None else (1 if args.quick else 3)
    results: list[dict] = []
    t_start = time.perf_counter()

    def record(case: dict, cls: str, detail: str, took: float) -> None:
        results.append({"case": _case_label(case), "class": cls, "detail": detail, "seconds": round(took, 1)})
        if args.verbose or cls in ("crash", "timeout"):
            print(f"{cls:8s} {took:5.1f}s {_case_label(case)} {detail}", flush=True)
        if args.json:  # as it goes: a run cut short still leaves its cases
            args.json.write_text(json.dumps({"partial": True, "cases": results}, indent=1) + "\n")

    with cf.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        plans = [pool.submit(_run_case, {"kind": "plan", "name": n, "tf32": t}, args.timeout) for n, t in work]
        builds = []
        for fut in cf.as_completed(plans):
            case, cls, detail, took = fut.result()
            if cls != "ok":
                record(case, cls, detail, took)
                continue
            base = {"kind": "build", "name": case["name"], "tf32": case["tf32"]}
            builds.append(pool.submit(_run_case, dict(base, sketch=None, seed=None), args.timeout))
            if case.get("calls", 1) > 1:  # several tasks: the partitioned program too
                builds.append(pool.submit(_run_case, dict(base, kind="net"), args.timeout))
            for sk in case["sketches"]:
                if sk == "skip":  # the default program, built above
                    continue
                for seed in range(samples):
                    builds.append(pool.submit(_run_case, dict(base, sketch=sk, seed=seed), args.timeout))
        for fut in cf.as_completed(builds):
            record(*fut.result())

    counts: dict[str, int] = {}
    for r in results:
        counts[r["class"]] = counts.get(r["class"], 0) + 1
    if not args.verbose:
        for r in sorted(results, key=lambda r: r["case"]):
            if r["class"] == "refused":
                print(f"refused  {r['seconds']:5.1f}s {r['case']} {r['detail']}")
    wall = time.perf_counter() - t_start
    print(f"# {len(work)} workloads, {len(results)} cases in {wall:.0f} s: "
          + ", ".join(f"{k} {counts.get(k, 0)}" for k in ("ok", "refused", "crash", "timeout")))
    if args.json:
        args.json.write_text(json.dumps({"counts": counts, "cases": sorted(results, key=lambda r: r["case"])},
                                        indent=1) + "\n")
    return 1 if counts.get("crash") or counts.get("timeout") else 0


if __name__ == "__main__":
    sys.exit(main())

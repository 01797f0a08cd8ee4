"""How many programs the XGBoost cost model needs before it ranks a task's programs better than
random scores do (`XGBModel.few_shot_threshold`), offline from measured logs, CPU only.

    python results/gpu-prime/few_shot.py [--cache DIR] [--draws 10] [--out FILE]   # repository root
    python results/gpu-prime/few_shot.py --replay [--out FILE]   # the guided batch after 16 and 32 records

For every log (the GPU logs of `results/` with >= 48 records of a task, and CPU logs), per task:
the records in log order that today's sketches accept (as the tuner's resume reads them,
`tuner._current_sketch`; failed ones included: the tuner trains on them with label 0), their
features as the tuner's `features_fn` extracts them (`sketch.script(values, lower_vectors=False)`
through a `FeatureExtractor`). For n in NS the model is trained on n records exactly as the tuner
trains it (`XGBModel` defaults, seed 0, `update` with the records' results) and scores the others
(held out):

- prefix: train on the first n records of the log (what the tuner has after n trials), score the rest;
- draws: train on n records drawn at random from the log (`--draws` seeds), score the rest.

Per (task, n, split): rho = Spearman of score vs -latency over the held-out working records;
top-16 = the 16 held-out records the model scores highest (a batch of 16 chosen from the
held-out pool): their best latency / the held-out best ("best16") and their median latency / the
held-out best ("med16"), next to the same for 16 records drawn at random (exact expectation of
the best; mean of 2000 draws for the median). "win" = the model's best16 <= random's expected best16.
Output: few-shot-<commit>.txt (what few-shot.md quotes).
"""
import argparse, glob, hashlib, math, pickle, subprocess, sys, time
from pathlib import Path

sys.path[:0] = ["python"]
import numpy as np
import scipy.stats as st

from ansor.measure.measurer import MeasureInput
from ansor.search.cost_model import XGBModel
from ansor.search.features import FeatureExtractor
from ansor.targets import generate_sketches
from ansor.tuning.records import load_records
from ansor.tuning.tuner import _current_sketch

NS = (8, 16, 24, 32, 48, 64, 100)
K = 16  # the GPU runs' batch
MIN_HELD = 16  # an n is studied on a task only when at least this many records stay held out

GPU_LOGS = sorted(
    set(glob.glob("results/gpu-prime/matmul-509x1021x257-*.cuda.jsonl*"))
    | set(glob.glob("results/gpu-pipeline/*.cuda.jsonl*"))
    | set(glob.glob("results/tensor-core/*.cuda.jsonl*"))
    | set(glob.glob("results/gpu-network/*.cuda.jsonl*"))
    | set(glob.glob("results/*.cuda.jsonl*")))
CPU_LOGS = sorted(glob.glob("results/bert-chain/*.jsonl*")) + sorted(glob.glob("results/gpu-prime/few-shot-*.cpu.jsonl*"))
MIN_RECORDS = 48


def load(log, ext, cache):
    """[(task, records in log order valid today, their features)] per task of `log` with >= MIN_RECORDS."""
    path = cache / (hashlib.md5(Path(log).read_bytes()).hexdigest() + ".pkl") if cache else None
    if path and path.exists():
        return pickle.load(open(path, "rb"))
    by_task = {}
    for r in load_records(log):
        by_task.setdefault(r.task.hash, []).append(r)
    out = []
    for rs in by_task.values():
        if len(rs) < MIN_RECORDS:
            continue
        task = rs[0].task
        try:
            names = {s.name: s for s in generate_sketches(task)}
        except Exception:  # noqa: BLE001 - a task today's rules reject
            continue
        seen, keep = set(), []
        for r in rs:
            sk = _current_sketch(r, names)
            if sk is None or r.schedule.key() in seen:
                continue
            seen.add(r.schedule.key())
            keep.append((r, sk.script(r.schedule.values(), lower_vectors=False)))
        if len(keep) < MIN_RECORDS:
            continue
        F = ext.extract(task, [s for _, s in keep])
        out.append((task, [r for r, _ in keep], F))
    if path:
        pickle.dump(out, open(path, "wb"))
    return out


def fit(task, recs, F):
    """The model as the tuner trains it on these records (defaults; past the threshold)."""
    m = XGBModel(seed=0, nthread=1, few_shot_threshold=1)
    m.update([MeasureInput(task, r.schedule, "") for r in recs], [r.result for r in recs], F)
    return m


def expected_best_of_random(lat, k, rng):
    """E[min of k drawn without replacement], and the mean of their medians (2000 draws)."""
    s = np.sort(lat)
    m = len(s)
    k = min(k, m)
    # P(min is the i-th smallest) = C(m-1-i, k-1) / C(m, k)
    p = np.array([math.comb(m - 1 - i, k - 1) for i in range(m)], dtype=np.float64) / math.comb(m, k)
    fin = np.isfinite(s)
    best = float(np.sum(p[fin] * s[fin]) + (np.inf if p[~fin].sum() > 0 else 0.0))
    picks = np.argsort(rng.random((2000, m)), axis=1)[:, :k]  # 2000 draws of k without replacement
    meds = np.median(np.minimum(lat[picks], 1e9), axis=1)
    return best, float(np.mean(meds))


def evaluate(task, recs, F, train, test, rng):
    lat = np.array([r.latency if r.error is None and math.isfinite(r.latency) else np.inf for r in recs])
    m = fit(task, [recs[i] for i in train], [F[i] for i in train])
    p = m.predict([F[i] for i in test])
    lt = lat[test]
    ok = np.isfinite(lt) & np.isfinite(p)
    rho = st.spearmanr(p[ok], -lt[ok]).correlation if ok.sum() >= 3 else np.nan
    best = lt[np.isfinite(lt)].min()
    top = np.argsort(-p, kind="stable")[:K]
    rb, rmed = expected_best_of_random(lt, K, rng)
    return {"rho": rho, "best16": lt[top].min() / best, "med16": min(np.median(lt[top]), 1e9) / best,
            "rbest16": rb / best, "rmed16": rmed / best, "trained": m.trained}


def gmean(x):
    x = np.asarray(x, dtype=np.float64)
    return float(np.exp(np.mean(np.log(x)))) if len(x) else np.nan


def desc(s) -> str:
    v = s.values()
    return f"{v['op1.d0.t1']}x{v['op1.d1.t1']} k{v['op1.d2.t1']}/{v['op1.d2.t2']} s{v['op1.stages']}"


def replay(out, ext, ns=(16, 32)):
    """The batch the tuner proposes after n records of the 1558323 prime GEMM run with the model
    trained on them (`_make_policy`, seed n as bench.tensor_core seeds it, population 2048 x 4),
    against the batch the run measured there (random scores): where a proposal was measured in
    some prime log, its latency."""
    from ansor.tuning.options import TuningOptions
    from ansor.tuning.tuner import _make_policy

    log = "results/gpu-prime/matmul-509x1021x257-1558323.cuda.jsonl.xz"
    measured = {}
    for lg in sorted(glob.glob("results/gpu-prime/matmul-509x1021x257-*.cuda.jsonl*")):
        for r in load_records(lg):
            if r.error is None:
                measured.setdefault(r.schedule.key(), []).append(r.latency)
    recs = load_records(log)
    task = recs[0].task
    sketches = generate_sketches(task)
    by = {s.name: s for s in sketches}

    def features_fn(schedules):
        return ext.extract(task, [by[s.sketch].script(s.values(), lower_vectors=False) for s in schedules])

    for n in ns:
        t0 = time.perf_counter()
        prior = recs[:n]
        ran = [r.latency * 1e6 for r in recs[n:n + 16]]
        opts = TuningOptions(batch_size=16, features_fn=features_fn, cost_model=XGBModel(seed=n, few_shot_threshold=1))
        policy = _make_policy(task, sketches, prior, {r.schedule.key() for r in prior}, opts=opts, seed=n, closers=[])
        batch = policy.next_batch(16)
        lat = [min(measured[s.key()]) * 1e6 for s in batch if s.key() in measured]
        best = min(r.latency for r in prior) * 1e6
        out(f"after {n} records (best {best:.1f} us), {time.perf_counter() - t0:.0f} s: the run measured records "
            f"{n}-{n + 15} (random scores) at min {min(ran):.1f} / median {np.median(ran):.1f} us; the model's batch: "
            f"{len(lat)} of 16 measured in some prime log"
            + (f", min {min(lat):.1f} / median {np.median(lat):.1f} us: " + ", ".join(f"{x:.1f}" for x in sorted(lat)) if lat else ""))
        out("  " + ", ".join(desc(s) for s in batch if s.sketch == "s0"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", type=Path, default=None, help="directory to keep the logs' features in")
    ap.add_argument("--draws", type=int, default=10, help="random training sets per (task, n)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--replay", action="store_true", help="only the replay of the prime GEMM's guided batch after 16 and 32 records")
    args = ap.parse_args()
    if args.cache:
        args.cache.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    path = Path(args.out or f"results/gpu-prime/few-shot-{commit}.txt")
    lines = []

    def out(s=""):
        print(s, flush=True)
        lines.append(s)

    out(f"commit {commit}; host: 2-core VM, CPU only; n in {NS}, batch k = {K}, {args.draws} random draws per (task, n)")
    t0 = time.perf_counter()
    if args.replay:
        with FeatureExtractor(2) as ext:
            out("== replay: the batch a model trained on the first n records of the 1558323 prime GEMM run proposes")
            replay(out, ext)
        path.write_text("\n".join(lines) + "\n")
        return
    data = []
    with FeatureExtractor(2) as ext:
        for log in GPU_LOGS + CPU_LOGS:
            for task, recs, F in load(log, ext, args.cache):
                ok = sum(f is not None and r.error is None for r, f in zip(recs, F))
                if ok < MIN_RECORDS // 2:
                    continue
                data.append((Path(log).name, task, recs, F))
                out(f"{Path(log).name} [{task.name}, {task.target}]: {len(recs)} records, {ok} working with features")
    out(f"features of {len(data)} task logs in {time.perf_counter() - t0:.0f} s")

    rows = {}  # (split, n) -> list of (log, metrics)
    for name, task, recs, F in data:
        rng = np.random.default_rng(0)
        for n in NS:
            if len(recs) - n < MIN_HELD:
                continue
            idx = np.arange(len(recs))
            res = evaluate(task, recs, F, idx[:n], idx[n:], rng)
            rows.setdefault(("prefix", n), []).append((name, task, res))
            for d in range(args.draws):
                perm = np.random.default_rng(1000 * d + n).permutation(len(recs))
                rows.setdefault(("draws", n), []).append((name, task, evaluate(task, recs, F, perm[:n], perm[n:], rng)))
        out(f"  {name} [{task.name}] done ({time.perf_counter() - t0:.0f} s)")

    out()
    out("== per task log, prefix split (first n records train, the rest held out): rho | best16 model/random")
    for name, task, recs, F in data:
        cells = []
        for n in NS:
            r = [x for nm, t, x in rows.get(("prefix", n), []) if nm == name and t.hash == task.hash]
            cells.append(f"{n}: {r[0]['rho']:+.2f} {r[0]['best16']:.2f}/{r[0]['rbest16']:.2f}" if r else f"{n}: -")
        out(f"{name} [{task.name}]: " + " | ".join(cells))

    for split in ("prefix", "draws"):
        out()
        out(f"== summary, {split}: over task logs (draws: over task logs x draws); ratios to the held-out best, geomean")
        out("| n | cases | mean rho | rho > 0 | best16 model | best16 random | model/random best16 | win | med16 model | med16 random |")
        out("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n in NS:
            r = [x for _, _, x in rows.get((split, n), [])]
            if not r:
                continue
            rho = np.array([x["rho"] for x in r])
            b, rb = np.array([x["best16"] for x in r]), np.array([x["rbest16"] for x in r])
            md, rmd = np.array([x["med16"] for x in r]), np.array([x["rmed16"] for x in r])
            out(f"| {n} | {len(r)} | {np.nanmean(rho):.2f} | {np.mean(rho > 0):.0%} | {gmean(b):.3f} | {gmean(rb):.3f} | "
                f"{gmean(b / rb):.3f} | {np.mean(b <= rb):.0%} | {gmean(md):.2f} | {gmean(rmd):.2f} |")
    for target in ("cuda", "cpu"):
        out()
        out(f"== draws, {target} task logs only")
        out("| n | cases | mean rho | rho > 0 | model/random best16 | win | med16 model / random |")
        out("|---:|---:|---:|---:|---:|---:|---:|")
        for n in NS:
            r = [x for _, t, x in rows.get(("draws", n), []) if t.target == target]
            if not r:
                continue
            rho = np.array([x["rho"] for x in r])
            b, rb = np.array([x["best16"] for x in r]), np.array([x["rbest16"] for x in r])
            md, rmd = np.array([x["med16"] for x in r]), np.array([x["rmed16"] for x in r])
            out(f"| {n} | {len(r)} | {np.nanmean(rho):.2f} | {np.mean(rho > 0):.0%} | {gmean(b / rb):.3f} | "
                f"{np.mean(b <= rb):.0%} | {gmean(md / rmd):.2f} |")
    out(f"total {time.perf_counter() - t0:.0f} s")
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

"""Why the trained cost model proposed only pathological programs for matmul-509x1021x257 on the
H200 (5a87b56: the guided batch 112-127 at 93-695 us against a best of 19.7 us), and what merging
a program's identical statement rows (`cost_model.merge_copies`, XGBModel(merge_copies=True)) does.
CPU only, from the logged records.

    python results/gpu-prime/model_extrapolation.py [--skip-replay] [--cache DIR]   # repository root

1. Mechanism: the model the tuner trained on records 0-111 (`merge_copies=False`, as before):
   statement rows per program (distinct rows, identical copies), per-row predictions of the
   guided batch's first proposal against the best measured program.
2. Replay of the guided batch (records 0-111 of 5a87b56 and ce22631, seed 112, 2048 x 4
   generations, as `bench.tensor_core` ran it), each way: the proposals, their scores and, where a
   proposal was measured in some log of this shape, its latency.
3. Ranking, each way: 4-fold cross-validation within every GPU log with >= 24 working s0/tc0
   records of a task (rho: Spearman of score vs -latency; recall@5; the largest held-out score:
   labels are throughput / the task's best, so above 1 is extrapolation), the CPU logs
   (bert-chain, golden), and leave one run out over the four prime GEMM runs.
Output: model-extrapolation-<commit>.txt (what model-extrapolation.md quotes).
"""
import argparse, glob, hashlib, pickle, subprocess, sys, time
from pathlib import Path

sys.path[:0] = ["python"]
import numpy as np
import scipy.stats as st

from ansor.measure.measurer import MeasureInput, MeasureResult
from ansor.search.cost_model import XGBModel, recall_at_k
from ansor.search.features import FeatureExtractor
from ansor.targets import generate_sketches
from ansor.tuning.options import TuningOptions
from ansor.tuning.records import load_records
from ansor.tuning.tuner import _current_sketch, _make_policy

PRIME = sorted(glob.glob("results/gpu-prime/matmul-509x1021x257-*.cuda.jsonl*"))
WAYS = {"summed": False, "merged": True}


def desc(s) -> str:
    v = s.values()
    return f"{v['op1.d0.t1']}x{v['op1.d1.t1']} k{v['op1.d2.t1']}/{v['op1.d2.t2']} s{v['op1.stages']}"


def load(log, ext, cache):
    """[(task, working s0/tc0 records valid today, their features)] per task of `log` (>= 24 records)."""
    path = cache / (hashlib.md5(log.encode()).hexdigest() + ".pkl") if cache else None
    if path and path.exists():
        return pickle.load(open(path, "rb"))
    by_task = {}
    for r in load_records(log):
        by_task.setdefault(r.task.hash, []).append(r)
    out = []
    for rs in by_task.values():
        task = rs[0].task
        try:
            names = {s.name: s for s in generate_sketches(task)}
        except Exception:  # noqa: BLE001 - a task today's rules reject
            continue
        keep = [(r, sk.script(r.schedule.values(), lower_vectors=False)) for r in rs
                if r.error is None and r.schedule.sketch in ("s0", "tc0") and np.isfinite(r.latency)
                and (sk := _current_sketch(r, names)) is not None]
        if len(keep) < 24:
            continue
        F = ext.extract(task, [s for _, s in keep])
        ok = [(r, f) for (r, _), f in zip(keep, F) if f is not None]
        out.append((task, [r for r, _ in ok], [f for _, f in ok]))
    if path:
        pickle.dump(out, open(path, "wb"))
    return out


def fit(task, F, lat, merge, seed=0):
    m = XGBModel(seed=seed, nthread=2, few_shot_threshold=1, merge_copies=merge)
    m.update([MeasureInput(task, None, "") for _ in F], [MeasureResult(costs=(float(x),)) for x in lat], F)
    return m


def mechanism(out, ext):
    out("== 1. mechanism: the model trained on records 0-111 of 5a87b56, every row summed (before)")
    recs = load_records("results/gpu-prime/matmul-509x1021x257-5a87b56.cuda.jsonl.xz")
    task = recs[0].task
    by = {s.name: s for s in generate_sketches(task)}
    prior = recs[:112]
    F = ext.extract(task, [by[r.schedule.sketch].script(r.schedule.values(), lower_vectors=False) for r in prior])
    guided = [r for r in recs[112:128]]
    G = ext.extract(task, [by[r.schedule.sketch].script(r.schedule.values(), lower_vectors=False) for r in guided])
    rows = [len(f) for f in F if f is not None]
    distinct = [len(np.unique(f, axis=0)) for f in F if f is not None]
    out(f"training programs: statement rows {min(rows)}-{max(rows)} (histogram {dict(sorted({n: rows.count(n) for n in set(rows)}.items()))}), "
        f"distinct rows {min(distinct)}-{max(distinct)}")
    out("guided batch (measured on the H200): rows/distinct " + ", ".join(f"{len(g)}/{len(np.unique(g, axis=0))}" for g in G))
    for way, merge in WAYS.items():
        m = XGBModel(seed=112, nthread=2, merge_copies=merge)
        m.update([MeasureInput(task, r.schedule, "") for r in prior], [r.result for r in prior], F)
        sp = m.predict(F)
        ib = int(np.argmin([r.latency for r in prior]))
        sg = m.predict(G)
        out(f"[{way}] best measured ({desc(prior[ib].schedule)}, {prior[ib].latency * 1e6:.1f} us) scores {sp[ib]:.3f}, "
            f"the highest of the 112 {sp.max():.3f}; the guided batch {sg.min():.2f}..{sg.max():.2f}; "
            f"Spearman of its scores vs -latency {st.spearmanr(sg, [-r.latency for r in guided]).correlation:.2f}")
        if not merge:
            import xgboost
            for name, f in (("best measured", F[ib]), (f"guided {desc(guided[0].schedule)}", G[0])):
                per = m.booster.predict(xgboost.DMatrix(f), output_margin=True)
                u, inv, cnt = np.unique(f, axis=0, return_inverse=True, return_counts=True)
                big = int(np.argmax(cnt))
                out(f"  {name}: {len(f)} rows, sum {per.sum():.3f}; the most copied row x{cnt[big]} at "
                    f"{per[np.flatnonzero(inv.ravel() == big)[0]]:.3f} each = {per[inv.ravel() == big].sum():.3f}")


def replay(out, ext):
    out("== 2. replay of the guided batch (records 0-111, seed 112, population 2048 x 4 generations)")
    measured = {}
    for log in PRIME:
        for r in load_records(log):
            if r.error is None:
                measured.setdefault(r.schedule.key(), []).append(r.latency)
    for log in ("results/gpu-prime/matmul-509x1021x257-5a87b56.cuda.jsonl.xz",
                "results/gpu-prime/matmul-509x1021x257-ce22631.cuda.jsonl.xz"):
        recs = load_records(log)
        prior, task = recs[:112], recs[0].task
        sketches = generate_sketches(task)
        by = {s.name: s for s in sketches}
        best = min(prior, key=lambda r: r.latency)
        out(f"{Path(log).name}: best of 0-111 {desc(best.schedule)} {best.latency * 1e6:.1f} us; the run's batch: "
            + ", ".join(f"{desc(r.schedule)} {r.latency * 1e6:.0f}" for r in recs[112:128] if r.schedule.sketch == "s0"))

        def features_fn(schedules):
            return ext.extract(task, [by[s.sketch].script(s.values(), lower_vectors=False) for s in schedules])

        for way, merge in WAYS.items():
            t0 = time.perf_counter()
            opts = TuningOptions(batch_size=16, features_fn=features_fn, cost_model=XGBModel(seed=112, merge_copies=merge))
            policy = _make_policy(task, sketches, prior, {r.schedule.key() for r in prior}, opts=opts, seed=112, closers=[])
            batch = policy.next_batch(16)
            sb = policy.model.predict(policy.features(batch))
            s_best = policy.model.predict(policy.features([best.schedule]))[0]
            lat = [min(measured[s.key()]) * 1e6 if s.key() in measured else None for s in batch]
            big = sum(s.values()["op1.d0.t1"] * s.values()["op1.d1.t1"] >= 8192 for s in batch)
            k1 = sum(s.values()["op1.d2.t1"] == 1 for s in batch)
            out(f"  [{way}] {time.perf_counter() - t0:.0f} s: scores {sb.min():.2f}..{sb.max():.2f} (best measured {s_best:.2f}); "
                f"{big} of {len(batch)} blocks >= 8192 elements, {k1} with K tile 1; "
                f"{sum(x is not None for x in lat)} measured in some prime log: "
                + ", ".join(f"{x:.0f}" for x in lat if x is not None))
            out("    " + ", ".join(f"{desc(s)} ({x:.2f})" for s, x in zip(batch, sb)))


def ranking(out, ext, cache):
    out("== 3. ranking: 4-fold within each log (rho, recall@5, largest held-out score), summed -> merged")
    logs = (PRIME + sorted(glob.glob("results/gpu-pipeline/*.cuda.jsonl*")) + sorted(glob.glob("results/tensor-core/*.cuda.jsonl*"))
            + sorted(glob.glob("results/bert-chain/*.jsonl*")) + sorted(glob.glob("tests/data/golden/*.cpu.jsonl*")))
    table = {way: [] for way in WAYS}
    for log in logs:
        for task, recs, F in load(log, ext, cache):
            L = np.array([r.latency for r in recs])
            fold = np.random.default_rng(0).integers(0, 4, len(recs))
            res = {}
            for way, merge in WAYS.items():
                rho, rec, top = [], [], []
                for k in range(4):
                    tr, te = np.flatnonzero(fold != k), np.flatnonzero(fold == k)
                    if len(te) < 3:
                        continue
                    p = fit(task, [F[i] for i in tr], L[tr], merge).predict([F[i] for i in te])
                    rho.append(st.spearmanr(p, -L[te]).correlation), rec.append(recall_at_k(p, -L[te], 5)), top.append(p.max())
                res[way] = (np.nanmean(rho), np.mean(rec), max(top))
                table[way].append(res[way])
            dup = np.mean([len(f) / len(np.unique(f, axis=0)) for f in F])
            out(f"{Path(log).name} [{task.name}, {len(recs)}, rows/distinct {dup:.1f}]: rho {res['summed'][0]:.2f} -> {res['merged'][0]:.2f}, "
                f"recall@5 {res['summed'][1]:.2f} -> {res['merged'][1]:.2f}, max score {res['summed'][2]:.2f} -> {res['merged'][2]:.2f}")
    for way in WAYS:
        t = np.array(table[way])
        out(f"mean over {len(t)} task logs [{way}]: rho {np.nanmean(t[:, 0]):.3f}, recall@5 {t[:, 1].mean():.3f}, "
            f"logs with a held-out score > 1.2: {(t[:, 2] > 1.2).sum()}")
    data = [load(log, ext, cache)[0] for log in PRIME]
    for way, merge in WAYS.items():
        rows = []
        for i, (task, recs, F) in enumerate(data):
            keys = {r.schedule.key() for r in recs}
            trF, trL = [], []
            for j, (_, r2, F2) in enumerate(data):
                if j != i:
                    for r, f in zip(r2, F2):
                        if r.schedule.key() not in keys:
                            trF.append(f), trL.append(r.latency)
            p = fit(task, trF, trL, merge).predict(F)
            t = -np.array([r.latency for r in recs])
            rows.append((Path(PRIME[i]).stem.split("-")[-1].split(".")[0], st.spearmanr(p, t).correlation, recall_at_k(p, t, 10), p.max()))
        out(f"prime LORO [{way}]: " + " | ".join(f"{c}: rho {r:.2f} recall@10 {k:.2f} max {m:.2f}" for c, r, k, m in rows)
            + f" | mean rho {np.mean([r[1] for r in rows]):.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-replay", action="store_true")
    ap.add_argument("--cache", type=Path, default=None, help="directory to keep the logs' features in")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.cache:
        args.cache.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    path = Path(args.out or f"results/gpu-prime/model-extrapolation-{commit}.txt")
    lines = []

    def out(s):
        print(s, flush=True)
        lines.append(s)

    out(f"commit {commit}; host: 2-core VM, CPU only")
    with FeatureExtractor(2) as ext:
        mechanism(out, ext)
        ranking(out, ext, args.cache)
        if not args.skip_replay:
            replay(out, ext)
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

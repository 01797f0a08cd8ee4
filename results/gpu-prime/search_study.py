"""Why the learned search does not reach the probed 64x64 block (2x2 virtual threads, K 16/4, 2 stages)
of matmul-509x1021x257 (issue 28), from the H200 tuning logs, on the CPU only.

    python results/gpu-prime/search_study.py [--skip-replay]     # from the repository root

1. Guidance: which of bench.tensor_core's 16-candidate batches had a trained cost model
   (XGBModel.few_shot_threshold = 100), and how many eps-greedy random candidates a batch got.
2. Ranking: an XGBoost model trained on the other runs' records ranks each run's records
   (leave one run out; records of the held-out run removed from training) and the probe's 14
   timed annotations; 4-fold cross-validation within the gpu-pipeline fp32 GEMM logs. Each with
   today's features ("base": the first 167 columns) and with the launch columns (all 169).
3. Replay: the ce22631 run's one model-guided batch (after 112 records), replayed with a
   model trained on those 112 records as the tuner would, with each feature set: how many of
   the 16 proposals have the probe's kind of tile, and where the model ranks the probe.
Output: search-study-<commit>.txt (what search-study.md quotes).
"""
import argparse, glob, json, math, sys, time
from pathlib import Path

sys.path[:0] = ["python"]
import numpy as np
import scipy.stats as st

from ansor.measure.measurer import MeasureInput, MeasureResult
from ansor.search.cost_model import XGBModel, recall_at_k
from ansor.search.features import feature_names, featurize
from ansor.targets import generate_sketches
from ansor.tuning.records import load_records

NAMES = feature_names()
BASE = NAMES.index("launch_blocks")  # today's columns end before the launch's two
PRIME = sorted(glob.glob("results/gpu-prime/matmul-509x1021x257-*.cuda.jsonl*"))
PROBE = {"op1.d0.t1": 64, "op1.d0.t2": 32, "op1.d0.t3": 2, "op1.d0.t4": 2, "op1.d1.t1": 64, "op1.d1.t2": 32,
         "op1.d1.t3": 2, "op1.d1.t4": 2, "op1.d2.t1": 16, "op1.d2.t2": 4, "op1.unroll": 1024, "op1.stages": 2}


def cut(F, variant):
    return [f if f is None or variant == "launch" else f[:, :BASE] for f in F]


def fit(task, sch, F, lat, seed=0):
    m = XGBModel(seed=seed, nthread=2, few_shot_threshold=1)
    m.update([MeasureInput(task, sch, "") for _ in F], [MeasureResult(costs=(float(x),)) for x in lat], F)
    return m


def load(log):
    recs = [r for r in load_records(log) if r.error is None and r.schedule.sketch == "s0"]
    task = recs[0].task
    sk = {s.name: s for s in generate_sketches(task)}["s0"]
    return recs, task, sk, featurize(task, [sk.script(r.schedule.values()) for r in recs])


def probe_like(v):
    """The probe's kind of tile: a 64x64 block with virtual threads along both dims."""
    return all(v[f"op1.d{d}.t1"] == 64 and v[f"op1.d{d}.t1"] // v[f"op1.d{d}.t2"] >= 2 for d in (0, 1))


def guidance(out):
    out("== 1. guidance (bench.tensor_core: one ansor.tune call per batch of 16, resuming the log)")
    out(f"eps-greedy random candidates per batch of 16 before 1a088c5: int(0.05 * 16) = {int(0.05 * 16)}")
    for log in PRIME:
        n = len(load_records(log))
        starts = list(range(0, n, 16))
        trained = [s for s in starts if s >= 100]  # the log's records train the model once >= 100
        out(f"{Path(log).name}: {n} records, {len(starts)} batches; model trained for the batches "
            f"starting at {trained or 'none'} (random scores before: few_shot_threshold 100)")
        recs = load_records(log)
        best = min(range(n), key=lambda i: recs[i].latency)
        out(f"  best record at index {best} ({recs[best].latency * 1e6:.2f} us), "
            f"stages {recs[best].schedule.values().get('op1.stages')}; "
            f"records with the probe's kind of tile: {sum(probe_like(r.schedule.values()) for r in recs if r.schedule.sketch == 's0')}; "
            f"with 2 stages: {sum(r.schedule.values().get('op1.stages') == 2 for r in recs)}")


def ranking(out):
    out("== 2. ranking quality (Spearman of score vs -latency; recall@k: share of the k fastest among the k best scored)")
    data = [load(log) for log in PRIME]
    probes = []
    cur = None
    for line in open("results/gpu-prime/probes-matmul-c822ca7.txt"):
        if line.startswith("==="):
            cur = line.split()[1]
            continue
        d = json.loads(line)
        if cur == "matmul-509x1021x257" and d.get("schedule") != "default" and "tuned_s" in d:
            probes.append((json.loads(d["schedule"]), d["tuned_s"]))
    task, sk = data[0][1], data[0][2]
    Fp = featurize(task, [sk.script(v) for v, _ in probes])
    lp = np.array([t for _, t in probes])
    for variant in ("base", "launch"):
        rows = []
        for i, (recs, task, sk, F) in enumerate(data):
            keys = {r.schedule.key() for r in recs}
            trF, trL = [], []
            for j, (r2, _, _, F2) in enumerate(data):
                if j != i:
                    for r, f in zip(r2, cut(F2, variant)):
                        if r.schedule.key() not in keys:
                            trF.append(f), trL.append(r.latency)
            p = fit(task, recs[0].schedule, trF, trL).predict(cut(F, variant))
            t = -np.array([r.latency for r in recs])
            rows.append((Path(PRIME[i]).stem.split("-")[-1].split(".")[0], st.spearmanr(p, t).correlation,
                         recall_at_k(p, t, 10), len(trF)))
        out(f"prime LORO [{variant}]: " + " | ".join(f"{c}: rho {r:.2f} recall@10 {k:.2f} (trained on {n})" for c, r, k, n in rows)
            + f" | mean rho {np.mean([r[1] for r in rows]):.2f}")
        allF = [f for d in data for f in cut(d[3], variant)]
        allL = [r.latency for d in data for r in d[0]]
        p = fit(task, data[0][0][0].schedule, allF, allL).predict(cut(Fp, variant))
        out(f"  probe annotations (14, trained on all 3 runs) [{variant}]: rho {st.spearmanr(p, -lp).correlation:.2f}; "
            f"fastest (the probed tile, {lp.min() * 1e6:.1f} us) scored {int((p > p[np.argmin(lp)]).sum()) + 1} of {len(lp)}")
    for log in sorted(glob.glob("results/gpu-pipeline/*.cuda.jsonl*")):
        recs, task, sk, F = load(log)
        L = np.array([r.latency for r in recs])
        fold = np.random.default_rng(0).integers(0, 4, len(recs))
        res = []
        for variant in ("base", "launch"):
            Fv = cut(F, variant)
            rho, rec = [], []
            for k in range(4):
                tr, te = np.flatnonzero(fold != k), np.flatnonzero(fold == k)
                p = fit(task, recs[0].schedule, [Fv[i] for i in tr], L[tr]).predict([Fv[i] for i in te])
                rho.append(st.spearmanr(p, -L[te]).correlation), rec.append(recall_at_k(p, -L[te], 5))
            res.append(f"[{variant}] rho {np.mean(rho):.2f} recall@5 {np.mean(rec):.2f}")
        out(f"{Path(log).name} ({len(recs)} records, 4-fold): " + " | ".join(res))


def replay(out):
    from ansor.search.features import FeatureExtractor
    from ansor.tuning.options import TuningOptions
    from ansor.tuning.tuner import _make_policy

    out("== 3. replay of the ce22631 run's guided batch (prior: its first 112 records, seed 112)")
    log = "results/gpu-prime/matmul-509x1021x257-ce22631.cuda.jsonl.xz"
    recs = load_records(log)
    prior = recs[:112]
    task = recs[0].task
    sketches = generate_sketches(task)
    out("the run's own batch 112-127 on the H200 (block/stages: us): " + ", ".join(
        f"{r.schedule.values()['op1.d0.t1']}x{r.schedule.values()['op1.d1.t1']}/s{r.schedule.values()['op1.stages']}: "
        f"{r.latency * 1e6:.0f}" for r in recs[112:128]))
    by_name = {s.name: s for s in sketches}
    sk = by_name["s0"]
    with FeatureExtractor(2) as ext:
        for variant in ("base", "launch"):
            def features_fn(schedules, variant=variant):
                return cut(ext.extract(task, [by_name[s.sketch].script(s.values(), lower_vectors=False) for s in schedules]), variant)
            t0 = time.perf_counter()
            policy = _make_policy(task, sketches, prior, {r.schedule.key() for r in prior},
                                  opts=TuningOptions(batch_size=16, features_fn=features_fn), seed=112, closers=[])
            batch = policy.next_batch(16)
            s_probe, s_best = policy.model.predict(features_fn([sk.search_space(0.3).schedule(PROBE),
                                                                min(prior, key=lambda r: r.latency).schedule]))
            s_batch = policy.model.predict(policy.features(batch))
            kinds = [probe_like(s.values()) for s in batch]
            out(f"[{variant}] {time.perf_counter() - t0:.0f} s; {len(batch)} proposed: {sum(kinds)} with the probe's kind "
                f"of tile, {sum(s.values().get('op1.stages') == 2 for s in batch)} with 2 stages; blocks "
                + ", ".join(f"{s.values()['op1.d0.t1']}x{s.values()['op1.d1.t1']}/s{s.values()['op1.stages']}" for s in batch))
            out(f"  model scores: probe {s_probe:.3f}, the prior's best {s_best:.3f}, the batch's {s_batch.min():.3f}"
                f"..{s_batch.max():.3f} (probe above {int((s_batch < s_probe).sum())} of the 16 proposed)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-replay", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import subprocess
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    path = Path(args.out or f"results/gpu-prime/search-study-{commit}.txt")
    lines = []

    def out(s):
        print(s, flush=True)
        lines.append(s)

    out(f"commit {commit}; host: 2-core VM, CPU only; {len(NAMES)} feature columns")
    guidance(out)
    ranking(out)
    if not args.skip_replay:
        replay(out)
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

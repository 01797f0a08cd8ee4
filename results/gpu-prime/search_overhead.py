"""Where a learned search round's time goes besides features: the cost model's `predict` and the
evolution itself, on the prime GEMM's CUDA task (matmul-509x1021x257), CPU only.

    python results/gpu-prime/search_overhead.py [--records 128] [--rounds 2] [--profile] \
        [--save-proposals FILE | --check-proposals FILE] [--cache FILE]      # repository root
    ANSOR_SRC=/old/checkout/python python results/gpu-prime/search_overhead.py ...  # the code before

The policy is built as the tuner builds it when it resumes `matmul-509x1021x257-1558323.cuda.jsonl.xz`
after `--records` records (`tuner._make_policy`, TuningOptions defaults, population 2048 x 4
generations, seed = records, as `bench.tensor_core` seeds each batch), then proposes `--rounds`
batches of 16 in a row. Features come from a `FeatureExtractor` (the tuner's feature path) through
a disk cache (`--cache`: pickled {schedule: features}), so that after the first run the rounds time
predict and evolution alone; features_s is then the cache lookups. `--save-proposals` writes the
proposed schedules' keys; `--check-proposals` asserts that this code proposes the same ones (the
same seeds must give the same batches before and after a speed-up).
"""
import argparse, cProfile, json, os, pickle, pstats, sys, time
from pathlib import Path

sys.path[:0] = [os.environ.get("ANSOR_SRC", "python")]  # another checkout's python/ to time it the same way
if "ANSOR_SRC" in os.environ:  # the editable install's finder would import this checkout's package
    sys.meta_path = [f for f in sys.meta_path if "Redirecting" not in type(f).__name__]

from ansor.search.features import FeatureExtractor
from ansor.targets import generate_sketches
from ansor.tuning.options import TuningOptions
from ansor.tuning.records import load_records
from ansor.tuning.tuner import _make_policy

LOG = "results/gpu-prime/matmul-509x1021x257-1558323.cuda.jsonl.xz"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--save-proposals", type=Path)
    ap.add_argument("--check-proposals", type=Path)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/search-overhead-features.pkl"))
    args = ap.parse_args()
    import ansor.search.cost_model
    print(f"code: {Path(ansor.search.cost_model.__file__).parent.parent}", flush=True)
    recs = load_records(LOG)
    prior, task = recs[: args.records], recs[0].task
    sketches = generate_sketches(task)
    by = {s.name: s for s in sketches}
    cache = pickle.loads(args.cache.read_bytes()) if args.cache.exists() else {}
    n_cached = len(cache)
    ext = FeatureExtractor(2)

    def features_fn(schedules):
        miss = [s for s in schedules if s not in cache]
        if miss:
            feats = ext.extract(task, [by[s.sketch].script(s.values(), lower_vectors=False) for s in miss])
            cache.update(zip(miss, feats))
        return [cache[s] for s in schedules]

    opts = TuningOptions(batch_size=16, features_fn=features_fn)
    policy = _make_policy(task, sketches, prior, {r.schedule.key() for r in prior}, opts=opts,
                          seed=args.records, closers=[])
    proposals = []
    prof = cProfile.Profile() if args.profile else None
    for k in range(args.rounds):
        t0 = time.perf_counter()
        if prof:
            prof.enable()
        batch = policy.next_batch(16)
        if prof:
            prof.disable()
        s = policy.last_stats
        print(f"round {k}: {time.perf_counter() - t0:.2f} s: features {s['features_s']:.2f} s, "
              f"predict {s['predict_s']:.2f} s, evolution {s['search_s']:.2f} s, {int(s['scored'])} scored",
              flush=True)
        proposals.append([b.key() for b in batch])
    ext.close()
    if len(cache) > n_cached:
        args.cache.write_bytes(pickle.dumps(cache))
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(45)
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    if args.save_proposals:
        args.save_proposals.write_text(json.dumps(proposals))
    if args.check_proposals:
        want = json.loads(args.check_proposals.read_text())
        assert want == proposals, "the proposals differ"
        print(f"same proposals as {args.check_proposals} ({sum(map(len, proposals))} schedules)")


if __name__ == "__main__":
    main()

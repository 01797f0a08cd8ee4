"""How much a cost-model prior from another host's logs speeds up tuning here.

    python -m bench.cross_host_prior TASK.mlir --prior LOG [LOG ...] [--trials 48] [--batch-size 16]
                                     [--seeds 0,1] [--out results/ray/cross-host-prior.json]

Tunes TASK (one task, learned search) once per seed without a prior and once with the XGBoost
model pre-trained on the `--prior` logs (`tuner.pretrain`, what `ansor tune --pretrain` does),
same seed, on this host, and reports the best-so-far latency at each batch boundary, and the first
trial at which the run with the prior reached the final best of the run without. The prior logs'
provenance says which host measured them (their CPU model is printed next to this host's).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import best_so_far, host_line, host_meta, write_results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("task", help="a .mlir file with one task")
    ap.add_argument("--prior", nargs="+", required=True, help="tuning logs of another host")
    ap.add_argument("--trials", type=int, default=48)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--threads", type=int, default=0, help="OpenMP threads (default: all cores)")
    ap.add_argument("--out", default="results/ray/cross-host-prior.json")
    a = ap.parse_args()

    import ansor
    from ansor.measure.measurer import RunOptions
    from ansor.search.cost_model import XGBModel
    from ansor.tuning.records import load_records
    from ansor.tuning.tuner import pretrain

    meta = host_meta(a.threads)
    print(host_line(meta))
    prior_hosts = sorted({str((r.provenance or {}).get("cpu")) for p in a.prior for r in load_records(p)})
    print(f"prior: {len(a.prior)} logs measured on {', '.join(prior_hosts)}; this host: {meta['cpu']}")
    task = ansor.create_task(Path(a.task))
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in (int(s) for s in a.seeds.split(",")):
            for label in ("no prior", "prior"):
                model = XGBModel(seed=seed)
                n = pretrain(model, a.prior, target=task.target)[0] if label == "prior" else 0
                log = Path(tmp) / f"{label.replace(' ', '-')}-{seed}.jsonl"
                ansor.tune(task, trials=a.trials, batch_size=a.batch_size, seed=seed, log_path=log,
                           cost_model=model, run_options=RunOptions(threads=a.threads))
                curve = best_so_far(log)
                runs[f"{label}, seed {seed}"] = {"prior_programs": n, "best_so_far_s": curve}
                print(f"  seed {seed}, {label} ({n} prior programs): best {curve[-1] * 1e3:.3f} ms", flush=True)
                # Saved after every run: a call cut short by a time limit keeps the runs it finished.
                write_results(Path(a.out), "cross-host-prior", meta,
                              {"task": task.name, "prior": a.prior, "prior_hosts": prior_hosts,
                               "trials": a.trials, "batch_size": a.batch_size, "runs": runs, "complete": False})
    marks = list(range(a.batch_size, a.trials + 1, a.batch_size))
    print(f"\n{task.name}: best-so-far latency (ms) after N trials, learned search, batch {a.batch_size}")
    print("| run | " + " | ".join(str(m) for m in marks) + " | prior reaches the no-prior final best at |")
    print("|---|" + "---|" * (len(marks) + 1))
    reach: list[float] = []
    for name, r in runs.items():
        c = r["best_so_far_s"]
        cells = " | ".join(f"{c[min(m, len(c)) - 1] * 1e3:.3f}" for m in marks)
        extra = ""
        if name.startswith("prior"):
            target = runs[name.replace("prior", "no prior", 1)]["best_so_far_s"][-1]
            at = next((i + 1 for i, x in enumerate(c) if x <= target), None)
            extra = f"trial {at}" if at else "not reached"
            reach.append(at or math.inf)
        print(f"| {name} | {cells} | {extra} |")
    ratios = [runs[f"prior, seed {s}"]["best_so_far_s"][-1] / runs[f"no prior, seed {s}"]["best_so_far_s"][-1]
              for s in a.seeds.split(",")]
    print(f"final best with / without prior: {', '.join(f'{x:.3f}' for x in ratios)} "
          f"(median {statistics.median(ratios):.3f})")
    path = write_results(Path(a.out), "cross-host-prior", meta,
                         {"task": task.name, "prior": a.prior, "prior_hosts": prior_hosts, "trials": a.trials,
                          "batch_size": a.batch_size, "runs": runs, "final_ratio": ratios,
                          "prior_reaches_no_prior_best_at": [x if math.isfinite(x) else None for x in reach],
                          "complete": True})
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())

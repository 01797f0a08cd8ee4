"""A/B of hand-written transform scripts of one workload with the tuner's measurer (verified against
the reference with poisoned outputs, then timed), alternating rounds; prints medians (µs).
    python3 script_ab.py WORKLOAD A.mlir B.mlir ... [--rounds 5]"""
import argparse, statistics, sys
import ansor
from ansor.frontend import workloads
from ansor.measure.local import LocalMeasurer
from ansor.measure.measurer import MeasureInput
from ansor.space.schedule import Schedule

ap = argparse.ArgumentParser()
ap.add_argument("workload"); ap.add_argument("scripts", nargs="+"); ap.add_argument("--rounds", type=int, default=5)
a = ap.parse_args()
task = ansor.create_task(workloads.get(a.workload), name=a.workload, target="cuda")
m = LocalMeasurer()
base = m.baseline(task)
print("default program:", base.error, [round(c * 1e6, 2) for c in base.costs], flush=True)
times = {s: [] for s in a.scripts}
for r in range(a.rounds):
    for i, s in enumerate(a.scripts):
        inp = MeasureInput(task, Schedule.of(f"ab{i}", {"round": r}), open(s).read())
        (res,) = m.measure([inp])
        if res.error is not None:
            print(s, "ERROR", res.error, res.error_msg[:300], flush=True)
            times[s].append(float("nan"))
        else:
            times[s].append(min(res.costs))
for s, t in times.items():
    print(f"{s}: median {statistics.median(t) * 1e6:.2f} µs  rounds {[round(x * 1e6, 2) for x in t]}")
m.close() if hasattr(m, "close") else None

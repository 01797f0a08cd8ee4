"""How the learned search's cost model, trained on a tuning log's records, scores the probed 64x32
2-stage tile (`probes-matmul-c822ca7.txt`) against the log's best and 300 random draws (CPU only).
Run from the repository root: python results/gpu-prime/model_score.py [LOG]"""
import sys, json, random
sys.path[:0] = ["python"]
import numpy as np
from ansor.targets import generate_sketches
from ansor.tuning.records import load_records
from ansor.search.cost_model import XGBModel
from ansor.search.features import featurize
from ansor.measure.measurer import MeasureInput
log=sys.argv[1] if len(sys.argv) > 1 else "results/gpu-prime/matmul-509x1021x257-ce22631.cuda.jsonl.xz"
recs=[r for r in load_records(log) if r.error is None]
task=recs[0].task
sks={s.name:s for s in generate_sketches(task)}
sk=sks["s0"]
recs=[r for r in recs if r.schedule.sketch=="s0"]
scripts=[sk.script(r.schedule.values()) for r in recs]
F=featurize(task, scripts)
m=XGBModel(seed=0)
m.update([MeasureInput(task, r.schedule, s) for r,s in zip(recs,scripts)], [r.result for r in recs], F)
probe={"op1.d0.t1": 64, "op1.d0.t2": 32, "op1.d0.t3": 2, "op1.d0.t4": 2, "op1.d1.t1": 64, "op1.d1.t2": 32, "op1.d1.t3": 2, "op1.d1.t4": 2, "op1.d2.t1": 16, "op1.d2.t2": 4, "op1.unroll": 1024, "op1.stages": 2}
base=dict(recs[0].schedule.values())
pv={**base, **probe}
print("probe valid:", sk.validate(pv))
best=min(recs,key=lambda r:r.latency)
cands=[pv, dict(best.schedule.values())]
rng=random.Random(0)
rand=[sk.sample(rng).values() for _ in range(300)]
Fc=featurize(task,[sk.script(v) for v in cands+rand])
p=m.predict(Fc)
print("pred probe %.3f  pred tuner-best %.3f" % (p[0], p[1]))
r=np.array(p[2:]); print("random: rank of probe among 300 random:", int((r>p[0]).sum()), "max random %.3f median %.3f"%(r.max(), np.median(r)))
# in-sample: correlation
pin=m.predict(F); lat=np.array([r.latency for r in recs])
import scipy.stats as st
print("spearman(pred, -lat) in-sample:", st.spearmanr(pin, -lat).correlation)

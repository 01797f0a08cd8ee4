"""PTX compile time of sampled CUDA candidates, with or without the `canonicalize` that folds
single-iteration loops before `convert-scf-to-cf` (targets/cuda/lowering.py).

    python -m bench.ptx_compile_time WORKLOAD SEED N before|after

Samples N candidates of WORKLOAD's CUDA sketches with `random.Random(SEED)` (the first one is
skipped: it is the 533 s case, run it alone) and prints seconds to PTX for each; `before` drops the
`canonicalize` from the pipeline. No GPU needed.
"""
import sys, time, json, random
import ansor
from ansor.frontend import workloads as w
from ansor.targets import generate_sketches
from ansor.targets.cuda import lowering as L
name = sys.argv[1]; seed = int(sys.argv[2]); n = int(sys.argv[3]); which = sys.argv[4]
orig = L._nvvm_pipeline
if which == "before":
    L._nvvm_pipeline = lambda *a, **k: orig(*a, **k).replace("full-unroll=true},canonicalize,", "full-unroll=true},")
t = ansor.create_task(w.get(name), name=name, target="cuda")
sks = [s for s in generate_sketches(t) if s.name != "skip"]
rng = random.Random(seed)
for i in range(n):
    sk = rng.choice(sks); s = sk.sample(rng)
    if i == 0 and which == "before":
        continue
    t0 = time.time(); L.emit_ptx(t, sk.script(s.values()))
    print(which, i, round(time.time() - t0, 2), flush=True)

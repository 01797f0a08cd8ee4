"""Seeded tuning logs with the synthetic measurer: the "same schedules before and after" check.

    python tools/golden_logs.py OUT_DIR        # writes OUT_DIR/<name>.jsonl for each case below,
                                               # then OUT_DIR/model.json + predictions.json

Every case tunes a built-in workload with a fixed seed, the real sketch rules, annotation,
evolutionary search, C++ feature extraction and XGBoost model, and `SyntheticMeasurer` (latency
derived from the schedule key: no compiler, no timing noise). The log lines are normalised
(provenance and timestamps dropped), so two runs of one code base give byte-identical files, and
a refactoring that changes any sampled, mutated or chosen schedule changes them. An XGBoost
model pre-trained on the CPU logs is saved too, with its predictions for the matmul log's
programs: a model saved before a change must load and predict the same after it.
`tests/test_golden.py` compares today's logs with the ones in `tests/data/golden/`, written by
the commit named in that folder's README.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

#: (log name, workload, target, trials, batch size)
CASES = (
    ("matmul-512.cpu", "matmul-512", "cpu", 48, 16),
    ("convlayer.cpu", "convlayer-1x56x56x64x128x3x2x1", "cpu", 48, 16),
    ("matmul-512.cuda", "matmul-512", "cuda", 48, 16),
)
#: Small search so the check runs in seconds; the same on both sides of a comparison.
SEARCH_OPTIONS = {"population": 64, "generations": 2}
#: The model trains after the first batch (Ansor's threshold of 100 would leave it untrained);
#: one thread, so its boosting is deterministic.
MODEL_OPTIONS = {"few_shot_threshold": 16, "seed": 0, "nthread": 1}


def normalise(line: str) -> str:
    d = json.loads(line)
    d.pop("provenance", None)
    d.get("result", {}).pop("timestamp", None)
    return json.dumps(d, sort_keys=True)


def write_case(name: str, workload: str, target: str, trials: int, batch: int, out: Path) -> Path:
    import ansor
    from ansor.frontend import workloads
    from ansor.search.cost_model import XGBModel
    from ansor.measure.measurer import SyntheticMeasurer

    task = ansor.create_task(workloads.get(workload), name=workload, target=target)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "log.jsonl"
        ansor.tune(task, trials=trials, log_path=raw, seed=0, batch_size=batch,
                   measurer=SyntheticMeasurer(), search_options=dict(SEARCH_OPTIONS),
                   cost_model=XGBModel(**MODEL_OPTIONS))
        lines = [normalise(x) for x in raw.read_text().splitlines() if x.strip()]
    path = out / f"{name}.jsonl"
    path.write_text("".join(x + "\n" for x in lines))
    return path


def model_predictions(model, log: Path) -> list[float]:
    """The model's scores of `log`'s programs, features extracted by today's code."""
    from ansor import load_records
    from ansor.search.features import FeatureExtractor

    recs = load_records(log)
    with FeatureExtractor() as ext:
        feats = ext.extract(recs[0].task, [r.script for r in recs])
    return [float(x) for x in model.predict(feats)]


def write_model(out: Path) -> None:
    from ansor.search.cost_model import XGBModel
    from ansor.tuning.tuner import pretrain

    model = XGBModel(**MODEL_OPTIONS)
    pretrain(model, [out / "matmul-512.cpu.jsonl", out / "convlayer.cpu.jsonl"])
    model.save(out / "model.json")
    preds = model_predictions(model, out / "matmul-512.cpu.jsonl")
    (out / "predictions.json").write_text(json.dumps(preds) + "\n")
    print(out / "model.json")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("ANSOR_VECTOR_BITS", "256")
    for case in CASES:
        print(write_case(*case, out))
    write_model(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

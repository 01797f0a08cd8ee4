"""Same schedules before and after a refactoring, and old logs and models still load.

`tests/data/golden/` was written by `tools/golden_logs.py` at the commit named in its README (the
code before the package restructuring of issue 26). Today's code, given the same seeds, must
write byte-identical normalised logs; the saved XGBoost model must load and predict the same
scores from today's features; the old records must compile and compute the right answer.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "data" / "golden"


def _golden_module():
    spec = importlib.util.spec_from_file_location("golden_logs", ROOT / "tools" / "golden_logs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


golden = _golden_module()


@pytest.mark.parametrize("case", golden.CASES, ids=[c[0] for c in golden.CASES])
def test_seeded_tuning_writes_the_golden_log(case: tuple, tmp_path: Path) -> None:
    path = golden.write_case(*case, tmp_path)
    want = (GOLDEN / path.name).read_text().splitlines()
    got = path.read_text().splitlines()
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, f"{path.name}: record {i} differs from the golden log"


def test_saved_model_loads_and_predicts_the_same() -> None:
    from ansor.search.cost_model import XGBModel

    model = XGBModel.load(GOLDEN / "model.json", nthread=1)
    got = golden.model_predictions(model, GOLDEN / "matmul-512.cpu.jsonl")
    want = json.loads((GOLDEN / "predictions.json").read_text())
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert (g == w) if not math.isfinite(w) else abs(g - w) <= 1e-6 * max(1.0, abs(w))


def test_old_records_load_and_replay() -> None:
    import ansor
    from ansor.frontend import workloads

    log = GOLDEN / "matmul-512.cpu.jsonl"
    records = ansor.load_records(log)
    assert len(records) == 48 and all(r.task.target == "cpu" for r in records)
    fn = ansor.compile(workloads.get("matmul-512"), log=log)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((512, 512), dtype=np.float32) for _ in range(2))
    assert fn.tuned and fn.record.key == min(records, key=lambda r: r.latency).key
    out = fn(a, b)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-3)

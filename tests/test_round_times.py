"""Round times: the tuner reports each round's search overhead next to its measurement time."""

from __future__ import annotations

import io
import json
import time

import numpy as np
from ansor.search.cost_model import XGBModel
from ansor.tuning.progress import JsonProgress, RoundTimes, TableProgress
from ansor.tuning.tuner import tune


def _slow(measurer: object, seconds: float) -> object:
    """`measurer` taking `seconds` per candidate, as a real one would."""
    inner = measurer.measure  # type: ignore[attr-defined]

    def measure(inputs: list, on_result: object = None) -> list:
        time.sleep(seconds * len(inputs))
        return inner(inputs, on_result)

    measurer.measure = measure  # type: ignore[attr-defined]
    return measurer


def _features(seconds: float) -> object:
    """Stand-in features (one row from the knob values) that take `seconds` per schedule."""
    def fn(schedules: list) -> list:
        time.sleep(seconds * len(schedules))
        return [np.log2(1 + np.array([sorted(s.values().values())], dtype=np.float32)) for s in schedules]
    return fn


def test_random_search_rounds_are_timed(tmp_path, matmul_big, make_fake) -> None:
    m = _slow(make_fake(), 0.002)
    out = io.StringIO()
    res = tune(matmul_big, trials=25, log_path=tmp_path / "r.jsonl", seed=1, batch_size=8, search="random",
               measurer=m, callback=TableProgress(out))
    assert [r.candidates for r in res.rounds] == [8, 8, 8]  # + the untuned program, measured by baseline()
    for r in res.rounds:
        assert r.measure_s >= 0.002 * 8
        assert r.search_s > 0 and r.features_s == r.predict_s == 0.0  # random search times no parts
        assert r.overhead_s == r.search_s + r.train_s
    text = out.getvalue()
    assert text.count("        round ") == 3 and "round 3: search" in text
    total = RoundTimes.total(res.rounds)
    assert total.candidates == 24 and abs(total.measure_s - sum(r.measure_s for r in res.rounds)) < 1e-12
    assert f"time over 3 rounds: {total.describe()}" in text


def test_learned_search_splits_search_into_features_predict_evolution(tmp_path, matmul_big, make_fake) -> None:
    m = _slow(make_fake(), 0.001)
    out = io.StringIO()
    model = XGBModel(few_shot_threshold=16)  # trained after the first round, guides the second
    res = tune(matmul_big, trials=33, log_path=tmp_path / "l.jsonl", seed=0, batch_size=16, measurer=m,
               search="learned", cost_model=model, features_fn=_features(2e-4), callback=JsonProgress(out),
               search_options={"population": 64, "generations": 2})
    assert len(res.rounds) == 2
    # An untrained model scores at random: the first round extracts no features to search with.
    assert res.rounds[0].features_s < 2e-4  # less than one schedule's features take
    # Then every schedule the evolution scores has its features extracted: >= 64 of them.
    assert res.rounds[1].features_s >= 64 * 2e-4 and res.rounds[1].predict_s > 0
    for r in res.rounds:
        assert r.search_s >= r.features_s + r.predict_s and r.evolution_s >= 0
        assert r.measure_s >= 0.001 * 16 and r.train_s > 0
        assert "features" in r.describe() and "vs measurement" in r.describe()
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    rounds = [e for e in events if e["event"] == "round"]
    assert [e["candidates"] for e in rounds] == [16, 16]
    assert rounds[1]["features_s"] == round(res.rounds[1].features_s, 6)
    end = events[-1]
    assert end["event"] == "end" and end["time"]["candidates"] == 32
    assert abs(end["time"]["measure_s"] - sum(r.measure_s for r in res.rounds)) < 1e-5

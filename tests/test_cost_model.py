"""Cost models on synthetic programs whose throughput is a known sum over statements."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from ansor.space.schedule import Schedule
from ansor.search.cost_model import (
    RandomModel,
    XGBModel,
    create_cost_model,
    normalized_throughputs,
    pairwise_accuracy,
    r2,
    recall_at_k,
)
from ansor.measure.measurer import MeasureError, MeasureInput, MeasureResult
from ansor.core.task import SearchTask

N_FEATURES = 6
FLOPS = 10**9


def _task(h: str = "t0") -> SearchTask:
    return SearchTask(name=h, func_name="f", ir="", inputs=(), outputs=(), flops=FLOPS, hash=h)


def statement_throughput(x: np.ndarray) -> np.ndarray:
    """The ground truth: what each statement (row) contributes to its program's throughput."""
    return 0.2 + 2.0 * x[:, 0] + x[:, 1] * x[:, 2] + 0.5 * (x[:, 3] > 0.5)


def programs(
    n: int, seed: int, task: SearchTask | None = None
) -> tuple[list, list, list, np.ndarray]:
    rng = np.random.default_rng(seed)
    task = task or _task()
    inputs, results, feats, thr = [], [], [], []
    for i in range(n):
        f = rng.uniform(0, 1, (int(rng.integers(1, 4)), N_FEATURES)).astype(np.float32)
        t = float(statement_throughput(f).sum())
        inputs.append(MeasureInput(task, Schedule.of("s", {"i": i + seed * 100000}), None))
        results.append(MeasureResult(costs=(FLOPS / t / 1e9,)))
        feats.append(f)
        thr.append(t)
    return inputs, results, feats, np.array(thr)


@pytest.fixture(scope="module")
def trained() -> XGBModel:
    inputs, results, feats, _ = programs(400, seed=1)
    model = XGBModel(nthread=1)
    model.update(inputs[:200], results[:200], feats[:200])
    model.update(inputs[200:], results[200:], feats[200:])
    return model


def test_metrics() -> None:
    t = np.array([1.0, 2.0, 3.0, 4.0])
    assert pairwise_accuracy(t, t) == 1.0
    assert pairwise_accuracy(-t, t) == 0.0
    assert pairwise_accuracy(np.array([1.0, 2.0, 4.0, 3.0]), t) == pytest.approx(5 / 6)
    assert recall_at_k(np.array([4.0, 3.0, 2.0, 1.0]), t, 2) == 0.0
    assert recall_at_k(np.array([0.0, 0.0, 9.0, 8.0]), t, 2) == 1.0
    assert r2(t, t) == 1.0 and r2(np.full(4, t.mean()), t) == 0.0


def test_normalized_throughput_per_task_and_failures() -> None:
    a, b = _task("a"), _task("b")
    inputs = [MeasureInput(t, Schedule.of("s", {}), None) for t in (a, a, b, b, b)]
    results = [MeasureResult(costs=(c,)) for c in (1.0, 2.0, 4.0, 8.0)] + [
        MeasureResult(error=MeasureError.COMPILE)
    ]
    assert normalized_throughputs(inputs, results).tolist() == [1.0, 0.5, 1.0, 0.5, 0.0]


def test_xgb_ranks_held_out_programs(trained: XGBModel) -> None:
    assert trained.trained and trained.rounds > 10
    _, _, feats, thr = programs(300, seed=2)
    pred = trained.predict(feats)
    acc = pairwise_accuracy(pred, thr)
    assert acc > 0.8, acc
    assert recall_at_k(pred, thr, 30) > 0.4
    assert r2(pred, thr / thr.max()) > 0.0


def test_none_features_score_minus_inf(trained: XGBModel) -> None:
    _, _, feats, _ = programs(3, seed=3)
    pred = trained.predict([feats[0], None, feats[1], np.zeros((0, N_FEATURES), np.float32)])
    assert np.isfinite(pred[0]) and np.isfinite(pred[2])
    assert pred[1] == -np.inf and pred[3] == -np.inf
    assert RandomModel(seed=0).predict([None, feats[0]])[0] == -np.inf


def test_save_load_round_trip(trained: XGBModel, tmp_path) -> None:
    _, _, feats, _ = programs(50, seed=4)
    trained.save(tmp_path / "m.json")
    loaded = XGBModel.load(tmp_path / "m.json")
    assert loaded.trained and loaded.hyper() == trained.hyper()
    np.testing.assert_array_equal(loaded.predict(feats), trained.predict(feats))


def test_random_before_few_shot_threshold() -> None:
    inputs, results, feats, _ = programs(60, seed=5)
    model = XGBModel(few_shot_threshold=100, seed=7)
    model.update(inputs, results, feats)
    assert not model.trained
    p1 = model.predict(feats)
    assert ((p1 >= 0) & (p1 < 1)).all()
    # seeded: the same sequence of calls gives the same "predictions"
    other = XGBModel(few_shot_threshold=100, seed=7)
    np.testing.assert_array_equal(other.predict(feats), p1)
    more_in, more_res, more_f, _ = programs(60, seed=6)
    model.update(more_in, more_res, more_f)
    assert model.trained


def test_prior_guides_until_own_programs_replace_it() -> None:
    """Programs of earlier logs train the model before the search measures anything, and are
    left out once it has `few_shot_threshold` programs of its own: here the new task's programs
    run fast where the prior's ran slow (features mirrored), and the model ends up following
    the new task."""
    prior_in, prior_res, prior_f, _ = programs(200, seed=11, task=_task("old"))
    own_in, own_res, own_f, own_thr = programs(300, seed=12, task=_task("new"))
    own_f = [1.0 - f for f in own_f]
    model = XGBModel(few_shot_threshold=100, nthread=1)
    model.update_prior(prior_in, prior_res, prior_f)
    assert model.trained and model.inputs == []
    test = slice(200, 300)
    assert pairwise_accuracy(model.predict(own_f[test]), own_thr[test]) < 0.75  # the prior's view
    model.update(own_in[:50], own_res[:50], own_f[:50])  # fewer than 100 own: the prior stays
    assert len(model._training_set()[0]) == 250
    model.update(own_in[50:200], own_res[50:200], own_f[50:200])
    assert len(model._training_set()[0]) == 200
    # (0.94 here; trained on the prior and the own programs together it would be 0.81)
    assert pairwise_accuracy(model.predict(own_f[test]), own_thr[test]) > 0.9


def test_failed_programs_and_missing_features_train() -> None:
    inputs, results, feats, _ = programs(40, seed=8)
    results[0] = dataclasses.replace(results[0], costs=(), error=MeasureError.RUNTIME)
    feats[1] = None
    model = XGBModel(few_shot_threshold=10, nthread=1)
    model.update(inputs, results, feats)
    assert model.trained


def test_create() -> None:
    assert isinstance(create_cost_model("random"), RandomModel)
    assert isinstance(create_cost_model("xgb"), XGBModel)
    m = RandomModel()
    assert create_cost_model(m) is m
    with pytest.raises(ValueError):
        create_cost_model("nope")


def test_programs_of_many_statements_train_stably() -> None:
    """GPU row kernels have dozens of statements. With TVM's per-statement Hessian (2 w) the leaf
    steps of one program's statements add up n_p times and the program sums overshoot and
    diverge; with 2 w n_p the model fits and ranks."""
    rng = np.random.default_rng(5)
    task = _task()
    inputs, results, feats, thr = [], [], [], []
    for i in range(120):
        n = int(rng.integers(30, 60))
        row = rng.uniform(0, 1, (1, N_FEATURES)).astype(np.float32)
        f = np.repeat(row, n, axis=0)  # identical statements: one leaf holds all of them
        t = float(statement_throughput(f).sum())
        inputs.append(MeasureInput(task, Schedule.of("s", {"i": i}), None))
        results.append(MeasureResult(costs=(FLOPS / t / 1e9,)))
        feats.append(f)
        thr.append(t)
    model = XGBModel(few_shot_threshold=10, nthread=1)
    model.update(inputs[:100], results[:100], feats[:100])
    # it fits its training programs (with 2 w: the first round already overshoots, early stopping
    # keeps 1 round, RMSE ~4 on labels in [0, 1])
    fit = model.predict(feats[:100])
    assert model.rounds > 5
    assert np.sqrt(np.mean((fit - normalized_throughputs(inputs[:100], results[:100])) ** 2)) < 0.1
    pred = model.predict(feats[100:])
    assert np.all(np.isfinite(pred))
    assert pairwise_accuracy(pred, np.array(thr[100:])) > 0.8


def test_default_trains_after_one_batch_of_16_and_keeps_the_prior_until_100() -> None:
    """The model guides from 16 programs on (one GPU batch; results/gpu-prime/few-shot.md), while
    programs of earlier logs stay in its training set until 100 of its own are known."""
    inputs, results, feats, _ = programs(120, seed=13)
    model = XGBModel(nthread=1)
    assert model.few_shot_threshold == 16 and model.prior_until == 100
    model.update(inputs[:15], results[:15], feats[:15])
    assert not model.trained
    model.update(inputs[15:16], results[15:16], feats[15:16])
    assert model.trained
    prior_in, prior_res, prior_f, _ = programs(30, seed=14, task=_task("old"))
    pre = XGBModel(nthread=1)
    pre.update_prior(prior_in, prior_res, prior_f)
    pre.update(inputs[:99], results[:99], feats[:99])
    assert len(pre._training_set()[0]) == 129  # 99 own + the prior
    pre.update(inputs[99:100], results[99:100], feats[99:100])
    assert len(pre._training_set()[0]) == 100  # own only


def test_files_saved_before_prior_until_drop_the_prior_at_their_threshold(tmp_path) -> None:
    import json

    inputs, results, feats, _ = programs(30, seed=15)
    model = XGBModel(few_shot_threshold=20, nthread=1)
    model.update(inputs, results, feats)
    model.save(tmp_path / "m.json")
    assert XGBModel.load(tmp_path / "m.json").prior_until == 100
    doc = json.loads((tmp_path / "m.json").read_text())
    del doc["hyper"]["prior_until"]
    (tmp_path / "m.json").write_text(json.dumps(doc))
    old = XGBModel.load(tmp_path / "m.json")
    assert (old.few_shot_threshold, old.prior_until) == (20, 20)

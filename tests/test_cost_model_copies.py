"""Unrolled copies of a statement do not add up in a program's score (cost_model.merge_copies).

The features are read after the transform script, so a statement it unrolled is there once per
copy, with identical rows. Summed as separate statements, a program of more copies than any
trained one scored above every measured program (results/gpu-prime/model-extrapolation.md: the
prime GEMM's guided batch was 15 programs of 128 copies, 5-35x slower than the best measured).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from ansor.core.task import SearchTask
from ansor.measure.measurer import MeasureInput, MeasureResult
from ansor.search.cost_model import XGBModel, merge_copies
from ansor.space.schedule import Schedule

FLOPS = 10**9


def _task() -> SearchTask:
    return SearchTask(name="t", func_name="f", ir="", inputs=(), outputs=(), flops=FLOPS, hash="t")


def test_merge_copies_keeps_one_row_per_statement_with_its_count() -> None:
    a, b, c = ([v, v + 1, v + 2] for v in (1.0, 5.0, 9.0))
    f = np.array([b, a, b, c, b, a], dtype=np.float32)
    m = merge_copies(f)
    np.testing.assert_array_equal(m[:, :3], np.array([b, a, c], dtype=np.float32))  # first-seen order
    np.testing.assert_allclose(m[:, 3], np.log2(1 + np.array([3, 2, 1])))
    assert merge_copies(np.zeros((0, 3), np.float32)).shape == (0, 4)


def _programs(copies: list[int], seed: int) -> tuple[list, list, list]:
    """Programs of a few distinct statements, one of them unrolled into `c` identical rows; the
    more copies, the slower (as the prime GEMM's big register tiles were)."""
    rng = np.random.default_rng(seed)
    task = _task()
    inputs, results, feats = [], [], []
    for i, c in enumerate(copies):
        x = rng.uniform(0, 1, 4).astype(np.float32)
        head = np.stack([x, x[::-1]])  # two distinct statements (loads, the k loop)
        store = np.repeat(np.array([[1.0, 0.5, 0.25, x[0]]], np.float32), c, axis=0)  # the unrolled one
        thr = (1.0 + x[0]) / (1.0 + 0.1 * c)
        inputs.append(MeasureInput(task, Schedule.of("s", {"i": i + seed * 1000}), None))
        results.append(MeasureResult(costs=(FLOPS / thr / 1e9,)))
        feats.append(np.concatenate([head, store]))
    return inputs, results, feats


def _trained(merge: bool) -> tuple[XGBModel, list]:
    rng = np.random.default_rng(0)
    inputs, results, feats = _programs([int(c) for c in rng.choice([1, 2, 4, 8, 16], 120)], seed=1)
    model = XGBModel(few_shot_threshold=10, nthread=1, merge_copies=merge)
    model.update(inputs, results, feats)
    return model, feats


def test_more_copies_than_trained_do_not_score_above_the_measured() -> None:
    model, feats = _trained(merge=True)
    trained_best = model.predict(feats).max()
    _, _, far = _programs([128] * 8, seed=2)  # 8x the most copies measured
    assert model.predict(far).max() <= trained_best + 1e-6
    # summed row by row (before), the same model family scored them 5x above its best
    old, feats_old = _trained(merge=False)
    assert old.predict(far).max() > 3 * old.predict(feats_old).max()


def test_merged_model_saves_and_old_files_sum_every_row(tmp_path: Path) -> None:
    model, feats = _trained(merge=True)
    model.save(tmp_path / "m.json")
    loaded = XGBModel.load(tmp_path / "m.json", nthread=1)
    assert loaded.merge_copies
    np.testing.assert_array_equal(loaded.predict(feats), model.predict(feats))
    # a file saved before merge_copies existed (no such hyper-parameter) keeps summing every row
    old, feats_old = _trained(merge=False)
    old.save(tmp_path / "old.json")
    doc = json.loads((tmp_path / "old.json").read_text())
    del doc["hyper"]["merge_copies"]
    (tmp_path / "old.json").write_text(json.dumps(doc))
    legacy = XGBModel.load(tmp_path / "old.json", nthread=1)
    assert not legacy.merge_copies
    np.testing.assert_array_equal(legacy.predict(feats_old), old.predict(feats_old))
    # more feature columns than the booster was trained on: it reads the leading ones
    wide = [np.concatenate([f, np.ones((len(f), 2), np.float32)], axis=1) for f in feats]
    np.testing.assert_array_equal(loaded.predict(wide), model.predict(feats))


def _merge_one_by_one(f: np.ndarray) -> np.ndarray:
    """The reference: `np.unique(axis=0)` per program (what `merge_copies` did before the batch
    version), distinct rows in first-seen order."""
    uniq, first, counts = np.unique(f, axis=0, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    return np.concatenate([uniq[order], np.log2(1.0 + counts[order].astype(np.float32))[:, None]], axis=1)


def test_batch_merge_equals_merging_each_program(monkeypatch) -> None:
    """`_pack` merges a whole batch in one pass (row hashes, checked bitwise): the same rows, in the
    same order, as merging each program alone; also when every hash collides (the byte fallback)."""
    from ansor.search import cost_model

    rng = np.random.default_rng(3)
    feats = []
    for n in rng.integers(1, 40, 60):  # (programs without rows never reach `_pack`)
        distinct = rng.choice([0.0, -0.0, 1.0, 2.5, 1e-3], size=(max(1, n // 3), 7)).astype(np.float32)
        feats.append(distinct[rng.integers(0, len(distinct), n)])  # copies, interleaved
    want = np.concatenate([_merge_one_by_one(f) for f in feats])
    want_ids = np.repeat(np.arange(len(feats)), [len(_merge_one_by_one(f)) for f in feats])
    for cut in (None, 5):  # (-0.0 and 0.0 compare equal: one row, as np.unique's)
        rows, ids = cost_model._pack(feats, merge=True, columns=cut)
        ref = [_merge_one_by_one(f[:, :cut]) for f in feats]
        np.testing.assert_array_equal(rows, np.concatenate(ref))
        np.testing.assert_array_equal(ids, np.repeat(np.arange(len(feats)), [len(m) for m in ref]))
    monkeypatch.setattr(cost_model, "_HASH_MULT", np.zeros(4, np.uint32))  # every row hashes alike
    rows, ids = cost_model._pack(feats, merge=True)
    np.testing.assert_array_equal(rows, want)
    np.testing.assert_array_equal(ids, want_ids)

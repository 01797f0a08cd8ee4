"""Cost models: predict how fast a program is from its features (Ansor §5.2).

    (MeasureInput, MeasureResult, features) --CostModel.update--> trained model
    [features of a program: float32 [n_statements, n_features] | None] --predict--> scores

A program's score is the **sum** of per-statement predictions, higher is better; a program
without features (it failed to lower) scores `-inf`. A statement the transform script unrolled
is one statement: `merge_copies` turns its identical rows into one row that counts them (TVM
reads its features before unrolling), so a program's score cannot grow with its copies. `XGBModel` is Ansor's learned model:
gradient-boosted trees over statements, trained so that the per-program sum matches the
program's throughput normalized by its task's best (the "pack-sum" squared error, weighted by
that throughput, so that fast programs matter most); it is retrained from scratch after every
update and predicts random scores until it has seen `few_shot_threshold` programs (16: one GPU
batch; TVM waits for 100, `results/gpu-prime/few-shot.md`). Programs of earlier logs
(`update_prior`, from `tuner.pretrain`) stand in for those first ones: the model trains on them
until it has `prior_until` (100) programs of its own.
`RandomModel` is the ablation baseline. `pairwise_accuracy`, `recall_at_k` and `r2` rate
predictions against measurements.
"""

from __future__ import annotations

import abc
import json
import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ansor.measure.measurer import MeasureInput, MeasureResult

log = logging.getLogger(__name__)

Features = np.ndarray | None  # float32 [n_statements, n_features], None = no features

#: Format of `XGBModel.save` files.
MODEL_FORMAT = "ansor-xgb-model"
MODEL_VERSION = 1


class CostModel(abc.ABC):
    """Scores programs from their features; higher is better."""

    @abc.abstractmethod
    def update(
        self, inputs: list[MeasureInput], results: list[MeasureResult], features: list[Features]
    ) -> None:
        """Learn from measured programs (`features[i]` are those of `inputs[i]`)."""

    @abc.abstractmethod
    def predict(self, features: list[Features]) -> np.ndarray:
        """One score per program (float64, higher is better; `-inf` where features are None)."""

    def update_prior(
        self, inputs: list[MeasureInput], results: list[MeasureResult], features: list[Features]
    ) -> None:
        """Learn from programs measured before this search (earlier logs, `tuner.pretrain`);
        by default the same as `update`."""
        self.update(inputs, results, features)


class RandomModel(CostModel):
    """Uniform random scores in [0, 1), seeded (the ablation baseline)."""

    def __init__(self, *, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def update(
        self, inputs: list[MeasureInput], results: list[MeasureResult], features: list[Features]
    ) -> None:
        pass

    def predict(self, features: list[Features]) -> np.ndarray:
        out = self.rng.uniform(0.0, 1.0, len(features))
        out[[f is None for f in features]] = -np.inf
        return out


def normalized_throughputs(
    inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]
) -> np.ndarray:
    """Per program: flops / latency, divided by the best of its task (in [0, 1]); 0 when failed."""
    thr = np.zeros(len(inputs))
    for i, (inp, res) in enumerate(zip(inputs, results, strict=True)):
        lat = res.latency
        if res.error is None and math.isfinite(lat) and lat > 0:
            thr[i] = max(inp.task.flops, 1) / lat
    best: dict[str, float] = {}
    for inp, t in zip(inputs, thr, strict=True):
        best[inp.task.hash] = max(best.get(inp.task.hash, 0.0), float(t))
    for i, inp in enumerate(inputs):
        b = best[inp.task.hash]
        thr[i] = thr[i] / b if b > 0 else 0.0
    return thr


def merge_copies(f: np.ndarray) -> np.ndarray:
    """A program's statement rows with identical rows merged: one row per distinct statement,
    in first-seen order, each with an extra last column log2(1 + copies).

    The features are read after the transform script, so a statement the script unrolled
    (a thread's register-tile stores, unrolled by the GPU sketch's unroll knob) is there once
    per copy, with bitwise identical rows. Summed as separate statements, the copies made a
    program's score grow linearly with their count, which no label bounds: on the prime GEMM the
    model trained on 112 programs (at most 64 copies) scored programs of 128 copies 10.9 against
    0.98 for the best measured one, and the guided batch was 15 of them, 93-695 us against a
    best of 19.7 us (`results/gpu-prime/model-extrapolation.md`). TVM extracts its features
    before unrolling (one row per store, the unroll a feature); merged rows with their count
    as a feature are the same thing here. Rows are equal when their floats compare equal
    (-0.0 is 0.0; features hold no NaN). `_pack` merges a whole batch of programs at once."""
    f = np.asarray(f, dtype=np.float32)
    rows, _ = _merge_rows(f, np.zeros(len(f), dtype=np.int64))
    return rows


#: Odd 32-bit multipliers of `_merge_rows`' row hash (fixed: a hash collision only costs time).
_HASH_MULT = np.random.default_rng(0x5EED).integers(0, 2**31, size=1024, dtype=np.uint32) * 2 + 1


def _merge_rows(rows: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`merge_copies` of every program of a stack at once: `rows` [n, columns] float32 grouped by
    program (`ids`, non-decreasing program index per row) -> the merged rows (the copies column
    appended), each program's distinct rows in first-seen order, and their program index.

    Rows are grouped by (program, a 64-bit hash of the row's bits), and every row is then checked
    bitwise against its group's first row: a collision (never seen) falls back to grouping by
    the rows' bytes, so the result is exact either way. One pass over the batch instead of an
    `np.unique(axis=0)` per program (8-9 ms each on a loaded 2-core VM: 2,000 programs took 14 s)."""
    n, c = rows.shape
    canon = np.ascontiguousarray(rows, dtype=np.float32) + np.float32(0.0)  # -0.0 -> 0.0
    bits = canon.view(np.uint32)
    if n == 0:
        return np.zeros((0, c + 1), dtype=np.float32), ids[:0]
    mult = _HASH_MULT[np.arange(c) % len(_HASH_MULT)]
    key = np.empty((n, 2), dtype=np.uint64)
    key[:, 0] = ids
    key[:, 1] = (bits * mult).sum(axis=1, dtype=np.uint64)
    _, first, inverse, counts = np.unique(key.view(np.dtype((np.void, 16))).ravel(), return_index=True,
                                          return_inverse=True, return_counts=True)
    if not np.array_equal(bits, bits[first[inverse.ravel()]]):  # a hash collision: group by the bytes
        whole = np.empty((n, 8 + 4 * c), dtype=np.uint8)
        whole[:, :8] = ids.astype(">i8").view(np.uint8).reshape(n, 8)
        whole[:, 8:] = bits.view(np.uint8).reshape(n, 4 * c)
        _, first, counts = np.unique(whole.view(np.dtype((np.void, 8 + 4 * c))).ravel(), return_index=True,
                                     return_counts=True)
    order = np.argsort(first, kind="stable")
    first = first[order]
    copies = np.log2(1.0 + counts[order].astype(np.float32))[:, None]
    return np.concatenate([canon[first], copies.astype(np.float32)], axis=1), ids[first]


def _pack(
    features: Sequence[np.ndarray], *, merge: bool = False, columns: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Stack the statements of all programs: rows [sum n_statements, n_features] and the
    program index of every row. `columns`: keep the leading columns only (a booster trained
    before columns were appended); `merge`: `merge_copies` each program's rows first (after the cut)."""
    mats = [np.asarray(f, dtype=np.float32).reshape(len(f), -1)[:, :columns] for f in features]
    rows = np.concatenate(mats, axis=0)
    ids = np.repeat(np.arange(len(mats)), [len(m) for m in mats])
    if merge:
        rows, ids = _merge_rows(rows, ids)
    return rows, ids


class XGBModel(CostModel):
    """Ansor's XGBoost cost model over per-statement features, summed per program.

    Training rows are statements; all statements of a program share its label y (normalized
    throughput) and weight w = y. The loss of a program is w * (sum_i pred_i - y)^2, so every
    statement i of it gets gradient 2 w (sum - y) and hessian 2 w n_p, n_p the program's
    statement count (a custom xgboost objective; TVM uses 2 w, see `fit`); the custom metric
    is the per-program RMSE ("p-rmse"), which early stopping watches on the training set.
    Defaults are those of TVM v0.19 `auto_scheduler/cost_model/xgb_model.py`:
    `max_depth=10`, `gamma=0.001`, `min_child_weight=0`, `eta=0.2`, up to 10000 boosting
    rounds stopped after 50 without improvement, seed 43, half the cores. Departures:
    `base_score=0` (each tree sum starts at 0 instead of 0.5 per statement), the booster is cut
    back to its best round, TVM's retrain throttle (skip unless the data grew by 20%) is left out
    (every update retrains), and the model trains from `few_shot_threshold=16` programs on, not
    TVM's 100 (`num_warmup_sample`): trained on the first 16 records of the GPU and CPU logs
    in `results/`, it ranks the rest at Spearman 0.44 on average (> 0 in all 19 logs) and the
    median of its 16 top-scored held-out programs is 2.1x the held-out best against 3.2x for 16
    random ones (`results/gpu-prime/few-shot.md`); at 100, batches of 16 left the first 7 of a
    GPU search unguided. The programs of earlier logs (`update_prior`) stay in the training set
    until `prior_until=100` programs of the search's own are known (as before the threshold
    came down: a few own programs do not replace them).
    """

    def __init__(
        self,
        *,
        max_depth: int = 10,
        gamma: float = 0.001,
        min_child_weight: float = 0.0,
        eta: float = 0.2,
        num_boost_round: int = 10000,
        early_stopping_rounds: int = 50,
        min_delta: float = 0.0,
        few_shot_threshold: int = 16,
        prior_until: int = 100,
        seed: int = 43,
        nthread: int | None = None,
        merge_copies: bool = True,
    ) -> None:
        import xgboost  # deferred: importing it costs ~0.3 s

        self._xgb = xgboost
        self.max_depth = max_depth
        self.gamma = gamma
        self.min_child_weight = min_child_weight
        self.eta = eta
        self.num_boost_round = num_boost_round
        self.early_stopping_rounds = early_stopping_rounds
        self.min_delta = min_delta
        self.few_shot_threshold = few_shot_threshold
        self.prior_until = prior_until
        self.seed = seed
        self.merge_copies = merge_copies
        self.nthread = nthread if nthread is not None else max(1, (os.cpu_count() or 2) // 2)
        self.rng = np.random.default_rng(seed)
        self.booster: Any = None  # xgboost.Booster once trained (or loaded)
        self.inputs: list[MeasureInput] = []
        self.results: list[MeasureResult] = []
        self.features: list[Features] = []
        # programs of earlier logs (`update_prior`): trained on until `prior_until` (at least
        # `few_shot_threshold`) of this search's own programs are known, then left out
        self.prior: tuple[list[MeasureInput], list[MeasureResult], list[Features]] = ([], [], [])
        self.rounds = 0  # boosting rounds of the current booster

    # -- hyper-parameters ------------------------------------------------------------------
    def hyper(self) -> dict[str, Any]:
        return {
            "max_depth": self.max_depth,
            "gamma": self.gamma,
            "min_child_weight": self.min_child_weight,
            "eta": self.eta,
            "num_boost_round": self.num_boost_round,
            "early_stopping_rounds": self.early_stopping_rounds,
            "min_delta": self.min_delta,
            "few_shot_threshold": self.few_shot_threshold,
            "prior_until": self.prior_until,
            "seed": self.seed,
            "merge_copies": self.merge_copies,
        }

    def _params(self) -> dict[str, Any]:
        """xgboost booster parameters: the tree hyper-parameters of `hyper()` plus fixed settings."""
        h = self.hyper()
        return {
            **{k: h[k] for k in ("max_depth", "gamma", "min_child_weight", "eta")},
            "nthread": self.nthread,
            "verbosity": 0,
            "seed": self.seed,
            "base_score": 0.0,
            "disable_default_eval_metric": 1,
            "tree_method": "hist",
        }

    # -- training --------------------------------------------------------------------------
    def update(
        self, inputs: list[MeasureInput], results: list[MeasureResult], features: list[Features]
    ) -> None:
        """Add measured programs and retrain from scratch (once `few_shot_threshold` are known)."""
        if not (len(inputs) == len(results) == len(features)):
            raise ValueError("update: inputs, results and features differ in length")
        self.inputs += inputs
        self.results += results
        self.features += features
        if len(self.inputs) + len(self.prior[0]) < self.few_shot_threshold:
            return
        self.fit()

    def update_prior(
        self, inputs: list[MeasureInput], results: list[MeasureResult], features: list[Features]
    ) -> None:
        """Add programs of earlier logs and retrain. They stand in for this search's own warm-up
        sample: the model trains on them (with whatever it has measured) until it knows
        `prior_until` programs of its own (at least `few_shot_threshold`), and on its own
        programs only from then on.
        (Other tasks' records rank a task's programs worse than its own do: on the three
        workloads of `bench/search_efficiency.py`, pairwise accuracy 0.65-0.82 for a model
        trained on 80 network tasks, 0.83-0.92 for one trained on the task's own records.)"""
        if not (len(inputs) == len(results) == len(features)):
            raise ValueError("update_prior: inputs, results and features differ in length")
        self.prior[0].extend(inputs)
        self.prior[1].extend(results)
        self.prior[2].extend(features)
        if len(self.inputs) + len(self.prior[0]) >= self.few_shot_threshold:
            self.fit()

    def _training_set(self) -> tuple[list[MeasureInput], list[MeasureResult], list[Features]]:
        if len(self.inputs) >= max(self.few_shot_threshold, self.prior_until) or not self.prior[0]:
            return self.inputs, self.results, self.features
        return (self.prior[0] + self.inputs, self.prior[1] + self.results, self.prior[2] + self.features)

    def fit(self) -> None:
        """Train a new booster on everything seen (programs without features are skipped), the
        prior of `update_prior` included while fewer than `prior_until` own programs are known."""
        inputs, results, features = self._training_set()
        y_all = normalized_throughputs(inputs, results)
        keep = [i for i, f in enumerate(features) if f is not None and len(f) > 0]
        if not keep:
            return
        feats = [features[i] for i in keep]
        y = y_all[keep]
        rows, ids = _pack(feats, merge=self.merge_copies)  # type: ignore[arg-type]
        xgb = self._xgb
        dtrain = xgb.DMatrix(rows, label=y[ids], weight=y[ids])
        n_prog = len(feats)
        # Hessian 2 w n_p (n_p: statements of the row's program), not TVM's 2 w: statements of one
        # program that land in one leaf all move together, so with 2 w a leaf's Newton step moves
        # their sum n_p times too far, and programs of more than ~1/eta statements (GPU row kernels)
        # oscillate and diverge to inf (then NaN gradients). n_p 2 w bounds the true Hessian
        # (Gershgorin) and is TVM's value for one-statement programs.
        hess = 2.0 * y[ids] * np.bincount(ids, minlength=n_prog)[ids]

        def objective(preds: np.ndarray, _d: Any) -> tuple[np.ndarray, np.ndarray]:
            total = np.bincount(ids, weights=preds, minlength=n_prog)
            return 2.0 * (total[ids] - y[ids]) * y[ids], hess

        def p_rmse(preds: np.ndarray, _d: Any) -> tuple[str, float]:
            total = np.bincount(ids, weights=preds, minlength=n_prog)
            return "p-rmse", float(np.sqrt(np.mean(np.square(total - y))))

        stop = xgb.callback.EarlyStopping(
            rounds=self.early_stopping_rounds,
            metric_name="p-rmse",
            data_name="tr",
            maximize=False,
            save_best=True,
            min_delta=self.min_delta,
        )
        self.booster = xgb.train(
            self._params(),
            dtrain,
            num_boost_round=self.num_boost_round,
            evals=[(dtrain, "tr")],
            obj=objective,
            custom_metric=p_rmse,
            verbose_eval=False,
            callbacks=[stop],
        )
        self.rounds = self.booster.num_boosted_rounds()
        log.debug(
            "XGBModel: trained on %d programs (%d statements), %d rounds",
            n_prog,
            len(rows),
            self.rounds,
        )

    # -- prediction ------------------------------------------------------------------------
    @property
    def trained(self) -> bool:
        return self.booster is not None

    def predict(self, features: list[Features]) -> np.ndarray:
        """Sum of statement predictions per program; uniform random in [0, 1) until trained."""
        valid = [i for i, f in enumerate(features) if f is not None and len(f) > 0]
        if self.booster is None:
            out = self.rng.uniform(0.0, 1.0, len(features))
        else:
            out = np.zeros(len(features))
            if valid:
                # A booster saved before columns were appended (the tensor-core slots) reads
                # the leading columns it was trained on; new columns only ever go at the end
                # (merged rows carry one more, their copies, after the feature columns).
                columns = self.booster.num_features() - int(self.merge_copies)
                rows, ids = _pack([features[i] for i in valid], merge=self.merge_copies,  # type: ignore[misc]
                                  columns=columns)
                raw = self.booster.predict(self._xgb.DMatrix(rows), output_margin=True)
                out[valid] = np.bincount(ids, weights=raw.astype(np.float64), minlength=len(valid))
        invalid = np.ones(len(features), dtype=bool)
        invalid[valid] = False
        out[invalid] = -np.inf
        return out

    # -- persistence -----------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """One JSON file: this model's hyper-parameters and state, and the xgboost model (JSON)."""
        doc = {
            "format": MODEL_FORMAT,
            "version": MODEL_VERSION,
            "hyper": self.hyper(),
            "n_programs": len(self.inputs),
            "rounds": self.rounds,
            "booster": json.loads(bytes(self.booster.save_raw("json")))
            if self.booster is not None
            else None,
        }
        Path(path).write_text(json.dumps(doc))

    @classmethod
    def load(cls, path: str | Path, *, nthread: int | None = None) -> XGBModel:
        """A model saved by `save`; it predicts with the saved booster until its next retrain."""
        doc = json.loads(Path(path).read_text())
        if doc.get("format") != MODEL_FORMAT or int(doc.get("version", -1)) != MODEL_VERSION:
            raise ValueError(f"{path}: not an {MODEL_FORMAT} v{MODEL_VERSION} file")
        # files saved before `merge_copies` trained on every row: they keep doing so; before
        # `prior_until`, the prior was left out at `few_shot_threshold` own programs
        old = {"merge_copies": False, "prior_until": doc["hyper"].get("few_shot_threshold", 100)}
        model = cls(**{**old, **doc["hyper"]}, nthread=nthread)
        if doc["booster"] is not None:
            model.booster = model._xgb.Booster(
                params={"nthread": model.nthread},
                model_file=bytearray(json.dumps(doc["booster"]).encode()),
            )
            model.rounds = int(doc["rounds"])
        return model


def create_cost_model(kind: str | CostModel, *, seed: int = 0) -> CostModel:
    """Resolve a model name ("xgb", "random") or pass a model through."""
    if isinstance(kind, CostModel):
        return kind
    if kind == "xgb":
        return XGBModel(seed=seed)
    if kind == "random":
        return RandomModel(seed=seed)
    raise ValueError(f"unknown cost model {kind!r} (expected 'xgb' or 'random')")


# ----------------------------------------------------------------------------------------------
# Metrics: how well predictions rank measured programs


def pairwise_accuracy(pred: np.ndarray, true: np.ndarray) -> float:
    """Fraction of pairs with different true values that `pred` orders the same way."""
    p, t = np.asarray(pred, dtype=np.float64), np.asarray(true, dtype=np.float64)
    dt = np.sign(t[:, None] - t[None, :])
    dp = np.sign(p[:, None] - p[None, :])
    mask = np.triu(dt != 0, k=1)
    n = int(mask.sum())
    return float((dt[mask] == dp[mask]).sum() / n) if n else 1.0


def recall_at_k(pred: np.ndarray, true: np.ndarray, k: int) -> float:
    """Share of the k truly best programs (highest `true`) among the k best predicted."""
    p, t = np.asarray(pred), np.asarray(true)
    k = min(k, len(t))
    if k <= 0:
        return 0.0
    top_pred = set(np.argsort(-p, kind="stable")[:k].tolist())
    top_true = set(np.argsort(-t, kind="stable")[:k].tolist())
    return len(top_pred & top_true) / k


def r2(pred: np.ndarray, true: np.ndarray) -> float:
    """Coefficient of determination of `pred` against `true` (1 is perfect)."""
    p, t = np.asarray(pred, dtype=np.float64), np.asarray(true, dtype=np.float64)
    ss_tot = float(np.sum(np.square(t - t.mean())))
    ss_res = float(np.sum(np.square(t - p)))
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)

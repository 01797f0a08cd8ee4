"""Evolutionary search guided by a learned cost model (Ansor §5.1).

    sketches --sample--> random population (+ best measured schedules, + other tasks' best
        adapted to this task when a task scheduler calls `transfer`)
        --features_fn--> features --CostModel.predict--> scores
        --select parents (proportional to score), mutate / crossover, keep the best--> x generations
        --> top transferred (<= transfer_ratio n)  +  top by predicted score, unmeasured
            +  eps n random unmeasured  = next batch

A schedule is a sketch name and knob values, so the genetic operators act on knob values:

- **mutation** (probability `mutation_prob` per child), one of (weights of TVM's CPU policy):
  tile size (0.90: move a prime factor of one loop's split between two of its levels, so the
  tile sizes still nest; for a loop whose register tile may be ragged, sometimes redraw that
  tile instead), compute location (0.05: another value of a non-tile, non-unroll knob,
  e.g. a pad's location), auto-unroll (0.04: another `auto_unroll_max_step`), parallel
  granularity (0.01: move a prime factor between the S0 (parallel) and S1 levels of a space loop);
- **crossover** (otherwise, when `crossover` is on and the sketch has several stages): two
  parents of the same sketch; each stage takes all of its knobs from one parent, at least one
  from each; children that fail `annotation.validate` are dropped. Otherwise the parent is copied.

Children are deduplicated, scored, and the best `population` of parents + children survive.
The model is trained by the tuner, not here: `update` only records what was measured (never
proposed again) and the fastest measured schedules (seeds of the next initial population).
Deterministic given `seed` (one `random.Random` and one `numpy` generator).
"""

from __future__ import annotations

import functools
import heapq
import logging
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ansor.targets.cpu.annotation import (
    RAGGED_PROB,
    SamplingError,
    Schedule,
    choose_sizes,
    factors_from_sizes,
    innermost_limit,
    ragged_options,
    sizes_from_factors,
    sizes_nest,
)
from ansor.search.cost_model import CostModel
from ansor.measure.measurer import MeasureInput, MeasureResult
from ansor.search.policy import SearchPolicy
from ansor.targets.cpu.sketch import MAX_REGISTER_TILE, LoopSplit, Sketch, is_ragged

log = logging.getLogger(__name__)

FeaturesFn = Callable[[list[Schedule]], list[np.ndarray | None]]

#: Mutation kinds and their weights (TVM v0.19 `sketch_policy.cc`, CPU: MutateTileSize 0.90,
#: MutateComputeLocation 0.05, MutateAutoUnroll 0.04, MutateParallel 0.01).
MUTATION_WEIGHTS: dict[str, float] = {
    "tile": 0.90,
    "location": 0.05,
    "unroll": 0.04,
    "parallel": 0.01,
}


@functools.cache
def _prime_factors(n: int) -> tuple[int, ...]:
    out, d = [], 2
    while d * d <= n:
        while n % d == 0:
            out.append(d)
            n //= d
        d += 1
    if n > 1:
        out.append(n)
    return tuple(out)



#: Stand-in features for models that ignore them (random scores); not None, which scores -inf.
_NO_FEATURES = np.zeros((1, 1), dtype=np.float32)

class _SketchInfo:
    """What the genetic operators need to know about one sketch, computed once: knob groups
    and a compiled form of `annotation.validate` / `annotation.sample` (the same rules, without
    rebuilding knob names on every call; `sample` rejects per stage instead of per sketch, which
    draws from the same distribution since the constraints are per stage)."""

    def __init__(self, sketch: Sketch, ragged_prob: float = RAGGED_PROB) -> None:
        self.sketch = sketch
        self.ragged_prob = ragged_prob
        self.tile_splits: tuple[LoopSplit, ...] = tuple(
            s for s in sketch.splits if s.tile_knobs and s.extent > 1
        )
        self.parallel_splits = tuple(s for s in self.tile_splits if s.kind == "S" and s.levels >= 2)
        tile_names = {n for s in sketch.splits for n in s.tile_knobs}
        unroll_names = {st.unroll_knob for st in sketch.stages}
        self.unroll_knobs = tuple(
            k for k in sketch.knobs if k.name in unroll_names and len(k.options) > 1
        )
        self.other_knobs = tuple(
            k
            for k in sketch.knobs
            if k.name not in tile_names and k.name not in unroll_names and len(k.options) > 1
        )
        # Knobs of each stage (crossover unit); knobs of no stage go with the first group.
        groups = [
            [
                *(n for s in st.splits for n in s.tile_knobs),
                *(f"pad{p}.loc" for p in st.pads),
                st.unroll_knob,
            ]
            for st in sketch.stages
        ]
        known = {n for g in groups for n in g}
        rest = [k.name for k in sketch.knobs if k.name not in known]
        if groups:
            groups[0] += rest
        self.stage_knobs: tuple[tuple[str, ...], ...] = tuple(tuple(g) for g in groups)
        # compiled validation / sampling
        self.names = tuple(sorted(k.name for k in sketch.knobs))
        self.options = {k.name: frozenset(k.options) for k in sketch.knobs}
        self.non_tile = tuple(k for k in sketch.knobs if k.name not in tile_names)
        self.tile_knob_splits = tuple(s for s in sketch.splits if s.tile_knobs)
        #: ragged-capable splits (`sketch.py`); `valid` checks the others as (knobs, extent,
        #: innermost limit) chains
        self.ragged_splits = tuple(s for s in self.tile_knob_splits if s.ragged)
        self.exact_chains = tuple(
            (s.tile_knobs, s.extent, innermost_limit(s)) for s in self.tile_knob_splits if not s.ragged
        )
        self.stage_splits = tuple(
            (
                tuple((s.tile_knobs, s) for s in st.splits if s.tile_knobs),
                tuple(
                    s.tile_knobs[-1]
                    for s in st.splits
                    if s.tile_knobs and (s.kind == "S" or st.kind != "mlt") and st.kind != "chain"
                ),
            )
            for st in sketch.stages
        )
        #: register-tile knobs of the stage owning each split
        self.split_reg = {
            s: reg
            for st, (_, reg) in zip(sketch.stages, self.stage_splits, strict=True)
            for s in st.splits
        }

    def valid(self, values: Mapping[str, int]) -> bool:
        """`annotation.validate(sketch, values) is None`, faster."""
        if hasattr(self.sketch, "validate"):  # GPU sketches: device limits (gpu_rules.py)
            return self.sketch.validate(values) is None
        for name, opts in self.options.items():
            if values.get(name) not in opts:
                return False
        for names, extent, limit in self.exact_chains:
            outer = extent
            for n in names:
                v = values[n]
                if outer % v:
                    return False
                outer = v
            if outer > limit:
                return False
        for split in self.ragged_splits:
            sizes = [values[n] for n in split.tile_knobs]
            if not sizes_nest(split, sizes) or sizes[-1] > innermost_limit(split):
                return False
        for _, reg in self.stage_splits:
            if math.prod(values[n] for n in reg) > MAX_REGISTER_TILE:
                return False
        return True

    def sample(self, rng: random.Random, *, max_tries: int = 1000) -> Schedule:
        """A random valid annotation (as `annotation.sample`)."""
        if hasattr(self.sketch, "sample"):  # GPU sketches (gpu_rules.py)
            return self.sketch.sample(rng)
        values: dict[str, int] = {}
        for splits, reg in self.stage_splits:
            for _ in range(max_tries):
                for names, split in splits:
                    values.update(zip(names, choose_sizes(split, rng, self.ragged_prob), strict=True))
                if math.prod(values[n] for n in reg) <= MAX_REGISTER_TILE:
                    break
            else:
                raise SamplingError(
                    f"sketch {self.sketch.name}: no valid annotation found in {max_tries} tries"
                )
        for k in self.non_tile:
            values[k.name] = rng.choice(k.options)
        return self.schedule(values)

    def adapt(self, values: Mapping[str, int], rng: random.Random) -> Schedule | None:
        """A valid schedule of this sketch as close as possible to `values`, knob values of
        another task's schedule of a sketch with the same name (transfer between similar tasks).

        Tile sizes keep their absolute sizes where they can: for each loop, from the innermost
        level out, the largest size that divides the loop's extent, is a multiple of the next
        inner level's and is at most the donor's (the register tile and cache tiles of a 3x3
        convolution transfer to one of another shape). On a ragged-capable loop (unless
        `ragged_prob` is 0) the donor's register tile is kept as it is when it fits below the
        level above it. Other knobs keep the donor's value when it is one of this sketch's
        options; knobs the donor lacks are drawn at random. None when the result breaks the
        register-tile limit (or a GPU sketch's device limits)."""
        if any(n not in values for n in self.names):
            try:
                fill = self.sample(rng).values()
            except SamplingError:
                return None
        else:
            fill = {}
        new: dict[str, int] = {}

        def nest(donor: list[int], extent: int, limit: int) -> list[int]:
            sizes = [0] * len(donor)
            inner = 1
            for lv in range(len(donor) - 1, -1, -1):
                cap = min(max(donor[lv], inner), extent, limit if lv == len(donor) - 1 else extent)
                size = max(d for d in range(inner, cap + 1, inner) if extent % d == 0)
                sizes[lv] = inner = size
            return sizes

        ragged = set(self.ragged_splits) if self.ragged_prob > 0 else set()
        for split in self.tile_knob_splits:
            names, extent, limit = split.tile_knobs, split.extent, innermost_limit(split)
            donor = [int(values[n]) if n in values else int(fill[n]) for n in names]
            sizes = nest(donor, extent, limit)
            if split in ragged and len(names) >= 2 and donor[-1] != sizes[-1]:
                # keep the donor's register tile, ragged here, above exact levels of its own
                above = nest(donor[:-1], extent, extent)
                if 1 < donor[-1] <= limit and donor[-1] < above[-1]:
                    sizes = [*above, donor[-1]]
            new.update(zip(names, sizes, strict=True))
        for k in self.non_tile:
            v = values.get(k.name)
            new[k.name] = int(v) if v in self.options[k.name] else int(fill.get(k.name, k.options[0]))
        for name in self.names:  # anything left (no CPU sketch has such knobs)
            new.setdefault(name, int(values[name]) if values.get(name) in self.options[name]
                           else int(fill.get(name, min(self.options[name]))))
        return self.schedule(new) if self.valid(new) else None

    def schedule(self, values: Mapping[str, int]) -> Schedule:
        """`Schedule.of(sketch name, values)` for int values of exactly this sketch's knobs."""
        return Schedule(
            self.sketch.name, tuple(zip(self.names, map(values.__getitem__, self.names)))
        )


class _Pool:
    """Every schedule seen in one search round, numbered once (hashing a schedule is not cheap),
    with its predicted score once scored."""

    def __init__(self) -> None:
        self.items: list[Schedule] = []
        self.scores: list[float] = []
        self.index: dict[Schedule, int] = {}

    def add(self, schedules: list[Schedule]) -> list[int]:
        """Ids of the schedules that were new to the pool (duplicates dropped)."""
        out = []
        for s in schedules:
            if s not in self.index:
                self.index[s] = len(self.items)
                out.append(len(self.items))
                self.items.append(s)
        return out


class EvolutionarySearch(SearchPolicy):
    """Ansor's policy: evolutionary search over sketch annotations, scored by a cost model.

    Hyper-parameters (defaults of TVM v0.19 `SketchPolicy.DEFAULT_PARAMS`):
    `population=2048` (evolutionary_search_population), `generations=4`
    (evolutionary_search_num_iters), `mutation_prob=0.85` (evolutionary_search_mutation_prob),
    `eps_greedy=0.05` (share of each batch taken from random samples, rounded down),
    `use_measured_ratio=0.2` (sample_init_use_measured_ratio: at most this share of the initial
    population are the fastest measured schedules). `crossover=False` disables crossover
    (TVM v0.19 has none; the paper does). `features_fn` maps schedules to per-statement feature
    matrices (None when a schedule cannot be lowered: it scores -inf); `features` caches them
    for the last `feature_cache_size` schedules. `history` gives
    (schedule, seconds) of schedules measured before (resuming); their keys are also `measured`.
    `ragged_prob` (ours, `annotation.RAGGED_PROB`): how often sampling and tile mutations give a
    ragged-capable loop a register tile that leaves a partial tile; 0 keeps Ansor's exact splits
    (the ablation of `bench/ragged_tiles.py`).

    Transfer between the tasks of a network (our addition; TVM shares only the cost model):
    `transfer(schedules)` hands over the fastest schedules of similar tasks, adapted to this
    task's shapes (`_SketchInfo.adapt`). They join the initial population, and up to
    `transfer_ratio` of each batch is the unmeasured ones the model scores highest, so a task
    starts from what its siblings already learned instead of from random samples.
    """

    def __init__(
        self,
        sketches: Sequence[Sketch],
        model: CostModel,
        features_fn: FeaturesFn,
        *,
        seed: int = 0,
        measured: set[str] | None = None,
        history: Sequence[tuple[Schedule, float]] = (),
        population: int = 2048,
        generations: int = 4,
        mutation_prob: float = 0.85,
        eps_greedy: float = 0.05,
        use_measured_ratio: float = 0.2,
        transfer_ratio: float = 0.25,
        crossover: bool = True,
        mutation_weights: Mapping[str, float] = MUTATION_WEIGHTS,
        feature_cache_size: int = 16384,
        ragged_prob: float = RAGGED_PROB,
    ) -> None:
        self.sketches = [s for s in sketches if s.stages] or list(sketches)
        self.info = {s.name: _SketchInfo(s, ragged_prob) for s in self.sketches}
        self.model = model
        self.features_fn = features_fn
        self.rng = random.Random(seed)
        self.np_rng = np.random.default_rng(seed)
        self.measured: set[str] = set(measured or ())  # keys measured or already proposed
        self.best_measured: dict[Schedule, float] = {}  # successful schedules -> seconds
        self.population = population
        self.generations = generations
        self.mutation_prob = mutation_prob
        self.eps_greedy = eps_greedy
        self.use_measured_ratio = use_measured_ratio
        self.transfer_ratio = transfer_ratio
        #: adapted schedules of similar tasks (`transfer`), best donor first
        self.foreign: list[Schedule] = []
        self.crossover = crossover
        self.mutation_weights = dict(mutation_weights)
        self._mutation_kinds: dict[str, tuple[list[str], list[float]]] = {}
        for name, info in self.info.items():
            kinds = [
                k for k, w in self.mutation_weights.items() if w > 0 and self._applicable(info, k)
            ]
            self._mutation_kinds[name] = (kinds, [self.mutation_weights[k] for k in kinds])
        self.feature_cache_size = feature_cache_size
        self._feature_cache: dict[Schedule, np.ndarray | None] = {}
        #: Timings and counts of the last `next_batch` (seconds): total, features_fn, predict.
        self.last_stats: dict[str, float] = {}
        for sch, lat in history:
            self._record(sch, lat)

    # -- SearchPolicy ----------------------------------------------------------------------
    def update(self, inputs: list[MeasureInput], results: list[MeasureResult]) -> None:
        for inp, res in zip(inputs, results, strict=True):
            self._record(inp.schedule, res.latency)

    def next_batch(self, n: int) -> list[Schedule]:
        t_start = time.perf_counter()
        self._t_features = self._t_predict = 0.0
        pool = _Pool()
        pop = pool.add(self._initial_population())
        self._score(pool)
        foreign = [pool.index[s] for s in self.foreign if s in pool.index]
        for _ in range(self.generations):
            children = pool.add(self._offspring(pool, pop))
            self._score(pool)
            both = pop + children  # distinct ids: children are new to the pool
            both.sort(key=pool.scores.__getitem__, reverse=True)  # stable: ties keep pool order
            pop = both[: self.population]
        n_random = int(self.eps_greedy * n)
        out: list[Schedule] = []
        n_foreign = min(len(foreign), int(self.transfer_ratio * n + 0.5))
        for i in sorted(foreign, key=pool.scores.__getitem__, reverse=True):
            if len(out) >= n_foreign or pool.scores[i] == -math.inf:
                break
            key = pool.items[i].key()
            if key not in self.measured:
                self.measured.add(key)
                out.append(pool.items[i])
        self.foreign = [s for s in self.foreign if s.key() not in self.measured]
        order = sorted(range(len(pool.items)), key=pool.scores.__getitem__, reverse=True)
        for i in order:
            if len(out) == n - n_random or pool.scores[i] == -math.inf:
                break
            key = pool.items[i].key()
            if key not in self.measured:
                self.measured.add(key)
                out.append(pool.items[i])
        out += self._random_unmeasured(n - len(out))
        total = time.perf_counter() - t_start
        self.last_stats = {
            "total_s": total,
            "features_s": self._t_features,
            "predict_s": self._t_predict,
            "search_s": total - self._t_features - self._t_predict,
            "scored": float(len(pool.items)),
        }
        log.debug(
            "evolution: %d scored, %.2f s (features %.2f s, predict %.2f s)",
            len(pool.items),
            total,
            self._t_features,
            self._t_predict,
        )
        return out  # shorter than n when the space is exhausted

    def transfer(self, schedules: Sequence[Schedule]) -> int:
        """Replace the foreign seeds by `schedules` (other tasks' schedules, best first) adapted
        to this task; those of sketches this task lacks are dropped. Returns how many were kept."""
        out: dict[Schedule, None] = {}
        for sch in schedules:
            info = self.info.get(sch.sketch)
            if info is None:
                continue
            mine = info.adapt(sch.values(), self.rng)
            if mine is not None and mine.key() not in self.measured:
                out.setdefault(mine)
        self.foreign = list(out)
        return len(self.foreign)

    def features(self, schedules: list[Schedule]) -> list[np.ndarray | None]:
        """`features_fn(schedules)`, remembering the last `feature_cache_size` schedules' features
        (the tuner asks again for those of the programs it measured, to train the model)."""
        cache = self._feature_cache
        missing = [s for s in dict.fromkeys(schedules) if s not in cache]
        if missing:
            cache.update(zip(missing, self.features_fn(missing), strict=True))
        out = [cache[s] for s in schedules]
        for old in list(cache)[: max(0, len(cache) - self.feature_cache_size)]:
            del cache[old]
        return out

    # -- internals -------------------------------------------------------------------------
    def _record(self, sch: Schedule, latency: float) -> None:
        self.measured.add(sch.key())
        if sch.sketch in self.info and math.isfinite(latency):
            self.best_measured[sch] = min(latency, self.best_measured.get(sch, math.inf))

    def _initial_population(self) -> list[Schedule]:
        n_meas = min(len(self.best_measured), int(self.use_measured_ratio * self.population))
        best = heapq.nsmallest(n_meas, self.best_measured, key=self.best_measured.__getitem__)
        out = dict.fromkeys(best)
        for sch in self.foreign[: max(0, int(self.use_measured_ratio * self.population) - len(out))]:
            out.setdefault(sch)
        want = self.population
        for _ in range(2 * self.population):
            if len(out) >= want:
                break
            try:
                out.setdefault(self.info[self.rng.choice(self.sketches).name].sample(self.rng))
            except SamplingError:
                continue
        return list(out)

    def _random_unmeasured(self, n: int) -> list[Schedule]:
        out: list[Schedule] = []
        for _ in range(50 * n):
            if len(out) >= n:
                break
            try:
                sch = self.info[self.rng.choice(self.sketches).name].sample(self.rng)
            except SamplingError:
                continue
            key = sch.key()
            if key not in self.measured:
                self.measured.add(key)
                out.append(sch)
        return out

    def _model_ignores_features(self) -> bool:
        from ansor.search.cost_model import RandomModel

        return isinstance(self.model, RandomModel) or getattr(self.model, "trained", True) is False

    def _score(self, pool: _Pool) -> None:
        """Predict the scores of the schedules of `pool` not scored yet."""
        new = pool.items[len(pool.scores) :]
        if not new:
            return
        t0 = time.perf_counter()
        if self._model_ignores_features():
            # An untrained model (or the random one) scores at random: extracting ~8k programs'
            # features per round for it would only cost time (the measured ones are extracted for
            # training by the tuner anyway).
            feats: list = [_NO_FEATURES] * len(new)
        else:
            feats = self.features(new)
        t1 = time.perf_counter()
        pred = np.asarray(self.model.predict(feats), dtype=np.float64)
        t2 = time.perf_counter()
        self._t_features += t1 - t0
        self._t_predict += t2 - t1
        pool.scores += [-math.inf if math.isnan(p) else p for p in pred.tolist()]

    def _offspring(self, pool: _Pool, pop: list[int]) -> list[Schedule]:
        """Up to `population` children of parents drawn with probability proportional to
        max(score, 0) (uniformly among valid ones when no score is positive)."""
        fit = np.array([pool.scores[i] for i in pop], dtype=np.float64)
        finite = np.isfinite(fit)
        if not finite.any():
            return []
        w = np.where(finite, np.maximum(fit, 0.0), 0.0)
        if w.sum() <= 0:
            w = finite.astype(np.float64)
        drawn = self.np_rng.choice(len(pop), size=self.population, p=w / w.sum()).tolist()
        parents = [pool.items[pop[j]] for j in drawn]
        by_sketch: dict[str, list[Schedule]] = {}
        for sch in parents:
            by_sketch.setdefault(sch.sketch, []).append(sch)
        out: list[Schedule] = []
        rng = self.rng
        for parent in parents:
            info = self.info.get(parent.sketch)
            if info is None:
                continue
            if rng.random() < self.mutation_prob:
                child = self.mutate(parent)
            elif self.crossover and len(info.stage_knobs) > 1:
                other = rng.choice(by_sketch[parent.sketch])
                child = self.cross(parent, other) if other is not parent else None
            else:
                child = None  # the parent survives as is (it stays in the population)
            if child is not None:
                out.append(child)
        return out

    # -- genetic operators (public for tests) -----------------------------------------------
    def mutate(self, parent: Schedule, *, tries: int = 8) -> Schedule | None:
        """A valid schedule one mutation away from `parent` (None when none was found)."""
        info = self.info[parent.sketch]
        kinds, weights = self._mutation_kinds[parent.sketch]
        if not kinds:
            return None
        values = parent.values()
        rng = self.rng
        for _ in range(tries):
            kind = rng.choices(kinds, weights)[0]
            new = dict(values)
            if kind in ("tile", "parallel"):
                split = rng.choice(info.tile_splits if kind == "tile" else info.parallel_splits)
                names = split.tile_knobs
                sizes = [new[n] for n in names]
                # A ragged register tile (see `sketch.py`) sits outside the factor chain: the
                # factor moves act on the levels above it, and a tile mutation of a ragged-capable
                # loop may instead redraw it (another ragged size, or a divisor).
                tail = sizes[-1:] if is_ragged(split, new) else []
                if (kind == "tile" and split.ragged and len(sizes) >= 2
                        and rng.random() < (0.5 if tail else info.ragged_prob)):
                    options = [v for v in ragged_options(split, sizes[-2]) if v != sizes[-1]]
                    if tail:
                        limit = innermost_limit(split)
                        options += [d for d in range(1, min(limit, sizes[-2]) + 1) if sizes[-2] % d == 0]
                    if not options:
                        continue
                    new[names[-1]] = rng.choice(options)
                    if math.prod(new[n] for n in info.split_reg.get(split, ())) > MAX_REGISTER_TILE:
                        continue
                    return info.schedule(new)
                names = names[: len(names) - len(tail)]
                factors = list(factors_from_sizes(split.extent, sizes[: len(names)]))
                if kind == "tile":
                    src = rng.choice([lv for lv, f in enumerate(factors) if f > 1])
                    dst = rng.choice([lv for lv in range(len(factors)) if lv != src])
                else:
                    src, dst = (0, 1) if rng.random() < 0.5 else (1, 0)
                    if factors[src] == 1:
                        src, dst = dst, src
                    if factors[src] == 1:
                        continue
                p = rng.choice(_prime_factors(factors[src]))
                factors[src] //= p
                factors[dst] *= p
                if not tail and factors[-1] > innermost_limit(split):
                    continue
                new.update(zip(names, sizes_from_factors(tuple(factors)), strict=True))
                if tail and not sizes_nest(split, [new[n] for n in split.tile_knobs]):
                    continue  # the level above the ragged tile must stay larger than it
                # the sizes nest by construction; only the stage's register tile may break
                if math.prod(new[n] for n in info.split_reg.get(split, ())) > MAX_REGISTER_TILE:
                    continue
                if hasattr(info.sketch, "validate") and not info.valid(new):  # GPU: device limits
                    continue
            else:
                knob = rng.choice(info.unroll_knobs if kind == "unroll" else info.other_knobs)
                new[knob.name] = rng.choice([o for o in knob.options if o != new[knob.name]])
            return info.schedule(new)
        return None

    @staticmethod
    def _applicable(info: _SketchInfo, kind: str) -> bool:
        return bool(
            {
                "tile": info.tile_splits,
                "parallel": info.parallel_splits,
                "unroll": info.unroll_knobs,
                "location": info.other_knobs,
            }[kind]
        )

    def cross(self, a: Schedule, b: Schedule) -> Schedule | None:
        """Each stage's knobs from `a` or `b` (at least one stage from each); None if invalid."""
        if a.sketch != b.sketch:
            raise ValueError(
                f"crossover of schedules of different sketches ({a.sketch}, {b.sketch})"
            )
        info = self.info[a.sketch]
        groups = info.stage_knobs
        if len(groups) < 2:
            return None
        pick = [self.rng.random() < 0.5 for _ in groups]
        if all(pick) or not any(pick):
            j = self.rng.randrange(len(groups))
            pick[j] = not pick[j]
        va, vb = a.values(), b.values()
        new = dict(va)
        for group, from_b in zip(groups, pick, strict=True):
            if from_b:
                for name in group:
                    new[name] = vb[name]
        if not info.valid(new):
            return None
        return info.schedule(new)

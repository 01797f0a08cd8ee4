"""Evolutionary search guided by a learned cost model (Ansor §5.1).

    sketches --sample--> random population (+ best measured schedules, + other tasks' best
        adapted to this task when a task scheduler calls `transfer`, + the sketches' seeds)
        --features_fn--> features --CostModel.predict--> scores
        --select parents (proportional to score), mutate / crossover, keep the best--> x generations
        --> top transferred (<= transfer_ratio n)  +  top by predicted score, unmeasured
            +  eps n random unmeasured (rounded at random)  = next batch

A schedule is a sketch name and knob values, so the genetic operators act on knob values:

- **mutation** (probability `mutation_prob` per child), one of (weights of TVM's CPU policy):
  tile size (0.90: move a prime factor of one loop's split between two of its levels, so the
  tile sizes still nest; for a loop whose register tile may be ragged, sometimes redraw that
  tile instead), compute location (0.05: another value of a non-tile, non-unroll knob,
  e.g. a pad's location), auto-unroll (0.04: another `auto_unroll_max_step`), parallel
  granularity (0.01: move a prime factor between the S0 (parallel) and S1 levels of a space loop);
- **crossover** (otherwise, when `crossover` is on and the sketch has several stages): two
  parents of the same sketch; each stage takes all of its knobs from one parent, at least one
  from each; children that fail the sketch's `validate` are dropped. Otherwise the parent is copied.

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

from ansor.measure.measurer import MeasureInput, MeasureResult
from ansor.search.cost_model import CostModel
from ansor.search.policy import SearchPolicy
from ansor.space.schedule import SamplingError, Schedule, factors_from_sizes, sizes_from_factors, sizes_nest
from ansor.space.search_space import RAGGED_PROB, SearchSpace
from ansor.space.sketch import Sketch

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


#: The most of an untrained batch the sketches asking for a share take together: the rest follows
#: the plain order. Measured on BERT's matmul + layer-norm task (2 chain sketches of 0.5 each took
#: every batch: the unfused sketches got 1 of 64 trials and the best program was 4.21 ms against
#: 3.40 ms without the chain sketches).
MAX_RESERVED_SHARE = 0.5


def _reserve_shares(order: list[int], sketches: list[str], shares: dict[str, float], n: int) -> list[int]:
    """`order` with, first, up to `share * n` items of each sketch that asks for a share of the
    batches (`Sketch.untrained_share`) while the model scores at random: a sketch with a small
    space (the tensor-core one: tens of annotations) would otherwise lose nearly every batch to
    one whose offspring fill the pool. Sketches without a share keep the plain order; together the
    askers take at most `MAX_RESERVED_SHARE` (scaled down in proportion)."""
    if not shares:
        return order
    total = sum(shares.values())
    if total > MAX_RESERVED_SHARE:  # several askers (two chain variants): they split the cap
        shares = {sk: share * MAX_RESERVED_SHARE / total for sk, share in shares.items()}
    quota = {sk: int(share * n + 0.5) for sk, share in shares.items()}
    first = []
    for i, sk in zip(order, sketches, strict=True):
        if quota.get(sk, 0) > 0:
            quota[sk] -= 1
            first.append(i)
    taken = set(first)
    return first + [i for i in order if i not in taken]


class EvolutionarySearch(SearchPolicy):
    """Ansor's policy: evolutionary search over sketch annotations, scored by a cost model.

    Hyper-parameters (defaults of TVM v0.19 `SketchPolicy.DEFAULT_PARAMS`):
    `population=2048` (evolutionary_search_population), `generations=4`
    (evolutionary_search_num_iters), `mutation_prob=0.85` (evolutionary_search_mutation_prob),
    `eps_greedy=0.05` (share of each batch taken from random samples: `eps_greedy * n` rounded
    up or down at random, so small batches get it on average; TVM rounds down),
    `use_measured_ratio=0.2` (sample_init_use_measured_ratio: at most this share of the initial
    population are the fastest measured schedules). `crossover=False` disables crossover
    (TVM v0.19 has none; the paper does). `features_fn` maps schedules to per-statement feature
    matrices (None when a schedule cannot be lowered: it scores -inf); `features` caches them
    for the last `feature_cache_size` schedules. `history` gives
    (schedule, seconds) of schedules measured before (resuming); their keys are also `measured`.
    `ragged_prob` (ours, `space.search_space.RAGGED_PROB`): how often sampling and tile mutations give a
    ragged-capable loop a register tile that leaves a partial tile; 0 keeps Ansor's exact splits
    (the ablation of `bench/ragged_tiles.py`).

    Transfer between the tasks of a network (our addition; TVM shares only the cost model):
    `transfer(schedules)` hands over the fastest schedules of similar tasks, adapted to this
    task's shapes (`SearchSpace.adapt`). They join the initial population, and up to
    `transfer_ratio` of each batch is the unmeasured ones the model scores highest, so a task
    starts from what its siblings already learned instead of from random samples.

    Seeds (ours; `seeds=False` is the ablation): the foreign schedules also hold the sketches'
    seeds (`SearchSpace.seeds`: for CUDA, the block shapes of classic hand-written kernels
    adapted to the task, `targets/cuda/seeds.py`), after any transferred ones, measured at the
    same share, so the first batches hold them as well as random draws.
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
        seeds: bool = True,
    ) -> None:
        self.sketches = [s for s in sketches if s.rule != "skip"] or list(sketches)
        self.info = {s.name: s.search_space(ragged_prob) for s in self.sketches}
        self._shares = {s.name: s.untrained_share for s in self.sketches if s.untrained_share > 0}
        self.model = model
        self.features_fn = features_fn
        self.rng = random.Random(seed)
        self.np_rng = np.random.default_rng(seed)
        self._eps_rng = random.Random(f"eps-greedy:{seed}")  # rounds the random share of a batch
        self.measured: set[str] = set(measured or ())  # keys measured or already proposed
        self.best_measured: dict[Schedule, float] = {}  # successful schedules -> seconds
        self.population = population
        self.generations = generations
        self.mutation_prob = mutation_prob
        self.eps_greedy = eps_greedy
        self.use_measured_ratio = use_measured_ratio
        self.transfer_ratio = transfer_ratio
        #: the sketches' seeds (`SearchSpace.seeds`: known-good annotations adapted to this task)
        self._seed_schedules: list[Schedule] = self._seeds(seed) if seeds else []
        #: adapted schedules of similar tasks (`transfer`), best donor first, then the seeds not
        #: measured yet
        self.foreign: list[Schedule] = list(self._seed_schedules)
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
        n_random = self._n_random(n)
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
        if self._model_ignores_features():
            order = _reserve_shares(order, [pool.items[i].sketch for i in order], self._shares, n - n_random)
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

    def retrain(self, inputs: list[MeasureInput], results: list[MeasureResult]) -> None:
        self.model.update(inputs, results, self.features([i.schedule for i in inputs]))

    def fastest(self, k: int) -> list[tuple[Schedule, float]]:
        best = heapq.nsmallest(k, self.best_measured, key=self.best_measured.__getitem__)
        return [(s, self.best_measured[s]) for s in best]

    def transfer(self, schedules: Sequence[Schedule]) -> int:
        """Replace the foreign schedules by `schedules` (other tasks' schedules, best first)
        adapted to this task, followed by the sketches' seeds not measured yet; those of sketches
        this task lacks are dropped. Returns how many transferred schedules were kept."""
        out: dict[Schedule, None] = {}
        for sch in schedules:
            info = self.info.get(sch.sketch)
            if info is None:
                continue
            mine = info.adapt(sch.values(), self.rng)
            if mine is not None and mine.key() not in self.measured:
                out.setdefault(mine)
        kept = len(out)
        for sch in self._seed_schedules:
            if sch.key() not in self.measured:
                out.setdefault(sch)
        self.foreign = list(out)
        return kept

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
    def _seeds(self, seed: int) -> list[Schedule]:
        """The sketches' unmeasured seeds, in the sketches' order (their own generator: the
        search's streams stay those of `seed`)."""
        rng = random.Random(f"seeds:{seed}")
        out: dict[Schedule, None] = {}
        for sk in self.sketches:
            for sch in self.info[sk.name].seeds(rng):
                if sch.key() not in self.measured:
                    out.setdefault(sch)
        return list(out)

    def _record(self, sch: Schedule, latency: float) -> None:
        self.measured.add(sch.key())
        if sch.sketch in self.info:  # a resumed record may predate a knob: complete it, or leave it out
            full = self.info[sch.sketch].complete(sch)
            if full is None:
                return
            self.measured.add(full.key())
            sch = full
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

    def _n_random(self, n: int) -> int:
        """Random candidates in a batch of `n`: `eps_greedy * n` rounded up or down at random
        (up with probability its fraction), so every batch takes `eps_greedy` of it on average.
        Rounding down, as TVM does, gave none at all in batches under 1 / eps_greedy (20 at
        0.05): the GPU search's batches of 16 never measured a random candidate
        (`results/gpu-prime/search-study.md`). The draw comes from its own generator (seeded
        by `seed`), so the other streams stay those of the seed."""
        want = self.eps_greedy * n
        whole = math.floor(want)
        return min(n, whole + (self._eps_rng.random() < want - whole))

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
            if kind == "tile" and info.free_tile_knobs and (
                    not info.tile_splits
                    or rng.random() < len(info.free_tile_knobs) / (len(info.free_tile_knobs) + len(info.tile_splits))):
                knob = rng.choice(info.free_tile_knobs)  # a tile size without a split: redraw it
                new[knob.name] = rng.choice([o for o in knob.options if o != new[knob.name]])
                if not info.valid(new):
                    continue
                return info.schedule(new)
            if kind in ("tile", "parallel"):
                split = rng.choice(info.tile_splits if kind == "tile" else info.parallel_splits)
                names = split.tile_knobs
                sizes = [new[n] for n in names]
                # A ragged register tile (see `targets/cpu/sketch.py`) sits outside the factor chain: the
                # factor moves act on the levels above it, and a tile mutation of a ragged-capable
                # loop may instead redraw it (another ragged size, or a divisor).
                tail = sizes[-1:] if info.is_ragged(split, new) else []
                if (kind == "tile" and split.ragged and len(sizes) >= 2
                        and rng.random() < (0.5 if tail else info.ragged_prob)):
                    options = [v for v in info.ragged_options(split, sizes[-2]) if v != sizes[-1]]
                    if tail:
                        limit = info.innermost_limit(split)
                        options += [d for d in range(1, min(limit, sizes[-2]) + 1) if sizes[-2] % d == 0]
                    if not options:
                        continue
                    new[names[-1]] = rng.choice(options)
                    if not info.register_ok(split, new):
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
                if not tail and factors[-1] > info.innermost_limit(split):
                    continue
                new.update(zip(names, sizes_from_factors(tuple(factors)), strict=True))
                if tail and not sizes_nest(split, [new[n] for n in split.tile_knobs]):
                    continue  # the level above the ragged tile must stay larger than it
                # the sizes nest by construction; only the stage's register tile may break
                if not info.register_ok(split, new):
                    continue
                if info.full_check_after_tile and not info.valid(new):  # e.g. GPU device limits
                    continue
            else:
                knob = rng.choice(info.unroll_knobs if kind == "unroll" else info.other_knobs)
                new[knob.name] = rng.choice([o for o in knob.options if o != new[knob.name]])
                # (a GPU sketch's pipeline depth, mutated with its unroll knob, sizes shared memory)
                if info.full_check_after_tile and not info.valid(new):
                    continue
            return info.schedule(new)
        return None

    @staticmethod
    def _applicable(info: SearchSpace, kind: str) -> bool:
        return bool(
            {
                "tile": info.tile_splits or info.free_tile_knobs,
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

"""Evolutionary search with fake features and measurements (no compiler)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from ansor.frontend import workloads
from ansor.space.schedule import Schedule, factors_from_sizes, validate
from ansor.search.cost_model import CostModel, RandomModel, XGBModel
from ansor.search.evolution import EvolutionarySearch
from ansor.space.search_space import RAGGED_PROB
from ansor.targets.cpu.search_space import CpuSearchSpace
from ansor.measure.measurer import MeasureError, MeasureInput, MeasureResult
from ansor.targets import generate_sketches
from ansor.search.policy import RandomSearch, SearchPolicy
from ansor.targets.cpu.sketch import is_ragged
from ansor.core.task import create_task


def latency(values: dict[str, int]) -> float:
    """Fake seconds: a bowl around every knob = 8 (as conftest's FakeMeasurer)."""
    return 1e-3 * (1 + sum(abs(math.log2(max(x, 1)) - 3) for x in values.values()))


def features(schedules: list[Schedule]) -> list[np.ndarray | None]:
    """One statement per program: log2 of its knob values."""
    return [
        np.log2(np.maximum([v for _, v in s.knobs], 1)).astype(np.float32)[None, :]
        for s in schedules
    ]


class Oracle(CostModel):
    """Knows the fake latency from the features (higher is better)."""

    def update(self, inputs, results, features) -> None:
        pass

    def predict(self, feats: list[np.ndarray | None]) -> np.ndarray:
        return np.array([-np.inf if f is None else 1.0 / (1 + np.abs(f - 3).sum()) for f in feats])


def run(
    task, sketches, policy: SearchPolicy, *, batches: int, n: int, model: CostModel | None = None
) -> tuple[float, list[list[Schedule]]]:
    """A tuning loop in miniature: propose, check, "measure", update policy and model."""
    by_name = {s.name: s for s in sketches}
    seen: set[str] = set()
    best = math.inf
    proposed = []
    for _ in range(batches):
        batch = policy.next_batch(n)
        assert len(batch) == n
        for s in batch:
            assert s.key() not in seen, "proposed twice"
            seen.add(s.key())
            assert validate(by_name[s.sketch], s.values()) is None
        inputs = [MeasureInput(task, s, None) for s in batch]
        results = [MeasureResult(costs=(latency(s.values()),)) for s in batch]
        policy.update(inputs, results)
        if model is not None:
            feats = (
                policy.features(batch)
                if isinstance(policy, EvolutionarySearch)
                else features(batch)
            )
            model.update(inputs, results, feats)
        best = min(best, *(r.latency for r in results))
        proposed.append(batch)
    return best, proposed


@pytest.fixture(scope="module")
def mm(matmul_big):
    return matmul_big, generate_sketches(matmul_big)


@pytest.fixture(scope="module")
def tbs():
    task = create_task(workloads.get("tbs-1x128x12x64"), name="tbs")
    return task, generate_sketches(task)


def small(sketches, model, seed=0, **kw) -> EvolutionarySearch:
    return EvolutionarySearch(sketches, model, features, seed=seed, population=256, **kw)


def test_oracle_guided_search_beats_random(mm) -> None:
    task, sketches = mm
    evo, _ = run(task, sketches, small(sketches, Oracle()), batches=4, n=16)
    rnd, _ = run(task, sketches, RandomSearch(sketches, seed=0), batches=4, n=16)
    assert evo < rnd
    assert evo < 3e-3  # the bowl's floor is 1e-3 (all knobs = 8)


def test_learned_model_beats_random(mm) -> None:
    task, sketches = mm
    model = XGBModel(few_shot_threshold=32, nthread=1)
    evo, _ = run(task, sketches, small(sketches, model, seed=1), batches=6, n=16, model=model)
    rnd, _ = run(task, sketches, RandomSearch(sketches, seed=1), batches=6, n=16)
    assert model.trained
    assert evo < rnd


def test_seeded_determinism(mm) -> None:
    task, sketches = mm
    a = run(task, sketches, small(sketches, RandomModel(seed=3), seed=3), batches=2, n=8)[1]
    b = run(task, sketches, small(sketches, RandomModel(seed=3), seed=3), batches=2, n=8)[1]
    c = run(task, sketches, small(sketches, RandomModel(seed=4), seed=4), batches=2, n=8)[1]
    assert a == b and a != c


def test_mutation_keeps_tiles_nested(mm) -> None:
    _, sketches = mm
    ev = small(sketches, Oracle())
    sk = sketches[0]
    rng = random.Random(0)
    tile_names = {n for s in sk.splits for n in s.tile_knobs}
    for _ in range(300):
        parent = ev.info[sk.name].sample(rng)
        child = ev.mutate(parent)
        assert child is not None and child != parent
        assert validate(sk, child.values()) is None
        changed = {k for k, v in child.values().items() if parent.values()[k] != v}
        owners = {(s.op, s.dim) for s in sk.splits for n in s.tile_knobs if n in changed}
        assert len(owners) == 1 or (len(changed) == 1 and not changed & tile_names)
        for s in sk.splits:  # the same loop extent, split into the same number of levels
            sizes = [child.values()[n] for n in s.tile_knobs]
            if is_ragged(s, child.values()):  # exact above a ragged register tile
                sizes = sizes[:-1]
                assert 1 < child.values()[s.tile_knobs[-1]] < sizes[-1]
            f = factors_from_sizes(s.extent, sizes)
            assert math.prod(f) == s.extent and len(f) == len(sizes) + 1


def test_mutation_moves_between_exact_and_ragged_tiles() -> None:
    """Tile mutations of a ragged-capable loop reach ragged register tiles from exact ones and
    back, and move factors above a ragged tile without breaking it."""
    task = create_task(workloads.matmul(99, 48, 32))  # 99 = 9 x 11: no exact 4-8 row tile
    sketches = generate_sketches(task)
    ev = small(sketches, Oracle())
    sk = sketches[0]
    m = sk.stages[0].split(0)
    rng = random.Random(1)
    seen = {"to ragged": 0, "to exact": 0, "above ragged": 0}
    for _ in range(400):
        parent = ev.info[sk.name].sample(rng)
        child = ev.mutate(parent)
        assert child is not None and validate(sk, child.values()) is None
        was, now = is_ragged(m, parent.values()), is_ragged(m, child.values())
        if now and not was:
            seen["to ragged"] += 1
        elif was and not now:
            seen["to exact"] += 1
        elif was and now:
            c, p = child.values(), parent.values()
            if c["op1.d0.t3"] == p["op1.d0.t3"] and (c["op1.d0.t1"], c["op1.d0.t2"]) != (p["op1.d0.t1"], p["op1.d0.t2"]):
                seen["above ragged"] += 1
    assert all(v > 0 for v in seen.values()), seen


def test_crossover_takes_each_stage_from_one_parent(tbs) -> None:
    _, sketches = tbs
    ev = small(sketches, Oracle())
    sk = sketches[0]
    info = ev.info[sk.name]
    assert len(info.stage_knobs) == len(sk.stages) == 5
    assert sorted(n for g in info.stage_knobs for n in g) == sorted(k.name for k in sk.knobs)
    rng = random.Random(1)
    made = 0
    for _ in range(100):
        a, b = info.sample(rng), info.sample(rng)
        child = ev.cross(a, b)
        if child is None:
            continue
        made += 1
        assert validate(sk, child.values()) is None
        va, vb, vc = a.values(), b.values(), child.values()
        sources = []
        for group in info.stage_knobs:
            from_a = all(vc[k] == va[k] for k in group)
            from_b = all(vc[k] == vb[k] for k in group)
            assert from_a or from_b
            sources.append(
                "a" if from_a and not from_b else "b" if from_b and not from_a else "either"
            )
        assert "a" in sources or "b" in sources
    assert made >= 90


def test_no_crossover_switch(tbs, monkeypatch) -> None:
    _, sketches = tbs
    ev = small(sketches, Oracle(), crossover=False, generations=2)

    def refuse(*_a, **_k):
        raise AssertionError("crossover called")

    monkeypatch.setattr(ev, "cross", refuse)
    assert len(ev.next_batch(8)) == 8
    on = small(sketches, Oracle(), generations=2)
    calls = []
    real = on.cross
    monkeypatch.setattr(on, "cross", lambda a, b: calls.append(1) or real(a, b))
    on.next_batch(8)
    assert calls


def test_compiled_rules_match_annotation(tbs, mm) -> None:
    rng = random.Random(5)
    for _, sketches in (tbs, mm):
        for sk in sketches:
            info = sk.search_space(RAGGED_PROB)
            for _ in range(50):
                sch = info.sample(rng)
                assert sch == Schedule.of(sk.name, sch.values())
                assert validate(sk, sch.values()) is None and info.valid(sch.values())
                bad = sch.values()
                for k in sk.knobs:  # random single-knob perturbations: both agree
                    trial = dict(bad, **{k.name: rng.choice([*k.options, 3, 7])})
                    assert info.valid(trial) == (validate(sk, trial) is None)


def test_best_measured_seed_the_population(mm) -> None:
    task, sketches = mm
    ev = small(sketches, RandomModel(seed=0))
    good = ev.info[sketches[0].name].sample(random.Random(9))
    failed = ev.info[sketches[0].name].sample(random.Random(10))
    ev.update(
        [MeasureInput(task, good, None), MeasureInput(task, failed, None)],
        [MeasureResult(costs=(1e-3,)), MeasureResult(error=MeasureError.COMPILE)],
    )
    pop = ev._initial_population()
    assert pop[0] == good and failed not in pop
    assert good.key() in ev.measured and failed.key() in ev.measured
    resumed = small(sketches, RandomModel(seed=0), history=[(good, 1e-3)])
    assert resumed._initial_population()[0] == good
    assert all(s.key() != good.key() for s in resumed.next_batch(16))


def test_unlowerable_programs_are_not_chosen_greedily(mm) -> None:
    _, sketches = mm
    ev = EvolutionarySearch(
        sketches, RandomModel(seed=0), lambda s: [None] * len(s), seed=0, population=64
    )
    batch = ev.next_batch(10)  # every prediction is -inf: all come from random sampling
    assert len(batch) == 10 and len({s.key() for s in batch}) == 10
    assert ev.last_stats["scored"] >= 64 - 1


def test_features_are_cached_for_the_model_update(mm) -> None:
    _, sketches = mm
    calls: list[int] = []

    def counting(schedules: list[Schedule]) -> list[np.ndarray | None]:
        calls.append(len(schedules))
        return features(schedules)

    ev = EvolutionarySearch(sketches, Oracle(), counting, seed=0, population=128, eps_greedy=0.0)
    batch = ev.next_batch(16)
    n = sum(calls)
    assert n == ev.last_stats["scored"]  # each distinct schedule featurized once per round
    got = ev.features(batch)
    assert all(np.array_equal(a, b) for a, b in zip(got, features(batch), strict=True))
    assert sum(calls) == n  # the greedy picks were featurized during the search
    small_cache = EvolutionarySearch(
        sketches, Oracle(), counting, population=64, feature_cache_size=10
    )
    small_cache.next_batch(4)
    assert len(small_cache._feature_cache) == 10


def test_adapt_keeps_absolute_tile_sizes_across_shapes() -> None:
    """A schedule of one matmul transfers to another shape: every tile size the new extents allow
    is kept, the rest shrink to the nearest size that still nests."""
    a = create_task(workloads.get("matmul-256x128x512"), name="a")
    b = create_task(workloads.get("matmul-96x128x384"), name="b")
    sa, sb = generate_sketches(a), generate_sketches(b)
    ia = (next(s for s in sa if s.stages)).search_space(RAGGED_PROB)
    ib = (next(s for s in sb if s.name == ia.sketch.name)).search_space(RAGGED_PROB)
    rng = random.Random(0)
    kept = 0
    for _ in range(50):
        donor = ia.sample(rng)
        mine = ib.adapt(donor.values(), rng)
        assert mine is not None and ib.valid(mine.values())
        dv, mv = donor.values(), mine.values()
        for split in ib.tile_knob_splits:
            names, extent = split.tile_knobs, split.extent
            if is_ragged(split, mv):  # a ragged register tile is the donor's, above it exact sizes
                assert mv[names[-1]] == dv[names[-1]]
                names = names[:-1]
            for n in names:
                assert mv[n] <= max(dv[n], 1) and extent % mv[n] == 0
                if extent % dv[n] == 0 and all(dv[n] % mv[m] == 0 for m in names[names.index(n) + 1:]):
                    kept += mv[n] == dv[n]
        assert all(mv[k.name] == dv[k.name] for k in ib.non_tile if dv[k.name] in ib.options[k.name])
    assert kept > 0
    # the same shape: adapt is the identity
    same = ia.sample(rng)
    assert ia.adapt(same.values(), rng) == same


def test_adapt_keeps_a_ragged_register_tile() -> None:
    """Between shapes whose loop needs ragged tiles (99 = 9 x 11 and 117 = 9 x 13 rows), a donor's
    ragged register tile transfers as it is, above it exact sizes that nest in the new extent."""
    a = create_task(workloads.matmul(99, 48, 32), name="a")
    b = create_task(workloads.matmul(117, 48, 32), name="b")
    ia = (generate_sketches(a)[0]).search_space(RAGGED_PROB)
    ib = (generate_sketches(b)[0]).search_space(RAGGED_PROB)
    m = ib.sketch.stages[0].split(0)
    rng = random.Random(2)
    kept = 0
    for _ in range(60):
        donor = ia.sample(rng)
        if not is_ragged(ia.sketch.stages[0].split(0), donor.values()):
            continue
        mine = ib.adapt(donor.values(), rng)
        assert mine is not None and validate(ib.sketch, mine.values()) is None
        if is_ragged(m, mine.values()):
            assert mine.values()["op1.d0.t3"] == donor.values()["op1.d0.t3"]
            assert 117 % mine.values()["op1.d0.t2"] == 0
            kept += 1
    assert kept >= 5


def test_transferred_schedules_are_measured_first(mm) -> None:
    task, sketches = mm
    other = create_task(workloads.get("matmul-96x128x384"), name="other")
    donor_info = (next(s for s in generate_sketches(other) if s.stages)).search_space(RAGGED_PROB)
    donors = [donor_info.sample(random.Random(i)) for i in range(6)]
    ev = small(sketches, Oracle(), eps_greedy=0.0)
    assert ev.transfer(donors) > 0
    adapted = set(ev.foreign)
    batch = ev.next_batch(8)
    assert sum(s in adapted for s in batch) == 2  # transfer_ratio 0.25 of 8
    assert not (set(ev.foreign) & set(batch))  # measured ones leave the seeds


def test_a_failed_draw_is_skipped_not_fatal(mm, monkeypatch) -> None:
    """A sketch whose constraints rarely admit a random draw must not stop the search (a GPU 3-D
    convolution's sampler gave up after 4000 tries once in a population and crashed
    `ansor tune --target cuda`): both searches draw again."""
    import ansor.search.policy
    from ansor.space.schedule import SamplingError

    _, sketches = mm
    calls = {"n": 0}

    def flaky(real):
        def draw(*args, **kwargs):
            calls["n"] += 1
            if calls["n"] % 3 == 0:
                raise SamplingError("no valid annotation found")
            return real(*args, **kwargs)
        return draw

    monkeypatch.setattr(ansor.search.policy, "sample", flaky(ansor.search.policy.sample))
    assert len(RandomSearch(sketches, seed=0).next_batch(16)) == 16
    monkeypatch.setattr(CpuSearchSpace, "sample", flaky(CpuSearchSpace.sample))
    batch = small(sketches, RandomModel(seed=0)).next_batch(16)
    assert len(batch) == 16 and calls["n"] > 48


def test_sketches_asking_for_shares_take_half_an_untrained_batch_together() -> None:
    """Two chain variants asking 0.5 each used to take every untrained batch (BERT's matmul +
    layer norm: the unfused sketches got 1 trial in 64); together they now take at most half."""
    from ansor.search.evolution import MAX_RESERVED_SHARE, _reserve_shares

    sketches = ["s0", "s1", "s2", "s3"] * 4
    order = list(range(len(sketches)))
    picked = _reserve_shares(order, sketches, {"s2": 0.5, "s3": 0.5}, n=8)[:8]
    by = [sketches[i] for i in picked]
    assert by.count("s2") == by.count("s3") == round(8 * MAX_RESERVED_SHARE / 2)
    assert {"s0", "s1"} <= set(by)
    # one asker alone keeps its whole share
    alone = [sketches[i] for i in _reserve_shares(order, sketches, {"s2": 0.5}, n=8)[:8]]
    assert alone.count("s2") == 4

"""Random annotation fills holes with valid values only, reproducibly."""

from __future__ import annotations

import random

import ansor
from ansor.frontend import workloads
from ansor.space.schedule import Schedule, factorizations, factors_from_sizes, sample, sizes_from_factors, validate
from ansor.targets import generate_sketches
from ansor.targets.cpu.params import MAX_INNERMOST, MAX_VECTOR
from ansor.targets.cpu.sketch import is_ragged


def test_factorizations_cover_all_ordered_splits() -> None:
    f = factorizations(12, 2)
    assert set(f) == {(1, 12), (2, 6), (3, 4), (4, 3), (6, 2), (12, 1)}
    assert all(a * b * c * d == 64 for a, b, c, d in factorizations(64, 4))
    assert len(factorizations(8, 3)) == 10  # C(3+2, 2)


def test_sizes_factors_round_trip() -> None:
    factors = (4, 2, 8, 16)
    sizes = sizes_from_factors(factors)
    assert sizes == [256, 128, 16]
    assert factors_from_sizes(1024, sizes) == factors


def test_samples_are_valid_and_seeded(matmul_big) -> None:
    sk = generate_sketches(matmul_big)[0]
    assert sk.rules == ("multi_level_tiling(op1)",)
    a = [sample(sk, random.Random(7)) for _ in range(1)] + [sample(sk, random.Random(7))]
    assert a[0] == a[1]
    rng = random.Random(0)
    n_ragged = 0
    for _ in range(300):
        sch = sample(sk, rng)
        v = sch.values()
        assert validate(sk, v) is None
        for s in sk.splits:
            sizes = [v[n] for n in s.tile_knobs]
            chain = [s.extent, *sizes]
            exact = chain[:-1] if is_ragged(s, v) else chain  # a ragged register tile: below
            assert all(exact[i] % exact[i + 1] == 0 for i in range(len(exact) - 1))
            assert sizes[-1] <= (MAX_VECTOR if s.vector else MAX_INNERMOST)
            if is_ragged(s, v):
                n_ragged += 1
                assert s.ragged and 1 < sizes[-1] < sizes[-2]
        assert v["op1.unroll"] in (0, 16, 64, 512)
    assert n_ragged == 0  # exact splits of 256 and 128 give good register tiles: no ragged ones


def test_ragged_register_tiles_are_validated() -> None:
    """A ragged register tile (not dividing the level above) is valid only on a ragged-capable
    loop (a space loop), only below the level above and within the register limits, never at S0."""
    task = ansor.create_task(workloads.matmul(197, 37, 32))
    sk = generate_sketches(task)[0]
    m, n, k = sk.stages[0].splits
    assert m.ragged and n.ragged and n.vector and not k.ragged
    good = sample(sk, random.Random(1)).values()
    ragged = dict(good, **{"op1.d0.t1": 197, "op1.d0.t2": 197, "op1.d0.t3": 6})
    assert validate(sk, ragged) is None and is_ragged(m, ragged)
    assert validate(sk, dict(ragged, **{"op1.d0.t2": 1, "op1.d0.t3": 1})) is None  # exact again
    assert "do not nest" in validate(sk, dict(ragged, **{"op1.d0.t2": 1}))  # larger than the level above
    assert "not in its options" in validate(sk, dict(ragged, **{"op1.d0.t1": 6}))  # S0 tiles stay exact
    lanes = dict(good, **{"op1.d1.t1": 37, "op1.d1.t2": 37})
    assert validate(sk, dict(lanes, **{"op1.d1.t3": 13})) is None  # 2 x 13 + 11 lanes
    assert "not in its options" in validate(sk, dict(lanes, **{"op1.d1.t3": 17}))  # wider than MAX_VECTOR
    assert "not in its options" in validate(sk, dict(good, **{"op1.d2.t1": 5}))  # reductions stay exact


def test_validate_rejects_bad_values(matmul_big) -> None:
    sk = generate_sketches(matmul_big)[0]
    good = sample(sk, random.Random(1)).values()
    bad = dict(good, **{"op1.d1.t3": 32})  # vectorized loop wider than 16 lanes
    assert validate(sk, bad) is not None
    bad = dict(good, **{"op1.d0.t1": 3})  # not a divisor
    assert "not in its options" in (validate(sk, bad) or "")
    assert "missing" in (validate(sk, {}) or "")


def test_schedule_json_and_key_are_stable() -> None:
    s = Schedule.of("mlt_op1", {"b": 2, "a": 1})
    assert s == Schedule.from_json(s.to_json())
    assert s.key() == Schedule.of("mlt_op1", {"a": 1, "b": 2}).key()
    assert s.key() != Schedule.of("mlt_op1", {"a": 1, "b": 4}).key()


def test_only_awkward_extents_get_ragged_tiles() -> None:
    """Ragged register tiles only where exact splits have no good one (no 4-8 row divisor, lanes
    not a multiple of a vector register); elsewhere sampling is exactly what it was without
    them (the same draws from the same seed)."""

    sk = generate_sketches(ansor.create_task(workloads.matmul(99, 40, 32)))[0]
    assert [s.ragged for s in sk.stages[0].splits] == [True, False, False]  # 99 = 9 x 11; 40 lanes = 5 x 8
    smooth = generate_sketches(ansor.create_task(workloads.matmul(56, 48, 32)))[0]
    assert not any(s.ragged for s in smooth.splits)
    with_ragged, without = smooth.search_space(0.3), smooth.search_space(0.0)
    a, b = random.Random(4), random.Random(4)
    assert [with_ragged.sample(a) for _ in range(50)] == [without.sample(b) for _ in range(50)]

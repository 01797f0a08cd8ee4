"""Seed annotations of the CUDA sketches (`targets/cuda/seeds.py`): the classic block shapes,
adapted to each task, valid, and measured in the search's first batches. No GPU needed."""

from __future__ import annotations

import ansor
import pytest
from ansor.frontend import workloads
from ansor.search.cost_model import RandomModel
from ansor.search.evolution import EvolutionarySearch
from ansor.targets import generate_sketches
from ansor.targets.cuda.seeds import CLASSIC_BLOCKS


def _sketch(name: str):
    task = ansor.create_task(workloads.get(name), name=name, target="cuda")
    return next(s for s in generate_sketches(task) if s.rule != "skip")


def _no_features(schedules):
    import numpy as np

    return [np.zeros((1, 1), dtype=np.float32) for _ in schedules]


@pytest.mark.parametrize("name", ["matmul-509x1021x257", "matmul-1024", "matmul-97x197x61",
                                  "c2d-1x97x97x13x29x3x1x1"])
def test_seeds_are_valid_and_distinct(name: str) -> None:
    import random

    sk = _sketch(name)
    space = sk.search_space(0.75)
    seeds = space.seeds(random.Random(0))
    assert seeds, name
    assert len(seeds) <= len(CLASSIC_BLOCKS)
    assert len({s.key() for s in seeds}) == len(seeds)
    for s in seeds:
        assert sk.validate(s.values()) is None, (name, s.values())


def test_the_classic_64x64_block_survives_on_a_prime_matmul() -> None:
    """509x1021x257: the 64x64 block of 2x2 virtual threads, 4x4 a thread, K 16 in steps of 4,
    two stages, stays itself (ragged tiles of the padded extents 512 x 1024 x 272)."""
    import random

    sk = _sketch("matmul-509x1021x257")
    seeds = [s.values() for s in sk.search_space(0.75).seeds(random.Random(0))]
    want = {"op1.d0.t1": 64, "op1.d0.t2": 32, "op1.d0.t3": 2, "op1.d0.t4": 2,
            "op1.d1.t1": 64, "op1.d1.t2": 32, "op1.d1.t3": 2, "op1.d1.t4": 2,
            "op1.d2.t1": 16, "op1.d2.t2": 4, "op1.stages": 2}
    assert any(all(v[k] == x for k, x in want.items()) for v in seeds), seeds


def test_seeds_fit_small_extents() -> None:
    """97x197x61: blocks of 128 do not fit 97 rows; what the seeds become still nests."""
    import random

    sk = _sketch("matmul-97x197x61")
    st = sk.gpu_stage
    for s in sk.search_space(0.75).seeds(random.Random(0)):
        v = s.values()
        for d in st.mapped:
            assert v[st.knob(d, 1)] <= st.split_extent(d)


def test_the_first_batches_measure_the_seeds_then_none_again() -> None:
    sk = _sketch("matmul-509x1021x257")
    pol = EvolutionarySearch([sk], RandomModel(seed=0), _no_features, seed=3, population=64, generations=1)
    seeds = {s.key() for s in pol.foreign}
    assert len(seeds) >= 4
    first = pol.next_batch(16)
    taken = [s for s in first if s.key() in seeds]
    assert len(taken) == 4  # the transfer share of a batch of 16
    seen = set()
    for _ in range(8):
        batch = pol.next_batch(16)
        seen |= {s.key() for s in batch} & seeds
    assert seen | {s.key() for s in taken} == seeds  # every seed measured, none twice
    assert not pol.foreign


def test_seeds_off_is_the_plain_search() -> None:
    sk = _sketch("matmul-509x1021x257")
    a = EvolutionarySearch([sk], RandomModel(seed=0), _no_features, seed=3, population=64, generations=1,
                           seeds=False)
    assert a.foreign == []


def test_measured_seeds_are_not_seeded_again() -> None:
    sk = _sketch("matmul-509x1021x257")
    pol = EvolutionarySearch([sk], RandomModel(seed=0), _no_features, seed=3, population=64, generations=1)
    keys = {s.key() for s in pol.foreign}
    again = EvolutionarySearch([sk], RandomModel(seed=0), _no_features, seed=3, population=64, generations=1,
                               measured=keys)
    assert again.foreign == []


def test_cpu_sketches_have_no_seeds() -> None:
    task = ansor.create_task(workloads.get("matmul-512"), name="matmul-512", target="cpu")
    sk = next(s for s in generate_sketches(task) if s.rule != "skip")
    pol = EvolutionarySearch([sk], RandomModel(seed=0), _no_features, seed=3, population=64, generations=1)
    assert pol.foreign == []


def test_a_transfer_keeps_the_seeds_after_the_transferred() -> None:
    """The task scheduler hands every task its siblings' best before each round (none for the
    first task): the unmeasured seeds stay behind whatever was transferred."""
    sk = _sketch("matmul-509x1021x257")
    pol = EvolutionarySearch([sk], RandomModel(seed=0), _no_features, seed=3, population=64, generations=1)
    seeds = list(pol.foreign)
    assert pol.transfer([]) == 0
    assert pol.foreign == seeds
    donor = _sketch("matmul-1024").sample(__import__("random").Random(2))
    assert pol.transfer([donor]) == 1
    assert len(pol.foreign) in (len(seeds) + 1, len(seeds))  # (the donor may adapt to a seed)
    assert pol.foreign[0] not in seeds or len(pol.foreign) == len(seeds)
    assert set(seeds) <= set(pol.foreign)

"""Each target's search policy is its own: the GPU mutates tile sizes and unroll only (TVM's GPU
policy), its unroll knob mutates as "unroll", and a row sketch's thread count as a tile size."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from ansor.core.task import create_task
from ansor.frontend import workloads
from ansor.search.cost_model import RandomModel
from ansor.search.evolution import EvolutionarySearch
from ansor.space.schedule import sample
from ansor.targets import generate_sketches, get_target


def _mutations(task, n: int = 400) -> tuple[list, Counter]:
    sketches = [s for s in generate_sketches(task) if s.rule != "skip"]
    search = EvolutionarySearch(sketches, RandomModel(seed=0), lambda schs: [None] * len(schs), seed=0,
                                mutation_weights=get_target(task.target).mutation_weights)
    rng = random.Random(0)
    changed: Counter = Counter()
    for _ in range(n):
        sk = rng.choice(sketches)
        parent = sample(sk, rng)
        child = search.mutate(parent)
        if child is None:
            continue
        a, b = parent.values(), child.values()
        diff = tuple(sorted(k for k in a if a[k] != b[k]))
        changed[diff] += 1
    return sketches, changed


def test_targets_carry_tvms_mutation_weights() -> None:
    assert get_target("cpu").mutation_weights == {"tile": 0.90, "location": 0.05, "unroll": 0.04, "parallel": 0.01}
    assert get_target("cuda").mutation_weights == {"tile": 0.90, "unroll": 0.10}


def test_gpu_tiling_mutations_touch_tiles_and_unroll_only() -> None:
    task = create_task(workloads.matmul(256, 256, 256), target="cuda")
    (sk,), changed = _mutations(task)
    unroll, stages = sk.unroll_knobs  # (the pipeline depth mutates as an unroll knob)
    space = sk.search_space(0.3)
    assert [k.name for k in space.unroll_knobs] == [unroll, stages] and not space.other_knobs
    unroll_only = sum(c for d, c in changed.items() if d in ((unroll,), (stages,)))
    tile_only = sum(c for d, c in changed.items() if unroll not in d and stages not in d)
    assert unroll_only + tile_only == sum(changed.values())  # never both, never anything else
    total = unroll_only + tile_only
    assert total > 300 and 0.04 < unroll_only / total < 0.2  # ~0.10 of the mutations


def test_row_sketch_threads_mutate_as_tile_sizes() -> None:
    task = create_task(workloads.get("lngelu-8x256"), target="cuda")
    sketches, changed = _mutations(task, 200)
    (row,) = [s for s in sketches if s.free_tile_knobs]
    threads, *others = row.free_tile_knobs  # (threads, lanes, rows per block)
    tiles = {threads, *others}
    assert sum(c for d, c in changed.items() if tiles & set(d)) > sum(changed.values()) / 2
    assert sum(c for d, c in changed.items() if threads in d) > sum(changed.values()) / 4


@pytest.mark.parametrize("name", ["cpu", "cuda"])
def test_tuner_uses_the_targets_weights(name: str, monkeypatch) -> None:
    from ansor.tuning import tuner

    seen = {}
    real = tuner.EvolutionarySearch

    class Spy(real):
        def __init__(self, *args, **kwargs) -> None:
            seen.update(kwargs.get("mutation_weights") or {})
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(tuner, "EvolutionarySearch", Spy)
    task = create_task(workloads.matmul(64, 64, 64), target=name)
    from ansor.measure.measurer import SyntheticMeasurer

    tuner.tune(task, trials=4, batch_size=4, measurer=SyntheticMeasurer(), search_options={"population": 16, "generations": 1})
    assert seen == get_target(name).mutation_weights


def test_tuning_options_is_one_record_with_keyword_overrides() -> None:
    from ansor.tuning.options import TuningOptions

    base = TuningOptions(search="random", batch_size=8)
    assert TuningOptions.of(base, batch_size=4) == TuningOptions(search="random", batch_size=4)
    assert TuningOptions.of(None, crossover=None) == TuningOptions()
    with pytest.raises(TypeError, match="unknown tuning option.*batchsize"):
        TuningOptions.of(base, batchsize=4)
    with pytest.raises(ValueError, match="unknown search 'genetic'"):
        TuningOptions(search="genetic")

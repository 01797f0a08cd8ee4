"""Search policies: which schedules to measure next.

    [Sketch] --policy.next_batch(n)--> [Schedule] (never one already measured)
    (inputs, results) --policy.update--> policy state

`RandomSearch` samples sketches and annotations uniformly (the learned, evolutionary policy is
a later stage). Policies are seeded and deterministic given the same measurement history.
"""

from __future__ import annotations

import abc
import random
from collections.abc import Sequence

from ansor.space.schedule import SamplingError, Schedule, sample
from ansor.measure.measurer import MeasureInput, MeasureResult
from ansor.space.sketch import Sketch


class SearchPolicy(abc.ABC):
    """Proposes schedules for one task."""

    #: Seconds the last `next_batch` spent on its parts, for the tuner's round times
    #: (`tuning/progress.RoundTimes`): "features_s" (feature extraction), "predict_s" (cost-model
    #: prediction). Empty for a policy that does not time them; `EvolutionarySearch` fills it.
    last_stats: dict[str, float] = {}  # noqa: RUF012 - read-only default, replaced per instance

    @abc.abstractmethod
    def next_batch(self, n: int) -> list[Schedule]: ...

    @abc.abstractmethod
    def update(self, inputs: list[MeasureInput], results: list[MeasureResult]) -> None: ...

    def retrain(self, inputs: list[MeasureInput], results: list[MeasureResult]) -> None:
        """Learn from a measured batch (after `update`): a learned policy retrains its cost model
        here (Ansor retrains after every batch); others learn nothing."""

    def fastest(self, k: int) -> list[tuple[Schedule, float]]:
        """The `k` fastest schedules measured so far, with their seconds (none by default)."""
        return []

    def transfer(self, schedules: Sequence[Schedule]) -> int:
        """Take other tasks' fastest schedules as seeds; how many were kept (none by default)."""
        return 0


class RandomSearch(SearchPolicy):
    """Uniform random sketch + uniform random annotation, deduplicated against what was measured.

    The `skip` sketch (untransformed program) is proposed only when it is the sole sketch.
    """

    def __init__(self, sketches: list[Sketch], *, seed: int = 0, measured: set[str] | None = None,
                 max_tries_factor: int = 50) -> None:
        self.sketches = [s for s in sketches if s.rule != "skip"] or list(sketches)
        self.rng = random.Random(seed)
        self.measured: set[str] = set(measured or ())
        self.max_tries_factor = max_tries_factor

    def next_batch(self, n: int) -> list[Schedule]:
        out: list[Schedule] = []
        keys = set(self.measured)
        for _ in range(n * self.max_tries_factor):
            if len(out) == n:
                break
            sk = self.rng.choice(self.sketches)
            try:
                sch = sample(sk, self.rng)
            except SamplingError:  # a rare draw on a tightly constrained sketch: draw again
                continue
            if sch.key() in keys:
                continue
            keys.add(sch.key())
            out.append(sch)
        return out  # shorter than n when the space is exhausted

    def update(self, inputs: list[MeasureInput], results: list[MeasureResult]) -> None:
        for inp in inputs:
            self.measured.add(inp.schedule.key())

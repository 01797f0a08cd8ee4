"""Schedules (a sketch name + knob values) and the tile-size arithmetic every target shares.

    Sketch --sample(rng)--> Schedule --Sketch.script(values)--> concrete transform script
    tile sizes <--sizes_from_factors / factors_from_sizes--> split factors (mutations move factors)
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ansor.space.sketch import LoopSplit

if TYPE_CHECKING:
    from ansor.space.sketch import Sketch


@dataclass(frozen=True)
class Schedule:
    """A point of the search space: which sketch, and a value for each of its knobs."""

    sketch: str
    knobs: tuple[tuple[str, int], ...]  # sorted by name

    @staticmethod
    def of(sketch: str, values: Mapping[str, int]) -> Schedule:
        return Schedule(sketch, tuple(sorted((k, int(v)) for k, v in values.items())))

    def values(self) -> dict[str, int]:
        return dict(self.knobs)

    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:16]

    def to_json(self) -> dict:
        return {"sketch": self.sketch, "knobs": dict(self.knobs)}

    @staticmethod
    def from_json(d: Mapping) -> Schedule:
        return Schedule.of(str(d["sketch"]), {str(k): int(v) for k, v in dict(d["knobs"]).items()})


@functools.cache
def factorizations(n: int, parts: int) -> tuple[tuple[int, ...], ...]:
    """All ordered tuples of `parts` positive integers whose product is `n`."""
    if parts == 1:
        return ((n,),)
    out = []
    for d in range(1, n + 1):
        if n % d == 0:
            for rest in factorizations(n // d, parts - 1):
                out.append((d, *rest))
    return tuple(out)


def sizes_nest(split: LoopSplit, sizes: list[int]) -> bool:
    """Each size divides the level above (the extent first); a ragged-capable split's register
    tile may instead be any size below the level above."""
    chain = [split.extent, *sizes]
    last = len(chain) - 2  # the register tile inside the level above (never the S0 tile)
    for i in range(len(chain) - 1):
        ragged_ok = split.ragged and i == last and last >= 1 and chain[i + 1] < chain[i]
        if chain[i] % chain[i + 1] and not ragged_ok:
            return False
    return True


def sizes_from_factors(factors: tuple[int, ...]) -> list[int]:
    """Tile size at levels 1.. (level l keeps the product of factors l..end)."""
    return [math.prod(factors[level:]) for level in range(1, len(factors))]


def factors_from_sizes(extent: int, sizes: list[int]) -> tuple[int, ...]:
    chain = [extent, *sizes, 1]
    return tuple(chain[i] // chain[i + 1] for i in range(len(chain) - 1))


class SamplingError(RuntimeError):
    """No valid annotation found within the tries: a rare draw on a tightly constrained sketch
    (the search skips it and draws again)."""


def validate(sketch: Sketch, values: Mapping[str, int]) -> str | None:
    """Why `values` is not a valid annotation of `sketch` (None when valid)."""
    return sketch.validate(values)


def sample(sketch: Sketch, rng: random.Random) -> Schedule:
    """A random valid annotation of `sketch`."""
    return sketch.sample(rng)


def rejection_sample(sketch: Sketch, rng: random.Random, *, max_tries: int = 4000) -> Schedule:
    """A uniformly drawn valid annotation of a sketch whose knobs are independent choices checked
    by `sketch.validate` (every value of every knob drawn uniformly, invalid draws rejected).
    Raises `SamplingError` after `max_tries` invalid draws."""
    for _ in range(max_tries):
        values = {k.name: rng.choice(k.options) for k in sketch.knobs}
        if sketch.validate(values) is None:
            return Schedule.of(sketch.name, values)
    raise SamplingError(f"sketch {sketch.name}: no valid annotation found in {max_tries} tries")

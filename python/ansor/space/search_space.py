"""What the evolutionary search needs to know about one sketch, computed once per sketch.

    Sketch --search_space(ragged_prob)--> SearchSpace:
        tile_splits / parallel_splits (mutated by moving factors), unroll_knobs, other_knobs
        ("location" mutations), stage_knobs (crossover units), valid / sample / adapt,
        and the hooks the mutation code calls (innermost_limit, register_ok, is_ragged, ...)

This generic form asks the sketch itself (`Sketch.validate` / `sample`); a target whose sketches
have more structure subclasses it (`targets/cpu/search_space.py: CpuSearchSpace`, with compiled
validation and ragged register tiles).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ansor.space.schedule import SamplingError, Schedule
from ansor.space.sketch import LoopSplit

if TYPE_CHECKING:
    from ansor.space.sketch import Sketch

#: Default probability that a ragged-capable split (`LoopSplit.ragged`) draws a register tile that
#: does not divide the level above (its partial tile is peeled), rather than an exact one.
RAGGED_PROB = 0.3


class SearchSpace:
    """Knob groups of `sketch` and validity through the sketch's own methods."""

    #: after a tile mutation, check the whole schedule with `valid` (device limits)
    full_check_after_tile = True

    def __init__(self, sketch: Sketch, ragged_prob: float = 0.0) -> None:
        self.sketch = sketch
        self.ragged_prob = ragged_prob
        self.tile_splits: tuple[LoopSplit, ...] = tuple(
            s for s in sketch.splits if s.tile_knobs and s.extent > 1
        )
        self.parallel_splits = tuple(s for s in self.tile_splits if s.kind == "S" and s.levels >= 2)
        tile_names = {n for s in sketch.splits for n in s.tile_knobs}
        unroll_names = set(sketch.unroll_knobs)
        free = set(sketch.free_tile_knobs)
        self.free_tile_knobs = tuple(k for k in sketch.knobs if k.name in free and len(k.options) > 1)
        tile_names = tile_names | free
        self.unroll_knobs = tuple(
            k for k in sketch.knobs if k.name in unroll_names and len(k.options) > 1
        )
        self.other_knobs = tuple(
            k
            for k in sketch.knobs
            if k.name not in tile_names and k.name not in unroll_names and len(k.options) > 1
        )
        self.stage_knobs: tuple[tuple[str, ...], ...] = sketch.knob_groups
        self.names = tuple(sorted(k.name for k in sketch.knobs))
        self.options = {k.name: frozenset(k.options) for k in sketch.knobs}
        self.non_tile = tuple(k for k in sketch.knobs if k.name not in tile_names)
        self.tile_knob_splits = tuple(s for s in sketch.splits if s.tile_knobs)
        self.ragged_splits = tuple(s for s in self.tile_knob_splits if s.ragged)

    def valid(self, values: Mapping[str, int]) -> bool:
        return self.sketch.validate(values) is None

    def sample(self, rng: random.Random) -> Schedule:
        return self.sketch.sample(rng)

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
            names, extent, limit = split.tile_knobs, split.extent, self.innermost_limit(split)
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

    def seeds(self, rng: random.Random) -> list[Schedule]:
        """Known-good annotations of this kind of sketch, adapted to its task, for the search's
        first batches (none in this generic form; the CUDA sketches' come from
        `targets/cuda/seeds.py`). `rng` fills what a seed leaves open."""
        return []

    def complete(self, sch: Schedule) -> Schedule | None:
        """`sch` (a record, perhaps from before a knob existed) with every knob of this sketch,
        the missing ones set by `Sketch.complete`; None when that cannot fill them."""
        if len(sch.knobs) == len(self.names):
            return sch
        values = self.sketch.complete(sch.values())
        return self.schedule(values) if set(values) == set(self.names) else None

    def schedule(self, values: Mapping[str, int]) -> Schedule:
        """`Schedule.of(sketch name, values)` for int values of exactly this sketch's knobs."""
        return Schedule(
            self.sketch.name, tuple(zip(self.names, map(values.__getitem__, self.names)))
        )


    # -- hooks of the mutation code ----------------------------------------------------------
    def innermost_limit(self, split: LoopSplit) -> int:
        return self.sketch.innermost_limit(split)

    def register_ok(self, split: LoopSplit, values: Mapping[str, int]) -> bool:
        """Whether the register tile of the stage owning `split` fits (no such limit here)."""
        return True

    def is_ragged(self, split: LoopSplit, values: Mapping[str, int]) -> bool:
        return False

    def ragged_options(self, split: LoopSplit, outer: int) -> list[int]:
        return []

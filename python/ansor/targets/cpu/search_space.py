"""What the evolutionary search knows about a CPU sketch, computed once per sketch.

    CpuSketch --search_space(ragged_prob)--> CpuSearchSpace: knob groups (tile / unroll / other,
        per-stage crossover units), a compiled `validate`/`sample` (the same rules as
        `annotation.validate_cpu`/`sample_cpu` without rebuilding knob names per call),
        `adapt` (transfer of another task's schedule), ragged register tiles, the register-tile limit
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ansor.space.schedule import SamplingError, Schedule, sizes_nest
from ansor.space.search_space import SearchSpace
from ansor.space.sketch import LoopSplit
from ansor.space.search_space import RAGGED_PROB
from ansor.targets.cpu.annotation import choose_sizes, ragged_options
from ansor.targets.cpu.params import MAX_REGISTER_TILE, innermost_limit

if TYPE_CHECKING:
    from ansor.targets.cpu.sketch import CpuSketch


class CpuSearchSpace(SearchSpace):
    """What the genetic operators need to know about one sketch, computed once: knob groups
    and a compiled form of `validate_cpu` / `sample_cpu` (the same rules, without
    rebuilding knob names on every call; `sample` rejects per stage instead of per sketch, which
    draws from the same distribution since the constraints are per stage)."""

    #: mutated tile sizes are checked by the per-stage register-tile limit (`register_ok`)
    full_check_after_tile = False

    def __init__(self, sketch: CpuSketch, ragged_prob: float = RAGGED_PROB) -> None:
        super().__init__(sketch, ragged_prob)
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
        """`validate_cpu(sketch, values) is None`, faster."""
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
        """A random valid annotation (as `sample_cpu`)."""
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

    # -- the hooks the generic mutation code calls ------------------------------------------
    def register_ok(self, split: LoopSplit, values: Mapping[str, int]) -> bool:
        return math.prod(values[n] for n in self.split_reg.get(split, ())) <= MAX_REGISTER_TILE

    def is_ragged(self, split: LoopSplit, values: Mapping[str, int]) -> bool:
        if not split.ragged or len(split.tile_knobs) < 2:
            return False
        return int(values[split.tile_knobs[-2]]) % int(values[split.tile_knobs[-1]]) != 0

    def ragged_options(self, split: LoopSplit, outer: int) -> list[int]:
        return ragged_options(split, outer)

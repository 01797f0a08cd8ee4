"""The search space's vocabulary, the same for every target: knobs, loop splits, the sketch interface.

    target rules --generate_sketches(task)--> [Sketch]        (targets/<name>/rules.py)
    Sketch.script(None)   -> transform script, holes = `transform.tune.knob`
    Sketch.script(values) -> the script with every knob resolved
    Sketch.validate(values) -> None | why not;  Sketch.sample(rng) -> Schedule
    Sketch.search_space(ragged_prob) -> what the evolutionary search mutates and crosses

A target's sketch classes implement the interface (`targets/cpu/sketch.py: CpuSketch`,
`targets/cuda/rules.py: GpuSketch`, `targets/cuda/reduction.py: RowSketch`); generic code
(search, measurement, tuning) only ever calls these methods.
"""

from __future__ import annotations

import abc
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ansor.space.schedule import Schedule
    from ansor.space.search_space import SearchSpace


def divisors(n: int) -> tuple[int, ...]:
    return tuple(d for d in range(1, n + 1) if n % d == 0)


@dataclass(frozen=True)
class Knob:
    """One hole: a name and the values it may take."""

    name: str
    options: tuple[int, ...]


@dataclass(frozen=True)
class LoopSplit:
    """Loop `dim` of a stage's op, split into `levels` tiling levels; its knobs are `tile_knobs`
    (tile size at level 1 .. levels-1, outermost first)."""

    op: int
    dim: int
    kind: str  # "S" or "R"
    extent: int
    vector: bool  # the innermost output loop: the vector lanes
    levels: int
    inner_limit: int = 0  # > 0: the innermost tile may be at most this (1 for a decomposed conv's rows)
    # The innermost (register/vector) tile need not divide the level above it: the loop's last,
    # partial tile is peeled off and both parts are vectorized at static shapes
    # (`_Renderer.peel_partial_tiles`).
    ragged: bool = False

    @property
    def tile_knobs(self) -> tuple[str, ...]:
        return tuple(f"op{self.op}.d{self.dim}.t{level}" for level in range(1, self.levels))


class Sketch(abc.ABC):
    """A program structure with holes; `rules` names the derivation rules that produced it.

    Subclasses provide `name`, `rules` and `knobs` (fields or attributes) and the methods below."""

    name: str
    rules: tuple[str, ...]
    knobs: tuple[Knob, ...]

    @property
    def rule(self) -> str:
        return "+".join(self.rules)

    @property
    def splits(self) -> tuple[LoopSplit, ...]:
        """The loop splits whose tile knobs the search moves factors between (none by default)."""
        return ()

    @property
    def unroll_knobs(self) -> tuple[str, ...]:
        """Names of the knobs that are unroll pragmas (mutated as "unroll")."""
        return ()

    @property
    def free_tile_knobs(self) -> tuple[str, ...]:
        """Knobs that size tiles without a `LoopSplit` (a row sketch's threads per row): the "tile"
        mutation redraws one of them."""
        return ()

    @property
    def knob_groups(self) -> tuple[tuple[str, ...], ...]:
        """Crossover units: knobs that must come from the same parent (one group: no crossover)."""
        return ()

    @property
    def untrained_share(self) -> float:
        """Share of each batch (0..1) the search reserves for this sketch while its cost model is
        untrained (0: none; a sketch with a tiny space next to a large one asks for some)."""
        return 0.0

    def complete(self, values: Mapping[str, int]) -> dict[str, int]:
        """`values` with the knobs added to this sketch after they were recorded set to what
        those records meant (none by default)."""
        return dict(values)

    def knob(self, name: str) -> Knob:
        for k in self.knobs:
            if k.name == name:
                return k
        raise KeyError(f"sketch {self.name} has no knob {name!r}")

    def innermost_limit(self, split: LoopSplit) -> int:
        """The largest innermost tile of `split` this target allows."""
        return split.inner_limit or 64

    @abc.abstractmethod
    def script(self, values: Mapping[str, int] | None = None, *, lower_vectors: bool = True) -> str | None:
        """The transform script (holes when `values` is None); None: the untransformed program."""

    @abc.abstractmethod
    def validate(self, values: Mapping[str, int]) -> str | None:
        """Why `values` is not a valid annotation of this sketch (None when valid)."""

    @abc.abstractmethod
    def sample(self, rng: random.Random) -> Schedule:
        """A random valid annotation. Raises `SamplingError` when none is found."""

    def search_space(self, ragged_prob: float) -> SearchSpace:
        """What the evolutionary search needs to know about this sketch (`space/search_space.py`)."""
        from ansor.space.search_space import SearchSpace

        return SearchSpace(self)


@dataclass(frozen=True, eq=True)
class SkipSketch(Sketch):
    """The untransformed program (CPU) or the target's default schedule: no knobs."""

    name: str = "skip"
    rules: tuple[str, ...] = ("skip",)
    knobs: tuple[Knob, ...] = ()

    @property
    def rule(self) -> str:
        return "skip"

    def script(self, values: Mapping[str, int] | None = None, *, lower_vectors: bool = True) -> str | None:
        return None

    def validate(self, values: Mapping[str, int]) -> str | None:
        return None if not values else f"knobs {', '.join(sorted(values))} are not knobs of sketch {self.name}"

    def sample(self, rng: random.Random) -> Schedule:
        from ansor.space.schedule import Schedule

        return Schedule.of(self.name, {})

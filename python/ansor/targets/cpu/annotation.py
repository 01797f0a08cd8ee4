"""Random annotation: fill a sketch's holes with valid values.

    Sketch --sample(rng)--> Schedule(sketch name, knob values)   (frozen, JSON-able, keyed)

Tile sizes come from a uniformly chosen ordered factorization of each loop extent
(`extent = f0 * f1 * ...`), innermost factor <= 64 (<= 16 on the vector lanes; half the time
a vector loop's factorization is drawn among those filling whole vector registers), register/vector
tile <= 256 elements per stage; the knob for level l is the product of the factors inside it.
A ragged-capable loop (see `sketch.py`) draws, with probability `RAGGED_PROB`, a register tile
that leaves a partial tile instead. Pad locations and `auto_unroll_max_step` are uniform over
their options. Invalid combinations are rejected here, before anything is built.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping

from typing import TYPE_CHECKING

from ansor.space.schedule import (
    SamplingError,
    Schedule,
    factorizations,
    sizes_from_factors,
    sizes_nest,
)
from ansor.space.search_space import RAGGED_PROB
from ansor.space.sketch import LoopSplit
from ansor.targets.cpu.params import MAX_REGISTER_TILE, MAX_VECTOR, innermost_limit

if TYPE_CHECKING:
    from ansor.targets.cpu.sketch import CpuSketch, Stage


@functools.cache
def _valid_factors(split: LoopSplit) -> tuple[tuple[int, ...], ...]:
    return tuple(f for f in factorizations(split.extent, split.levels) if f[-1] <= innermost_limit(split))


#: Lanes of one vector register (f32: 8 on AVX2, 16 on AVX-512); a vector loop's innermost factor
#: that is a multiple of this fills whole registers.
VECTOR_LANES = MAX_VECTOR // 2
#: Probability that a vector loop's factorization is drawn among those filling whole registers
#: (else uniformly among all). Uniform factorizations give a 128-lane loop an innermost factor
#: of 8 or 16 only 20-30% of the time, so with several stages (a softmax after a batch matmul)
#: almost no random sample had every stage on full vectors: partial 1-4 lane vectors run 2-4x
#: slower, and the search (and its cost model's warm-up) rarely saw a good program.
FULL_VECTOR_PROB = 0.5


@functools.cache
def _full_vector_factors(split: LoopSplit) -> tuple[tuple[int, ...], ...]:
    # (a whole row wider than `MAX_VECTOR`, allowed by `innermost_limit`, fills registers too)
    return tuple(f for f in _valid_factors(split)
                 if f[-1] % VECTOR_LANES == 0 or f[-1] == split.extent > MAX_VECTOR)


def choose_factors(split: LoopSplit, rng: random.Random) -> tuple[int, ...]:
    """A random valid factorization of `split` (see `FULL_VECTOR_PROB` for vector loops)."""
    if split.vector:
        full = _full_vector_factors(split)
        if full and rng.random() < FULL_VECTOR_PROB:
            return rng.choice(full)
    return rng.choice(_valid_factors(split))




def ragged_options(split: LoopSplit, outer: int) -> list[int]:
    """Register-tile sizes of `split` that leave a partial tile inside a tile of `outer`."""
    return [r for r in range(2, min(innermost_limit(split), outer - 1) + 1) if outer % r]


@functools.cache
def _ragged_prefixes(split: LoopSplit) -> tuple[tuple[int, ...], ...]:
    """Exact tile sizes of the levels above a ragged register tile that leave room for one."""
    out = []
    for f in factorizations(split.extent, split.levels - 1):
        sizes = sizes_from_factors(f)
        if sizes and ragged_options(split, sizes[-1]):
            out.append(tuple(sizes))
    return tuple(out)


def choose_sizes(split: LoopSplit, rng: random.Random, ragged_prob: float = RAGGED_PROB) -> list[int]:
    """Random tile sizes (levels 1..) of `split`: from `choose_factors`, or for a ragged-capable
    split with probability `ragged_prob` exact sizes above a ragged register tile (uniform over
    the levels' factorizations that leave room for one, then over the ragged sizes)."""
    if split.ragged and ragged_prob > 0 and rng.random() < ragged_prob:
        prefixes = _ragged_prefixes(split)
        if prefixes:
            prefix = rng.choice(prefixes)
            return [*prefix, rng.choice(ragged_options(split, prefix[-1]))]
    return sizes_from_factors(choose_factors(split, rng))


def register_tile(stage: Stage, values: Mapping[str, int]) -> int:
    """Elements of the stage's innermost (vectorized) tile."""
    if stage.kind == "chain":  # one row of one op at a time: each op's vector is its own knob
        return 1
    n = 1
    for s in stage.splits:
        if s.tile_knobs and (s.kind == "S" or stage.kind != "mlt"):
            n *= int(values[s.tile_knobs[-1]])
    return n


def validate_cpu(sketch: CpuSketch, values: Mapping[str, int]) -> str | None:
    """Why `values` is not a valid annotation of `sketch` (None when valid)."""
    for k in sketch.knobs:
        if k.name not in values:
            return f"missing knob {k.name}"
        if int(values[k.name]) not in k.options:
            return f"knob {k.name}={values[k.name]} not in its options"
    if len(values) != len(sketch.knobs):  # (a record of another sketch under this name)
        unknown = sorted(set(values) - {k.name for k in sketch.knobs})
        return f"knobs {', '.join(unknown)} are not knobs of sketch {sketch.name}"
    for stage in sketch.stages:
        for s in stage.splits:
            sizes = [int(values[n]) for n in s.tile_knobs]
            if not sizes_nest(s, sizes):
                return f"op{s.op} loop d{s.dim}: tile sizes {sizes} do not nest in extent {s.extent}"
            if sizes and sizes[-1] > innermost_limit(s):
                return f"op{s.op} loop d{s.dim}: innermost tile {sizes[-1]} too large"
        reg = register_tile(stage, values)
        if reg > MAX_REGISTER_TILE:
            return f"op{stage.op}: register tile of {reg} elements exceeds {MAX_REGISTER_TILE}"
    return None


def sample_cpu(sketch: CpuSketch, rng: random.Random, *, max_tries: int = 1000) -> Schedule:
    """A random valid annotation of `sketch` (uniform, but for `FULL_VECTOR_PROB`)."""
    if not sketch.stages:
        return Schedule.of(sketch.name, {})
    for _ in range(max_tries):
        values: dict[str, int] = {}
        for s in sketch.splits:
            if not s.tile_knobs:
                continue
            for name, size in zip(s.tile_knobs, choose_sizes(s, rng), strict=True):
                values[name] = size
        for k in sketch.knobs:
            if k.name not in values:
                values[k.name] = rng.choice(k.options)
        if validate_cpu(sketch, values) is None:
            return Schedule.of(sketch.name, values)
    raise SamplingError(f"sketch {sketch.name}: no valid annotation found in {max_tries} tries")

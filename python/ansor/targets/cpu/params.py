"""CPU target parameters: the host's vector width and the limits and knob options it implies.

    /proc/cpuinfo (avx512f?) or ANSOR_VECTOR_BITS --host_vector_bits--> VECTOR_BITS
    VECTOR_BITS --> MAX_VECTOR (innermost vector tile), MAX_REGISTER_TILE, innermost_limit(split)
"""

from __future__ import annotations


import functools
from typing import NamedTuple

from ansor.space.sketch import LoopSplit
from ansor.core.host import host_vector_bits

#: Ansor's `auto_unroll_max_step` choices on CPU.
UNROLL_OPTIONS: tuple[int, ...] = (0, 16, 64, 512)


#: Ansor's `max_innermost_split_factor`.
MAX_INNERMOST = 64


#: Bits of one vector register the search targets (`host_vector_bits`).
class _Limits(NamedTuple):
    vector_bits: int
    max_vector: int
    max_register_tile: int
    vector_lanes: int


@functools.cache
def limits() -> _Limits:
    """The vector limits of this host, asked once, when the CPU search first needs them (not at
    import: `import ansor` reads no hardware). As module attributes:

    - `VECTOR_BITS`: `core.host.host_vector_bits()` (`ANSOR_VECTOR_BITS` overrides);
    - `MAX_VECTOR`: widest vector on the innermost (contiguous) loop, in elements: two f32
      registers (AVX2: 16, AVX-512: 32);
    - `MAX_REGISTER_TILE`: largest register/vector tile (product of the innermost factors), in
      elements (AVX2: 256, twice its 16 ymm registers; AVX-512: 512, its 32 zmm registers);
    - `VECTOR_LANES`: f32 lanes of one register (8 / 16); a vector loop's innermost factor that is
      a multiple of this fills whole registers."""
    bits = host_vector_bits()
    return _Limits(bits, 2 * bits // 32, 256 if bits == 256 else 512, bits // 32)


_LAZY = {"VECTOR_BITS": "vector_bits", "MAX_VECTOR": "max_vector", "MAX_REGISTER_TILE": "max_register_tile",
         "VECTOR_LANES": "vector_lanes"}


def __getattr__(name: str) -> int:
    if name in _LAZY:
        return getattr(limits(), _LAZY[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: A vector tile narrower than this many lanes is "narrow": rows without a wider exact vector are
#: vectorized whole (`whole_row_vector`) and are not packed (`rules`).
NARROW_VECTOR = 4


#: Registers of partial results a reduction chain's row reduction may keep (its R tile, the vector
#: it accumulates across the row, is at most this many f32 registers). The max of a softmax is an
#: IEEE `maximumf`, which x86 lowers to ~5 dependent instructions per register (sign mask, blend,
#: NaN compare, max, masked move): with the vector-loop limit of two registers that latency chain
#: bounded softmax-256x4096's max pass (16- or 32-lane partials: 0.34 ms against PyTorch's 0.30 ms;
#: 128 lanes, 8 independent chains: 0.25 ms on the 2-core EPYC VM).
ACCUMULATOR_REGISTERS = 8


#: Compute locations of a pad producer: 0 = at the root (its own loop nest), 1 = inside S0.
PAD_LOCATIONS: tuple[int, ...] = (0, 1)


#: Tiling levels per loop kind, by stage kind.
LEVELS = {"mlt": {"S": 4, "R": 2}, "tile": {"S": 3, "R": 2}, "rfactor": {"S": 1, "R": 2}}


def innermost_limit(split: LoopSplit) -> int:
    """The largest innermost (register/vector) tile of `split`.

    A one-knob vector split (a reduction chain's rows: softmax, layer norm) whose extent has no
    divisor of 4..`MAX_VECTOR` lanes may take the whole row, up to `MAX_REGISTER_TILE` lanes, as
    one vector (LLVM splits it into registers): otherwise its only exact vector is 1 lane and
    the chain runs scalar (ViT's 197-token softmax: 3.5-4 ms scalar, 0.5 ms as whole rows,
    against PyTorch's 0.4 ms).

    A vector reduction loop (only a reduction chain's rows have one: its R tile is the width of the
    vector of partial results kept across the row) may be `ACCUMULATOR_REGISTERS` registers wide,
    so the max/sum accumulates in independent registers instead of one latency-bound chain."""
    limit = limits().max_vector if split.vector else MAX_INNERMOST
    if split.vector and split.kind == "R":
        limit = ACCUMULATOR_REGISTERS * limits().vector_lanes
    if split.vector and split.levels == 2 and whole_row_vector(split.extent):
        limit = split.extent
    return min(limit, split.inner_limit) if split.inner_limit else limit


def exact_vector(extent: int) -> int:
    """The widest vector tile of at most `MAX_VECTOR` lanes that divides `extent`."""
    return max(d for d in range(1, limits().max_vector + 1) if extent % d == 0)


def whole_row_vector(extent: int) -> bool:
    """Whether a row of `extent` lanes is better vectorized whole (one vector of up to
    `MAX_REGISTER_TILE` lanes, which LLVM splits into registers) than by its widest divisor of at
    most `MAX_VECTOR` lanes: when that divisor is under 4 lanes (197 tokens: 1)."""
    return extent <= limits().max_register_tile and exact_vector(extent) < NARROW_VECTOR

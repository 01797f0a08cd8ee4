"""CPU target parameters: the host's vector width and the limits and knob options it implies.

    /proc/cpuinfo (avx512f?) or ANSOR_VECTOR_BITS --host_vector_bits--> VECTOR_BITS
    VECTOR_BITS --> MAX_VECTOR (innermost vector tile), MAX_REGISTER_TILE, innermost_limit(split)
"""

from __future__ import annotations


from ansor.space.sketch import LoopSplit
from ansor.core.host import host_vector_bits

#: Ansor's `auto_unroll_max_step` choices on CPU.
UNROLL_OPTIONS: tuple[int, ...] = (0, 16, 64, 512)


#: Ansor's `max_innermost_split_factor`.
MAX_INNERMOST = 64


#: Bits of one vector register the search targets (`host_vector_bits`).
VECTOR_BITS = host_vector_bits()


#: Widest vector on the innermost (contiguous) loop, in elements: two f32 registers (AVX2: 16,
#: AVX-512: 32).
MAX_VECTOR = 2 * VECTOR_BITS // 32


#: Largest register/vector tile (product of the innermost factors), in elements (AVX2: 256, twice
#: its 16 ymm registers; AVX-512: 512, its 32 zmm registers).
MAX_REGISTER_TILE = 256 if VECTOR_BITS == 256 else 512


#: A vector tile narrower than this many lanes is "narrow": rows without a wider exact vector are
#: vectorized whole (`whole_row_vector`) and are not packed (`rules`).
NARROW_VECTOR = 4


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
    against PyTorch's 0.4 ms)."""
    limit = MAX_VECTOR if split.vector else MAX_INNERMOST
    if split.vector and split.levels == 2 and whole_row_vector(split.extent):
        limit = split.extent
    return min(limit, split.inner_limit) if split.inner_limit else limit


def exact_vector(extent: int) -> int:
    """The widest vector tile of at most `MAX_VECTOR` lanes that divides `extent`."""
    return max(d for d in range(1, MAX_VECTOR + 1) if extent % d == 0)


def whole_row_vector(extent: int) -> bool:
    """Whether a row of `extent` lanes is better vectorized whole (one vector of up to
    `MAX_REGISTER_TILE` lanes, which LLVM splits into registers) than by its widest divisor of at
    most `MAX_VECTOR` lanes: when that divisor is under 4 lanes (197 tokens: 1)."""
    return extent <= MAX_REGISTER_TILE and exact_vector(extent) < NARROW_VECTOR

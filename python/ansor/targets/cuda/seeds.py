"""Seed annotations of the CUDA multi-level tiling sketch: the thread-block shapes of classic
CUDA-core (SIMT) GEMM kernels, written in the sketch's knobs and adapted to one task.

    GpuStage + its knobs --CLASSIC_BLOCKS, per mapped loop (x innermost, then y)--> donor knob values
      --SearchSpace.adapt (sizes that nest in this task's extents; invalid ones dropped)--> seeds

The evolutionary search puts them in its initial population and measures up to its transfer share
of each batch of them (`EvolutionarySearch`'s `seeds`), as it does with a network's sibling tasks'
best programs: the first batches then hold programs of the shapes hand-written kernels use
(64x64 blocks of 16x16 threads, each computing a 4x4 tile as 2x2 virtual threads of 2x2, K
tiles of 8-32 double-buffered in shared memory; Volkov & Demmel 2008, and the SIMT GEMMs of
CUTLASS and of the "how to optimize a GEMM" tutorials), not only random draws. Why: in batches of
16 the learned search can settle on its first good region. On the prime matmul 509x1021x257
(H200), a 192-trial run stayed at 19.5 µs from its third batch on, while a 64x64 block with 2x2
virtual threads runs at 16.6 µs (`results/gpu-prime/README.md`).

Only the block structure is seeded: the search still mutates every knob of a seed, and the cost
model ranks seeds against its own proposals once it is trained. A sketch without at least one
mapped space loop and one reduction loop gets no seeds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ansor.space.sketch import Knob
    from ansor.targets.cuda.rules import GpuStage

#: (block tile, threads, virtual threads) along x (the innermost mapped loop), then the same along
#: y, the reduction's shared-memory tile (`R0`), its inner step (`R1`) and the pipeline depth.
CLASSIC_BLOCKS: tuple[tuple[tuple[int, int, int], tuple[int, int, int], int, int, int], ...] = (
    ((64, 16, 2), (64, 16, 2), 16, 4, 2),    # 4x4 a thread as 2x2 virtual threads of 2x2
    ((64, 16, 1), (64, 16, 1), 16, 4, 2),    # 4x4 a thread, contiguous
    ((128, 16, 2), (128, 16, 2), 8, 1, 2),   # 8x8 a thread as 2x2 virtual threads of 4x4
    ((64, 16, 2), (128, 16, 2), 16, 4, 2),   # 4x8
    ((128, 16, 2), (64, 16, 2), 16, 4, 2),   # 8x4
    ((64, 16, 2), (32, 8, 2), 16, 4, 2),     # 64x32 blocks of 128 threads
    ((32, 8, 2), (64, 16, 2), 16, 4, 2),     # 32x64
    ((32, 8, 1), (32, 8, 1), 32, 4, 1),      # 32x32 blocks of 64 threads, one stage
)

#: The register tile (vectorized innermost step) at most this wide in a seed.
SEED_VECTOR = 4


def _levels(block: int, threads: int, vthreads: int, vector: bool) -> tuple[int, int, int, int]:
    """(block tile, virtual-thread chunk, thread tile, register tile) of one mapped loop."""
    chunk = max(1, block // vthreads)
    per_thread = max(1, chunk // threads)
    reg = min(per_thread, SEED_VECTOR) if vector else 1
    while per_thread % reg:
        reg -= 1
    return block, chunk, per_thread, reg


def seed_values(stage: GpuStage, knobs: tuple[Knob, ...]) -> list[dict[str, int]]:
    """Donor knob values of `CLASSIC_BLOCKS` for `stage` (before adapting them to its extents);
    empty where the stage has no mapped space loop or no reduction. Loops beyond x and y get
    blocks of 1; reduction loops other than the innermost take their whole extent per `R0` step
    when it is at most 7 (a convolution's window), else 1; knobs other than tiles take their
    largest option (the unroll depth, caching windowed inputs), but the pipeline depth, from the
    table."""
    mapped = [d for d in stage.mapped if stage.kinds[d] == "S"]
    if not mapped or not stage.reduce:
        return []
    out = []
    for x, y, k_tile, k_step, stages in CLASSIC_BLOCKS:
        v: dict[str, int] = {}
        for axis, d in enumerate(mapped):
            block, threads, vthreads = (x, y)[axis] if axis < 2 else (1, 1, 1)
            row_tile = d in stage.decompose_rows  # a windowed op's output rows: register tile 1
            for lv, size in enumerate(_levels(block, threads, vthreads, not row_tile), start=1):
                v[stage.knob(d, lv)] = size
        inner = stage.reduce[-1]
        for d in stage.reduce:
            tile = k_tile if d == inner else (stage.extents[d] if stage.extents[d] <= 7 else 1)
            v[stage.knob(d, 1)] = tile
            v[stage.knob(d, 2)] = min(k_step, tile) if d == inner else 1
        for k in knobs:
            if k.name not in v and k.options:
                v[k.name] = stages if k.name == stage.stages_knob else max(k.options)
        out.append(v)
    return out

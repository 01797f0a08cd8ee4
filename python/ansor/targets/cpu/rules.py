"""Sketch derivation rules (Ansor §4.1) for CPUs: from a task's op graph to a few sketches.

    SearchTask --loops.analyze_graph--> ops, pads --rules, output to input--> [Sketch] (+ skip)

Each rule has a condition on an op and an action producing stage variants (Ansor's
`MeetCondition` / `Apply`). Rules are tried in order for every op, output first; the first rule
that applies decides the op's variants (apply-and-skip-rest):

1. **always-inline**: element-wise producers were already inlined by `loops.preprocess`;
   initialisers (`linalg.fill`) are fused into their single consumer's parallel loop.
2. **multi-level tiling with fusion**: an op with data reuse whose only user is an element-wise
   op reading it through a plain permutation: two variants, consumer fused at level 1 or 2.
3. **multi-level tiling**: an op with data reuse (SSRSRS).
4. **rfactor**: a reduction whose parallel extent is small against its reduction extent:
   split the reduction (plus the plain `tile` variant, so the search decides).
5. **tile** (the skip rule, made useful): parallel + vectorized tiling of anything else.
6. **reduction chain**: an element-wise op and the reductions/element-wise ops computing its
   inputs over the same loops (softmax, layer norm), fused into one parallel loop over rows;
   offered as further sketches next to the unfused ones.
The sketches are the product of the per-op variants (capped), plus `skip` (the untransformed
program) last, so every task has a valid program.
"""

from __future__ import annotations

import itertools
import logging
import math
import os

from ansor.core.loops import OpLoops, PadInfo, analyze_graph
from ansor.targets.cpu.params import LEVELS, NARROW_VECTOR, exact_vector
from ansor.space.sketch import LoopSplit, Sketch
from ansor.targets.cpu.sketch import Stage, stage_knobs
from ansor.core.task import SearchTask
from ansor.targets.cpu.sketch import CpuSketch
from ansor.core.loops import fusable_consumer
from ansor.space.windowed import DECOMPOSE

log = logging.getLogger(__name__)

#: At most this many sketches per task (Ansor: typically fewer than 10).
MAX_SKETCHES = 8


def _folds_units(op: OpLoops) -> bool:
    """A windowed `linalg.generic` (transposed or capsule convolution, ...): MLIR 22 vectorizes a
    generic only when every index is a plain loop, so its register tile keeps the window's
    strided space loops at 1 (`window_dims`) and, with every reduction loop stepping by 1 in R1,
    folding the unit loops away (`fold_unit_extent_dims`) leaves plain indices to vectorize."""
    return op.name not in DECOMPOSE and not all(op.plain_inputs)


def _exact_tiles_suffice(extent: int, vector: bool) -> bool:
    """Whether exact splits of `extent` already give a good register tile: whole vector registers
    on the vector lanes, 4-8 rows on another loop. Only loops without one get ragged tiles: on
    the others they would only thin out the search (and sampling stays as it was). "Whole
    registers" means 8 f32 lanes on every host: AVX-512 has 8-lane (ymm) instructions too, and
    the ragged set measured on AVX2 (README: only lanes not a multiple of 8) stays the same."""
    if vector:
        return extent % 8 == 0
    return any(extent % d == 0 for d in range(4, 9))


def _splits(op: OpLoops, kind: str, *, ragged: bool = False) -> tuple[LoopSplit, ...]:
    """The op's loop splits for a stage of `kind`; `ragged`: the register (or vector) tile of
    space loops other than a window's rows may be ragged (`sketch.py`) where exact splits of the
    extent have no good register tile (`_exact_tiles_suffice`)."""
    vec = op.innermost_output_dim()
    if kind != "mlt":
        rows: tuple[int, ...] = ()
    elif op.name in DECOMPOSE:
        rows = DECOMPOSE[op.name][0]
    else:  # a windowed linalg.generic: see `_folds_units`
        rows = op.window_dims
    out = []
    for d, (k, e) in enumerate(zip(op.kinds, op.extents, strict=True)):
        vector = d == vec and k == "S"
        out.append(LoopSplit(op.index, d, k, e, vector, LEVELS[kind][k], 1 if d in rows else 0,
                             ragged=(ragged and k == "S" and d not in rows and e > 2
                                     and not _exact_tiles_suffice(e, vector))))
    return tuple(out)


def _packable_inputs(op: OpLoops) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """Inputs to store block-major for the packed sketch: those indexed (plainly) by the vector
    loop, with the permutation moving its block dim first. Only when every indexed input is plain
    and the vector loop is the output's innermost dim (so the output packing is a reshape)."""
    vec = op.innermost_output_dim()
    if vec is None or op.kinds[vec] != "S" or not op.reduce:
        return ()
    out = []
    for i, dims in enumerate(op.input_dims):
        if vec not in dims:
            continue
        if not op.plain_inputs[i] or dims[-1] == vec:
            # vec innermost already: the panel is contiguous only if nothing else varies faster;
            # still move the block dim first (e.g. matmul B[k, n] -> [n/J3, k, J3]).
            pass
        if not op.plain_inputs[i]:
            return ()
        pos = dims.index(vec)
        out.append((i, (pos, *[j for j in range(len(dims)) if j != pos])))
    return tuple(out)


def _needs_rfactor(op: OpLoops) -> bool:
    """Ansor's condition: little parallelism next to a long reduction.

    Upstream behaviour worked around here: `transform.structured.tile_reduction_using_for`
    aborts (an assertion in `cast<AffineDimExpr>`) on an output map with constant results, a
    keepdim reduction's `(d0, d1, d2) -> (d0, 0, 0)` (PyTorch's LayerNorm / GroupNorm /
    InstanceNorm statistics), so such reductions get no rfactor sketch."""
    if not op.reduce or not op.plain_output:
        return False
    space = math.prod(op.extents[d] for d in op.space)
    red = math.prod(op.extents[d] for d in op.reduce)
    return space < 16 * (os.cpu_count() or 1) and red >= 16 * space


def _reduction_chain(out: OpLoops, by_index: dict[int, OpLoops], pads: dict[int, list[int]],
                     taken: frozenset[int] | set[int] = frozenset()) -> tuple[list[OpLoops], tuple[int, ...]] | None:
    """The members (consumers first) and row dims of the reduction chain ending at `out`, or None.

    A chain (a softmax: max, exp, sum, div; a layer norm) is `out`, an element-wise op, and the
    ops computing its inputs back to ops with data reuse, initialisers, ops `taken` into another
    stage (a matmul's fused bias/residual consumer) or arguments: reductions
    and element-wise ops over the same loops as `out` (one loop numbering, so a tile of `out`'s
    rows is a tile of every member's), each used only inside the chain, with at least one
    reduction. The rows are the loops no member reduces. Each `tile` stage alone passes its
    whole tensor through memory and runs its own parallel loop; fused, every tile of rows
    stays in cache from the first reduction to the output.
    """
    if not out.is_elementwise() or out.is_init() or pads.get(out.index):
        return None
    members: dict[int, OpLoops] = {}
    frontier = [p for p in out.input_producers if p is not None]
    while frontier:
        p = frontier.pop(0)
        m = by_index.get(p)
        if p in members or m is None or m.is_init() or p in taken or (m.has_data_reuse() and not m.is_elementwise()):
            continue
        if m.extents != out.extents or pads.get(p) or not all(m.pointwise_inputs):
            return None
        members[p] = m
        frontier += [q for q in m.input_producers if q is not None]
    if not any(m.reduce for m in members.values()):
        return None
    group = {out.index, *members}
    for m in members.values():
        if any(u is None or u not in group for u in m.users):
            return None
    for x in (out, *members.values()):
        for pos, p in enumerate(x.input_producers):
            if p in members and x.input_dims[pos] != members[p].output_dims:
                return None  # read through another loop numbering: row tiles would not align
    rows = tuple(d for d in range(len(out.extents))
                 if all(m.kinds[d] == "S" for m in members.values()) and out.extents[d] > 1)
    if not rows:
        return None
    # consumers first (fusing into the loop must see a producer's users there already)
    order = sorted(members.values(), key=lambda m: -m.index)
    return order, rows


def _chain_stage(out: OpLoops, members: list[OpLoops], rows: tuple[int, ...],
                 inits: dict[int, list[OpLoops]]) -> Stage:
    """The `chain` stage: the output's rows tiled at S0 (knob t1), its vector loop (knob t1 =
    vector width); each element-wise member's vector loop and each reduction's innermost
    reduction loop (vector-sized, knob t1); everything else runs one row at a time."""
    splits = []
    vec = out.innermost_output_dim()
    for d, e in enumerate(out.extents):
        if d in rows:
            splits.append(LoopSplit(out.index, d, "S", e, False, 2))
        else:
            splits.append(LoopSplit(out.index, d, "S", e, d == vec, 2 if d == vec else 1))
    for m in members:
        if m.reduce:
            last = m.reduce[-1]
            for d, (k, e) in enumerate(zip(m.kinds, m.extents, strict=True)):
                splits.append(LoopSplit(m.index, d, k, e, d == last, 2 if k == "R" else 1))
        else:
            mv = m.innermost_output_dim()
            for d, e in enumerate(m.extents):
                splits.append(LoopSplit(m.index, d, "S", e, d == mv, 2 if d == mv else 1))
    my_inits = tuple((i.index, len(i.extents)) for x in (out, *members) for i in inits.get(x.index, []))
    # Reductions over one (innermost) loop with a plain output accumulate a vector of partial
    # results across the row and reduce it once (rfactor inside the chain); a keepdim output map
    # `(d0, d1) -> (d0, 0)` stays on the per-chunk reduction (`_needs_rfactor`: the upstream abort).
    partial = tuple(m.index for m in members
                    if len(m.reduce) == 1 and m.plain_output and m.reduce[0] == len(m.extents) - 1)
    return Stage(out.index, out.name, "chain", tuple(splits), my_inits, members=tuple(m.index for m in members),
                 rows=rows, partial=partial)


def _variants(op: OpLoops, by_index: dict[int, OpLoops], inits: dict[int, list[OpLoops]],
              pads: dict[int, list[int]], taken: set[int]) -> list[tuple[str, list[Stage]]]:
    """(rule name, stages) alternatives for `op` (empty when another stage absorbed it)."""
    my_inits = tuple((i.index, len(i.extents)) for i in inits.get(op.index, []))
    my_pads = tuple(pads.get(op.index, []))
    if op.has_data_reuse() and not op.is_elementwise() and not op.is_init():
        decompose = DECOMPOSE[op.name][1] if op.name in DECOMPOSE else ""
        fold = _folds_units(op)
        fc = fusable_consumer(op, by_index)
        if fc is not None:
            cons, mapping = fc
            return [
                (f"multi_level_tiling_with_fusion(op{op.index}<-op{cons.index}@{level})",
                 [Stage(op.index, op.name, "mlt", _splits(op, "mlt", ragged=True), my_inits, my_pads, cons.index, mapping, level,
                        n_inputs=len(op.input_dims), decompose=decompose, fold_units=fold)])
                for level in (1, 2)
            ]
        plain = Stage(op.index, op.name, "mlt", _splits(op, "mlt", ragged=True), my_inits, my_pads, n_inputs=len(op.input_dims),
                      decompose=decompose, fold_units=fold)
        out = [(f"multi_level_tiling(op{op.index})", [plain])]
        # (packing turns the op into a linalg.generic, which cannot be decomposed and vectorized)
        packs = _packable_inputs(op) if not decompose else ()
        if packs and exact_vector(op.extents[op.innermost_output_dim()]) < NARROW_VECTOR:
            # packed panels need an exact vector tile: on lanes with none of 4..16 (197 tokens)
            # the packed sketch only holds 1-lane (scalar) programs, yet the search drifted into
            # it (ViT's attention subgraph: 69 of 96 trials) instead of ragged tiles
            packs = ()
        if packs:
            packed = Stage(op.index, op.name, "mlt", _splits(op, "mlt"), my_inits, my_pads, packs=packs,
                           n_inputs=len(op.input_dims), fold_units=fold)
            out.append((f"multi_level_tiling_packed(op{op.index})", [packed]))
        return out
    tile = (f"tile(op{op.index})", [Stage(op.index, op.name, "tile", _splits(op, "tile", ragged=True), my_inits, my_pads)])
    if _needs_rfactor(op):
        rf = (f"rfactor(op{op.index})", [Stage(op.index, op.name, "rfactor", _splits(op, "rfactor"), my_inits)])
        return [rf, tile]
    return [tile]


def generate_sketches(task: SearchTask) -> list[Sketch]:
    """All sketches for `task`; the last one is always the `skip` fallback."""
    ops, pad_infos = analyze_graph(task.ir)
    skip = CpuSketch(name="skip", rules=("skip",))
    if not ops:
        return [skip]
    by_index = {o.index: o for o in ops}
    # Every linalg op must be understood, or a whole-op vectorization could blow up.
    from ansor.core.loops import preprocessed_ir

    tagged = preprocessed_ir(task.ir)
    if tagged.count("ansor.op = ") != len(ops):
        log.warning("%s: some ops have loops the rules cannot see; only the untransformed program is tuned",
                    task.name)
        return [skip]

    inits: dict[int, list[OpLoops]] = {}
    for o in ops:
        if o.is_init() and len(o.users) == 1 and o.users[0] is not None:
            inits.setdefault(o.users[0], []).append(o)
    fused_inits = {i.index for lst in inits.values() for i in lst}
    pads: dict[int, list[int]] = {}
    for p in pad_infos:
        if p.consumer is not None and p.consumer in by_index:
            pads.setdefault(p.consumer, []).append(p.index)

    taken: set[int] = set(fused_inits)
    for o in ops:  # consumers that will be fused into their producer's stage
        if o.has_data_reuse() and not o.is_elementwise() and not o.is_init():
            fc = fusable_consumer(o, by_index)
            if fc is not None:
                taken.add(fc[0].index)
    per_op: list[list[tuple[str, list[Stage]]]] = []
    for o in sorted(ops, key=lambda o: -o.index):  # output first
        if o.index in taken:
            continue
        v = _variants(o, by_index, inits, pads, taken)
        per_op.append(v)
    # Reduction chains (softmax, layer norm): the same sketches again with each chain fused
    # (after the unfused ones, so those keep their names).
    chains = {}
    for o in ops:
        if o.index in taken or o.is_init():
            continue
        ch = _reduction_chain(o, by_index, pads, taken)
        if ch is not None and not any(m.index in taken for m in ch[0]):
            chains[o.index] = ch
    fused_per_op: list[list[tuple[str, list[Stage]]]] = []
    if chains:
        absorbed = {m.index for members, _ in chains.values() for m in members}
        for o in sorted(ops, key=lambda o: -o.index):
            if o.index in taken or o.index in absorbed:
                continue
            if o.index in chains:
                members, rows = chains[o.index]
                name = f"reduction_chain(op{o.index}<-{','.join(f'op{m.index}' for m in members)})"
                fused_per_op.append([(name, [_chain_stage(o, members, rows, inits)])])
            else:
                fused_per_op.append(_variants(o, by_index, inits, pads, taken))
    sketches: list[Sketch] = []
    # (the unfused family keeps its cap, so existing sketches keep their names with chains added)
    families = [(per_op, MAX_SKETCHES)] + ([(fused_per_op, MAX_SKETCHES // 2)] if chains else [])
    for family, cap in families:
        for n_combo, combo in enumerate(itertools.product(*family)):
            if n_combo >= cap:
                break
            rules = tuple(name for name, _ in combo)
            stages = tuple(st for _, sts in combo for st in sts)
            knobs = tuple(k for st in stages for k in stage_knobs(st))
            sketches.append(CpuSketch(name=f"s{len(sketches)}", rules=rules, stages=stages, knobs=knobs))
    return sketches + [skip]


__all__ = ["PadInfo", "generate_sketches"]

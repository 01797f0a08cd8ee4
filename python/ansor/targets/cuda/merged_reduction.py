"""Reductions over several loops, seen as reductions over one (GPU cross-thread reduction rule).

    task IR + ops (`loops.analyze_graph`) --merge_reduction_loops--> the ops as the C++ pass
        `ansor-gpu-collapse-reduction-loops` leaves them (+ which ops it merges, or why not)

The cross-thread reduction rule (`reduction.py`) splits one column loop over a block's threads.
A global average pool reduces over `h, w`, a norm over `m x n`: the rule's script first runs
`ansor-gpu-collapse-reduction-loops` on the payload, which rebuilds every `linalg.generic` with
`k >= 2` reduction loops over one merged loop of their product (the first one's position),
reading each input through a `tensor.collapse_shape`; each constant-0 result of its output map
(a kept unit dim, `(n, c, h, w) -> (n, c, 0, 0)`) becomes a unit parallel loop just before it.
A reduction to a scalar (every loop reduces, rank-0 results: a whole tensor's sum or max), even
over one loop, gets a unit parallel loop first, its result computed as `tensor<1xT>` and
collapsed back: the rule's single row, one block.
The merge runs in the script, after `loops.preprocess`: merging at task extraction does not
last (`linalg-fuse-elementwise-ops` expands the op back through the reshape).

This module predicts that result on the `OpLoops` the rule reasons about (extents, kinds, the
dims indexing each operand), and refuses what the merge cannot make exact: reduction loops
that are not consecutive, an input indexing only some of them or out of order or through an
expression, a merged input produced by another op of the task (the script could not fuse that
producer through the reshape), a named op.
"""

from __future__ import annotations

from dataclasses import replace

from mlir import ir

from ansor.core.loops import OP_ATTR, OpLoops, preprocessed_ir

#: A result of an indexing map: a loop dim, the constant 0, or anything else (None).
Result = int | str | None
ZERO = "0"


def _result_maps(task_ir: str, indices: set[int]) -> dict[int, list[list[Result]]]:
    """Per op number in `indices`, per operand (inputs, then outputs), its map's results."""
    out: dict[int, list[list[Result]]] = {}
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(preprocessed_ir(task_ir))

        def visit(op: ir.Operation) -> ir.WalkResult:
            if OP_ATTR in op.attributes and "indexing_maps" in op.attributes:
                i = ir.IntegerAttr(op.attributes[OP_ATTR]).value
                if i in indices:
                    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
                    out[i] = [[e.position if isinstance(e, ir.AffineDimExpr)
                               else ZERO if isinstance(e, ir.AffineConstantExpr) and e.value == 0 else None
                               for e in m.results] for m in maps]
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
    return out


def _merged(o: OpLoops, maps: list[list[Result]]) -> tuple[OpLoops | None, str]:
    """`o` over one merged reduction loop (see the module docstring), or (None, why not)."""
    red = o.reduce
    first, k = red[0], len(red)
    scalar = is_scalar_reduction(o)
    if red != tuple(range(first, first + k)):
        return None, f"op{o.index}: its {k} reduction loops are not consecutive (they cannot be merged)"
    n_in = len(o.input_dims)
    units = sum(r == ZERO for m in maps[n_in:] for r in m) + scalar
    merged = first + units

    def new(d: int) -> int:
        return d if d < first else merged if d < first + k else d - k + 1 + units

    input_dims = []
    for i, m in enumerate(maps[:n_in]):
        if None in m:
            return None, f"op{o.index}: input {i} indexed by an expression of loops (no exact merge)"
        pos = [p for p, r in enumerate(m) if isinstance(r, int) and r in red]
        if pos and ([m[p] for p in pos] != list(red) or pos != list(range(pos[0], pos[0] + k))):
            return None, f"op{o.index}: input {i} does not index its {k} reduction loops in order, together"
        if pos and k >= 2 and o.input_producers[i] is not None:
            return None, f"op{o.index}: input {i} is op{o.input_producers[i]}'s result (no fusion through a reshape)"
        # (the reduction loops' results: one, the merged loop)
        input_dims.append(tuple(new(r) for p, r in enumerate(m)
                                if isinstance(r, int) and (not pos or p <= pos[0] or p > pos[-1])))
    outs, unit = [], first
    for m in maps[n_in:]:
        if scalar:  # the unit row loop
            outs.append((unit,))
            continue
        if None in m:
            return None, f"op{o.index}: result indexed by an expression of loops"
        row = []
        for r in m:
            row.append(unit if r == ZERO else new(r))  # type: ignore[arg-type]
            unit += r == ZERO
        outs.append(tuple(row))
    extent = 1
    for d in red:
        extent *= o.extents[d]
    return replace(
        o,
        extents=(*o.extents[:first], *(1,) * units, extent, *o.extents[first + k:]),
        kinds=(*o.kinds[:first], *("S",) * units, "R", *o.kinds[first + k:]),
        input_dims=tuple(input_dims),
        output_dims=outs[0] if outs else (),
        plain_output=True,
        window_dims=(),
    ), ""


def is_scalar_reduction(o: OpLoops) -> bool:
    """Whether `o` reduces to a scalar: every loop a reduction, a rank-0 result."""
    return bool(o.extents) and len(o.reduce) == len(o.extents) and not o.output_dims


def merge_reduction_loops(task_ir: str, ops: list[OpLoops]) -> tuple[list[OpLoops], tuple[int, ...], str]:
    """`ops` with every op reducing over several loops (or to a scalar) merged as
    `ansor-gpu-collapse-reduction-loops` merges it, the numbers of those ops, and "" (or `ops`,
    (), why one cannot be merged)."""
    multi = [o for o in ops if len(o.reduce) >= 2 or is_scalar_reduction(o)]
    if not multi:
        return ops, (), ""
    for o in multi:
        if o.name != "linalg.generic":
            return ops, (), f"op{o.index} ({o.name}) reduces over {len(o.reduce)} loops (a generic's merge only)"
    maps = _result_maps(task_ir, {o.index for o in multi})
    by_index = {o.index: o for o in ops}
    merged = {}
    for o in multi:
        m, why = _merged(o, maps[o.index])
        if m is None:
            return ops, (), why
        merged[o.index] = m
        init = by_index.get(o.init_producer) if o.init_producer is not None else None
        if is_scalar_reduction(o) and init is not None and init.is_init() and not init.output_dims:
            # its fill, folded through the expand_shape by canonicalization: a fill of the row
            merged[init.index] = replace(init, extents=(1,), kinds=("S",), output_dims=(0,))
    return [merged.get(o.index, o) for o in ops], tuple(sorted(i for i in merged if i in {o.index for o in multi})), ""

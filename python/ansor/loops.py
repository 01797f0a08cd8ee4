"""Loop structure of the linalg ops in a task: what the sketch rules reason about.

    SearchTask.ir --generalize (scratch copy)--> [OpLoops(index, name, extents, kinds, maps)]

Ops are numbered in walk order; `tag_ops` writes the same numbers onto the payload as
`ansor.op = N` attributes, so transform scripts can match an op by number.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir, passmanager

OP_ATTR = "ansor.op"


@dataclass(frozen=True)
class OpLoops:
    """One linalg op seen as a perfect loop nest.

    `extents[d]` is the trip count of loop d; `kinds[d]` is "S" (parallel) or "R" (reduction);
    `input_dims[i]` lists the loop dims that index input i directly (a dim is missing from an
    input when the input is reused across it); `output_dims` likewise for the (first) output.
    """

    index: int
    name: str
    extents: tuple[int, ...]
    kinds: tuple[str, ...]
    input_dims: tuple[tuple[int, ...], ...]
    output_dims: tuple[int, ...]
    num_body_ops: int

    @property
    def space(self) -> tuple[int, ...]:
        return tuple(d for d, k in enumerate(self.kinds) if k == "S")

    @property
    def reduce(self) -> tuple[int, ...]:
        return tuple(d for d, k in enumerate(self.kinds) if k == "R")

    def has_data_reuse(self) -> bool:
        """Ansor's condition for multi-level tiling: >= 2 inputs miss a space dim, or one does and the op reduces."""
        missing = [any(d not in dims for d in self.space) for dims in self.input_dims]
        return sum(missing) >= 2 or (sum(missing) >= 1 and bool(self.reduce))

    def innermost_output_dim(self) -> int | None:
        """The loop dim of the output's last (contiguous) axis: the one to vectorize."""
        return self.output_dims[-1] if self.output_dims else None

    def is_elementwise(self) -> bool:
        return not self.reduce and all(len(set(d)) == len(self.space) or not d for d in self.input_dims)


def _linalg_ops(module: ir.Module) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("linalg.") and op.name not in ("linalg.yield", "linalg.index"):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def tag_ops(module: ir.Module) -> int:
    """Attach `ansor.op = N : i64` to every linalg op (walk order). Returns how many."""
    ops = _linalg_ops(module)
    i64 = ir.IntegerType.get_signless(64)
    for i, op in enumerate(ops):
        op.attributes[OP_ATTR] = ir.IntegerAttr.get(i64, i)
    return len(ops)


def _dims_of(map_attr: ir.Attribute) -> tuple[tuple[int, ...], list[int | None]]:
    """Loop dims used as plain results of an indexing map, and per result its dim or None."""
    amap = ir.AffineMapAttr(map_attr).value
    per_result: list[int | None] = []
    for e in amap.results:
        per_result.append(e.position if isinstance(e, ir.AffineDimExpr) else None)
    plain = tuple(d for d in per_result if d is not None)
    return plain, per_result


def analyze(task_ir: str) -> list[OpLoops]:
    """Loop structure of every linalg op of the task, numbered as `tag_ops` numbers them."""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(task_ir)
        # Generalization replaces each op in place (and drops discardable attributes), so walk
        # order after it still numbers ops as `tag_ops` does on the original.
        passmanager.PassManager.parse("builtin.module(func.func(linalg-generalize-named-ops))").run(module.operation)
        out: list[OpLoops] = []
        for idx, op in enumerate(_linalg_ops(module)):
            if op.name != "linalg.generic":
                continue
            kinds = tuple("R" if "reduction" in str(a) else "S" for a in ir.ArrayAttr(op.attributes["iterator_types"]))
            maps = list(ir.ArrayAttr(op.attributes["indexing_maps"]))
            seg = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])
            n_in, n_out = seg[0], seg[1]
            operands = list(op.operands)
            extents: list[int | None] = [None] * len(kinds)
            dims_per_operand: list[tuple[int, ...]] = []
            for v, m in zip(operands, maps, strict=True):
                plain, per_result = _dims_of(m)
                dims_per_operand.append(plain)
                shape = ir.ShapedType(v.type).shape if isinstance(v.type, ir.ShapedType) else []
                for axis, d in enumerate(per_result):
                    if d is not None and extents[d] is None and axis < len(shape):
                        extents[d] = shape[axis]
            if any(e is None for e in extents):
                continue  # a loop not reachable from any operand axis: leave the op to the fallback
            body = op.regions[0].blocks[0]
            out.append(
                OpLoops(
                    index=idx,
                    name=str(op.name),
                    extents=tuple(int(e) for e in extents),  # type: ignore[arg-type]
                    kinds=kinds,
                    input_dims=tuple(dims_per_operand[:n_in]),
                    output_dims=dims_per_operand[n_in] if n_out else (),
                    num_body_ops=len(body.operations) - 1,
                )
            )
        # original (pre-generalization) op names, for display
        names = {}
        m2 = ir.Module.parse(task_ir)
        for i, op in enumerate(_linalg_ops(m2)):
            names[i] = str(op.name)
        return [OpLoops(o.index, names.get(o.index, o.name), o.extents, o.kinds, o.input_dims, o.output_dims,
                        o.num_body_ops) for o in out]

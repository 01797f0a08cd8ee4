"""Half-precision contractions stay half precision: fold operand widenings into the contraction.

    linalg.matmul ins(extf(A: f16), extf(W: f16)) outs(C: f32)
        --> linalg.matmul ins(A: f16, W: f16) outs(C: f32)

PyTorch models in half precision reach us through torch-mlir with every matmul on f32 operands:
each f16 activation and each f16 weight constant is first widened by an element-wise
`arith.extf` generic (the f32 accumulation PyTorch asks for). Task extraction then turns the
widened weight into an f32 constant argument, so no task of a half model had f16 operands: the
tensor-core sketch never applied, and the weights doubled in size. A named contraction extends
its operands to the accumulator's type itself, so dropping the widenings computes the same
values exactly (f16 and bf16 widen to f32 without rounding).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import linalg

#: Contractions whose operands are folded, by op name -> the Python builder (opdsl: it builds the
#: region with the operand casts the new types need).
_CONTRACTIONS = {"linalg.matmul": linalg.matmul, "linalg.batch_matmul": linalg.batch_matmul}
#: Narrow types whose widening is folded.
_NARROW = ("f16", "bf16")


def _widened(v: ir.Value) -> ir.Value | None:
    """The f16/bf16 value `v` widens when `v` is an element-wise `arith.extf` generic's result."""
    owner = v.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation
    if op.name != "linalg.generic" or len(op.operands) != 2 or len(op.results) != 1:
        return None
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    if any(m != ir.AffineMap.get_identity(m.n_dims) for m in maps):
        return None
    body = list(op.regions[0].blocks[0].operations)
    if len(body) != 2 or body[0].name != "arith.extf" or body[1].name != "linalg.yield":
        return None
    block = op.regions[0].blocks[0]
    if body[0].operands[0] != block.arguments[0] or body[1].operands[0] != body[0].results[0]:
        return None
    src = op.operands[0]
    if str(ir.RankedTensorType(src.type).element_type) not in _NARROW:
        return None
    return src


def fold_operand_extensions(module: ir.Module) -> int:
    """Rewrite every matmul / batch_matmul of `module` that reads widened f16/bf16 operands to
    read them directly; returns how many were rewritten (the dead widenings are left to DCE)."""
    from ansor.core.mlir import walk

    done = 0
    for op in [o for name in _CONTRACTIONS for o in walk(module.operation, name)]:
        ins = list(op.operands[:2])
        narrow = [_widened(v) for v in ins]
        if not any(narrow):
            continue
        new_ins = [n if n is not None else v for n, v in zip(narrow, ins, strict=True)]
        kwargs = {}
        if "indexing_maps" in op.attributes:
            kwargs["indexing_maps"] = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
        with ir.InsertionPoint(op), op.location:
            new = _CONTRACTIONS[op.name](*new_ins, outs=[op.operands[2]], **kwargs)
        op.results[0].replace_all_uses_with(new)
        op.erase()
        done += 1
    return done

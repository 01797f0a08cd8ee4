"""A contraction initialised with a broadcast bias accumulates from zero and adds the bias after.

    %b = linalg.broadcast ins(%bias : tensor<64xf32>) outs(%e : tensor<1x64x47x47xf32>) dimensions = [0, 2, 3]
    %c = linalg.conv_2d_nchw_fchw ins(%x, %w) outs(%b)
        --> %z = linalg.fill ins(0.0) outs(%e)
            %c = linalg.conv_2d_nchw_fchw ins(%x, %w) outs(%z)
            %y = linalg.generic {maps: identity, (d0, d1, d2, d3) -> (d1), identity} ins(%c, %bias) { addf }

torch-mlir exports every convolution with a bias (`nn.Conv1d/2d(bias=True)`) that way: the bias,
broadcast to the whole output, is the convolution's initial value. The broadcast reads only a
constant, so task extraction leaves it in the model, and the task got the whole broadcast
tensor as an argument: one more output-sized read per call (and a write in the model), and on the
CUDA target every sampled schedule that splits a block's tile over virtual threads (S1 > 1) was
refused ("intermediate buffer ... between GPU kernels": a tile of an initial value that is not a
fill has no buffer inside the kernel), 2 of 2 samples of each convolution of SqueezeNet. Starting
from zero and adding the bias in an element-wise consumer is what torch-mlir already emits for
`nn.Linear` (fill, matmul, bias add), which both targets fuse as the task's epilogue, reading
only the bias vector. The sum is reassociated (bias last instead of first): within an ulp or so
of the result.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, linalg

#: Op-name prefixes of the contractions whose init is rewritten (all accumulate by addition).
_ANCHORS = ("linalg.conv_", "linalg.depthwise_conv_", "linalg.matmul", "linalg.batch_matmul", "linalg.matvec",
            "linalg.vecmat", "linalg.batch_matvec")


def _broadcast_source(v: ir.Value) -> tuple[ir.Operation, ir.Value, ir.AffineMap] | None:
    """(the op, its input, the input's indexing map) when `v` is a pure broadcast of one tensor
    (`linalg.broadcast`, or an all-parallel generic yielding its one input) used only once."""
    owner = v.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation
    if len(op.results) != 1 or len(list(op.results[0].uses)) != 1:
        return None
    out_t = ir.RankedTensorType(op.results[0].type)
    if op.name == "linalg.broadcast":
        dims = [int(d) for d in ir.DenseI64ArrayAttr(op.attributes["dimensions"])]
        kept = [ir.AffineDimExpr.get(d) for d in range(out_t.rank) if d not in dims]
        return op, op.operands[0], ir.AffineMap.get(out_t.rank, 0, kept)
    if op.name != "linalg.generic" or len(op.operands) != 2:
        return None
    if any("reduction" in str(i) for i in ir.ArrayAttr(op.attributes["iterator_types"])):
        return None
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    if maps[1] != ir.AffineMap.get_identity(out_t.rank):
        return None
    block = op.regions[0].blocks[0]
    body = list(block.operations)
    if len(body) != 1 or body[0].name != "linalg.yield" or body[0].operands[0] != block.arguments[0]:
        return None
    return op, op.operands[0], maps[0]


def _bias_add(acc: ir.Value, bias: ir.Value, bmap: ir.AffineMap) -> ir.Value:
    """`acc + bias` (bias read through `bmap`) as an all-parallel generic into a new empty tensor."""
    t = ir.RankedTensorType(acc.type)
    ident = ir.AffineMap.get_identity(t.rank)
    from mlir.dialects import tensor

    empty = tensor.EmptyOp(t.shape, t.element_type).result
    par = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    op = linalg.GenericOp([t], [acc, bias], [empty],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in (ident, bmap, ident)]),
                          ir.ArrayAttr.get([par] * t.rank))
    block = op.regions[0].blocks.append(t.element_type, ir.RankedTensorType(bias.type).element_type, t.element_type)
    with ir.InsertionPoint(block):
        linalg.YieldOp([arith.AddFOp(block.arguments[0], block.arguments[1]).result])
    return op.results[0]


def fold_bias_inits(module: ir.Module) -> int:
    """Rewrite every float contraction of `module` whose init is a broadcast bias (see the module
    doc); returns how many were rewritten (the dead broadcasts are left to DCE)."""
    anchors: list[ir.Operation] = []

    def visit(o: ir.Operation) -> ir.WalkResult:
        if o.name.startswith(_ANCHORS):
            anchors.append(o)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    done = 0
    for op in anchors:
        if len(op.results) != 1 or "operandSegmentSizes" not in op.attributes:
            continue
        init = op.operands[len(op.operands) - 1]
        t = init.type
        if not isinstance(t, ir.RankedTensorType) or not isinstance(t.element_type, ir.FloatType) \
                or not t.has_static_shape:
            continue
        found = _broadcast_source(init)
        if found is None:
            continue
        bcast, bias, bmap = found
        if ir.RankedTensorType(bias.type).element_type != t.element_type:
            continue
        with ir.InsertionPoint(op), op.location:
            zero = arith.ConstantOp(t.element_type, 0.0).result
            fill = linalg.fill(zero, outs=[bcast.operands[len(bcast.operands) - 1]])
        op.operands[len(op.operands) - 1] = fill
        acc = op.results[0]
        users = [(u.owner, u.operand_number) for u in acc.uses]
        with ir.InsertionPoint.after(op), op.location:
            summed = _bias_add(acc, bias, bmap)
        for owner, index in users:
            owner.operands[index] = summed
        bcast.erase()
        done += 1
    return done

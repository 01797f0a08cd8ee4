"""Loop structure of the linalg ops in a task: what the sketch rules reason about.

    SearchTask.ir --preprocess (fast-math contract, inline element-wise producers)-->
        tagged payload --generalize (scratch copy)--> [OpLoops(index, name, extents, kinds, maps)]

`preprocess` is the fixed first step of every program, tuned or not: it marks float arithmetic
`contract` (so LLVM may form FMAs, as C compilers do by default) and applies Ansor's
**always-inline** rule by fusing element-wise producers into their consumers
(`linalg-fuse-elementwise-ops`). Ops are then numbered in walk order and `tag_ops` writes
the numbers onto the payload as `ansor.op = N` attributes (`tensor.pad` ops get
`ansor.pad = N`), so transform scripts can match an op by number.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir, passmanager

OP_ATTR = "ansor.op"
PAD_ATTR = "ansor.pad"

_CONTRACT_OPS = ("arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.negf")
_PREPROCESS = "builtin.module(func.func(linalg-fuse-elementwise-ops),canonicalize,cse)"
#: Named ops that are element-wise data movement/arithmetic: generalized first so that
#: `linalg-fuse-elementwise-ops` (which only fuses generics) can inline them.
_ELEMENTWISE_NAMED = ("linalg.transpose", "linalg.broadcast", "linalg.map", "linalg.elementwise", "linalg.add",
                      "linalg.sub", "linalg.mul", "linalg.div", "linalg.exp", "linalg.max", "linalg.min",
                      "linalg.negf", "linalg.copy")
_GENERALIZE_SCRIPT = """module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %ops = transform.structured.match ops{[OPS]} in %root : (!transform.any_op) -> !transform.any_op
    %g = transform.structured.generalize %ops : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}"""


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
    input_producers: tuple[int | None, ...] = ()  # op number producing each input (None: argument/other)
    init_producer: int | None = None  # op number producing the output's init (a fill)
    users: tuple[int | None, ...] = ()  # op numbers using the result (None: returned/other)
    plain_inputs: tuple[bool, ...] = ()  # input indexed by plain loop dims only (no affine windows)
    # Space loops an input index combines with a stride or non-linearly (`h * 2 + rh`,
    # `co floordiv 32`): the index is a plain loop only once such a loop's tile is 1 (with every
    # reduction loop stepping by 1, `h + rh` already is).
    window_dims: tuple[int, ...] = ()
    # The output indexed by loop dims only: False for a keepdim reduction's `(d0, d1) -> (d0, 0)`.
    plain_output: bool = True
    # Input indexed by loop dims or the constant 0 only: `plain_inputs`, or a broadcast along unit
    # axes such as torch-mlir's batch-norm parameters `tensor<64x1x1>` read at `(d3, 0, 0)`.
    pointwise_inputs: tuple[bool, ...] = ()
    # Per input, per axis: its index as a linear form of the loop dims, ((dim, coefficient), ...)
    # sorted by dim (`h + rh` -> ((1, 1), (4, 1)); strided `2 * h + rh` -> ((1, 2), (4, 1))),
    # None where the index is not linear; constants dropped. A windowed input's tile for given
    # loop tiles spans 1 + sum(coefficient * (tile - 1)) along each axis.
    input_axes: tuple[tuple[tuple[tuple[int, int], ...] | None, ...], ...] = ()

    def input_tile(self, i: int, tiles: dict[int, int] | list[int] | tuple[int, ...]) -> list[int] | None:
        """Extent of input i's slice along each of its axes for loop tiles `tiles` (dim -> tile),
        or None when an axis index is not linear (`input_axes`)."""
        out = []
        for form in self.input_axes[i]:
            if form is None:
                return None
            out.append(1 + sum(c * (tiles[d] - 1) for d, c in form))
        return out

    @property
    def space(self) -> tuple[int, ...]:
        return tuple(d for d, k in enumerate(self.kinds) if k == "S")

    @property
    def reduce(self) -> tuple[int, ...]:
        return tuple(d for d, k in enumerate(self.kinds) if k == "R")

    def has_data_reuse(self) -> bool:
        """Ansor's condition for multi-level tiling: some input misses >= 2 space loops, or misses
        one and the op reduces (element-wise ops are inlined before this is asked)."""
        for dims in self.input_dims:
            missing = sum(1 for d in self.space if d not in dims)
            if missing >= 2 or (missing >= 1 and self.reduce):
                return True
        return False

    def innermost_output_dim(self) -> int | None:
        """The loop dim of the output's last (contiguous) axis: the one to vectorize."""
        return self.output_dims[-1] if self.output_dims else None

    def is_elementwise(self) -> bool:
        """No reduction and every input indexed by loop dims directly (a map permutation/broadcast),
        or at the constant 0 along a unit axis (a broadcast too)."""
        return not self.reduce and all(self.pointwise_inputs)

    def is_init(self) -> bool:
        """An initialiser such as `linalg.fill`: no tensor inputs, no reduction."""
        return not self.reduce and not any(self.input_dims)


def _linalg_ops(module: ir.Module) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("linalg.") and op.name not in ("linalg.yield", "linalg.index"):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def _pad_ops(module: ir.Module) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "tensor.pad":
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def tag_ops(module: ir.Module) -> int:
    """Attach `ansor.op = N : i64` to every linalg op and `ansor.pad = N` to every tensor.pad
    (walk order). Returns the number of linalg ops."""
    ops = _linalg_ops(module)
    i64 = ir.IntegerType.get_signless(64)
    for i, op in enumerate(ops):
        op.attributes[OP_ATTR] = ir.IntegerAttr.get(i64, i)
    for i, op in enumerate(_pad_ops(module)):
        op.attributes[PAD_ATTR] = ir.IntegerAttr.get(i64, i)
    return len(ops)


def preprocess(module: ir.Module) -> None:
    """The fixed first step of every program (see the module docstring); tags ops last."""
    contract = ir.Attribute.parse("#arith.fastmath<contract>")

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in _CONTRACT_OPS:
            op.attributes["fastmath"] = contract
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    from mlir.dialects.transform import interpreter

    names = ", ".join(f'"{n}"' for n in _ELEMENTWISE_NAMED)
    script = ir.Module.parse(_GENERALIZE_SCRIPT.replace("OPS", names))
    interpreter.apply_named_sequence(module.operation, script.body.operations[0], script)
    passmanager.PassManager.parse(_PREPROCESS).run(module.operation)
    tag_ops(module)


@dataclass(frozen=True)
class PadInfo:
    """A `tensor.pad` (number `index`) and the linalg op consuming it (or None)."""

    index: int
    consumer: int | None


def _dims_of(map_attr: ir.Attribute) -> tuple[tuple[int, ...], list[int | None]]:
    """Loop dims used as plain results of an indexing map, and per result its dim or None."""
    amap = ir.AffineMapAttr(map_attr).value
    per_result: list[int | None] = []
    for e in amap.results:
        per_result.append(e.position if isinstance(e, ir.AffineDimExpr) else None)
    plain = tuple(d for d in per_result if d is not None)
    return plain, per_result


def _is_zero(e: ir.AffineExpr) -> bool:
    return isinstance(e, ir.AffineConstantExpr) and e.value == 0


def _linear(e: ir.AffineExpr) -> dict[int, int] | None:
    """Dim -> coefficient of an affine expression linear in the dims (constants dropped), or None."""
    if isinstance(e, ir.AffineDimExpr):
        return {e.position: 1}
    if isinstance(e, ir.AffineConstantExpr):
        return {}
    if isinstance(e, ir.AffineAddExpr):
        a, b = _linear(e.lhs), _linear(e.rhs)
        if a is None or b is None:
            return None
        return {d: a.get(d, 0) + b.get(d, 0) for d in a.keys() | b.keys()}
    if isinstance(e, ir.AffineMulExpr):
        for x, y in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            if isinstance(y, ir.AffineConstantExpr):
                a = _linear(x)
                return None if a is None else {d: c * y.value for d, c in a.items()}
    return None


def _dims_in(e: ir.AffineExpr) -> set[int]:
    if isinstance(e, ir.AffineDimExpr):
        return {e.position}
    if isinstance(e, ir.AffineBinaryExpr):
        return _dims_in(e.lhs) | _dims_in(e.rhs)
    return set()


def _window_dims(map_attr: ir.Attribute, kinds: tuple[str, ...]) -> set[int]:
    """Space dims of `map_attr`'s compound results that stay compound with unit reduction tiles."""
    out: set[int] = set()
    for e in ir.AffineMapAttr(map_attr).value.results:
        if isinstance(e, ir.AffineDimExpr):
            continue
        space = {d for d in _dims_in(e) if kinds[d] == "S"}
        lin = _linear(e)
        if lin is not None and len(space) == 1 and lin.get(next(iter(space))) == 1:
            continue  # `h + rh`: plain h once rh steps by 1
        out |= space
    return out


def preprocessed_ir(task_ir: str) -> str:
    """The task's IR after `preprocess` (tagged), as text."""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(task_ir)
        preprocess(module)
        return str(module)


def analyze(task_ir: str) -> list[OpLoops]:
    """Loop structure of every linalg op of the preprocessed task, numbered as `tag_ops` numbers them."""
    return analyze_graph(task_ir)[0]


def analyze_graph(task_ir: str) -> tuple[list[OpLoops], list[PadInfo]]:
    """Ops (see `analyze`) with their producer/consumer links, and the pads with their consumers."""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(task_ir)
        preprocess(module)
        names = {i: str(op.name) for i, op in enumerate(_linalg_ops(module))}
        # Generalization replaces each op in place (and keeps discardable attributes on the new
        # generic only sometimes), so number ops by walk order, which it preserves.
        passmanager.PassManager.parse("builtin.module(func.func(linalg-generalize-named-ops))").run(module.operation)
        ops = _linalg_ops(module)
        index_of = {op: i for i, op in enumerate(ops)}  # ir.Operation hashes by identity
        pads = _pad_ops(module)
        pad_index = {p: i for i, p in enumerate(pads)}
        pad_consumer: dict[int, int] = {}
        out: list[OpLoops] = []
        for idx, op in enumerate(ops):
            if op.name != "linalg.generic":
                continue
            kinds = tuple("R" if "reduction" in str(a) else "S" for a in ir.ArrayAttr(op.attributes["iterator_types"]))
            maps = list(ir.ArrayAttr(op.attributes["indexing_maps"]))
            seg = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])
            n_in, n_out = seg[0], seg[1]
            operands = list(op.operands)
            extents: list[int | None] = [None] * len(kinds)
            dims_per_operand: list[tuple[int, ...]] = []
            identity: list[bool] = []
            pointwise: list[bool] = []
            window: set[int] = set()
            axes: list[tuple[tuple[tuple[int, int], ...] | None, ...]] = []
            for m in maps[:n_in]:
                window |= _window_dims(m, kinds)
                forms = [_linear(e) for e in ir.AffineMapAttr(m).value.results]
                axes.append(tuple(None if f is None else tuple(sorted((d, c) for d, c in f.items() if c))
                                  for f in forms))
            producers: list[int | None] = []
            for v, m in zip(operands, maps, strict=True):
                plain, per_result = _dims_of(m)
                dims_per_operand.append(plain)
                identity.append(all(d is not None for d in per_result))
                shape = ir.ShapedType(v.type).shape if isinstance(v.type, ir.ShapedType) else []
                pointwise.append(all(d is not None or (_is_zero(e) and axis < len(shape) and shape[axis] == 1)
                                     for axis, (d, e) in enumerate(zip(per_result, ir.AffineMapAttr(m).value.results,
                                                                       strict=True))))
                for axis, d in enumerate(per_result):
                    if d is not None and extents[d] is None and axis < len(shape):
                        extents[d] = shape[axis]
                owner = v.owner if isinstance(v, ir.OpResult) else None
                owner_op = owner.operation if owner is not None and hasattr(owner, "operation") else owner
                producers.append(index_of.get(owner_op) if owner_op is not None else None)
                if owner_op is not None and owner_op in pad_index:
                    pad_consumer[pad_index[owner_op]] = idx
            if any(e is None for e in extents):
                continue  # a loop not reachable from any operand axis: leave the op to the fallback
            body = op.regions[0].blocks[0]
            users = []
            for r in op.results:
                for u in r.uses:
                    users.append(index_of.get(u.owner.operation if hasattr(u.owner, "operation") else u.owner))
            out.append(
                OpLoops(
                    index=idx,
                    name=names.get(idx, str(op.name)),
                    extents=tuple(int(e) for e in extents),  # type: ignore[arg-type]
                    kinds=kinds,
                    input_dims=tuple(dims_per_operand[:n_in]),
                    output_dims=dims_per_operand[n_in] if n_out else (),
                    num_body_ops=len(body.operations) - 1,
                    input_producers=tuple(producers[:n_in]),
                    init_producer=producers[n_in] if n_out else None,
                    users=tuple(users),
                    plain_inputs=tuple(identity[:n_in]),
                    window_dims=tuple(sorted(window)),
                    plain_output=identity[n_in] if n_out else True,
                    pointwise_inputs=tuple(pointwise[:n_in]),
                    input_axes=tuple(axes),
                )
            )
        pad_infos = [PadInfo(i, pad_consumer.get(i)) for i in range(len(pads))]
        return out, pad_infos


def fusable_consumer(op: OpLoops, by_index: dict[int, OpLoops]) -> tuple[OpLoops, tuple[int, ...]] | None:
    """The element-wise consumer that reads `op`'s whole result through a permutation."""
    if len(op.users) != 1 or op.users[0] is None:
        return None
    cons = by_index.get(op.users[0])
    if cons is None or not cons.is_elementwise() or len(cons.output_dims) != len(op.output_dims):
        return None
    for pos, prod in enumerate(cons.input_producers):
        if prod == op.index:
            dims = cons.input_dims[pos]
            if sorted(dims) != list(range(len(cons.extents))):
                return None
            # consumer loop c reads axis i of op's result, which is op's loop op.output_dims[i]
            mapping = [0] * len(cons.extents)
            for axis, c in enumerate(dims):
                mapping[c] = op.output_dims[axis]
            return cons, tuple(mapping)
    return None

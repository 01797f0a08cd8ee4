"""The GPU lowering's IR rewrites that are still Python (run by `lowering.py`):

    after the script: guard_padded_reads (tensor.pad buffers -> guarded loads)
    on the LLVM dialect: infer_access_alignment (128-bit accesses)

Every other rewrite of the pipeline is a C++ pass (`passes/GPU/`, `ansor-gpu-*`: GpuOptPasses.td,
GpuLoweringPasses.td, GpuLoweringBPasses.td) that `ansor-opt` can run without Python; these two
are the ones left before a GPU candidate replays from payload + script to PTX with `ansor-opt`
alone.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from mlir import ir

from ansor.core.mlir import LoweringError, walk


def _is_workgroup(t: ir.Type) -> bool:
    if not isinstance(t, ir.MemRefType):
        return False
    ms = ir.MemRefType(t).memory_space
    return ms is not None and (str(ms) in ("3", "3 : i64") or "workgroup" in str(ms))


def _op_of(v: ir.Value) -> ir.Operation | None:
    owner = v.owner
    if isinstance(owner, ir.Block):
        return None
    return owner if isinstance(owner, ir.Operation) else owner.operation


_MAX_TZ = 64
_ELEM_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i8": 1, "i16": 2, "i32": 4, "i64": 8}


class _Alignment:
    """Known trailing zero bits of the integers and pointers of one LLVM-dialect function.

    LLVM's own inference (known bits, depth-limited to 6 operations) loses the alignment of
    addresses built from long index chains around loop induction variables, and NVPTX then splits
    a `load <4 x float>, align 4` into four scalar loads. Here there is no depth limit: block
    arguments (loop induction variables after `convert-scf-to-cf`) get the minimum over their
    incoming values, solved optimistically to a fixed point. Call `solve` before `tz`."""

    def __init__(self, func: ir.Operation) -> None:
        self.func = func
        self.memo: dict = {}
        self.args: dict = {}  # (block, arg number) -> current estimate
        self.global_align: dict[str, int] = {}  # shared-memory globals' alignment (log2)
        self.incoming: dict = {}  # (block, arg number) -> incoming values
        self.arg_align: dict[int, int] = {}
        if "arg_attrs" in func.attributes:
            for i, d in enumerate(ir.ArrayAttr(func.attributes["arg_attrs"])):
                dd = ir.DictAttr(d)
                if "llvm.align" in dd:
                    self.arg_align[i] = ir.IntegerAttr(dd["llvm.align"]).value.bit_length() - 1
        entry = func.regions[0].blocks[0]
        self.entry_args = {hash(a): a for a in entry.arguments}
        for op in walk(func, "llvm.br") + walk(func, "llvm.cond_br"):
            ops = list(op.operands)
            succ = list(op.successors)
            if op.name == "llvm.br":
                groups = [ops]
            else:
                sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
                groups = [ops[1:1 + sizes[1]], ops[1 + sizes[1]:1 + sizes[1] + sizes[2]]]
            for blk, vals in zip(succ, groups, strict=True):
                for j, v in enumerate(vals):
                    self.incoming.setdefault((blk, j), []).append(v)

    def solve(self, values: list) -> None:
        """Fixed point over the block arguments reachable from `values`: every argument starts at
        "all bits zero" and only goes down (the op graph is acyclic except through them)."""
        for _ in range(64):
            self.memo = {}
            for v in values:
                self.tz(v)
            changed = False
            for key in list(self.args):
                blk, num = key
                ins = self.incoming.get((blk, num))
                val = min((self.tz(x) for x in ins), default=0) if ins else 0
                if val < self.args[key]:
                    self.args[key] = val
                    changed = True
            if not changed:
                self.memo = {}
                return
        self.args = {k: 0 for k in self.args}  # no convergence: know nothing
        self.memo = {}

    def tz(self, v: ir.Value) -> int:
        owner = v.owner
        if isinstance(owner, ir.Block):
            a = ir.BlockArgument(v)
            if owner == self.func.regions[0].blocks[0]:
                return self.arg_align.get(a.arg_number, 0) if str(v.type).startswith("!llvm.ptr") else 0
            key = (owner, a.arg_number)
            if key not in self.args:
                self.args[key] = _MAX_TZ
            return self.args[key]
        op = owner if isinstance(owner, ir.Operation) else owner.operation
        key = (op, list(op.results).index(v) if len(op.results) > 1 else 0)
        if key not in self.memo:
            self.memo[key] = self._op_tz(op)
        return self.memo[key]

    def _const(self, v: ir.Value) -> int | None:
        owner = v.owner
        if isinstance(owner, ir.Block):
            return None
        op = owner if isinstance(owner, ir.Operation) else owner.operation
        if op.name != "llvm.mlir.constant":
            return None
        try:
            return ir.IntegerAttr(op.attributes["value"]).value
        except (ValueError, TypeError):
            return None

    def _op_tz(self, op: ir.Operation) -> int:
        n = op.name
        o = list(op.operands)
        if n == "llvm.mlir.constant":
            c = self._const(op.results[0])
            if c is None:
                return 0
            return _MAX_TZ if c == 0 else min(_MAX_TZ, (c & -c).bit_length() - 1)
        if n in ("llvm.add", "llvm.sub", "llvm.or", "llvm.xor", "llvm.select", "llvm.intr.smin", "llvm.intr.smax",
                 "llvm.intr.umin", "llvm.intr.umax"):
            vals = o[1:] if n == "llvm.select" else o
            return min(self.tz(x) for x in vals)
        if n == "llvm.mul":
            return min(_MAX_TZ, self.tz(o[0]) + self.tz(o[1]))
        if n == "llvm.and":
            return max(self.tz(o[0]), self.tz(o[1]))
        if n == "llvm.shl":
            c = self._const(o[1])
            return min(_MAX_TZ, self.tz(o[0]) + c) if c is not None else self.tz(o[0])
        if n in ("llvm.sext", "llvm.zext", "llvm.trunc", "llvm.addrspacecast", "llvm.bitcast",
                 "llvm.ptrtoint", "llvm.inttoptr", "llvm.freeze"):
            return self.tz(o[0])
        if n == "llvm.mlir.addressof":
            g = ir.FlatSymbolRefAttr(op.attributes["global_name"]).value
            return self.global_align.get(g, 0)
        if n == "llvm.getelementptr":
            return self._gep_tz(op)
        return 0

    def _gep_tz(self, op: ir.Operation) -> int:
        base, *idx = list(op.operands)
        t = self.tz(base)
        raw = list(ir.DenseI32ArrayAttr(op.attributes["rawConstantIndices"]))
        elem = ir.TypeAttr(op.attributes["elem_type"]).value
        dyn = iter(idx)
        ty = elem
        for pos, r in enumerate(raw):
            size = _type_bytes(ty)
            if size is None:
                return 0
            if r == -2147483648:  # dynamic index
                it = self.tz(next(dyn))
                t = min(t, it + (size & -size).bit_length() - 1)
            elif r:
                off = r * size
                t = min(t, (off & -off).bit_length() - 1)
            if pos + 1 < len(raw):
                m = re.match(r"!llvm\.array<\d+ x (.*)>$", str(ty))
                if m is None:
                    return 0
                ty = ir.Type.parse(m.group(1))
        return t


def _type_bytes(t: ir.Type) -> int | None:
    s = str(t)
    if s in _ELEM_BYTES:
        return _ELEM_BYTES[s]
    m = re.match(r"!llvm\.array<(\d+) x (.*)>$", s)
    if m:
        inner = _type_bytes(ir.Type.parse(m.group(2)))
        return None if inner is None else int(m.group(1)) * inner
    m = re.match(r"vector<(\d+)x(\w+)>$", s)
    if m and m.group(2) in _ELEM_BYTES:
        return int(m.group(1)) * _ELEM_BYTES[m.group(2)]
    return None


def infer_access_alignment(module: ir.Module) -> int:
    """Raise the `alignment` of vector loads and stores in the GPU kernels to what their address
    arithmetic proves (see `_Alignment`), at most 16 bytes. Returns the number of accesses raised."""
    raised = 0
    for gm in walk(module.operation, "gpu.module"):
        globals_: dict[str, int] = {}
        for g in walk(gm, "llvm.mlir.global"):
            if "alignment" in g.attributes:
                a = ir.IntegerAttr(g.attributes["alignment"]).value
                globals_[ir.StringAttr(g.attributes["sym_name"]).value] = a.bit_length() - 1
        for f in walk(gm, "llvm.func"):
            if not f.regions or not f.regions[0].blocks:
                continue
            an = _Alignment(f)
            an.global_align = globals_
            accesses = [op for op in walk(f, "llvm.load") + walk(f, "llvm.store")
                        if str((op.results[0] if op.name == "llvm.load" else op.operands[0]).type).startswith("vector<")]
            ptrs = [op.operands[0] if op.name == "llvm.load" else op.operands[1] for op in accesses]
            an.solve(ptrs)
            for op, p in zip(accesses, ptrs, strict=True):
                vt = (op.results[0] if op.name == "llvm.load" else op.operands[0]).type
                size = _type_bytes(vt) or 1
                want = min(1 << min(an.tz(p), 4), size & -size)
                cur = ir.IntegerAttr(op.attributes["alignment"]).value if "alignment" in op.attributes else 0
                if want > cur:
                    op.attributes["alignment"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), want)
                    raised += 1
    return raised


#: Largest per-thread buffer (bytes) `ansor-gpu-private-allocs-to-stack` moves to the stack.
MAX_PRIVATE_BYTES = 1024


# ----------------------------------------------------------------------------------------------
# tensor.pad producers: guarded loads instead of a padded copy

_DYN = -9223372036854775808  # ShapedType::kDynamic in static_offsets / sizes / strides


@dataclass
class _PadBuffer:
    """A padded copy of `source` that bufferization left on the host (`tensor.pad` -> alloc, fill
    with a constant, copy the source into the interior at offsets `low`)."""

    alloc: ir.Operation
    source: ir.Value
    low: list[int]
    src_shape: list[int]
    value: ir.Attribute  # the padding constant
    init: list[ir.Operation]  # the copy, the interior view, the fill (erased after the rewrite)

    @property
    def padded(self) -> list[int]:
        """Dims with padding on either side."""
        shape = ir.MemRefType(self.alloc.results[0].type).shape
        return [k for k in range(len(shape)) if self.low[k] or self.src_shape[k] != shape[k]]


def _owner(use: ir.OpOperand) -> ir.Operation:
    o = use.owner
    return o if isinstance(o, ir.Operation) else o.operation


def _constant_of(v: ir.Value) -> ir.Attribute | None:
    op = _op_of(v)
    if op is None or op.name != "arith.constant":
        return None
    return op.attributes["value"]


def _pad_buffer(alloc: ir.Operation) -> _PadBuffer | None:
    """`alloc` as a `_PadBuffer`, or None if it is not exactly alloc, constant fill, copy of a
    same-rank source into a static unit-stride interior view, in that order in one block."""
    buf = alloc.results[0]
    mt = ir.MemRefType(buf.type)
    if not mt.has_static_shape:
        return None
    fill = copy = view = value = None
    for use in buf.uses:
        owner = _owner(use)
        if owner.name == "linalg.fill" and use.operand_number == 1:
            fill, value = owner, _constant_of(owner.operands[0])
        elif owner.name == "linalg.map" and len(owner.operands) == 1:
            body = list(owner.regions[0].blocks[0].operations)
            # (a tensor.pad's unused block arguments may leave `linalg.index` ops behind)
            if body[-1].name == "linalg.yield" and all(o.name in ("linalg.index", "arith.constant") for o in body[:-1]):
                fill, value = owner, _constant_of(body[-1].operands[0])
        elif owner.name == "memref.subview" and use.operand_number == 0 and len(owner.operands) == 1:
            vu = list(owner.results[0].uses)
            if len(vu) == 1 and _owner(vu[0]).name == "memref.copy" and vu[0].operand_number == 1:
                view, copy = owner, _owner(vu[0])
    if fill is None or copy is None or view is None or value is None:
        return None
    offs = list(ir.DenseI64ArrayAttr(view.attributes["static_offsets"]))
    sizes = list(ir.DenseI64ArrayAttr(view.attributes["static_sizes"]))
    strides = list(ir.DenseI64ArrayAttr(view.attributes["static_strides"]))
    src = copy.operands[0]
    st = ir.MemRefType(src.type)
    if any(x != 1 for x in strides) or st.rank != mt.rank or list(st.shape) != sizes:
        return None
    if not (fill.block == copy.block == alloc.block and fill.is_before_in_block(copy)):
        return None
    return _PadBuffer(alloc, src, offs, sizes, value, [copy, view, fill])


def _kept_dims(view: ir.Operation) -> list[int]:
    """Source dims of a `memref.subview` that its (possibly rank-reduced) result keeps. Among unit
    dims the choice does not matter here: a kept unit dim is only ever indexed at 0."""
    sizes = list(ir.DenseI64ArrayAttr(view.attributes["static_sizes"]))
    res = ir.MemRefType(view.results[0].type).shape
    if len(res) == len(sizes):
        return list(range(len(sizes)))
    kept, j = [], 0
    for k, s in enumerate(sizes):
        if j < len(res) and s == res[j] and s != _DYN:
            kept.append(k)
            j += 1
        elif s != 1:
            raise LoweringError("lower", "rank-reducing view of a padded buffer with a non-unit dropped dim")
    if j != len(res):
        raise LoweringError("lower", "cannot match a rank-reducing view of a padded buffer")
    return kept


class _IndexBuilder:
    """Index arithmetic that folds constants (ints stay ints)."""

    def __init__(self, ip: ir.InsertionPoint) -> None:
        from mlir.dialects import arith

        self.arith = arith
        self.ip = ip

    def value(self, x: int | ir.Value) -> ir.Value:
        if isinstance(x, int):
            return self.arith.ConstantOp(ir.IndexType.get(), x, ip=self.ip).result
        return x

    def add(self, a: int | ir.Value, b: int | ir.Value) -> int | ir.Value:
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        if isinstance(a, int) and a == 0:
            return b
        if isinstance(b, int) and b == 0:
            return a
        return self.arith.AddIOp(self.value(a), self.value(b), ip=self.ip).result

    def mul(self, a: int | ir.Value, b: int | ir.Value) -> int | ir.Value:
        if isinstance(a, int) and isinstance(b, int):
            return a * b
        if isinstance(a, int) and a == 1:
            return b
        if isinstance(b, int) and b == 1:
            return a
        if (isinstance(a, int) and a == 0) or (isinstance(b, int) and b == 0):
            return 0
        return self.arith.MulIOp(self.value(a), self.value(b), ip=self.ip).result


def _root_indices(v: ir.Value, idx: list, root: ir.Value, b: _IndexBuilder) -> tuple[list, list[int]]:
    """Indices into `root` of element `idx` of view `v` (a chain of `memref.subview`s of root),
    and the root dim of each dim of v."""
    dims = list(range(len(idx)))
    while v != root:
        op = _op_of(v)
        if op is None or op.name != "memref.subview":
            raise LoweringError("lower", f"padded buffer read through {op.name if op else 'an argument'}")
        offs = list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"]))
        strides = list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
        sizes = list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"]))
        dyn = list(op.operands)[1:]
        n_off = sum(1 for x in offs if x == _DYN)
        n_size = sum(1 for x in sizes if x == _DYN)
        dyn_offs, dyn_strides = iter(dyn[:n_off]), iter(dyn[n_off + n_size:])
        offs = [next(dyn_offs) if x == _DYN else x for x in offs]
        strides = [next(dyn_strides) if x == _DYN else x for x in strides]
        kept = _kept_dims(op)
        new = []
        for k in range(len(offs)):
            i = idx[kept.index(k)] if k in kept else 0
            new.append(b.add(offs[k], b.mul(strides[k], i)))
        idx, dims = new, [kept[d] for d in dims]
        v = op.operands[0]
    return idx, dims


def _guarded(pb: _PadBuffer, p: list, b: _IndexBuilder) -> tuple[list, ir.Value | bool]:
    """Source indices of padded-buffer indices `p`, and whether they are inside the source (an i1
    value, or a Python bool when known)."""
    from mlir.dialects import arith

    q = [b.add(x, -lo) if lo else x for x, lo in zip(p, pb.low, strict=True)]
    cond: ir.Value | bool = True
    for k in pb.padded:
        if isinstance(q[k], int):
            if not 0 <= q[k] < pb.src_shape[k]:
                return q, False
            continue
        c = arith.CmpIOp(arith.CmpIPredicate.ult, q[k], b.value(pb.src_shape[k]), ip=b.ip).result
        cond = c if cond is True else arith.AndIOp(cond, c, ip=b.ip).result
    return q, cond


def _splat(value: ir.Attribute, t: ir.Type, ip: ir.InsertionPoint) -> ir.Value:
    from mlir.dialects import arith

    if isinstance(t, ir.VectorType):
        attr = ir.DenseElementsAttr.get_splat(ir.VectorType(t), value)
        return arith.ConstantOp(t, attr, ip=ip).result
    return arith.ConstantOp(t, value, ip=ip).result


def _select_read(pb: _PadBuffer, cond: ir.Value | bool, t: ir.Type, ip: ir.InsertionPoint, read) -> ir.Value:
    """`read(ip)` where cond holds, the padding value elsewhere (an scf.if: no load in the padding)."""
    from mlir.dialects import scf

    if cond is True:
        return read(ip)
    if cond is False:
        return _splat(pb.value, t, ip)
    if_op = scf.IfOp(cond, [t], has_else=True, ip=ip)
    with ir.InsertionPoint(if_op.then_block):
        scf.YieldOp([read(ir.InsertionPoint(if_op.then_block))])
    with ir.InsertionPoint(if_op.else_block):
        scf.YieldOp([_splat(pb.value, t, ir.InsertionPoint(if_op.else_block))])
    return if_op.results[0]


def _rewrite_transfer_read(pb: _PadBuffer, op: ir.Operation) -> None:
    """A `vector.transfer_read` of a view of the padded buffer -> reads of the source, guarded per
    1-D piece along the vector's last dim (one piece per element where that dim is padded)."""
    from mlir.dialects import vector

    root = pb.alloc.results[0]
    if len(op.operands) != 2 + ir.MemRefType(op.operands[0].type).rank:
        raise LoweringError("lower", "masked transfer_read of a padded buffer")
    vt = ir.VectorType(op.results[0].type)
    pmap = ir.AffineMapAttr(op.attributes["permutation_map"]).value
    in_bounds = [ir.BoolAttr(a).value for a in ir.ArrayAttr(op.attributes["in_bounds"])]
    ip = ir.InsertionPoint(op)
    b = _IndexBuilder(ip)
    vmt = ir.MemRefType(op.operands[0].type)
    rank = vmt.rank
    base_idx = list(op.operands)[1:1 + rank]
    pad_elem = op.operands[1 + rank]
    # vector dim r -> memref dim of v (None: broadcast)
    vdims: list[int | None] = []
    for e in pmap.results:
        vdims.append(e.position if isinstance(e, ir.AffineDimExpr) else None)
    shape = list(vt.shape)
    for r, ok in enumerate(in_bounds):  # (the view's own out-of-bounds masking is not reproduced)
        d = vdims[r]
        start = _constant_of(base_idx[d]) if d is not None else None
        if not ok and (start is None or vmt.shape[d] == _DYN
                       or ir.IntegerAttr(start).value + shape[r] > vmt.shape[d]):
            raise LoweringError("lower", "possibly out-of-bounds transfer_read of a padded buffer")
    # the root dim of each dim of the view (is the vector's last dim along a padded one?)
    probe_dims = _dims_to_root(op.operands[0], root)
    last = len(shape) - 1
    # the last dim in elements where it runs along padding or with a stride
    last_padded = (vdims[last] is not None and shape[last] > 1
                   and (probe_dims[vdims[last]] in pb.padded or not _unit_stride(op.operands[0], root, vdims[last])))
    piece = 1 if last_padded else shape[last]
    outer = shape[:last] + ([shape[last]] if last_padded else [])
    n_src = ir.MemRefType(pb.source.type).rank
    piece_t = ir.VectorType.get([piece], vt.element_type)
    src_map = ir.AffineMap.get(n_src, 0, [ir.AffineDimExpr.get(probe_dims[vdims[last]])]
                               if vdims[last] is not None else [ir.AffineConstantExpr.get(0)])
    acc = None
    for pos in itertools.product(*(range(n) for n in outer)):
        idx = list(base_idx)
        for r, o in enumerate(pos):
            if o and vdims[r] is not None:
                idx[vdims[r]] = b.add(idx[vdims[r]], o)
        p, _ = _root_indices(op.operands[0], idx, root, b)
        q, cond = _guarded(pb, p, b)

        def read(ip2: ir.InsertionPoint, q=q) -> ir.Value:
            b2 = _IndexBuilder(ip2)
            return vector.TransferReadOp(piece_t, pb.source, [b2.value(x) for x in q], ir.AffineMapAttr.get(src_map),
                                         pad_elem, ir.ArrayAttr.get([ir.BoolAttr.get(True)]), ip=ip2).result

        val = _select_read(pb, cond, piece_t, ip, read)
        if len(shape) == 1 and not last_padded:
            acc = val
            break
        if acc is None:
            acc = _splat(pb.value, vt, ip)
        prefix = list(pos[:last]) if not last_padded else list(pos)
        if last_padded:
            elem = vector.ExtractOp(val, [], [0], ip=ip).result
            acc = vector.InsertOp(elem, acc, [], prefix, ip=ip).result
        else:
            acc = vector.InsertOp(val, acc, [], prefix, ip=ip).result
    op.results[0].replace_all_uses_with(acc)
    op.erase()


def _dims_to_root(v: ir.Value, root: ir.Value) -> list[int]:
    """The root dim of each dim of view `v`."""
    dims = list(range(ir.MemRefType(v.type).rank))
    while v != root:
        op = _op_of(v)
        kept = _kept_dims(op)
        dims = [kept[d] for d in dims]
        v = op.operands[0]
    return dims


def _unit_stride(v: ir.Value, root: ir.Value, d: int) -> bool:
    """Whether consecutive indices along dim d of view `v` are consecutive in the root."""
    while v != root:
        op = _op_of(v)
        kept = _kept_dims(op)
        if list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))[kept[d]] != 1:
            return False
        d = kept[d]
        v = op.operands[0]
    return True


def _rewrite_load(pb: _PadBuffer, op: ir.Operation) -> None:
    from mlir.dialects import memref

    ip = ir.InsertionPoint(op)
    b = _IndexBuilder(ip)
    p, _ = _root_indices(op.operands[0], list(op.operands)[1:], pb.alloc.results[0], b)
    q, cond = _guarded(pb, p, b)

    def read(ip2: ir.InsertionPoint) -> ir.Value:
        b2 = _IndexBuilder(ip2)
        return memref.LoadOp(pb.source, [b2.value(x) for x in q], ip=ip2).result

    val = _select_read(pb, cond, op.results[0].type, ip, read)
    op.results[0].replace_all_uses_with(val)
    op.erase()


def pad_buffers(module: ir.Module) -> list[_PadBuffer]:
    """The padded copies (`_PadBuffer`) in the host functions of `module`."""
    out = []
    for f in module.body.operations:
        if f.operation.name != "func.func":
            continue
        for alloc in walk(f.operation, "memref.alloc"):
            if _is_workgroup(alloc.results[0].type):
                continue
            pb = _pad_buffer(alloc)
            if pb is not None:
                out.append(pb)
    return out


def guard_padded_reads(module: ir.Module) -> int:
    """Fuse every `tensor.pad` producer into its readers as guarded loads.

    Bufferization turns `tensor.pad` into a buffer filled with the padding value and a copy of the
    source into its interior: host-side work and an intermediate buffer the cuda target has no
    device memory for. Every read of that buffer (`vector.transfer_read`, `memref.load`, through
    `memref.subview`s) becomes a read of the source at the shifted indices under an in-bounds
    test on the padded dims, yielding the padding value outside (`scf.if`; a vector read is split
    into 1-D pieces along its last dim, or into elements where that dim is padded); then the buffer,
    its fill and its copy go. Anything else touching the buffer raises `LoweringError`.
    Returns the number of buffers removed."""
    n = 0
    for pb in pad_buffers(module):
        reads: list[ir.Operation] = []
        views: list[ir.Operation] = []
        deallocs: list[ir.Operation] = []
        stack = [pb.alloc.results[0]]
        while stack:
            v = stack.pop()
            for use in v.uses:
                o = _owner(use)
                if any(o == x for x in pb.init):
                    continue
                if o.name == "memref.subview" and use.operand_number == 0:
                    views.append(o)
                    stack.append(o.results[0])
                elif o.name in ("vector.transfer_read", "memref.load") and use.operand_number == 0:
                    reads.append(o)
                elif o.name == "memref.dealloc":
                    deallocs.append(o)
                else:
                    raise LoweringError("lower", f"padded buffer used by '{o.name}' (only reads can be guarded)")
        for o in reads:
            if o.name == "memref.load":
                _rewrite_load(pb, o)
            else:
                _rewrite_transfer_read(pb, o)
        for o in reversed(views):  # users after their sources
            if not list(o.results[0].uses):
                o.erase()
        for o in [*deallocs, *pb.init]:
            o.erase()
        if list(pb.alloc.results[0].uses):
            raise LoweringError("lower", "padded buffer still used after guarding its reads")
        pb.alloc.erase()
        n += 1
    return n


# ----------------------------------------------------------------------------------------------
# Running on the device


"""The GPU lowering's one IR rewrite that is still Python (run by `lowering.py`):

    on the LLVM dialect: infer_access_alignment (128-bit accesses)

Every other rewrite of the pipeline is a C++ pass (`passes/GPU/`, `ansor-gpu-*`: GpuOptPasses.td,
GpuLoweringPasses.td, GpuLoweringBPasses.td) that `ansor-opt` can run without Python; this one
is what is left before a GPU candidate replays from payload + script to PTX with `ansor-opt`
alone. (`MAX_PRIVATE_BYTES` is the option `lowering.py` passes to
`ansor-gpu-private-allocs-to-stack`.)
"""

from __future__ import annotations

import re

from mlir import ir

from ansor.core.mlir import walk


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
                ty = _parse_inner(m.group(1))
        return t


def _parse_inner(s: str) -> ir.Type:
    """An LLVM array's element type from its text inside the array's (`array<97 x f32>` is
    printed without its `!llvm.` prefix there: a device global of a 2-D weight)."""
    return ir.Type.parse("!llvm." + s if s.startswith(("array<", "struct<", "ptr")) else s)


def _type_bytes(t: ir.Type) -> int | None:
    s = str(t)
    if s in _ELEM_BYTES:
        return _ELEM_BYTES[s]
    m = re.match(r"!llvm\.array<(\d+) x (.*)>$", s)
    if m:
        inner = _type_bytes(_parse_inner(m.group(2)))
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



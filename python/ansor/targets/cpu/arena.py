"""A compiled model's intermediates live in a static arena, allocated once and reused across calls.

    bufferized module (after `buffer-results-to-out-params`, before deallocation)
        --arena_intermediates(module, entry)--> every static `memref.alloc` at the top level of the
        entry function becomes a `memref.view` into one of a few private `memref.global` byte
        buffers (the arena's slots), shared by buffers whose lifetimes do not overlap

Why: a partitioned model's tasks pass their results to each other through buffers the entry
function allocates; `buffer-deallocation-pipeline` frees them at the end of every call. Each call
then mallocs (mmaps, for multi-MB activations) and first-touches fresh pages: ~1.9x the sum of the
tasks' own latencies on a 2-task softmax. In the arena the pages are faulted in once, and a slot
reused by the next task is still warm in cache.

Lifetimes are positions in the entry block: from the alloc to the last op (or the top-level
ancestor of a nested op) that uses the buffer or a view of it (subview, cast, reshape, view).
Slots are assigned greedily in block order: a buffer takes the free slot that fits it best,
growing the largest free one when none fits, else a new slot. Buffers that escape (returned,
stored, passed to an op that is not a call or a linalg/memref op) keep their `memref.alloc`.

Not thread-safe: two concurrent calls of one compiled program would share the arena, so
`CompiledNetwork` serialises its calls (a lock). Outputs are the caller's arrays (out-params),
never arena memory.
"""

from __future__ import annotations

from mlir import ir

#: Ops through which a buffer is used as a view of itself.
_VIEWS = {"memref.subview", "memref.cast", "memref.collapse_shape", "memref.expand_shape",
          "memref.reinterpret_cast", "memref.view", "memref.transpose"}
#: Ops that may read/write a buffer without keeping it beyond their own execution.
_USERS = ("func.call", "linalg.", "memref.copy", "memref.load", "memref.store", "vector.")
#: Byte alignment of the arena's slots (a cache line; enough for any vector load).
ALIGN = 64


def _top(op: ir.Operation, block: ir.Block) -> ir.Operation | None:
    """The ancestor of `op` (itself included) that sits directly in `block`."""
    cur = op.operation
    while cur is not None:
        parent = cur.parent
        if parent is None:
            return None
        if cur.block == block:
            return cur
        cur = parent
    return None


def _static_bytes(t: ir.MemRefType) -> int | None:
    if not t.has_static_shape or str(t.layout) != str(ir.AffineMapAttr.get(ir.AffineMap.get_identity(t.rank))):
        return None
    et = t.element_type
    width = None
    for cls in (ir.FloatType, ir.IntegerType):
        try:
            width = cls(et).width
            break
        except (ValueError, TypeError):
            continue
    if width is None or width % 8:
        return None
    n = 1
    for d in t.shape:
        n *= d
    return n * width // 8


def arena_intermediates(module: ir.Module, entry: str) -> int:
    """Put the static top-level allocations of function `entry` in a shared arena (see the module
    docstring); returns how many buffers moved. Call inside the module's context."""
    func = next((op.operation for op in module.body.operations if op.operation.name == "func.func"
                 and ir.StringAttr(op.operation.attributes["sym_name"]).value == entry), None)
    if func is None or not func.regions[0].blocks:
        return 0
    block = func.regions[0].blocks[0]
    ops = [op.operation for op in block.operations]
    pos = {op: i for i, op in enumerate(ops)}
    buffers: list[tuple[int, int, int, ir.Operation]] = []  # (start, end, bytes, alloc)
    for i, op in enumerate(ops):
        if op.name != "memref.alloc" or len(op.operands):
            continue
        size = _static_bytes(ir.MemRefType(op.results[0].type))
        if not size:
            continue
        end, ok = i, True
        pending = [op.results[0]]
        while pending and ok:
            v = pending.pop()
            for use in v.uses:
                user = use.owner.operation
                if user.name in _VIEWS:
                    pending.extend(user.results)
                elif not user.name.startswith(_USERS):
                    ok = False  # escapes (returned, stored as a value, ...): keep the alloc
                    break
                top = _top(user, block)
                if top is None:
                    ok = False
                    break
                end = max(end, pos[top])
        if ok:
            buffers.append((i, end, size, op))
    if not buffers:
        return 0
    # Greedy slot assignment in block order.
    slots: list[int] = []  # slot -> bytes
    busy_until: list[int] = []  # slot -> position of its current buffer's last use
    assign: list[int] = []
    for start, end, size, _ in buffers:
        free = [s for s in range(len(slots)) if busy_until[s] < start]
        fitting = [s for s in free if slots[s] >= size]
        if fitting:
            s = min(fitting, key=lambda k: slots[k])
        elif free:
            s = max(free, key=lambda k: slots[k])
            slots[s] = size
        else:
            s = len(slots)
            slots.append(size)
            busy_until.append(-1)
        busy_until[s] = end
        assign.append(s)
    i8 = ir.IntegerType.get_signless(8)
    names = []
    with ir.InsertionPoint(module.body):
        for s, size in enumerate(slots):
            name = f"__ansor_arena_{entry}_{s}"
            t = ir.MemRefType.get([(size + ALIGN - 1) // ALIGN * ALIGN], i8)
            ir.Operation.create("memref.global", attributes={
                "sym_name": ir.StringAttr.get(name),
                "sym_visibility": ir.StringAttr.get("private"),
                "type": ir.TypeAttr.get(t),
                "initial_value": ir.UnitAttr.get(),
                "alignment": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), ALIGN),
            })
            names.append((name, t))
    index = ir.IndexType.get()
    for (start, end, size, alloc), s in zip(buffers, assign, strict=True):
        name, t = names[s]
        with ir.InsertionPoint(alloc), alloc.location:
            glob = ir.Operation.create("memref.get_global", results=[t],
                                       attributes={"name": ir.FlatSymbolRefAttr.get(name)}).results[0]
            zero = ir.Operation.create("arith.constant", results=[index],
                                       attributes={"value": ir.IntegerAttr.get(index, 0)}).results[0]
            view = ir.Operation.create("memref.view", results=[alloc.results[0].type],
                                       operands=[glob, zero]).results[0]
        alloc.results[0].replace_all_uses_with(view)
        alloc.erase()
    return len(buffers)

"""Task extraction: a model function -> deduplicated, weighted search tasks.

    model .mlir / module --validate--> --ansor-partition (C++: fusion groups outlined as private
        @<func>__t<K> functions, func.call in the model)--> partitioned module
        --create_task per callee, dedupe by structural hash--> Network(tasks with weights, calls)

A task's weight is how often its group occurs in the model (ResNet-18's repeated 3x3 convs
become one task of weight 4, say). `Network.ir` is the partitioned module: `ansor.compile`
(`compile.compile_network`) replaces each callee by its task's best schedule and lowers the
whole module at once.
"""

from __future__ import annotations

import dataclasses

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from mlir import ir, passmanager

from ansor.frontend.bias import fold_bias_inits
from ansor.frontend.precision import fold_operand_extensions
from ansor.core import native as _native
from ansor.core.task import (
    SearchTask,
    TaskError,
    TensorSpec,
    create_task,
    parse_module,
    read_source,
    select_function,
)
from ansor.targets import get_target

GROUP_ATTR = "ansor.group"


@dataclass(frozen=True)
class Network:
    """A partitioned model function.

    `tasks` are distinct (by structural hash) with `weight` = occurrences; `calls` maps every
    outlined callee of `ir` to the index of its task; `flops` counts one call of the model
    (sum over all callees, repeated ones included).
    """

    name: str
    func_name: str
    ir: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    tasks: tuple[SearchTask, ...]
    calls: dict[str, int] = field(default_factory=dict)

    @property
    def flops(self) -> int:
        return sum(t.flops * t.weight for t in self.tasks)

    def as_task(self) -> SearchTask:
        """The whole model as one (untunable) task record: what `lowering` needs to compile and run it."""
        digest = hashlib.sha256(self.ir.encode()).hexdigest()[:16]
        target = self.tasks[0].target if self.tasks else "cpu"
        return SearchTask(self.name, self.func_name, self.ir, self.inputs, self.outputs, self.flops, digest, target)


def _sym(op: ir.Operation) -> str:
    return str(op.attributes["sym_name"]).strip('"')


def _short(group: str) -> str:
    return group.split(".", 1)[-1]


#: Ops `ansor-conv-to-nhwc` rewrites channels-last (their names as they appear in the text).
_CHANNELS_FIRST = ("linalg.conv_2d_nchw_fchw", "linalg.depthwise_conv_2d_nchw_chw", "linalg.pooling_nchw_")




def extract_tasks(source: str | Path | ir.Module, *, func: str | None = None, target: str = "cpu",
                  name: str | None = None, layout: str | None = None, winograd: int | None = None,
                  split: bool | None = None, tf32: bool = False) -> Network:
    """Partition the model function in `source` into tasks (see the module docstring).

    `layout="nhwc"` (the CPU's default, `Target.default_layout`) first rewrites channels-first 2-D convolutions (depthwise too) and pooling as
    channels-last ones between transposes (C++ `ansor-conv-to-nhwc`), folding the filter transposes into the weight
    constants: the CPU sketches vectorize over the channels then (measured on ResNet-18's 3x3
    convolutions: ~3x the GFLOP/s of the NCHW form), then moves the transposes back to NCHW down
    through element-wise ops and pads until they cancel against the next convolution's input
    transpose (C++ `ansor-propagate-nhwc`), so the activations between convolutions stay
    channels-last. `layout="keep"` (the GPU's default) leaves the model as it is.

    `winograd=m` (2 or 4; 0: off; default: the target's `default_winograd`, off) then computes the 3x3
    stride-1 convolutions with constant weights and >= 16 channels by Winograd's F(t x t, 3 x 3),
    t <= m (`winograd.rewrite`): each becomes
    three tasks, an input transform, a batched matmul and an output transform. A log tuned with one
    setting only matches tasks extracted with the same one (`compile.extract_for_log` picks it).

    A chain of row reductions and element-wise ops over the same rows (softmax, LayerNorm, attention
    scores + softmax) is one task (`ansor-partition`'s `row-chains`, scheduled by the reduction-chain
    sketch); `split=True` keeps each reduction in a task of its own (the old partitioning, an
    ablation: `ansor tune --split`); None: the target's default (`Target.row_chains`: on for the
    CPU, off for CUDA). A log tuned with one setting only matches tasks extracted with the same one.
    `tf32`: every task may run its f32 contractions on TF32 tensor cores (`core.task.with_tf32`;
    the cuda target only), as `ansor tune MODEL --tf32` tunes them."""
    if split is None:
        split = not get_target(target).row_chains
    if winograd is None:
        winograd = get_target(target).default_winograd
    if layout is None:
        layout = get_target(target).default_layout
    if layout not in ("nhwc", "keep"):
        raise ValueError(f"unknown layout {layout!r} (expected 'nhwc' or 'keep')")
    if winograd not in (0, 2, 4):
        raise ValueError(f"winograd must be 0 (off), 2 or 4 (F(m x m, 3 x 3)), not {winograd!r}")
    _native.register_everything()
    text, where = read_source(source)
    with ir.Context() as ctx, ir.Location.unknown():
        ctx.allow_unregistered_dialects = False
        module = parse_module(text, where)
        fop, fname, where, inputs, outputs = select_function(module, func, where)
        # Other public functions are not part of the model.
        for op in list(module.body.operations):
            o = op.operation
            if o.name == "func.func" and o != fop and "sym_visibility" not in o.attributes and o.regions[0].blocks:
                o.erase()
        try:
            fold_bias_inits(module)  # conv(init = broadcast bias) -> conv(init = 0) + bias epilogue
            arrays: dict[str, np.ndarray] = {}  # weight constants made here, by resource name
            if layout == "nhwc" and any(op in text for op in _CHANNELS_FIRST):
                from ansor.frontend.torch_import import fold_weight_transposes

                passmanager.PassManager.parse("builtin.module(func.func(ansor-conv-to-nhwc,ansor-propagate-nhwc),canonicalize)").run(
                    module.operation)
                fold_weight_transposes(module, text, arrays)
            if winograd:
                from ansor.frontend.torch_import import constant_array
                from ansor.frontend.winograd import rewrite

                if rewrite(module, lambda v: constant_array(v, text, arrays), m=winograd):
                    passmanager.PassManager.parse("builtin.module(inline,symbol-dce)").run(module.operation)
            fold_operand_extensions(module)  # half models: f16 operands and weights, not f32 copies
            partition = "ansor-partition{row-chains=false}" if split else "ansor-partition"
            passmanager.PassManager.parse(f"builtin.module(canonicalize,{partition},symbol-dce)").run(
                module.operation)
        except ir.MLIRError as exc:
            diags = getattr(exc, "error_diagnostics", None) or []
            raise TaskError(f"{where}: {diags[0].message if diags else str(exc).splitlines()[-1]}") from None
        callees = [op.operation for op in module.body.operations
                   if op.operation.name == "func.func" and GROUP_ATTR in op.operation.attributes]
        if get_target(target).fold_unit_reduction_dims:
            for callee in callees:
                _fold_unit_reduction_dims(callee)
        standalone: list[tuple[str, str, str]] = []  # (callee name, group, task module text)
        for callee in callees:
            single = ir.Module.create()
            with ir.InsertionPoint(single.body):
                clone = callee.clone()
            del clone.attributes["sym_visibility"]
            group = str(clone.attributes[GROUP_ATTR]).strip('"')
            del clone.attributes[GROUP_ATTR]
            standalone.append((_sym(callee), group, single.operation.get_asm(enable_debug_info=False)))
        partitioned = module.operation.get_asm(enable_debug_info=False)

    tasks: list[SearchTask] = []
    by_hash: dict[str, int] = {}
    calls: dict[str, int] = {}
    counts: list[int] = []
    for callee, group, body in standalone:
        t = create_task(body, target=target, name=f"{_short(group)}#{len(tasks)}", tf32=tf32)
        if t.hash not in by_hash:
            by_hash[t.hash] = len(tasks)
            tasks.append(t)
            counts.append(0)
        idx = by_hash[t.hash]
        counts[idx] += 1
        calls[callee] = idx
    weighted = tuple(dataclasses.replace(t, weight=counts[i]) for i, t in enumerate(tasks))
    return Network(name or fname, fname, partitioned, inputs, outputs, weighted, calls)


def _reductions(func: ir.Operation):
    """(op, iterator types, indexing maps) of every linalg op of `func` with a reduction loop."""
    for block in func.regions[0].blocks:
        for op in block.operations:
            o = op.operation
            if not o.name.startswith("linalg.") or "iterator_types" not in o.attributes:
                continue
            iters = [str(a) for a in ir.ArrayAttr(o.attributes["iterator_types"])]
            if any("reduction" in i for i in iters):
                yield o, iters, [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(o.attributes["indexing_maps"])]


def _has_unit_reduction_result(func: ir.Operation) -> bool:
    """Whether a reduction of `func` writes its result through a map with a constant (a kept unit
    dim: torch's `sum(..., keepdim=True)`, a pooled 1x1 plane)."""
    return any(any(not isinstance(e, ir.AffineDimExpr) for e in maps[-1].results)
               for _, _, maps in _reductions(func))


def _fold_unit_reduction_dims(callee: ir.Operation) -> None:
    """Upstream behaviour worked around (MLIR 22): `transform.structured.tile_reduction_using_forall`
    asserts (`cast<AffineDimExpr>`, the process aborts) on a reduction whose result map has a
    constant, which the GPU's cross-thread reduction rule tiles (BERT's softmax sums, kept as
    1x12x128x1). Such a task's unit dims are folded away first (upstream
    `linalg-fold-unit-extent-dims`: reshapes at the task's edges, the same signature), on the
    targets that ask for it (`Target.fold_unit_reduction_dims`). (Merging the two reduction loops
    of a global average pool or a norm over M x N the same way does not last: every program's
    `linalg-fuse-elementwise-ops` (`core/loops.preprocess`) expands them back through the
    reshape.) Pinned by tests/test_cuda_network.py."""
    if _has_unit_reduction_result(callee):
        passmanager.PassManager.parse(
            "func.func(linalg-fold-unit-extent-dims{use-rank-reducing-slices=false},canonicalize)").run(callee)


def task_table(net: Network) -> str:
    """The `ansor tasks` table: task, anchor, input shapes, GFLOP, weight."""
    rows = [("task", "inputs", "GFLOP", "weight", "share")]
    total = max(net.flops, 1)
    for t in net.tasks:
        ins = " ".join("x".join(map(str, s.shape)) for s in t.inputs)
        rows.append((t.name, ins if len(ins) < 60 else ins[:57] + "...", f"{t.flops / 1e9:.4f}", str(t.weight),
                     f"{100 * t.flops * t.weight / total:.1f}%"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.append(f"{net.name}: {len(net.tasks)} tasks ({len(net.calls)} calls), {net.flops / 1e9:.3f} GFLOP per call")
    return "\n".join(lines)

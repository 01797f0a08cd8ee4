"""Search tasks: the unit of tuning.

A user module (text, file or `mlir.ir.Module`) is validated and turned into a `SearchTask`:
one public `func.func` on statically shaped tensors, held as canonical MLIR text together with
its FLOP count and structural hash (both computed by the C++ pass `ansor-annotate-task`).

    .mlir file / module text --parse + validate--> SearchTask(name, ir, flops, hash, target, tf32)

Everything later in the pipeline works from `SearchTask.ir` (text), so tasks cross process
boundaries as plain data.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from mlir import ir, passmanager

from ansor.core import native as _native
from ansor.core.dtypes import numpy_dtype_name

#: Element types the pipeline can generate inputs for and verify.
#: (i8: torch-mlir's booleans after `frontend` widens i1, e.g. SDPA's all-masked-row guard;
#: bf16: numpy's `bfloat16` from ml_dtypes, see core/dtypes.py)
SUPPORTED_ELEMENT_TYPES = ("f32", "f64", "i32", "i64", "f16", "bf16", "i16", "i8")


class TaskError(ValueError):
    """Bad user input: the message is one line naming the file, function, op or shape."""


@dataclass(frozen=True)
class TensorSpec:
    """Shape and element type of one function argument or result."""

    shape: tuple[int, ...]
    dtype: str  # MLIR element type spelling: "f32", "i64", ...

    def numpy_dtype(self) -> str:
        """The numpy dtype name ("float32", "bfloat16", ...), registered with numpy (bf16: this
        imports ml_dtypes), so `np.dtype(spec.numpy_dtype())` works."""
        return numpy_dtype_name(self.dtype)

    def mlir_type(self) -> str:
        dims = "x".join(str(d) for d in self.shape)
        return f"tensor<{dims}x{self.dtype}>" if dims else f"tensor<{self.dtype}>"


@dataclass(frozen=True)
class SearchTask:
    """One tunable function.

    `ir` is a module holding exactly one public `func.func` named `func_name`, in canonical
    generic-free printed form; `flops` counts floating-point/integer operations of one call;
    `hash` is the structural hash (ignores SSA names, locations and the function name); with
    `tf32` (f32 contractions may run on TF32 tensor cores, 10-bit mantissas: an opt-in, off by
    default) it is the structural hash folded with the flag (`tf32_hash`), so records, the
    tuner's resume and the cost model keep a TF32 task apart from the exact-fp32 one.
    """

    name: str
    func_name: str
    ir: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    flops: int
    hash: str
    target: str = "cpu"
    weight: int = 1
    tf32: bool = False

    def key(self) -> str:
        """Stable identity of the task on its target (used in record keys)."""
        return hashlib.sha256(f"{self.hash}|{self.target}".encode()).hexdigest()[:16]

    def to_json(self) -> dict:
        d = asdict(self)
        if not self.tf32:  # records of exact-fp32 tasks read as they did before the flag existed
            del d["tf32"]
        d["inputs"] = [asdict(s) for s in self.inputs]
        d["outputs"] = [asdict(s) for s in self.outputs]
        return d

    @staticmethod
    def from_json(d: dict) -> SearchTask:
        d = dict(d)
        d["inputs"] = tuple(TensorSpec(tuple(s["shape"]), s["dtype"]) for s in d["inputs"])
        d["outputs"] = tuple(TensorSpec(tuple(s["shape"]), s["dtype"]) for s in d["outputs"])
        return SearchTask(**d)


def tf32_hash(structural: str) -> str:
    """The identity hash of a TF32 task whose structural hash is `structural`."""
    return hashlib.sha256(f"{structural}|tf32".encode()).hexdigest()[:len(structural)]


def with_tf32(task: SearchTask) -> SearchTask:
    """`task` (exact fp32) as its TF32 twin: the flag set and the hash folded with it. Raises
    `TaskError` off the cuda target (TF32 is a tensor-core format)."""
    if task.target != "cuda":
        raise TaskError(f"tf32 applies to the cuda target (TF32 tensor cores), not {task.target!r}")
    if task.tf32:
        return task
    return replace(task, tf32=True, hash=tf32_hash(task.hash))


def _tensor_spec(t: ir.Type, what: str) -> TensorSpec:
    if not isinstance(t, ir.RankedTensorType):
        raise TaskError(f"{what} has type {t}: only ranked tensors are supported (linalg on tensors)")
    rt = ir.RankedTensorType(t)
    if not rt.has_static_shape:
        raise TaskError(f"{what} has dynamic shape {t}: only static shapes can be tuned")
    et = str(rt.element_type)
    if et not in SUPPORTED_ELEMENT_TYPES:
        raise TaskError(f"{what} has element type {et}: supported are {', '.join(SUPPORTED_ELEMENT_TYPES)}")
    return TensorSpec(tuple(rt.shape), et)


def _public_funcs(module: ir.Module) -> list[ir.Operation]:
    out = []
    for op in module.body.operations:
        if op.operation.name != "func.func":
            continue
        attrs = op.operation.attributes
        vis = str(attrs["sym_visibility"]).strip('"') if "sym_visibility" in attrs else "public"
        if vis == "public" and len(op.operation.regions[0].blocks) > 0:
            out.append(op.operation)
    return out


def _check_body(func: ir.Operation, where: str) -> None:
    """Reject what the pipeline cannot lower: non-tensor values and dynamic shapes inside the body."""
    bad: list[str] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        for r in op.results:
            t = r.type
            if isinstance(t, ir.RankedTensorType) and not ir.RankedTensorType(t).has_static_shape:
                bad.append(f"{where}: op '{op.name}' produces dynamic shape {t}: only static shapes can be tuned")
            elif isinstance(t, ir.MemRefType):
                bad.append(f"{where}: op '{op.name}' works on memref {t}: give linalg on tensors")
            elif isinstance(t, ir.RankedTensorType) and str(ir.RankedTensorType(t).element_type) == "i1":
                bad.append(f"{where}: op '{op.name}' produces i1 tensor {t}: widen booleans to i8/i32 first")
        if op.name.startswith("tm_tensor."):
            bad.append(f"{where}: op '{op.name}' (torch-mlir TMTensor) cannot be lowered")
        return ir.WalkResult.ADVANCE

    func.walk(visit)
    if bad:
        raise TaskError(bad[0])


def _task_attr_fields(text: str) -> dict[str, str]:
    """Fields of a printed `#ansor.task<name = "f", weight = 1 : i64, flops = N : i64, hash = "h">`."""
    fields = dict(re.findall(r'(\w+)\s*=\s*("[^"]*"|-?\d+)', text))
    return {k: v.strip('"') for k, v in fields.items()}


def parse_module(text: str, source: str = "<input>") -> ir.Module:
    """Parse MLIR text in the current context, turning diagnostics into one-line `TaskError`s."""
    try:
        return ir.Module.parse(text)
    except ir.MLIRError as exc:
        diags = getattr(exc, "error_diagnostics", None) or []
        first = str(diags[0].message) if diags else str(exc).splitlines()[-1]
        loc = str(diags[0].location) if diags else ""
        raise TaskError(f"{source}: not valid MLIR: {first} {loc}".strip()) from None


#: The first bytes of an MLIR bytecode file (`Operation.write_bytecode`, `mlir-opt --emit-bytecode`).
BYTECODE_MAGIC = b"ML\xefR"


def read_mlir_file(path: Path) -> str:
    """The MLIR text of a file holding MLIR text or MLIR bytecode (printed back as text)."""
    data = path.read_bytes()
    if data.startswith(BYTECODE_MAGIC):
        from ansor.core import native

        native.register_everything()
        with ir.Context():
            try:
                return ir.Module.parse(data).operation.get_asm()
            except ir.MLIRError as exc:
                raise TaskError(f"{path}: not valid MLIR bytecode: {str(exc).splitlines()[0]}") from None
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise TaskError(f"{path}: neither MLIR text nor MLIR bytecode") from None


def read_source(source: str | Path | ir.Module) -> tuple[str, str]:
    """(MLIR text, name for messages) of a `.mlir` / `.mlirbc` path (text or bytecode), MLIR text
    or parsed module."""
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source
                                    and source.endswith((".mlir", ".mlirbc"))):
        path = Path(source)
        if not path.is_file():
            raise TaskError(f"{path}: no such file")
        return read_mlir_file(path), str(path)
    if isinstance(source, ir.Module):
        return str(source), "<module>"
    return str(source), "<input>"


def select_function(module: ir.Module, func: str | None, where: str
                    ) -> tuple[ir.Operation, str, str, tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """The public function to work on (`func`, or the only one), validated:
    (op, name, "where:@name" for messages, input specs, output specs)."""
    funcs = _public_funcs(module)
    if not funcs:
        raise TaskError(f"{where}: no public func.func with a body to tune")
    if func is None and len(funcs) > 1:
        names = ", ".join(str(f.attributes["sym_name"]).strip('"') for f in funcs)
        raise TaskError(f"{where}: several public functions ({names}): pick one with --func")
    if func is not None:
        funcs = [f for f in funcs if str(f.attributes["sym_name"]).strip('"') == func]
        if not funcs:
            raise TaskError(f"{where}: no public function named '{func}'")
    fop = funcs[0]
    fname = str(fop.attributes["sym_name"]).strip('"')
    where = f"{where}:@{fname}"
    ftype = ir.FunctionType(ir.TypeAttr(fop.attributes["function_type"]).value)
    inputs = tuple(_tensor_spec(t, f"{where} argument #{i}") for i, t in enumerate(ftype.inputs))
    outputs = tuple(_tensor_spec(t, f"{where} result #{i}") for i, t in enumerate(ftype.results))
    if not outputs:
        raise TaskError(f"{where}: the function returns nothing; return the computed tensors")
    _check_body(fop, where)
    return fop, fname, where, inputs, outputs


def create_task(
    source: str | Path | ir.Module,
    *,
    func: str | None = None,
    target: str = "cpu",
    name: str | None = None,
    weight: int = 1,
    tf32: bool = False,
) -> SearchTask:
    """Validate a user module and build its `SearchTask`.

    `source` is a path to a `.mlir` file, MLIR text, or a parsed `mlir.ir.Module`. `func` picks
    the function when the module has several public ones. `tf32` lets its f32 contractions run
    on TF32 tensor cores (`with_tf32`); off, f32 stays exact fp32.
    """
    from ansor.targets import target_names  # the registry: a leaf module (no target code loaded)

    if target not in target_names():
        raise TaskError(f"unknown target {target!r} (known: {', '.join(target_names())})")
    _native.register_everything()
    text, where = read_source(source)
    with ir.Context() as ctx, ir.Location.unknown():
        ctx.allow_unregistered_dialects = False
        module = parse_module(text, where)
        fop, fname, where, inputs, outputs = select_function(module, func, where)

        # A fresh module holding only the chosen function (callees, if any, come along).
        single = ir.Module.create()
        with ir.InsertionPoint(single.body):
            for op in module.body.operations:
                o = op.operation
                if o.name == "func.func" and o is not fop and str(o.attributes["sym_name"]).strip('"') != fname:
                    vis = str(o.attributes["sym_visibility"]).strip('"') if "sym_visibility" in o.attributes else "public"
                    if vis == "public":
                        continue  # other public entry points are not part of this task
                o.clone()
        try:
            pm = passmanager.PassManager.parse("builtin.module(canonicalize,ansor-annotate-task)")
            pm.run(single.operation)
        except ir.MLIRError as exc:
            diags = getattr(exc, "error_diagnostics", None) or []
            first = str(diags[0].message) if diags else str(exc).splitlines()[-1]
            raise TaskError(f"{where}: {first}") from None
        fnew = next(o.operation for o in single.body.operations if o.operation.name == "func.func"
                    and str(o.operation.attributes["sym_name"]).strip('"') == fname)
        info = _task_attr_fields(str(fnew.attributes["ansor.task"]))
        del fnew.attributes["ansor.task"]
        canonical = single.operation.get_asm(enable_debug_info=False)

    task = SearchTask(
        name=name or fname,
        func_name=fname,
        ir=canonical,
        inputs=inputs,
        outputs=outputs,
        flops=int(info["flops"]),
        hash=str(info["hash"]),
        target=target,
        weight=weight,
    )
    return with_tf32(task) if tf32 else task


def task_summary(task: SearchTask) -> str:
    ins = ", ".join(s.mlir_type() for s in task.inputs)
    tf32 = " tf32" if task.tf32 else ""
    return f"{task.name}({ins}) {task.flops / 1e9:.3f} GFLOP hash={task.hash[:12]}{tf32}"


def dumps(task: SearchTask) -> str:
    return json.dumps(task.to_json(), sort_keys=True)

"""Model import: a PyTorch model -> one linalg-on-tensors MLIR module whose only arguments are the inputs.

    nn.Module + example inputs --torch.export (here) + torch.export.save--> model.pt2 ─┐
    model.py:make_model + input shapes ──────────────────────────────────────────────┤
    built-in network name (models.NETWORKS) ─────────────────────────────────────────┤
          exporter process (_torch_export.py: torch-mlir fx import, linalg-on-tensors) ◀┘
          --MLIR text--> here: reject tm_tensor ops, parse with our MLIR 22, widen i1 tensors
          to i8 --> MLIR text (weights embedded as dense resources; elided on request)

torch-mlir runs in its own process and hands back text: it ships its own MLIR libraries, and
loading them next to our `mlir` bindings gives wrong results (and its bytecode does not read in
our MLIR 22). Weights are `arith.constant dense_resource<...>` blobs in the module, so the
compiled model takes exactly the model's inputs. `elide_weights=True` prints the blobs and large
constants elided: for people to read, not to compile.

Bad input (no such file, no factory, a shape string that is not `1x3x224x224`, an op we cannot
lower) raises `TaskError` with one line naming the file, op or shape.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from mlir import ir

from ansor.core.task import TaskError, parse_module
from ansor.core.dtypes import NUMPY_DTYPES

if TYPE_CHECKING:
    from torch import nn

log = logging.getLogger(__name__)

_EXPORTER = Path(__file__).with_name("_torch_export.py")

#: Input element types `--input-shape` accepts (MLIR spelling -> torch dtype name).
INPUT_DTYPES = {k: NUMPY_DTYPES[k] for k in ("f32", "f64", "f16", "i32", "i64")}

#: Printing limits with `elide_weights`: attributes/resources above these sizes print as `__elided__`.
ELIDE_ELEMENTS = 16
ELIDE_RESOURCE_BYTES = 64


def parse_input_shape(text: str) -> tuple[tuple[int, ...], str]:
    """`"1x3x224x224"` -> ((1, 3, 224, 224), "f32"); an element type may end it: `"1x128xi64"`."""
    parts = text.strip().lower().split("x")
    dtype = "f32"
    if parts and parts[-1] in INPUT_DTYPES:
        dtype = parts.pop()
    if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise TaskError(f"bad input shape '{text}': expected positive sizes joined by 'x', like 1x3x224x224 "
                        f"(optionally ending in an element type: {', '.join(INPUT_DTYPES)})")
    return tuple(int(p) for p in parts), dtype


def torch_available() -> bool:
    """Whether torch and torch-mlir are installed (checked without importing them)."""
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "torch_mlir"))


def _run_exporter(req: dict[str, Any], where: str, work: Path, *, timeout: float | None) -> dict[str, Any]:
    """Run `_torch_export.py` on `req` in a fresh process; its reply (raises `TaskError` on failure)."""
    if not torch_available():
        raise TaskError(f"{where}: model import needs torch and torch-mlir: pip install 'ansor-mlir[torch]'")
    req = dict(req, out_dir=str(work))
    (work / "request.json").write_text(json.dumps(req))
    # -P: do not put this package's directory on the child's sys.path (its modules would shadow others).
    try:
        proc = subprocess.run([sys.executable, "-P", str(_EXPORTER), str(work / "request.json")],
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise TaskError(f"{where}: the exporter took longer than {timeout:g} s") from None
    reply_path = work / "reply.json"
    if not reply_path.is_file():
        tail = [ln for ln in proc.stderr.splitlines() if ln.strip()][-1:] or [f"exit status {proc.returncode}"]
        raise TaskError(f"{where}: the exporter process died: {tail[0]}")
    reply = json.loads(reply_path.read_text())
    if not reply["ok"]:
        raise TaskError(f"{where}: {reply['message']}")
    bad = [b for b in reply.get("unlowerable") or [] if not b["op"].endswith(".yield")]
    if bad:
        names = sorted({b["op"] for b in bad})
        m = re.match(r'loc\("([^"]*)":(\d+)', bad[0]["loc"])
        at = f" (from {m.group(1)}:{m.group(2)})" if m else ""
        raise TaskError(f"{where}: torch-mlir lowered part of the model to {', '.join(names)}{at}: "
                        "TMTensor ops (sort, scatter, cumsum, ...) cannot be compiled by ansor")
    return reply


# --------------------------------------------------------------------------------------------------
# Post-processing in our MLIR.


def _is_i1_tensor(t: ir.Type) -> bool:
    return isinstance(t, ir.RankedTensorType) and isinstance(t.element_type, ir.IntegerType) \
        and t.element_type.width == 1


def _elem(t: ir.Type) -> ir.Type:
    return t.element_type if isinstance(t, ir.ShapedType) else t


def _i8_like(t: ir.RankedTensorType) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(t.shape, ir.IntegerType.get_signless(8), t.encoding)


#: Ops that only move elements: an i1 tensor through them becomes an i8 tensor, nothing else changes.
_MOVE_OPS = frozenset({
    "tensor.empty", "tensor.expand_shape", "tensor.collapse_shape", "tensor.extract_slice",
    "tensor.insert_slice", "tensor.cast", "tensor.concat", "tensor.reshape", "tensor.pad",
})


def _all_ops(root: ir.Operation) -> list[ir.Operation]:
    ops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        ops.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return ops


def widen_i1_tensors(module: ir.Module, where: str = "<module>") -> int:
    """Rewrite every `tensor<...xi1>` as `tensor<...xi8>` (true = 1) in place; the number of values retyped.

    This MLIR build aborts on i1 memrefs, so boolean masks (`x > 0`, `masked_fill`) are stored as
    bytes: scalar code inside linalg bodies keeps computing in i1 (`arith.trunci` where a byte is
    read, `arith.extui` where one is yielded). Bool function arguments/results, and ops whose
    i1 tensors we cannot re-type, raise `TaskError`.
    """
    i1, i8 = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(8)
    ops = _all_ops(module.operation)
    for op in ops:
        if op.name == "func.func":
            ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            fname = str(op.attributes["sym_name"]).strip('"')
            for what, types in (("argument", ftype.inputs), ("result", ftype.results)):
                for i, t in enumerate(types):
                    if _is_i1_tensor(t):
                        raise TaskError(f"{where}: @{fname} {what} #{i} is a bool tensor {t}: "
                                        "pass masks as integer or float tensors")
    if not any(_is_i1_tensor(r.type) for op in ops for r in op.results):
        return 0
    # Who may touch an i1 tensor: linalg ops (bodies fixed below), element movers, tensor.extract.
    for op in ops:
        touches = any(_is_i1_tensor(v.type) for v in [*op.operands, *op.results])
        if touches and not (op.name.startswith("linalg.") or op.name in _MOVE_OPS
                            or op.name in ("arith.constant", "tensor.extract")):
            raise TaskError(f"{where}: op '{op.name}' works on a bool tensor, which ansor cannot widen to i8")

    retyped = 0
    live: list[ir.Operation] = []
    for op in ops:
        if op.name == "arith.constant" and _is_i1_tensor(op.results[0].type):
            if not isinstance(op.attributes["value"], ir.DenseElementsAttr):
                raise TaskError(f"{where}: bool constant {op.attributes['value']} cannot be widened to i8")
            _widen_constant(op)
            retyped += 1
            continue
        live.append(op)
        for r in op.results:
            if _is_i1_tensor(r.type):
                r.set_type(_i8_like(ir.RankedTensorType(r.type)))
                retyped += 1

    for op in live:
        if op.name == "tensor.extract":
            if op.results[0].type == i1 and _elem(op.operands[0].type) == i8:
                op.results[0].set_type(i8)
                _truncate_after(op, op.results[0], i1)
            continue
        if op.name == "linalg.fill" and op.operands[0].type == i1 and _elem(op.operands[1].type) == i8:
            with ir.InsertionPoint(op), op.location:
                ext = ir.Operation.create("arith.extui", results=[i8], operands=[op.operands[0]])
            op.operands[0] = ext.results[0]
        if not (op.name.startswith("linalg.") or op.name == "tensor.pad") or not op.regions:
            continue
        if not op.regions[0].blocks:
            continue
        block = op.regions[0].blocks[0]
        if op.name.startswith("linalg."):
            # Block arguments follow the operands (inputs then inits; linalg.map has no init argument).
            for arg, opnd in zip(list(block.arguments), list(op.operands), strict=False):
                if arg.type == i1 and _elem(opnd.type) == i8:
                    arg.set_type(i8)
                    if not list(arg.uses):
                        continue
                    with ir.InsertionPoint.at_block_begin(block), op.location:
                        tr = ir.Operation.create("arith.trunci", results=[i1], operands=[arg])
                    arg.replace_all_uses_except(tr.results[0], tr)
        term = block.operations[len(block.operations) - 1]
        if term.name in ("linalg.yield", "tensor.yield"):
            for j, r in enumerate(op.results):
                if j < len(term.operands) and term.operands[j].type == i1 and _elem(r.type) == i8:
                    with ir.InsertionPoint(term), op.location:
                        ext = ir.Operation.create("arith.extui", results=[i8], operands=[term.operands[j]])
                    term.operands[j] = ext.results[0]
    try:
        ok = module.operation.verify()
    except ir.MLIRError as exc:
        diags = getattr(exc, "error_diagnostics", None) or []
        raise TaskError(f"{where}: widening bool tensors to i8 failed: "
                        f"{diags[0].message if diags else str(exc).splitlines()[-1]}") from None
    if not ok:
        raise TaskError(f"{where}: widening bool tensors to i8 failed verification")
    return retyped


def _widen_constant(op: ir.Operation) -> None:
    """Replace an `arith.constant dense<...> : tensor<...xi1>` by the same bytes as i8."""
    i8 = ir.IntegerType.get_signless(8)
    t = ir.RankedTensorType(op.results[0].type)
    attr = ir.DenseElementsAttr(op.attributes["value"])
    if attr.is_splat:
        bit = ir.IntegerAttr(attr.get_splat_value()).value != 0
        new_attr = ir.DenseElementsAttr.get_splat(_i8_like(t), ir.IntegerAttr.get(i8, int(bit)))
    else:
        bits = np.array(ir.DenseIntElementsAttr(attr)).astype(bool).astype(np.int8)
        new_attr = ir.DenseElementsAttr.get(bits, type=i8, shape=list(t.shape))
    with ir.InsertionPoint(op), op.location:
        new = ir.Operation.create("arith.constant", results=[_i8_like(t)], attributes={"value": new_attr})
    op.results[0].replace_all_uses_with(new.results[0])
    op.erase()


def _truncate_after(op: ir.Operation, value: ir.Value, to: ir.Type) -> None:
    """Insert `arith.trunci value` right after `op` and route every other use of `value` through it."""
    block = op.block
    ops = list(block.operations)
    idx = next(i for i, o in enumerate(ops) if o.operation == op)
    with ir.InsertionPoint(ops[idx + 1]), op.location:
        tr = ir.Operation.create("arith.trunci", results=[to], operands=[value])
    value.replace_all_uses_except(tr.results[0], tr)


#: Element types whose constants `constant_array` reads. Not bf16: the bindings expose no buffer
#: for a bf16 `DenseElementsAttr` (and numpy knows bfloat16 only once ml_dtypes is imported).
_NUMPY_DTYPES = {k: np.dtype(v).type for k, v in NUMPY_DTYPES.items() if k != "bf16"}


def _resource_blob(text: str, name: str) -> bytes | None:
    """The bytes of resource `name` in the text's `dialect_resources` section (alignment word dropped)."""
    m = re.search(r'[\s{,]"?' + re.escape(name) + r'"?\s*:\s*"0x([0-9A-Fa-f]*)"', text)
    return bytes.fromhex(m.group(1))[4:] if m else None


def _defining_op(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner.operation


def fold_weight_transposes(module: ir.Module, text: str, arrays: dict[str, np.ndarray] | None = None) -> int:
    """Replace `linalg.transpose` of a constant (torch-mlir's `aten.linear` weights) by the transposed constant.

    torch-mlir lowers `x @ W.T` to a runtime transpose of the weight followed by a matmul; folding
    it here saves that copy on every call and leaves the matmul its real operands. `text` is the
    module's text, whose resource section holds the weights (our bindings cannot read a
    `dense_resource` back); `arrays`, when given, receives each new constant's data by resource
    name (`constant_array` reads them). Returns the number of transposes folded.
    """
    ops = [op for op in _all_ops(module.operation) if op.name == "linalg.transpose"]
    folded = 0
    for op in ops:
        src = op.operands[0]
        cst = _defining_op(src)
        if cst is None or cst.name != "arith.constant":
            continue
        m = re.match(r"dense_resource<([^>]+)>", str(cst.attributes["value"]))
        weights = constant_array(src, text) if m is not None else None
        if weights is None:
            continue
        perm = [int(p) for p in ir.DenseI64ArrayAttr(op.attributes["permutation"])]
        data = np.ascontiguousarray(weights.transpose(perm))
        rtype = op.results[0].type
        attr = ir.DenseResourceElementsAttr.get_from_buffer(data, f"{m.group(1)}_T", rtype)
        if arrays is not None:
            arrays[f"{m.group(1)}_T"] = data
        with ir.InsertionPoint(op), op.location:
            new = ir.Operation.create("arith.constant", results=[rtype], attributes={"value": attr})
        op.results[0].replace_all_uses_with(new.results[0])
        init = _defining_op(op.operands[1])
        op.erase()
        for dead in (cst, init):
            if dead is not None and not list(dead.results[0].uses):
                dead.erase()
        folded += 1
    return folded


def constant_array(value: ir.Value, text: str, arrays: dict[str, np.ndarray] | None = None) -> np.ndarray | None:
    """The data of a value defined by `arith.constant` (dense, or a dense resource found in `arrays` or in the
    resource section of `text`), shaped as its type; None for anything else."""
    cst = _defining_op(value)
    t = value.type
    if cst is None or cst.name != "arith.constant" or not isinstance(t, ir.RankedTensorType):
        return None
    dtype = _NUMPY_DTYPES.get(str(t.element_type))
    attr = cst.attributes["value"]
    m = re.match(r"dense_resource<([^>]+)>", str(attr))
    if dtype is None:
        return None
    if m is None:
        if not isinstance(attr, ir.DenseElementsAttr):
            return None
        dense = ir.DenseElementsAttr(attr)
        if dense.is_splat:
            return np.full(t.shape, np.array(dense.get_splat_value().value, dtype=dtype), dtype=dtype)
        return np.array(dense, dtype=dtype).reshape(t.shape)
    if arrays is not None and m.group(1) in arrays:
        return arrays[m.group(1)].reshape(t.shape)
    blob = _resource_blob(text, m.group(1))
    if blob is None or len(blob) != int(np.prod(t.shape)) * np.dtype(dtype).itemsize:
        return None
    return np.frombuffer(blob, dtype=dtype).reshape(t.shape)


def finish(text: str, where: str, *, elide_weights: bool = False) -> str:
    """Imported MLIR text -> text our pipeline accepts (see the module docstring); raises `TaskError`."""
    tm = sorted(set(re.findall(r"\b(tm_tensor\.[a-z_]+)", text)))
    if tm:
        raise TaskError(f"{where}: {', '.join(tm)}: torch-mlir TMTensor ops cannot be compiled by ansor")
    with ir.Context(), ir.Location.unknown():
        module = parse_module(text, where)
        fold_weight_transposes(module, text)
        widen_i1_tensors(module, where)
        if elide_weights:
            text = module.operation.get_asm(large_elements_limit=ELIDE_ELEMENTS,
                                            large_resource_limit=ELIDE_RESOURCE_BYTES)
            return re.sub(r"\{-#\s*(dialect_resources:\s*\{\s*(builtin:\s*\{\s*\}\s*)?\}\s*)?#-\}\s*$", "", text)
        return module.operation.get_asm()


# --------------------------------------------------------------------------------------------------
# Entry points.


def _import(req: dict[str, Any], where: str, *, elide_weights: bool, timeout: float | None,
            work: Path | None = None) -> str:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ansor-import-") as tmp:
        reply = _run_exporter(req, where, work or Path(tmp), timeout=timeout)
        text = ((work or Path(tmp)) / "model.mlir").read_text()
    t1 = time.perf_counter()
    out = finish(text, where, elide_weights=elide_weights)
    log.info("%s: exporter process %.1f s (model %.1f s, torch.export + torch-mlir %.1f s), "
             "post-processing %.1f s, %.1f MiB", where, t1 - t0, reply.get("load_s", 0.0),
             reply.get("export_s", 0.0), time.perf_counter() - t1, len(out) / 2**20)
    return out


def import_torch(model: nn.Module, example_inputs: tuple, *, elide_weights: bool = False,
                 func_name: str = "main", timeout: float | None = None) -> str:
    """Export an in-memory `nn.Module` called on `example_inputs` (tensors of the static shapes) to MLIR text.

    `torch.export` runs here (the module's class need not be importable elsewhere); the exported
    program is saved and lowered by torch-mlir in the exporter process.
    """
    import torch

    where = f"<{type(model).__name__}>"
    try:
        prog = torch.export.export(model, tuple(example_inputs), strict=False)
    except Exception as exc:  # noqa: BLE001 (user model: reported as one line)
        first = next((ln for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        raise TaskError(f"{where}: torch.export failed: {first.strip()[:300]}") from None
    with tempfile.TemporaryDirectory(prefix="ansor-import-") as tmp:
        path = Path(tmp) / "model.pt2"
        torch.export.save(prog, str(path))
        req = {"source": "program", "path": str(path), "func_name": func_name}
        return _import(req, where, elide_weights=elide_weights, timeout=timeout, work=Path(tmp))


def _split_spec(spec: str) -> tuple[Path, str]:
    path_s, sep, attr = spec.rpartition(":")
    if not sep or not path_s or not attr.isidentifier():
        raise TaskError(f"bad model spec '{spec}': expected path/to/model.py:factory_name")
    path = Path(path_s)
    if not path.is_file():
        raise TaskError(f"{path}: no such file")
    if path.suffix != ".py":
        raise TaskError(f"{path}: not a Python file (expected path/to/model.py:factory_name)")
    return path, attr


def _input_specs(input_shapes: list[tuple[int, ...]], input_dtypes: list[str] | None, where: str) -> list[dict]:
    if not input_shapes:
        raise TaskError(f"{where}: give the model's input shapes (--input-shape 1x3x224x224, once per input)")
    dtypes = input_dtypes or ["f32"] * len(input_shapes)
    if len(dtypes) != len(input_shapes):
        raise TaskError(f"{where}: {len(input_shapes)} input shapes but {len(dtypes)} element types")
    specs = []
    for shape, dt in zip(input_shapes, dtypes, strict=True):
        if not shape or not all(isinstance(d, int) and d > 0 for d in shape):
            raise TaskError(f"{where}: bad input shape {tuple(shape)}: sizes must be positive integers")
        if dt not in INPUT_DTYPES:
            raise TaskError(f"{where}: input element type '{dt}' is not one of {', '.join(INPUT_DTYPES)}")
        specs.append({"shape": list(shape), "dtype": INPUT_DTYPES[dt]})
    return specs


def import_file(spec: str, input_shapes: list[tuple[int, ...]], *, input_dtypes: list[str] | None = None,
                elide_weights: bool = False, func_name: str = "main", timeout: float | None = None) -> str:
    """Export the model `make_model()` returns, for `spec` = "path/model.py:make_model", to MLIR text.

    One shape per model input (`input_dtypes`: MLIR element types, default all "f32"). The file is
    loaded in the exporter process only, and `make_model()` runs after `torch.manual_seed(0)`: a
    model left at its random init exports the same weights on every import, and
    `torch_reference` on the same spec runs those weights.
    """
    path, attr = _split_spec(spec)
    where = f"{path}:{attr}"
    req = {"source": "file", "path": str(path.resolve()), "attr": attr, "func_name": func_name,
           "inputs": _input_specs(input_shapes, input_dtypes, where)}
    return _import(req, where, elide_weights=elide_weights, timeout=timeout)


def _network(name: str) -> list[tuple[int, ...]]:
    from ansor.frontend.models import NETWORKS

    if name not in NETWORKS:
        raise TaskError(f"unknown network '{name}' (built-in: {', '.join(NETWORKS)})")
    return NETWORKS[name][1]


def import_network(name: str, *, elide_weights: bool = False, func_name: str = "main",
                   timeout: float | None = None) -> str:
    """Export the built-in network `name` (see `models.NETWORKS`) to MLIR text."""
    _network(name)
    req = {"source": "network", "name": name, "func_name": func_name}
    return _import(req, f"network '{name}'", elide_weights=elide_weights, timeout=timeout)


def torch_reference(source: str, inputs: list[np.ndarray], *, threads: int = 0,
                    timeout: float | None = None) -> list[np.ndarray]:
    """PyTorch's outputs of a built-in network name or a "model.py:factory" spec on `inputs`.

    Runs in the exporter process, so torch never shares this process with our MLIR either.
    `threads` = torch's intra-op threads (0: its default).
    """
    if ":" in source and source.rpartition(":")[0].endswith(".py"):
        path, attr = _split_spec(source)
        where = f"{path}:{attr}"
        req: dict[str, Any] = {"source": "file", "path": str(path.resolve()), "attr": attr, "inputs": []}
    else:
        _network(source)
        where, req = f"network '{source}'", {"source": "network", "name": source}
    with tempfile.TemporaryDirectory(prefix="ansor-ref-") as tmp:
        paths = []
        for i, a in enumerate(inputs):
            p = Path(tmp) / f"in_{i}.npy"
            np.save(p, np.ascontiguousarray(a))
            paths.append(str(p))
        req.update(export=False, reference_inputs=paths, threads=threads)
        _run_exporter(req, where, Path(tmp), timeout=timeout)
        outs = sorted(Path(tmp).glob("ref_*.npy"), key=lambda p: int(p.stem.split("_")[1]))
        return [np.load(p) for p in outs]

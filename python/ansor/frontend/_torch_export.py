"""The exporter process: a PyTorch model -> linalg-on-tensors MLIR text, through torch-mlir.

    request.json --load model (file.py:factory | built-in network | saved ExportedProgram)-->
    nn.Module / ExportedProgram --torch_mlir.fx.export_and_import(linalg-on-tensors)--> model.mlir
    (+ reply.json: ok / stage + one-line message, tm_tensor ops found, seconds; + reference outputs)

Run by `torch_import.py` as `python -P _torch_export.py REQUEST.json`, never imported: torch-mlir
carries its own MLIR libraries, and loading them next to the `mlir` bindings `ansor` uses gives
wrong results. So this file imports nothing from `ansor` (importing the package would load our
MLIR); the built-in networks come from `models.py`, loaded by path.

The request (JSON): {"source": "file" | "network" | "program", "path": ..., "attr": ...,
"name": ..., "inputs": [{"shape": [...], "dtype": "float32"}], "func_name": "main",
"export": true, "reference_inputs": [".npy paths"], "out_dir": DIR}. Everything the parent needs
comes back as files in out_dir: `model.mlir`, `reply.json`, `ref_<i>.npy`.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

#: torch's seed when a "model.py:factory" is called (see `_model`).
FACTORY_SEED = 0


class StageError(Exception):
    """A failure the parent reports as one line: `stage` is load / export / lower / reference."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage


def _one_line(exc: BaseException) -> str:
    """The most telling line of an exception: an MLIR `error:` line if any, else the first line."""
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "error:" in ln:
            return ln[ln.index("error:") + len("error:"):].strip()[:400]
    head = lines[0] if lines else ""
    return f"{type(exc).__name__}: {head}"[:400] if head else type(exc).__name__


def _load_by_path(path: Path, module_name: str) -> Any:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise StageError("load", f"{path}: cannot be loaded as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = mod
    spec.loader.exec_module(mod)
    return mod


def _example_inputs(specs: list[dict]) -> tuple:
    import torch

    g = torch.Generator().manual_seed(0)
    out = []
    for s in specs:
        dtype = getattr(torch, s["dtype"])
        if dtype.is_floating_point:
            out.append(torch.randn(*s["shape"], generator=g).to(dtype))
        else:
            out.append(torch.zeros(*s["shape"], dtype=dtype))
    return tuple(out)


def _model(req: dict) -> tuple[Any, tuple]:
    """(nn.Module or ExportedProgram, example inputs) for the request."""
    import torch

    src = req["source"]
    if src == "program":
        try:
            prog = torch.export.load(req["path"])
        except Exception as exc:  # noqa: BLE001 (reported as one line)
            raise StageError("load", f"{req['path']}: {_one_line(exc)}") from None
        return prog, ()
    if src == "network":
        models = _load_by_path(Path(__file__).with_name("models.py"), "_ansor_models")
        factory, shapes = models.NETWORKS[req["name"]]
        return factory(), _example_inputs([{"shape": s, "dtype": "float32"} for s in shapes])
    path = Path(req["path"])
    sys.path.insert(0, str(path.parent.resolve()))  # the model file may import its neighbours
    try:
        mod = _load_by_path(path, f"_ansor_user_{path.stem}")
    except StageError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise StageError("load", f"loading the file failed: {_one_line(exc)}") from None
    fn = getattr(mod, req["attr"], None)
    if fn is None:
        raise StageError("load", f"the file defines no '{req['attr']}'")
    # torch draws a fresh initial seed in every process (torch 2.13: torch.initial_seed() differs
    # run to run), so a factory that leaves its weights at their random init would export
    # different weights on every import, and `torch_reference` (another exporter process) would
    # run yet others. Seed it: the same file gives the same model in every process.
    torch.manual_seed(FACTORY_SEED)
    try:
        model = fn() if callable(fn) and not isinstance(fn, torch.nn.Module) else fn
    except Exception as exc:  # noqa: BLE001
        raise StageError("load", f"{req['attr']}() failed: {_one_line(exc)}") from None
    if not isinstance(model, torch.nn.Module):
        raise StageError("load", f"{req['attr']}() returned {type(model).__name__}, not a torch.nn.Module")
    return model.eval(), _example_inputs(req["inputs"])


def _unlowerable_ops(module: Any) -> list[dict]:
    """tm_tensor ops (sort, scatter, cumsum, ...) left by torch-mlir, with their source locations."""
    found: list[dict] = []

    def visit(op: Any) -> None:
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    o = inner.operation
                    if o.name.startswith("tm_tensor."):
                        found.append({"op": o.name, "loc": str(o.location)})
                    visit(o)

    visit(module.operation)
    return found


def _export(model: Any, example: tuple, func_name: str) -> tuple[str, list[dict]]:
    import torch
    from torch_mlir import fx

    if isinstance(model, torch.nn.Module):
        try:
            model = torch.export.export(model, example, strict=False)
        except Exception as exc:  # noqa: BLE001
            raise StageError("export", f"torch.export failed: {_one_line(exc)}") from None
    try:
        module = fx.export_and_import(model, output_type="linalg-on-tensors", func_name=func_name)
    except Exception as exc:  # noqa: BLE001
        raise StageError("lower", f"torch-mlir could not lower the model to linalg: {_one_line(exc)}") from None
    # Text, not bytecode: torch-mlir's bytecode version is not readable by our MLIR 22.
    return module.operation.get_asm(enable_debug_info=False), _unlowerable_ops(module)


def _reference(model: Any, paths: list[str], out_dir: Path) -> None:
    import numpy as np
    import torch

    call = model.module() if isinstance(model, torch.export.ExportedProgram) else model
    args = [torch.from_numpy(np.load(p)) for p in paths]
    try:
        with torch.no_grad():
            out = call(*args)
    except Exception as exc:  # noqa: BLE001
        raise StageError("reference", _one_line(exc)) from None
    outs = out if isinstance(out, (tuple, list)) else (out,)
    for i, t in enumerate(outs):
        np.save(out_dir / f"ref_{i}.npy", t.detach().numpy())


def main(argv: list[str]) -> int:
    req = json.loads(Path(argv[1]).read_text())
    out_dir = Path(req["out_dir"])
    reply: dict[str, Any] = {"ok": True}
    warnings.filterwarnings("ignore")
    t0 = time.perf_counter()
    try:
        try:
            import torch
            import torch_mlir  # noqa: F401 (checked here, used in _export)
        except ImportError as exc:
            raise StageError("setup", f"{exc.name} is not installed: pip install 'ansor-mlir[torch]'") from None
        torch.set_num_threads(int(req.get("threads", 0)) or torch.get_num_threads())
        model, example = _model(req)
        reply["load_s"] = time.perf_counter() - t0
        if req.get("export", True):
            t1 = time.perf_counter()
            text, bad = _export(model, example, req.get("func_name", "main"))
            (out_dir / "model.mlir").write_text(text)
            reply["unlowerable"] = bad
            reply["export_s"] = time.perf_counter() - t1
        if req.get("reference_inputs"):
            _reference(model, req["reference_inputs"], out_dir)
    except StageError as exc:
        reply = {"ok": False, "stage": exc.stage, "message": str(exc)}
    except Exception as exc:  # noqa: BLE001 (a bug here, still one line for the user; trace on stderr)
        traceback.print_exc()
        reply = {"ok": False, "stage": "internal", "message": _one_line(exc)}
    (out_dir / "reply.json").write_text(json.dumps(reply))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

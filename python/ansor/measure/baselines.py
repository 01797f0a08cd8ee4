"""Baselines outside MLIR: the same task computed by numpy where numpy can express it.

    SearchTask --loops.analyze--> one contraction (mul-add body, plain indexing) + zero fills
        --> np.einsum spec (BLAS-backed for matmul-like contractions)
"""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

import numpy as np

from ansor.core.loops import OpLoops, analyze
from ansor.core.task import SearchTask


def _einsum_spec(op: OpLoops) -> str | None:
    letters = string.ascii_lowercase
    if len(op.extents) > len(letters):
        return None
    ins = ["".join(letters[d] for d in dims) for dims in op.input_dims]
    out = "".join(letters[d] for d in op.output_dims)
    return ",".join(ins) + "->" + out


def numpy_function(task: SearchTask) -> Callable[..., np.ndarray] | None:
    """A numpy callable computing `task`, or None when the task is not a plain contraction."""
    ops = analyze(task.ir)
    anchors = [o for o in ops if o.reduce]
    others = [o for o in ops if not o.reduce]
    if len(anchors) != 1 or any(any(d for d in o.input_dims) for o in others):
        return None
    a = anchors[0]
    # mixed precision (f16 x f16 -> f32): the body extends each narrower operand first
    from ansor.core.dtypes import element_bytes

    out = task.outputs[0].dtype if len(task.outputs) == 1 else ""
    n_ext = sum(1 for s in task.inputs if out.startswith("f") and s.dtype.startswith(("f", "bf")) and s.dtype != out
                and element_bytes(s.dtype) < element_bytes(out))
    if a.num_body_ops != 2 + n_ext or len(a.input_dims) != len(task.inputs):
        return None  # not a mul-add contraction of the function's arguments
    spec = _einsum_spec(a)
    if spec is None:
        return None
    lhs = spec.split("->")[0].split(",")
    if any(len(t) != len(s.shape) for t, s in zip(lhs, task.inputs, strict=True)):
        return None  # an operand is indexed by affine expressions (convolution windows)
    if spec in ("ik,kj->ij", "ac,cb->ab", "bik,bkj->bij", "abd,adc->abc"):
        return np.matmul

    def run(*arrays: np.ndarray) -> np.ndarray:
        return np.einsum(spec, *arrays, optimize=True)

    return run


#: Vector width of OpenBLAS's kernels by the core type it dispatches (threadpoolctl's `architecture`).
OPENBLAS_BITS = {
    "skylakex": 512, "cooperlake": 512, "sapphirerapids": 512, "zen5": 512,
    "haswell": 256, "zen": 256, "sandybridge": 256, "excavator": 256, "steamroller": 256,
    "piledriver": 256, "bulldozer": 256,
    "nehalem": 128, "penryn": 128, "core2": 128, "prescott": 128, "atom": 128, "barcelona": 128,
    "neoversev1": 256, "neoversen1": 128, "neoversen2": 128, "armv8": 128,
}


def numpy_blas() -> dict[str, Any]:
    """numpy's BLAS: as built (`numpy.show_config`) and as loaded at run time (threadpoolctl:
    library, version, the core type whose kernels it dispatched, threading, threads), and the
    vector width of that kernel next to the host's."""
    from ansor.core.host import host_vector_bits

    out: dict[str, Any] = {"numpy": np.__version__, "host_vector_bits": host_vector_bits()}
    try:
        cfg = np.show_config(mode="dicts")
        blas = (cfg.get("Build Dependencies") or {}).get("blas") or {}
        out["build"] = {k: blas.get(k) for k in ("name", "version", "openblas configuration") if blas.get(k)}
    except Exception as exc:  # noqa: BLE001 (old numpy: no mode=; report, do not crash)
        out["build"] = {"error": str(exc)}
    try:
        import threadpoolctl

        libs = [d for d in threadpoolctl.threadpool_info() if d.get("user_api") == "blas"]
        if libs:
            d = libs[0]
            out["runtime"] = {k: d.get(k) for k in ("internal_api", "version", "architecture", "threading_layer",
                                                      "num_threads", "filepath")}
            arch = (d.get("architecture") or "").lower()
            out["kernel_bits"] = OPENBLAS_BITS.get(arch)
    except ImportError:
        out["runtime"] = {"error": "threadpoolctl is not installed (pip install threadpoolctl)"}
    return out


def describe_numpy_blas(info: dict[str, Any]) -> str:
    """One line: library, version, kernel core type and its width vs the host's."""
    rt = info.get("runtime") or {}
    build = info.get("build") or {}
    if "error" in rt:
        return f"numpy {info.get('numpy')}: {build.get('name', '?')} {build.get('version', '')} ({rt['error']})"
    lib = {"openblas": "OpenBLAS", "mkl": "MKL", "blis": "BLIS"}.get(rt.get("internal_api"), rt.get("internal_api"))
    kb, hb = info.get("kernel_bits"), info.get("host_vector_bits")
    width = f"{kb}-bit kernel" if kb else "kernel width unknown"
    narrow = f"; NARROWER than the host's {hb}-bit vectors" if kb and hb and kb < hb else ""
    conf = build.get("openblas configuration", "")
    target = next((w for w in conf.split() if w.lower() in OPENBLAS_BITS), None)
    built = f", build target {target}, runtime dispatch" if target and "DYNAMIC_ARCH" in conf else ""
    return (f"numpy {info.get('numpy')} -> {lib} {rt.get('version')} ({build.get('name', '?')}{built}): "
            f"core type {rt.get('architecture')} ({width}{narrow}), {rt.get('threading_layer')}, "
            f"{rt.get('num_threads')} threads")

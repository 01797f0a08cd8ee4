"""Baselines outside MLIR: the same task computed by numpy where numpy can express it.

    SearchTask --loops.analyze--> one contraction (mul-add body, plain indexing) + zero fills
        --> np.einsum spec (BLAS-backed for matmul-like contractions)
"""

from __future__ import annotations

import string
from collections.abc import Callable

import numpy as np

from .loops import OpLoops, analyze
from .task import SearchTask


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
    if a.num_body_ops != 2 or len(a.input_dims) != len(task.inputs):
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

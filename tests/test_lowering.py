"""Lowering workarounds for MLIR 22 behaviour (each test pins the upstream behaviour it relies on)."""

from __future__ import annotations

import ansor
import numpy as np
from ansor import _native, lowering, workloads
from ansor.measure import make_inputs
from mlir import ir


def test_strided_copies_become_linalg_copies() -> None:
    """A padded convolution bufferizes its `tensor.pad` into a `memref.copy` into a strided view of
    the padded buffer; upstream lowers that to the runtime's element-wise `memrefCopy`, so we turn it
    into `linalg.copy` (vectorizable loops) and keep contiguous copies as they are."""
    task = ansor.create_task(workloads.get("dep-1x8x8x3x3x1x1"))
    _native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = lowering.parse_payload(task)
        lowering._run_passes(module, lowering._BUFFERIZE, "lower")
        before = str(module)
        assert "memref.copy" in before and "strided<" in before  # the upstream behaviour
        assert lowering.strided_copies_to_linalg(module) >= 1
        after = str(module)
        assert "linalg.copy" in after
        assert all("strided<" not in line for line in after.splitlines() if "memref.copy" in line)
    # and the program still computes the same thing
    inputs = make_inputs(task)
    x, w = inputs
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = sum(xp[:, i:i + 8, j:j + 8, :] * w[i, j] for i in range(3) for j in range(3))
    out = lowering.compile_task(task, None).run(inputs)[0]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)

"""The text of a templated GPU kernel being emitted (`tensorcore.py`, `scores_softmax.py`).

    KernelText.emit(line) --> lines of the gpu.launch body; KernelText.c(x) --> "%cx", the index
    constant x, recorded in `consts` so the kernel declares each one once at the top of its body
"""

from __future__ import annotations


class KernelText:
    """The lines of a gpu.launch body and the index constants they use."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.consts: set[int] = set()

    def emit(self, line: str) -> None:
        """Appends `line` (indented by the caller) to the body."""
        self.lines.append(line)

    def c(self, x: int) -> str:
        """The SSA name of the index constant `x` (declared with the others at the top of the body)."""
        self.consts.add(x)
        return f"%c{x}"

    def stepped_mmas(self, J: str, a: str, b: str, steps: int, step_bytes: int, ta: str, tb: str,
                     b_map: str) -> None:
        """%acc2 = %acc + `steps` warpgroup MMAs, one op per K step, each on descriptors of views
        `ta` / `tb` this kernel offsets itself (`step_bytes` a step from the byte offsets `a`, `b`
        in %dyn; B's descriptor from TMA map `b_map`, "A" or "B"). Upstream `nvgpu.warpgroup.mma`
        (MLIR 22) steps a K-major B descriptor by whole rows between the K steps of one op, so a
        K-major B (TF32, attention's K) takes one op per step."""
        emit, c = self.emit, self.c
        acc = "%acc"
        for q in range(steps):
            emit(f"{J}%oa{q} = arith.addi {a}, {c(q * step_bytes)} : index")
            emit(f"{J}%ob{q} = arith.addi {b}, {c(q * step_bytes)} : index")
            emit(f"{J}%sa{q} = memref.view %dyn[%oa{q}][] : memref<?xi8, 3> to {ta}")
            emit(f"{J}%sb{q} = memref.view %dyn[%ob{q}][] : memref<?xi8, 3> to {tb}")
            # (the descriptor takes its 128-byte swizzle from the TMA map, its address from the view)
            emit(f"{J}%da{q} = nvgpu.warpgroup.generate.descriptor %sa{q}, %tA : {ta}, !tmA -> !dA")
            emit(f"{J}%db{q} = nvgpu.warpgroup.generate.descriptor %sb{q}, %t{b_map} : {tb}, !tm{b_map} -> !dB")
            out = "%acc2" if q == steps - 1 else f"%acck{q}"
            emit(f"{J}{out} = nvgpu.warpgroup.mma %da{q}, %db{q}, {acc} : !dA, !dB, !acc -> !acc")
            acc = out

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

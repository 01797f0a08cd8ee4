"""Element types, one table: MLIR spelling -> numpy dtype name and size in bytes."""

from __future__ import annotations

#: MLIR element type -> (numpy dtype name, bytes per element). bf16 has no numpy dtype.
ELEMENT_TYPES: dict[str, tuple[str | None, int]] = {
    "f64": ("float64", 8),
    "f32": ("float32", 4),
    "f16": ("float16", 2),
    "bf16": (None, 2),
    "i64": ("int64", 8),
    "i32": ("int32", 4),
    "i16": ("int16", 2),
    "i8": ("int8", 1),
}

#: Element types numpy can hold (the task arguments ansor runs and checks).
NUMPY_DTYPES: dict[str, str] = {k: np for k, (np, _) in ELEMENT_TYPES.items() if np is not None}


def element_bytes(mlir_type: str, default: int = 4) -> int:
    """Bytes per element of `mlir_type` (`default` for one this table lacks)."""
    return ELEMENT_TYPES.get(mlir_type, (None, default))[1]

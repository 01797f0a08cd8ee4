"""Element types, one table: MLIR spelling -> numpy dtype name and size in bytes.

bf16 is numpy's `bfloat16` from the `ml_dtypes` package: importing it registers the dtype, so
`np.dtype("bfloat16")` works afterwards. It is imported lazily, the first time a bf16 dtype is
asked for (`numpy_dtype`, `TensorSpec.numpy_dtype`), not by `import ansor`. Its kind is "V"
(numpy's own floats are "f"): ask `is_float` whether a dtype is a floating-point type.
"""

from __future__ import annotations

from typing import Any

#: MLIR element type -> (numpy dtype name, bytes per element).
ELEMENT_TYPES: dict[str, tuple[str, int]] = {
    "f64": ("float64", 8),
    "f32": ("float32", 4),
    "f16": ("float16", 2),
    "bf16": ("bfloat16", 2),  # ml_dtypes
    "i64": ("int64", 8),
    "i32": ("int32", 4),
    "i16": ("int16", 2),
    "i8": ("int8", 1),
}

#: Element types numpy can hold (the task arguments ansor runs and checks) -> numpy dtype name.
NUMPY_DTYPES: dict[str, str] = {k: name for k, (name, _) in ELEMENT_TYPES.items()}

#: MLIR floating-point element types.
FLOAT_TYPES = frozenset({"f64", "f32", "f16", "bf16"})

#: numpy dtype names that `ml_dtypes` provides (registered with numpy when it is imported).
ML_DTYPES_NAMES = frozenset({"bfloat16"})

#: Floating-point numpy dtype names whose kind is not "f" (ml_dtypes' types are kind "V").
_EXTENSION_FLOATS = ML_DTYPES_NAMES


def register_numpy_dtype(name: str) -> str:
    """Make numpy dtype `name` known to numpy (imports `ml_dtypes` for its types); returns `name`."""
    if name in ML_DTYPES_NAMES:
        import ml_dtypes  # noqa: F401 - registers bfloat16 & co. with numpy

    return name


def numpy_dtype_name(mlir_type: str) -> str:
    """The numpy dtype name of MLIR element type `mlir_type`, registered with numpy (KeyError for
    a type the table lacks)."""
    return register_numpy_dtype(NUMPY_DTYPES[mlir_type])


def numpy_dtype(t: str | Any) -> Any:
    """`np.dtype(t)` for anything `np.dtype` takes, ml_dtypes' names ("bfloat16") included. Not
    for MLIR element types ("i8" is numpy's int64): `numpy_dtype(numpy_dtype_name("bf16"))`."""
    import numpy as np

    return np.dtype(register_numpy_dtype(t) if isinstance(t, str) else t)


def is_float(dtype: Any) -> bool:
    """Whether a numpy dtype (or numpy dtype name, or MLIR float type) is a real floating-point
    type, bfloat16 included."""
    if isinstance(dtype, str) and dtype in FLOAT_TYPES:
        return True
    dt = numpy_dtype(dtype)
    return dt.kind == "f" or dt.name in _EXTENSION_FLOATS


def is_float_type(mlir_type: str) -> bool:
    """Whether MLIR element type `mlir_type` is a floating-point type (f16, bf16, f32, f64)."""
    return mlir_type in FLOAT_TYPES


def as_dtype(a: Any, dtype: Any) -> Any:
    """`a` (a numpy array) as `dtype`: cast, except that raw 2-byte records ("V2": how `np.save`
    / `np.savez` store bfloat16 arrays, numpy knows no name for them) are reinterpreted."""
    import numpy as np

    dt = numpy_dtype(dtype)
    a = np.asarray(a)
    if a.dtype == dt:
        return a
    if a.dtype.type is np.void and a.dtype.names is None and a.dtype.itemsize == dt.itemsize:
        return a.view(dt)
    return a.astype(dt)


def element_bytes(mlir_type: str, default: int = 4) -> int:
    """Bytes per element of `mlir_type` (`default` for one this table lacks)."""
    return ELEMENT_TYPES.get(mlir_type, (None, default))[1]

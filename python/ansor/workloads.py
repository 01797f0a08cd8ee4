"""Built-in workloads: linalg-on-tensors functions by name (`ansor tune --workload NAME`).

    name ("matmul-1024", "matmul-512x256x128", "gmm-1x128x128x128", ...) --build--> MLIR text

Each workload is one public function on static tensors whose result is a fresh tensor
(`tensor.empty` + `linalg.fill`), so running it twice gives the same answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable

DEFAULT_WORKLOAD = "matmul-1024"


def matmul(m: int, n: int, k: int, dtype: str = "f32") -> str:
    """C[m,n] = A[m,k] @ B[k,n]."""
    return f"""func.func @matmul(%A: tensor<{m}x{k}x{dtype}>, %B: tensor<{k}x{n}x{dtype}>) -> tensor<{m}x{n}x{dtype}> {{
  %zero = arith.constant 0.0 : {dtype}
  %empty = tensor.empty() : tensor<{m}x{n}x{dtype}>
  %init = linalg.fill ins(%zero : {dtype}) outs(%empty : tensor<{m}x{n}x{dtype}>) -> tensor<{m}x{n}x{dtype}>
  %C = linalg.matmul ins(%A, %B : tensor<{m}x{k}x{dtype}>, tensor<{k}x{n}x{dtype}>) outs(%init : tensor<{m}x{n}x{dtype}>) -> tensor<{m}x{n}x{dtype}>
  return %C : tensor<{m}x{n}x{dtype}>
}}
"""


def batch_matmul(b: int, n: int, m: int, k: int, dtype: str = "f32") -> str:
    """Ansor's GMM: C[b,n,m] = A[b,n,k] @ B[b,k,m]."""
    return f"""func.func @batch_matmul(%A: tensor<{b}x{n}x{k}x{dtype}>, %B: tensor<{b}x{k}x{m}x{dtype}>) -> tensor<{b}x{n}x{m}x{dtype}> {{
  %zero = arith.constant 0.0 : {dtype}
  %empty = tensor.empty() : tensor<{b}x{n}x{m}x{dtype}>
  %init = linalg.fill ins(%zero : {dtype}) outs(%empty : tensor<{b}x{n}x{m}x{dtype}>) -> tensor<{b}x{n}x{m}x{dtype}>
  %C = linalg.batch_matmul ins(%A, %B : tensor<{b}x{n}x{k}x{dtype}>, tensor<{b}x{k}x{m}x{dtype}>) outs(%init : tensor<{b}x{n}x{m}x{dtype}>) -> tensor<{b}x{n}x{m}x{dtype}>
  return %C : tensor<{b}x{n}x{m}x{dtype}>
}}
"""


def matmul_generic(m: int, n: int, k: int) -> str:
    """The same contraction written as a `linalg.generic` with B transposed (C = A @ B^T)."""
    return f"""#a = affine_map<(i, j, k) -> (i, k)>
#b = affine_map<(i, j, k) -> (j, k)>
#c = affine_map<(i, j, k) -> (i, j)>
func.func @matmul_nt(%A: tensor<{m}x{k}xf32>, %B: tensor<{n}x{k}xf32>) -> tensor<{m}x{n}xf32> {{
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<{m}x{n}xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  %C = linalg.generic {{indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}}
      ins(%A, %B : tensor<{m}x{k}xf32>, tensor<{n}x{k}xf32>) outs(%init : tensor<{m}x{n}xf32>) {{
    ^bb0(%x: f32, %y: f32, %acc: f32):
      %p = arith.mulf %x, %y : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
  }} -> tensor<{m}x{n}xf32>
  return %C : tensor<{m}x{n}xf32>
}}
"""


def _dims(text: str, count: int, name: str) -> list[int]:
    parts = [int(p) for p in text.split("x")]
    if len(parts) == 1 and count == 3:
        parts = parts * 3
    if len(parts) != count or any(p <= 0 for p in parts):
        raise KeyError(f"workload '{name}': expected {count} positive sizes joined by 'x'")
    return parts


# name pattern -> (builder from the size text, description)
_FAMILIES: dict[str, tuple[Callable[[str, str], str], str]] = {
    "matmul": (lambda s, n: matmul(*_dims(s, 3, n)), "matmul-M[xNxK]: C = A @ B, fp32"),
    "matmul_nt": (lambda s, n: matmul_generic(*_dims(s, 3, n)), "matmul_nt-M[xNxK]: C = A @ B^T as linalg.generic"),
    "gmm": (lambda s, n: batch_matmul(*_dims(s, 4, n)), "gmm-BxNxMxK: batch_matmul (Ansor GMM)"),
}

#: Named instances listed by `ansor workloads`.
BUILTIN: dict[str, str] = {
    "matmul-1024": "matmul 1024x1024x1024 fp32 (the default)",
    "matmul-512": "matmul 512x512x512 fp32",
    "matmul_nt-512": "matmul 512^3 with B transposed, as linalg.generic",
    "gmm-1x128x128x128": "Ansor GMM (1,128,128,128)",
    "gmm-1x512x32x512": "Ansor GMM (1,512,32,512)",
}


def get(name: str) -> str:
    """MLIR text of the workload `name`; raises KeyError with a one-line message when unknown."""
    m = re.fullmatch(r"([a-z_]+)-([0-9x]+)", name)
    if not m or m.group(1) not in _FAMILIES:
        known = ", ".join(sorted(BUILTIN))
        raise KeyError(f"unknown workload '{name}' (built in: {known})")
    builder, _ = _FAMILIES[m.group(1)]
    return builder(m.group(2), name)


def describe() -> list[tuple[str, str]]:
    return sorted(BUILTIN.items())

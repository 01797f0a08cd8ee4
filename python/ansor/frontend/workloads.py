"""Built-in workloads: linalg-on-tensors functions by name (`ansor tune --workload NAME`).

    name ("matmul-1024", "c2d-1x56x56x64x64x1x1x0", "tbs-1x128x12x64", ...) --build--> MLIR text

Each workload is one public `func.func` on static fp32 tensors whose result is a fresh tensor
(`tensor.empty` + `linalg.fill`), so running it twice gives the same answer. Weights are
function arguments. Besides plain matmuls this holds Ansor's single-op benchmark suite
(Zheng et al., OSDI 2020, Fig. 6) and two of its subgraphs, with the harness's shapes; see
`suite()`; and small functions of several anchor ops that the GPU runs as one task of several
kernels (attention, conv + ReLU + pool sum, a matmul + row sum or sum to a scalar, two matmuls of
one input). Layouts follow the harness: NLC / NHWC / NDHWC activations, HWIO-style filters
(`[k, k, CI, CO]`), batch 1. Padding is a `tensor.pad` with 0.0 feeding the convolution;
strides and dilations are op attributes (named ops) or folded into the indexing maps
(`linalg.generic`). Output sizes: `(in + 2p - d(k-1) - 1) // s + 1`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator

import numpy as np

DEFAULT_WORKLOAD = "matmul-1024"


def _t(shape: list[int] | tuple[int, ...], dtype: str = "f32") -> str:
    return "tensor<" + "x".join(str(d) for d in shape) + f"x{dtype}>"


def _out(size: int, k: int, s: int, p: int, d: int = 1) -> int:
    o = (size + 2 * p - d * (k - 1) - 1) // s + 1
    if o <= 0:
        raise ValueError(f"kernel {k} (dilation {d}) does not fit input {size} padded by {p}")
    return o


def _zeros(name: str, shape: list[int]) -> str:
    """`%name` = a fresh zero tensor of `shape` (needs `%zero` in scope)."""
    return (
        f"  %{name}_e = tensor.empty() : {_t(shape)}\n"
        f"  %{name} = linalg.fill ins(%zero : f32) outs(%{name}_e : {_t(shape)}) -> {_t(shape)}\n"
    )


def _pad(src: str, shape: list[int], pads: list[int]) -> tuple[str, str, list[int]]:
    """Zero-pad `src` by `pads[i]` on both sides of dim i: (text, value name, padded shape)."""
    if not any(pads):
        return "", src, list(shape)
    out = [d + 2 * p for d, p in zip(shape, pads, strict=True)]
    lo = ", ".join(str(p) for p in pads)
    idx = ", ".join(f"%i{i}: index" for i in range(len(shape)))
    text = (
        f"  %padded = tensor.pad {src} low[{lo}] high[{lo}] {{\n"
        f"  ^bb0({idx}):\n"
        f"    tensor.yield %zero : f32\n"
        f"  }} : {_t(shape)} to {_t(out)}\n"
    )
    return text, "%padded", out


def _func(
    name: str,
    args: list[tuple[str, list[int]]],
    result: list[int],
    body: str,
    ret: str,
    maps: str = "",
) -> str:
    sig = ", ".join(f"%{a}: {_t(s)}" for a, s in args)
    return (
        f"{maps}func.func @{name}({sig}) -> {_t(result)} {{\n"
        f"  %zero = arith.constant 0.0 : f32\n"
        f"{body}"
        f"  return {ret} : {_t(result)}\n"
        f"}}\n"
    )


_MAC = """    ^bb0(%x: f32, %y: f32, %acc: f32):
      %p = arith.mulf %x, %y : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
"""


def _generic(
    maps: list[str],
    iters: str,
    ins: list[tuple[str, list[int]]],
    out: tuple[str, list[int]],
    region: str,
    result: str = "%out",
    out_dtype: str = "f32",
    in_dtype: str = "f32",
) -> str:
    """`result` = a `linalg.generic` over `ins` (f32, or `in_dtype`) into `out` (f32, or `out_dtype`)."""
    names = ", ".join(v for v, _ in ins)
    types = ", ".join(_t(s, in_dtype) for _, s in ins)
    its = ", ".join(f'"{"parallel" if c == "p" else "reduction"}"' for c in iters)
    return (
        f"  {result} = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{its}]}}\n"
        f"      ins({names} : {types}) outs({out[0]} : {_t(out[1], out_dtype)}) {{\n"
        f"{region}"
        f"  }} -> {_t(out[1], out_dtype)}\n"
    )


# --------------------------------------------------------------------------- matmul family


def matmul(m: int, n: int, k: int, dtype: str = "f32", out_dtype: str | None = None) -> str:
    """C[m,n] = A[m,k] @ B[k,n]; A and B in `dtype`, C (and the accumulation) in `out_dtype`
    (default: `dtype`; `linalg.matmul` extends the operands to it)."""
    o = out_dtype or dtype
    return f"""func.func @matmul(%A: tensor<{m}x{k}x{dtype}>, %B: tensor<{k}x{n}x{dtype}>) -> tensor<{m}x{n}x{o}> {{
  %zero = arith.constant 0.0 : {o}
  %empty = tensor.empty() : tensor<{m}x{n}x{o}>
  %init = linalg.fill ins(%zero : {o}) outs(%empty : tensor<{m}x{n}x{o}>) -> tensor<{m}x{n}x{o}>
  %C = linalg.matmul ins(%A, %B : tensor<{m}x{k}x{dtype}>, tensor<{k}x{n}x{dtype}>) outs(%init : tensor<{m}x{n}x{o}>) -> tensor<{m}x{n}x{o}>
  return %C : tensor<{m}x{n}x{o}>
}}
"""


def matmul_bias_gelu(m: int, n: int, k: int, dtype: str = "f32") -> str:
    """Y[m,n] = GELU(A @ B + bias) with the exact (erf) GELU, PyTorch's default: A, B, bias and Y in
    `dtype`, the matmul accumulating in f32 (what cuBLAS does for half types); the bias add, the
    activation and the rounding are one element-wise consumer of the matmul."""
    acc = "f32"
    ext = (f"    %bx = arith.extf %b : {dtype} to f32\n" if dtype != "f32" else "")
    bias = "%bx" if dtype != "f32" else "%b"
    rnd = (f"    %r = arith.truncf %g : f32 to {dtype}\n    linalg.yield %r : {dtype}\n" if dtype != "f32"
           else "    linalg.yield %g : f32\n")
    return f"""#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
func.func @matmul_bias_gelu(%A: tensor<{m}x{k}x{dtype}>, %B: tensor<{k}x{n}x{dtype}>, %bias: tensor<{n}x{dtype}>) -> tensor<{m}x{n}x{dtype}> {{
  %zero = arith.constant 0.0 : {acc}
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %rsqrt2 = arith.constant 0.70710678118654752 : f32
  %acc_e = tensor.empty() : tensor<{m}x{n}x{acc}>
  %init = linalg.fill ins(%zero : {acc}) outs(%acc_e : tensor<{m}x{n}x{acc}>) -> tensor<{m}x{n}x{acc}>
  %C = linalg.matmul ins(%A, %B : tensor<{m}x{k}x{dtype}>, tensor<{k}x{n}x{dtype}>) outs(%init : tensor<{m}x{n}x{acc}>) -> tensor<{m}x{n}x{acc}>
  %e = tensor.empty() : tensor<{m}x{n}x{dtype}>
  %Y = linalg.generic {{indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%C, %bias : tensor<{m}x{n}x{acc}>, tensor<{n}x{dtype}>) outs(%e : tensor<{m}x{n}x{dtype}>) {{
  ^bb0(%c: f32, %b: {dtype}, %o: {dtype}):
{ext}    %x = arith.addf %c, {bias} : f32
    %xs = arith.mulf %x, %rsqrt2 : f32
    %er = math.erf %xs : f32
    %e1 = arith.addf %er, %one : f32
    %hx = arith.mulf %x, %half : f32
    %g = arith.mulf %hx, %e1 : f32
{rnd}  }} -> tensor<{m}x{n}x{dtype}>
  return %Y : tensor<{m}x{n}x{dtype}>
}}
"""


def batch_matmul(b: int, n: int, m: int, k: int, dtype: str = "f32", out_dtype: str | None = None) -> str:
    """Ansor's GMM: C[b,n,m] = A[b,n,k] @ B[b,k,m]; A and B in `dtype`, C (and the accumulation)
    in `out_dtype` (default: `dtype`)."""
    o = out_dtype or dtype
    return f"""func.func @batch_matmul(%A: tensor<{b}x{n}x{k}x{dtype}>, %B: tensor<{b}x{k}x{m}x{dtype}>) -> tensor<{b}x{n}x{m}x{o}> {{
  %zero = arith.constant 0.0 : {o}
  %empty = tensor.empty() : tensor<{b}x{n}x{m}x{o}>
  %init = linalg.fill ins(%zero : {o}) outs(%empty : tensor<{b}x{n}x{m}x{o}>) -> tensor<{b}x{n}x{m}x{o}>
  %C = linalg.batch_matmul ins(%A, %B : tensor<{b}x{n}x{k}x{dtype}>, tensor<{b}x{k}x{m}x{dtype}>) outs(%init : tensor<{b}x{n}x{m}x{o}>) -> tensor<{b}x{n}x{m}x{o}>
  return %C : tensor<{b}x{n}x{m}x{o}>
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


# --------------------------------------------------------------------------- convolutions


def _named_conv(
    op: str,
    fname: str,
    x: list[int],
    w: list[int],
    out: list[int],
    s: int,
    d: int,
    p: int,
    extra: tuple[list[tuple[str, list[int]]], str, str] | None = None,
) -> str:
    """pad(X) -> `op` with strides/dilations -> [optional epilogue] as one function."""
    nsp = len(x) - 2  # spatial dims
    text, src, xp = _pad("%X", x, [0] + [p] * nsp + [0])
    attrs = f"dilations = dense<{d}> : tensor<{nsp}xi64>, strides = dense<{s}> : tensor<{nsp}xi64>"
    body = (
        text + _zeros("init", out) + f"  %conv = {op} {{{attrs}}}\n"
        f"      ins({src}, %W : {_t(xp)}, {_t(w)}) outs(%init : {_t(out)}) -> {_t(out)}\n"
    )
    args = [("X", x), ("W", w)]
    ret = "%conv"
    if extra is not None:
        more, epilogue, ret = extra
        args += more
        body += epilogue
    return _func(fname, args, out, body, ret)


def _half_conv2d(x: list[int], f: list[int], out: list[int], s: int, d: int, p: int, dtype: str) -> str:
    """Y = round_to_dtype(conv_2d_nhwc_hwcf(pad(X), W)) with X, W in `dtype` and f32 sums."""
    n, h, w, ci = x
    xp = [n, h + 2 * p, w + 2 * p, ci]
    th, tf, to = (lambda sh: _t(sh, dtype)), (lambda sh: _t(sh, "f32")), _t(out, dtype)
    pad = ""
    src, src_t = "%X", th(x)
    if p:
        pad = (f"  %padded = tensor.pad %X low[0, {p}, {p}, 0] high[0, {p}, {p}, 0] {{\n"
               f"  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):\n"
               f"    tensor.yield %hzero : {dtype}\n"
               f"  }} : {th(x)} to {th(xp)}\n")
        src, src_t = "%padded", th(xp)
    attrs = f"dilations = dense<{d}> : tensor<2xi64>, strides = dense<{s}> : tensor<2xi64>"
    return f"""#id4 = affine_map<(a, b, c, d) -> (a, b, c, d)>
func.func @conv2d_nhwc({"%X"}: {th(x)}, %W: {th(f)}) -> {to} {{
  %zero = arith.constant 0.0 : f32
  %hzero = arith.constant 0.0 : {dtype}
{pad}  %init_e = tensor.empty() : {tf(out)}
  %init = linalg.fill ins(%zero : f32) outs(%init_e : {tf(out)}) -> {tf(out)}
  %conv = linalg.conv_2d_nhwc_hwcf {{{attrs}}}
      ins({src}, %W : {src_t}, {th(f)}) outs(%init : {tf(out)}) -> {tf(out)}
  %e = tensor.empty() : {to}
  %Y = linalg.generic {{indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}}
      ins(%conv : {tf(out)}) outs(%e : {to}) {{
  ^bb0(%a: f32, %o: {dtype}):
    %r = arith.truncf %a : f32 to {dtype}
    linalg.yield %r : {dtype}
  }} -> {to}
  return %Y : {to}
}}
"""


def conv1d_nlc(n: int, length: int, ci: int, co: int, k: int, s: int = 1, p: int = 0) -> str:
    """Ansor C1D (`linalg.conv_1d_nwc_wcf`):
    Y[n,l,co] = sum_{rl,ci} pad(X)[n, l*s+rl, ci] * W[rl,ci,co]."""
    out = [n, _out(length, k, s, p), co]
    return _named_conv(
        "linalg.conv_1d_nwc_wcf", "conv1d_nlc", [n, length, ci], [k, ci, co], out, s, 1, p
    )


def conv2d_nhwc(
    n: int,
    h: int,
    w: int,
    ci: int,
    co: int,
    k: int,
    s: int = 1,
    p: int = 0,
    dilation: int = 1,
    groups: int = 1,
    dtype: str = "f32",
) -> str:
    """Ansor C2D / DIL / GRP: NHWC input, [k,k,CI/groups,CO] filter.

    `dtype` f16/bf16 (`c2d-...-f16`): X, W and Y in half precision, the convolution accumulating
    in f32 and rounded once at the end (what cuDNN computes for a half `channels_last` conv).

    groups == 1: `linalg.conv_2d_nhwc_hwcf` (dilation as its attribute). MLIR 22's grouped
    convolutions are NCHW/NGCHW only, so groups > 1 is a `linalg.generic` over an explicit group
    loop g, between free reshapes (channels split as [g, CI/g] and [g, CO/g], f = co mod CO/g):
    Y[n,h,w,g,f] = sum_{rh,rw,rc} pad(X)[n, h*s+rh*d, w*s+rw*d, g, rc] * W[rh,rw,rc,g,f].
    Every index but the windows is a plain loop, so the output channels f vectorize.
    """
    if groups < 1 or ci % groups or co % groups:
        raise ValueError(f"groups={groups} must divide CI={ci} and CO={co}")
    oh, ow = _out(h, k, s, p, dilation), _out(w, k, s, p, dilation)
    x, f, out = [n, h, w, ci], [k, k, ci // groups, co], [n, oh, ow, co]
    if dtype != "f32":
        if groups != 1:
            raise ValueError(f"a {dtype} convolution has one group (got {groups})")
        return _half_conv2d(x, f, out, s, dilation, p, dtype)
    if groups == 1:
        return _named_conv("linalg.conv_2d_nhwc_hwcf", "conv2d_nhwc", x, f, out, s, dilation, p)
    text, src, xp = _pad("%X", x, [0, p, p, 0])
    g, cig, cog, d = groups, ci // groups, co // groups, dilation
    xg, fg, og = [*xp[:3], g, cig], [k, k, cig, g, cog], [n, oh, ow, g, cog]
    maps = [
        f"affine_map<(n, h, w, g, f, rh, rw, rc) -> (n, h * {s} + rh * {d}, w * {s} + rw * {d}, g, rc)>",
        "affine_map<(n, h, w, g, f, rh, rw, rc) -> (rh, rw, rc, g, f)>",
        "affine_map<(n, h, w, g, f, rh, rw, rc) -> (n, h, w, g, f)>",
    ]
    body = (
        text
        + f"  %Xg = tensor.expand_shape {src} [[0], [1], [2], [3, 4]] output_shape {xg} : {_t(xp)} into {_t(xg)}\n"
        + f"  %Wg = tensor.expand_shape %W [[0], [1], [2], [3, 4]] output_shape {fg} : {_t(f)} into {_t(fg)}\n"
        + _zeros("init", og)
        + _generic(maps, "ppppprrr", [("%Xg", xg), ("%Wg", fg)], ("%init", og), _MAC, result="%outg")
        + f"  %out = tensor.collapse_shape %outg [[0], [1], [2], [3, 4]] : {_t(og)} into {_t(out)}\n"
    )
    return _func("group_conv2d_nhwc", [("X", x), ("W", f)], out, body, "%out")


def conv3d_ndhwc(
    n: int, d: int, h: int, w: int, ci: int, co: int, k: int, s: int = 1, p: int = 0
) -> str:
    """Ansor C3D: NDHWC input, [k,k,k,CI,CO] filter (`linalg.conv_3d_ndhwc_dhwcf`)."""
    out = [n, _out(d, k, s, p), _out(h, k, s, p), _out(w, k, s, p), co]
    return _named_conv(
        "linalg.conv_3d_ndhwc_dhwcf",
        "conv3d_ndhwc",
        [n, d, h, w, ci],
        [k, k, k, ci, co],
        out,
        s,
        1,
        p,
    )


def depthwise_conv2d_nhwc(n: int, h: int, w: int, c: int, k: int, s: int = 1, p: int = 0) -> str:
    """Ansor DEP: Y[n,h,w,c] = sum_{rh,rw} pad(X)[n, h*s+rh, w*s+rw, c] * W[rh,rw,c]
    (`linalg.depthwise_conv_2d_nhwc_hwc`; multiplier 1)."""
    out = [n, _out(h, k, s, p), _out(w, k, s, p), c]
    return _named_conv(
        "linalg.depthwise_conv_2d_nhwc_hwc",
        "depthwise_conv2d_nhwc",
        [n, h, w, c],
        [k, k, c],
        out,
        s,
        1,
        p,
    )


def conv2d_transpose_nhwc(
    n: int, h: int, w: int, ci: int, co: int, k: int, s: int = 1, p: int = 0
) -> str:
    """Ansor T2D: PyTorch `ConvTranspose2d(stride=s, padding=p)` in NHWC; output size (H-1)*s - 2p + k.
    Definition: Y[n, ih*s - p + kh, iw*s - p + kw, co] += X[n,ih,iw,ci] * W[kh,kw,ci,co], with
    W[kh,kw,ci,co] = torch weight[ci,co,kh,kw]. The filter argument is W pre-arranged (frameworks
    pre-transform constant weights; `t2d_filter` / `t2d_torch_weight` convert both ways):

    - **stride 2: sub-pixel**, no FLOP on an inserted zero. Output pixel `(2a + ph, 2b + pw)` only
      receives the taps `kh = t + 2i` with `t = (ph + p) mod 2`, from input row `a + m - i`
      (`m = (ph + p) div 2`, affine in ph for stride 2). With J = ceil(k/2) taps per phase and
      the tap index reversed (`jh = J - 1 - i`), the filter argument is phase-major,
      `Fs[ph, jh, pw, jw, ci, co] = W[t(ph) + 2(J-1-jh), t(pw) + 2(J-1-jw), ci, co]` (zero past k),
      and one `linalg.generic` over `(n, a, ph, b, pw, co | jh, jw, ci)` reads X (zero-padded) at
      row `a + jh + m(ph) - J + 1`, every index affine with non-negative coefficients (MLIR 22's
      tiling asserts on a negative one), writing `[N, A, 2, B, 2, CO]`, which is `[N, 2A, 2B, CO]`
      (a free `collapse_shape`; cropped when the output size is odd).
    - **other strides:** the filter stored spatially flipped, `F[kh,kw,ci,co] = W[k-1-kh, k-1-kw, ci,
      co]`, and zero insertion + padding + a stride-1 convolution (as TVM's topi does):
      Z = zeros [N, (H-1)*s + 1 + 2q, (W-1)*s + 1 + 2q, CI] with q = k-1-p,
      Z[n, q + ih*s, q + iw*s, ci] = X[n,ih,iw,ci] (one strided `tensor.insert_slice`), then
      Y[n,h,w,co] = sum_{rh,rw,ci} Z[n, h+rh, w+rw, ci] * F[rh, rw, ci, co] (`linalg.generic`).
    """
    q = k - 1 - p
    if q < 0:
        raise ValueError(f"padding {p} larger than kernel-1 = {k - 1} is not supported")
    oh, ow = (h - 1) * s - 2 * p + k, (w - 1) * s - 2 * p + k
    if oh <= 0 or ow <= 0:
        raise ValueError("empty output")
    if s == 2:
        return _t2d_subpixel(n, h, w, ci, co, k, p, oh, ow)
    x, f, out = [n, h, w, ci], [k, k, ci, co], [n, oh, ow, co]
    z = [n, (h - 1) * s + 1 + 2 * q, (w - 1) * s + 1 + 2 * q, ci]
    body = (
        _zeros("z", z)
        + f"  %dilated = tensor.insert_slice %X into %z[0, {q}, {q}, 0] [{n}, {h}, {w}, {ci}] [1, {s}, {s}, 1]"
        f" : {_t(x)} into {_t(z)}\n" + _zeros("init", out)
    )
    maps = [
        "affine_map<(n, h, w, co, rh, rw, ci) -> (n, h + rh, w + rw, ci)>",
        "affine_map<(n, h, w, co, rh, rw, ci) -> (rh, rw, ci, co)>",
        "affine_map<(n, h, w, co, rh, rw, ci) -> (n, h, w, co)>",
    ]
    body += _generic(maps, "pppprrr", [("%dilated", z), ("%F", f)], ("%init", out), _MAC)
    return _func("conv2d_transpose_nhwc", [("X", x), ("F", f)], out, body, "%out")


def _t2d_phase(ph: int, p: int, taps: int) -> tuple[int, int]:
    """Stride-2 sub-pixel phase ph: (t, input row offset m - J + 1) (see `conv2d_transpose_nhwc`)."""
    return (ph + p) % 2, (ph + p) // 2 - taps + 1


def _t2d_subpixel(n: int, h: int, w: int, ci: int, co: int, k: int, p: int, oh: int, ow: int) -> str:
    taps = -(-k // 2)
    a_n, b_n = -(-oh // 2), -(-ow // 2)
    off0 = _t2d_phase(0, p, taps)[1]
    step = _t2d_phase(1, p, taps)[1] - off0  # 0 or 1: the input offset of phase 1 over phase 0

    def pad(size: int, count: int) -> tuple[int, int]:
        return max(0, -off0), max(0, (count - 1) + (taps - 1) + step + off0 - (size - 1))

    (lo_h, hi_h), (lo_w, hi_w) = pad(h, a_n), pad(w, b_n)
    x, fs, full = [n, h, w, ci], [2, taps, 2, taps, ci, co], [n, a_n, 2, b_n, 2, co]
    body = ""
    src, xp = "%X", x
    if lo_h or hi_h or lo_w or hi_w:
        xp = [n, h + lo_h + hi_h, w + lo_w + hi_w, ci]
        body += (
            f"  %xp = tensor.pad %X low[0, {lo_h}, {lo_w}, 0] high[0, {hi_h}, {hi_w}, 0] {{\n"
            f"  ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):\n"
            f"    tensor.yield %zero : f32\n"
            f"  }} : {_t(x)} to {_t(xp)}\n"
        )
        src = "%xp"
    body += _zeros("init", full)
    ph_h = " + ph" if step else ""
    ph_w = " + pw" if step else ""
    maps = [
        f"affine_map<(n, a, ph, b, pw, co, jh, jw, ci) -> (n, a + jh{ph_h} + {off0 + lo_h}, b + jw{ph_w} + {off0 + lo_w}, ci)>",
        "affine_map<(n, a, ph, b, pw, co, jh, jw, ci) -> (ph, jh, pw, jw, ci, co)>",
        "affine_map<(n, a, ph, b, pw, co, jh, jw, ci) -> (n, a, ph, b, pw, co)>",
    ]
    body += _generic(maps, "pppppprrr", [(src, xp), ("%F", fs)], ("%init", full), _MAC, result="%phases")
    out2 = [n, 2 * a_n, 2 * b_n, co]
    body += (f"  %y = tensor.collapse_shape %phases [[0], [1, 2], [3, 4], [5]] : {_t(full)} into {_t(out2)}\n")
    res = "%y"
    out = [n, oh, ow, co]
    if out2 != out:
        body += (f"  %yc = tensor.extract_slice %y[0, 0, 0, 0] [{n}, {oh}, {ow}, {co}] [1, 1, 1, 1]"
                 f" : {_t(out2)} to {_t(out)}\n")
        res = "%yc"
    return _func("conv2d_transpose_nhwc", [("X", x), ("F", fs)], out, body, res)


def _t2d_taps(k: int, p: int) -> Iterator[tuple[tuple[int, int, int, int], tuple[int, int]]]:
    """Stride-2 sub-pixel filter: ((ph, jh, pw, jw), (kh, kw)) for every phase-major position
    that holds a real tap of W (the others are zero)."""
    taps = -(-k // 2)
    for ph, jh, pw, jw in itertools.product(range(2), range(taps), range(2), range(taps)):
        kh = _t2d_phase(ph, p, taps)[0] + 2 * (taps - 1 - jh)
        kw = _t2d_phase(pw, p, taps)[0] + 2 * (taps - 1 - jw)
        if kh < k and kw < k:
            yield (ph, jh, pw, jw), (kh, kw)


def t2d_filter(weight: np.ndarray, k: int, s: int, p: int) -> np.ndarray:
    """The T2D workload's filter argument from W[kh, kw, ci, co] (= torch weight[ci, co, kh, kw])."""
    if s != 2:
        return np.ascontiguousarray(weight[::-1, ::-1])
    taps = -(-k // 2)
    out = np.zeros((2, taps, 2, taps, *weight.shape[2:]), weight.dtype)
    for pos, tap in _t2d_taps(k, p):
        out[pos] = weight[tap]
    return out


def valid_inputs(name: str, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """`arrays` (random inputs of workload `name`) made valid for it: a stride-2 T2D filter
    argument gets zeros at the taps past the kernel (what `t2d_filter` produces; the program
    multiplies whatever is there). Everything else is returned as it is."""
    fam, _, dims = name.partition("-")
    if fam != "t2d":
        return arrays
    k, s, p = (int(x) for x in dims.split("x")[-3:])
    return [arrays[0], t2d_filter(t2d_torch_weight(arrays[1], k, s, p), k, s, p), *arrays[2:]]


def t2d_torch_weight(filt: np.ndarray, k: int, s: int, p: int) -> np.ndarray:
    """W[kh, kw, ci, co] (= torch weight[ci, co, kh, kw]) from the T2D workload's filter argument."""
    if s != 2:
        return np.ascontiguousarray(filt[::-1, ::-1])
    out = np.zeros((k, k, *filt.shape[4:]), filt.dtype)
    for pos, tap in _t2d_taps(k, p):
        out[tap] = filt[pos]
    return out


def conv2d_capsule_nhwijc(
    n: int, h: int, w: int, ci: int, co: int, k: int, s: int = 1, p: int = 0, capsule: int = 4
) -> str:
    """Ansor CAP (TVM's conv2d_capsule_nhwijc): X[N,H,W,cap,cap,CI], W[k,k,cap,cap,CI,CO],
    Y[n,h,w,i,j,co] = sum_{rh,rw,ck,ci} pad(X)[n, h*s+rh, w*s+rw, i, ck, ci]
                                        * W[rh,rw,ck,j,ci,co]."""
    c = capsule
    x, f = [n, h, w, c, c, ci], [k, k, c, c, ci, co]
    out = [n, _out(h, k, s, p), _out(w, k, s, p), c, c, co]
    text, src, xp = _pad("%X", x, [0, p, p, 0, 0, 0])
    dims = "(n, h, w, i, j, co, rh, rw, ck, ci)"
    maps = [
        f"affine_map<{dims} -> (n, h * {s} + rh, w * {s} + rw, i, ck, ci)>",
        f"affine_map<{dims} -> (rh, rw, ck, j, ci, co)>",
        f"affine_map<{dims} -> (n, h, w, i, j, co)>",
    ]
    body = (
        text
        + _zeros("init", out)
        + _generic(maps, "pppppprrrr", [(src, xp), ("%W", f)], ("%init", out), _MAC)
    )
    return _func("conv2d_capsule_nhwijc", [("X", x), ("W", f)], out, body, "%out")


# --------------------------------------------------------------------------- reductions, subgraphs


def norm_bmn(b: int, m: int, n: int) -> str:
    """Ansor NRM: Y[b] = sqrt(sum_{m,n} X[b,m,n]^2): a reduction generic + a sqrt generic."""
    x = [b, m, n]
    sq = """    ^bb0(%x: f32, %acc: f32):
      %p = arith.mulf %x, %x : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
"""
    sqrt = """    ^bb0(%x: f32, %o: f32):
      %r = math.sqrt %x : f32
      linalg.yield %r : f32
"""
    body = (
        _zeros("init", [b])
        + _generic(
            ["affine_map<(b, m, n) -> (b, m, n)>", "affine_map<(b, m, n) -> (b)>"],
            "prr",
            [("%X", x)],
            ("%init", [b]),
            sq,
            "%sumsq",
        )
        + f"  %res = tensor.empty() : {_t([b])}\n"
        + _generic(["affine_map<(b) -> (b)>"] * 2, "p", [("%sumsq", [b])], ("%res", [b]), sqrt)
    )
    return _func("norm_bmn", [("X", x)], [b], body, "%out")


def conv2d_bn_relu(n: int, h: int, w: int, ci: int, co: int, k: int, s: int = 1, p: int = 0) -> str:
    """Ansor ConvLayer subgraph: Y = relu(conv2d_nhwc(X, W) * scale[co] + shift[co])
    (inference batch norm folded to a per-channel scale and shift, both arguments)."""
    out = [n, _out(h, k, s, p), _out(w, k, s, p), co]
    region = """    ^bb0(%c: f32, %a: f32, %b: f32, %o: f32):
      %m = arith.mulf %c, %a : f32
      %y = arith.addf %m, %b : f32
      %r = arith.maximumf %y, %zero : f32
      linalg.yield %r : f32
"""
    maps = [
        "affine_map<(n, h, w, c) -> (n, h, w, c)>",
        "affine_map<(n, h, w, c) -> (c)>",
        "affine_map<(n, h, w, c) -> (c)>",
        "affine_map<(n, h, w, c) -> (n, h, w, c)>",
    ]
    epilogue = f"  %res = tensor.empty() : {_t(out)}\n" + _generic(
        maps, "pppp", [("%conv", out), ("%scale", [co]), ("%shift", [co])], ("%res", out), region
    )
    return _named_conv(
        "linalg.conv_2d_nhwc_hwcf",
        "conv2d_bn_relu",
        [n, h, w, ci],
        [k, k, ci, co],
        out,
        s,
        1,
        p,
        extra=([("scale", [co]), ("shift", [co])], epilogue, "%out"),
    )


_NINF = "  %ninf = arith.constant 0xFF800000 : f32\n"


def _softmax_rows(src: str, shape: list[int], result: str = "%out", out_dtype: str = "f32") -> str:
    """`result` = softmax of `src` (a tensor of `shape`) over its last dim: the row max, exp(x -
    max), the row sum, the division -- four `linalg.generic`s, as torch-mlir exports softmax
    (needs `%zero` and `%ninf`, the `_NINF` constant, in scope); with `out_dtype` f16/bf16 the
    division rounds its f32 quotient to it."""
    idx = ", ".join(f"d{i}" for i in range(len(shape)))
    full = f"affine_map<({idx}) -> ({idx})>"
    row = f"affine_map<({idx}) -> ({idx.rsplit(', ', 1)[0] if len(shape) > 1 else ''})>"
    red, its, red_its = shape[:-1], "p" * len(shape), "p" * (len(shape) - 1) + "r"
    return (
        f"  %max_e = tensor.empty() : {_t(red)}\n"
        f"  %max_init = linalg.fill ins(%ninf : f32) outs(%max_e : {_t(red)}) -> {_t(red)}\n"
        + _generic([full, row], red_its, [(src, shape)], ("%max_init", red), """    ^bb0(%x: f32, %acc: f32):
      %m = arith.maximumf %acc, %x : f32
      linalg.yield %m : f32
""", "%max")
        + f"  %exp_e = tensor.empty() : {_t(shape)}\n"
        + _generic([full, row, full], its, [(src, shape), ("%max", red)], ("%exp_e", shape), """    ^bb0(%x: f32, %m: f32, %o: f32):
      %d = arith.subf %x, %m : f32
      %e = math.exp %d : f32
      linalg.yield %e : f32
""", "%exp")
        + _zeros("sum_init", red)
        + _generic([full, row], red_its, [("%exp", shape)], ("%sum_init", red), """    ^bb0(%x: f32, %acc: f32):
      %s = arith.addf %acc, %x : f32
      linalg.yield %s : f32
""", "%sum")
        + f"  %res = tensor.empty() : {_t(shape, out_dtype)}\n"
        + _generic([full, row, full], its, [("%exp", shape), ("%sum", red)], ("%res", shape), f"""    ^bb0(%x: f32, %s: f32, %o: {out_dtype}):
      %r = arith.divf %x, %s : f32
""" + (f"""      %rh = arith.truncf %r : f32 to {out_dtype}
      linalg.yield %rh : {out_dtype}
""" if out_dtype != "f32" else """      linalg.yield %r : f32
"""), result, out_dtype)
    )


def softmax(m: int, n: int) -> str:
    """Softmax over the last dim of X [M,N] (ViT-B's attention: M = 12 heads x 197 tokens, N = 197)."""
    return _func("softmax", [("X", [m, n])], [m, n], _NINF + _softmax_rows("%X", [m, n]), "%out")


def transpose_batch_matmul_softmax(b: int, seq: int, heads: int, dim: int, dtype: str = "f32") -> str:
    """Ansor TBS subgraph: Q, K [B,S,H,D] -> Qt = transpose [B,H,S,D], Kt = transpose [B,H,D,S]
    (`linalg.transpose`) -> scores[b,h,i,j] = sum_d Qt[b,h,i,d] * Kt[b,h,d,j] (4-D batched
    contraction, `linalg.generic`) -> softmax over j (max, exp(x - max), sum, divide: four
    `linalg.generic`s) -> [B,H,S,S]. `dtype` f16/bf16 (`tbs-...-f16`): Q, K and the result in
    half precision, the scores summed and the softmax computed in f32 (PyTorch eager's
    `softmax(q @ k^T)` on half tensors keeps its accumulation and softmax in f32 too)."""
    x, qt, kt, sc = [b, seq, heads, dim], [b, heads, seq, dim], [b, heads, dim, seq], [b, heads, seq, seq]
    if dtype == "f32":
        mac, t = _MAC, dtype
    else:
        mac = f"""    ^bb0(%x: {dtype}, %y: {dtype}, %acc: f32):
      %xf = arith.extf %x : {dtype} to f32
      %yf = arith.extf %y : {dtype} to f32
      %p = arith.mulf %xf, %yf : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
"""
        t = dtype
    body = (
        _NINF
        + f"  %qt_e = tensor.empty() : {_t(qt, t)}\n"
        f"  %qt = linalg.transpose ins(%Q : {_t(x, t)}) outs(%qt_e : {_t(qt, t)}) permutation = [0, 2, 1, 3]\n"
        f"  %kt_e = tensor.empty() : {_t(kt, t)}\n"
        f"  %kt = linalg.transpose ins(%K : {_t(x, t)}) outs(%kt_e : {_t(kt, t)}) permutation = [0, 2, 3, 1]\n"
        + _zeros("sc_init", sc)
        + _generic(
            [
                "affine_map<(b, h, i, j, d) -> (b, h, i, d)>",
                "affine_map<(b, h, i, j, d) -> (b, h, d, j)>",
                "affine_map<(b, h, i, j, d) -> (b, h, i, j)>",
            ],
            "ppppr",
            [("%qt", qt), ("%kt", kt)],
            ("%sc_init", sc),
            mac,
            "%scores",
            in_dtype=t,
        )
        + _softmax_rows("%scores", sc, out_dtype=t)
    )
    if dtype == "f32":
        return _func("transpose_batch_matmul_softmax", [("Q", x), ("K", x)], sc, body, "%out")
    return (f"func.func @transpose_batch_matmul_softmax(%Q: {_t(x, t)}, %K: {_t(x, t)}) -> {_t(sc, t)} {{\n"
            f"  %zero = arith.constant 0.0 : f32\n{body}  return %out : {_t(sc, t)}\n}}\n")


def layernorm_gelu(m: int, n: int, eps: float = 1e-5, *, gelu: bool = True) -> str:
    """LayerNorm over the last dim + GELU (tanh approximation), fp32: X [M,N], gamma, beta [N] ->
    y = gelu((x - mean) / sqrt(var + eps) * gamma + beta). Three `linalg.generic`s: the row sum,
    the row sum of squared deviations (two-pass variance), and the element-wise normalization +
    GELU (`math.rsqrt`, `math.tanh`)."""
    x, r = [m, n], [m]
    full, row, col = "affine_map<(i, j) -> (i, j)>", "affine_map<(i, j) -> (i)>", "affine_map<(i, j) -> (j)>"
    inv_n = f"{1.0 / n:.9e}"  # (an MLIR float literal needs the mantissa's point)
    body = (
        _zeros("sum_init", r)
        + _generic([full, row], "pr", [("%X", x)], ("%sum_init", r), """    ^bb0(%x: f32, %acc: f32):
      %s = arith.addf %acc, %x : f32
      linalg.yield %s : f32
""", "%sum")
        + _zeros("sq_init", r)
        + _generic([full, row, row], "pr", [("%X", x), ("%sum", r)], ("%sq_init", r), f"""    ^bb0(%x: f32, %s: f32, %acc: f32):
      %inv_n = arith.constant {inv_n} : f32
      %mean = arith.mulf %s, %inv_n : f32
      %d = arith.subf %x, %mean : f32
      %p = arith.mulf %d, %d : f32
      %a = arith.addf %acc, %p : f32
      linalg.yield %a : f32
""", "%sq")
        + f"  %res = tensor.empty() : {_t(x)}\n"
        + _generic([full, row, row, col, col, full], "pp",
                   [("%X", x), ("%sum", r), ("%sq", r), ("%gamma", [n]), ("%beta", [n])], ("%res", x), f"""    ^bb0(%x: f32, %s: f32, %q: f32, %g: f32, %b: f32, %o: f32):
      %inv_n = arith.constant {inv_n} : f32
      %eps = arith.constant {eps:.9e} : f32
      %half = arith.constant 0.5 : f32
      %one = arith.constant 1.0 : f32
      %c0 = arith.constant 0.7978845608028654 : f32
      %c1 = arith.constant 0.044715 : f32
      %mean = arith.mulf %s, %inv_n : f32
      %var = arith.mulf %q, %inv_n : f32
      %ve = arith.addf %var, %eps : f32
      %rs = math.rsqrt %ve : f32
      %d = arith.subf %x, %mean : f32
      %nrm = arith.mulf %d, %rs : f32
      %sc = arith.mulf %nrm, %g : f32
      %y = arith.addf %sc, %b : f32
""" + (_GELU_TAIL if gelu else "      linalg.yield %y : f32\n") + """""")
    )
    return _func("layernorm_gelu" if gelu else "layernorm", [("X", x), ("gamma", [n]), ("beta", [n])], x, body,
                 "%out")


#: GELU (tanh approximation) of `%y`, yielded (the tail of `layernorm_gelu`'s element-wise body).
_GELU_TAIL = """      %y2 = arith.mulf %y, %y : f32
      %y3 = arith.mulf %y2, %y : f32
      %k = arith.mulf %y3, %c1 : f32
      %u = arith.addf %y, %k : f32
      %z = arith.mulf %u, %c0 : f32
      %t = math.tanh %z : f32
      %t1 = arith.addf %t, %one : f32
      %hy = arith.mulf %y, %half : f32
      %r = arith.mulf %hy, %t1 : f32
      linalg.yield %r : f32
"""


def rmsnorm(m: int, n: int, eps: float = 1e-6) -> str:
    """RMSNorm over the last dim (LLaMA's), fp32: X [M,N], gamma [N] -> x / sqrt(mean(x^2) + eps) * gamma.
    Two `linalg.generic`s: the row sum of squares and the element-wise scaling (`math.rsqrt`)."""
    x, r = [m, n], [m]
    full, row, col = "affine_map<(i, j) -> (i, j)>", "affine_map<(i, j) -> (i)>", "affine_map<(i, j) -> (j)>"
    inv_n = f"{1.0 / n:.9e}"
    body = (
        _zeros("sq_init", r)
        + _generic([full, row], "pr", [("%X", x)], ("%sq_init", r), """    ^bb0(%x: f32, %acc: f32):
      %p = arith.mulf %x, %x : f32
      %a = arith.addf %acc, %p : f32
      linalg.yield %a : f32
""", "%sq")
        + f"  %res = tensor.empty() : {_t(x)}\n"
        + _generic([full, row, col, full], "pp", [("%X", x), ("%sq", r), ("%gamma", [n])], ("%res", x), f"""    ^bb0(%x: f32, %q: f32, %g: f32, %o: f32):
      %inv_n = arith.constant {inv_n} : f32
      %eps = arith.constant {eps:.9e} : f32
      %ms = arith.mulf %q, %inv_n : f32
      %me = arith.addf %ms, %eps : f32
      %rs = math.rsqrt %me : f32
      %y = arith.mulf %x, %rs : f32
      %r = arith.mulf %y, %g : f32
      linalg.yield %r : f32
""")
    )
    return _func("rmsnorm", [("X", x), ("gamma", [n])], x, body, "%out")


def row_sum(m: int, n: int) -> str:
    """Row sums of X [M,N] -> [M] (`torch.sum(x, dim=-1)`): one reduction `linalg.generic`."""
    x, r = [m, n], [m]
    full, row = "affine_map<(i, j) -> (i, j)>", "affine_map<(i, j) -> (i)>"
    body = _zeros("sum_init", r) + _generic([full, row], "pr", [("%X", x)], ("%sum_init", r), """    ^bb0(%x: f32, %acc: f32):
      %s = arith.addf %acc, %x : f32
      linalg.yield %s : f32
""")
    return _func("row_sum", [("X", x)], r, body, "%out")


def log_softmax(m: int, n: int) -> str:
    """log-softmax over the last dim of X [M,N]: x - max - log(sum(exp(x - max)))."""
    x, r = [m, n], [m]
    full, row = "affine_map<(i, j) -> (i, j)>", "affine_map<(i, j) -> (i)>"
    body = (
        f"  %max_e = tensor.empty() : {_t(r)}\n"
        f"  %max_init = linalg.fill ins(%ninf : f32) outs(%max_e : {_t(r)}) -> {_t(r)}\n"
        + _generic([full, row], "pr", [("%X", x)], ("%max_init", r), """    ^bb0(%x: f32, %acc: f32):
      %m = arith.maximumf %acc, %x : f32
      linalg.yield %m : f32
""", "%max")
        + _zeros("sum_init", r)
        + _generic([full, row, row], "pr", [("%X", x), ("%max", r)], ("%sum_init", r), """    ^bb0(%x: f32, %m: f32, %acc: f32):
      %d = arith.subf %x, %m : f32
      %e = math.exp %d : f32
      %s = arith.addf %acc, %e : f32
      linalg.yield %s : f32
""", "%sum")
        + f"  %res = tensor.empty() : {_t(x)}\n"
        + _generic([full, row, row, full], "pp", [("%X", x), ("%max", r), ("%sum", r)], ("%res", x), """    ^bb0(%x: f32, %m: f32, %s: f32, %o: f32):
      %l = math.log %s : f32
      %d = arith.subf %x, %m : f32
      %r = arith.subf %d, %l : f32
      linalg.yield %r : f32
""")
    )
    return _func("log_softmax", [("X", x)], x, _NINF + body, "%out")


# --------------------------------------------------------------------------- fused ops of several kernels
# Small functions of several anchor ops (or an anchor and a reduction of its result) that one GPU
# kernel does not cover: as one task they get the multi-kernel sketch (docs/gpu.md, rule 4).


def attention(s: int, keys: int, d: int) -> str:
    """O[s,d] = softmax(Q[s,d] @ K[d,keys]) @ V[keys,d]: the scores (a matmul), their softmax over
    the keys (max, exp, sum, divide), then a matmul by V."""
    sk, row = [s, keys], [s]
    full, rmap = "affine_map<(d0, d1) -> (d0, d1)>", "affine_map<(d0, d1) -> (d0)>"
    body = (
        _zeros("sf", sk)
        + f"  %S = linalg.matmul ins(%Q, %K : {_t([s, d])}, {_t([d, keys])}) outs(%sf : {_t(sk)}) -> {_t(sk)}\n"
        + _NINF
        + f"  %max_e = tensor.empty() : {_t(row)}\n"
        + f"  %max_init = linalg.fill ins(%ninf : f32) outs(%max_e : {_t(row)}) -> {_t(row)}\n"
        + _generic([full, rmap], "pr", [("%S", sk)], ("%max_init", row), """    ^bb0(%x: f32, %acc: f32):
      %m = arith.maximumf %acc, %x : f32
      linalg.yield %m : f32
""", "%max")
        + f"  %exp_e = tensor.empty() : {_t(sk)}\n"
        + _generic([full, rmap, full], "pp", [("%S", sk), ("%max", row)], ("%exp_e", sk), """    ^bb0(%x: f32, %m: f32, %o: f32):
      %d = arith.subf %x, %m : f32
      %e = math.exp %d : f32
      linalg.yield %e : f32
""", "%exp")
        + _zeros("sum_init", row)
        + _generic([full, rmap], "pr", [("%exp", sk)], ("%sum_init", row), """    ^bb0(%x: f32, %acc: f32):
      %s = arith.addf %acc, %x : f32
      linalg.yield %s : f32
""", "%sum")
        + f"  %res = tensor.empty() : {_t(sk)}\n"
        + _generic([full, rmap, full], "pp", [("%exp", sk), ("%sum", row)], ("%res", sk), """    ^bb0(%x: f32, %s: f32, %o: f32):
      %r = arith.divf %x, %s : f32
      linalg.yield %r : f32
""", "%P")
        + _zeros("of", [s, d])
        + f"  %out = linalg.matmul ins(%P, %V : {_t(sk)}, {_t([keys, d])}) outs(%of : {_t([s, d])}) -> {_t([s, d])}\n"
    )
    return _func("attention", [("Q", [s, d]), ("K", [d, keys]), ("V", [keys, d])], [s, d], body, "%out")


def col_sum(m: int, n: int) -> str:
    """Column sums of X [M,N] -> [N] (`torch.sum(x, dim=0)`): the reduction over the outer dim."""
    body = _zeros("sum_init", [n]) + _generic(
        ["affine_map<(i, j) -> (i, j)>", "affine_map<(i, j) -> (j)>"], "rp", [("%X", [m, n])], ("%sum_init", [n]),
        """    ^bb0(%x: f32, %acc: f32):
      %s = arith.addf %x, %acc : f32
      linalg.yield %s : f32
""")
    return _func("col_sum", [("X", [m, n])], [n], body, "%out")


def conv_relu_pool(n: int, h: int, w: int, ci: int, co: int, k: int, s: int = 1, p: int = 0) -> str:
    """Y[n,co] = sum over h, w of relu(conv2d_nhwc(X, W)): a convolution + ReLU, then a global
    pool's reduction of its output (two kernels: the pool reads the whole image)."""
    out = [n, _out(h, k, s, p), _out(w, k, s, p), co]
    pooled = [n, co]
    epilogue = (
        _generic(["affine_map<(n, h, w, c) -> (n, h, w, c)>"] * 2, "pppp", [("%conv", out)], ("%init_e", out),
                   """    ^bb0(%x: f32, %o: f32):
      %r = arith.maximumf %x, %zero : f32
      linalg.yield %r : f32
""", "%relu")
        + _zeros("pool_init", pooled)
        + _generic(["affine_map<(n, c, h, w) -> (n, h, w, c)>", "affine_map<(n, c, h, w) -> (n, c)>"], "pprr",
                   [("%relu", out)], ("%pool_init", pooled), """    ^bb0(%x: f32, %acc: f32):
      %s = arith.addf %x, %acc : f32
      linalg.yield %s : f32
""")
    )
    text = _named_conv("linalg.conv_2d_nhwc_hwcf", "conv_relu_pool", [n, h, w, ci], [k, k, ci, co], out, s, 1, p,
                       extra=([], epilogue, "%out"))
    return text.replace(f"-> {_t(out)} {{\n  %zero", f"-> {_t(pooled)} {{\n  %zero", 1).replace(
        f"  return %out : {_t(out)}", f"  return %out : {_t(pooled)}", 1)


def _mm_into(name: str, a: str, b: str, m: int, n: int, k: int) -> str:
    """`%name` = `a` [m,k] @ `b` [k,n] into a fresh zero tensor."""
    return _zeros(f"{name}_init", [m, n]) + (
        f"  %{name} = linalg.matmul ins({a}, {b} : {_t([m, k])}, {_t([k, n])}) outs(%{name}_init : {_t([m, n])})"
        f" -> {_t([m, n])}\n")


def matmul_rowsum(m: int, n: int, k: int) -> str:
    """R[m] = sum_n (A[m,k] @ B[k,n]): a matmul and a row sum of its result."""
    body = _mm_into("C", "%A", "%B", m, n, k) + _zeros("sum_init", [m]) + _generic(
        ["affine_map<(i, j) -> (i, j)>", "affine_map<(i, j) -> (i)>"], "pr", [("%C", [m, n])], ("%sum_init", [m]),
        """    ^bb0(%x: f32, %acc: f32):
      %s = arith.addf %x, %acc : f32
      linalg.yield %s : f32
""")
    return _func("matmul_rowsum", [("A", [m, k]), ("B", [k, n])], [m], body, "%out")


def matmul_sumall(m: int, n: int, k: int) -> str:
    """R = sum (A[m,k] @ B[k,n]): a matmul whose whole result is summed to one value."""
    body = _mm_into("C", "%A", "%B", m, n, k) + (
        "  %sum_e = tensor.empty() : tensor<f32>\n"
        "  %sum_init = linalg.fill ins(%zero : f32) outs(%sum_e : tensor<f32>) -> tensor<f32>\n"
        "  %out = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>], "
        'iterator_types = ["reduction", "reduction"]}\n'
        f"      ins(%C : {_t([m, n])}) outs(%sum_init : tensor<f32>) {{\n"
        """    ^bb0(%x: f32, %acc: f32):
      %s = arith.addf %x, %acc : f32
      linalg.yield %s : f32
  } -> tensor<f32>
""")
    return _func("matmul_sumall", [("A", [m, k]), ("B", [k, n])], [], body, "%out").replace(
        "-> tensor<xf32>", "-> tensor<f32>").replace("return %out : tensor<xf32>", "return %out : tensor<f32>")


def two_matmuls(m: int, n: int, k: int) -> str:
    """Y[m,n] = (X[m,k] @ W1[k,n]) * (X[m,k] @ W2[k,n]): two matmuls of one input, multiplied
    element-wise."""
    full, mn = "affine_map<(i, j) -> (i, j)>", _t([m, n])
    body = (_zeros("init", [m, n])  # one zero tensor: both matmuls' init, its empty the product's
            + f"  %M1 = linalg.matmul ins(%X, %W1 : {_t([m, k])}, {_t([k, n])}) outs(%init : {mn}) -> {mn}\n"
            + f"  %M2 = linalg.matmul ins(%X, %W2 : {_t([m, k])}, {_t([k, n])}) outs(%init : {mn}) -> {mn}\n"
            + _generic([full] * 3, "pp", [("%M1", [m, n]), ("%M2", [m, n])], ("%init_e", [m, n]), """    ^bb0(%x: f32, %y: f32, %o: f32):
      %p = arith.mulf %x, %y : f32
      linalg.yield %p : f32
"""))
    return _func("two_matmuls", [("X", [m, k]), ("W1", [k, n]), ("W2", [k, n])], [m, n], body, "%out")


# --------------------------------------------------------------------------- names


def _dims(text: str, count: int, name: str, *, pad_last: bool = False) -> list[int]:
    """`count` sizes joined by 'x' (one size means a cube when `count` is 3); with `pad_last`,
    the last size is a padding and may be 0."""
    fields = text.split("x")
    if len(fields) == 1 and count == 3 and not pad_last:
        fields = fields * 3
    parts = [int(f) if f else 0 for f in fields]
    least = [1] * count
    if pad_last:
        least[-1] = 0
    if (
        len(parts) != count
        or any(not f for f in fields)
        or any(p < lo for p, lo in zip(parts, least, strict=False))
    ):
        what = "sizes (the last, the padding, may be 0)" if pad_last else "positive sizes"
        raise KeyError(f"workload '{name}': expected {count} {what} joined by 'x'")
    return parts


def _conv_dims(text: str, count: int, name: str) -> list[int]:
    return _dims(text, count, name, pad_last=True)


# name pattern -> (builder from the size text, description)
_FAMILIES: dict[str, tuple[Callable[[str, str], str], str]] = {
    "matmul": (lambda s, n, t="f32": matmul(*_dims(s, 3, n), t, "f32"),
               "matmul-M[xNxK][-f16|-bf16]: C = A @ B (fp32; -f16/-bf16: half inputs, fp32 accumulation and C)"),
    "matmul_nt": (
        lambda s, n: matmul_generic(*_dims(s, 3, n)),
        "matmul_nt-M[xNxK]: C = A @ B^T as linalg.generic",
    ),
    "mmgelu": (lambda s, n, *t: matmul_bias_gelu(*_dims(s, 3, n), *t),
               "mmgelu-MxNxK[-f16|-bf16]: GELU(A @ B + bias), exact GELU, f32 accumulation"),
    "gmm": (lambda s, n, t="f32": batch_matmul(*_dims(s, 4, n), t, "f32"),
            "gmm-BxNxMxK[-f16|-bf16]: batch_matmul (Ansor GMM; -f16/-bf16: half inputs, fp32 accumulation and C)"),
    "c1d": (lambda s, n: conv1d_nlc(*_conv_dims(s, 7, n)), "c1d-NxLxCIxCOxKxSxP: conv1d NLC"),
    "c2d": (lambda s, n, t="f32": conv2d_nhwc(*_conv_dims(s, 8, n), dtype=t),
            "c2d-NxHxWxCIxCOxKxSxP[-f16|-bf16]: conv2d NHWC (-f16/-bf16: half X, W and Y, f32 accumulation)"),
    "c3d": (
        lambda s, n: conv3d_ndhwc(*_conv_dims(s, 9, n)),
        "c3d-NxDxHxWxCIxCOxKxSxP: conv3d NDHWC",
    ),
    "grp": (
        lambda s, n: conv2d_nhwc(*_conv_dims(s, 8, n), groups=4),
        "grp-NxHxWxCIxCOxKxSxP: conv2d NHWC, 4 groups",
    ),
    "dil": (
        lambda s, n: conv2d_nhwc(*_conv_dims(s, 8, n), dilation=2),
        "dil-NxHxWxCIxCOxKxSxP: conv2d NHWC, dilation 2",
    ),
    "dep": (
        lambda s, n: depthwise_conv2d_nhwc(*_conv_dims(s, 7, n)),
        "dep-NxHxWxCxKxSxP: depthwise conv2d NHWC",
    ),
    "t2d": (
        lambda s, n: conv2d_transpose_nhwc(*_conv_dims(s, 8, n)),
        "t2d-NxHxWxCIxCOxKxSxP: transposed conv2d NHWC",
    ),
    "cap": (
        lambda s, n: conv2d_capsule_nhwijc(*_conv_dims(s, 8, n)),
        "cap-NxHxWxCIxCOxKxSxP: capsule conv2d, capsule 4",
    ),
    "nrm": (lambda s, n: norm_bmn(*_dims(s, 3, n)), "nrm-BxMxN: per-batch Frobenius norm"),
    "convlayer": (
        lambda s, n: conv2d_bn_relu(*_conv_dims(s, 8, n)),
        "convlayer-NxHxWxCIxCOxKxSxP: conv2d + bn + relu",
    ),
    "mlp": (
        lambda s, n: mlp(*_dims(s, 3, n)),
        "mlp-BxWxD: D layers relu(x @ W + b) with residuals, weights embedded (a toy network)",
    ),
    "tbs": (
        lambda s, n, t="f32": transpose_batch_matmul_softmax(*_dims(s, 4, n), dtype=t),
        "tbs-BxSxHxD[-f16|-bf16]: transpose + batch_matmul + softmax (-f16/-bf16: half Q, K and result, "
        "f32 scores and softmax)",
    ),
    "softmax": (lambda s, n: softmax(*_dims(s, 2, n)), "softmax-MxN: softmax over N (max, exp, sum, divide)"),
    "lngelu": (
        lambda s, n: layernorm_gelu(*_dims(s, 2, n)),
        "lngelu-MxN: LayerNorm over N (gamma, beta, eps 1e-5) + GELU (tanh approximation)",
    ),
    "layernorm": (lambda s, n: layernorm_gelu(*_dims(s, 2, n), gelu=False),
                  "layernorm-MxN: LayerNorm over N (gamma, beta, eps 1e-5)"),
    "rmsnorm": (lambda s, n: rmsnorm(*_dims(s, 2, n)), "rmsnorm-MxN: RMSNorm over N (gamma, eps 1e-6)"),
    "logsoftmax": (lambda s, n: log_softmax(*_dims(s, 2, n)), "logsoftmax-MxN: log-softmax over N"),
    "rowsum": (lambda s, n: row_sum(*_dims(s, 2, n)), "rowsum-MxN: the sum of each row of X [M,N]"),
    "colsum": (lambda s, n: col_sum(*_dims(s, 2, n)), "colsum-MxN: the sum of each column of X [M,N]"),
    # several GPU kernels as one task (docs/gpu.md, rule 4)
    "attention": (lambda s, n: attention(*_dims(s, 3, n)),
                  "attention-SxKxD: softmax(Q [S,D] @ K [D,K]) @ V [K,D] (scores, softmax over the keys, times V)"),
    "conv_relu_pool": (lambda s, n: conv_relu_pool(*_conv_dims(s, 8, n)),
                       "conv_relu_pool-NxHxWxCIxCOxKxSxP: conv2d NHWC + ReLU, summed over H, W (a pool's sum)"),
    "matmul_rowsum": (lambda s, n: matmul_rowsum(*_dims(s, 3, n)), "matmul_rowsum-MxNxK: row sums of A @ B"),
    "matmul_sumall": (lambda s, n: matmul_sumall(*_dims(s, 3, n)), "matmul_sumall-MxNxK: the sum of all of A @ B"),
    "two_matmuls": (lambda s, n: two_matmuls(*_dims(s, 3, n)),
                    "two_matmuls-MxNxK: (X @ W1) * (X @ W2), two matmuls of one input"),
}

def _resource(name: str, values: np.ndarray) -> str:
    """A `dialect_resources` blob entry: 4-byte alignment header + little-endian f32 data."""
    return f'      {name}: "0x04000000{np.ascontiguousarray(values, dtype="<f4").tobytes().hex().upper()}"'


def mlp(batch: int, width: int, depth: int, seed: int = 0) -> str:
    """A small network with embedded weights: `depth` layers of relu(x @ W_i + b_i), every second
    layer adding its input back (a residual). Weights are `dense_resource` constants (seeded), so
    the function takes only the input -- the shape of an imported model, for task extraction."""
    rng = np.random.default_rng(seed)
    t, w, v = _t([batch, width]), _t([width, width]), _t([width])
    body = [f"func.func @mlp(%x: {t}) -> {t} {{",
            "  %zero = arith.constant 0.0 : f32",
            f"  %e = tensor.empty() : {t}"]
    blobs = []
    cur = "%x"
    for i in range(depth):
        blobs.append(_resource(f"w{i}", rng.standard_normal((width, width)) / np.sqrt(width)))
        blobs.append(_resource(f"b{i}", 0.1 * rng.standard_normal(width)))
        body += [f"  %w{i} = arith.constant dense_resource<w{i}> : {w}",
                 f"  %b{i} = arith.constant dense_resource<b{i}> : {v}",
                 f"  %z{i} = linalg.fill ins(%zero : f32) outs(%e : {t}) -> {t}",
                 f"  %m{i} = linalg.matmul ins({cur}, %w{i} : {t}, {w}) outs(%z{i} : {t}) -> {t}"]
        res = i % 2 == 1
        ins = f"%m{i}, %b{i}" + (f", {cur}" if res else "")
        tys = f"{t}, {v}" + (f", {t}" if res else "")
        maps = "#id, #row, " + ("#id, " if res else "") + "#id"
        args = "%a: f32, %c: f32, " + ("%r: f32, " if res else "") + "%o: f32"
        add = "    %s0 = arith.addf %a, %c : f32\n" + ("    %s1 = arith.addf %s0, %r : f32\n" if res else "")
        last = "%s1" if res else "%s0"
        body += [f"  %y{i} = linalg.generic {{indexing_maps = [{maps}], iterator_types = [\"parallel\", \"parallel\"]}}",
                 f"      ins({ins} : {tys}) outs(%e : {t}) {{",
                 f"  ^bb0({args}):",
                 add.rstrip("\n"),
                 f"    %q = arith.maximumf {last}, %zero : f32",
                 "    linalg.yield %q : f32",
                 f"  }} -> {t}"]
        cur = f"%y{i}"
    body += [f"  return {cur} : {t}", "}"]
    head = "#id = affine_map<(i, j) -> (i, j)>\n#row = affine_map<(i, j) -> (j)>\n"
    return head + "\n".join(body) + "\n{-#\n  dialect_resources: {\n    builtin: {\n" + ",\n".join(blobs) + \
        "\n    }\n  }\n#-}\n"


#: Ansor's single-op suite and subgraphs (harness shapes), in the order of the paper's Fig. 6.
_SUITE: dict[str, str] = {
    "c1d-1x256x64x128x3x2x1": "Ansor C1D conv1d NLC (1,256,64,128,3,2,1)",
    "c1d-1x128x128x256x1x2x0": "Ansor C1D conv1d NLC (1,128,128,256,1,2,0)",
    "c2d-1x224x224x3x64x7x2x3": "Ansor C2D conv2d NHWC (1,224,224,3,64,7,2,3)",
    "c2d-1x56x56x64x64x1x1x0": "Ansor C2D conv2d NHWC (1,56,56,64,64,1,1,0)",
    "c3d-1x16x224x224x3x64x7x2x3": "Ansor C3D conv3d NDHWC (1,16,224,224,3,64,7,2,3)",
    "c3d-1x16x56x56x64x64x1x1x0": "Ansor C3D conv3d NDHWC (1,16,56,56,64,64,1,1,0)",
    "gmm-1x128x128x128": "Ansor GMM batch_matmul (1,128,128,128)",
    "gmm-1x512x32x512": "Ansor GMM batch_matmul (1,512,32,512)",
    "grp-1x56x56x64x128x3x2x1": "Ansor GRP group conv2d NHWC, 4 groups (1,56,56,64,128,3,2,1)",
    "grp-1x56x56x64x64x1x1x0": "Ansor GRP group conv2d NHWC, 4 groups (1,56,56,64,64,1,1,0)",
    "dil-1x224x224x3x64x7x2x3": "Ansor DIL conv2d NHWC, dilation 2 (1,224,224,3,64,7,2,3)",
    "dil-1x56x56x64x64x1x1x0": "Ansor DIL conv2d NHWC, dilation 2 (1,56,56,64,64,1,1,0)",
    "dep-1x112x112x32x3x1x1": "Ansor DEP depthwise conv2d NHWC (1,112,112,32,3,1,1)",
    "dep-1x112x112x64x3x2x1": "Ansor DEP depthwise conv2d NHWC (1,112,112,64,3,2,1)",
    "t2d-1x4x4x512x256x4x2x1": "Ansor T2D transposed conv2d NHWC (1,4,4,512,256,4,2,1)",
    "t2d-1x8x8x256x128x4x2x1": "Ansor T2D transposed conv2d NHWC (1,8,8,256,128,4,2,1)",
    "cap-1x16x16x32x32x3x2x1": "Ansor CAP capsule conv2d (1,16,16,32,32,3,2,1)",
    "cap-1x8x8x32x32x3x1x1": "Ansor CAP capsule conv2d (1,8,8,32,32,3,1,1)",
    "nrm-1x256x256": "Ansor NRM norm over M,N (1,256,256)",
    "nrm-1x512x512": "Ansor NRM norm over M,N (1,512,512)",
    "convlayer-1x56x56x64x128x3x2x1": "Ansor ConvLayer conv2d + bn + relu (1,56,56,64,128,3,2,1)",
    "tbs-1x128x12x64": "Ansor TBS subgraph transpose + batch_matmul + softmax (1,128,12,64)",
}

#: Named instances listed by `ansor workloads`.
BUILTIN: dict[str, str] = {
    "matmul-1024": "matmul 1024x1024x1024 fp32 (the default)",
    "matmul-512": "matmul 512x512x512 fp32",
    "matmul_nt-512": "matmul 512^3 with B transposed, as linalg.generic",
    "mlp-64x256x4": "toy network: 4 dense layers 64x256 with residuals, weights embedded",
    "lngelu-4096x1024": "LayerNorm + GELU (4096, 1024) fp32, a fused subgraph (GPU benchmark)",
    "colsum-97x197": "column sums of a 97x197 matrix (a reduction over the outer dim)",
    "attention-16x33x8": "attention: softmax(QK^T) V over 33 keys, a task of two GPU kernels",
    "conv_relu_pool-1x10x10x8x16x3x1x0": "3x3 conv2d + ReLU + a global pool's sum, a task of two GPU kernels",
    "matmul_rowsum-33x65x17": "matmul + a row sum of its result, a task of two GPU kernels",
    "matmul_sumall-33x65x17": "matmul summed to one value, a task of two GPU kernels",
    "two_matmuls-8x24x16": "two matmuls of one input multiplied element-wise, a task of two GPU kernels",
    **_SUITE,
}


#: Families that take an element-type suffix (`matmul-4096-f16`) and the suffixes they take.
_TYPED: dict[str, tuple[str, ...]] = {"matmul": ("f16", "bf16"), "mmgelu": ("f16", "bf16"), "gmm": ("f16", "bf16"),
                                      "c2d": ("f16", "bf16"), "tbs": ("f16", "bf16")}


def suite() -> list[str]:
    """Names of Ansor's single-op benchmark suite and subgraph instances, in paper order."""
    return list(_SUITE)


def get(name: str) -> str:
    """MLIR text of the workload `name`; raises KeyError with a one-line message when unknown."""
    m = re.fullmatch(r"([a-z][a-z0-9_]*)-([0-9x]+)(?:-([a-z0-9]+))?", name)
    if not m or m.group(1) not in _FAMILIES:
        families = ", ".join(_FAMILIES)
        raise KeyError(f"unknown workload '{name}' (families: {families}; see `ansor workloads`)")
    builder, desc = _FAMILIES[m.group(1)]
    extra: tuple[str, ...] = ()
    if m.group(3):
        if m.group(1) not in _TYPED or m.group(3) not in _TYPED[m.group(1)]:
            kinds = ", ".join(f"{f}: {'/'.join(t)}" for f, t in _TYPED.items())
            raise KeyError(f"workload '{name}': no element-type suffix -{m.group(3)} for {m.group(1)} ({kinds})")
        extra = (m.group(3),)
    try:
        return builder(m.group(2), name, *extra)
    except ValueError as exc:
        raise KeyError(f"workload '{name}': {exc} ({desc})") from None


def describe() -> list[tuple[str, str]]:
    """(name, one-line description) of every built-in instance, sorted by name."""
    return sorted(BUILTIN.items())

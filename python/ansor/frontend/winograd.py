"""Winograd convolution: 3x3 stride-1 channels-last convolutions with constant weights as F(m x m, 3 x 3).

    linalg.conv_2d_nhwc_hwcf(x [N, H+2, W+2, C], g [3, 3, C, K] constant) + init
      --> V = input transform: one all-parallel generic over (n, th, tw, c) reading the A*A strided
              windows x[n, m th + i, m tw + j, c] and writing V[a, b] = (BT d B)[a, b] as A*A results
              into the slices of V [A, A, N, TH, TW, C] (explicit adds, zeros skipped)
          M = batch_matmul(V as [A*A, N*TH*TW, C], U [A*A, C, K])     U = G g G^T, computed here (numpy)
          Y = output transform: one all-parallel generic over (n, th, tw, k) reading the A*A pieces
              M[a, b] and writing Y[n, th, p, tw, q, k] = (AT M A)[p, q] as m*m results into the
              interleaved slices of Y [N, TH, m, TW, m, K] (explicit adds, zeros skipped)
          y = collapse(Y) [N, TH*m, TW*m, K], cropped to [N, H, W, K] (+ init, unless it is a zero fill)

Lavin & Gray's minimal filtering (A = m + 2 points per tile): F(2x2, 3x3) does 16 multiplications per
2x2 output tile and channel pair where direct convolution does 36, F(4x4, 3x3) 36 where direct does
144. The filter transform is done once here on the weight blob, so the network carries U instead of
g. The ops partition into three tasks (`ansor-partition`): the input transform (with the pad and its
windows; the slice stores keep V's pieces in place), the batched matmul, and the output transform
(with the convolution's element-wise consumers: bias, batch norm, ReLU, residual add), each tuned
like any other task.

The tile t <= m is chosen per convolution (`choose_tile`); where it does not divide the output size,
the last tiles overhang it (x is padded with zeros past its end, the result cropped; the crop stays
in the output transform's task, so the consumers fuse behind it).
F(4x4, 3x3) is less accurate in fp32 (coefficients up to 8 and 1/24: ~1e-5
relative here against ~1e-6 for F(2x2)).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from fractions import Fraction

import numpy as np
from mlir import ir

#: (BT, G, AT) of F(m x m, 3 x 3), exact fractions (Lavin & Gray 2016, interpolation points 0, +-1, +-2, inf).
_MATRICES: dict[int, tuple[list[list[Fraction]], list[list[Fraction]], list[list[Fraction]]]] = {}


def _f(rows: list[list[object]]) -> list[list[Fraction]]:
    return [[Fraction(str(v)) for v in r] for r in rows]


_MATRICES[2] = (
    _f([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]),
    _f([[1, 0, 0], ["1/2", "1/2", "1/2"], ["1/2", "-1/2", "1/2"], [0, 0, 1]]),
    _f([[1, 1, 1, 0], [0, 1, -1, -1]]),
)
_MATRICES[4] = (
    _f([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
        [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]),
    _f([["1/4", 0, 0], ["-1/6", "-1/6", "-1/6"], ["-1/6", "1/6", "-1/6"],
        ["1/24", "1/12", "1/6"], ["1/24", "-1/12", "1/6"], [0, 0, 1]]),
    _f([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]),
)


def matrices(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(BT [A, A], G [A, 3], AT [m, A]) of F(m x m, 3 x 3) as float64 arrays, A = m + 2."""
    if m not in _MATRICES:
        raise ValueError(f"winograd: F({m}x{m}, 3x3) is not supported (m must be one of {sorted(_MATRICES)})")
    return tuple(np.array([[float(v) for v in r] for r in mat]) for mat in _MATRICES[m])  # type: ignore[return-value]


def filter_transform(g: np.ndarray, m: int) -> np.ndarray:
    """U [A*A, C, K] (float32) of an HWCF filter g [3, 3, C, K]: U[a, b] = sum_ij G[a, i] g[i, j] G[b, j]."""
    _, gm, _ = matrices(m)
    u = np.einsum("ai,ijck,bj->abck", gm, g.astype(np.float64), gm)
    a = m + 2
    return np.ascontiguousarray(u.reshape(a * a, g.shape[2], g.shape[3]).astype(np.float32))


def reference(x: np.ndarray, g: np.ndarray, m: int) -> np.ndarray:
    """Winograd convolution in numpy (float64), the algorithm `rewrite` emits; x NHWC (padded), g HWCF."""
    bt, gm, at = matrices(m)
    a = m + 2
    n, hp, wp, c = x.shape
    th, tw = -(-(hp - 2) // m), -(-(wp - 2) // m)  # overhanging tiles read zeros past x's end
    x = np.pad(x, ((0, 0), (0, th * m + 2 - hp), (0, tw * m + 2 - wp), (0, 0)))
    u = np.einsum("ai,ijck,bj->abck", gm, g.astype(np.float64), gm)
    tiles = np.empty((n, th, tw, a, a, c))
    for i in range(th):
        for j in range(tw):
            tiles[:, i, j] = x[:, m * i:m * i + a, m * j:m * j + a, :]
    v = np.einsum("ai,ntsijc,bj->abntsc", bt, tiles, bt)
    mm = np.einsum("abntsc,abck->abntsk", v, u)
    y = np.einsum("pa,abntsk,qb->ntpsqk", at, mm, at)
    return y.reshape(n, th * m, tw * m, -1)[:, :hp - 2, :wp - 2]


class _Emitter:
    """SSA lines of a linalg body computing small constant linear maps (exact zeros skipped, +-1 as add/sub)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.consts: dict[float, str] = {}
        self.count = 0

    def _new(self) -> str:
        self.count += 1
        return f"%t{self.count}"

    def const(self, v: float) -> str:
        if v not in self.consts:
            name = f"%k{len(self.consts)}"
            self.consts[v] = name
            self.lines.append(f"      {name} = arith.constant {float(v)!r} : f32")
        return self.consts[v]

    def combine(self, coeffs: list[float], values: list[str]) -> str:
        acc: str | None = None
        for coef, val in zip(coeffs, values, strict=True):
            if coef == 0:
                continue
            if coef in (1, -1):
                term, neg = val, coef < 0
            else:
                term, neg = self._new(), coef < 0
                self.lines.append(f"      {term} = arith.mulf {val}, {self.const(abs(coef))} : f32")
            if acc is None and not neg:
                acc = term
                continue
            out = self._new()
            if acc is None:
                self.lines.append(f"      {out} = arith.negf {term} : f32")
            else:
                self.lines.append(f"      {out} = arith.{'subf' if neg else 'addf'} {acc}, {term} : f32")
            acc = out
        if acc is None:
            acc = self.const(0.0)
        return acc


def _views(src: str, src_t: str, piece_t: str, a: int, offsets: Callable[[int, int], str], sizes: str,
           strides: str) -> tuple[list[str], list[str]]:
    """(lines, names) of the A*A views `src[offsets(i, j)] [sizes] [strides]` (row-major in i, j) that a
    transform reads as its tiles' points."""
    names = [f"{src}_{i}_{j}" for i in range(a) for j in range(a)]
    lines = [f"    {names[i * a + j]} = tensor.extract_slice {src}[{offsets(i, j)}] [{sizes}] [{strides}] "
             f": {src_t} to {piece_t}" for i in range(a) for j in range(a)]
    return lines, names


def _tile_transform(mat: np.ndarray, reads: list[str], piece_t: str, dest: str, dest_t: str,
                    offsets: list[str], sizes: str) -> list[str]:
    """Lines computing mat D mat^T for every tile's A*A points D: one all-parallel generic over the
    tile grid (identity maps over `piece_t`) reading the A*A views `reads` (row-major) and writing
    r*r results (r = rows of `mat`; explicit adds, zeros skipped), each into its slice of a fresh
    `dest` (`offsets[k]`, `sizes`, unit strides: extract_slice outs, insert_slice back, in place after
    bufferization; `ansor-partition` keeps the slices in the transform's task); the last insert
    defines `dest`."""
    a, r = mat.shape[1], mat.shape[0]
    em = _Emitter()
    d = [[f"%d{i}_{j}" for j in range(a)] for i in range(a)]
    rows = [[em.combine(list(mat[p]), [d[i][j] for i in range(a)]) for j in range(a)] for p in range(r)]  # mat D
    outs = [em.combine(list(mat[q]), rows[p]) for p in range(r) for q in range(r)]  # (mat D) mat^T
    maps = ", ".join(["affine_map<(n, h, w, c) -> (n, h, w, c)>"] * (a * a + r * r))
    args = ", ".join([f"{d[i][j]}: f32" for i in range(a) for j in range(a)] + [f"%o{k}: f32" for k in range(r * r)])
    ones = ", ".join(["1"] * len(offsets[0].split(",")))
    lines = [f"    {dest}0 = tensor.empty() : {dest_t}"]
    lines += [f"    {dest}e{k} = tensor.extract_slice {dest}0[{off}] [{sizes}] [{ones}] : {dest_t} to {piece_t}"
              for k, off in enumerate(offsets)]
    lines.append(f"    {dest}s:{r * r} = linalg.generic {{indexing_maps = [{maps}],")
    lines.append('        iterator_types = ["parallel", "parallel", "parallel", "parallel"]}')
    lines.append(f"        ins({', '.join(reads)} : {', '.join([piece_t] * (a * a))})")
    lines.append(f"        outs({', '.join(f'{dest}e{k}' for k in range(r * r))} : {', '.join([piece_t] * (r * r))}) {{")
    lines.append(f"    ^bb0({args}):")
    lines += em.lines
    lines.append(f"      linalg.yield {', '.join(outs)} : {', '.join(['f32'] * (r * r))}")
    lines.append(f"    }} -> ({', '.join([piece_t] * (r * r))})")
    prev = f"{dest}0"
    for k, off in enumerate(offsets):
        nxt = f"{dest}i{k}" if k < r * r - 1 else dest
        lines.append(f"    {nxt} = tensor.insert_slice {dest}s#{k} into {prev}[{off}] [{sizes}] [{ones}] "
                     f": {piece_t} into {dest_t}")
        prev = nxt
    return lines


def _input_transform(m: int, x: str, x_t: str, n: int, th: int, tw: int, c: int) -> str:
    """V = BT d B for every tile and channel (`_tile_transform` over (n, th, tw, c)): the A*A points of
    each tile are strided windows of the padded `x` (plain loads for the vectorizer: constant offsets
    in an indexing map are not; `ansor-partition` keeps them in the task), the A*A results go into
    the slices V[a, b] of %v [A, A, N, TH, TW, C]."""
    bt, _, _ = matrices(m)
    a = m + 2
    vo_t = f"tensor<{n}x{th}x{tw}x{c}xf32>"
    lines, reads = _views(x, x_t, vo_t, a, lambda i, j: f"0, {i}, {j}, 0", f"{n}, {th}, {tw}, {c}", f"1, {m}, {m}, 1")
    lines += _tile_transform(bt, reads, vo_t, "%v", f"tensor<{a}x{a}x{n}x{th}x{tw}x{c}xf32>",
                             [f"{q // a}, {q % a}, 0, 0, 0, 0" for q in range(a * a)], f"1, 1, {n}, {th}, {tw}, {c}")
    return "\n".join(lines)


def _output_transform(m: int, n: int, th: int, tw: int, k: int) -> str:
    """Y = AT M A for every tile and channel (`_tile_transform` over (n, th, tw, k)): the A*A pieces
    M[a, b] of %m6 [A, A, N, TH, TW, K] in (contiguous views, kept in the task), the m*m results into
    the interleaved slices of %y6 [N, TH, m, TW, m, K] (180 operations per tile and channel for
    F(4x4) where a dense sum over AT x AT [m, m, A, A] does 576 multiply-adds)."""
    _, _, at = matrices(m)
    a = m + 2
    mo_t = f"tensor<{n}x{th}x{tw}x{k}xf32>"
    lines, reads = _views("%m6", f"tensor<{a}x{a}x{n}x{th}x{tw}x{k}xf32>", mo_t, a, lambda i, j: f"{i}, {j}, 0, 0, 0, 0",
                          f"1, 1, {n}, {th}, {tw}, {k}", "1, 1, 1, 1, 1, 1")
    lines += _tile_transform(at, reads, mo_t, "%y6", f"tensor<{n}x{th}x{m}x{tw}x{m}x{k}xf32>",
                             [f"0, 0, {q // m}, 0, {q % m}, 0" for q in range(m * m)], f"{n}, {th}, 1, {tw}, 1, {k}")
    return "\n".join(lines)


def _helper(name: str, n: int, hp: int, wp: int, c: int, k: int, m: int, add_init: bool) -> str:
    """A private function computing the convolution by F(m x m, 3 x 3) (module text). Where m does not
    divide the output size the tiles overhang it: x gets zeros past its end (a second `tensor.pad`,
    fused with the first into the input transform's task) and the result is cropped (a slice that
    `ansor-partition` keeps in the output transform's task, with the consumers after it)."""
    a = m + 2
    h, w = hp - 2, wp - 2
    th, tw = -(-h // m), -(-w // m)
    t = n * th * tw
    x_t = f"tensor<{n}x{hp}x{wp}x{c}xf32>"
    xo_t = f"tensor<{n}x{th * m + 2}x{tw * m + 2}x{c}xf32>"
    v_t = f"tensor<{a}x{a}x{n}x{th}x{tw}x{c}xf32>"
    m_t = f"tensor<{a * a}x{t}x{k}xf32>"
    y6_t = f"tensor<{n}x{th}x{m}x{tw}x{m}x{k}xf32>"
    yo_t = f"tensor<{n}x{th * m}x{tw * m}x{k}xf32>"
    y_t = f"tensor<{n}x{h}x{w}x{k}xf32>"
    overhang = (th * m, tw * m) != (h, w)
    head = crop = ""
    if overhang:
        head = f"""
    %xo = tensor.pad %x low[0, 0, 0, 0] high[0, {th * m - h}, {tw * m - w}, 0] {{
    ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
      tensor.yield %zero : f32
    }} : {x_t} to {xo_t}"""
        crop = f"""
    %y = tensor.extract_slice %yo[0, 0, 0, 0] [{n}, {h}, {w}, {k}] [1, 1, 1, 1] : {yo_t} to {y_t}"""
    tail = ""
    ret = "%y"
    if add_init:
        tail = f"""
    %ye = tensor.empty() : {y_t}
    %r = linalg.generic {{indexing_maps = [#id4, #id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}}
        ins(%y, %init : {y_t}, {y_t}) outs(%ye : {y_t}) {{
    ^bb0(%p: f32, %q: f32, %o: f32):
      %s = arith.addf %p, %q : f32
      linalg.yield %s : f32
    }} -> {y_t}"""
        ret = "%r"
    return f"""
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
module {{
  func.func private @{name}(%x: {x_t}, %u: tensor<{a * a}x{c}x{k}xf32>, %init: {y_t}) -> {y_t} {{
    %zero = arith.constant 0.0 : f32
{head}
{_input_transform(m, "%xo" if overhang else "%x", xo_t, n, th, tw, c)}
    %v3 = tensor.collapse_shape %v [[0, 1], [2, 3, 4], [5]] : {v_t} into tensor<{a * a}x{t}x{c}xf32>
    %me = tensor.empty() : {m_t}
    %m0 = linalg.fill ins(%zero : f32) outs(%me : {m_t}) -> {m_t}
    %mm = linalg.batch_matmul ins(%v3, %u : tensor<{a * a}x{t}x{c}xf32>, tensor<{a * a}x{c}x{k}xf32>)
        outs(%m0 : {m_t}) -> {m_t}
    %m6 = tensor.expand_shape %mm [[0, 1], [2, 3, 4], [5]] output_shape [{a}, {a}, {n}, {th}, {tw}, {k}]
        : {m_t} into tensor<{a}x{a}x{n}x{th}x{tw}x{k}xf32>
{_output_transform(m, n, th, tw, k)}
    %{"yo" if overhang else "y"} = tensor.collapse_shape %y6 [[0], [1, 2], [3, 4], [5]] : {y6_t} into {yo_t}{crop}{tail}
    return {ret} : {y_t}
  }}
}}
"""


def _ints(attr: ir.Attribute) -> list[int]:
    d = ir.DenseIntElementsAttr(attr)
    return [int(d[i]) for i in range(len(d))]


def _is_zero_fill(value: ir.Value) -> bool:
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "linalg.fill":
        return False
    src = owner.operation.operands[0].owner
    if isinstance(src, ir.Block) or src.operation.name != "arith.constant":
        return False
    return re.fullmatch(r"(-?0\.0+e\+00|0\.0+|0) : f32", str(src.operation.attributes["value"])) is not None


def choose_tile(n: int, h: int, w: int, m: int, *, min_tiles: int = 16) -> int:
    """The t of F(t x t, 3 x 3) for an output [n, h, w]: the largest supported t <= `m` that still gives
    the batched matmul `min_tiles` rows (tiles), else the smallest. Tiles may overhang the output:
    F(4x4) on 14x14 computes 16x16 (1.31x the points) and still does 2.3x fewer multiplications than
    F(2x2) on 14x14; on 7x7 it would give 4 rows, each product then reads a whole [C, K] slice of U
    for 4 rows (memory-bound), so F(2x2)'s 16 rows win there."""
    fits = [t for t in sorted(_MATRICES, reverse=True) if t <= m]
    if not fits:
        raise ValueError(f"winograd: no F(t x t, 3x3) with t <= {m} (supported: {sorted(_MATRICES)})")
    return next((t for t in fits if n * -(-h // t) * -(-w // t) >= min_tiles), fits[-1])


def rewrite(module: ir.Module, weights: Callable[[ir.Value], np.ndarray | None], *, m: int = 2,
            min_channels: int = 16) -> int:
    """Rewrite eligible `linalg.conv_2d_nhwc_hwcf` ops of `module` as Winograd convolutions (see the module
    docstring); `weights(v)` gives the HWCF array of a constant filter value (None: not constant, skipped).
    Each convolution gets the tile `choose_tile` picks (`m=4` on ResNet-18: F(4x4) at 56, 28 and 14, the
    14x14 tiles overhanging to 16x16; F(2x2) at 7x7, overhanging to 8x8). Convolutions with fewer than
    `min_channels` input or output channels are left alone (the stem: its transforms would cost more
    than they save). Returns the number rewritten; `inline` then splices them."""
    from ansor.frontend.torch_import import _all_ops

    matrices(m)  # validates m
    convs = [op for op in _all_ops(module.operation) if op.name == "linalg.conv_2d_nhwc_hwcf"]
    helpers: set[str] = set()
    done = 0
    for op in convs:
        if _ints(op.attributes["strides"]) != [1, 1] or _ints(op.attributes["dilations"]) != [1, 1]:
            continue
        x, w = op.operands[0], op.operands[1]
        init = op.operands[2]
        types = [ir.RankedTensorType(v.type) if isinstance(v.type, ir.RankedTensorType) else None for v in (x, w, init)]
        if any(t is None or not t.has_static_shape or str(t.element_type) != "f32" for t in types):
            continue
        (n, hp, wp, c), (kh, kw, _, k), (_, h, wd, _) = (list(t.shape) for t in types)  # type: ignore[union-attr]
        if (kh, kw) != (3, 3) or min(c, k) < min_channels:
            continue
        g = weights(w)
        if g is None or g.shape != (3, 3, c, k):
            continue
        tile = choose_tile(n, h, wd, m)
        add_init = not _is_zero_fill(init)
        name = f"ansor_winograd_f{tile}_{n}x{hp}x{wp}x{c}x{k}" + ("_init" if add_init else "")
        if name not in helpers:
            helper = ir.Module.parse(_helper(name, n, hp, wp, c, k, tile, add_init))
            with ir.InsertionPoint(module.body):
                for f in helper.body.operations:
                    f.operation.clone()
            helpers.add(name)
        u = filter_transform(g, tile)
        utype = ir.RankedTensorType.get(list(u.shape), ir.F32Type.get())
        with ir.InsertionPoint(op), op.location:
            attr = ir.DenseResourceElementsAttr.get_from_buffer(u, f"ansor_winograd_u{done}", utype)
            cst = ir.Operation.create("arith.constant", results=[utype], attributes={"value": attr})
            call = ir.Operation.create("func.call", results=[op.results[0].type],
                                       operands=[x, cst.results[0], init],
                                       attributes={"callee": ir.FlatSymbolRefAttr.get(name)})
        op.results[0].replace_all_uses_with(call.results[0])
        op.erase()
        done += 1
    return done

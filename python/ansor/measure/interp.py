"""A numpy interpreter for the tasks BLAS can anchor: named contractions (`linalg.matmul`,
`linalg.batch_matmul`, ...) on zero fills, followed by element-wise `linalg.generic`s.

    SearchTask.ir --parse--> func body --evaluate op by op (numpy; the matmul through BLAS)--> outputs

It reads the task's own IR (indexing maps, scalar bodies), not anything a schedule or a sketch
derived from it, so a GPU kernel that fuses a GEMM with its epilogue is checked against a reference
that shares none of its code, in seconds instead of the minutes the untransformed program's CPU
loops take at 4096^3. Values keep their IR element types (an f16 value is an f16 array, so each
`arith.truncf` rounds where the program rounds); a contraction sums in its result type, in BLAS.
Anything else (reductions in generics, windows, tensor ops) returns None: the caller falls back.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: Element-wise scalar ops -> numpy (on arrays of the op's own element type).
_BINARY = {
    "arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply, "arith.divf": np.divide,
    "arith.maximumf": np.maximum, "arith.minimumf": np.minimum, "arith.maxnumf": np.fmax,
    "arith.minnumf": np.fmin, "math.powf": np.power,
}
_UNARY = {
    "arith.negf": np.negative, "math.exp": np.exp, "math.tanh": np.tanh, "math.sqrt": np.sqrt,
    "math.rsqrt": lambda x: 1 / np.sqrt(x), "math.log": np.log, "math.absf": np.abs,
}
_CMPF_OPS = ("arith.cmpf",)
#: arith.cmpf's predicate enum, by value.
_CMPF_NAMES = ("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult", "ule", "une",
               "uno", "true")
_CMPF = {"oeq": np.equal, "ogt": np.greater, "oge": np.greater_equal, "olt": np.less, "ole": np.less_equal,
         "one": np.not_equal, "ugt": np.greater, "uge": np.greater_equal, "ult": np.less, "ule": np.less_equal}


#: The scalar ops a generic's body may hold.
_SCALAR_OPS = {*_BINARY, *_UNARY, *_CMPF_OPS, "math.erf", "arith.extf", "arith.truncf", "arith.select",
               "arith.constant", "linalg.yield"}


def _erf(x: np.ndarray) -> np.ndarray:
    """erf in float64 by Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7, below f32's rounding
    of values near 1), without scipy."""
    x64 = np.asarray(x, np.float64)
    a = np.abs(x64)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))) \
        * np.exp(-a * a)
    return (np.sign(x64) * y).astype(np.asarray(x).dtype)


def _np_type(t) -> np.dtype:
    from ansor.core.dtypes import numpy_dtype, numpy_dtype_name

    return numpy_dtype(numpy_dtype_name(str(t)))


class _Unsupported(Exception):
    pass


def numpy_program(text: str, *, anchored: bool = True) -> Callable[..., list[np.ndarray]] | None:
    """A callable computing the one public function of `text` in numpy, or None when the function
    holds an op this interpreter does not model (or, `anchored`, holds no contraction: element-wise
    programs are cheap to run untransformed, and their math ops are where a numpy formula and the
    compiled approximations would differ most)."""
    from mlir import ir

    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        funcs = [op.operation for op in module.body.operations if op.operation.name == "func.func"]
        if len(funcs) != 1:
            return None
        body = list(funcs[0].regions[0].blocks[0].operations)
        supported = {"arith.constant", "tensor.empty", "linalg.fill", "linalg.generic", "func.return",
                     "linalg.matmul", "linalg.batch_matmul"}
        if any(op.name not in supported for op in body):
            return None
        if anchored and not any(op.name in ("linalg.matmul", "linalg.batch_matmul") for op in body):
            return None
        for op in body:
            if op.name == "linalg.generic":
                iters = [str(x) for x in ir.ArrayAttr(op.attributes["iterator_types"])]
                if any("parallel" not in it for it in iters):
                    return None
                if any(inner.name not in _SCALAR_OPS for inner in op.regions[0].blocks[0].operations):
                    return None
            if op.name == "arith.constant" and _is(op.results[0].type, ir.RankedTensorType):
                if not _is(op.attributes["value"], ir.DenseElementsAttr) or \
                        not ir.DenseElementsAttr(op.attributes["value"]).is_splat:
                    return None  # weights (dense_resource blobs): the caller's fallback
        ftype = ir.FunctionType(ir.TypeAttr(funcs[0].attributes["function_type"]).value)
        arg_types = [_np_type(ir.RankedTensorType(t).element_type) for t in ftype.inputs]

    def run(*arrays: np.ndarray) -> list[np.ndarray]:
        with ir.Context(), ir.Location.unknown():
            module = ir.Module.parse(text)
            func = next(op.operation for op in module.body.operations if op.operation.name == "func.func")
            env: dict = {}
            block = func.regions[0].blocks[0]
            for arg, a, dt in zip(block.arguments, arrays, arg_types, strict=True):
                env[arg] = np.asarray(a).astype(dt)
            for op in block.operations:
                if op.name == "func.return":
                    return [env[v] for v in op.operands]
                try:
                    _evaluate(op, env)
                except _Unsupported:
                    raise RuntimeError(f"numpy interpreter: cannot evaluate {op.name}") from None
        raise RuntimeError("numpy interpreter: no func.return")

    return run


def _evaluate(op, env: dict) -> None:
    from mlir import ir

    name = op.name
    if name == "arith.constant":
        attr = op.attributes["value"]
        rt = op.results[0].type
        if _is(rt, ir.RankedTensorType):
            t = ir.RankedTensorType(rt)
            dense = ir.DenseElementsAttr(attr)
            if not dense.is_splat:
                raise _Unsupported
            v = ir.FloatAttr(dense.get_splat_value()).value
            env[op.results[0]] = np.full(t.shape, v, _np_type(t.element_type))
        else:
            env[op.results[0]] = _scalar(attr, rt)
    elif name == "tensor.empty":
        t = ir.RankedTensorType(op.results[0].type)
        env[op.results[0]] = np.zeros(t.shape, _np_type(t.element_type))
    elif name == "linalg.fill":
        value, dest = env[op.operands[0]], env[op.operands[1]]
        env[op.results[0]] = np.full(dest.shape, value, dest.dtype)
    elif name in ("linalg.matmul", "linalg.batch_matmul"):
        maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
        letters = "abcdefghij"
        subs = []
        for m in maps:
            dims = []
            for r in m.results:
                d = r.maybe_downcast()
                if not isinstance(d, ir.AffineDimExpr):
                    raise _Unsupported
                dims.append(letters[d.position])
            subs.append("".join(dims))
        a, b, c = (env[v] for v in op.operands)
        spec = f"{subs[0]},{subs[1]}->{subs[2]}"
        acc = c.dtype if c.dtype.kind == "f" else np.dtype(np.float32)
        prod = np.einsum(spec, a.astype(acc), b.astype(acc), optimize=True)
        env[op.results[0]] = (c.astype(acc) + prod).astype(c.dtype)
    elif name == "linalg.generic":
        _generic(op, env)
    else:
        raise _Unsupported


def _scalar(attr, t) -> np.ndarray:
    from mlir import ir

    if _is(t, ir.IndexType):
        raise _Unsupported
    dt = _np_type(t) if not _is(t, ir.IntegerType) else np.dtype(f"int{ir.IntegerType(t).width}")
    if _is(attr, ir.FloatAttr):
        return np.asarray(ir.FloatAttr(attr).value, dtype=dt)
    if _is(attr, ir.IntegerAttr):
        return np.asarray(ir.IntegerAttr(attr).value, dtype=dt)
    raise _Unsupported


def _is(x, cls) -> bool:
    """Whether the type or attribute `x` is a `cls` (the bindings' casts raise ValueError)."""
    try:
        cls(x)
    except ValueError:
        return False
    return True


def _generic(op, env: dict) -> None:
    """An all-parallel generic: each operand viewed over the iteration space (its indexing map's
    dims, broadcast along the others), then the body evaluated on whole arrays."""
    from mlir import ir

    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    out_t = ir.RankedTensorType(op.results[0].type)
    rank = maps[-1].n_dims
    space = [0] * rank
    for m, v in zip(maps, op.operands, strict=True):
        for i, r in enumerate(m.results):
            d = r.maybe_downcast()
            if not isinstance(d, ir.AffineDimExpr):
                raise _Unsupported
            space[d.position] = ir.RankedTensorType(v.type).shape[i]
    views = []
    for m, v in zip(maps, op.operands, strict=True):
        dims = [r.maybe_downcast().position for r in m.results]
        a = env[v]
        order = sorted(range(len(dims)), key=lambda i: dims[i])
        a = np.transpose(a, order) if dims else a
        shape = [space[d] if d in dims else 1 for d in range(rank)]
        views.append(np.broadcast_to(a.reshape(shape), space))
    block = op.regions[0].blocks[0]
    local = dict(env)
    for arg, view in zip(block.arguments, views, strict=True):
        local[arg] = view
    for inner in block.operations:
        if inner.name == "linalg.yield":
            result = np.asarray(local[inner.operands[0]])
            env[op.results[0]] = np.broadcast_to(result, space).astype(_np_type(out_t.element_type))
            return
        _scalar_op(inner, local)
    raise _Unsupported


def _scalar_op(op, env: dict) -> None:
    from mlir import ir

    name = op.name
    ins = [env[v] for v in op.operands]
    rt = op.results[0].type if len(op.results) else None
    if name == "arith.constant":
        env[op.results[0]] = _scalar(op.attributes["value"], rt)
        return
    if name in _BINARY:
        out = _BINARY[name](ins[0], ins[1])
    elif name in _UNARY:
        out = _UNARY[name](ins[0])
    elif name == "math.erf":
        out = _erf(ins[0])
    elif name in ("arith.extf", "arith.truncf"):
        out = ins[0]
    elif name == "arith.select":
        out = np.where(ins[0], ins[1], ins[2])
    elif name == "arith.cmpf":
        key = _CMPF_NAMES[ir.IntegerAttr(op.attributes["predicate"]).value]
        if key not in _CMPF:
            raise _Unsupported
        env[op.results[0]] = _CMPF[key](ins[0], ins[1])
        return
    else:
        raise _Unsupported
    if _is(rt, ir.IntegerType):
        raise _Unsupported  # integer arithmetic in a float epilogue: not modelled
    dt = _np_type(rt)
    env[op.results[0]] = np.asarray(out).astype(dt)


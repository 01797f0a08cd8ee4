"""Lowering: a task's payload + a transform script -> a JIT-compiled native function.

    SearchTask.ir --apply transform script--> scheduled linalg/scf/vector on tensors
      --bufferize, auto-unroll, lower--> LLVM dialect --ExecutionEngine(O3)--> native code

This module runs inside worker processes (see `measure/measurer.py`): MLIR aborts the process on internal
assertion failures, so nothing here is called on untrusted schedules in the tuner process.
The same code builds the untuned program (no script), which is the baseline and the reference.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from mlir import ir
from mlir.dialects import linalg
from mlir.execution_engine import ExecutionEngine
from mlir.runtime.np_to_memref import (
    as_ctype,
    make_nd_memref_descriptor,
    make_zero_d_memref_descriptor,
)

from ansor.core import native as _native
from ansor.core.task import SearchTask
from ansor.core.mlir import BENCH_FUNC, LoweringError, add_bench_wrapper, apply_script, parse_payload, run_passes, walk


# Bufferize with writable outputs only: function arguments are inputs and must never be
# written in place (a kernel that updates its input would give a different answer per run).
_BUFFERIZE = (
    "one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},"
    "buffer-results-to-out-params{hoist-static-allocs modify-public-functions},"
    "canonicalize,cse,canonicalize,func.func(buffer-loop-hoisting)"
)
# Frees what the program allocates (pad buffers inside kernels, a model's intermediates that are
# not in its arena); without it every call leaked them (a 4-layer MLP: 264 KiB per call).
_DEALLOCATE = "buffer-deallocation-pipeline"


# On CPU `math.tanh` is expanded too, before `expand_exp`: `convert-math-to-libm` calls `tanhf`
# once per lane (GELU's tanh form on 256x1024: 3.4 ms, nearly all in `tanhf`). Upstream's expansion
# is sign(x) * (1 - exp(-2|x|)) / (1 + exp(-2|x|)), whose `math.exp` then becomes vector arithmetic.
_EXPAND_MATH_CPU = "math-expand-ops{ops=fpowi,tanh}"

# Upstream behaviour worked around here (1): without `full-unroll`, `convert-vector-to-scf` lowers
# n-D transfers through a `memref.alloca` placed inside the enclosing loop; LLVM never pops it,
# so a register tile read inside the reduction loop grows the stack every iteration and the
# kernel segfaults (seen with 64x4 register tiles on matmul-1024). Fully unrolled transfers need
# no temporary buffer.
# Upstream behaviour worked around here (2): `convert-scf-to-openmp` wraps each parallel body in a
# `memref.alloca_scope`, whose region must stay single-block; running `convert-scf-to-cf` before
# `finalize-memref-to-llvm` has inlined those scopes makes the verifier fail
# ("'memref.alloca_scope' op expects region #0 to have 0 or 1 blocks"). So memref lowering
# comes before scf->cf.
# `reassociate-fp-reductions`: a horizontal f32 sum (`vector.reduction <add>`: a row's sum in a
# softmax or a norm whose whole row is one vector) becomes a tree of vector adds instead of one
# scalar add per element in order -- 1.8-2x on rows of 197 (softmax, log-softmax; measured on this
# repository's 2-core AVX-512 VM). Within the verifier's tolerance: the order of a sum of n terms
# moves its rounding error by O(n) ulps at most, and a tree sums more accurately than a chain.
_TO_LLVM_CPU = (
    "convert-linalg-to-loops,convert-vector-to-scf{full-unroll=true},lower-affine,"
    "scf-forall-to-parallel,convert-scf-to-openmp,"
    "expand-strided-metadata,lower-affine,finalize-memref-to-llvm,convert-scf-to-cf,"
    "convert-vector-to-llvm{enable-x86vector reassociate-fp-reductions},convert-math-to-llvm,convert-math-to-libm,"
    "convert-openmp-to-llvm,convert-to-llvm,convert-ub-to-llvm,reconcile-unrealized-casts"
)


@functools.cache
def runtime_libs() -> tuple[str, ...]:
    """Shared libraries the JIT-ed code needs: MLIR C runner utils and an OpenMP runtime."""
    import mlir

    mlir_root = Path(list(mlir.__path__)[0])
    libs = [str(mlir_root / "lib" / "libmlir_c_runner_utils.so")]
    omp = _find_openmp()
    if omp:
        libs.append(omp)
    # Upstream behaviour worked around: the ExecutionEngine aborts the process (LLVM fatal error)
    # on a shared library that cannot be loaded. The GPU host's runtime bundle lacks
    # libmlir_c_runner_utils.so's dependency libmlir_apfloat_wrappers.so, and the CPU reference of
    # a GPU task is JIT-ed there: leave out what does not load (programs that call into it then
    # fail to JIT with an error, not an abort). Pinned by tests/test_lowering.py.
    return tuple(lib for lib in libs if _loadable(lib))


def _loadable(path: str) -> bool:
    try:
        ctypes.CDLL(path)
    except OSError as exc:
        import logging

        logging.getLogger(__name__).warning("JIT runtime library %s does not load (%s): left out", path, exc)
        return False
    return True


def _find_openmp() -> str | None:
    """The OpenMP runtime to JIT-link: `config.OPENMP_LIB`, else libiomp5/libomp beside Python
    (`intel-openmp` installs it in <prefix>/lib), in the `lib/` folder of a sys.path entry (where
    `pip install --target DIR` puts a wheel's data files: the GPU host's runtime folder), else the
    dynamic linker's. None when there is none."""
    import sys

    from ansor import config

    if config.OPENMP_LIB:
        return config.OPENMP_LIB
    dirs = [Path(prefix) / "lib" for prefix in dict.fromkeys((sys.prefix, sys.base_prefix))]
    dirs += [Path(entry) / "lib" for entry in sys.path if entry]
    for d in dirs:
        for name in ("libiomp5.so", "libomp.so"):
            if (d / name).is_file():
                return str(d / name)
    return ctypes.util.find_library("iomp5") or ctypes.util.find_library("omp")


def _contiguous(t: ir.Type) -> bool:
    layout = ir.MemRefType(t).layout
    if not isinstance(layout, ir.AffineMapAttr):
        return False  # strided<...>: a view into a larger buffer
    return layout.value == ir.AffineMap.get_identity(ir.MemRefType(t).rank)


def strided_copies_to_linalg(module: ir.Module) -> int:
    """Rewrite every `memref.copy` with a non-contiguous operand as `linalg.copy`; returns how many.

    Upstream behaviour worked around here: `finalize-memref-to-llvm` lowers a copy between
    strided views (a `tensor.pad` writing its source into the padded buffer, say) to a call of
    the runtime's generic `memrefCopy`, which walks element by element (~5x slower than the
    loops `linalg.copy` becomes, which LLVM vectorizes: a padded depthwise convolution spent
    80% of its time there). One-shot bufferization's `memcpy_op` option would do this, but
    the pass in MLIR 22 does not expose it. Contiguous copies stay `memref.copy` (a memcpy).
    """
    found: list[ir.Operation] = []

    def walk(op: ir.Operation) -> None:
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    child = child.operation
                    if child.name == "memref.copy":
                        if not all(_contiguous(v.type) for v in child.operands):
                            found.append(child)
                    else:
                        walk(child)

    walk(module.operation)
    for op in found:
        with ir.InsertionPoint(op), op.location:
            linalg.copy(op.operands[0], outs=[op.operands[1]])
        op.erase()
    return len(found)


#: Cephes' `expf`: exp(x) = 2^n * p(r), n = round(x / ln 2), r = x - n ln 2 (ln 2 in two parts
#: for exactness), p a degree-7 polynomial on |r| <= ln 2 / 2 (relative error ~1e-7).
#: The input is clamped to [-88, ln(FLT_MAX)]: at -88, n = -127 makes the scale's exponent field 0,
#: so the result is exactly 0 below ln(FLT_MIN)'s neighbourhood (libm's denormals there, < 1.2e-38).
_EXP_HI, _EXP_LO = 88.72283935546875, -88.0
#: 1.5 * 2^23: adding it rounds an f32 of magnitude < 2^22 to an integer held in the low mantissa bits.
_EXP_MAGIC = 12582912.0
_EXP_LN2_HI, _EXP_LN2_LO = 0.693359375, -2.12194440e-4
_EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)


def _f32_ops(module: ir.Module, name: str) -> list[ir.Operation]:
    """Every op `name` with an f32 (scalar or vector) result."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == name:
            t = op.results[0].type
            elem = ir.VectorType(t).element_type if t.typeid == ir.VectorType.static_typeid else t
            if elem.typeid == ir.F32Type.static_typeid:
                found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def _replace_f32_ops(module: ir.Module, name: str, build) -> int:
    """Replace every f32 op `name` by `build(operand, type)` (built at the op); returns how many."""
    found = _f32_ops(module, name)
    for op in found:
        x = op.operands[0]
        with ir.InsertionPoint(op), op.location:
            res = build(x, x.type)
        op.results[0].replace_all_uses_with(res)
        op.erase()
    return len(found)


def _f32_builders(t: ir.Type):
    """(i32 type of t's shape, float constant, int constant, mulf, addf) for f32 or vector<f32>
    values of type `t`, at the current insertion point; the arithmetic allows FMA contraction."""
    from mlir.dialects import arith

    f32, i32 = ir.F32Type.get(), ir.IntegerType.get_signless(32)
    fm = ir.Attribute.parse("#arith.fastmath<contract>")
    if t.typeid == ir.VectorType.static_typeid:
        it = ir.VectorType.get(ir.VectorType(t).shape, i32)

        def fc(v: float) -> ir.Value:
            return arith.constant(t, ir.DenseElementsAttr.get_splat(t, ir.FloatAttr.get(f32, v)))

        def ic(v: int) -> ir.Value:
            return arith.constant(it, ir.DenseElementsAttr.get_splat(it, ir.IntegerAttr.get(i32, v)))
    else:
        it = i32

        def fc(v: float) -> ir.Value:
            return arith.constant(f32, ir.FloatAttr.get(f32, v))

        def ic(v: int) -> ir.Value:
            return arith.constant(i32, ir.IntegerAttr.get(i32, v))

    def mul(a: ir.Value, b: ir.Value) -> ir.Value:
        return arith.mulf(a, b, fastmath=fm)

    def add(a: ir.Value, b: ir.Value) -> ir.Value:
        return arith.addf(a, b, fastmath=fm)

    return it, fc, ic, mul, add


#: erf: Abramowitz & Stegun 7.1.26 for |x| >= 0.5 (absolute error <= 1.5e-7):
#: 1 - t (a1 + t (a2 + ... a5)) exp(-x^2), t = 1 / (1 + p |x|); below 0.5 the Maclaurin series
#: (2 / sqrt(pi)) (x - x^3/3 + x^5/10 - x^7/42 + x^9/216 - x^11/1320), which keeps small inputs'
#: relative error small (the A&S form cancels there).
_ERF_P = 0.3275911
_ERF_A = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)  # a5 .. a1
_ERF_TAYLOR = (-1.0 / 1320, 1.0 / 216, -1.0 / 42, 1.0 / 10, -1.0 / 3, 1.0)  # x^11 .. x^1


def expand_erf(module: ir.Module) -> int:
    """Rewrite every f32 `math.erf` (scalar or vector) as arithmetic and one `math.exp`; returns
    how many. Run before `expand_exp`.

    Upstream behaviour worked around here, as for exp: LLVM lowers `math.erf` to one libm `erff`
    call per lane, so BERT's FFN matmul with its exact GELU, 0.5 x (1 + erf(x / sqrt 2)), spent
    about as long in `erff` as in the matmul.
    """
    from mlir.dialects import arith
    from mlir.dialects import math as math_d

    def build(x: ir.Value, t: ir.Type) -> ir.Value:
        _, fc, _, mul, add = _f32_builders(t)
        ax = math_d.absf(x)
        tt = arith.divf(fc(1.0), add(mul(ax, fc(_ERF_P)), fc(1.0)))
        p = fc(_ERF_A[0])
        for coef in _ERF_A[1:]:
            p = add(mul(p, tt), fc(coef))
        e = math_d.exp(arith.negf(mul(ax, ax)))
        big = math_d.copysign(add(fc(1.0), arith.negf(mul(mul(p, tt), e))), x)
        x2 = mul(x, x)
        q = fc(_ERF_TAYLOR[0])
        for coef in _ERF_TAYLOR[1:]:
            q = add(mul(q, x2), fc(coef))
        small = mul(mul(q, x), fc(1.1283791670955126))
        return arith.select(arith.cmpf(arith.CmpFPredicate.OLT, ax, fc(0.5)), small, big)

    return _replace_f32_ops(module, "math.erf", build)


def expand_exp(module: ir.Module) -> int:
    """Rewrite every f32 `math.exp` (scalar or vector) as arithmetic; returns how many.

    Upstream behaviour worked around here: LLVM lowers a vector `llvm.intr.exp` by calling the
    scalar libm `expf` once per lane, so a vectorized softmax or GELU spent ~90% of its time in
    `expf` (12x128x128 softmax: 0.55 ms, 0.13 ms without the exp). MLIR's polynomial
    approximation is only reachable from C++ (a test pass); this is the same Cephes scheme,
    built from arith ops that stay vectors (FMAs, integer shift into the exponent). Inputs above
    the representable range give +inf as libm does, below it 0 (libm: a denormal < 1.2e-38).

    n is rounded by adding `_EXP_MAGIC` (t = x log2(e) + 1.5 * 2^23 holds n in its low mantissa
    bits), so the scale 2^n is `(bits(t) + 127) << 23` -- no floor, float-to-int conversion or
    underflow select -- and the polynomial ends in Horner form (1 + r (1 + r p)): 4 fewer vector
    ops per exp, ~4% of softmax/log-softmax-2364x197 on the 2-core EPYC VM, same accuracy.
    `passes/CPU/ExpandMath.cpp` builds the same ops in the same order.
    """
    from mlir.dialects import arith

    def build(x: ir.Value, t: ir.Type) -> ir.Value:
        it, fc, ic, mul, add = _f32_builders(t)
        xc = arith.minimumf(arith.maximumf(x, fc(_EXP_LO)), fc(_EXP_HI))
        tn = arith.minimumf(add(mul(xc, fc(1.44269504088896341)), fc(_EXP_MAGIC)), fc(_EXP_MAGIC + 127.0))
        n = arith.subf(tn, fc(_EXP_MAGIC))
        r = add(xc, mul(n, fc(-_EXP_LN2_HI)))
        r = add(r, mul(n, fc(-_EXP_LN2_LO)))
        p = fc(_EXP_POLY[0])
        for coef in _EXP_POLY[1:]:
            p = add(mul(p, r), fc(coef))
        y = add(mul(add(mul(p, r), fc(1.0)), r), fc(1.0))
        scale = arith.bitcast(t, arith.shli(arith.addi(arith.bitcast(it, tn), ic(127)), ic(23)))
        res = mul(y, scale)
        return arith.select(arith.cmpf(arith.CmpFPredicate.OGT, x, fc(_EXP_HI)), fc(float("inf")), res)

    return _replace_f32_ops(module, "math.exp", build)


def reciprocal_divisors(module: ir.Module) -> int:
    """Rewrite every float `x / broadcast(s)` as `x * broadcast(1 / s)`; returns how many.

    A softmax's last step divides a whole row by its sum, which the chain sketch vectorizes as a
    division by the broadcast sum: LLVM emits one vector division per register of the row, whose
    throughput is a fraction of a multiplication's (no fast-math flag allows the reciprocal). One
    division per row and multiplications instead made softmax-2364x197 ~8% faster on the 2-core
    EPYC VM; PyTorch's softmax multiplies by the reciprocal too. Each result moves by at most about
    one ulp (two roundings instead of one), far inside the verifier's f32 tolerance (1e-5)."""
    from mlir.dialects import arith, vector

    found = [op for op in walk(module.operation, "arith.divf")
             if isinstance(op.operands[1].owner, ir.OpView) and op.operands[1].owner.operation.name == "vector.broadcast"]
    fm = ir.Attribute.parse("#arith.fastmath<contract>")
    for op in found:
        src = op.operands[1].owner.operation.operands[0]
        t = src.type
        elem = ir.VectorType(t).element_type if t.typeid == ir.VectorType.static_typeid else t
        with ir.InsertionPoint(op), op.location:
            one = ir.FloatAttr.get(elem, 1.0)
            one = arith.constant(t, ir.DenseElementsAttr.get_splat(t, one) if elem != t else one)
            recip = vector.broadcast(op.results[0].type, arith.divf(one, src))
            res = arith.mulf(op.operands[0], recip, fastmath=fm)
        op.results[0].replace_all_uses_with(res)
        op.erase()
    return len(found)


@functools.cache
def _descriptor_class(rank: int, ctype: type) -> type:
    return make_nd_memref_descriptor(rank, ctype) if rank else make_zero_d_memref_descriptor(ctype)


def memref_descriptor(a: np.ndarray) -> ctypes.Structure:
    """The ranked memref descriptor of a numpy array, built from a cached class.

    Upstream behaviour worked around: `mlir.runtime.get_ranked_memref_descriptor` defines a new
    ctypes Structure class on every call, and `ctypes.pointer` caches a pointer type per class
    forever, so each call leaked ~10-30 KiB (6000 calls of a 64x64 matmul: +155 MiB RSS).
    Pinned by tests/test_native.py."""
    ctp = as_ctype(a.dtype)
    d = _descriptor_class(a.ndim, ctp)()
    d.allocated = a.ctypes.data
    d.aligned = a.ctypes.data_as(ctypes.POINTER(ctp))
    d.offset = 0
    if a.ndim == 0:
        return d
    d.shape = (ctypes.c_longlong * a.ndim)(*a.shape)
    d.strides = (ctypes.c_longlong * a.ndim)(*[s // a.itemsize for s in a.strides])
    return d


def _address(a: np.ndarray) -> int:
    """The address of `a`'s data: `a.ctypes.data` builds a helper object (~1 us on the 2-core VM);
    a writable array's buffer gives it in a quarter of that."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    except (TypeError, ValueError):  # read-only (or empty) arrays
        return a.ctypes.data


@dataclass
class CompiledKernel:
    """A JIT-compiled task. `run` takes numpy inputs and returns numpy outputs.

    A call passes the kernel one packed `void**` array (one pointer to a memref descriptor per
    argument), cached by the arguments' data addresses: every argument has its spec's shape,
    dtype and a C-contiguous layout (`run` checks), so an address alone names the descriptor, and
    one built for a freed array is still right for a new array at the same address. Building the
    descriptors and the packed array took ~10 us of ctypes calls per call, 10-20% of a row-wise
    kernel's 50-200 us when called from Python."""

    engine: ExecutionEngine
    task: SearchTask
    #: the arguments' addresses -> the packed argument array built for them
    _packed: dict = field(default_factory=dict, repr=False)
    _funcs: dict = field(default_factory=dict, repr=False)
    #: a profiled model's segments, one per timer tick (`profile.py`); None: not profiled
    profile_segments: list | None = None

    def read_profile(self) -> np.ndarray:
        """Seconds accumulated in each profile segment since the last read (zeroes them)."""
        out = np.zeros(len(self.profile_segments), dtype=np.float64)
        self._func("__ansor_profile")(self._args([out], ()))
        return out

    def _func(self, name: str):
        """The packed-interface function `name`, looked up once (`ExecutionEngine.invoke` looks it
        up and builds a new ctypes prototype on every call: ~5 us of a small kernel's call)."""
        func = self._funcs.get(name)
        if func is None:
            func = self._funcs[name] = self.engine.lookup(name)
        return func

    def _args(self, arrays: list[np.ndarray], extra: tuple = ()) -> ctypes.Array:
        """The packed argument array for `arrays` (each of its spec's shape, dtype, C-contiguous)
        followed by the pointers in `extra` (not cached)."""
        key = tuple(map(_address, arrays))
        packed = self._packed.get(key) if not extra else None
        if packed is None:
            descs = [ctypes.pointer(ctypes.pointer(memref_descriptor(a))) for a in arrays]
            descs += list(extra)
            packed = (ctypes.c_void_p * len(descs))(*(ctypes.cast(d, ctypes.c_void_p) for d in descs))
            packed._keep = descs  # the descriptors live as long as the array pointing at them
            if not extra:
                if len(self._packed) >= 256:
                    self._packed.clear()
                self._packed[key] = packed
        return packed

    def alloc_outputs(self) -> list[np.ndarray]:
        """Fresh output arrays, uninitialised: every program that reaches a user wrote all of its
        outputs under verification with poisoned buffers (see verify.py)."""
        return [np.empty(s.shape, dtype=s.numpy_dtype()) for s in self.task.outputs]

    def _checked_outputs(self, outputs: list[np.ndarray]) -> list[np.ndarray]:
        for i, (a, spec) in enumerate(zip(outputs, self.task.outputs, strict=True)):
            if a.shape != spec.shape or a.dtype.name != spec.numpy_dtype() or not a.flags.c_contiguous \
                    or not a.flags.writeable:
                raise ValueError(f"{self.task.func_name}: output #{i} must be a writable C-contiguous "
                                 f"{spec.numpy_dtype()} array of shape {spec.shape}")
        return outputs

    def _inputs(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        if len(inputs) != len(self.task.inputs):
            raise ValueError(f"{self.task.func_name}: expected {len(self.task.inputs)} inputs, got {len(inputs)}")
        ins = []
        for i, (a, spec) in enumerate(zip(inputs, self.task.inputs, strict=True)):
            a = np.ascontiguousarray(a, dtype=spec.numpy_dtype())
            if a.shape != spec.shape:
                raise ValueError(f"{self.task.func_name}: input #{i} has shape {a.shape}, expected {spec.shape}")
            ins.append(a)
        return ins

    def run(self, inputs: list[np.ndarray], outputs: list[np.ndarray] | None = None) -> list[np.ndarray]:
        ins = self._inputs(inputs)
        outs = self._checked_outputs(outputs) if outputs is not None else self.alloc_outputs()
        self._func(self.task.func_name)(self._args(ins + outs))
        return outs

    def time(self, inputs: list[np.ndarray], number: int, outputs: list[np.ndarray] | None = None) -> float:
        """Seconds for `number` back-to-back calls, timed around one native loop (into
        `outputs`, or fresh output arrays)."""
        import time

        ins = self._inputs(inputs)
        outs = self._checked_outputs(outputs) if outputs is not None else self.alloc_outputs()
        args = self._args(ins + outs, (ctypes.pointer(ctypes.c_longlong(number)),))
        func = self._func(BENCH_FUNC)
        t0 = time.perf_counter()
        func(args)
        return time.perf_counter() - t0


def split_shared_empties(module: ir.Module) -> int:
    """Give each use of a `tensor.empty` its own op; returns how many were added.

    `preprocess` ends with CSE, which merges the equal-shaped `tensor.empty` destinations of a
    chain's ops into one value (a softmax's exp and division both write "the" 2364x197 empty). Fused
    into a reduction chain's loop, the exp then writes into the slice of the output the division
    writes too, and one-shot bufferization resolves that false conflict by copying the output tile
    (uninitialised) into a fresh buffer on every tile. With its own empty the exp's tile is just a
    fresh buffer (softmax-2364x197's chain sketch ~7% faster on the 2-core EPYC VM). An empty's
    contents are undefined, so splitting it changes no result."""
    added = 0
    for empty in walk(module.operation, "tensor.empty"):
        for use in list(empty.result.uses)[1:]:
            with ir.InsertionPoint(empty):
                clone = empty.clone()
            use.owner.operands[use.operand_number] = clone.result
            added += 1
    return added


def compile_task(task: SearchTask, script: str | None, *, opt_level: int = 3) -> CompiledKernel:
    """Apply `script` (None: the untuned program), lower and JIT. Raises `LoweringError`."""
    _native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = parse_payload(task)
        split_shared_empties(module)
        if script is not None:
            apply_script(module, script)
        return _lower_and_jit(module, task, opt_level)


def schedule_callees(module: ir.Module, callees: dict[str, SearchTask], scripts: dict[str, str | None]) -> None:
    """Replace each private callee `name` of `module` by its task's scheduled function.

    `callees` maps callee names to their task; `scripts` maps task hashes to the script to apply
    (None or missing: the untuned program). Each distinct task is scheduled once (in its own
    module, exactly as when it was measured) and cloned under every callee name that uses it.
    """
    scheduled: dict[str, ir.Operation] = {}
    payloads: list[ir.Module] = []  # keeps the scheduled functions' modules alive while cloning
    funcs = {str(op.operation.attributes["sym_name"]).strip('"'): op.operation
             for op in module.body.operations if op.operation.name == "func.func"}
    for name, task in callees.items():
        if task.hash not in scheduled:
            payload = parse_payload(task)
            split_shared_empties(payload)
            payloads.append(payload)
            script = scripts.get(task.hash)
            if script is not None:
                apply_script(payload, script)
            scheduled[task.hash] = next(op.operation for op in payload.body.operations
                                        if op.operation.name == "func.func")
        old = funcs[name]
        with ir.InsertionPoint(old):
            new = scheduled[task.hash].clone()
        new.attributes["sym_name"] = ir.StringAttr.get(name)
        new.attributes["sym_visibility"] = ir.StringAttr.get("private")
        if "llvm.emit_c_interface" in new.attributes:
            del new.attributes["llvm.emit_c_interface"]
        old.erase()


def compile_network(task: SearchTask, callees: dict[str, SearchTask], scripts: dict[str, str | None], *,
                    opt_level: int = 3, arena: bool = True, profile: bool = False) -> CompiledKernel:
    """Compile a partitioned model (`task.ir`, entry `task.func_name`) with each callee scheduled
    by `scripts` (task hash -> script; see `schedule_callees`); `arena`: the intermediates between
    callees live in a static arena (`arena.py`; calls must not overlap); `profile`: timers around
    every callee call (`profile.py`; the kernel's `profile_segments`, `read_profile`). Raises
    `LoweringError`."""
    _native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(task.ir)
        schedule_callees(module, callees, scripts)
        for op in module.body.operations:
            if op.operation.name == "func.func" and str(op.operation.attributes["sym_name"]).strip('"') == task.func_name:
                op.operation.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
        if not profile:
            return _lower_and_jit(module, task, opt_level, arena=arena)
        segments: list = []
        _lower(module, task, arena=arena, profile=segments)
        kernel = _jit(module, task, opt_level)
        kernel.profile_segments = segments
        return kernel


def build_task(task: SearchTask, script: str | None) -> bytes:
    """The first half of `compile_task`: apply `script` and lower to the LLVM dialect, as MLIR
    bytecode (the artifact a builder hands a runner; LLVM's code generation happens in `load_task`,
    on the machine that runs it). Raises `LoweringError`."""
    import io

    _native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = parse_payload(task)
        split_shared_empties(module)
        if script is not None:
            apply_script(module, script)
        _lower(module, task)
        buf = io.BytesIO()
        module.operation.write_bytecode(buf)
        return buf.getvalue()


def load_task(task: SearchTask, artifact: bytes, *, opt_level: int = 3) -> CompiledKernel:
    """The second half of `compile_task`: JIT an artifact of `build_task`. Raises `LoweringError`."""
    _native.register_everything()
    with ir.Context(), ir.Location.unknown():
        try:
            module = ir.Module.parse(artifact)
        except Exception as exc:  # noqa: BLE001 - MLIRError or ValueError: a torn or foreign artifact
            raise LoweringError("jit", f"unreadable artifact: {str(exc).splitlines()[0]}") from None
        return _jit(module, task, opt_level)


def _lower_and_jit(module: ir.Module, task: SearchTask, opt_level: int, *, arena: bool = False) -> CompiledKernel:
    """Bufferize, add the timing loop, unroll, lower to LLVM and JIT (inside the caller's context).
    `arena`: the entry function's intermediates go to a static arena (`arena.py`; models)."""
    _lower(module, task, arena=arena)
    return _jit(module, task, opt_level)


def _lower(module: ir.Module, task: SearchTask, *, arena: bool = False, profile: list | None = None) -> None:
    """Everything of `_lower_and_jit` up to the LLVM dialect, in place. `profile`: a list that
    receives the segments of timers added around the entry's calls (`profile.py`)."""
    run_passes(module, _BUFFERIZE, "lower")
    if arena:
        from ansor.targets.cpu.arena import arena_intermediates

        arena_intermediates(module, task.func_name)
    run_passes(module, _DEALLOCATE, "lower")
    if profile is not None:
        from ansor.targets.cpu.profile import profile_calls

        timer = "omp_get_wtime" if any("omp" in Path(lib).name for lib in runtime_libs()) else "rtclock"
        profile.extend(profile_calls(module, task.func_name, timer))
    strided_copies_to_linalg(module)
    run_passes(module, _EXPAND_MATH_CPU, "lower")
    expand_erf(module)
    expand_exp(module)
    reciprocal_divisors(module)
    add_bench_wrapper(module, task.func_name)
    run_passes(module, "ansor-auto-unroll,canonicalize", "lower")
    run_passes(module, _TO_LLVM_CPU, "lower")


def _jit(module: ir.Module, task: SearchTask, opt_level: int) -> CompiledKernel:
    libs = list(runtime_libs())
    if not any("omp" in Path(lib).name for lib in libs) and walk(module.operation, "omp.parallel"):
        # Without a runtime the JIT cannot resolve the parallel loops' entry points, and ORC
        # reports that only as "Unknown function <name>" on the first call.
        raise LoweringError("jit", f"{task.name}: a parallel CPU program needs an OpenMP runtime (libiomp5.so or "
                                   "libomp.so) and none was found: pip install intel-openmp, or set ANSOR_OPENMP_LIB")
    try:
        engine = ExecutionEngine(module, opt_level=opt_level, shared_libs=libs)
    except RuntimeError as exc:
        raise LoweringError("jit", str(exc).splitlines()[0]) from None
    return CompiledKernel(engine, task)



def set_threads(n: int | None) -> None:
    """Number of OpenMP threads for kernels compiled afterwards in this process (None: all cores)."""
    os.environ["OMP_NUM_THREADS"] = str(n or os.cpu_count() or 1)


def fma_peak_gflops(*, threads: int | None = None, vector_bits: int | None = None,
                    seconds: float = 0.2, repeats: int = 5) -> float:
    """The CPU's measured f32 FMA throughput in GFLOP/s: the roofline a tuned kernel can reach.

    JIT-compiles, through this module's own CPU pipeline, a kernel in which every OpenMP thread
    chains FMAs on 12 independent vector registers (enough to cover the FMA latency of current
    x86 cores) and returns the best of `repeats` timings of about `seconds` each. `threads` is
    the OpenMP thread count (None: the current `OMP_NUM_THREADS`, else all cores); `vector_bits`
    the vector width (None: `params.VECTOR_BITS`, what the search targets). The OpenMP runtime
    reads `OMP_NUM_THREADS` once, when a process first runs a parallel region: call this before
    anything else in the process does (else it runs on that first setting and reads low)."""
    import time

    from ansor.targets.cpu import params

    lanes = (vector_bits or params.VECTOR_BITS) // 32
    nthreads = threads or int(os.environ.get("OMP_NUM_THREADS", "0") or 0) or os.cpu_count() or 1
    acc = 12
    vt = f"vector<{lanes}xf32>"
    inits = "\n".join(f"    %i{k} = arith.constant dense<{k}.0> : {vt}" for k in range(acc))
    args = ", ".join(f"%a{k} = %i{k}" for k in range(acc))
    body = "\n".join(f"      %x{k} = vector.fma %a{k}, %b, %c : {vt}" for k in range(acc))
    yields = ", ".join(f"%x{k}" for k in range(acc))
    sums = "\n".join(f"    %s{k} = arith.addf %s{k - 1}, %r#{k} : {vt}" for k in range(1, acc))
    text = f"""
func.func @fma_peak(%out: memref<?xf32>, %n: index) attributes {{llvm.emit_c_interface}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %nt = memref.dim %out, %c0 : memref<?xf32>
  scf.forall (%t) in (%nt) {{
    %b = arith.constant dense<1.0000001> : {vt}
    %c = arith.constant dense<1.0e-7> : {vt}
{inits}
    %r:{acc} = scf.for %i = %c0 to %n step %c1 iter_args({args}) -> ({", ".join([vt] * acc)}) {{
{body}
      scf.yield {yields} : {", ".join([vt] * acc)}
    }}
    %s0 = arith.addf %r#0, %r#0 : {vt}
{sums}
    %red = vector.reduction <add>, %s{acc - 1} : {vt} into f32
    memref.store %red, %out[%t] : memref<?xf32>
  }}
  return
}}"""
    _native.register_everything()
    old = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = str(nthreads)
    try:
        with ir.Context(), ir.Location.unknown():
            module = ir.Module.parse(text)
            run_passes(module, _TO_LLVM_CPU, "lower")
            engine = ExecutionEngine(module, opt_level=3, shared_libs=list(runtime_libs()))
            out = np.zeros(nthreads, dtype=np.float32)
            desc = ctypes.pointer(ctypes.pointer(memref_descriptor(out)))

            def run(n: int) -> float:
                t0 = time.perf_counter()
                engine.invoke("fma_peak", desc, ctypes.pointer(ctypes.c_longlong(n)))
                return time.perf_counter() - t0

            n = 1 << 16
            while run(n) < seconds / 4:
                n *= 2
            n = int(n * seconds / max(run(n), 1e-9))
            best = min(run(n) for _ in range(repeats))
    finally:
        if old is None:
            del os.environ["OMP_NUM_THREADS"]
        else:
            os.environ["OMP_NUM_THREADS"] = old
    return 2.0 * acc * lanes * n * nthreads / best / 1e9

//===- CpuPasses.td - CPU per-build math rewrites (helper cpu) --*- tablegen -*-===//
//
// Rewrites the CPU lowering runs on every measured candidate after bufferization, ported from
// python/ansor/targets/cpu/lowering.py, behaviour unchanged.
//
//===----------------------------------------------------------------------------===//
#ifndef ANSOR_CPU_PASSES_TD
#define ANSOR_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def CpuExpandErf : Pass<"ansor-expand-erf"> {
  let summary = "f32 math.erf -> polynomial arithmetic and one math.exp";
  let description = [{
    LLVM lowers `math.erf` to one libm `erff` call per lane, so an exact GELU
    (0.5 x (1 + erf(x / sqrt 2))) after a matmul spent about as long in `erff` as in the matmul.
    Every f32 `math.erf` (scalar or vector) becomes: for |x| >= 0.5 Abramowitz & Stegun 7.1.26
    (1 - t (a1 + t (a2 + ... a5)) exp(-x^2), t = 1 / (1 + p |x|), absolute error <= 1.5e-7),
    below 0.5 the Maclaurin series to x^11 (the A&S form cancels there), chosen by a select.
    All mulf/addf carry `fastmath<contract>`. Run before `ansor-expand-exp`, which expands the
    `math.exp` this leaves.

    Before: `%y = math.erf %x : vector<8xf32>`
    After:  `%a = math.absf %x ... %e = math.exp %n ... %y = arith.select %small, %s, %b`
  }];
  let dependentDialects = ["arith::ArithDialect", "math::MathDialect"];
}

def CpuExpandExp : Pass<"ansor-expand-exp"> {
  let summary = "f32 math.exp -> Cephes polynomial arithmetic";
  let description = [{
    LLVM lowers a vector `llvm.intr.exp` by calling scalar libm `expf` once per lane, so a
    vectorized softmax spent ~90% of its time in `expf`. Every f32 `math.exp` (scalar or vector)
    becomes the Cephes scheme from ops that stay vectors: clamp to [-88, ln FLT_MAX],
    t = x log2 e + 1.5 * 2^23 (n = round(x log2 e) in t's low mantissa bits, at most 127),
    r = x - n ln2 (two-part ln2), degree-5 polynomial in Horner form, scale 2^n =
    bitcast((bitcast(t) + 127) << 23); inputs above the range give +inf as libm does, below it 0
    (n = -127: a zero exponent field). All mulf/addf carry `fastmath<contract>`.

    Before: `%y = math.exp %x : f32`
    After:  `%c = arith.minimumf ... %t = arith.minimumf ... %s = arith.bitcast %i : i32 to f32 ...
             %y = arith.select %hi, %inf, %r : f32`
  }];
  let dependentDialects = ["arith::ArithDialect", "math::MathDialect"];
}

#endif // ANSOR_CPU_PASSES_TD

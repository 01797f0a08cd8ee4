//===- Passes.td - ansor-mlir passes ------------------------------*- tablegen -*-===//
#ifndef ANSOR_PASSES_TD
#define ANSOR_PASSES_TD

include "mlir/Pass/PassBase.td"

def AnnotateTask : Pass<"ansor-annotate-task"> {
  let summary = "Attach #ansor.task (name, weight, flops, structural hash) to functions";
  let description = [{
    For every `func.func` with a body (the anchor op itself when it is one, else every function
    nested in it) attaches `ansor.task = #ansor.task<...>`, replacing any previous one:

    * `name`: the function's symbol name;
    * `weight`: the `weight` option;
    * `flops`: sum over the Linalg ops in the function (`LinalgOp` interface) of
      (product of the static loop ranges) x (number of arithmetic ops in the payload region).
      Counted payload ops are all `arith` and `math` ops except `arith.constant` and casts
      (`CastOpInterface`), so `linalg.matmul` counts 2 per point (mul + add) and a 1024^3 matmul
      gives 2147483648. A Linalg op with a dynamic loop range is an error. Other ops count 0.
    * `hash`: 16 hex digits of xxh3-64 over the function type and the body printed in generic
      form without locations. SSA names, locations and the function's own name and attributes
      do not enter it: two copies of a subgraph under different names share it.

    Before:
    ```mlir
    func.func @mm(%a: tensor<8x4xf32>, %b: tensor<4x2xf32>, %c: tensor<8x2xf32>) -> tensor<8x2xf32> {
      %0 = linalg.matmul ins(%a, %b : tensor<8x4xf32>, tensor<4x2xf32>)
                         outs(%c : tensor<8x2xf32>) -> tensor<8x2xf32>
      return %0 : tensor<8x2xf32>
    }
    ```
    After (`ansor-annotate-task{weight=3}`):
    ```mlir
    func.func @mm(...) -> tensor<8x2xf32> attributes {ansor.task = #ansor.task<name = "mm",
        weight = 3 : i64, flops = 128 : i64, hash = "...">} { ... }
    ```
  }];
  let options = [
    Option<"weight", "weight", "int64_t", /*default=*/"1",
           "Weight of the task(s): how often the function occurs in the model (>= 1)">
  ];
  let dependentDialects = ["::mlir::ansor::AnsorDialect"];
}

def AutoUnroll : Pass<"ansor-auto-unroll"> {
  let summary = "Fully unroll small scf.for nests under ansor.auto_unroll_max_step (Ansor's pragma)";
  let description = [{
    Implements Ansor's `auto_unroll_max_step` pragma. A schedule puts the discardable attribute
    `ansor.auto_unroll_max_step = N` on an op with regions (usually a loop, via
    `transform.annotate`). For every such op (inner annotated ops first) the pass considers the
    `scf.for` loops nested in it, the op itself included, innermost first, and **fully unrolls**
    loop L when `work(L) <= N`, where

        work(L) = trip(L) * max(1, sum of work(C) over the scf.for loops C directly nested in L)

    computed on the IR before any unrolling (for a perfect nest: the product of the trip counts,
    i.e. the number of innermost iterations). A loop whose trip count is not a compile-time
    constant has infinite work: neither it nor any loop around it is unrolled. Loops with zero
    iterations are left alone. Since work only grows outwards, a loop is unrolled only after all
    loops inside it were. Loop-carried values (`iter_args`, e.g. vector accumulators) are threaded
    through the unrolled copies. The attribute is removed afterwards (`N = 0` just removes it).

    With option `default-max-step=N` (N > 0), loops outside every annotated op are handled as if
    the anchor op carried `ansor.auto_unroll_max_step = N`. The default 0 touches only annotated
    ops.

    Before (`N = 8`, work(j) = 2, work(i) = 2 * 2 = 4 <= 8):
    ```mlir
    scf.for %i = %c0 to %c2 step %c1 {
      scf.for %j = %c0 to %c2 step %c1 {
        "test.use"(%i, %j) : (index, index) -> ()
      }
    } {ansor.auto_unroll_max_step = 8 : i64}
    ```
    After: four straight-line `"test.use"` ops with indices (0,0) (0,1) (1,0) (1,1).
  }];
  let options = [
    Option<"defaultMaxStep", "default-max-step", "int64_t", /*default=*/"0",
           "Max step applied to loops outside any annotated op (0: leave them alone)">
  ];
  let dependentDialects = ["::mlir::ansor::AnsorDialect", "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
}

#endif // ANSOR_PASSES_TD

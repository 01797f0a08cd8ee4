//===- AnsorDialect.td - the ansor dialect -----------------------*- tablegen -*-===//
//
// The `ansor` dialect holds no operations: only the attributes the auto-scheduler attaches to
// payload IR (task metadata on functions, scheduling pragmas on loops).
//
//===----------------------------------------------------------------------------===//

#ifndef ANSOR_DIALECT_TD
#define ANSOR_DIALECT_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/DialectBase.td"

def Ansor_Dialect : Dialect {
  let name = "ansor";
  let cppNamespace = "::mlir::ansor";
  let summary = "Attributes of the ansor-mlir auto-scheduler";
  let description = [{
    Attributes the auto-scheduler attaches to payload IR. Discardable attributes verified by the
    dialect:

    * `ansor.task = #ansor.task<...>` on a `func.func`: the search task the function is
      (see `ansor-annotate-task`).
    * `ansor.auto_unroll_max_step = N : i64` (N >= 0) on an operation with regions, usually an
      `scf.for` annotated by `transform.annotate`: the unrolling pragma consumed by
      `ansor-auto-unroll`.

    Other `ansor.*` discardable attributes are accepted without checks.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let extraClassDeclaration = [{
    /// Name of the discardable attribute holding a `#ansor.task` on a function.
    static constexpr ::llvm::StringLiteral kTaskAttrName = "ansor.task";
    /// Name of the discardable unrolling pragma read by `ansor-auto-unroll`.
    static constexpr ::llvm::StringLiteral kAutoUnrollAttrName = "ansor.auto_unroll_max_step";
  }];
}

def Ansor_TaskAttr : AttrDef<Ansor_Dialect, "Task"> {
  let mnemonic = "task";
  let summary = "A search task: one function to tune, its weight and its work";
  let description = [{
    Describes the function it is attached to as an Ansor search task:

    * `name`: the function's symbol name (for reports);
    * `weight`: how many times the task occurs in the model (>= 1);
    * `flops`: floating-point/integer arithmetic operations of one execution (>= 0);
    * `hash`: hex string of a structural hash of the function body, independent of SSA names,
      locations and the function's name; identical subgraphs share it.

    ```mlir
    func.func @mm(...) attributes {ansor.task = #ansor.task<name = "mm", weight = 1 : i64,
                                   flops = 2147483648 : i64, hash = "8d1f0c2b7a9e3456">}
    ```

    `weight` and `flops` may be written without a type; they are `i64`.
  }];
  let parameters = (ins
    StringRefParameter<"the function's symbol name">:$name,
    "::mlir::IntegerAttr":$weight,
    "::mlir::IntegerAttr":$flops,
    StringRefParameter<"hex structural hash of the function body">:$hash
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "::llvm::StringRef":$name, "int64_t":$weight, "int64_t":$flops,
                     "::llvm::StringRef":$hash), [{
      auto i64 = ::mlir::IntegerType::get($_ctxt, 64);
      return $_get($_ctxt, name, ::mlir::IntegerAttr::get(i64, weight),
                   ::mlir::IntegerAttr::get(i64, flops), hash);
    }]>
  ];
  let extraClassDeclaration = [{
    int64_t getWeightValue() const { return getWeight().getInt(); }
    int64_t getFlopsValue() const { return getFlops().getInt(); }
  }];
}

#endif // ANSOR_DIALECT_TD

"""MLIR helpers every target shares: parsing a task's payload, applying a transform script, running a
pass pipeline, one-line diagnostics, the native timing loop's wrapper.

    SearchTask.ir --parse_payload (preprocess, C interface, read-only arguments)--> ir.Module
    ir.Module + script --apply_script (transform interpreter)--> scheduled module
    ir.Module --run_passes(pipeline)--> lowered module  (errors: LoweringError(stage, one line))

Everything here runs in the current MLIR context; none of it knows about a target.
"""

from __future__ import annotations

from mlir import ir, passmanager
from mlir.dialects.transform import interpreter

from ansor.core.loops import preprocess
from ansor.core.task import SearchTask


#: Name of the generated native timing loop: calls the kernel `n` times (see `add_bench_wrapper`).
BENCH_FUNC = "__ansor_bench"


# Upstream behaviour worked around here (fpowi): `convert-math-to-llvm` turns a `math.fpowi` on vectors
# (GELU's tanh form computes x^3 with it, vectorized by our scripts) into `llvm.intr.powi` with a
# vector exponent, which the verifier rejects ("operand #1 must be signless integer"), so the
# candidate failed to compile. `math-expand-ops{ops=fpowi}` first rewrites a constant exponent
# into multiplications (x^3 = x*x*x) and any other into `math.powf`.
EXPAND_FPOWI = "math-expand-ops{ops=fpowi},"


class LoweringError(RuntimeError):
    """A schedule that cannot be applied or lowered; `stage` says where ("apply", "lower", "jit")."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage


def diag_text(exc: Exception) -> str:
    diags = getattr(exc, "error_diagnostics", None) or []
    if diags:
        d = diags[0]
        notes = "; ".join(str(n.message) for n in getattr(d, "notes", [])[:1])
        return f"{d.message}" + (f" ({notes})" if notes else "")
    lines = [ln for ln in str(exc).splitlines() if ln.strip()]
    return lines[-1] if lines else type(exc).__name__


def parse_payload(task: SearchTask) -> ir.Module:
    """Parse the task's IR in the current context and mark it for C-interface invocation."""
    module = ir.Module.parse(task.ir)
    preprocess(module)  # always-inline + fast-math contract; tags ops so scripts can match them by number
    for op in module.body.operations:
        if op.operation.name == "func.func":
            op.operation.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
            _read_only_arguments(op.operation)
    return module


def _read_only_arguments(func: ir.Operation) -> None:
    """Mark the function's tensor arguments `bufferization.writable = false`.

    Tensors are values: an op accumulating into an argument (`linalg.matmul ... outs(%C)` with %C
    a parameter) must not write the caller's buffer. One-shot bufferization with function
    boundaries treats arguments as writable by default and updates %C in place, so every
    repeated call (warm-up, timing) accumulated again and every tuned candidate of such a
    function failed verification. Read-only arguments make bufferization copy first."""
    ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    old = list(ir.ArrayAttr(func.attributes["arg_attrs"])) if "arg_attrs" in func.attributes else []
    attrs = []
    for i, t in enumerate(ftype.inputs):
        entries = {}
        if i < len(old):
            d = ir.DictAttr(old[i])
            entries = {d[j].name: d[j].attr for j in range(len(d))}
        if isinstance(t, ir.RankedTensorType):
            entries["bufferization.writable"] = ir.BoolAttr.get(False)
        attrs.append(ir.DictAttr.get(entries))
    func.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)


def parse_script(script: str) -> tuple[ir.Module, ir.Operation]:
    """Parse a transform script in the current context: (its module, its `@__transform_main`)."""
    try:
        tmod = ir.Module.parse(script)
    except ir.MLIRError as exc:
        raise LoweringError("apply", f"script does not parse: {diag_text(exc)}") from None
    for op in tmod.body.operations:
        if (op.operation.name == "transform.named_sequence"
                and ir.StringAttr(op.operation.attributes["sym_name"]).value == "__transform_main"):
            return tmod, op.operation
    raise LoweringError("apply", "script has no @__transform_main named sequence")


def apply_parsed_script(module: ir.Module, tmod: ir.Module, entry: ir.Operation,
                        options: interpreter.TransformOptions | None = None) -> None:
    """Apply `entry` of the parsed script `tmod` (see `parse_script`) to `module` in place."""
    try:
        interpreter.apply_named_sequence(module.operation, entry, tmod, options)
    except (ValueError, ir.MLIRError) as exc:
        raise LoweringError("apply", f"transform failed: {diag_text(exc)}") from None


def apply_script(module: ir.Module, script: str) -> None:
    """Apply a transform-dialect script (a module with `@__transform_main`) to `module` in place."""
    apply_parsed_script(module, *parse_script(script))


def run_passes(module: ir.Module, pipeline: str, stage: str) -> None:
    try:
        passmanager.PassManager.parse(f"builtin.module({pipeline})").run(module.operation)
    except ir.MLIRError as exc:
        raise LoweringError(stage, diag_text(exc)) from None


def add_bench_wrapper(module: ir.Module, func_name: str) -> None:
    """Append `func @__ansor_bench(<kernel memref args>..., %n: index)` calling the kernel n times.

    Runs after bufferization, so the kernel already takes its outputs as memref out-params.
    Timing many calls inside native code keeps Python's call overhead out of the measurement.
    """
    kernel = next(
        op.operation
        for op in module.body.operations
        if op.operation.name == "func.func" and str(op.operation.attributes["sym_name"]).strip('"') == func_name
    )
    ftype = ir.FunctionType(ir.TypeAttr(kernel.attributes["function_type"]).value)
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(ftype.inputs))
    uses = ", ".join(f"%a{i}" for i in range(len(ftype.inputs)))
    types = ", ".join(str(t) for t in ftype.inputs)
    text = f"""
func.func private @{func_name}({types})
func.func @{BENCH_FUNC}({args}, %n: index) attributes {{llvm.emit_c_interface}} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {{
    func.call @{func_name}({uses}) : ({types}) -> ()
  }}
  return
}}"""
    wrapper = ir.Module.parse(text)
    bench = wrapper.body.operations[1].operation  # [0] is the kernel's declaration
    module.body.append(bench.clone())


def walk(root: ir.Operation, name: str) -> list[ir.Operation]:
    """Every op named `name` nested in `root` (root included), in walk order."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == name:
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found

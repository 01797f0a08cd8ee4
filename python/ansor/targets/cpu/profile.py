"""Per-call timers inside a compiled model: where its end-to-end time goes.

    bufferized model (after deallocation) --profile_calls(module, entry)--> the entry function
        calls `@__ansor_prof_tick(k)` at its start, before and after every top-level `func.call`
        (a task's callee) and before its return; tick k adds the time since the previous tick to
        accumulator k (a private `memref.global` of f64), read and zeroed by
        `@__ansor_profile(memref<Nxf64>)`

A segment is the code between two ticks: a callee (`call`), or the parent's own ops between
two calls (`parent`: layout transposes, copies, reshapes, deallocations, the arena's views).
The timer is the OpenMP runtime's `omp_get_wtime` (the C runner utils' `rtclock`, microsecond
resolution, where no OpenMP runtime is loaded); a tick costs well under a microsecond, so a
profiled model runs at the speed of the plain one. Timing many calls in the native loop and
dividing gives each segment's mean time per model call, measured in the model: each task
starts with the caches as the previous one left them, not warm and alone as the tuner timed it.

`CompiledNetwork(..., profile=True).profile(*inputs)` (`ansor/compile.py`) and
`ansor bench MODEL --log LOG --profile` report it.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

TICK = "__ansor_prof_tick"
READ = "__ansor_profile"


@dataclass(frozen=True)
class Segment:
    """What ran before tick k: `kind` 'call' (`callee` the function called) or 'parent' (the
    entry function's own ops; `callee` the call they precede, or '' for the tail); tick 0's
    segment (`kind` 'outside': the time between two model calls) is not the model's."""

    kind: str
    callee: str


def profile_calls(module: ir.Module, entry: str, timer: str = "omp_get_wtime") -> list[Segment]:
    """Instrument function `entry` of a bufferized `module` (see the module docstring); returns
    the segment of each tick, in tick order. Call inside the module's context."""
    func = next(op.operation for op in module.body.operations if op.operation.name == "func.func"
                and ir.StringAttr(op.operation.attributes["sym_name"]).value == entry)
    block = func.regions[0].blocks[0]
    ops = [op.operation for op in block.operations]
    segments: list[Segment] = [Segment("outside", "")]
    points: list[ir.Operation] = [ops[0]]  # insert tick k before points[k]
    for i, op in enumerate(ops):
        if op.name == "func.call":
            callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            points.append(op)
            segments.append(Segment("parent", callee))
            points.append(ops[i + 1])
            segments.append(Segment("call", callee))
    points.append(ops[-1])
    segments.append(Segment("parent", ""))
    n = len(segments)
    declared = any(op.operation.name == "func.func" and ir.StringAttr(op.operation.attributes["sym_name"]).value == timer
                   for op in module.body.operations)
    decl = "" if declared else f"func.func private @{timer}() -> f64"
    text = f"""
memref.global "private" @__ansor_prof_acc : memref<{n}xf64> = dense<0.0>
memref.global "private" @__ansor_prof_last : memref<1xf64> = dense<0.0>
{decl}
func.func private @{TICK}(%k: index) {{
  %t = func.call @{timer}() : () -> f64
  %acc = memref.get_global @__ansor_prof_acc : memref<{n}xf64>
  %last = memref.get_global @__ansor_prof_last : memref<1xf64>
  %c0 = arith.constant 0 : index
  %l = memref.load %last[%c0] : memref<1xf64>
  %a = memref.load %acc[%k] : memref<{n}xf64>
  %d = arith.subf %t, %l : f64
  %s = arith.addf %a, %d : f64
  memref.store %s, %acc[%k] : memref<{n}xf64>
  memref.store %t, %last[%c0] : memref<1xf64>
  return
}}
func.func @{READ}(%out: memref<{n}xf64>) attributes {{llvm.emit_c_interface}} {{
  %acc = memref.get_global @__ansor_prof_acc : memref<{n}xf64>
  %z = arith.constant 0.0 : f64
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cn = arith.constant {n} : index
  scf.for %i = %c0 to %cn step %c1 {{
    %v = memref.load %acc[%i] : memref<{n}xf64>
    memref.store %v, %out[%i] : memref<{n}xf64>
    memref.store %z, %acc[%i] : memref<{n}xf64>
  }}
  return
}}"""
    extra = ir.Module.parse(text)
    for op in list(extra.body.operations):
        module.body.append(op.operation.clone())
    index = ir.IndexType.get()
    tick = ir.FlatSymbolRefAttr.get(TICK)
    for k, at in enumerate(points):
        with ir.InsertionPoint(at), at.location:
            c = ir.Operation.create("arith.constant", results=[index],
                                    attributes={"value": ir.IntegerAttr.get(index, k)}).results[0]
            ir.Operation.create("func.call", operands=[c], attributes={"callee": tick})
    return segments

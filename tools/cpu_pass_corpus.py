"""Compare the CPU per-build Python rewrites with their C++ ports over a corpus (helper cpu).

    PYTHONPATH=python ANSOR_NATIVE_LIB=build/dev/lib/libAnsorMLIR.so python tools/cpu_pass_corpus.py \
        [--samples N] [TASK ...]

For each task (default: softmax/tbs/lngelu/nrm/matmul workloads) and each sampled CPU schedule
it compiles the candidate; at the point where `_lower_and_jit` runs `expand_erf` + `expand_exp`
the module is printed, re-parsed twice, rewritten once by the Python functions and once by
`ansor-expand-erf,ansor-expand-exp`, and the two printed modules are compared verbatim (no
canonicalize/cse). Then both compiled programs are run on the same random inputs and the
outputs compared bitwise. Prints one line per case and a summary; exits 1 on any difference.
"""
from __future__ import annotations

import argparse
import random
import sys

DEFAULT = ["softmax-128x128", "tbs-1x128x12x64", "lngelu-8x256", "nrm-2x64x64", "matmul-64x64x64"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("tasks", nargs="*", default=DEFAULT)
    a = ap.parse_args()

    from mlir import ir, passmanager

    from ansor.core.task import create_task
    from ansor.frontend import workloads
    from ansor.measure.measurer import make_inputs
    from ansor.targets import generate_sketches
    from ansor.targets.cpu import lowering

    py_erf, py_exp = lowering.expand_erf, lowering.expand_exp
    state = {"mode": "py", "ir_same": 0, "ir_diff": 0}

    def checked_erf(module):
        text = str(module)
        ref = ir.Module.parse(text)
        py_erf(ref)
        py_exp(ref)
        new = ir.Module.parse(text)
        passmanager.PassManager.parse("builtin.module(ansor-expand-erf,ansor-expand-exp)").run(new.operation)
        state["ir_same" if str(ref) == str(new) else "ir_diff"] += 1
        if state["mode"] == "py":
            py_erf(module)
            py_exp(module)
        else:
            passmanager.PassManager.parse("builtin.module(ansor-expand-erf,ansor-expand-exp)").run(module.operation)
        return 0

    lowering.expand_erf = checked_erf
    lowering.expand_exp = lambda module: 0
    bad = 0
    for name in a.tasks:
        task = create_task(workloads.get(name), name=name.replace("-", "_"), target="cpu")
        rng = random.Random(0)
        for sk in generate_sketches(task):
            for k in range(a.samples):
                try:
                    script = sk.script(sk.sample(rng))
                except Exception as exc:  # noqa: BLE001 - an unsampleable sketch
                    print(f"# {name}.{sk.name}.s{k}: {exc}", file=sys.stderr)
                    continue
                outs = {}
                for mode in ("py", "cpp"):
                    state["mode"] = mode
                    try:
                        kern = lowering.compile_task(task, script)
                    except Exception as exc:  # noqa: BLE001
                        print(f"# {name}.{sk.name}.s{k} {mode}: {exc}", file=sys.stderr)
                        break
                    ins = make_inputs(task)
                    outs[mode] = [o.tobytes() for o in kern.run(ins)]
                same = len(outs) == 2 and outs["py"] == outs["cpp"]
                bad += len(outs) == 2 and not same
                print(f"{name}.{sk.name}.s{k}: outputs {'identical' if same else 'DIFFER' if len(outs) == 2 else 'n/a'}")
    print(f"IR identical {state['ir_same']}, different {state['ir_diff']}; output mismatches {bad}")
    return 1 if bad or state["ir_diff"] else 0


if __name__ == "__main__":
    sys.exit(main())

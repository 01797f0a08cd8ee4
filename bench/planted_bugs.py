"""Planted bugs through the real builder and runner: how many wrong programs pass verification.

    python -m bench.planted_bugs [--target cpu|cuda]

Twins of a task with the task's hash (so the measurer verifies them against the real task's
reference) whose program has one defect (the rewrites of `tests/test_verify.py`, loaded by path:
the last row or column dropped, nothing written, the `linalg.fill` lost) are measured by `LocalMeasurer` right after
the correct program, so a stale output buffer would hold the right answer. Prints one line per
planted bug: `wrong_answer` (caught), another error, or PASSED (a wrong program verified as correct).
To count the bugs an older version lets pass, run this module with PYTHONPATH pointing at that
version's python/ (plus this version's verify.py, which the test helpers import).
(results/gpu-tests/planted-before-after.txt: the GPU run.)
"""

from __future__ import annotations

import argparse
import dataclasses
import sys


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", choices=["cpu", "cuda"], default="cpu")
    args = ap.parse_args()

    import ansor
    from ansor.core.task import SearchTask, create_task
    from ansor.frontend import workloads
    from ansor.measure.measurer import LocalMeasurer, MeasureInput
    from ansor.targets.cpu.annotation import Schedule

    from bench.common import ROOT, load_module

    tv = load_module(ROOT / "tests" / "test_verify.py", "test_verify")

    def twin(task: SearchTask, ir: str) -> SearchTask:  # the task's hash, a defective program
        return dataclasses.replace(task, ir=ir)

    def planted(task: SearchTask) -> dict[str, SearchTask]:  # as tests/test_verify.py plants them
        out = {"drop last row": twin(task, tv.drop_last(task.ir, 0)),
               "drop last column": twin(task, tv.drop_last(task.ir, -1)),
               "write nothing": twin(task, tv.write_nothing(task.ir))}
        if "linalg.fill" in task.ir:
            out["lose the fill"] = twin(task, tv.lose_fill(task.ir))
        return out

    print(f"ansor from {ansor.__file__}, target {args.target}")
    m, n, k = 37, 29, 53
    mm = create_task(workloads.matmul(m, n, k), name="matmul-37x29x53", target=args.target)
    sm = create_task(workloads.softmax(6, 4096), name="softmax-6x4096", target=args.target)
    if args.target == "cpu":
        cases = [(mm, planted(mm)), (sm, planted(sm))]
    else:  # the GPU lowering has no program for some CPU twins (see test_verify)
        cases = [(mm, {"drop last column": twin(mm, create_task(tv.matmul_dropping_last_column(m, n, k),
                                                                 target="cuda").ir),
                       "lose the fill": twin(mm, tv.lose_fill(mm.ir))}),
                 (sm, {"lose the fill": twin(sm, tv.lose_fill(sm.ir))})]
    me = LocalMeasurer(tv.FAST)
    passed = total = 0
    try:
        for task, twins in cases:
            print(task.name, "baseline:", me.baseline(task).error or "ok")
            good = me.measure([MeasureInput(task, Schedule.of("untuned", {}), None)])[0]
            print(task.name, "correct program:", good.error or "ok")
            res = me.measure([MeasureInput(t, Schedule.of(name, {}), None) for name, t in twins.items()])
            for name, r in zip(twins, res, strict=True):
                total += 1
                passed += r.error is None
                print(f"PLANTED {task.name} {name}: {r.error.value if r.error else 'PASSED'} {r.error_msg[:120]}")
    finally:
        me.close()
    print(f"{passed} of {total} planted bugs passed verification")


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.planted_bugs [--help]")
    main()

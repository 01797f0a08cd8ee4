"""Planted bugs through the real builder and runner: how many wrong programs pass verification.

    python bench/planted_bugs.py [--target cpu|cuda]

Twins of a task with the task's hash (so the measurer verifies them against the real task's
reference) whose program has one defect (`tests/test_verify.py` builds them: the last row or
column dropped, nothing written, the `linalg.fill` lost) are measured by `LocalMeasurer` right after
the correct program, so a stale output buffer would hold the right answer. Prints one line per
planted bug: `wrong_answer` (caught), another error, or PASSED (a wrong program verified as correct).
To count the bugs an older version lets pass, run this file with PYTHONPATH pointing at that
version's python/ (plus this version's verify.py, which the test helpers import).
(results/gpu-tests/planted-before-after.txt: the GPU run.)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", choices=["cpu", "cuda"], default="cpu")
    args = ap.parse_args()

    import ansor
    from test_verify import (FAST, LocalMeasurer, MeasureInput, Schedule, _planted, _twin, create_task, lose_fill,
                             matmul_dropping_last_column, workloads)

    print(f"ansor from {ansor.__file__}, target {args.target}")
    m, n, k = 37, 29, 53
    mm = create_task(workloads.matmul(m, n, k), name="matmul-37x29x53", target=args.target)
    sm = create_task(workloads.softmax(6, 4096), name="softmax-6x4096", target=args.target)
    if args.target == "cpu":
        cases = [(mm, _planted(mm)), (sm, _planted(sm))]
    else:  # the GPU lowering has no program for some CPU twins (see test_verify)
        cases = [(mm, {"drop last column": _twin(mm, create_task(matmul_dropping_last_column(m, n, k), target="cuda").ir),
                       "lose the fill": _twin(mm, lose_fill(mm.ir))}),
                 (sm, {"lose the fill": _twin(sm, lose_fill(sm.ir))})]
    me = LocalMeasurer(FAST)
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
    main()

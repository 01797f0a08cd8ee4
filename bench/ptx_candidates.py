"""Seconds to PTX of each seeded random CUDA candidate of a workload, each in a fresh process.

    python -m bench.ptx_candidates WORKLOAD SEED N [TIMEOUT_S]

Draws the candidates `bench.build_pool` measures in round SEED (`random_inputs(task, N, SEED)`)
and lowers each to PTX with `bench.compile_ab`'s child (no GPU needed), printing one line per
candidate: its index, sketch, seconds (or TIMEOUT / the error) and its knob values. Finds the
candidates that bound a build pool's batch; nothing is written.
"""

from __future__ import annotations

import json
import subprocess
import sys


def main(argv: list[str]) -> int:
    if len(argv) < 4:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    import ansor
    from ansor.frontend import workloads

    from bench.common import random_inputs
    from bench.compile_ab import _CHILD

    wl, seed, n = argv[1], int(argv[2]), int(argv[3])
    timeout = float(argv[4]) if len(argv) > 4 else 90.0
    task = ansor.create_task(workloads.get(wl), name=wl, target="cuda")
    for i, inp in enumerate(random_inputs(task, n, seed)):
        values = json.dumps(inp.schedule.values())
        try:
            out = subprocess.run([sys.executable, "-c", _CHILD, wl, inp.schedule.sketch, values],
                                 capture_output=True, text=True, timeout=timeout)
            lines = out.stdout.strip().splitlines()
            err = out.stderr.strip().splitlines()
            result = lines[-1] if out.returncode == 0 and lines else f"exit {out.returncode}: {err[-1][:120] if err else ''}"
        except subprocess.TimeoutExpired:
            result = "TIMEOUT"
        print(i, inp.schedule.sketch, result, values, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Reliability benchmark: faults injected into real tuning runs, SIGKILL + resume, and what survived.

    python -m bench.reliability [--trials 48] [--kills 4]

Part 1 tunes a small matmul with crashing (abort, segfault), hanging and wrong-answer candidates
injected (test hook ANSOR_INJECT_FAULT) and counts records per error code. Part 2 runs
`ansor tune` with a synthetic measurer, kills it with SIGKILL at random instants, resumes, and
compares with an uninterrupted run. Prints one table; every "must be 0" row must be 0.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path


def faults(trials: int, workdir: Path) -> tuple[int, Counter, int]:
    env = dict(os.environ, ANSOR_ALLOW_FAULTS="1", ANSOR_INJECT_FAULT="abort:5,segv:5,hang:6,wrong:5")
    log = workdir / "faults.jsonl"
    cmd = [sys.executable, "-m", "ansor.cli", "tune", "--workload", "matmul-64", "--trials", str(trials),
           "--batch-size", "8", "--search", "random", "--timeout", "4", "--repeat", "1", "--min-repeat-ms", "1", "--log", str(log)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    import ansor

    recs = ansor.load_records(log)
    return p.returncode, Counter(r.error or "ok" for r in recs), len(recs)


def kill_resume(trials: int, kills: int, workdir: Path, seed: int) -> dict[str, int]:
    import ansor

    env = dict(os.environ, ANSOR_SYNTHETIC_MEASURE_DELAY="0.04", ANSOR_ALLOW_TEST_HOOKS="1")

    def cmd(log: Path) -> list[str]:
        return [sys.executable, "-m", "ansor.cli", "tune", "--workload", "matmul-256", "--trials", str(trials),
                "--batch-size", "4", "--seed", "9", "--search", "random", "--log", str(log)]

    ref_log, log = workdir / "ref.jsonl", workdir / "killed.jsonl"
    subprocess.run(cmd(ref_log), env=env, check=True, capture_output=True)
    rng = random.Random(seed)
    done_kills = 0
    for _ in range(kills):
        p = subprocess.Popen(cmd(log), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.5, 2.5))
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            done_kills += 1
        p.wait()
    final = subprocess.run(cmd(log), env=env, capture_output=True, check=False)
    ref = {r.key for r in ansor.load_records(ref_log)}
    got = [r.key for r in ansor.load_records(log)]
    best_ref = min(ansor.load_records(ref_log), key=lambda r: r.latency).key
    best_got = min(ansor.load_records(log), key=lambda r: r.latency).key
    return {
        "kills (SIGKILL)": done_kills,
        "tuner crashes after resume (must be 0)": int(final.returncode != 0),
        "records lost (must be 0)": len(ref - set(got)),
        "programs measured twice (must be 0)": len(got) - len(set(got)),
        "best differs from uninterrupted run (must be 0)": int(best_ref != best_got),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=96)
    ap.add_argument("--kills", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        rc, codes, n = faults(24, work)
        rows = [("candidates measured with faults injected", n),
                ("  failed: crash (abort/segfault in worker)", codes["crash"]),
                ("  failed: timeout (hang)", codes["timeout"]),
                ("  failed: wrong answer", codes["wrong_answer"]),
                ("  measured fine", codes["ok"]),
                ("tuner crashes (must be 0)", int(rc != 0)),
                ("records lost (must be 0)", 24 - n)]
        rows += list(kill_resume(args.trials, args.kills, work, args.seed).items())
    width = max(len(k) for k, _ in rows)
    print(f"reliability on {os.uname().nodename}, {os.cpu_count()} cores")
    for k, v in rows:
        print(f"{k:<{width}}  {v:>5}")


if __name__ == "__main__":
    if not __package__:
        sys.exit("run from the repository root as a module: python -m bench.reliability [--help]")
    main()

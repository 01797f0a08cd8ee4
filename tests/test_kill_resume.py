"""SIGKILL a real `ansor tune` (real `LocalMeasurer`, learned search): no measurement worker
outlives it, and resuming loses and repeats no record."""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import ansor

TRIALS = 40
_DEBRIS = ("ANSOR_SYNTHETIC_MEASURE_DELAY", "ANSOR_INJECT_FAULT", "ANSOR_ALLOW_FAULTS")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DEBRIS}  # real measurement, no faults
    return {**env, **extra}


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, process group) of `pid`, or None when it no longer exists."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[2])


def _alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")  # a zombie has ended


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    for t in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            out |= {int(c) for c in t.read_text().split()}
        except OSError:
            pass
    return out


def _group(pgid: int) -> set[int]:
    """Live processes of process group `pgid` (the tuner started in a session of its own, so its
    workers -- orphaned or not -- stay in it; other test runs on the machine are not)."""
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            st = _stat(int(d.name))
            if st is not None and st[2] == pgid and st[0] not in ("Z", "X"):
                out.add(int(d.name))
    return out


def _gone_within(pids: set[int], timeout_s: float) -> set[int]:
    """The `pids` still alive after up to `timeout_s` seconds."""
    deadline = time.monotonic() + timeout_s
    left = {p for p in pids if _alive(p)}
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = {p for p in left if _alive(p)}
    return left


def _reap_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def test_worker_dies_with_its_sigkilled_parent(tmp_path) -> None:
    """The failure mode itself: a parent whose worker is stuck in a hung candidate is SIGKILLed."""
    parent_src = textwrap.dedent("""
        import os, sys
        from ansor.frontend import workloads
        from ansor.measure.measurer import RunOptions, _Worker
        from ansor.core.task import create_task

        task = create_task(workloads.get("matmul-64"), name="matmul-64")
        opts = RunOptions(repeat=1, min_repeat_ms=1.0).__dict__.copy()
        ref = os.path.join(sys.argv[1], "ref.npz")
        w = _Worker(1, 0)
        ans = w.request({"kind": "reference", "task": task.to_json(), "opts": opts, "ref_path": ref}, 120)
        assert ans["error"] is None, ans
        print(w.proc.pid, flush=True)
        # ANSOR_INJECT_FAULT=hang: the worker builds and runs the candidate, then sleeps forever.
        w.request({"kind": "measure", "task": task.to_json(), "script": None, "opts": opts,
                   "ref_path": ref}, 1e6)
    """)
    parent = subprocess.Popen([sys.executable, "-c", parent_src, str(tmp_path)], stdout=subprocess.PIPE,
                              env=_env(ANSOR_ALLOW_FAULTS="1", ANSOR_INJECT_FAULT="hang"),
                              start_new_session=True, text=True)
    worker = -1
    try:
        line = parent.stdout.readline()
        assert line.strip().isdigit(), f"the parent did not start its worker (exit {parent.wait()})"
        worker = int(line)
        assert "ansor.measure.worker" in _cmdline(worker) and _stat(worker)[1] == parent.pid
        time.sleep(1.5)  # the worker is in the hung candidate by now (or still building it: as bad)
        assert _alive(worker), "the worker should be busy in the hung candidate"
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert not _gone_within({worker}, 3.0), f"worker {worker} outlived its SIGKILLed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        _reap_group(parent.pid)  # leave no orphan behind, even when the test fails


def _tune_cmd(log: Path) -> list[str]:
    # Learned search (the default) with real measurements of a tiny matmul: ~0.15 s a candidate.
    return [sys.executable, "-m", "ansor.cli", "tune", "--workload", "matmul-64", "--trials", str(TRIALS),
            "--batch-size", "8", "--repeat", "1", "--min-repeat-ms", "1", "--seed", "7", "--log", str(log),
            "--json"]


def test_sigkilled_tuner_leaves_no_worker_and_resumes_exactly(tmp_path) -> None:
    log = tmp_path / "killed.jsonl"
    rng = random.Random(11)
    kills = 0
    killed_workers = 0
    for _ in range(3):
        p = subprocess.Popen(_tune_cmd(log), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        try:
            time.sleep(rng.uniform(1.5, 6.0))
            if p.poll() is not None:
                continue  # finished before the kill (a slow start or a fast machine): nothing to check
            workers = {c for c in _children(p.pid) if "ansor.measure.worker" in _cmdline(c)}
            os.kill(p.pid, signal.SIGKILL)  # the tuner only, not its group
            p.wait()
            kills += 1
            killed_workers += len(workers)
            left = _gone_within(workers | _group(p.pid), 3.0)
            assert not left, f"worker(s) outlived the SIGKILLed tuner: {[(c, _cmdline(c)) for c in left]}"
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            _reap_group(p.pid)
    assert kills >= 1 and killed_workers >= 1, (kills, killed_workers)

    done = subprocess.run(_tune_cmd(log), env=_env(), check=True, capture_output=True, text=True, timeout=300)
    events = [json.loads(ln) for ln in done.stdout.splitlines() if ln.startswith("{")]
    start = next(e for e in events if e["event"] == "start")
    end = next(e for e in events if e["event"] == "end")
    assert 0 < start["resumed"] <= TRIALS  # == when the last killed run had measured them all

    # Every line parses but torn ones (a writer killed mid-line: at most one per kill).
    lines = [ln for ln in log.read_text().splitlines() if ln.strip()]
    parsed = []
    for ln in lines:
        try:
            parsed.append(json.loads(ln))
        except json.JSONDecodeError:
            pass
    assert len(lines) - len(parsed) <= kills
    keys = [d["key"] for d in parsed]
    assert len(keys) == len(set(keys)), "a program was measured twice"
    assert len(set(keys)) == TRIALS, "records lost or extra"
    recs = ansor.load_records(log)
    assert [r.key for r in recs] == keys

    ok = [r for r in recs if r.error is None and math.isfinite(r.latency)]
    assert ok, "no candidate measured successfully"
    best = min(r.latency for r in ok)
    assert end["best_latency"] == best
    assert end["best_key"] in {r.key for r in ok if r.latency == best}

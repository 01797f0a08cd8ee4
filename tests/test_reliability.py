"""Fault injection in real tuning runs, and a fuzz of the builder with random knob values."""

from __future__ import annotations

import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import ansor
from ansor.frontend import workloads
from ansor.space.schedule import Schedule, validate
from ansor.measure.measurer import LocalMeasurer, MeasureInput, RunOptions
from ansor.targets import generate_sketches


def test_tuning_run_survives_crashes_hangs_and_wrong_answers(monkeypatch, tmp_path, matmul64) -> None:
    monkeypatch.setenv("ANSOR_ALLOW_FAULTS", "1")
    monkeypatch.setenv("ANSOR_INJECT_FAULT", "abort:5,segv:5,hang:6,wrong:5")
    log = tmp_path / "faults.jsonl"
    res = ansor.tune(matmul64, trials=24, log_path=log, seed=4, batch_size=8, search="random",
                     run_options=RunOptions(repeat=1, min_repeat_ms=1.0, timeout_s=4.0))
    recs = ansor.load_records(log)
    assert len(recs) == 24 and res.trials == 24
    codes = Counter(r.error for r in recs)
    assert codes["crash"] >= 1 and codes["timeout"] >= 1 and codes["wrong_answer"] >= 1, codes
    assert codes[None] >= 1, codes  # and the healthy candidates still got measured
    assert res.best is not None and res.best.error is None
    crash = next(r for r in recs if r.error == "crash")
    assert "worker" in crash.result.error_msg


def test_fuzz_builder_with_1000_random_knob_assignments() -> None:
    task = ansor.create_task(workloads.matmul(4, 8, 6))
    sk = generate_sketches(task)[0]
    rng = random.Random(2024)
    inputs = []
    for i in range(1000):
        if i % 10 == 9:  # values outside the options too
            v = {k.name: rng.choice([0, -1, 3, 7, 1 << 20]) for k in sk.knobs}
        else:
            v = {k.name: rng.choice(k.options) for k in sk.knobs}
        try:
            script = sk.script(v)
        except (KeyError, ValueError):
            # The sketch refuses values outside a knob's options: feed the raw template with the
            # value spliced in anyway, so the builder sees truly invalid scripts.
            script = sk.script(None).replace("options = [", f"= {abs(v['op1.unroll'])} : i64 from options = [", 1)
        inputs.append(MeasureInput(task, Schedule.of(sk.name, v), script))
    halves = [inputs[0::2], inputs[1::2]]
    measurers = [LocalMeasurer(RunOptions(timeout_s=30.0)) for _ in halves]
    try:
        with ThreadPoolExecutor(2) as pool:
            results = [r for part in pool.map(lambda mi: mi[0].build_only(mi[1]), zip(measurers, halves)) for r in part]
    finally:
        for m in measurers:
            m.close()
    assert len(results) == 1000
    codes = Counter(r.error.value if r.error else "ok" for r in results)
    assert codes["ok"] > 0 and sum(codes.values()) == 1000
    # every valid annotation builds; failures come only from invalid ones
    for inp, res in zip(halves[0] + halves[1], results, strict=True):
        if validate(sk, inp.schedule.values()) is None:
            assert res.error is None, (inp.schedule, res.error_msg)
        else:
            assert res.error is None or res.error_msg

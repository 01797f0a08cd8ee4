"""Search + tuning loop with a fake measurer: determinism, dedup, resume, failures as records."""

from __future__ import annotations

from ansor.tuning.records import load_records
from ansor.tuning.tuner import tune


def test_random_search_improves_and_never_repeats(tmp_path, matmul_big, fake_measurer) -> None:
    res = tune(matmul_big, trials=48, log_path=tmp_path / "a.jsonl", seed=3, batch_size=8, search="random", measurer=fake_measurer)
    assert res.trials == 48
    # the untuned program (measured by baseline()) is the first trial, logged as the skip sketch
    assert len(fake_measurer.calls) == len(set(fake_measurer.calls)) == 47
    recs = load_records(tmp_path / "a.jsonl")
    assert len(recs) == 48
    assert recs[0].schedule.sketch == "skip" and recs[0].latency == 1.0
    assert res.best is not None and res.best.latency == min(r.latency for r in recs)
    assert res.speedup > 1.0  # fake baseline is 1 s


def test_same_seed_same_log(tmp_path, matmul_big, make_fake) -> None:
    FakeMeasurer = make_fake
    def run(name: str) -> list[tuple[str, float]]:
        tune(matmul_big, trials=24, log_path=tmp_path / name, seed=11, batch_size=8, search="random", measurer=FakeMeasurer())
        return [(r.key, r.latency) for r in load_records(tmp_path / name)]

    assert run("x.jsonl") == run("y.jsonl")
    other = tune(matmul_big, trials=24, log_path=tmp_path / "z.jsonl", seed=12, batch_size=8, search="random", measurer=FakeMeasurer())
    assert other.trials == 24
    assert [r.key for r in load_records(tmp_path / "z.jsonl")] != [k for k, _ in run("w.jsonl")]


def test_resume_counts_prior_trials_and_skips_measured(tmp_path, matmul_big, make_fake) -> None:
    FakeMeasurer = make_fake
    log = tmp_path / "r.jsonl"
    m1 = FakeMeasurer()
    first = tune(matmul_big, trials=16, log_path=log, seed=5, batch_size=8, search="random", measurer=m1)
    m2 = FakeMeasurer()
    second = tune(matmul_big, trials=40, log_path=log, seed=5, batch_size=8, search="random", measurer=m2)
    assert second.trials == 24  # only the missing ones
    assert not set(m1.calls) & set(m2.calls)
    recs = load_records(log)
    assert len(recs) == 40 and len({r.key for r in recs}) == 40
    assert second.best.latency <= first.best.latency


def test_failed_candidates_are_records_not_exceptions(tmp_path, matmul_big, make_fake) -> None:
    FakeMeasurer = make_fake
    m = FakeMeasurer(fail_t3=1)
    res = tune(matmul_big, trials=32, log_path=tmp_path / "f.jsonl", seed=2, batch_size=8, search="random", measurer=m)
    recs = load_records(tmp_path / "f.jsonl")
    failed = [r for r in recs if r.error]
    assert res.errors == len(failed) > 0
    assert all(r.error == "compile" and r.result.error_msg == "injected" for r in failed)
    assert res.best is not None and res.best.error is None


def test_log_from_another_target_is_refused(tmp_path, matmul_big, make_fake) -> None:
    import dataclasses

    import pytest
    from ansor.tuning.records import LogError

    log = tmp_path / "t.jsonl"
    tune(matmul_big, trials=4, log_path=log, seed=1, batch_size=4, search="random", measurer=make_fake())
    other = dataclasses.replace(matmul_big, target="cuda")
    with pytest.raises(LogError, match="for target 'cpu', not 'cuda'"):
        tune(other, trials=4, log_path=log, seed=1, batch_size=4, search="random", measurer=make_fake())


def test_learned_search_end_to_end_with_real_features(tmp_path, matmul_big, make_fake) -> None:
    """Evolutionary search + XGBoost on features extracted (in worker processes) from real scripts;
    the model trains once the log passes the few-shot threshold, and resume retrains from it."""
    from ansor.search.evolution import EvolutionarySearch

    log = tmp_path / "learned.jsonl"
    m = make_fake()
    opts = {"population": 64, "generations": 2}
    res = tune(matmul_big, trials=112, log_path=log, seed=0, batch_size=56, measurer=m, search="learned",
               search_options=opts)
    assert res.trials == 112 and len(set(m.calls)) == 111  # + the untuned program
    m2 = make_fake()
    res2 = tune(matmul_big, trials=140, log_path=log, seed=0, batch_size=28, measurer=m2, search="learned",
                search_options=opts)
    assert res2.trials == 28 and not set(m.calls) & set(m2.calls)
    assert res2.best.latency <= res.best.latency
    assert EvolutionarySearch is not None


def test_untuned_program_competes(tmp_path, matmul_big, make_fake) -> None:
    """When every schedule is slower than the untouched program, the best record is the untuned one
    (logged once per log as the `skip` sketch's trial), so compile never builds something slower."""
    FakeMeasurer = make_fake

    class FastUntuned(FakeMeasurer):
        def baseline(self, task):
            from ansor.measure.measurer import MeasureResult

            return MeasureResult(costs=(1e-6,))

    res = tune(matmul_big, trials=16, log_path=tmp_path / "u.jsonl", seed=1, batch_size=8, search="random",
               measurer=FastUntuned())
    assert res.best is not None and res.best.schedule.sketch == "skip" and res.speedup == 1.0
    res2 = tune(matmul_big, trials=24, log_path=tmp_path / "u.jsonl", seed=1, batch_size=8, search="random",
                measurer=FastUntuned())  # resumed: the untuned record is not logged twice
    recs = load_records(tmp_path / "u.jsonl")
    assert len(recs) == 24 and sum(r.schedule.sketch == "skip" for r in recs) == 1
    assert res2.best.schedule.sketch == "skip"


def test_resume_ignores_records_that_are_not_schedules_of_their_sketch(tmp_path, matmul_big, make_fake,
                                                                       caplog) -> None:
    """A rule change may give a sketch's name to another sketch (a dropped packed sketch renumbers
    the rest): a record whose knobs do not validate against today's sketch of its name is not
    counted, even from the current generator version."""
    import dataclasses
    import logging

    from ansor.space.schedule import Schedule
    from ansor.tuning.records import RecordWriter

    log = tmp_path / "r.jsonl"
    tune(matmul_big, trials=8, log_path=log, seed=5, batch_size=8, search="random", measurer=make_fake())
    recs = load_records(log)
    good = next(r for r in recs if r.schedule.sketch != "skip")
    foreign = dataclasses.replace(good, schedule=Schedule.of(good.schedule.sketch,
                                                             {**good.schedule.values(), "op9.d0.t1": 1}), key="foreign")
    with RecordWriter(log) as w:
        w.append(foreign)
    with caplog.at_level(logging.WARNING):
        res = tune(matmul_big, trials=12, log_path=log, seed=5, batch_size=8, search="random", measurer=make_fake())
    assert "not a valid schedule of sketch" in caplog.text
    assert res.trials == 12 - 8  # the 8 valid records count, the foreign one does not

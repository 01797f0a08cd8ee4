"""The builder / runner split (measure/builder.py, runner.py, local.py) on this machine."""

from __future__ import annotations

from collections import Counter

import ansor
import pytest
from ansor.measure.builder import BuildResult, InlineBuilder, LocalBuilder
from ansor.measure.measurer import LocalMeasurer, MeasureError, MeasureInput, RunOptions
from ansor.measure.runner import LocalRunner
from ansor.search.policy import RandomSearch
from ansor.targets import generate_sketches

FAST = RunOptions(threads=1, repeat=1, min_repeat_ms=2.0, timeout_s=20.0)


def _inputs(task, n: int, seed: int = 0) -> list[MeasureInput]:
    sketches = generate_sketches(task)
    by = {s.name: s for s in sketches}
    return [MeasureInput(task, s, by[s.sketch].script(s.values()))
            for s in RandomSearch(sketches, seed=seed, measured=set()).next_batch(n)]


def test_local_builder_artifacts_run_verified_on_a_runner(matmul64) -> None:
    inputs = _inputs(matmul64, 4)
    builder, runner = LocalBuilder(2, FAST), LocalRunner(FAST)
    try:
        builds = builder.build(inputs)
        assert all(b.error is None and b.artifact and b.build_s > 0 for b in builds), builds
        results = [runner.run(i, b) for i, b in zip(inputs, builds, strict=True)]
    finally:
        builder.close()
        runner.close()
    assert all(r.error is None and r.costs for r in results), [r.error_msg for r in results]
    assert all(r.build_s >= b.build_s for r, b in zip(results, builds, strict=True))  # builder's + JIT


def test_failures_stay_results_on_both_halves(matmul64) -> None:
    bad = MeasureInput(matmul64, _inputs(matmul64, 1)[0].schedule, "this is not a transform script")
    builder, runner = LocalBuilder(1, FAST), LocalRunner(FAST)
    try:
        (b,) = builder.build([bad])
        assert b.error in (MeasureError.APPLY, MeasureError.COMPILE) and b.artifact is None
        # A failed build is passed through without touching the runner's worker.
        res = runner.run(bad, b)
        assert res.error == b.error and runner.worker.proc is None
        # A torn artifact is a compile error of the runner, not an exception.
        good = _inputs(matmul64, 1)[0]
        torn = runner.run(good, BuildResult(artifact=b"\x00torn"))
        assert torn.error == MeasureError.COMPILE and "artifact" in torn.error_msg
    finally:
        builder.close()
        runner.close()
    assert InlineBuilder().build([bad]) == [BuildResult()]
    with pytest.raises(ValueError, match="at least one worker"):
        LocalBuilder(0)


@pytest.mark.parametrize("runners", [1, 2])
def test_builders_ahead_keep_verification_and_stream_every_result(monkeypatch, matmul64, runners: int) -> None:
    """With 2 builders (and 1 or 2 runners sharing the device) every candidate is still checked
    against the reference (injected wrong answers are caught) and reported once through
    on_result; 2 runners load one candidate while the other measures, and report in order."""
    monkeypatch.setenv("ANSOR_ALLOW_FAULTS", "1")
    monkeypatch.setenv("ANSOR_INJECT_FAULT", "wrong:3")
    inputs = _inputs(matmul64, 10, seed=3)
    seen: list[int] = []
    with_builders = LocalMeasurer(FAST, builders=2, runners=runners)
    inline = LocalMeasurer(FAST)
    try:
        ahead = with_builders.measure(inputs, on_result=lambda i, r: seen.append(i))
        plain = inline.measure(inputs)
    finally:
        with_builders.close()
        inline.close()
    assert sorted(seen) == list(range(10)) and (runners == 1 or seen == list(range(10)))
    if runners == 2:
        assert all(r.phases.keys() >= {"load", "verify"} for r in ahead)
        assert len(with_builders.runners) == 2
        assert all(r.worker.proc is None or r.worker.proc.poll() is not None for r in with_builders.runners)
    codes = Counter(r.error for r in ahead)
    assert codes[MeasureError.WRONG_ANSWER] >= 1 and codes[None] >= 1, codes
    assert [r.error for r in ahead] == [r.error for r in plain]  # the same verdicts either way


def test_tune_with_builders_logs_every_trial(tmp_path, matmul64) -> None:
    log = tmp_path / "b.jsonl"
    res = ansor.tune(matmul64, trials=6, batch_size=3, log_path=log, search="random", builders=2, run_options=FAST)
    recs = ansor.load_records(log)
    assert res.trials == 6 and len({r.key for r in recs}) == 6 and res.best is not None
    assert all(r.provenance["measurer"] == "local" and r.provenance["node"] for r in recs)


def test_cuda_builds_are_ptx_artifacts_made_without_a_gpu(monkeypatch) -> None:
    """A CUDA candidate builds in a builder worker on any machine (script -> PTX + host LLVM
    dialect, bytecode naming its architecture); a runner on another architecture refuses it with
    one line, and a torn one is unreadable, not a crash."""
    monkeypatch.setenv("ANSOR_CUDA_BINARY", "ptx")  # the builder workers' setting (they inherit it)
    monkeypatch.setattr("ansor.config.CUDA_BINARY", "ptx")
    from ansor.core.mlir import LoweringError
    from ansor.core.task import create_task
    from ansor.frontend import workloads
    from ansor.targets import get_target
    from ansor.targets.cuda.lowering import ARCH_ATTR, build_task_cuda, load_task_cuda

    task = create_task(workloads.get("matmul-64"), name="matmul-64", target="cuda")
    target = get_target("cuda")
    assert target.supports_artifacts and target.default_builders() >= 1
    assert get_target("cpu").default_builders() == 0
    builder = LocalBuilder(2, FAST)
    try:
        builds = builder.build(_inputs(task, 2))
    finally:
        builder.close()
    assert all(b.error is None and b.artifact for b in builds), [b.error_msg for b in builds]
    assert ARCH_ATTR.encode() in builds[0].artifact and b".entry" in builds[0].artifact  # PTX inside
    foreign = build_task_cuda(task, None, arch="sm_80")
    from ansor.targets.cuda.runtime import device_arch

    if device_arch() != "sm_80":
        with pytest.raises(LoweringError, match="artifact built for sm_80"):
            load_task_cuda(task, foreign)
    with pytest.raises(LoweringError, match="unreadable artifact"):
        load_task_cuda(task, foreign[:64])


def test_cuda_builds_assemble_a_cubin_where_ptxas_is_found(monkeypatch) -> None:
    """With a ptxas (`auto`), the builder assembles the PTX: the artifact embeds a cubin (an ELF
    object) and no PTX, so the runner's module load does no JIT. `cubin` without a ptxas is a
    one-line build error, `auto` without one falls back to PTX."""
    from ansor.core.mlir import LoweringError
    from ansor.core.task import create_task
    from ansor.frontend import workloads
    from ansor.targets.cuda import lowering

    task = create_task(workloads.get("matmul-64"), name="matmul-64", target="cuda")
    if lowering.find_ptxas() is not None:
        monkeypatch.setattr("ansor.config.CUDA_BINARY", "auto")
        from mlir import ir

        art = lowering.build_task_cuda(task, None, arch="sm_90")
        with ir.Context():
            text = str(ir.Module.parse(art))
        assert "bin = \"\\7FELF" in text and "assembly = " not in text
    monkeypatch.setattr(lowering, "find_ptxas", lambda: None)
    monkeypatch.setattr("ansor.config.CUDA_BINARY", "cubin")
    with pytest.raises(LoweringError, match="no ptxas found"):
        lowering.build_task_cuda(task, None, arch="sm_90")
    monkeypatch.setattr("ansor.config.CUDA_BINARY", "auto")
    assert b".entry" in lowering.build_task_cuda(task, None, arch="sm_90")


def test_runners_reach_the_measurer(monkeypatch) -> None:
    """`TuningOptions.runners` (CLI `--runners`) sizes the local measurer's runner pool; unset, the
    target's default; below 1, a clear error."""
    from ansor.measure.local import LocalMeasurer
    from ansor.targets import get_target
    from ansor.tuning.options import TuningOptions

    assert get_target("cpu").default_runners() == 1 and get_target("cuda").default_runners() >= 1
    for runners, want in ((None, get_target("cpu").default_runners()), (2, 2)):
        m = TuningOptions(runners=runners, builders=0).create_measurer("cpu")
        try:
            assert isinstance(m, LocalMeasurer) and len(m.runners) == want
        finally:
            m.close()
    with pytest.raises(ValueError, match="runners must be >= 1"):
        TuningOptions(runners=0)

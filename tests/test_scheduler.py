"""Task scheduler: Ansor's gradient estimate by hand, budget allocation with a fake measurer."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from ansor.frontend import workloads
from ansor.measure.measurer import MeasureInput, Measurer, MeasureResult
from ansor.tuning.records import load_records
from ansor.tuning.scheduler import SchedulerTable, TaskScheduler
from ansor.core.task import SearchTask, create_task


def _task(name: str, text: str, weight: int = 1) -> SearchTask:
    t = create_task(text, name=name)
    return SearchTask(t.name, t.func_name, t.ir, t.inputs, t.outputs, t.flops, t.hash, t.target, weight)


@pytest.fixture(scope="module")
def two_tasks() -> list[SearchTask]:
    # Different kinds of anchor (matmul vs batch_matmul): not "similar".
    return [_task("matmul#0", workloads.get("matmul-256x128x512"), 1),
            _task("batch_matmul#1", workloads.get("gmm-1x64x64x64"), 3)]


def test_gradient_matches_hand_computation(two_tasks) -> None:
    s = TaskScheduler(two_tasks, alpha=0.2, beta=2.0, backward_window=3)
    g = np.array([2.0, 1.0])
    hist = [[4.0, 3.0, 2.5, 2.2, 2.0], [1.2, 1.0]]
    grads = s.gradients(g, [2, 4], hist)
    # task 0: weight 1, backward (2.0 - 3.0) / 3, forward (2 - 2/2) - 2 = -1
    assert grads[0] == pytest.approx(1 * (0.2 * (-1 / 3) + 0.8 * -1.0), rel=1e-3)
    # task 1: weight 3, history too short for the backward term, forward (1 - 1/4) - 1
    assert grads[1] == pytest.approx(3 * (0.8 * -0.25), rel=1e-3)


def test_backward_gradient_ignores_the_untuned_program(two_tasks) -> None:
    """history[0] is the untuned latency: three rounds after it are not yet a backward window."""
    s = TaskScheduler(two_tasks, alpha=0.2, beta=2.0, backward_window=3)
    g = np.array([0.9, 1.0])
    grads = s.gradients(g, [3, 1], [[80.0, 1.0, 0.95, 0.9], [50.0, 1.0]])
    assert grads[0] == pytest.approx(0.8 * -0.3, rel=1e-3)  # forward (0.9 - 0.9/3) - 0.9 only
    grads = s.gradients(g, [4, 1], [[80.0, 1.2, 1.0, 0.95, 0.9], [50.0, 1.0]])
    assert grads[0] == pytest.approx(0.2 * (0.9 - 1.2) / 3 + 0.8 * -0.225, rel=1e-3)


def test_similar_tasks_bound_the_forward_estimate() -> None:
    a = _task("matmul#0", workloads.get("matmul-64"))
    b = _task("matmul#1", workloads.get("matmul-64x64x128"))
    s = TaskScheduler([a, b], alpha=0.0, beta=2.0)
    g = np.array([10 * a.flops / b.flops, 1.0])  # task 0 runs at 1/10 of task 1's throughput
    grads = s.gradients(g, [2, 2], [[g[0]], [g[1]]])
    # optimistic next latency of task 0: min(g/2, beta * its flops at task 1's speed) = 2 * flops_a / flops_b
    expected = 2.0 * a.flops / b.flops - g[0]
    assert grads[0] == pytest.approx(expected, rel=1e-3)


def test_user_objective_enters_through_the_chain_rule(two_tasks) -> None:
    s = TaskScheduler(two_tasks, objective=lambda g: float(g[0]), alpha=0.0)  # only task 0 matters
    grads = s.gradients(np.array([2.0, 1.0]), [2, 2], [[2.0], [1.0]])
    assert grads[1] == pytest.approx(0.0, abs=1e-9)
    assert grads[0] < 0


class ScaledMeasurer(Measurer):
    """Fake latencies: a per-task scale x a deterministic function of the schedule (no compiler)."""

    def __init__(self, scale: dict[str, float]) -> None:
        self.scale = scale
        self.count: dict[str, int] = {}

    def baseline(self, task: SearchTask) -> MeasureResult:
        return MeasureResult(costs=(1000 * self.scale[task.hash],))

    def measure(self, inputs: list[MeasureInput], on_result=None) -> list[MeasureResult]:
        out = []
        for i, inp in enumerate(inputs):
            self.count[inp.task.hash] = self.count.get(inp.task.hash, 0) + 1
            v = inp.schedule.values()
            bowl = 1 + sum(abs(math.log2(max(x, 1)) - 3) for k, x in v.items() if not k.endswith("unroll"))
            res = MeasureResult(costs=(self.scale[inp.task.hash] * bowl,))
            out.append(res)
            if on_result is not None:
                on_result(i, res)
        return out


def test_gradient_spends_the_budget_where_the_latency_is(two_tasks, tmp_path) -> None:
    heavy, light = two_tasks[1], two_tasks[0]  # heavy: weight 3, 100x the latency scale
    scale = {heavy.hash: 1e-1, light.hash: 1e-3}
    runs = {}
    for strategy in ("gradient", "round-robin"):
        m = ScaledMeasurer(scale)
        res = TaskScheduler(two_tasks, strategy=strategy, seed=1).tune(
            96, batch_size=8, measurer=m, log_path=tmp_path / f"{strategy}.jsonl", search="random")
        assert res.trials == 96
        assert sum(m.count.values()) == 94  # + each task's untuned program, measured by start()
        runs[strategy] = (m.count, res)
    grad_counts, grad = runs["gradient"]
    rr_counts, rr = runs["round-robin"]
    assert abs(rr_counts[heavy.hash] - rr_counts[light.hash]) <= 8  # alternating rounds of 8
    assert grad_counts[heavy.hash] > 2 * grad_counts[light.hash]
    # each task's random search draws the same sequence under both strategies, so more rounds
    # for the heavy task can only improve it
    h = two_tasks.index(heavy)
    assert grad.results[h].best.latency <= rr.results[h].best.latency
    # the objective history is non-increasing and ends at the estimate
    objs = [o for _, o in grad.history]
    assert all(b <= a + 1e-12 for a, b in zip(objs, objs[1:], strict=False))
    assert objs[-1] == pytest.approx(grad.estimated_latency())
    # every measured candidate was logged under its own task
    recs = load_records(tmp_path / "gradient.jsonl")
    assert len(recs) == 96
    assert {r.task.hash for r in recs} == {heavy.hash, light.hash}


def test_network_tuning_resumes_from_its_log(two_tasks, tmp_path) -> None:
    """`trials` is a total, the log's records included (as for one task): rerunning a command
    finishes its budget instead of spending a new one."""
    log = tmp_path / "net.jsonl"
    scale = {t.hash: 1e-3 for t in two_tasks}
    TaskScheduler(two_tasks, strategy="round-robin").tune(32, batch_size=8, measurer=ScaledMeasurer(scale),
                                                         log_path=log, search="random")
    m = ScaledMeasurer(scale)
    res = TaskScheduler(two_tasks, strategy="round-robin").tune(48, batch_size=8, measurer=m, log_path=log,
                                                               search="random")
    assert res.trials == 48
    assert [r.trials for r in res.results] == [8, 8]  # this run's share
    assert res.history[0][0] == 32
    keys = [r.key for r in load_records(log)]
    assert len(keys) == len(set(keys)) == 48  # nothing measured twice across the two runs
    # the same command again: its budget is spent, nothing is measured; the progress says why
    out = io.StringIO()
    res = TaskScheduler(two_tasks, strategy="round-robin").tune(48, batch_size=8, measurer=ScaledMeasurer(scale),
                                                               log_path=log, search="random",
                                                               callback=SchedulerTable(out))
    assert [r.trials for r in res.results] == [0, 0] and len(load_records(log)) == 48
    assert "resuming: 48 records already in the log count toward the trial budget" in out.getvalue()


def test_early_stopping_ends_a_flat_run(two_tasks) -> None:
    class Flat(ScaledMeasurer):
        def measure(self, inputs, on_result=None):
            out = [MeasureResult(costs=(1.0,)) for _ in inputs]
            for i, r in enumerate(out):
                if on_result is not None:
                    on_result(i, r)
            return out

    scale = {t.hash: 1.0 for t in two_tasks}
    res = TaskScheduler(two_tasks, early_stopping=16).tune(200, batch_size=8, measurer=Flat(scale), search="random")
    assert res.trials < 200


def test_bad_strategy_is_a_clear_error(two_tasks) -> None:
    with pytest.raises(ValueError, match="unknown task scheduling strategy"):
        TaskScheduler(two_tasks, strategy="fastest-first")


def test_transfer_hands_a_tasks_best_schedules_to_its_sibling(tmp_path) -> None:
    """Two matmuls of different shapes: with transfer, the second task's first round measures
    the first task's fastest schedules adapted to its shape; the ablation switch turns that off."""
    import random

    from ansor.space.search_space import RAGGED_PROB
    from ansor.targets import generate_sketches

    tasks = [_task("matmul#0", workloads.get("matmul-256x128x512")),
             _task("matmul#1", workloads.get("matmul-96x128x384"))]
    scale = {t.hash: 1e-3 for t in tasks}

    def feats(schedules):
        return [np.log2(np.maximum([v for _, v in s.knobs], 1)).astype(np.float32)[None, :] for s in schedules]

    first_batch = {}
    for transfer in (True, False):
        log = tmp_path / f"{transfer}.jsonl"
        TaskScheduler(tasks, strategy="round-robin", seed=0).tune(
            24, batch_size=8, measurer=ScaledMeasurer(scale), log_path=log, cost_model="random",
            features_fn=feats, search_options={"population": 64, "generations": 1}, transfer=transfer)
        recs = [r for r in load_records(log) if r.schedule.sketch != "skip"]
        first1 = next(i for i, r in enumerate(recs) if r.task.hash == tasks[1].hash)
        # the donors: what the first task had measured when the second one started
        t0 = sorted((r for r in recs[:first1] if r.task.hash == tasks[0].hash), key=lambda r: r.latency)
        info = {s.name: s.search_space(RAGGED_PROB) for s in generate_sketches(tasks[1]) if s.stages}
        adapted = {info[r.schedule.sketch].adapt(r.schedule.values(), random.Random(0)) for r in t0[:4]}  # ties
        first_batch[transfer] = [r.schedule for r in recs if r.task.hash == tasks[1].hash][:8]
        hits = sum(s in adapted for s in first_batch[transfer])
        assert (hits >= 2) if transfer else (hits == 0), (transfer, hits)


def test_resumed_gradient_run_skips_the_warmup_of_tuned_tasks(two_tasks, tmp_path) -> None:
    """A resumed run rebuilds each task's rounds from the log instead of giving every task a
    warm-up round again: the budget goes where the latency is from the first round."""
    heavy, light = two_tasks[1], two_tasks[0]
    scale = {heavy.hash: 1e-1, light.hash: 1e-3}
    log = tmp_path / "net.jsonl"
    TaskScheduler(two_tasks, strategy="gradient", seed=1).tune(48, batch_size=8, measurer=ScaledMeasurer(scale),
                                                                log_path=log, search="random")
    m = ScaledMeasurer(scale)
    res = TaskScheduler(two_tasks, strategy="gradient", seed=1).tune(72, batch_size=8, measurer=m, log_path=log,
                                                                      search="random")
    assert res.trials == 72  # the log's 48 and this run's 24
    assert m.count.get(heavy.hash, 0) == 24 and light.hash not in m.count  # no warm-up round for light


def test_replayed_history_follows_the_log_in_rounds() -> None:
    from ansor.search.evolution import Schedule
    from ansor.measure.measurer import MeasureResult
    from ansor.tuning.records import Record
    from ansor.tuning.scheduler import _replayed_history

    def rec(sketch: str, ms: float) -> Record:
        return Record("k", None, Schedule.of(sketch, {}), None, MeasureResult(costs=(ms * 1e-3,)))  # type: ignore[arg-type]

    prior = [rec("skip", 9.0)] + [rec("s0", ms) for ms in (8.0, 5.0, 6.0, 4.0, 7.0)]
    assert _replayed_history(prior, 2, 4e-3) == pytest.approx([9e-3, 5e-3, 4e-3, 4e-3])
    assert _replayed_history([rec("skip", 9.0)], 2, 9e-3) == [9e-3]
    assert _replayed_history([], 2, 1.0) == [1.0]


def test_task_whose_untuned_program_fails_gets_no_trials(two_tasks) -> None:
    """Candidates are checked against the untuned program's outputs: a task whose untuned
    program fails can never be measured, so the budget goes to the others, and the estimate is
    unknown (inf, the task named) instead of a made-up number."""
    from ansor.measure.measurer import MeasureError

    broken = two_tasks[0]

    class Broken(ScaledMeasurer):
        def baseline(self, task):
            if task.hash == broken.hash:
                return MeasureResult(error=MeasureError.RUNTIME, error_msg="worker aborted")
            return super().baseline(task)

    m = Broken({t.hash: 1e-3 for t in two_tasks})
    res = TaskScheduler(two_tasks, strategy="gradient").tune(40, batch_size=8, measurer=m, search="random")
    assert m.count.get(broken.hash, 0) == 0
    assert res.trials == 40 and m.count[two_tasks[1].hash] == 39  # + its untuned program
    assert res.failed_tasks() == [broken.name]
    assert res.estimated_latency() == math.inf


def test_small_budget_warms_up_the_largest_tasks_first(two_tasks, tmp_path, caplog) -> None:
    """Too few trials for every task's first round: the task with the largest share of the
    objective (weight x untuned latency) gets its round, whatever its position, and a warning
    says how many tasks stay untuned."""
    heavy, light = two_tasks[1], two_tasks[0]  # task 1: weight 3, 100x the latency scale
    m = ScaledMeasurer({heavy.hash: 1e-1, light.hash: 1e-3})
    with caplog.at_level("WARNING", logger="ansor.tuning.scheduler"):
        res = TaskScheduler(two_tasks, strategy="round-robin").tune(3, batch_size=8, measurer=m, search="random")
    assert res.trials == 3
    assert m.count == {heavy.hash: 1}  # two untuned programs, then one trial, for the heavy task
    assert "1 trials leave 1 of the 2 tasks untuned" in caplog.text


def test_round_size_leaves_room_for_the_untuned_programs(two_tasks) -> None:
    """The untuned programs count as trials: 2 tasks and 12 trials give rounds of 5, so both
    tasks get their warm-up round (rounds of 12 // 2 = 6 would leave the second task 4)."""
    m = ScaledMeasurer({t.hash: 1e-3 for t in two_tasks})
    res = TaskScheduler(two_tasks, strategy="round-robin").tune(12, batch_size=8, measurer=m, search="random")
    assert res.trials == 12
    assert sorted(m.count.values()) == [5, 5]

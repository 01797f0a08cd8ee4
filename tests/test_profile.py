"""Per-call timers inside a compiled model (`targets/cpu/profile.py`, `CompiledNetwork.profile`)."""

from __future__ import annotations

import numpy as np
import pytest

from ansor.compile import compile_network
from ansor.frontend import workloads
from ansor.frontend.partition import extract_tasks


@pytest.fixture(scope="module")
def softmax2():
    """A 2-task model: a softmax split into its reduction group and the rest (`--split`)."""
    net = extract_tasks(workloads.get("softmax-2048x768"), split=True)
    assert len(net.tasks) == 2
    x = np.random.default_rng(0).standard_normal(net.inputs[0].shape).astype(np.float32)
    return net, x


def test_profiled_network_computes_what_the_plain_one_does(softmax2) -> None:
    net, x = softmax2
    plain, profiled = compile_network(net), compile_network(net, profile=True)
    np.testing.assert_array_equal(profiled(x), plain(x))
    with pytest.raises(ValueError, match="profile=True"):
        plain.profile(x)


def test_profile_names_every_task_and_sums_to_the_end_to_end_time(softmax2) -> None:
    net, x = softmax2
    fn = compile_network(net, profile=True)
    prof = min((fn.profile(x, number=20) for _ in range(3)), key=lambda p: p.wall)
    assert [c.callee for c in prof.calls] == list(net.calls)
    assert {c.task for c in prof.calls} == {t.name for t in net.tasks}
    assert all(c.seconds > 0 for c in prof.calls) and all(c.logged is None for c in prof.calls)
    assert prof.in_parent >= 0 and len(prof.parent) == len(net.calls) + 1
    # the segments tile each call: calls + parent ops = the native loop's time per call
    assert prof.in_calls + prof.in_parent == pytest.approx(prof.wall, rel=0.25)
    assert prof.in_calls > 0.5 * prof.wall
    table = prof.table()
    for c in prof.calls:
        assert c.callee in table and c.task in table
    assert "parent ops" in table and "end to end" in table
    again = fn.profile(x, number=5)  # the accumulators restart at every profile
    assert again.in_calls + again.in_parent == pytest.approx(again.wall, rel=0.5)

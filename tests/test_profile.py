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


def test_bench_retimes_the_estimate_and_flags_a_warm_log(tmp_path, capsys, monkeypatch) -> None:
    """`ansor bench MODEL --log LOG --retime` prints the estimate re-timed now, warm and with the
    weights evicted, next to the measured time; without it, a warm log whose model reads more
    weight bytes per call than the last-level cache gets a note naming --cache-flush-weights."""
    from ansor import cli
    from ansor.measure import measurer

    model = tmp_path / "mlp.mlir"  # 4 dense layers (2 tasks), each reading a 256 KiB weight
    model.write_text(workloads.get("mlp-64x256x4"))
    log = tmp_path / "mlp.jsonl"
    assert cli.main(["tune", str(model), "--trials", "4", "--search", "random", "--batch-size", "2",
                     "--log", str(log), "--threads", "1", "--repeat", "1", "--min-repeat-ms", "5"]) == 0
    capsys.readouterr()
    assert cli.main(["bench", str(model), "--log", str(log), "--number", "3", "--retime"]) == 0
    out = capsys.readouterr().out
    retimed = [ln for ln in out.splitlines() if ln.startswith("re-timed estimate")]
    assert len(retimed) == 2 and "warm" in retimed[0] and "weights evicted" in retimed[1], out
    assert all(float(ln.split(": ")[1].split()[0]) > 0 for ln in retimed)
    assert "note: a model call reads" not in out
    monkeypatch.setattr(measurer, "largest_cache_bytes", lambda: 1 << 20)  # 1 MiB of weights per call exceed it
    assert cli.main(["bench", str(model), "--log", str(log), "--number", "3"]) == 0
    assert "note: a model call reads" in capsys.readouterr().out

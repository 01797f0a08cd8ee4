"""A compiled model's intermediates live in a static arena (`targets/cpu/arena.py`)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from mlir import ir

import ansor
from ansor.compile import compile_network
from ansor.core import native
from ansor.core.mlir import run_passes
from ansor.frontend import workloads
from ansor.frontend.partition import extract_tasks
from ansor.targets.cpu.arena import arena_intermediates
from ansor.targets.cpu.lowering import _BUFFERIZE, schedule_callees

MLP = "mlp-16x64x4"  # 4 layers: 3 intermediates between 4 tasks


def _bufferized(net) -> ir.Module:
    module = ir.Module.parse(net.ir)
    schedule_callees(module, {n: net.tasks[i] for n, i in net.calls.items()}, {})
    run_passes(module, _BUFFERIZE, "lower")
    return module


def test_intermediates_share_slots_by_lifetime() -> None:
    net = extract_tasks(workloads.get(MLP))
    assert len(net.calls) >= 4
    native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = _bufferized(net)
        before = str(module).count("memref.alloc(")
        moved = arena_intermediates(module, net.func_name)
        text = str(module)
    assert moved >= 3 and moved == before - text.count("memref.alloc(")
    slots = text.count("memref.global \"private\" @__ansor_arena_")
    # a chain: the buffer read by layer k and the one it writes overlap; the next reuses the first
    assert 2 <= slots < moved
    assert "alignment = 64" in text


def test_arena_network_matches_the_untouched_one_and_stays_correct_across_calls() -> None:
    net = extract_tasks(workloads.get(MLP))
    fn = compile_network(net)
    x = np.random.default_rng(0).standard_normal(net.inputs[0].shape).astype(np.float32)
    from ansor.targets.cpu import lowering

    plain = lowering.compile_network(net.as_task(), {n: net.tasks[i] for n, i in net.calls.items()}, {},
                                     arena=False)
    want = plain.run([x])[0]
    first = fn(x)
    np.testing.assert_allclose(first, want, rtol=1e-5, atol=1e-6)
    second = fn(2 * x)
    assert second is not first  # outputs are fresh arrays, not arena memory
    np.testing.assert_allclose(first, want, rtol=1e-5, atol=1e-6)  # the first result is untouched
    np.testing.assert_allclose(second, plain.run([2 * x])[0], rtol=1e-5, atol=1e-6)


def test_concurrent_calls_are_serialised() -> None:
    net = extract_tasks(workloads.get(MLP))
    fn = compile_network(net)
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(net.inputs[0].shape).astype(np.float32) for _ in range(4)]
    want = [fn(x) for x in xs]
    got: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        for _ in range(20):
            got[i] = fn(xs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        np.testing.assert_array_equal(got[i], want[i])


def test_escaping_buffers_keep_their_allocation() -> None:
    """A buffer returned by the entry function (no out-param rewrite) is not arena memory."""
    text = """
    func.func @f(%n: index) -> memref<16xf32> {
      %a = memref.alloc() : memref<16xf32>
      %b = memref.alloc() : memref<16xf32>
      %c = arith.constant 1.0 : f32
      linalg.fill ins(%c : f32) outs(%b : memref<16xf32>)
      memref.copy %b, %a : memref<16xf32> to memref<16xf32>
      return %a : memref<16xf32>
    }"""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        assert arena_intermediates(module, "f") == 1
        out = str(module)
    assert out.count("memref.alloc(") == 1 and "memref.view" in out


def test_network_estimate_is_the_weighted_sum_of_logged_latencies() -> None:
    from types import SimpleNamespace

    from ansor.cli import network_estimate

    net = extract_tasks(workloads.get(MLP))
    recs = {t.hash: SimpleNamespace(latency=0.001 * (i + 1)) for i, t in enumerate(net.tasks)}
    want = sum(t.weight * 0.001 * (i + 1) for i, t in enumerate(net.tasks))
    assert network_estimate(net, recs) == (pytest.approx(want), 0)
    first = net.tasks[0].hash
    est, missing = network_estimate(net, {h: r for h, r in recs.items() if h != first})
    assert missing == 1 and est == pytest.approx(want - net.tasks[0].weight * 0.001)

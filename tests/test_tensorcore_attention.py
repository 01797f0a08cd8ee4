"""Attention scores + row softmax (the TBS subgraph) on tensor cores (`scores_softmax.py`): which
tasks get the sketch and why others do not, its annotation rules, its PTX (no GPU needed), and on
the GPU host its results against numpy (f32 reference, f16 tolerance)."""

from __future__ import annotations

import random

import numpy as np
import pytest

import ansor
from ansor.core.task import SearchTask
from ansor.frontend import workloads
from ansor.targets import generate_sketches
from ansor.targets.cuda.tensorcore import TcSketch, tc_problem_for


def _task(name: str, text: str | None = None) -> SearchTask:
    return ansor.create_task(text or workloads.get(name), name=name, target="cuda")


def _values(**kw: int) -> dict[str, int]:
    return {f"tc.{k}": v for k, v in {"bm": 64, "bn": 128, "stages": 2, **kw}.items()}


@pytest.fixture(scope="module")
def tbs128() -> SearchTask:
    return _task("tbs-1x128x12x64-f16")


@pytest.fixture(scope="module")
def tbs197() -> SearchTask:
    return _task("tbs-1x197x12x64-f16")


def test_half_tbs_gets_the_tensor_core_sketch_next_to_the_row_sketch(tbs128: SearchTask) -> None:
    assert [s.name for s in generate_sketches(tbs128)] == ["tc0", "r0", "skip"]
    problem, why = tc_problem_for(tbs128)
    assert why == "wgmma attention scores + row softmax"
    att = problem.attention
    assert (att.batch, att.seq, att.heads, att.dim, att.q_arg, att.k_arg) == (1, 128, 12, 64, 0, 1)
    assert (problem.et, problem.out) == ("f16", "f16")
    assert tbs128.inputs[0].dtype == "f16" and tbs128.outputs[0].dtype == "f16"
    assert tbs128.outputs[0].shape == (1, 12, 128, 128)
    bf16, _ = tc_problem_for(_task("tbs-2x64x4x128-bf16"))
    assert bf16.attention.dim == 128 and bf16.et == "bf16"
    # the f32 workload is unchanged (the row sketch only)
    assert [s.name for s in generate_sketches(_task("tbs-1x128x12x64"))] == ["r0", "skip"]


_SWAPPED_EXP = workloads.get("tbs-1x128x4x64-f16").replace("%d = arith.subf %x, %m", "%d = arith.subf %m, %x")
_NO_EXP = workloads.get("tbs-1x128x4x64-f16").replace("%e = math.exp %d : f32", "%e = math.tanh %d : f32")


@pytest.mark.parametrize("name, text, why", [
    ("tbs-1x128x12x64", None, "not f16 or bf16"),
    ("tbs-1x128x12x32-f16", None, "multiple of 64"),
    ("tbs-1x1024x12x64-f16", None, "the row tile must fit whole"),
    ("swapped", _SWAPPED_EXP, "operands swapped"),
    ("tanh", _NO_EXP, "not followed by exp"),
], ids=["f32", "head-dim-32", "seq-1024", "max-minus-x", "tanh"])
def test_tasks_it_refuses_say_why(name: str, text: str | None, why: str) -> None:
    task = _task(name, text)
    problem, reason = tc_problem_for(task)
    assert problem is None and why in reason, reason
    assert all(not isinstance(s, TcSketch) for s in generate_sketches(task))


def test_validation_names_what_cannot_run(tbs128: SearchTask, tbs197: SearchTask) -> None:
    sk = generate_sketches(tbs128)[0]
    assert sk.validate(_values()) is None
    assert sk.validate(_values(bm=128, bn=64, stages=2)) is None
    assert "more than the 128 rows" in sk.validate(_values(bm=256))
    assert "wider than the 128 columns" in sk.validate(_values(bn=256))
    assert "exceed the 1 K boxes" in sk.validate(_values(stages=3))  # one n-tile of one k-block
    assert "not in its options" in sk.validate(_values(bn=200))
    rag = generate_sketches(tbs197)[0]
    assert dict((k.name, k.options) for k in rag.knobs)["tc.bn"] == (64, 128, 200, 256)
    assert rag.validate(_values(bn=200)) is None and rag.validate(_values(bm=128, bn=64, stages=4)) is None
    assert "wider than the 197 columns" in rag.validate(_values(bn=256))
    assert "bytes of shared memory" in rag.validate(_values(bm=256, bn=64))
    big = generate_sketches(_task("tbs-1x256x4x64-f16"))[0]
    assert "registers per block" in big.validate(_values(bm=256, bn=256))
    rng = random.Random(0)
    for _ in range(20):  # the sampler draws only valid annotations, of the three knobs
        v = rag.sample(rng).values()
        assert set(v) == {"tc.bm", "tc.bn", "tc.stages"} and rag.validate(v) is None


def test_script_annotates_the_function_and_tiles_the_scores(tbs197: SearchTask) -> None:
    sk = generate_sketches(tbs197)[0]
    script = sk.script(_values(bm=128, bn=64, stages=3))
    assert '"ansor.tc.bm"' in script and '"ansor.tc.stages"' in script and "tc.splitk" not in script
    assert "tile_sizes [1, 1, 128, 0, 0]" in script and "tile_sizes [0, 0, 0, 64, 64]" in script
    from ansor.core.mlir import apply_script, parse_payload
    from ansor.targets.cuda.tensorcore import annotation_of

    from mlir import ir

    with ir.Context():
        module = parse_payload(tbs197)
        apply_script(module, script)
        got = annotation_of(module)
    assert {k: got[k] for k in ("bm", "bn", "stages")} == {"bm": 128, "bn": 64, "stages": 3}


@pytest.mark.parametrize("name, kw", [
    ("tbs-1x128x12x64-f16", {"bm": 64, "bn": 128, "stages": 2}),
    ("tbs-1x197x12x64-f16", {"bm": 64, "bn": 200, "stages": 2}),  # one ragged n-tile
    ("tbs-1x197x12x64-f16", {"bm": 128, "bn": 64, "stages": 3}),  # 4 n-tiles through a 3-stage ring
    ("tbs-2x128x4x128-bf16", {"bm": 128, "bn": 128, "stages": 2}),  # two k-blocks, two batches
], ids=["s128", "s197-whole-row", "s197-ntiles", "d128-bf16"])
def test_ptx_has_wgmma_tma_and_the_softmax(name: str, kw: dict[str, int]) -> None:
    from ansor.targets.cuda.lowering import emit_ptx

    task = _task(name)
    sk = generate_sketches(task)[0]
    assert sk.validate(_values(**kw)) is None
    ptx = emit_ptx(task, sk.script(_values(**kw)))
    et = "bf16" if name.endswith("bf16") else "f16"
    assert f"wgmma.mma_async.sync.aligned.m64n{kw['bn']}k16.f32.{et}.{et}" in ptx
    assert "cp.async.bulk.tensor.4d" in ptx  # Q and K read in place (the transposes are TMA boxes)
    assert ptx.count("shfl.sync.bfly") == 10  # the row max and the row sum, 5 xor steps each
    assert "ex2.approx" in ptx and "__nv_" not in ptx and "call" not in ptx
    assert ".local" not in ptx
    assert ("st.global.b16" if et in ("f16", "bf16") else "st.global.f32") in ptx


def test_tuning_a_half_tbs_task_draws_both_sketches(tmp_path) -> None:
    """The learned search measures tensor-core and CUDA-core programs of the task (the
    tensor-core script's features extract), a fake measurer timing them."""
    from ansor.measure.measurer import SyntheticMeasurer
    from ansor.tuning.records import load_records

    task = _task("tbs-1x128x4x64-f16")
    log = tmp_path / "tbs.jsonl"
    ansor.tune(task, trials=16, measurer=SyntheticMeasurer(), search="learned", batch_size=16, log_path=log, seed=1)
    sketches = {r.schedule.sketch for r in load_records(log)}
    assert "tc0" in sketches


# ----------------------------------------------------------------------------------------------
# On the GPU host


def _numpy_softmax_scores(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    s = np.einsum("bihd,bjhd->bhij", q.astype(np.float32), k.astype(np.float32))
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.gpu
@pytest.mark.parametrize("name, kw", [
    ("tbs-1x128x12x64-f16", {"bm": 64, "bn": 128, "stages": 2}),
    ("tbs-1x128x12x64-f16", {"bm": 128, "bn": 64, "stages": 2}),
    ("tbs-1x197x12x64-f16", {"bm": 64, "bn": 200, "stages": 2}),
    ("tbs-1x197x12x64-f16", {"bm": 128, "bn": 64, "stages": 3}),
    ("tbs-1x197x12x64-f16", {"bm": 64, "bn": 128, "stages": 2}),
    ("tbs-2x128x4x128-bf16", {"bm": 128, "bn": 128, "stages": 2}),
], ids=["s128", "s128-2wg-2ntiles", "s197-whole-row", "s197-4ntiles-ring", "s197-2ntiles", "d128-bf16-b2"])
def test_scores_softmax_matches_numpy_on_the_gpu(name: str, kw: dict[str, int]) -> None:
    from ansor.measure.measurer import make_inputs, reference_outputs
    from ansor.measure.verify import check_task_outputs, poisoned
    from ansor.targets.cuda.lowering import compile_task_cuda

    task = _task(name)
    sk = generate_sketches(task)[0]
    kernel = compile_task_cuda(task, sk.script(_values(**kw)))
    inputs = make_inputs(task)
    out = kernel.run(inputs, poisoned(task.outputs))
    got = np.asarray(out[0], dtype=np.float32)
    want = _numpy_softmax_scores(*inputs)
    assert np.isfinite(got).all()  # every output written (poisoned with NaN before)
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=2e-3)
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=2e-2)
    _, refs, _ = reference_outputs(task)
    assert check_task_outputs(task, out, refs) is None

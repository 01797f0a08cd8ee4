"""The cost model sees tensor-core programs (issue 27 item 5): the `tc*` feature slots that
`ansor-extract-features` fills from a function's `ansor.tc.*` annotation (passes/Passes.td).

No GPU needed: the tensor-core sketch's scripts are applied to the payload and featurized here.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

import ansor
from ansor.core.task import SearchTask
from ansor.frontend import workloads
from ansor.search import features
from ansor.targets import generate_sketches
from ansor.targets.cuda.tensorcore import DEFAULT, TcSketch, stage_bytes, staged_tile_bytes

NAMES = features.feature_names()
#: The tensor-core slots: after Ansor's 134 per-statement features.
TC = [i for i, n in enumerate(NAMES) if n == "tc" or n.startswith("tc_")]


def _task(name: str, target: str = "cuda") -> SearchTask:
    return ansor.create_task(workloads.get(name), name=name, target=target)


def _values(**kw: int) -> dict[str, int]:
    return {f"tc.{k}": v for k, v in {**DEFAULT, **kw}.items()}


def _tc_sketch(task: SearchTask) -> TcSketch:
    sk = generate_sketches(task)[0]
    assert isinstance(sk, TcSketch)
    return sk


def _kernel(rows: np.ndarray) -> dict[str, float]:
    """The raw tensor-core slots of a program (every statement carries the same)."""
    assert rows.shape[0] > 0 and (rows[:, TC] == rows[0, TC]).all()
    return {NAMES[i]: float(np.exp2(rows[0, i]) - 1) for i in TC}


def _rows(task: SearchTask, sk: TcSketch, *kws: dict[str, int]) -> list[dict[str, float]]:
    for kw in kws:
        assert sk.validate(_values(**kw)) is None, kw
    out = features.featurize(task, [sk.script(_values(**kw)) for kw in kws])
    assert all(f is not None for f in out)
    return [_kernel(f) for f in out]


@pytest.fixture(scope="module")
def mm16() -> SearchTask:
    return _task("matmul-256x512x1024-f16")


def test_slots_follow_ansors_features() -> None:
    # (then the CUDA-core sketch's `pipeline_stages`, the row sketch's `rows_per_block` and the
    # launch's `launch_blocks`, `launch_threads`, the last four columns: tests/test_gpu_pipeline.py,
    # tests/test_gpu_rows_per_block.py, tests/test_search_exploration.py)
    assert features.N_FEATURES == 134 + len(TC) + 4 and TC == list(range(134, features.N_FEATURES - 4))
    assert NAMES[133] == "num_outer_loops"  # the CPU's columns are where they were
    for name in ("tc", "tc_bm", "tc_bn", "tc_bk", "tc_warpgroups", "tc_mma_per_kblock", "tc_stages",
                 "tc_ws", "tc_persist", "tc_splitk", "tc_tw", "tc_smem_bytes", "tc_tma_bytes",
                 "tc_tiles", "tc_blocks", "tc_blocks_per_sm", "tc_waves", "tc_wave_eff", "tc_intensity"):
        assert name in NAMES


def test_stages_alone_change_the_row(mm16: SearchTask) -> None:
    """Two annotations differing only in pipeline depth: their loop nests are the same, the
    kernel slots are not (256x512x1024: 2 x 4 tiles of 128x128, 16 k-blocks)."""
    sk = _tc_sketch(mm16)
    rows = features.featurize(mm16, [sk.script(_values(stages=s)) for s in (3, 4)])
    a, b = rows
    assert a.shape == b.shape and np.array_equal(a[:, :134], b[:, :134])
    assert not np.array_equal(a, b)
    three, four = _kernel(a), _kernel(b)
    assert three["tc"] == pytest.approx(1)
    assert three["tc_stages"] == pytest.approx(3) and four["tc_stages"] == pytest.approx(4)
    assert three["tc_smem_bytes"] == pytest.approx(3 * stage_bytes(128, 128), rel=1e-5)
    assert four["tc_smem_bytes"] == pytest.approx(4 * stage_bytes(128, 128), rel=1e-5)
    assert three["tc_blocks_per_sm"] == pytest.approx(2) and four["tc_blocks_per_sm"] == pytest.approx(1)
    for k in ("tc_bm", "tc_bn", "tc_tma_bytes", "tc_tiles", "tc_blocks", "tc_kblocks", "tc_mma_per_tile"):
        assert three[k] == pytest.approx(four[k]), k
    assert three["tc_tiles"] == pytest.approx(8) and three["tc_kblocks"] == pytest.approx(16)
    assert three["tc_mma_per_kblock"] == pytest.approx(128 / 64 * 64 / 16)  # m64 n128 k16
    assert three["tc_tma_bytes"] == pytest.approx((128 + 128) * 64 * 2, rel=1e-5)
    assert three["tc_intensity"] == pytest.approx(2 * 128 * 128 * 64 / ((128 + 128) * 64 * 2), rel=1e-5)
    assert three["tc_sm_fill"] == pytest.approx(8 / 132, rel=1e-4)


def test_split_k_tile_and_warp_knobs(mm16: SearchTask) -> None:
    sk = _tc_sketch(mm16)
    base, split, wide, ws = _rows(mm16, sk, {}, {"splitk": 2}, {"bm": 64, "bn": 256},
                                  {"bm": 256, "bn": 128, "wgm": 2, "ws": 1, "persist": 1})
    assert split["tc_splitk"] == pytest.approx(2) and base["tc_splitk"] == pytest.approx(1)
    assert split["tc_kblocks"] == pytest.approx(8) and split["tc_blocks"] == pytest.approx(16)
    assert split["tc_mma_per_tile"] == pytest.approx(base["tc_mma_per_tile"] / 2)
    assert split["tc_staged"] == pytest.approx(1) and base["tc_staged"] == 0  # partial sums meet in shared memory
    assert wide["tc_bm"] == pytest.approx(64) and wide["tc_bn"] == pytest.approx(256)
    assert wide["tc_mma_n"] == pytest.approx(256) and wide["tc_mma_per_kblock"] == pytest.approx(4)
    assert wide["tc_tma_bytes"] == pytest.approx((64 + 256) * 64 * 2, rel=1e-5)
    assert wide["tc_tiles"] == pytest.approx(4 * 2)
    assert ws["tc_ws"] == pytest.approx(1) and ws["tc_persist"] == pytest.approx(1)
    assert ws["tc_warpgroups"] == pytest.approx(2) and ws["tc_warpgroup_rows"] == pytest.approx(128)
    assert ws["tc_threads"] == pytest.approx(3 * 128) and ws["tc_acc_per_thread"] == pytest.approx(128)
    assert ws["tc_tiles"] == pytest.approx(4) and ws["tc_blocks"] == pytest.approx(4)  # min(tiles, 132)


def test_fused_epilogue_batch_and_convolution() -> None:
    gelu = _task("mmgelu-512-f16")
    (g,) = _rows(gelu, _tc_sketch(gelu), {"bm": 128, "bn": 256, "wgm": 2, "stages": 2})
    assert g["tc_staged"] == pytest.approx(1)  # the epilogue reads the accumulators from shared memory
    assert staged_tile_bytes(128, 256) > 2 * stage_bytes(128, 256)
    assert g["tc_smem_bytes"] == pytest.approx(staged_tile_bytes(128, 256), rel=1e-5)

    gmm = _task("gmm-12x128x128x64-f16")
    (b,) = _rows(gmm, _tc_sketch(gmm), {"bm": 64, "bn": 64, "stages": 2})
    assert b["tc_tiles"] == pytest.approx(12 * 2 * 2) and b["tc_kblocks"] == pytest.approx(1)

    conv = _task("c2d-1x56x56x64x64x3x1x1-f16")
    sk = _tc_sketch(conv)
    c8, c16 = _rows(conv, sk, {"bm": 128, "bn": 64, "wgm": 2, "tw": 8}, {"bm": 128, "bn": 64, "wgm": 2, "tw": 16})
    assert c8["tc_tw"] == pytest.approx(8) and c16["tc_tw"] == pytest.approx(16)
    assert c8["tc_kblocks"] == pytest.approx(9)  # 3 x 3 taps x 64 channels
    # 56 x 56 pixels in 16 x 8 (or 8 x 16) patches: 4 x 7 = 28 blocks of 128 pixels x 64 channels
    assert c8["tc_tiles"] == pytest.approx(28) and c16["tc_tiles"] == pytest.approx(28)
    assert c8["tc_tile_eff"] == pytest.approx(56 * 56 / (28 * 128), rel=1e-4)


def test_cuda_core_and_cpu_programs_have_zero_slots(mm16: SearchTask) -> None:
    rng = random.Random(0)
    cuda_core = [s for s in generate_sketches(mm16) if not isinstance(s, TcSketch) and s.knobs]
    assert cuda_core
    scripts = [sk.script(sk.sample(rng).values()) for sk in cuda_core for _ in range(3)]
    cpu = _task("matmul-128", target="cpu")
    cpu_scripts = [sk.script(sk.sample(rng).values()) for sk in generate_sketches(cpu) if sk.knobs]
    rows = features.featurize(mm16, [*scripts, None]) + features.featurize(cpu, [*cpu_scripts, None])
    assert all(f is not None and f.shape[1] == features.N_FEATURES for f in rows)
    assert not any(f[:, TC].any() for f in rows)
    # (the CPU's leading columns are pinned by tests/test_golden.py: a model saved with 134
    # columns predicts the golden log's programs from today's features exactly as it did)


@pytest.fixture(scope="module")
def random_tc(mm16: SearchTask) -> tuple[list[dict[str, int]], list[str]]:
    """40 distinct valid random annotations of the tensor-core sketch and their scripts."""
    sk = _tc_sketch(mm16)
    rng = random.Random(1)
    seen: dict[tuple, dict[str, int]] = {}
    while len(seen) < 40:
        v = sk.sample(rng).values()
        seen.setdefault(tuple(sorted(v.items())), v)
    values = list(seen.values())
    return values, [sk.script(v) for v in values]


def test_random_annotations_get_distinct_rows_whatever_the_batch(mm16: SearchTask, random_tc) -> None:
    """The script cache blanks knob values and tile sizes in its key and caches prefixes: the
    annotation ops read the knobs, so no candidate inherits another's values. Rows are the
    same in one batch (cut into cached prefixes), without cutting, and one at a time."""
    values, scripts = random_tc
    batch = features.featurize(mm16, scripts)
    whole = features.featurize(mm16, scripts, split=False)
    alone = [features.featurize(mm16, [s])[0] for s in scripts[:8]]
    for a, b in zip(batch, whole, strict=True):
        assert np.array_equal(a, b)
    for a, b in zip(batch, alone):
        assert np.array_equal(a, b)
    for v, f in zip(values, batch, strict=True):
        k = _kernel(f)
        for knob in ("bm", "bn", "wgm", "stages", "wait", "group", "ws", "persist", "splitk"):
            assert k[f"tc_{knob if knob != 'wgm' else 'warpgroups'}"] == pytest.approx(v[f"tc.{knob}"], rel=1e-5)
    for (i, a), (j, b) in itertools.combinations(enumerate(batch), 2):
        assert not np.array_equal(a, b), (values[i], values[j])


def test_a_learned_model_ranks_tensor_core_programs(mm16: SearchTask, random_tc) -> None:
    """An XGBoost model trained on (synthetic) latencies that depend on knobs the loop nest does
    not show -- pipeline depth, warp specialisation, split-K, MMAs in flight -- ranks held-out
    annotations; with the tensor-core slots zeroed (the features before them) it cannot."""
    from ansor.measure.measurer import MeasureInput, MeasureResult
    from ansor.search.cost_model import XGBModel, normalized_throughputs, pairwise_accuracy
    from ansor.space.schedule import Schedule

    values, scripts = list(random_tc[0]), list(random_tc[1])
    sk = _tc_sketch(mm16)
    rng = random.Random(2)
    while len(values) < 120:
        v = sk.sample(rng).values()
        if v not in values:
            values.append(v)
            scripts.append(sk.script(v))
    feats = features.featurize(mm16, scripts)

    def latency(v: dict[str, int]) -> float:
        return (1.0 + 0.4 * abs(v["tc.stages"] - 4) + 0.8 * v["tc.ws"] + 0.5 * (v["tc.splitk"] - 1)
                + 0.3 * v["tc.wait"] + 0.2 * (v["tc.bm"] != 128))

    inputs = [MeasureInput(mm16, Schedule.of(sk.name, v), s) for v, s in zip(values, scripts, strict=True)]
    results = [MeasureResult(costs=(latency(v) * 1e-3,)) for v in values]
    y = normalized_throughputs(inputs, results)
    train, test = slice(0, 80), slice(80, None)

    def accuracy(fs: list[np.ndarray]) -> float:
        model = XGBModel(few_shot_threshold=1, nthread=1)
        model.update(inputs[train], results[train], fs[train])
        return pairwise_accuracy(model.predict(fs[test]), y[test])

    blind = [f.copy() for f in feats]
    for f in blind:
        f[:, TC] = 0
    seen, unseen = accuracy(feats), accuracy(blind)
    print(f'pairwise accuracy: {seen:.3f} with the tensor-core slots, {unseen:.3f} without')
    assert seen > 0.85 and seen > unseen + 0.15, (seen, unseen)


def test_tf32_kernel_rows_count_32_wide_k_blocks() -> None:
    """A TF32 task's kernel: k-blocks of 32 f32 (one 128-byte row) and k8 wgmmas, so 4 MMAs per
    warpgroup row block and k-block as for f16, twice the k-blocks of an f16 task of the same K,
    and a stage that also holds B K-major (`tensorcore.stage_bytes`)."""
    task = ansor.create_task(workloads.get("matmul-256x512x1024"), name="tf32", target="cuda", tf32=True)
    sk = _tc_sketch(task)
    kw = {"bm": 128, "bn": 128, "wgm": 2, "ws": 1, "stages": 3}
    (row,) = _rows(task, sk, kw)
    (half,) = _rows(_task("matmul-256x512x1024-f16"), _tc_sketch(_task("matmul-256x512x1024-f16")),
                    {"bm": 128, "bn": 128, "wgm": 2, "ws": 1, "stages": 3})
    assert row["tc_bk"] == pytest.approx(32) and half["tc_bk"] == pytest.approx(64)
    assert row["tc_kblocks"] == pytest.approx(1024 / 32) and half["tc_kblocks"] == pytest.approx(1024 / 64)
    assert row["tc_mma_per_kblock"] == pytest.approx(half["tc_mma_per_kblock"])
    assert row["tc_smem_bytes"] == pytest.approx(3 * stage_bytes(128, 128, True), rel=1e-5)
    assert row["tc_tma_bytes"] == pytest.approx((128 + 128) * 32 * 4, rel=1e-5)

"""Program features: hand-checked numbers, determinism, failures, worker == in-process."""

from __future__ import annotations

import random

import numpy as np
import pytest
from ansor.core import mlir as core_mlir
from ansor.core.task import SearchTask, create_task
from ansor.frontend import workloads
from ansor.search import features
from ansor.space.schedule import sample
from ansor.targets.cpu import rules
from mlir import ir

# matmul 8x8x8 with the matmul's rows split over 2 parallel workers; nothing vectorized, so
# the fill (8x8) and the matmul tile (4x8x8 per forall iteration) stay linalg statements.
FORALL_SCRIPT = """
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %m = transform.structured.match ops{["linalg.matmul"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %l = transform.structured.tile_using_forall %m tile_sizes [4, 0, 0] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}
"""


@pytest.fixture(scope="module")
def matmul8() -> SearchTask:
    return create_task(workloads.matmul(8, 8, 8))


def _raw(row: np.ndarray, name: str) -> float:
    """Undo the log2(1+x) scaling of feature `name`."""
    return float(np.exp2(row[features.feature_names().index(name)]) - 1)


def _scripts(task: SearchTask, n: int, seed: int = 0) -> list[str | None]:
    sketches = [s for s in rules.generate_sketches(task) if s.stages]
    rng = random.Random(seed)
    return [
        sketches[i % len(sketches)].script(
            sample(sketches[i % len(sketches)], rng).values()
        )
        for i in range(n)
    ]


def test_names() -> None:
    names = features.feature_names()
    assert len(names) == features.N_FEATURES == 169
    assert len(set(names)) == len(names)
    assert names[0] == "float_mad" and "B4.stride" in names and names[133] == "num_outer_loops"
    # the tensor-core kernel's slots come after Ansor's 134 (tests/test_features_tc.py)
    assert names[134] == "tc" and all(n.startswith("tc_") for n in names[135:-4])
    # then the CUDA-core kernel's pipeline depth (tests/test_gpu_pipeline.py), the row
    # sketch's rows per block (tests/test_gpu_rows_per_block.py) and the launch's blocks and
    # threads per block (tests/test_search_exploration.py)
    assert names[-4:] == ["pipeline_stages", "rows_per_block", "launch_blocks", "launch_threads"]


def test_hand_checkable_forall(matmul8: SearchTask) -> None:
    fill, mm = features.featurize(matmul8, [FORALL_SCRIPT])[0]
    # linalg.fill: an 8x8 serial nest writing 256 bytes, no arithmetic.
    assert _raw(fill, "loop_prod") == pytest.approx(64)
    assert _raw(fill, "num_loops") == pytest.approx(2)
    assert _raw(fill, "B0.acc_write") == pytest.approx(1)
    assert _raw(fill, "B0.bytes") == pytest.approx(256)
    assert _raw(fill, "float_mul") == 0
    # The matmul tile: forall(2) x 4x8x8 = 512 points, one mulf + one addf each.
    assert _raw(mm, "float_mul") == pytest.approx(512, rel=1e-5)
    assert _raw(mm, "float_addsub") == pytest.approx(512, rel=1e-5)
    assert _raw(mm, "par_num") == pytest.approx(1)
    assert _raw(mm, "par_prod") == pytest.approx(2)
    assert _raw(mm, "par_pos_outer") == pytest.approx(1)
    assert _raw(mm, "loop_prod") == pytest.approx(512, rel=1e-5)
    assert _raw(mm, "num_loops") == pytest.approx(4)
    assert _raw(mm, "innermost_len") == pytest.approx(8)
    # The accumulator C is read and written at every point: 2 x 512 x 4 bytes, 256 unique.
    assert _raw(mm, "B0.acc_rw") == pytest.approx(1)
    assert _raw(mm, "B0.bytes") == pytest.approx(4096, rel=1e-5)
    assert _raw(mm, "B0.unique_bytes") == pytest.approx(256, rel=1e-5)
    # The untransformed payload: the same fill, and the matmul without the parallel loop.
    base = features.featurize(matmul8, [None])[0]
    assert base.shape == (2, features.N_FEATURES)
    assert _raw(base[1], "par_num") == 0 and _raw(base[1], "loop_prod") == pytest.approx(
        512, rel=1e-5
    )


def _count_statements(module: ir.Module) -> int:
    count = 0

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal count
        name = op.name
        if name == "vector.transfer_write" or (
            name.startswith("linalg.") and name not in ("linalg.yield", "linalg.index")
        ):
            count += 1
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return count


def test_rows_match_statements_and_differ(matmul64: SearchTask) -> None:
    scripts = _scripts(matmul64, 6)
    rows = features.featurize(matmul64, scripts)
    assert all(
        r is not None and r.dtype == np.float32 and r.shape[1] == features.N_FEATURES for r in rows
    )
    with ir.Context(), ir.Location.unknown():
        payload = core_mlir.parse_payload(matmul64)
        for script, r in zip(scripts, rows, strict=True):
            module = features._clone(payload)
            core_mlir.apply_script(module, script)
            assert r is not None and r.shape[0] == _count_statements(module)
            # The C API directly (same extraction, no cleanup passes): the same rows here.
            assert features.extract_from_module(module).shape[0] == r.shape[0]
    # Every schedule computes the same FLOPs but touches memory differently.
    keys = {r.tobytes() for r in rows if r is not None}
    assert len(keys) == len(rows)
    total_mad = [float(np.sum(np.exp2(r[:, 0]) - 1)) for r in rows if r is not None]
    assert total_mad == pytest.approx([64**3] * len(total_mad), rel=1e-4)
    # Deterministic.
    again = features.featurize(matmul64, scripts[:2])
    assert all(np.array_equal(a, b) for a, b in zip(again, rows[:2], strict=True))


def test_failure_is_none(matmul8: SearchTask) -> None:
    bad = ["this is not MLIR", "module attributes {transform.with_named_sequence} {}"]
    out = features.featurize(matmul8, [bad[0], FORALL_SCRIPT, bad[1]])
    assert out[0] is None and out[2] is None and out[1] is not None


def test_worker_extractor_matches_in_process(matmul64: SearchTask) -> None:
    scripts = _scripts(matmul64, 5, seed=1) + ["not MLIR", None]
    local = features.featurize(matmul64, scripts)
    with features.FeatureExtractor(n_workers=2) as fx:
        remote = fx.extract(matmul64, scripts)
    assert len(remote) == len(scripts)
    for a, b in zip(local, remote, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            assert np.array_equal(a, b)


def _sketch_scripts(task: SearchTask, sketch: int, n: int, seed: int) -> list[str]:
    """`n` distinct feature scripts (vectors not lowered, as the tuner renders them) of one sketch."""
    sk = [s for s in rules.generate_sketches(task) if s.stages][sketch]
    rng = random.Random(seed)
    scripts: list[str] = []
    while len(scripts) < n:
        s = sk.script(sample(sk, rng).values(), lower_vectors=False)
        if s not in scripts:
            scripts.append(s)
    return scripts


def _whole_rows(task: SearchTask, scripts: list[str]) -> list[np.ndarray]:
    """Rows after applying each script whole (its own canonicalization + CSE), without any cache."""
    with ir.Context(), ir.Location.unknown():
        payload = core_mlir.parse_payload(task)
        out = []
        for script in scripts:
            module = features._clone(payload)
            core_mlir.apply_script(module, script)
            out.append(features.extract_from_module(module))
        return out


@pytest.mark.parametrize("sketch", [0, 1], ids=["tiling", "packed"])
def test_script_cache_reuses_parsed_sketch_with_new_values(matmul64: SearchTask, sketch: int) -> None:
    """Scripts of one sketch parse once (`_ScriptCache`); each later one only sets knob values
    and static tile/pack sizes (the packed sketch's sizes are literals in its text). Rows must
    equal those of the same script featurized alone, and of applying the whole script (its own
    canonicalization + CSE included) without the cache."""
    scripts = _sketch_scripts(matmul64, sketch, 4, seed=3)
    parses = []
    original = features._ScriptCache._parse
    features._ScriptCache._parse = staticmethod(lambda s, b: parses.append(s) or original(s, b))  # type: ignore[method-assign]
    try:
        together = features.featurize(matmul64, scripts, split=False)
    finally:
        features._ScriptCache._parse = staticmethod(original)  # type: ignore[method-assign]
    assert len(parses) == 1  # knob and size differences hit the cache
    for script, rows, whole in zip(scripts, together, _whole_rows(matmul64, scripts), strict=True):
        assert rows is not None
        assert np.array_equal(rows, features.featurize(matmul64, [script])[0])
        assert np.array_equal(rows, whole)
    assert len({r.tobytes() for r in together if r is not None}) == len(scripts)


@pytest.mark.parametrize("sketch", [0, 1], ids=["tiling", "packed"])
def test_shared_prefixes_give_the_rows_of_whole_scripts(matmul64: SearchTask, sketch: int) -> None:
    """A batch's scripts are cut where prefixes repeat (`_Structure.choose_cuts`); the ops before
    a cut run once per distinct prefix and hand their handles to the rest by marking payload
    ops. Rows equal those of each script applied whole, whatever the batch."""
    scripts = _sketch_scripts(matmul64, sketch, 24, seed=7)
    with ir.Context(), ir.Location.unknown():
        cache = features._ScriptCache()
        blanked = [features._Blanked(s) for s in scripts]
        st = cache.structure(scripts[0], blanked[0])
        cuts = st.choose_cuts(blanked)
        assert cuts  # 24 candidates of a 64^3 matmul share outer tiles: the test runs the cut path
        assert len({st.prefix_key(b, cuts[0]) for b in blanked}) < len(scripts)
    split = features.featurize(matmul64, scripts)
    alone = features.featurize(matmul64, scripts, split=False)
    assert all(r is not None for r in split)
    for a, b, whole in zip(split, alone, _whole_rows(matmul64, scripts), strict=True):
        assert np.array_equal(a, b) and np.array_equal(a, whole)
    # Order and company do not matter: a reversed batch and a batch of one give the same rows.
    for a, b in zip(split[::-1], features.featurize(matmul64, scripts[::-1]), strict=True):
        assert np.array_equal(a, b)
    assert np.array_equal(split[5], features.featurize(matmul64, [scripts[5]])[0])


@pytest.mark.parametrize(
    "workload",
    ["grp-1x56x56x64x64x1x1x0", "t2d-1x4x4x512x256x4x2x1", "nrm-1x256x256", "softmax-6x37",
     "c2d-1x7x7x512x512x3x1x1", "convlayer-1x56x56x64x128x3x2x1"],
)
def test_feature_cleanup_gives_canonicalized_features(workload: str) -> None:
    """`featurize` replaces full canonicalization with `ansor-feature-cleanup` (cheaper); the
    extractor skips single-iteration loops and reads sizes through casts and constant slice
    sizes, so the rows equal those read after `canonicalize,cse` (each sketch, several
    candidates; unit loops, fused pads, leftover transposes, reduction chains)."""
    task = create_task(workloads.get(workload))
    scripts = [s for s in _scripts(task, 8, seed=5) if s is not None]
    fast = features.featurize(task, scripts)
    full = passmanager_rows(task, scripts)
    for a, b in zip(fast, full, strict=True):
        assert a is not None and b is not None
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, atol=1e-4)


def passmanager_rows(task: SearchTask, scripts: list[str]) -> list[np.ndarray]:
    """Rows after applying each script whole and running full `canonicalize,cse`."""
    from mlir import passmanager

    out = []
    with ir.Context(), ir.Location.unknown():
        payload = core_mlir.parse_payload(task)
        pm = passmanager.PassManager.parse("builtin.module(canonicalize,cse)")
        for script in scripts:
            module = features._clone(payload)
            core_mlir.apply_script(module, script)
            pm.run(module.operation)
            out.append(features.extract_from_module(module))
    return out

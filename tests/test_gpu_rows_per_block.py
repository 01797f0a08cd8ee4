"""Rows per block in the GPU cross-thread reduction (issue 28, short rows): the row sketch's
`op<N>.rows` knob `R` packs R one-row blocks into one block of R row groups (thread y), each of
whole warps (`ansor-gpu-pack-rows-into-blocks`, after the mapping to the GPU). Knob options,
validity, sampling, mutation and old records; R = 1 is exactly the program without the knob; the
packed kernels' structure (each row group on its own row and its own slice of every shared
buffer, shuffles within a warp, so no row's reduction reads another's partial results); PTX
without a GPU; the scripts as CPU loops; runs on an NVIDIA GPU against numpy with rows of
different scales, so a row group reading another row's values fails (`@pytest.mark.gpu`,
skipped without one):

    pytest tests/test_gpu_rows_per_block.py -m gpu
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

import numpy as np
import pytest
from ansor.core.task import SearchTask, create_task
from ansor.frontend import workloads
from ansor.targets import generate_sketches
from ansor.targets.cuda.reduction import ROW_OPTIONS, RowSketch, default_values, render
from test_gpu_ragged import _as_cpu_loops

#: Rows of the small tasks (every R of the knob divides them).
ROWS = 16
COLS = (197, 128, 1000)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _layernorm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b


def _gelu(y: np.ndarray) -> np.ndarray:
    return 0.5 * y * (1 + np.tanh(0.7978845608028654 * (y + 0.044715 * y**3)))


#: family -> (workload name for `cols` columns, float64 numpy reference)
FAMILIES: dict[str, tuple[Callable[[int], str], Callable[..., np.ndarray]]] = {
    "softmax": (lambda c: f"softmax-{ROWS}x{c}", _softmax),
    "layernorm": (lambda c: f"layernorm-{ROWS}x{c}", _layernorm),
    "lngelu": (lambda c: f"lngelu-{ROWS}x{c}", lambda x, g, b: _gelu(_layernorm(x, g, b))),
    "rmsnorm": (lambda c: f"rmsnorm-{ROWS}x{c}",
                lambda x, g: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * g),
    "rowsum": (lambda c: f"rowsum-{ROWS}x{c}", lambda x: x.sum(-1)),
    # attention scores + softmax (1 x c queries x 2 heads: rows along x are the c queries)
    "tbs": (lambda c: f"tbs-1x{c}x2x16", lambda q, k: _softmax(np.einsum("bshd,bthd->bhst", q, k))),
}


def _task(family: str, cols: int) -> SearchTask:
    name = FAMILIES[family][0](cols)
    return create_task(workloads.get(name), name=name, target="cuda")


def _sketch(task: SearchTask) -> RowSketch:
    sk = generate_sketches(task)[0]
    assert isinstance(sk, RowSketch), task.name
    return sk


def _values(sk: RowSketch, rows: int, threads: int | None = None) -> dict[str, int]:
    """The untuned default with `rows` rows per block and `threads` (default: the default's `T`
    where that is whole warps and fits 1024 / R, else the largest option that does)."""
    st = sk.gpu_stage
    v = default_values(st)
    t = threads or v[st.threads_knob]
    if t % 32 or t * rows > 1024:
        t = max(x for x in sk.knob(st.threads_knob).options if x % 32 == 0 and x * rows <= 1024)
    v.update({st.threads_knob: t, st.rows_knob: rows})
    assert sk.validate(v) is None, (v, sk.validate(v))
    return v


def _inputs(task: SearchTask, seed: int = 3) -> list[np.ndarray]:
    """Random inputs, each row of the first scaled by a different power of two (1/8 .. 8 over
    the rows), so a row reduced with another row's values comes out wrong."""
    rng = np.random.default_rng(seed)
    out = [rng.standard_normal(s.shape).astype(np.float32) for s in task.inputs]
    x = out[0]
    rows = x.reshape(-1, x.shape[-1]) if x.ndim > 1 else x.reshape(1, -1)
    rows *= (2.0 ** (np.arange(rows.shape[0]) % 7 - 3))[:, None].astype(np.float32)
    return out


def _want(family: str, inputs: list[np.ndarray]) -> np.ndarray:
    return FAMILIES[family][1](*(a.astype(np.float64) for a in inputs))


# ----------------------------------------------------------------------------------------------
# The knob


def test_row_options_divide_the_rows_along_block_x() -> None:
    assert ROW_OPTIONS == (1, 2, 4, 8, 16, 32)
    opts = {}
    for name in ("softmax-2364x197", "softmax-1536x128", "rowsum-12608x197", "softmax-7x197", "softmax-1x197",
                 "lngelu-12x768", "tbs-1x197x2x16", "tbs-1x128x2x16"):
        st = _sketch(create_task(workloads.get(name), name=name, target="cuda")).gpu_stage
        opts[name] = st.row_options()
    assert opts["softmax-2364x197"] == (1, 2, 4)  # 2364 = 4 x 591
    assert opts["softmax-1536x128"] == ROW_OPTIONS
    assert opts["rowsum-12608x197"] == ROW_OPTIONS
    assert opts["softmax-7x197"] == (1,) and opts["softmax-1x197"] == (1,)
    assert opts["lngelu-12x768"] == (1, 2, 4)
    # attention rows: block x runs over the 197 queries (prime) or the 128 ones
    assert opts["tbs-1x197x2x16"] == (1,) and opts["tbs-1x128x2x16"] == ROW_OPTIONS


def test_a_sketch_without_row_options_has_no_rows_knob() -> None:
    for name in ("softmax-7x197", "softmax-1x197", "tbs-1x197x2x16"):
        sk = _sketch(create_task(workloads.get(name), name=name, target="cuda"))
        assert sk.gpu_stage.rows_knob not in {k.name for k in sk.knobs}
        assert "rows_per_block" not in sk.script(default_values(sk.gpu_stage))
    sk = _sketch(_task("softmax", 197))
    assert sk.knob(sk.gpu_stage.rows_knob).options == (1, 2, 4, 8, 16)


def test_validity_whole_warps_and_1024_threads() -> None:
    sk = _sketch(_task("softmax", 197))
    st = sk.gpu_stage
    base = default_values(st)
    assert base[st.rows_knob] == 1  # the untuned program: a row per block
    assert sk.validate({**base, st.threads_knob: 64, st.rows_knob: 16}) is None
    assert "1024 threads" not in (sk.validate({**base, st.threads_knob: 64, st.rows_knob: 16}) or "")
    why = sk.validate({**base, st.threads_knob: 128, st.rows_knob: 16})
    assert why is not None and "2048 threads (at most 1024)" in why
    assert "not in its options" in sk.validate({**base, st.rows_knob: 3})
    # a short row's sub-warp thread counts take one row per block (shuffles of a row group
    # must not share a warp with another's)
    short = _sketch(create_task(workloads.get("softmax-16x8"), name="sm8", target="cuda"))
    sst = short.gpu_stage
    v = {**default_values(sst), sst.threads_knob: 8, sst.rows_knob: 4}
    assert "whole warps" in short.validate(v)
    assert short.validate({**v, sst.rows_knob: 1}) is None


def test_records_from_before_the_knob_read_as_one_row_per_block() -> None:
    sk = _sketch(_task("softmax", 197))
    st = sk.gpu_stage
    old = {st.threads_knob: 224, st.unroll_knob: 64}
    assert sk.validate(old) is None
    assert sk.complete(old)[st.rows_knob] == 1
    assert sk.script(old) == sk.script({**old, st.rows_knob: 1})
    space = sk.search_space(0.3)
    from ansor.space.schedule import Schedule

    full = space.complete(Schedule.of(sk.name, old))
    assert full is not None and full.values()[st.rows_knob] == 1


def test_sampling_and_mutation_reach_every_row_count() -> None:
    from ansor.search.cost_model import RandomModel
    from ansor.search.evolution import EvolutionarySearch
    from ansor.targets import get_target

    sk = _sketch(_task("softmax", 197))
    st = sk.gpu_stage
    rng = random.Random(0)
    samples = [sk.sample(rng).values() for _ in range(300)]
    assert all(sk.validate(v) is None for v in samples)
    assert {v[st.rows_knob] for v in samples} == set(st.row_options())
    assert all(v[st.threads_knob] % 32 == 0 and v[st.threads_knob] * v[st.rows_knob] <= 1024
               for v in samples if v[st.rows_knob] > 1)
    search = EvolutionarySearch([sk], RandomModel(seed=0), lambda schs: [None] * len(schs), seed=0,
                                mutation_weights=get_target("cuda").mutation_weights, ragged_prob=0.3)
    parents = [sk.sample(random.Random(s)) for s in range(60)]
    kids = [(p, c) for p in parents if (c := search.mutate(p)) is not None]
    assert kids and all(sk.validate(c.values()) is None for _, c in kids)
    assert any(p.values()[st.rows_knob] != c.values()[st.rows_knob] for p, c in kids)
    assert st.rows_knob in {k.name for k in search.info[sk.name].free_tile_knobs}


# ----------------------------------------------------------------------------------------------
# The packed kernels


def _gpu_ir(task: SearchTask, script: str) -> str:
    from ansor.targets.cuda.lowering import lower_to_gpu_ir
    from mlir import ir

    with ir.Context(), ir.Location.unknown():
        return str(lower_to_gpu_ir(task, script))


def test_the_cost_model_sees_the_rows_per_block() -> None:
    """The last feature column is the launch's `ansor.rows_per_block` (log2(1 + R)) on every
    statement inside the annotated launch: R is packed after the loops the other features see, so without it
    schedules that differ only in R would score the same."""
    from ansor.search import features

    col = features.feature_names().index("rows_per_block")
    task = _task("softmax", 197)
    sk = _sketch(task)
    rs = (1, 2, 4)
    rows = features.featurize(task, [sk.script(_values(sk, r, threads=64)) for r in rs])
    inside = rows[0][:, col] > 0  # the statements in the annotated launch (not, e.g., its fill)
    assert inside.sum() > rows[0].shape[0] // 2
    for r, f in zip(rs, rows, strict=True):
        assert f is not None and f.shape == rows[0].shape
        np.testing.assert_allclose(f[inside, col], np.log2(1 + r))
        assert not f[~inside, col].any()
        # nothing else differs
        np.testing.assert_array_equal(np.delete(f, col, axis=1), np.delete(rows[0], col, axis=1))


def test_one_row_per_block_is_the_program_without_the_knob() -> None:
    """R = 1 lowers to exactly the GPU program of the sketch without the knob (today's)."""
    for family, cols in (("softmax", 197), ("rowsum", 128), ("lngelu", 1000)):
        task = _task(family, cols)
        sk = _sketch(task)
        st = sk.gpu_stage
        v = default_values(st)
        without = render(st, tuple(k for k in sk.knobs if k.name != st.rows_knob),
                         {k: x for k, x in v.items() if k != st.rows_knob}, sk.name, sk.rule)
        assert "rows_per_block" not in without and "rows_per_block" in sk.script(v)
        packed, plain = _gpu_ir(task, sk.script(v)), _gpu_ir(task, without)
        assert packed == plain, family
        assert "gpu.thread_id  y" not in packed


def _check_row_groups(task: SearchTask, script: str, rows: int, threads: int) -> None:
    """The lowered GPU program keeps row groups apart: a block of (T, R, 1) threads over G / R
    blocks; the global row is block x * R + thread y (block x used nowhere else); every access to
    every shared buffer (memref<R x ...>) is at the group's row (thread y); the shuffles are
    32-lane butterflies with T a multiple of 32 (a warp never spans two row groups)."""
    from ansor.core.mlir import walk
    from ansor.targets.cuda.lowering import lower_to_gpu_ir
    from mlir import ir

    def is_thread_y(v: ir.Value) -> bool:
        op = v.owner
        return isinstance(op, ir.OpView) and op.name == "gpu.thread_id" and "y" in str(op.attributes["dimension"])

    def const(v: ir.Value) -> int | None:
        op = v.owner
        if isinstance(op, ir.OpView) and op.name == "arith.constant":
            return ir.IntegerAttr(op.attributes["value"]).value
        return None

    with ir.Context(), ir.Location.unknown():
        module = lower_to_gpu_ir(task, script)
        (launch,) = walk(module.operation, "gpu.launch")
        sizes = [const(v) for v in launch.operands[:6]]
        grid_x = task.outputs[0].shape[0] if task.name.startswith(("softmax", "lngelu", "layernorm", "rmsnorm",
                                                                     "rowsum")) else None
        assert sizes[3:] == [threads, rows, 1], sizes
        if grid_x is not None:
            assert sizes[0] == grid_x // rows, sizes
        body = launch.regions[0].blocks[0]
        shared = list(body.arguments)[12:]
        assert shared
        for arg in shared:
            assert ir.MemRefType(arg.type).shape[0] == rows, arg.type
            for use in arg.uses:
                idx = use.owner.operands[use.operand_number + 1]  # the leading index / offset
                at = idx.owner
                assert is_thread_y(idx) or (
                    isinstance(at, ir.OpView) and at.name == "arith.addi"
                    and const(at.operands[0]) == 0 and is_thread_y(at.operands[1])), (use.owner, idx)
        (bx,) = [op for op in walk(launch, "gpu.block_id") if "x" in str(op.attributes["dimension"])]
        (mul,) = [u.owner for u in bx.result.uses]
        assert mul.name == "arith.muli" and const(mul.operands[1]) == rows
        (add,) = [u.owner for u in mul.result.uses]
        assert add.name == "arith.addi" and is_thread_y(add.operands[1])
        shuffles = walk(launch, "gpu.shuffle")
        assert shuffles and threads % 32 == 0
        assert {const(s.operands[2]) for s in shuffles} == {32}


@pytest.mark.parametrize("cols", COLS)
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_row_groups_stay_apart_in_the_lowered_program(family: str, cols: int) -> None:
    task = _task(family, cols)
    sk = _sketch(task)
    if family == "tbs" and cols == 197:
        assert sk.gpu_stage.row_options() == (1,)  # 197 queries: no R > 1 divides them
        return
    for rows in (2, 4, 8):
        v = _values(sk, rows)
        _check_row_groups(task, sk.script(v), rows, v[sk.gpu_stage.threads_knob])


@pytest.mark.parametrize("cols", COLS)
def test_rows_per_block_lower_to_ptx_without_a_gpu(cols: int) -> None:
    """PTX for R in 2, 4, 8 (softmax at every width; the other families one R each): a
    (T, R, 1) block, warp shuffles, R times the shared memory, no local memory."""
    from ansor.targets.cuda.lowering import emit_ptx

    for i, family in enumerate(sorted(FAMILIES)):
        task = _task(family, cols)
        sk = _sketch(task)
        if len(sk.gpu_stage.row_options()) == 1:
            continue
        plain = emit_ptx(task, sk.script(_values(sk, 1)), arch="sm_90")
        one = sum(int(n) for n in re.findall(r"\.shared \.align \d+ \.b8 \w+\[(\d+)\]", plain))
        for rows in ((2, 4, 8) if family == "softmax" else ((2, 4, 8)[i % 3],)):
            v = _values(sk, rows)
            ptx = emit_ptx(task, sk.script(v), arch="sm_90")
            t = v[sk.gpu_stage.threads_knob]
            assert f".maxntid {t}, {rows}, 1" in ptx or f".reqntid {t}, {rows}, 1" in ptx, (family, rows)
            assert "shfl.sync.bfly" in ptx and ".local" not in ptx
            shared = sum(int(n) for n in re.findall(r"\.shared \.align \d+ \.b8 \w+\[(\d+)\]", ptx))
            if v[sk.gpu_stage.threads_knob] == _values(sk, 1)[sk.gpu_stage.threads_knob]:
                assert shared == rows * one, (family, rows, shared, one)


@pytest.mark.parametrize("family", ["softmax", "layernorm", "rmsnorm", "rowsum"])
def test_a_warp_per_row_needs_no_barrier(family: str) -> None:
    """32 threads a row, R > 1: each thread reads back only its own partial-result slot and the
    row's value never goes through a buffer another thread fills, so no barrier is left
    (`ansor-gpu-block-reductions-to-shuffles` drops them in a rows-per-block launch); 64
    threads keep one per reduction (the warps' results meet in shared memory); R = 1 keeps them
    all."""
    from ansor.targets.cuda.lowering import emit_ptx

    task = _task(family, 197)
    sk = _sketch(task)
    n = len(sk.gpu_stage.reductions)
    assert emit_ptx(task, sk.script(_values(sk, 8, 32)), arch="sm_90").count("bar.sync") == 0
    assert emit_ptx(task, sk.script(_values(sk, 4, 64)), arch="sm_90").count("bar.sync") == n
    assert emit_ptx(task, sk.script(_values(sk, 1, 64)), arch="sm_90").count("bar.sync") == 2 * n


def test_a_launch_that_cannot_be_packed_is_a_lowering_error() -> None:
    """The pass refuses, with its one-line reason, what the sketch's validation lets through
    only by mistake (here: R not dividing the rows, written into the script by hand)."""
    from ansor.core.mlir import LoweringError
    from ansor.targets.cuda.lowering import emit_ptx

    task = create_task(workloads.get("softmax-6x128"), name="sm6", target="cuda")
    sk = _sketch(task)
    st = sk.gpu_stage
    script = sk.script({**default_values(st), st.threads_knob: 32, st.rows_knob: 2})
    with pytest.raises(LoweringError, match="cannot pack 4 rows per block: 6 blocks along x"):
        emit_ptx(task, script.replace("= 2 : i64 from options = [1, 2]", "= 4 : i64 from options = [1, 2, 4]"))


# ----------------------------------------------------------------------------------------------
# The scripts as CPU loops (the packing comes after the mapping to the GPU: these check that
# the scripts carrying the knob still compute every row right, with the same loops)


def _run_as_cpu_loops(task: SearchTask, script: str, inputs: list[np.ndarray]) -> np.ndarray:
    from ansor.core import native as _native
    from ansor.core.mlir import apply_script, parse_payload, run_passes
    from ansor.targets.cpu.lowering import _lower_and_jit
    from mlir import ir

    cpu = _as_cpu_loops(script)
    _native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = parse_payload(task)
        run_passes(module, "ansor-gpu-own-fill-destinations", "lower")
        apply_script(module, cpu)
        run_passes(module, "canonicalize,cse,buffer-results-to-out-params{hoist-static-allocs "
                           "modify-public-functions},canonicalize,cse", "lower")
        run_passes(module, "ansor-gpu-guard-padded-reads", "lower")
        (out,) = _lower_and_jit(module, task, 2).run(inputs, [np.full(task.outputs[0].shape, np.nan, np.float32)])
    return out


@pytest.mark.parametrize("family", ["softmax", "rmsnorm", "rowsum"])
def test_scripts_with_rows_per_block_run_as_loops_on_the_cpu(family: str) -> None:
    task = _task(family, 197)
    sk = _sketch(task)
    inputs = _inputs(task)
    want = _want(family, inputs)
    for rows, t in ((4, 64), (8, 32)):
        out = _run_as_cpu_loops(task, sk.script(_values(sk, rows, t)), inputs)
        assert not np.isnan(out).any()
        np.testing.assert_allclose(out, want, rtol=2e-4, atol=2e-4)


# ----------------------------------------------------------------------------------------------
# On an NVIDIA GPU


def _gpu_schedules(sk: RowSketch) -> list[dict[str, int]]:
    """Every R of the sketch with its default `T` (or the warp multiple above the row), a
    32-thread row group (a warp per row) at the largest R, and 4 sampled schedules with R > 1."""
    st = sk.gpu_stage
    picks = [_values(sk, r) for r in st.row_options()]
    picks.append(_values(sk, st.row_options()[-1], 32))
    rng = random.Random(7)
    sampled = [sk.sample(rng).values() for _ in range(200)]
    picks += [v for v in sampled if v[st.rows_knob] > 1][:4]
    return picks


@pytest.mark.gpu
@pytest.mark.parametrize("cols", COLS)
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_rows_per_block_run_on_the_gpu(family: str, cols: int) -> None:
    """Every R against numpy, on rows of different scales, into outputs poisoned with NaN and
    with a second sentinel: a row group that read another row's partial results, or a row
    nobody wrote, fails."""
    from ansor.measure import verify
    from ansor.targets.cuda.lowering import compile_task_cuda

    task = _task(family, cols)
    sk = _sketch(task)
    if len(sk.gpu_stage.row_options()) == 1:
        pytest.skip(f"{task.name}: no R > 1 divides its rows along block x")
    inputs = _inputs(task)
    want = _want(family, inputs)
    for v in _gpu_schedules(sk):
        kernel = compile_task_cuda(task, sk.script(v))
        for which in (0, 1):
            (out,) = kernel.run(inputs, verify.poisoned(task.outputs, which))
            np.testing.assert_allclose(out, want, rtol=2e-4, atol=2e-4, err_msg=str(v))


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["softmax-2364x197", "softmax-1536x128", "rowsum-12608x197"])
def test_measured_shapes_run_on_the_gpu(name: str) -> None:
    """The shapes of results/gpu-rowwise that lost to PyTorch, with every R and a warp per row."""
    from ansor.measure import verify
    from ansor.targets.cuda.lowering import compile_task_cuda

    family = name.split("-")[0]
    task = create_task(workloads.get(name), name=name, target="cuda")
    sk = _sketch(task)
    inputs = _inputs(task)
    want = _want(family, inputs)
    st = sk.gpu_stage
    for rows in st.row_options():
        for t in {32, 64, _values(sk, rows)[st.threads_knob]}:
            v = {**default_values(st), st.threads_knob: t, st.rows_knob: rows}
            if t not in sk.knob(st.threads_knob).options or sk.validate(v) is not None:
                continue
            (out,) = compile_task_cuda(task, sk.script(v)).run(inputs, verify.poisoned(task.outputs, 0))
            np.testing.assert_allclose(out, want, rtol=2e-4, atol=2e-4, err_msg=str(v))

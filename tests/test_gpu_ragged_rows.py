"""Ragged rows in the GPU cross-thread reduction (issue 28 item 1): on a row of `C` columns with
`C % 32 != 0` (197, 1000, 1023), the threads per block `T` need not divide `C`; every op along
the columns is padded to `T * ceil(C / T)`, the reductions masked past column `C` with their
combiner's identity (`ansor-gpu-mask-ragged-reductions`), the inputs read through guarded loads
and the output written through masked stores (`ansor-gpu-guard-padded-reads`). Knobs, sampling
and the untuned default; the scripts run on the CPU (blocks and threads as loops) into
NaN-poisoned outputs; PTX without a GPU; runs on an NVIDIA GPU against numpy
(`@pytest.mark.gpu`, skipped without one):

    pytest tests/test_gpu_ragged_rows.py -m gpu
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
from ansor.targets.cuda.reduction import (RowSketch, default_values, exact_thread_options, ragged_thread_options,
                                          thread_options)
from test_gpu_ragged import _as_cpu_loops

#: Rows: an odd number of them (every row its own block; `softmax3d`: 2 x 3 rows).
ROWS = 7
COLS = (197, 1000, 1023)


def _row_reduction(m: int, n: int, combiner: str, init: str) -> str:
    """A row-wise reduction as the task's output: `combiner(acc, x)` over the columns."""
    return f"""
func.func @row_{combiner.split('.')[1]}(%x: tensor<{m}x{n}xf32>) -> tensor<{m}xf32> {{
  %i = arith.constant {init} : f32
  %e = tensor.empty() : tensor<{m}xf32>
  %f = linalg.fill ins(%i : f32) outs(%e : tensor<{m}xf32>) -> tensor<{m}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}}
      ins(%x : tensor<{m}x{n}xf32>) outs(%f : tensor<{m}xf32>) {{
    ^bb0(%a: f32, %acc: f32):
      %s = {combiner} %acc, %a : f32
      linalg.yield %s : f32
  }} -> tensor<{m}xf32>
  return %r : tensor<{m}xf32>
}}
"""


def _row_norm(m: int, n: int) -> str:
    """sqrt of each row's sum of squares: a per-row output (an element-wise tail, no column)."""
    return f"""
func.func @rownorm(%x: tensor<{m}x{n}xf32>) -> tensor<{m}xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{m}xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<{m}xf32>) -> tensor<{m}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}}
      ins(%x : tensor<{m}x{n}xf32>) outs(%f : tensor<{m}xf32>) {{
    ^bb0(%a: f32, %acc: f32):
      %q = arith.mulf %a, %a : f32
      %s = arith.addf %acc, %q : f32
      linalg.yield %s : f32
  }} -> tensor<{m}xf32>
  %e2 = tensor.empty() : tensor<{m}xf32>
  %o = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}} ins(%r : tensor<{m}xf32>) outs(%e2 : tensor<{m}xf32>) {{
    ^bb0(%a: f32, %b: f32):
      %s = math.sqrt %a : f32
      linalg.yield %s : f32
  }} -> tensor<{m}xf32>
  return %o : tensor<{m}xf32>
}}
"""


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _layernorm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b


def _gelu(y: np.ndarray) -> np.ndarray:
    return 0.5 * y * (1 + np.tanh(0.7978845608028654 * (y + 0.044715 * y**3)))


#: kind -> (MLIR of a ROWS x C task, float64 numpy reference, inputs: all-negative rows for max,
#: all-positive for min, so a tail padded with 0 would win both)
Draw = Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]
KINDS: dict[str, tuple[Callable[[int], str], Callable[..., np.ndarray], Draw]] = {
    "softmax": (lambda c: workloads.get(f"softmax-{ROWS}x{c}"), _softmax,
                lambda rng, s: rng.standard_normal(s)),
    "layernorm": (lambda c: workloads.get(f"layernorm-{ROWS}x{c}"), _layernorm,
                  lambda rng, s: rng.standard_normal(s)),
    "lngelu": (lambda c: workloads.get(f"lngelu-{ROWS}x{c}"), lambda x, g, b: _gelu(_layernorm(x, g, b)),
               lambda rng, s: rng.standard_normal(s)),
    # rows over two dims (2 x 3 of them: blocks y, x)
    "softmax3d": (lambda c: workloads._func("softmax", [("X", [2, 3, c])], [2, 3, c],
                                            workloads._NINF + workloads._softmax_rows("%X", [2, 3, c]), "%out"),
                  _softmax, lambda rng, s: rng.standard_normal(s)),
    "rowmax": (lambda c: _row_reduction(ROWS, c, "arith.maximumf", "0xFF800000"), lambda x: x.max(-1),
               lambda rng, s: -1.0 - rng.random(s)),
    "rowmin": (lambda c: _row_reduction(ROWS, c, "arith.minimumf", "0x7F800000"), lambda x: x.min(-1),
               lambda rng, s: 1.0 + rng.random(s)),
    # attention scores + softmax: the scores' row computed once into shared memory (1 x c queries
    # x 2 heads: 2c rows of c keys)
    "tbs": (lambda c: workloads.get(f"tbs-1x{c}x2x16"),
            lambda q, k: _softmax(np.einsum("bshd,bthd->bhst", q, k)), lambda rng, s: rng.standard_normal(s)),
    "rownorm": (lambda c: _row_norm(ROWS, c), lambda x: np.sqrt((x * x).sum(-1)),
                lambda rng, s: rng.standard_normal(s)),
    "rowsum": (lambda c: _row_reduction(ROWS, c, "arith.addf", "0.0"), lambda x: x.sum(-1),
               lambda rng, s: rng.standard_normal(s)),
}

CASES = [(k, c) for k in KINDS for c in COLS]


def _task(kind: str, cols: int) -> SearchTask:
    return create_task(KINDS[kind][0](cols), name=f"{kind}-{ROWS}x{cols}", target="cuda")


def _sketch(task: SearchTask) -> RowSketch:
    sk = generate_sketches(task)[0]
    assert isinstance(sk, RowSketch), task.name
    return sk


def _inputs(kind: str, task: SearchTask, seed: int = 3) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    draw = KINDS[kind][2]
    return [draw(rng, s.shape).astype(np.float32) if i == 0 else rng.standard_normal(s.shape).astype(np.float32)
            for i, s in enumerate(task.inputs)]


def _want(kind: str, inputs: list[np.ndarray]) -> np.ndarray:
    return KINDS[kind][1](*(a.astype(np.float64) for a in inputs))


def _schedules(sk: RowSketch) -> list[dict[str, int]]:
    """The untuned default and two ragged `T` (a short chunk and a long one), unroll varied."""
    st = sk.gpu_stage
    ragged = ragged_thread_options(st.cols)
    picks = [default_values(st)]
    for t, unroll in ((ragged[-1], 64), (ragged[1], 0)):
        picks.append({**picks[0], st.threads_knob: t, st.unroll_knob: unroll})
    assert all(st.ragged(v) for v in picks), picks
    return picks


# ----------------------------------------------------------------------------------------------
# Knobs, sampling, the default


def test_ragged_thread_options() -> None:
    # rows whose length is a multiple of 32 keep their exact options only (as before)
    assert thread_options(1024) == exact_thread_options(1024) == (32, 64, 128, 256, 512, 1024)
    assert thread_options(768) == (32, 64, 96, 128, 192, 256, 384, 768)
    assert ragged_thread_options(4096) == ()
    # 197 (ViT's tokens) had none; 1000 only 2, 4, 8
    assert exact_thread_options(197) == () and exact_thread_options(1000) == (2, 4, 8)
    assert thread_options(197) == (32, 64, 96, 128, 160, 192, 224)
    assert thread_options(1000)[:5] == (2, 4, 8, 32, 64) and thread_options(1000)[-1] == 1024
    assert thread_options(50257)[-1] == 1024 and len(thread_options(50257)) == 32
    # a short row: the powers of two below twice its length, and a warp
    assert thread_options(7) == (2, 4, 8, 32)
    assert thread_options(40) == (2, 4, 8, 32, 64)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_rows_of_197_get_a_parallel_default(kind: str) -> None:
    """C = 197 had no GPU program (no `T` split it); now the sketch exists and its untuned
    default is 224 threads of one column each, padded to 224."""
    task = _task(kind, 197)
    sk = _sketch(task)
    st = sk.gpu_stage
    v = default_values(st)
    assert v[st.threads_knob] == 224 and st.padded_cols(v) == 224 and st.ragged(v)
    script = sk.script(v)
    assert script.count("pad_tiling_interface") == len(st.pad_loops)
    assert '"ansor-gpu-mask-ragged-reductions"' in script and '"ansor-gpu-fold-ragged-pads"' in script
    assert re.search(r"padding_sizes \[(0, )+224\]", script)
    from ansor.targets.cuda.rules import default_script

    assert "pad_tiling_interface" in default_script(task)


def test_defaults_of_other_lengths() -> None:
    for cols, t, padded in ((1000, 256, 1024), (1023, 256, 1024), (50257, 256, 50432)):
        st = _sketch(_task("softmax", cols) if cols != 50257 else create_task(
            workloads.get(f"softmax-2x{cols}"), name="sm", target="cuda")).gpu_stage
        v = default_values(st)
        assert (v[st.threads_knob], st.padded_cols(v)) == (t, padded)
    # an exact row keeps its exact default and script (no padding)
    sk = _sketch(create_task(workloads.get("softmax-7x1024"), name="sm1024", target="cuda"))
    v = default_values(sk.gpu_stage)
    assert v[sk.gpu_stage.threads_knob] == 256 and not sk.gpu_stage.ragged(v)
    assert "pad_tiling_interface" not in sk.script(v) and "ragged" not in sk.script(v)


def test_sampling_draws_ragged_and_exact_threads() -> None:
    sk = _sketch(_task("softmax", 1000))
    st = sk.gpu_stage
    rng = random.Random(0)
    samples = [sk.sample(rng).values() for _ in range(200)]
    assert all(sk.validate(v) is None for v in samples)
    n = sum(st.ragged(v) for v in samples)
    assert 120 < n < 185, n  # GPU_RAGGED_PROB = 0.75
    assert {v[st.threads_knob] for v in samples if not st.ragged(v)} == {2, 4, 8}


def test_ragged_prob_zero_keeps_exact_threads() -> None:
    from ansor.search.cost_model import RandomModel
    from ansor.search.evolution import EvolutionarySearch
    from ansor.targets import get_target

    weights = get_target("cuda").mutation_weights

    def info(task: SearchTask, ragged_prob: float):  # noqa: ANN202
        sk = _sketch(task)
        search = EvolutionarySearch([sk], RandomModel(seed=0), lambda schs: [None] * len(schs), seed=0,
                                    mutation_weights=weights, ragged_prob=ragged_prob)
        return sk, search, search.info[sk.name]

    sk, search, space = info(_task("softmax", 1000), 0.0)
    st = sk.gpu_stage
    rng = random.Random(1)
    exact = [space.sample(rng) for _ in range(40)]
    assert not any(st.ragged(s.values()) for s in exact)
    assert not space.valid({st.threads_knob: 256, st.unroll_knob: 0})
    kids = [c for p in exact if (c := search.mutate(p)) is not None]
    assert kids and not any(st.ragged(c.values()) for c in kids)
    # a row of 197 has no exact option: its ragged rows stay (they are all the sketch has)
    sk, _, space = info(_task("softmax", 197), 0.0)
    assert sk.gpu_stage.ragged(space.sample(rng).values())
    # and with ragged rows on, mutation reaches them
    sk, search, _ = info(_task("softmax", 1000), 0.3)
    kids = [c for s in range(40) if (c := search.mutate(sk.sample(random.Random(s)))) is not None]
    assert all(sk.validate(c.values()) is None for c in kids) and any(st.ragged(c.values()) for c in kids)


def test_row_materialized_in_shared_memory() -> None:
    """Attention scores + softmax (the scores' row in shared memory): the contraction is padded
    too (its fill renumbered after canonicalization made it a new op); lanes > 1 stay exact."""
    sk = _sketch(create_task(workloads.get("tbs-1x197x2x16"), name="tbs197", target="cuda"))
    st = sk.gpu_stage
    assert st.ragged_ok and (1, 3, 5) in st.pad_loops
    v = default_values(st)
    assert v == {"op7.threads": 224, "op7.unroll": 0, "op7.lanes": 1}
    script = sk.script(v)
    assert 'transform.annotate %fill' in script and '"ansor.op" = %num' in script
    assert "ragged rows take lanes = 1" in sk.validate({**v, "op7.lanes": 4})
    assert sk.validate({**v, "op7.threads": 32, "op7.lanes": 4}) is not None
    rng = random.Random(0)
    assert all(sk.validate(sk.sample(rng).values()) is None for _ in range(30))


# ----------------------------------------------------------------------------------------------
# The scripts as CPU loops, PTX


def _run_as_cpu_loops(task: SearchTask, script: str, inputs: list[np.ndarray], padded_cols: int) -> np.ndarray:
    from ansor.core import native as _native
    from ansor.core.mlir import apply_script, parse_payload, run_passes
    from ansor.targets.cpu.lowering import _lower_and_jit
    from mlir import ir

    _native.register_everything()
    with ir.Context(), ir.Location.unknown():
        module = parse_payload(task)
        run_passes(module, "ansor-gpu-own-fill-destinations", "lower")
        apply_script(module, _as_cpu_loops(script))
        run_passes(module, "canonicalize,cse,buffer-results-to-out-params{hoist-static-allocs "
                           "modify-public-functions},canonicalize,cse", "lower")
        run_passes(module, "ansor-gpu-guard-padded-reads", "lower")
        text = str(module)
        assert f"memref<{ROWS}x{padded_cols}x" not in text  # no padded buffer left
        (out,) = _lower_and_jit(module, task, 2).run(inputs, [np.full(task.outputs[0].shape, np.nan, np.float32)])
    return out


@pytest.mark.parametrize(("kind", "cols"), CASES)
def test_ragged_row_scripts_run_as_loops_on_the_cpu(kind: str, cols: int) -> None:
    """The ragged scripts themselves (the default and two ragged `T`), up to the mapping to the
    GPU, then the guards, run on the CPU into NaN-poisoned outputs: every column written, once
    and right; the max of all-negative rows and the min of all-positive ones are exact (a tail
    that combined the padding value 0 would give 0)."""
    task = _task(kind, cols)
    sk = _sketch(task)
    inputs = _inputs(kind, task)
    want = _want(kind, inputs)
    for v in _schedules(sk):
        out = _run_as_cpu_loops(task, sk.script(v), inputs, sk.gpu_stage.padded_cols(v))
        assert not np.isnan(out).any(), v
        if kind in ("rowmax", "rowmin"):
            np.testing.assert_array_equal(out, want.astype(np.float32), err_msg=str(v))
        else:
            np.testing.assert_allclose(out, want, rtol=2e-4, atol=2e-4, err_msg=str(v))


def test_identity_of_the_max_is_minus_infinity() -> None:
    """The row max of all-negative rows through a ragged script: the padded tail must combine
    -inf (maximumf's identity), not the padding value 0; a row of -1e30 too."""
    task = _task("rowmax", 197)
    sk = _sketch(task)
    x = -1.0 - np.random.default_rng(0).random((ROWS, 197)).astype(np.float32)
    x[3] = -1e30
    v = default_values(sk.gpu_stage)
    out = _run_as_cpu_loops(task, sk.script(v), [x], sk.gpu_stage.padded_cols(v))
    np.testing.assert_array_equal(out, x.max(-1))
    assert (out < -1.0).all()


@pytest.mark.parametrize(("kind", "cols"), CASES)
def test_ragged_rows_lower_to_ptx_without_a_gpu(kind: str, cols: int) -> None:
    """PTX without a GPU: warp shuffles merge the partial results, predicated (guarded) global
    accesses, no local memory (the exact programs had none)."""
    from ansor.targets.cuda.lowering import emit_ptx

    task = _task(kind, cols)
    sk = _sketch(task)
    for v in _schedules(sk)[:2]:
        ptx = emit_ptx(task, sk.script(v), arch="sm_90")
        assert ".entry" in ptx and "shfl.sync.bfly" in ptx and "setp" in ptx
        assert ".local" not in ptx, v
        assert f".reqntid {v[sk.gpu_stage.threads_knob]}, 1, 1" in ptx or "%tid.x" in ptx


# ----------------------------------------------------------------------------------------------
# On an NVIDIA GPU


@pytest.mark.gpu
@pytest.mark.parametrize(("kind", "cols"), CASES)
def test_ragged_rows_run_on_the_gpu(kind: str, cols: int) -> None:
    """The default and ragged schedules (plus 4 sampled ones) against numpy, each run into
    outputs poisoned with NaN and with a second sentinel."""
    from ansor.measure import verify
    from ansor.targets.cuda.lowering import compile_task_cuda

    task = _task(kind, cols)
    sk = _sketch(task)
    inputs = _inputs(kind, task)
    want = _want(kind, inputs)
    rng = random.Random(5)
    schedules = _schedules(sk) + [sk.sample(rng).values() for _ in range(4)]
    for v in schedules:
        kernel = compile_task_cuda(task, sk.script(v))
        for which in (0, 1):
            (out,) = kernel.run(inputs, verify.poisoned(task.outputs, which))
            if kind in ("rowmax", "rowmin"):
                np.testing.assert_array_equal(out, want.astype(np.float32), err_msg=str(v))
            else:
                np.testing.assert_allclose(out, want, rtol=2e-4, atol=2e-4, err_msg=str(v))

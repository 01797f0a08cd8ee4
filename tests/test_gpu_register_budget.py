"""The register budget of the CUDA-core GPU sketch (issue 27): 8x16 / 16x8 thread tiles.

`rules.thread_registers` estimates a thread's registers (accumulators + the operands of one
reduction step + its shared-memory copy elements + `OTHER_REGISTERS`); `validate_gpu` refuses a
tile past 255 per thread or past 64 K per block, instead of the flat cap of 64 accumulators it
replaces. Here: the estimate and its refusals, sampling and mutation reaching 128-accumulator
tiles, the PTX of 8x16 candidates (no local memory; ptxas's registers and spills where ptxas is
installed), the cost-model features of such kernels; and, on an NVIDIA GPU, their results against
numpy into poisoned outputs (`@pytest.mark.gpu`, skipped without one):

    pytest tests/test_gpu_register_budget.py -m gpu
"""

from __future__ import annotations

import math
import random
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from ansor.core.task import SearchTask, create_task
from ansor.frontend import workloads
from ansor.space.schedule import Schedule
from ansor.targets import generate_sketches
from ansor.targets.cuda.params import MAX_REGISTERS_PER_BLOCK, MAX_REGISTERS_PER_THREAD, OTHER_REGISTERS
from ansor.targets.cuda.rules import GpuSketch, GpuStage, thread_registers, threads_per_dim


def _tile(d0: tuple[int, int, int, int], d1: tuple[int, int, int, int], k: tuple[int, int], *,
          stages: int = 2, unroll: int = 1024) -> dict[str, int]:
    """A matmul annotation: (block, vthread chunk, thread tile, register tile) of M (d0) and N
    (d1), (R0 tile, R2 steps) of K."""
    v = {f"op1.d0.t{i + 1}": t for i, t in enumerate(d0)}
    v.update({f"op1.d1.t{i + 1}": t for i, t in enumerate(d1)})
    v.update({"op1.d2.t1": k[0], "op1.d2.t2": k[1], "op1.unroll": unroll, "op1.stages": stages})
    return v


#: 128x256 blocks of 256 threads, 8x16 accumulators per thread, K tile 8 (cuBLAS's SGEMM tile).
PLAIN_8X16 = _tile((128, 128, 8, 8), (256, 256, 16, 16), (8, 8))
#: The same thread tile as 2x4 virtual-thread chunks of 4x4 (128-bit shared reads without conflicts).
CHUNKED_8X16 = _tile((128, 64, 4, 4), (256, 64, 4, 4), (8, 8))
#: The same thread tile as 2x2 chunks of 4x8.
CHUNKED_4X8 = _tile((128, 64, 4, 4), (256, 128, 8, 8), (8, 8))
#: 256x128 blocks of 256 threads, 16x8 accumulators as 4x2 chunks of 4x4.
CHUNKED_16X8 = _tile((256, 64, 4, 4), (128, 64, 4, 4), (8, 8))
#: The best matmul-4096 annotation before (64 accumulators: 2x2 chunks of 4x4; 0.869x cuBLAS).
BEST_64 = _tile((128, 64, 4, 4), (128, 64, 4, 4), (16, 4))


def _task(name: str) -> SearchTask:
    return create_task(workloads.get(name), name=name, target="cuda")


def _sketch(task: SearchTask) -> GpuSketch:
    sk = next(s for s in generate_sketches(task) if s.name == "s0")
    assert isinstance(sk, GpuSketch)
    return sk


def _accumulators(stage: GpuStage, values: dict[str, int]) -> int:
    """Output elements one thread keeps (virtual threads included)."""
    return math.prod((values[stage.knob(d, 1)] // values[stage.knob(d, 2)]) * values[stage.knob(d, 3)]
                     for d in stage.mapped)


def test_the_estimate_counts_accumulators_operands_and_copies() -> None:
    st = _sketch(_task("matmul-4096")).gpu_stage
    # 128 accumulators, 8 + 16 operands per k step, (128x8 + 8x256) / 256 threads copied
    assert thread_registers(st, PLAIN_8X16) == 128 + 24 + 12 + OTHER_REGISTERS
    # virtual threads change where the accumulators sit, not how many there are
    assert thread_registers(st, CHUNKED_8X16) == thread_registers(st, PLAIN_8X16)
    # a deeper K tile: more elements copied per thread
    assert thread_registers(st, {**PLAIN_8X16, "op1.d2.t1": 16, "op1.d2.t2": 4}) == 128 + 24 + 24 + OTHER_REGISTERS
    assert thread_registers(st, BEST_64) == 64 + 16 + 16 + OTHER_REGISTERS
    # f64: two registers an element
    f64 = create_task(workloads.matmul(256, 256, 256, "f64"), name="mm-f64", target="cuda")
    v = _tile((64, 64, 4, 4), (64, 64, 4, 4), (8, 8))
    assert thread_registers(_sketch(f64).gpu_stage, v) == 2 * (16 + 8 + 4) + OTHER_REGISTERS


def test_8x16_tiles_are_valid() -> None:
    for name, tiles in (("matmul-4096", (PLAIN_8X16, CHUNKED_8X16, CHUNKED_16X8, BEST_64)),
                        ("matmul-4096x11008x4096", (PLAIN_8X16, CHUNKED_8X16, CHUNKED_16X8)),
                        ("matmul-1000x1000x1000", (PLAIN_8X16, CHUNKED_8X16))):
        sk = _sketch(_task(name))
        for v in tiles:
            assert sk.validate(v) is None, (name, v)
            assert _accumulators(sk.gpu_stage, v) in (64, 128)


def test_what_cannot_fit_is_refused() -> None:
    sk = _sketch(_task("matmul-4096"))
    st = sk.gpu_stage
    # 16x16 accumulators: 256 + 32 + 16 + 40 registers
    big = _tile((256, 256, 16, 16), (256, 256, 16, 16), (8, 8))
    assert sk.validate(big) == f"256 accumulators per thread need ~344 registers > {MAX_REGISTERS_PER_THREAD}"
    # 8x16 with 512 threads: 200 registers each, twice what a 512-thread block may hold
    wide = _tile((256, 256, 8, 8), (256, 256, 16, 16), (8, 8))
    assert math.prod(threads_per_dim(st, wide)) == 512 and thread_registers(st, wide) == 200
    assert sk.validate(wide) == f"512 threads x ~200 registers (128 accumulators) > {MAX_REGISTERS_PER_BLOCK} per block"
    # 64 accumulators with 1024 threads (the flat cap passed it; ptxas then spills into 64 registers)
    many = _tile((256, 256, 8, 8), (256, 256, 8, 8), (8, 8))
    assert sk.validate(many) == f"1024 threads x ~128 registers (64 accumulators) > {MAX_REGISTERS_PER_BLOCK} per block"
    # a deep K tile copied by few threads: the synchronous copy's prefetch registers count
    # (128 threads: (128x32 + 32x128) / 128 elements each)
    deep = _tile((128, 128, 8, 8), (128, 128, 16, 16), (32, 8), stages=1)
    assert sk.validate(deep) == f"128 accumulators per thread need ~256 registers > {MAX_REGISTERS_PER_THREAD}"
    assert sk.validate({**deep, "op1.d2.t1": 16}) is None


def test_a_stage_without_reduction_keeps_the_element_cap() -> None:
    scale = """
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @scale(%x: tensor<64x256xf32>) -> tensor<64x256xf32> {
  %c = arith.constant 2.5 : f32
  %e = tensor.empty() : tensor<64x256xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<64x256xf32>) outs(%e : tensor<64x256xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %c : f32
    linalg.yield %m : f32
  } -> tensor<64x256xf32>
  return %r : tensor<64x256xf32>
}
"""
    sk = _sketch(create_task(scale, name="scale", target="cuda"))
    st = sk.gpu_stage
    assert not st.reduce
    x, y = st.mapped  # x = d1 (256), y = d0 (64)
    v = {st.unroll_knob: 0}
    v.update({st.knob(y, lv): t for lv, t in zip((1, 2, 3, 4), (64, 64, 8, 1), strict=True)})
    v.update({st.knob(x, lv): t for lv, t in zip((1, 2, 3, 4), (256, 256, 16, 4), strict=True)})
    assert sk.validate(v) == "128 elements per thread > 64"
    v[st.knob(x, 3)] = 8
    v[st.knob(x, 2)] = 128
    v[st.knob(x, 1)] = 128
    assert sk.validate(v) is None


def test_sampling_reaches_128_accumulator_tiles() -> None:
    sk = _sketch(_task("matmul-1024"))
    st = sk.gpu_stage
    rng = random.Random(0)
    samples = [sk.sample(rng).values() for _ in range(300)]
    acc = [_accumulators(st, v) for v in samples]
    assert sum(a == 128 for a in acc) >= 30
    assert max(acc) == 128  # 256 accumulators never fit 255 registers
    cublas_like = [v for v in samples if math.prod(threads_per_dim(st, v)) == 256
                   and sorted(v[st.knob(d, 1)] for d in st.mapped) == [128, 256]]
    assert cublas_like
    for v in samples:
        regs = thread_registers(st, v)
        assert regs <= MAX_REGISTERS_PER_THREAD and regs * math.prod(threads_per_dim(st, v)) <= MAX_REGISTERS_PER_BLOCK


def test_mutation_reaches_128_accumulator_tiles() -> None:
    from ansor.search.cost_model import RandomModel
    from ansor.search.evolution import EvolutionarySearch
    from ansor.targets import get_target

    sk = _sketch(_task("matmul-4096"))
    search = EvolutionarySearch([sk], RandomModel(seed=0), lambda schs: [None] * len(schs), seed=0,
                                mutation_weights=get_target("cuda").mutation_weights)
    parent = Schedule.of(sk.name, BEST_64)
    kids = [k.values() for k in (search.mutate(parent) for _ in range(300)) if k is not None]
    assert any(_accumulators(sk.gpu_stage, v) == 128 for v in kids)
    assert all(sk.validate(v) is None for v in kids)


def _ptxas(ptx: str, tmp_path: Path) -> tuple[int, int, int] | None:
    """(registers, spill store bytes, stack frame bytes) from ptxas -v; None without ptxas."""
    exe = shutil.which("ptxas")
    if exe is None:
        return None
    src = tmp_path / "k.ptx"
    src.write_text(ptx)
    out = subprocess.run([exe, "-arch=sm_90", "-v", str(src), "-o", str(tmp_path / "k.cubin")],
                         capture_output=True, text=True, check=True).stderr
    regs = int(re.search(r"Used (\d+) registers", out).group(1))  # type: ignore[union-attr]
    spill = int(re.search(r"(\d+) bytes spill stores", out).group(1))  # type: ignore[union-attr]
    stack = int(re.search(r"(\d+) bytes stack frame", out).group(1))  # type: ignore[union-attr]
    return regs, spill, stack


@pytest.mark.parametrize("name,values,clean", [
    ("matmul-4096", PLAIN_8X16, True), ("matmul-4096", CHUNKED_8X16, True),
    ("matmul-4096", {**CHUNKED_8X16, "op1.stages": 1}, True), ("matmul-4096", CHUNKED_4X8, True),
    ("matmul-4096x11008x4096", CHUNKED_16X8, True),
    ("matmul-1000x1000x1000", PLAIN_8X16, True), ("matmul-1000x1000x1000", {**CHUNKED_4X8, "op1.stages": 1}, True),
    # (ptxas 13.0 spills 64 bytes here: 4 chunks share each guarded output row; where, unknown)
    ("matmul-1000x1000x1000", CHUNKED_8X16, False)])
def test_8x16_ptx_keeps_the_accumulators_in_registers(name: str, values: dict[str, int], clean: bool,
                                                      tmp_path: Path) -> None:
    """No local memory; 8 k steps of 128 FMAs in the `R0` loop, which stores nothing to global
    memory (the accumulators stay in registers across it: on 1000^3 too, whose guarded output
    rows the chunks side by side share, `ansor-gpu-hoist-accumulators`); 128-bit shared reads,
    6 per k step (8 + 16 floats), the virtual threads' chunks sharing theirs; ptxas (where
    installed, `clean` ones): no spills, <= 255 registers."""
    from ansor.targets.cuda.lowering import emit_ptx

    task = _task(name)
    sk = _sketch(task)
    ptx = emit_ptx(task, sk.script(values), arch="sm_90")
    assert ".local" not in ptx and "ld.local" not in ptx and "st.local" not in ptx
    loops = re.findall(r"(\$L__BB0_\d+):\n(.*?)bra(?:\.uni)?\s+\1;", ptx, re.S)
    body = max((b for _, b in loops if "fma.rn" in b), key=len)
    assert "st.global" not in body
    assert len(re.findall(r"\bfma\.rn(?:\.ftz)?\.f32", body)) == 8 * 128
    shared_reads = re.findall(r"\bld\.shared(\.v\d)?\.[bf]32", body)
    assert len(shared_reads) == 8 * 6 and set(shared_reads) == {".v4"}
    got = _ptxas(ptx, tmp_path) if clean else None
    if got is not None:
        regs, spill, stack = got
        assert spill == 0 and stack == 0 and regs <= MAX_REGISTERS_PER_THREAD, got


def test_the_cost_model_featurizes_8x16_kernels() -> None:
    from ansor.search import features

    task = _task("matmul-4096")
    sk = _sketch(task)
    rows = features.featurize(task, [sk.script(v) for v in (BEST_64, PLAIN_8X16, CHUNKED_8X16)])
    for f in rows:
        assert f is not None and f.shape[0] > 0 and np.isfinite(f).all()
    assert not np.array_equal(rows[0].sum(0), rows[1].sum(0))


# ----------------------------------------------------------------------------------------------
# On an NVIDIA GPU


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["matmul-1024", "matmul-1000x1000x1000", "matmul-512x2048x384"])
def test_8x16_tiles_run_on_the_gpu(name: str) -> None:
    """The 8x16 / 16x8 tiles (1, 2 and 3 stages) and the best 64-accumulator one against numpy
    (float64), each run into outputs poisoned with NaN and with a second sentinel; 1000^3 pads
    every dim (guarded reads; the chunked tiles' accumulator rows hoisted out of the `R0` loop)."""
    from ansor.measure import verify
    from ansor.targets.cuda.lowering import compile_task_cuda

    task = _task(name)
    sk = _sketch(task)
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal(s.shape).astype(np.float32) for s in task.inputs)
    want = a.astype(np.float64) @ b.astype(np.float64)
    schedules = [{**PLAIN_8X16, "op1.stages": s} for s in (1, 2, 3)]
    schedules += [{**CHUNKED_8X16, "op1.stages": s} for s in (1, 2)] + [CHUNKED_16X8]
    schedules += [{**BEST_64, "op1.stages": s} for s in (1, 2)]  # (ragged: hoisted row chunks)
    for v in schedules:
        assert sk.validate(v) is None, v
        kernel = compile_task_cuda(task, sk.script(v))
        for which in (0, 1):
            (out,) = kernel.run([a, b], verify.poisoned(task.outputs, which))
            np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3, err_msg=str(v))


@pytest.mark.parametrize("name", ["matmul-128", "matmul-97x197x61"])
def test_the_sampler_drops_no_valid_factorization(name: str) -> None:
    """`_dim_choices` (the per-loop factorizations the sampler draws from) only drops what no
    valid annotation uses: every factorization of a mapped loop that appears in some valid
    annotation (found by drawing the other loops from the unfiltered lists) is kept."""
    from ansor.space.schedule import factorizations, sizes_from_factors
    from ansor.targets.cuda.rules import _dim_choices, _ragged_factors, validate_gpu

    sk = generate_sketches(create_task(workloads.get(name), name=name, target="cuda"))[0]
    st = sk.gpu_stage
    splits = [s for s in sk.splits if s.tile_knobs]
    rng = random.Random(0)
    used: dict[tuple, set] = {}
    for _ in range(20000):
        values, picks = {}, []
        for s in splits:
            e = st.extents[s.dim]
            ragged = s.extent != e and rng.random() < 0.5
            f = rng.choice((_ragged_factors(s, e) or factorizations(e, s.levels)) if ragged
                           else factorizations(e, s.levels))
            picks.append((s, e, ragged, f))
            values.update(zip(s.tile_knobs, sizes_from_factors(f), strict=True))
        values[st.unroll_knob] = 0
        if st.pipelined:
            values[st.stages_knob] = 1
        if validate_gpu(st, sk.knobs, values) is None:
            for s, e, ragged, f in picks:
                used.setdefault((s, e, ragged), set()).add(f)
    assert sum(len(fs) for fs in used.values()) > 20  # (about 1200-1700 valid draws of 20000)
    for (s, e, ragged), fs in used.items():
        axis = st.mapped.index(s.dim) if s.kind == "S" and s.dim in st.mapped else -1
        kept = set(_dim_choices(s, e, ragged, axis))
        assert fs <= kept, (s.dim, sorted(fs - kept)[:3])

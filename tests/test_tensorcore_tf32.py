"""TF32 tensor cores for f32 contractions (an opt-in on the task, off by default): which tasks get
the wgmma sketch, the task identity and records that carry the flag, the verification tolerance,
the `--tf32` flag, the kernel's PTX (no GPU needed), and on the GPU host its results against the
exact f32 reference."""

from __future__ import annotations

import re

import numpy as np
import pytest

import ansor
from ansor.core.task import SearchTask, TaskError, create_task, tf32_hash, with_tf32
from ansor.frontend import workloads
from ansor.targets import generate_sketches
from ansor.targets.cuda.tensorcore import BK_TF32, DEFAULT, TcSketch, stage_bytes, tc_problem_for
from test_tensorcore import _check_on_gpu

#: The annotations the tests build: the default tile, a persistent kernel with one MMA in flight,
#: split-K, 64-row blocks with 256 columns (all with the producer warpgroup a TF32 kernel needs).
ANNOTATIONS = [
    dict(bm=128, wgm=2, ws=1),
    dict(bm=128, wgm=2, ws=1, persist=1, wait=1, stages=4),
    dict(bm=128, wgm=2, ws=1, splitk=2),
    # (left a tenth of the outputs NaN while the dynamic shared buffer lay over the mbarriers)
    dict(bm=128, bn=64, wgm=2, ws=1, stages=2, splitk=4),
    dict(bm=64, bn=256, ws=1, stages=3, wait=1, group=4),
]

#: Ragged M, N and K (two tiles, with and without a staged store), a batch matmul and a fused
#: epilogue (bias + GELU), each with an annotation.
OTHER_TASKS = [
    ("matmul-200x136x104", dict(bm=128, wgm=2, ws=1)),
    ("matmul-200x136x104", dict(bm=64, bn=128, ws=1, stages=2)),
    ("gmm-4x128x128x64", dict(bm=128, wgm=2, ws=1, stages=2)),
    ("mmgelu-256", dict(bm=64, bn=128, ws=1)),
]


def _task(name: str, *, tf32: bool = True) -> SearchTask:
    return ansor.create_task(workloads.get(name), name=name, target="cuda", tf32=tf32)


def _values(**kw: int) -> dict[str, int]:
    return {f"tc.{k}": v for k, v in {**DEFAULT, **kw}.items()}


@pytest.fixture(scope="module")
def mm() -> SearchTask:
    return _task("matmul-512x384x256")


def test_off_by_default_and_part_of_the_task_identity(mm: SearchTask) -> None:
    plain = _task("matmul-512x384x256", tf32=False)
    assert not plain.tf32 and "tf32" not in plain.to_json()  # exact-fp32 tasks serialise as before
    assert mm.tf32 and mm.hash == tf32_hash(plain.hash) != plain.hash
    assert mm.key() != plain.key() and with_tf32(plain) == mm and with_tf32(mm) == mm
    assert SearchTask.from_json(mm.to_json()) == mm
    assert SearchTask.from_json(plain.to_json()) == plain
    assert create_task(workloads.get("matmul-512x384x256"), target="cuda").tf32 is False
    with pytest.raises(TaskError, match="cuda target"):
        create_task(workloads.get("matmul-512x384x256"), tf32=True)


def test_f32_matmul_gets_the_sketch_only_with_tf32(mm: SearchTask) -> None:
    plain = _task("matmul-512x384x256", tf32=False)
    problem, why = tc_problem_for(plain)
    assert problem is None and "not f16 or bf16" in why and "--tf32" in why
    assert [s.name for s in generate_sketches(plain)] == ["s0", "skip"]
    problem, why = tc_problem_for(mm)
    assert problem is not None and problem.tf32 and problem.et == "f32" and problem.bk == BK_TF32
    assert problem.kt == 256 // BK_TF32
    assert [s.name for s in generate_sketches(mm)] == ["tc0", "s0", "skip"]
    # a half-precision task is the same kernel with or without the flag
    half, _ = tc_problem_for(_task("matmul-256x512x1024-f16"))
    assert half is not None and not half.tf32 and half.bk == 64


def test_tf32_tasks_it_does_not_take() -> None:
    problem, why = tc_problem_for(_task("gmm-2x128x128x48"))  # a k-block would run into the next batch
    assert problem is None and "multiple of 32" in why
    problem, why = tc_problem_for(_task("c2d-1x14x14x64x64x3x1x1"))  # convolutions: f16/bf16 only
    assert problem is None and "not f16 or bf16" in why


def test_validation_names_what_a_tf32_kernel_needs(mm: SearchTask) -> None:
    sk = generate_sketches(mm)[0]
    assert isinstance(sk, TcSketch)
    assert "producer warpgroup" in sk.validate(_values(bm=128, wgm=2, ws=0))
    assert "64 rows" in sk.validate(_values(bm=128, wgm=1, ws=1))
    for kw in ANNOTATIONS:
        assert sk.validate(_values(**kw)) is None, kw
    # a stage holds A, B K-major and B as loaded: (bm + 2 bn) rows of 128 bytes
    assert stage_bytes(128, 256, tf32=True) == (128 + 512) * 128
    assert "shared memory" in sk.validate(_values(bm=128, bn=256, wgm=2, ws=1, stages=3))
    import random

    rng = random.Random(0)
    for _ in range(5):  # the sampler finds valid TF32 annotations
        assert sk.validate(sk.sample(rng).values()) is None


def test_script_tiles_k_by_32(mm: SearchTask) -> None:
    sk = generate_sketches(mm)[0]
    script = sk.script(_values(**ANNOTATIONS[0]))
    assert "tile_sizes [0, 0, 32]" in script and "TF32" in script


@pytest.mark.parametrize("kw", ANNOTATIONS, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_ptx_has_tf32_wgmma_and_the_transposition(mm: SearchTask, kw: dict[str, int]) -> None:
    from ansor.targets.cuda.lowering import emit_ptx

    sk = generate_sketches(mm)[0]
    ptx = emit_ptx(mm, sk.script(_values(**kw)))
    bn = kw.get("bn", DEFAULT["bn"])
    mmas = re.findall(r"wgmma\.mma_async[.\w]*", ptx)
    assert set(mmas) == {f"wgmma.mma_async.sync.aligned.m64n{bn}k8.f32.tf32.tf32"}
    assert len(mmas) == BK_TF32 // 8  # one wgmma per k8 step of a stage
    assert "cp.async.bulk.tensor" in ptx  # TMA
    assert "st.shared.v4" in ptx and "fence.proxy.async.shared::cta" in ptx  # B written K-major
    assert ".local" not in ptx and "f16" not in ptx


@pytest.mark.parametrize("name, kw", OTHER_TASKS)
def test_ptx_of_ragged_batched_and_fused_tasks(name: str, kw: dict[str, int]) -> None:
    from ansor.targets.cuda.lowering import emit_ptx

    task = _task(name)
    sk = generate_sketches(task)[0]
    assert isinstance(sk, TcSketch) and sk.validate(_values(**kw)) is None
    ptx = emit_ptx(task, sk.script(_values(**kw)))
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k8\.f32\.tf32\.tf32", ptx)
    assert ".local" not in ptx


def test_records_carry_the_flag_and_replay_it(tmp_path, mm: SearchTask) -> None:
    from ansor.measure.measurer import MeasureInput, MeasureResult
    from ansor.space.schedule import Schedule
    from ansor.targets.cuda.lowering import emit_ptx
    from ansor.tuning.records import Record, RecordWriter, best_record, load_records

    sk = generate_sketches(mm)[0]
    v = _values(**ANNOTATIONS[0])
    path = tmp_path / "tf32.jsonl"
    with RecordWriter(path) as w:
        w.append(Record.of(MeasureInput(mm, Schedule.of(sk.name, v), sk.script(v)), MeasureResult(costs=(1e-4,))))
    (rec,) = load_records(path)
    assert rec.task == mm and rec.task.tf32
    plain = _task("matmul-512x384x256", tf32=False)
    assert best_record([rec], plain.hash, "cuda") is None  # never replayed for the exact-fp32 task
    assert best_record([rec], mm.hash, "cuda") is rec
    assert "k8.f32.tf32.tf32" in emit_ptx(rec.task, rec.script)


def test_tolerance_admits_tf32_rounding_only_on_tf32_tasks(mm: SearchTask) -> None:
    from ansor.measure.verify import check_task_outputs

    plain = _task("matmul-512x384x256", tf32=False)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 256)).astype(np.float32)
    b = rng.standard_normal((256, 384)).astype(np.float32)

    def tf32(x: np.ndarray) -> np.ndarray:  # what the tensor cores read: the top 19 bits (truncation)
        return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)

    ref = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    out = (tf32(a).astype(np.float64) @ tf32(b).astype(np.float64)).astype(np.float32)
    assert check_task_outputs(plain, [out], [ref]) is not None  # exact fp32 refuses TF32 results
    assert check_task_outputs(mm, [out], [ref]) is None
    wrong = out.copy()
    wrong[:, 200] += np.abs(ref).mean()  # one column off by a typical magnitude
    assert "differ" in check_task_outputs(mm, [wrong], [ref])


def test_cli_flag_makes_tf32_tasks() -> None:
    from ansor.cli import _task as cli_task
    from ansor.cli import build_parser

    p = build_parser()
    for cmd in ("tune", "bench"):
        on = p.parse_args([cmd, "--workload", "matmul-512x384x256", "--target", "cuda", "--tf32"])
        off = p.parse_args([cmd, "--workload", "matmul-512x384x256", "--target", "cuda"])
        assert on.tf32 and not off.tf32
        assert cli_task(on).tf32 and not cli_task(off).tf32


@pytest.mark.gpu
@pytest.mark.parametrize("kw", ANNOTATIONS, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_tf32_gemm_matches_the_f32_reference(mm: SearchTask, kw: dict[str, int]) -> None:
    _check_on_gpu(mm, kw)


@pytest.mark.gpu
@pytest.mark.parametrize("name, kw", OTHER_TASKS)
def test_ragged_batched_and_fused_tf32_gemms_match_the_f32_reference(name: str, kw: dict[str, int]) -> None:
    _check_on_gpu(_task(name), kw)


def test_compile_with_tf32_replays_the_tf32_record(tmp_path, monkeypatch, mm: SearchTask) -> None:
    """`ansor.compile(..., tf32=True)` compiles the function as the TF32 task with its record;
    without the flag the same log has no record for the exact-fp32 function."""
    import ansor
    from ansor.measure.measurer import MeasureInput, MeasureResult
    from ansor.space.schedule import Schedule
    from ansor.targets import get_target
    from ansor.tuning.records import Record, RecordWriter

    sk = generate_sketches(mm)[0]
    v = _values(**ANNOTATIONS[0])
    path = tmp_path / "tf32.jsonl"
    with RecordWriter(path) as w:
        w.append(Record.of(MeasureInput(mm, Schedule.of(sk.name, v), sk.script(v)), MeasureResult(costs=(1e-4,))))
    built = []
    monkeypatch.setattr(get_target("cuda"), "compile", lambda task, script: built.append((task, script)))
    f = ansor.compile(mm.ir, target="cuda", log=path, tf32=True)
    assert f.tuned and built[-1][0].tf32 and built[-1][1] == sk.script(v)
    g = ansor.compile(mm.ir, target="cuda", log=path)
    assert not built[-1][0].tf32 and built[-1][1] is None and not getattr(g, "tuned", True)


#: Two matmuls with a ReLU between: a model of two tasks.
TWO_MATMULS = """
func.func @mlp(%x: tensor<128x256xf32>, %w1: tensor<256x256xf32>, %w2: tensor<256x128xf32>) -> tensor<128x128xf32> {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<128x256xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<128x256xf32>) -> tensor<128x256xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<128x256xf32>, tensor<256x256xf32>) outs(%z1 : tensor<128x256xf32>) -> tensor<128x256xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]} ins(%h : tensor<128x256xf32>) outs(%e1 : tensor<128x256xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<128x256xf32>
  %e2 = tensor.empty() : tensor<128x128xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<128x128xf32>) -> tensor<128x128xf32>
  %y = linalg.matmul ins(%r, %w2 : tensor<128x256xf32>, tensor<256x128xf32>) outs(%z2 : tensor<128x128xf32>) -> tensor<128x128xf32>
  return %y : tensor<128x128xf32>
}
"""


def test_models_extract_tf32_tasks_for_the_tensor_cores() -> None:
    """`extract_tasks(..., tf32=True)` (`ansor tune MODEL --tf32`): every task of the model is a
    TF32 task (its own hash, weights kept), the matmuls get the TF32 wgmma sketch; on the CPU the
    flag is a one-line error."""
    from ansor.frontend.partition import extract_tasks

    exact = extract_tasks(TWO_MATMULS, target="cuda")
    net = extract_tasks(TWO_MATMULS, target="cuda", tf32=True)
    assert len(net.tasks) == len(exact.tasks) >= 2 and len(net.calls) == len(exact.calls)
    assert all(t.tf32 for t in net.tasks) and not any(t.tf32 for t in exact.tasks)
    assert {t.hash for t in net.tasks}.isdisjoint({t.hash for t in exact.tasks})
    assert [t.weight for t in net.tasks] == [t.weight for t in exact.tasks]
    assert sum(isinstance(generate_sketches(t)[0], TcSketch) for t in net.tasks) >= 1
    assert not any(isinstance(generate_sketches(t)[0], TcSketch) for t in exact.tasks)
    with pytest.raises(TaskError) as info:
        extract_tasks(TWO_MATMULS, target="cpu", tf32=True)
    assert "tf32" in str(info.value) and "\n" not in str(info.value)


def test_cli_tunes_a_model_with_tf32_as_a_network(tmp_path) -> None:
    """`ansor tune MODEL --tf32` now partitions the model (it used to tune the whole function as
    one task): `_network` extracts TF32 tasks."""
    from ansor.cli import _network, build_parser

    f = tmp_path / "mlp.mlir"
    f.write_text(TWO_MATMULS)
    args = build_parser().parse_args(["tune", str(f), "--target", "cuda", "--tf32"])
    net = _network(args)
    assert len(net.calls) >= 2 and all(t.tf32 for t in net.tasks)

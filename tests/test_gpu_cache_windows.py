"""A convolution's windowed input (the image) cached in shared memory with its filter
(`rules._cached_windows`, `GpuStage.windows`, `input_tile_shape`): the tile sizes of strided and
padded windows, the device-limit accounting, the script and its PTX (no GPU needed), and the
programs against numpy on an NVIDIA GPU."""

from __future__ import annotations

import random

import numpy as np
import pytest
from ansor import config
from ansor.frontend import workloads
from ansor.targets import generate_sketches
from ansor.targets.cuda.rules import input_tile_shape, shared_bytes, thread_registers, validate_gpu
from ansor.core.task import create_task

PRIME_CONV = "c2d-1x97x97x13x29x3x1x1"  # 97x97, 13 -> 29 channels, 3x3, padding 1
#: the 56-trial tuned annotation of PRIME_CONV (results/gpu-prime/best-b488deb.jsonl)
TUNED = {"op1.d1.t1": 16, "op1.d1.t2": 4, "op1.d1.t3": 1, "op1.d1.t4": 1, "op1.d2.t1": 4, "op1.d2.t2": 4,
         "op1.d2.t3": 2, "op1.d2.t4": 1, "op1.d3.t1": 32, "op1.d3.t2": 32, "op1.d3.t3": 2, "op1.d3.t4": 2,
         "op1.d4.t1": 3, "op1.d4.t2": 1, "op1.d5.t1": 3, "op1.d5.t2": 1, "op1.d6.t1": 1, "op1.d6.t2": 1,
         "op1.stages": 2, "op1.unroll": 16}


def _sketch(name: str):
    task = create_task(workloads.get(name), name=name, target="cuda")
    return task, next(s for s in generate_sketches(task) if s.rule != "skip")


def test_the_image_is_cached_with_the_filter() -> None:
    _, sk = _sketch(PRIME_CONV)
    st = sk.gpu_stage
    assert st.promoted == (0, 1)
    assert st.windows[1] is None and st.windows[0] is not None
    # 16 output rows x 4 columns x 1 input channel, 3x3 window: an 18 x 6 x 1 image tile
    assert input_tile_shape(st, TUNED, 0) == [1, 18, 6, 1]
    assert input_tile_shape(st, TUNED, 1) == [3, 3, 1, 32]
    # both tiles, two buffers each, 4 bytes an element
    assert shared_bytes(st, TUNED) == (18 * 6 + 3 * 3 * 32) * 4 * 2
    assert validate_gpu(st, sk.knobs, TUNED) is None


def test_a_strided_window_spans_stride_times_its_tile() -> None:
    """ConvLayer with stride 2: 1 + 2 * (rows - 1) + (3 - 1) image rows per block."""
    _, sk = _sketch("convlayer-1x56x56x64x128x3x2x1")
    st = sk.gpu_stage
    assert st.windows and st.windows[0] is not None
    v = sk.sample(random.Random(1)).values()
    shape = input_tile_shape(st, v, 0)
    oh, kh = [d for d, c in st.windows[0][1] if c == 2], [d for d, c in st.windows[0][1] if c == 1]
    assert len(oh) == 1 and len(kh) == 1
    rows = int(v[st.knob(oh[0], 1)])
    assert shape[1] == 1 + 2 * (rows - 1) + (int(v[st.knob(kh[0], 1)]) - 1)


def test_switched_off_the_filter_alone_is_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "CUDA_CACHE_WINDOWS", False)
    _, sk = _sketch(PRIME_CONV)
    assert sk.gpu_stage.promoted == (1,) and sk.gpu_stage.windows == ()
    assert shared_bytes(sk.gpu_stage, TUNED) == 3 * 3 * 32 * 4 * 2


def test_matmuls_are_unchanged() -> None:
    _, sk = _sketch("matmul-509x1021x257")
    assert sk.gpu_stage.windows == () and sk.gpu_stage.promoted == (0, 1)


def test_registers_count_the_image_copy() -> None:
    _, sk = _sketch(PRIME_CONV)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(config, "CUDA_CACHE_WINDOWS", False)
        _, off = _sketch(PRIME_CONV)
    assert thread_registers(sk.gpu_stage, TUNED) > thread_registers(off.gpu_stage, TUNED)


def test_the_script_copies_the_image_into_shared_memory_and_lowers_to_ptx() -> None:
    from ansor.targets.cuda.lowering import emit_ptx

    task, sk = _sketch(PRIME_CONV)
    script = sk.script(TUNED)
    assert "nofold_flags = [1, 1, 0]" in script
    ptx = emit_ptx(task, script, arch="sm_90")
    shared = [ln for ln in ptx.splitlines() if ".shared .align" in ln]
    assert len(shared) == 2, shared  # the image tile and the filter tile
    assert "[864]" in "".join(shared)  # 18 x 6 x 1 floats, two buffers


@pytest.mark.gpu
@pytest.mark.parametrize("name", [PRIME_CONV, "convlayer-1x14x14x8x16x3x2x1", "c2d-1x224x224x3x64x7x2x3"])
def test_cached_windows_compute_the_convolution(name: str) -> None:
    """The tuned annotation (prime conv), the seeds and sampled annotations into NaN-poisoned
    outputs, against the untransformed program on the CPU (an independent lowering)."""
    from ansor.measure.measurer import reference_outputs
    from ansor.measure.verify import check_task_outputs, poisoned
    from ansor.targets.cuda.lowering import compile_task_cuda

    task, sk = _sketch(name)
    inputs, want, _ = reference_outputs(task)
    space = sk.search_space(0.75)
    values = [s.values() for s in space.seeds(random.Random(0))][:3]
    values += [sk.sample(random.Random(s)).values() for s in range(3)]
    if name == PRIME_CONV:
        values.insert(0, TUNED)
    for v in values:
        outs = compile_task_cuda(task, sk.script(v)).run(inputs, poisoned(task.outputs))
        bad = check_task_outputs(task, outs, want)
        assert bad is None, (v, bad)

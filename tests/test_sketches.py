"""Every sketch of every workload family computes the right result for sampled annotations
(the measurer checks each candidate against the untuned program), and windowed ops vectorize."""

from __future__ import annotations

import random

import ansor
import numpy as np
import pytest
from ansor.frontend import workloads
from ansor.space.schedule import Schedule, sample, validate
from ansor.core.mlir import apply_script, parse_payload
from ansor.measure.measurer import LocalMeasurer, MeasureError, MeasureInput, RunOptions
from ansor.targets import generate_sketches
from ansor.targets.cpu.params import innermost_limit
from ansor.targets.cpu.sketch import is_ragged

FAMILIES = ["c1d-1x9x3x4x3x2x1", "c2d-1x9x9x3x4x3x2x1", "c2d-1x6x5x4x5x1x1x0", "dil-1x9x9x3x4x3x2x1",
            "dep-1x8x8x3x3x2x1", "convlayer-1x9x9x4x8x3x2x1", "gmm-2x4x5x6", "t2d-1x3x3x4x2x4x2x1",
            "cap-1x4x4x2x2x3x2x1", "nrm-1x8x16", "tbs-1x16x2x8", "grp-1x9x9x4x8x3x2x1", "c3d-1x4x9x9x3x4x3x2x1", "c3d-1x3x6x5x4x5x1x1x0"]


@pytest.fixture(scope="module")
def measurer():
    # correctness, not speed: a generous limit per candidate (a reduction-chain candidate with a
    # 512-step unroll builds in ~7 s here, and the first one also builds the reference; the
    # default 30 s ran out once on the 2-core CI machine)
    m = LocalMeasurer(RunOptions(threads=2, repeat=1, min_repeat_ms=0, timeout_s=120))
    yield m
    m.close()


@pytest.mark.parametrize("name", FAMILIES)
def test_sampled_schedules_are_correct(name: str, measurer) -> None:
    task = ansor.create_task(workloads.get(name), name=name)
    rng = random.Random(7)
    inputs = []
    for sk in generate_sketches(task):
        if not sk.stages:
            continue
        for _ in range(2):
            s = sample(sk, rng)
            inputs.append(MeasureInput(task, s, sk.script(s.values())))
    results = measurer.measure(inputs)
    errors = [(i.schedule.sketch, r.error, r.error_msg[:200]) for i, r in zip(inputs, results, strict=True) if r.error]
    assert not [e for e in errors if e[1] is MeasureError.WRONG_ANSWER], errors
    assert len(errors) <= len(inputs) // 4, errors


@pytest.mark.parametrize("name", ["c2d-1x9x9x3x4x3x2x1", "dep-1x8x8x3x3x2x1", "dil-1x9x9x3x4x3x2x1",
                                  "c3d-1x4x9x9x3x4x3x2x1"])
def test_windowed_ops_are_decomposed_and_vectorized(name: str) -> None:
    from mlir import ir

    task = ansor.create_task(workloads.get(name))
    sk = next(s for s in generate_sketches(task) if s.stages)
    assert sk.stages[0].decompose
    values = sample(sk, random.Random(0)).values()
    rows = [s for s in sk.stages[0].splits if s.inner_limit]
    assert rows and all(values[s.tile_knobs[-1]] == 1 for s in rows)  # one output row per register tile
    with ir.Context(), ir.Location.unknown():
        module = parse_payload(task)
        apply_script(module, sk.script(values))
        text = str(module)
    assert "linalg.conv" not in text and "linalg.depthwise" not in text  # nothing left scalar
    assert "vector.fma" in text or "vector.outerproduct" in text or "vector.contract" in text


@pytest.mark.parametrize("name", ["t2d-1x3x3x4x8x4x2x1", "cap-1x4x4x2x8x3x2x1", "grp-1x9x9x4x8x3x2x1"])
def test_windowed_generics_vectorize(name: str) -> None:
    """Strided window loops keep register tiles of 1 and unit loops are folded away, so the
    vectorizer (plain indices only) takes every sampled register tile: no linalg op stays scalar."""
    from mlir import ir

    task = ansor.create_task(workloads.get(name))
    rng = random.Random(3)
    for sk in generate_sketches(task):
        if not sk.stages:
            continue
        mlt = next(st for st in sk.stages if st.kind == "mlt")
        assert mlt.fold_units
        for _ in range(4):
            values = sample(sk, rng).values()
            assert all(values[s.tile_knobs[-1]] == 1 for s in mlt.splits if s.inner_limit)
            with ir.Context(), ir.Location.unknown():
                module = parse_payload(task)
                apply_script(module, sk.script(values))
                text = str(module)
            assert "linalg.generic" not in text, sk.name


def test_softmax_reduction_chain_is_one_fused_parallel_loop() -> None:
    """A softmax after a batch matmul: besides one `tile` stage per op, the chain max -> exp ->
    sum -> div is offered fused into the division's parallel loop over rows (one `scf.forall`
    for the whole softmax, every reduction computed once per row)."""
    from mlir import ir

    task = ansor.create_task(workloads.get("tbs-1x16x2x8"))
    sketches = generate_sketches(task)
    chain = [s for s in sketches if any(r.startswith("reduction_chain") for r in s.rules)]
    assert len(chain) == 2 and sketches.index(chain[0]) == 2  # after the unfused ones
    st = next(st for st in chain[0].stages if st.kind == "chain")
    assert len(st.members) == 3 and st.rows == (1, 2)
    rng = random.Random(0)
    foralls = []
    for sk in (sketches[0], chain[0]):  # unfused / fused, both with the plain matmul stage
        with ir.Context(), ir.Location.unknown():
            module = parse_payload(task)
            apply_script(module, sk.script(sample(sk, rng).values()))
            text = str(module)
        foralls.append(text.count("scf.forall ("))
    # matmul + 4 softmax ops / matmul + the chain (a loop of one iteration may fold away)
    assert foralls[1] <= 2 < foralls[0], foralls


def test_softmax_over_a_prime_row_takes_whole_row_vectors(measurer) -> None:
    """A softmax over 37 lanes (ViT's 197 tokens, scaled down): no divisor of 4..16 lanes, so the
    chain's vector knobs may take the whole row, and sampling favours it; such a program has no
    scalar `math.exp` left and is correct."""
    from mlir import ir

    task = ansor.create_task(workloads.get("softmax-24x37"), name="softmax-24x37")
    sk = next(s for s in generate_sketches(task) if any(r.startswith("reduction_chain") for r in s.rules))
    st = sk.stages[0]
    vec = [sp for sp in st.splits if sp.vector]
    assert len(vec) == 4 and all(innermost_limit(sp) == 37 for sp in vec)  # exact options: 1 or 37
    rng = random.Random(0)
    draws = [sample(sk, rng).values() for _ in range(200)]
    whole = sum(all(v[sp.tile_knobs[0]] == 37 for sp in vec) for v in draws)
    assert whole > 200 // 16 * 2  # uniform over {1, 37} would give every row whole 1/16 of the time
    values = next(v for v in draws if all(v[sp.tile_knobs[0]] == 37 for sp in vec))
    with ir.Context(), ir.Location.unknown():
        module = parse_payload(task)
        apply_script(module, sk.script(values))
        text = str(module)
    assert "math.exp %" in text and ": vector<" in text.split("math.exp %", 1)[1].split("\n", 1)[0]
    assert "linalg.generic" not in text
    res = measurer.measure([MeasureInput(task, Schedule(sk.name, tuple(sorted(values.items()))),
                                         sk.script(values))])[0]
    assert res.error is None, res.error_msg


def test_packed_sketch_needs_an_exact_vector_on_its_lanes() -> None:
    """Packed panels take exact vector tiles only: on 19 lanes (a prime over 16) the packed sketch could
    only hold 1-lane programs, so it is not offered; ragged tiles of the plain sketch cover them."""
    def rules(name: str) -> list[tuple[str, ...]]:
        return [s.rules for s in generate_sketches(ansor.create_task(workloads.get(name)))]

    assert rules("gmm-2x4x19x6") == [("multi_level_tiling(op1)",), ("skip",)]
    assert ("multi_level_tiling_packed(op1)",) in rules("gmm-2x4x12x6")  # 4, 6 or 12 lanes


ELEMENTWISE_37 = """func.func @bias_relu(%x: tensor<6x37xf32>, %b: tensor<37xf32>) -> tensor<6x37xf32> {
  %e = tensor.empty() : tensor<6x37xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<6x37xf32>, tensor<37xf32>) outs(%e : tensor<6x37xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %z = arith.constant 0.0 : f32
    %r = arith.maximumf %s, %z : f32
    linalg.yield %r : f32
  } -> tensor<6x37xf32>
  return %y : tensor<6x37xf32>
}
"""

# Ragged register tiles on rows (11 output columns, 13 tokens) and on vector lanes (gmm's 13,
# convlayer's fused consumer over 7 lanes, an element-wise `tile` stage over 37 lanes, 3-4 lanes).
RAGGED_FAMILIES = ["c2d-1x11x11x3x4x3x1x1", "convlayer-1x9x9x4x7x3x2x1", "dep-1x8x8x3x3x2x1", "gmm-2x4x13x6",
                   "c3d-1x4x9x9x3x4x3x2x1", "cap-1x4x4x2x3x3x2x1", "tbs-1x13x2x8", "c1d-1x12x3x4x3x1x1",
                   "bias-relu-6x37"]


def _ragged_samples(sk, rng: random.Random, n: int) -> list:
    out = []
    for _ in range(500):
        s = sample(sk, rng)
        if any(is_ragged(sp, s.values()) for sp in sk.splits) and s not in out:
            out.append(s)
            if len(out) == n:
                break
    return out


@pytest.mark.parametrize("name", RAGGED_FAMILIES)
def test_ragged_register_tiles_are_peeled_and_correct(name: str, measurer) -> None:
    """Register tiles that leave a partial tile (fused consumers, decomposed convolutions,
    windowed generics, batch matmuls): the partial tile is peeled, both parts build, and every
    one computes the right answer."""
    task = ansor.create_task(ELEMENTWISE_37 if name == "bias-relu-6x37" else workloads.get(name), name=name)
    rng = random.Random(11)
    inputs = []
    for sk in generate_sketches(task):
        for s in _ragged_samples(sk, rng, 2):
            script = sk.script(s.values())
            assert "transform.loop.peel" in script
            inputs.append(MeasureInput(task, s, script))
    assert inputs, "no sketch of this workload offers a ragged register tile"
    results = measurer.measure(inputs)
    assert not [(i.schedule, r.error_msg[:300]) for i, r in zip(inputs, results, strict=True) if r.error]


@pytest.mark.parametrize(("shape", "dim", "tile"), [((37, 16, 24), 0, 5), ((11, 32, 8), 0, 4), ((8, 37, 16), 1, 8),
                                                    ((6, 13, 8), 1, 5)])
def test_ragged_matmul_tiles_vectorize_fully(shape: tuple[int, int, int], dim: int, tile: int) -> None:
    """Both the full register tiles and the peeled remainder become vector FMAs at static shapes,
    rows (dim 0) or vector lanes (dim 1): no linalg op and no dynamically shaped value is left,
    and the fused initialiser's rows take a width that divides their tile."""
    from mlir import ir

    task = ansor.create_task(workloads.matmul(*shape))
    sk = generate_sketches(task)[0]
    split = sk.stages[0].split(dim)
    extent = shape[dim]
    values = dict(sample(sk, random.Random(0)).values(),
                  **{f"op1.d{dim}.t1": extent, f"op1.d{dim}.t2": extent, f"op1.d{dim}.t3": tile})
    values.update({f"op1.d{1 - dim}.t1": shape[1 - dim], f"op1.d{1 - dim}.t2": shape[1 - dim],
                   f"op1.d{1 - dim}.t3": 1 if dim else 4 if shape[1] % 8 else 8})
    assert validate(sk, values) is None and is_ragged(split, values)
    with ir.Context(), ir.Location.unknown():
        module = parse_payload(task)
        apply_script(module, sk.script(values))
        text = str(module)
    assert "linalg." not in text and "?x" not in text
    assert "vector.fma" in text or "vector.outerproduct" in text
    full, rest = (f"vector<{tile}xf32>", f"vector<{extent % tile}xf32>") if dim else (f"vector<{tile}x", f"vector<{extent % tile}x")
    assert full in text and rest in text



_ROW_SUM = """func.func @rowsum(%a: tensor<4x10x160xf32>) -> tensor<{OUT}xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{OUT}xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<{OUT}xf32>) -> tensor<{OUT}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> {MAP}>],
                       iterator_types = ["parallel", "reduction", "reduction"]}}
      ins(%a : tensor<4x10x160xf32>) outs(%f : tensor<{OUT}xf32>) {{
    ^bb0(%x: f32, %o: f32):
      %s = arith.addf %x, %o : f32
      linalg.yield %s : f32
  }} -> tensor<{OUT}xf32>
  return %r : tensor<{OUT}xf32>
}}"""


def test_keepdim_reduction_gets_no_rfactor_sketch() -> None:
    """Upstream `tile_reduction_using_for` aborts the process on an output map with constant
    results (a keepdim reduction, `(d0, d1, d2) -> (d0, 0, 0)`: LayerNorm / GroupNorm statistics in
    PyTorch models), so only the plain form of the same reduction gets the rfactor sketch."""
    def kinds(text: str) -> set[str]:
        return {st.kind for sk in generate_sketches(ansor.create_task(text)) for st in sk.stages}

    assert "rfactor" in kinds(_ROW_SUM.format(OUT="4", MAP="(d0)"))
    assert "rfactor" not in kinds(_ROW_SUM.format(OUT="4x1x1", MAP="(d0, 0, 0)"))



# ResNet-18's last 3x3 convolution with its batch norm, residual add, ReLU and the transpose back to
# NCHW (512 channels there, 32 here): the task whose candidates failed with "repeated target op".
# There the batch-norm parameters were `tensor<512x1x1>` read at `(d3, 0, 0)`, which made the
# consumer look like a second op with data reuse (no fusion, two multi-level tilings). That is a
# broadcast now (see `test_unit_axis_broadcast_consumer_is_fused`); reading them at `(d3, 1, 0)` of
# `tensor<32x2x1>` keeps the two-tiling sketch the failing schedule below belongs to.
_CONV_TRANSPOSE_OUT = """#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d3, 1, 0)>
module {
  func.func @main__t20(%arg0: tensor<1x7x7x32xf32>, %arg1: tensor<3x3x32x32xf32>, %arg2: tensor<32x2x1xf32>, %arg3: tensor<32x2x1xf32>, %arg4: tensor<32x2x1xf32>, %arg5: tensor<32x2x1xf32>, %arg6: tensor<1x7x7x32xf32>) -> tensor<1x32x7x7xf32> {
    %cst = arith.constant 0.000000e+00 : f32
    %0 = tensor.empty() : tensor<1x7x7x32xf32>
    %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<1x7x7x32xf32>) -> tensor<1x7x7x32xf32>
    %2 = tensor.empty() : tensor<1x7x7x32xf32>
    %3 = tensor.empty() : tensor<1x7x7x32xf32>
    %4 = tensor.empty() : tensor<1x7x7x32xf32>
    %5 = tensor.empty() : tensor<1x7x7x32xf32>
    %6 = tensor.empty() : tensor<1x7x7x32xf32>
    %7 = tensor.empty() : tensor<1x7x7x32xf32>
    %8 = tensor.empty() : tensor<1x32x7x7xf32>
    %padded = tensor.pad %arg0 low[0, 1, 1, 0] high[0, 1, 1, 0] {
    ^bb0(%arg7: index, %arg8: index, %arg9: index, %arg10: index):
      tensor.yield %cst : f32
    } : tensor<1x7x7x32xf32> to tensor<1x9x9x32xf32>
    %9 = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%padded, %arg1 : tensor<1x9x9x32xf32>, tensor<3x3x32x32xf32>) outs(%1 : tensor<1x7x7x32xf32>) -> tensor<1x7x7x32xf32>
    %10 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%9, %arg2 : tensor<1x7x7x32xf32>, tensor<32x2x1xf32>) outs(%2 : tensor<1x7x7x32xf32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %16 = arith.subf %in, %in_0 : f32
      linalg.yield %16 : f32
    } -> tensor<1x7x7x32xf32>
    %11 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%10, %arg3 : tensor<1x7x7x32xf32>, tensor<32x2x1xf32>) outs(%3 : tensor<1x7x7x32xf32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %16 = arith.mulf %in, %in_0 : f32
      linalg.yield %16 : f32
    } -> tensor<1x7x7x32xf32>
    %12 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%11, %arg4 : tensor<1x7x7x32xf32>, tensor<32x2x1xf32>) outs(%4 : tensor<1x7x7x32xf32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %16 = arith.mulf %in, %in_0 : f32
      linalg.yield %16 : f32
    } -> tensor<1x7x7x32xf32>
    %13 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%12, %arg5 : tensor<1x7x7x32xf32>, tensor<32x2x1xf32>) outs(%5 : tensor<1x7x7x32xf32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %16 = arith.addf %in, %in_0 : f32
      linalg.yield %16 : f32
    } -> tensor<1x7x7x32xf32>
    %14 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%13, %arg6 : tensor<1x7x7x32xf32>, tensor<1x7x7x32xf32>) outs(%6 : tensor<1x7x7x32xf32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %16 = arith.addf %in, %in_0 : f32
      linalg.yield %16 : f32
    } -> tensor<1x7x7x32xf32>
    %15 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%14 : tensor<1x7x7x32xf32>) outs(%7 : tensor<1x7x7x32xf32>) {
    ^bb0(%in: f32, %out: f32):
      %16 = arith.cmpf ugt, %in, %cst : f32
      %17 = arith.select %16, %in, %cst : f32
      linalg.yield %17 : f32
    } -> tensor<1x7x7x32xf32>
    %transposed = linalg.transpose ins(%15 : tensor<1x7x7x32xf32>) outs(%8 : tensor<1x32x7x7xf32>) permutation = [0, 3, 1, 2] 
    return %transposed : tensor<1x32x7x7xf32>
  }
}"""


def test_peeled_register_tiles_are_matched_once() -> None:
    """A peeled remainder loop inside another register-tile copy's loop made the fold-unit-dims
    match find its generic twice; every transform after it then failed ("repeated target op":
    87 of 600 random candidates of this task, 21 of 600 trials of a ResNet-18 run). The
    schedule below was one of them; it must apply and compute what the untuned program does."""
    from ansor.targets import compile_task
    from ansor.measure.measurer import make_inputs

    task = ansor.create_task(_CONV_TRANSPOSE_OUT)
    values = {"op1.d0.t1": 1, "op1.d0.t2": 1, "op1.d0.t3": 1, "op1.d1.t1": 7, "op1.d1.t2": 1, "op1.d1.t3": 1,
              "op1.d2.t1": 7, "op1.d2.t2": 1, "op1.d2.t3": 1, "op1.d3.t1": 32, "op1.d3.t2": 8, "op1.d3.t3": 2,
              "op1.d4.t1": 3, "op1.d5.t1": 1, "op1.d6.t1": 16, "op1.unroll": 16, "op2.d0.t1": 1, "op2.d0.t2": 1,
              "op2.d0.t3": 1, "op2.d1.t1": 4, "op2.d1.t2": 4, "op2.d1.t3": 1, "op2.d2.t1": 1, "op2.d2.t2": 1,
              "op2.d2.t3": 1, "op2.d3.t1": 7, "op2.d3.t2": 7, "op2.d3.t3": 5, "op2.unroll": 0, "pad0.loc": 1}
    sketch = next(s for s in generate_sketches(task) if s.name == "s0")
    assert validate(sketch, values) is None
    inputs = make_inputs(task)
    want = compile_task(task, None).run(inputs)[0]
    got = compile_task(task, sketch.script(values)).run(inputs)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _resnet_conv_task_ir(*, transpose_out: bool = True) -> str:
    """`_CONV_TRANSPOSE_OUT` as torch-mlir emits it: batch-norm parameters `tensor<32x1x1>` read at
    `(d3, 0, 0)`; without the transpose back to NCHW when `transpose_out` is False."""
    text = _CONV_TRANSPOSE_OUT.replace("(d3, 1, 0)", "(d3, 0, 0)").replace("tensor<32x2x1xf32>", "tensor<32x1x1xf32>")
    if not transpose_out:
        head = text.split("    %transposed = ")[0]
        text = head + "    return %15 : tensor<1x7x7x32xf32>\n  }\n}"
        text = text.replace("-> tensor<1x32x7x7xf32> {", "-> tensor<1x7x7x32xf32> {", 1)
    return text


def test_unit_axis_broadcast_consumer_is_fused(measurer) -> None:
    """A consumer reading per-channel parameters at `(d3, 0, 0)` is element-wise (a broadcast along
    unit axes): the convolution gets consumer-fusion sketches instead of a second multi-level
    tiling of the consumer as if it reused data; sampled candidates compute the untuned result."""
    from ansor.core.loops import analyze_graph

    task = ansor.create_task(_resnet_conv_task_ir())
    ops, _ = analyze_graph(task.ir)
    consumer = next(o for o in ops if o.name == "linalg.generic" and len(o.input_dims) > 2)
    assert consumer.is_elementwise() and not all(consumer.plain_inputs)
    # a non-zero constant index is a slice, not a broadcast: still not element-wise
    sliced = next(o for o in analyze_graph(ansor.create_task(_CONV_TRANSPOSE_OUT).ir)[0]
                  if o.name == "linalg.generic" and len(o.input_dims) > 2)
    assert not sliced.is_elementwise()
    sketches = [s for s in generate_sketches(task) if s.name != "skip"]
    assert sketches and all(s.rule.startswith("multi_level_tiling_with_fusion(op1<-op2") for s in sketches)
    rng = random.Random(0)
    inputs = [MeasureInput(task, sch, sk.script(sch.values())) for sk in sketches for sch in
              (sample(sk, rng) for _ in range(3))]
    results = measurer.measure(inputs)
    assert [r.error for r in results] == [None] * len(inputs), [r.error_msg for r in results]


@pytest.mark.parametrize("name", ["softmax-32x96", "layernorm-16x64", "logsoftmax-8x40"])
def test_chain_reductions_accumulate_partial_vectors(name: str) -> None:
    """A reduction chain's row reductions keep an R-tile-wide vector of partial results across the
    row (rfactor inside the chain) instead of reducing every tile to a scalar; results unchanged."""
    import random

    import numpy as np

    from ansor.frontend import workloads
    from ansor.measure.measurer import make_inputs
    from ansor.space.schedule import sample
    from ansor.targets import compile_task

    task = ansor.create_task(workloads.get(name), name=name)
    chain = next(s for s in generate_sketches(task) if "reduction_chain" in s.rule)
    script = chain.script(sample(chain, random.Random(0)).values())
    assert "tile_reduction_using_for" in script
    ins = make_inputs(task)
    want = compile_task(task, None).run(ins)[0]
    got = compile_task(task, script).run(ins)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_chain_sketch_asks_for_a_share_of_untrained_batches() -> None:
    from ansor.frontend import workloads

    sks = generate_sketches(ansor.create_task(workloads.get("softmax-64x100")))
    shares = {s.rule: s.untrained_share for s in sks}
    assert any(v == 0.5 for r, v in shares.items() if "reduction_chain" in r)
    assert all(v == 0.0 for r, v in shares.items() if "reduction_chain" not in r)


_MATMUL_RESIDUAL_KEEPDIM_SOFTMAX = """
#id = affine_map<(i, j) -> (i, j)>
#kd = affine_map<(i, j) -> (i, 0)>
#row = affine_map<(i, j) -> (j)>
func.func @f(%a: tensor<32x48xf32>, %b: tensor<48x64xf32>, %bias: tensor<64xf32>) -> tensor<32x64xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf32>
  %e1 = tensor.empty() : tensor<32x1xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<32x64xf32>) -> tensor<32x64xf32>
  %c = linalg.matmul ins(%a, %b : tensor<32x48xf32>, tensor<48x64xf32>) outs(%z : tensor<32x64xf32>) -> tensor<32x64xf32>
  %x = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias : tensor<32x64xf32>, tensor<64xf32>) outs(%e : tensor<32x64xf32>) {
  ^bb0(%v: f32, %w: f32, %o: f32):
    %r = arith.addf %v, %w : f32
    linalg.yield %r : f32
  } -> tensor<32x64xf32>
  %mi = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<32x1xf32>) -> tensor<32x1xf32>
  %max = linalg.generic {indexing_maps = [#id, #kd], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<32x64xf32>) outs(%mi : tensor<32x1xf32>) {
  ^bb0(%v: f32, %m: f32):
    %r = arith.maximumf %v, %m : f32
    linalg.yield %r : f32
  } -> tensor<32x1xf32>
  %ex = linalg.generic {indexing_maps = [#id, #kd, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %max : tensor<32x64xf32>, tensor<32x1xf32>) outs(%e : tensor<32x64xf32>) {
  ^bb0(%v: f32, %m: f32, %o: f32):
    %d = arith.subf %v, %m : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<32x64xf32>
  %si = linalg.fill ins(%zero : f32) outs(%e1 : tensor<32x1xf32>) -> tensor<32x1xf32>
  %sum = linalg.generic {indexing_maps = [#id, #kd], iterator_types = ["parallel", "reduction"]}
      ins(%ex : tensor<32x64xf32>) outs(%si : tensor<32x1xf32>) {
  ^bb0(%v: f32, %s: f32):
    %r = arith.addf %v, %s : f32
    linalg.yield %r : f32
  } -> tensor<32x1xf32>
  %y = linalg.generic {indexing_maps = [#id, #kd, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ex, %sum : tensor<32x64xf32>, tensor<32x1xf32>) outs(%e : tensor<32x64xf32>) {
  ^bb0(%v: f32, %s: f32, %o: f32):
    %r = arith.divf %v, %s : f32
    linalg.yield %r : f32
  } -> tensor<32x64xf32>
  return %y : tensor<32x64xf32>
}
"""


def test_chain_after_a_matmul_stage_with_keepdim_reductions(measurer) -> None:
    """torch-mlir's layer norms and softmaxes reduce into `tensor<Nx1>` read back at `(i, 0)`, and
    sit behind a matmul whose bias/residual consumer the matmul's stage takes (BERT's merged
    tasks): the chain starts after that consumer and accepts the keepdim reads, and its programs
    are correct."""
    task = ansor.create_task(_MATMUL_RESIDUAL_KEEPDIM_SOFTMAX, name="mm-softmax")
    chain = [s for s in generate_sketches(task) if any(r.startswith("reduction_chain") for r in s.rules)]
    assert chain, [s.rules for s in generate_sketches(task)]
    st = next(st for st in chain[0].stages if st.kind == "chain")
    assert len(st.members) == 3  # max, exp, sum: the bias add stays in the matmul's stage
    rng = random.Random(0)
    inputs = []
    for sk in chain:
        for _ in range(3):
            values = sample(sk, rng).values()
            inputs.append(MeasureInput(task, Schedule(sk.name, tuple(sorted(values.items()))), sk.script(values)))
    results = measurer.measure(inputs)
    assert all(r.error is None for r in results), [r.error_msg for r in results if r.error]


def test_chain_partial_results_may_span_several_registers() -> None:
    """A reduction chain's row reductions may keep `ACCUMULATOR_REGISTERS` registers of partial
    results (independent max/add chains; two registers left softmax-256x4096's IEEE max pass
    latency-bound), while element-wise vectors keep the two-register `MAX_VECTOR`; such a program
    validates, reduces in that width and is correct."""
    from ansor.measure.measurer import make_inputs
    from ansor.targets import compile_task
    from ansor.targets.cpu.params import ACCUMULATOR_REGISTERS, MAX_VECTOR, VECTOR_LANES

    task = ansor.create_task(workloads.get("softmax-4x1024"), name="softmax-4x1024")
    chain = next(s for s in generate_sketches(task) if "reduction_chain" in s.rule)
    st = chain.stages[0]
    wide = ACCUMULATOR_REGISTERS * VECTOR_LANES
    red = [sp for sp in st.splits if sp.vector and sp.kind == "R"]
    ew = [sp for sp in st.splits if sp.vector and sp.kind == "S"]
    assert len(red) == 2 and all(innermost_limit(sp) == wide > MAX_VECTOR for sp in red)
    assert ew and all(innermost_limit(sp) == MAX_VECTOR for sp in ew)
    values = dict(sample(chain, random.Random(0)).values())
    values.update({sp.tile_knobs[0]: wide for sp in red})
    assert validate(chain, values) is None
    script = chain.script(values)
    assert script.count(f"by tile_sizes = [0, {wide}]") == 2
    ins = make_inputs(task)
    want = compile_task(task, None).run(ins)[0]
    np.testing.assert_allclose(compile_task(task, script).run(ins)[0], want, rtol=1e-5, atol=1e-6)

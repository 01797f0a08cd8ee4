"""CUDA rule gaps found by the networks' acceptance run (results/networks-acceptance/): each task
shape that had no GPU schedule, as a small self-contained task, built to PTX without a GPU and
its script's loops run on the CPU (blocks and threads as loops) against the reference."""

from __future__ import annotations

import random

import pytest
from ansor.core.task import create_task
from ansor.targets import generate_sketches
from ansor.targets.cuda.lowering import emit_ptx, lower_to_gpu_ir
from ansor.targets.cuda.rules import default_script
from test_gpu_sweep_fixes import _run_as_cpu_loops


def _se_gate(c_in: int, c: int, h: int, w: int) -> str:
    """EfficientNet's squeeze-excitation expand as torch-mlir + extraction leave it: a 1x1 conv on
    the pooled 1 x c_in x 1 x 1 tensor + bias + sigmoid, multiplied into the whole activation."""
    return f"""
func.func @se(%p: tensor<1x{c_in}x1x1xf32>, %wt: tensor<{c}x{c_in}x1x1xf32>, %b: tensor<{c}xf32>,
              %x: tensor<1x{c}x{h}x{w}xf32>) -> tensor<1x{c}x{h}x{w}xf32> {{
  %one = arith.constant 1.0 : f32
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x{c}x1x1xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x{c}x1x1xf32>) -> tensor<1x{c}x1x1xf32>
  %conv = linalg.conv_2d_nchw_fchw {{dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}}
      ins(%p, %wt : tensor<1x{c_in}x1x1xf32>, tensor<{c}x{c_in}x1x1xf32>) outs(%f : tensor<1x{c}x1x1xf32>) -> tensor<1x{c}x1x1xf32>
  %eo = tensor.empty() : tensor<1x{c}x{h}x{w}xf32>
  %y = linalg.generic {{indexing_maps = [affine_map<(n, c, i, j) -> (n, c, i, j)>, affine_map<(n, c, i, j) -> (n, c, 0, 0)>,
                                         affine_map<(n, c, i, j) -> (c)>, affine_map<(n, c, i, j) -> (n, c, i, j)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}}
      ins(%x, %conv, %b : tensor<1x{c}x{h}x{w}xf32>, tensor<1x{c}x1x1xf32>, tensor<{c}xf32>) outs(%eo : tensor<1x{c}x{h}x{w}xf32>) {{
  ^bb0(%xi: f32, %ci: f32, %bi: f32, %o: f32):
    %s = arith.addf %ci, %bi : f32
    %n = arith.negf %s : f32
    %ex = math.exp %n : f32
    %d = arith.addf %ex, %one : f32
    %g = arith.divf %one, %d : f32
    %r = arith.mulf %xi, %g : f32
    linalg.yield %r : f32
  }} -> tensor<1x{c}x{h}x{w}xf32>
  return %y : tensor<1x{c}x{h}x{w}xf32>
}}
"""


def _check_scripts(task, scripts: list[str]) -> None:
    """Each script builds to PTX and, as CPU loops into poisoned outputs, computes the task."""
    from ansor.measure.measurer import reference_outputs
    from ansor.measure.verify import check_task_outputs, poisoned

    inputs, refs, _ = reference_outputs(task)
    for script in scripts:
        assert ".entry" in emit_ptx(task, script)
        outs = _run_as_cpu_loops(task, script, inputs, poisoned(task.outputs))
        assert check_task_outputs(task, outs, refs) is None


def _samples(task, n: int, seed: int = 0) -> list[str]:
    sk = generate_sketches(task)[0]
    rng = random.Random(seed)
    return [sk.script(sk.sample(rng).values()) for _ in range(n)]


@pytest.mark.parametrize("shape", [(8, 32, 12, 12), (48, 1152, 3, 3), (4, 16, 7, 5)])
def test_broadcast_producer_is_recomputed_per_thread(shape: tuple[int, int, int, int]) -> None:
    """The squeeze-excitation gate: the convolution's only user broadcasts its 1 x C x 1 x 1
    result over the whole activation, so no kernel tiling the convolution covers the task (the
    10 refused EfficientNet-B0 tasks). The consumer is thread-bound and each thread recomputes
    the channels its tile reads (the convolution and its fill fused into the thread: a private
    buffer, no intermediate between kernels). The untuned program and three samples build and
    compute the gate."""
    task = create_task(_se_gate(*shape), name="se", target="cuda")
    sketches = generate_sketches(task)
    assert [s.name for s in sketches] == ["s0", "skip"]
    st = sketches[0].gpu_stage
    assert st.producers == (1, 0) and st.producer_work == shape[0]
    assert "broadcast_producer" in sketches[0].rules[0]
    _check_scripts(task, [default_script(task), *_samples(task, 3)])


def test_broadcast_producer_buffer_is_thread_private() -> None:
    """The recomputed channels live in a per-thread stack buffer inside the launch (a shared or
    global one would race between threads; the CPU loops above cannot see that)."""
    from mlir import ir

    task = create_task(_se_gate(48, 1152, 3, 3), name="se", target="cuda")
    with ir.Context(), ir.Location.unknown():
        text = str(lower_to_gpu_ir(task, default_script(task)))
    launch = text[text.index("gpu.launch"):]
    assert "memref.alloca() : memref<1x1x1x1xf32>" in launch
    assert "memref.alloc(" not in text and "gpu.alloc" not in text


def test_broadcast_producer_recompute_is_bounded() -> None:
    """A thread tile that would recompute more than `MAX_RECOMPUTE` multiply-adds is refused."""
    from ansor.targets.cuda.params import MAX_RECOMPUTE
    from ansor.targets.cuda.rules import recompute_work, validate_gpu

    task = create_task(_se_gate(256, 64, 4, 4), name="se", target="cuda")
    sk = generate_sketches(task)[0]
    rng = random.Random(1)
    for _ in range(50):
        v = sk.sample(rng).values()
        assert recompute_work(sk.gpu_stage, v) <= MAX_RECOMPUTE
    big = dict(v)
    big.update({"op2.d1.t1": 64, "op2.d1.t2": 64, "op2.d1.t3": 32, "op2.d1.t4": 1, "op2.d2.t1": 4, "op2.d2.t2": 4,
                "op2.d2.t3": 1, "op2.d2.t4": 1, "op2.d3.t1": 4, "op2.d3.t2": 4, "op2.d3.t3": 1, "op2.d3.t4": 1})
    assert recompute_work(sk.gpu_stage, big) == 32 * 256 > MAX_RECOMPUTE
    err = validate_gpu(sk.gpu_stage, sk.knobs, big, strict_threads=False)
    assert "recomputing the broadcast producer" in (err or "")


def _shuffle(g: int, c: int, h: int, w: int) -> str:
    """ShuffleNet's channel shuffle: 1 x g x c x h x w -> 1 x c x g x h x w."""
    return f"""
func.func @shuffle(%x: tensor<1x{g}x{c}x{h}x{w}xf32>) -> tensor<1x{c}x{g}x{h}x{w}xf32> {{
  %e = tensor.empty() : tensor<1x{c}x{g}x{h}x{w}xf32>
  %t = linalg.transpose ins(%x : tensor<1x{g}x{c}x{h}x{w}xf32>) outs(%e : tensor<1x{c}x{g}x{h}x{w}xf32>)
      permutation = [0, 2, 1, 3, 4]
  return %t : tensor<1x{c}x{g}x{h}x{w}xf32>
}}
"""


@pytest.mark.parametrize("shape", [(2, 96, 3, 3), (2, 232, 7, 7), (2, 96, 1, 3)])
def test_thread_binding_maps_the_largest_loops(shape: tuple[int, int, int, int]) -> None:
    """A channel shuffle at a small resolution: the thread-binding rule bound the innermost three
    loops (3, 3, 2) and left 96 elements per thread (> `MAX_THREAD_TILE`). x stays the innermost
    loop; y and z are now the two largest other loops when the innermost ones leave too much per
    thread. The untuned program and three samples build and compute the shuffle."""
    from ansor.targets.cuda.rules import gpu_stage_for

    task = create_task(_shuffle(*shape), name="shuffle", target="cuda")
    st, _ = gpu_stage_for(task)
    assert st is not None and st.mapped[0] == 4 and 1 in st.mapped
    _check_scripts(task, [default_script(task), *_samples(task, 3)])


def _grouped_conv_bn(g: int, c: int, hw: int, stride: int) -> str:
    """RegNet's grouped 3x3 convolution as torch-mlir + extraction leave it: the g x c-channel
    result collapsed to g*c channels for its batch norm (per-channel parameters read at `(c, 0, 0)`)
    and ReLU."""
    o = (hw - 3) // stride + 1
    gc = g * c
    return f"""
func.func @gconv(%x: tensor<1x{g}x{c}x{hw}x{hw}xf32>, %w: tensor<{g}x{c}x{c}x3x3xf32>, %m: tensor<{gc}x1x1xf32>,
                 %s: tensor<{gc}x1x1xf32>, %b: tensor<{gc}x1x1xf32>) -> tensor<1x{gc}x{o}x{o}xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x{gc}x{o}x{o}xf32>
  %ex = tensor.expand_shape %e [[0], [1, 2], [3], [4]] output_shape [1, {g}, {c}, {o}, {o}]
      : tensor<1x{gc}x{o}x{o}xf32> into tensor<1x{g}x{c}x{o}x{o}xf32>
  %f = linalg.fill ins(%z : f32) outs(%ex : tensor<1x{g}x{c}x{o}x{o}xf32>) -> tensor<1x{g}x{c}x{o}x{o}xf32>
  %conv = linalg.conv_2d_ngchw_gfchw {{dilations = dense<1> : vector<2xi64>, strides = dense<{stride}> : vector<2xi64>}}
      ins(%x, %w : tensor<1x{g}x{c}x{hw}x{hw}xf32>, tensor<{g}x{c}x{c}x3x3xf32>) outs(%f : tensor<1x{g}x{c}x{o}x{o}xf32>)
      -> tensor<1x{g}x{c}x{o}x{o}xf32>
  %col = tensor.collapse_shape %conv [[0], [1, 2], [3], [4]] : tensor<1x{g}x{c}x{o}x{o}xf32> into tensor<1x{gc}x{o}x{o}xf32>
  %y = linalg.generic {{indexing_maps = [affine_map<(n, c, i, j) -> (n, c, i, j)>, affine_map<(n, c, i, j) -> (c, 0, 0)>,
                                         affine_map<(n, c, i, j) -> (c, 0, 0)>, affine_map<(n, c, i, j) -> (c, 0, 0)>,
                                         affine_map<(n, c, i, j) -> (n, c, i, j)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}}
      ins(%col, %m, %s, %b : tensor<1x{gc}x{o}x{o}xf32>, tensor<{gc}x1x1xf32>, tensor<{gc}x1x1xf32>, tensor<{gc}x1x1xf32>)
      outs(%e : tensor<1x{gc}x{o}x{o}xf32>) {{
  ^bb0(%a: f32, %mi: f32, %si: f32, %bi: f32, %out: f32):
    %d = arith.subf %a, %mi : f32
    %t = arith.mulf %d, %si : f32
    %u = arith.addf %t, %bi : f32
    %pos = arith.cmpf ugt, %u, %z : f32
    %r = arith.select %pos, %u, %z : f32
    linalg.yield %r : f32
  }} -> tensor<1x{gc}x{o}x{o}xf32>
  return %y : tensor<1x{gc}x{o}x{o}xf32>
}}
"""


@pytest.mark.parametrize("shape", [(2, 16, 13, 2), (4, 8, 10, 1), (25, 16, 8, 2)])
def test_consumer_through_a_reshape_is_fused(shape: tuple[int, int, int, int]) -> None:
    """RegNet's grouped convolutions (7 refused tasks): the batch norm + ReLU reads the 1 x g x c
    x H x W result through a `tensor.collapse_shape` to 1 x g*c x H x W, so rule 2 saw a second
    op it could neither fuse nor inline. The script now first expands the consumer through the
    reshape (`RESHAPED_CONSUMER_PASSES`: unit dims folded, `linalg-fuse-elementwise-ops`) and
    re-tags it; it then fuses like any element-wise consumer. (The fill of the reshaped result,
    which `ansor-partition` left in the model so the task read a zero tensor, is part of the task
    now: test_lit/partition.mlir.) The untuned program and three samples build and compute it
    (25 groups at 3x3: the default's 25 accumulators and its 8-deep windowed input tile per step
    went over the register budget; the default takes one reduction step per R0 tile then)."""
    task = create_task(_grouped_conv_bn(*shape), name="gconv", target="cuda")
    sk = generate_sketches(task)[0]
    assert sk.gpu_stage.reshaped_consumer and sk.gpu_stage.consumer == 2 and sk.gpu_stage.init == 0
    assert "with_reshaped_fusion" in sk.rules[0]
    _check_scripts(task, [default_script(task), *_samples(task, 3)])


def test_reshaped_consumer_accumulator_tile_is_not_copied_in() -> None:
    """The block's accumulator tile starts as the fill, not as a copy of the output tile: the
    reshaped-consumer step's CSE merged the fill's tensor.empty with the consumer's again, and the
    copy-in that followed ran in every thread over the whole tile, racing with the threads' zero
    fill (unwritten outputs on an H200, results/gpu-tests/gconv-diag-2dfee8e.txt). The script
    gives the fill its own destination again (`ansor-gpu-own-fill-destinations`)."""
    from mlir import ir

    from ansor.targets.cuda.lowering import lower_to_gpu_ir

    task = create_task(_grouped_conv_bn(2, 16, 13, 2), name="gconv", target="cuda")
    sk = generate_sketches(task)[0]
    for script in [default_script(task), *_samples(task, 3)]:
        assert "ansor-gpu-own-fill-destinations" in script or script == default_script(task)
        with ir.Context(), ir.Location.unknown():
            text = str(lower_to_gpu_ir(task, script))
        assert "linalg.copy" not in text and "memref.copy" not in text, script


def _log_softmax_row(n: int) -> str:
    """The audio net's log-softmax over its n classes as extraction leaves it: one row, the sum
    of exponentials through a 0-d tensor (a reduction to a scalar) read by the output."""
    return f"""
func.func @lsm(%x: tensor<1x{n}xf32>) -> tensor<1x{n}xf32> {{
  %z = arith.constant 0.0 : f32
  %c = tensor.collapse_shape %x [[0, 1]] : tensor<1x{n}xf32> into tensor<{n}xf32>
  %e0 = tensor.empty() : tensor<{n}xf32>
  %ex = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}}
      ins(%c : tensor<{n}xf32>) outs(%e0 : tensor<{n}xf32>) {{
  ^bb0(%a: f32, %o: f32):
    %v = math.exp %a : f32
    linalg.yield %v : f32
  }} -> tensor<{n}xf32>
  %es = tensor.empty() : tensor<f32>
  %f = linalg.fill ins(%z : f32) outs(%es : tensor<f32>) -> tensor<f32>
  %s = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>], iterator_types = ["reduction"]}}
      ins(%ex : tensor<{n}xf32>) outs(%f : tensor<f32>) {{
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %a, %o : f32
    linalg.yield %v : f32
  }} -> tensor<f32>
  %el = tensor.empty() : tensor<f32>
  %l = linalg.generic {{indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []}}
      ins(%s : tensor<f32>) outs(%el : tensor<f32>) {{
  ^bb0(%a: f32, %o: f32):
    %v = math.log %a : f32
    linalg.yield %v : f32
  }} -> tensor<f32>
  %e1 = tensor.empty() : tensor<{n}xf32>
  %y = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}}
      ins(%c, %l : tensor<{n}xf32>, tensor<f32>) outs(%e1 : tensor<{n}xf32>) {{
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.subf %a, %b : f32
    linalg.yield %v : f32
  }} -> tensor<{n}xf32>
  %r = tensor.expand_shape %y [[0, 1]] output_shape [1, {n}] : tensor<{n}xf32> into tensor<1x{n}xf32>
  return %r : tensor<1x{n}xf32>
}}
"""


@pytest.mark.parametrize("n", [35, 128, 1000])
def test_output_over_a_reduction_to_a_scalar(n: int) -> None:
    """A log-softmax of a single row that extraction leaves with a 0-d sum (M5's 35 classes): the
    output's two loops (1, 35) read no per-row value, so the cross-thread reduction rule saw two
    column loops, and the output read the merged reduction's row through a collapse to 0-d, which
    fusion into the block cannot follow. The unit loop is the row now, and
    `ansor-gpu-collapse-reduction-loops` points a generic reading the scalar with a unit loop at
    the reduction's row (test_lit/gpu/collapse-reduction-loops.mlir). The untuned program and
    three samples build and, as CPU loops into poisoned outputs, compute the log-softmax."""
    from ansor.measure.measurer import reference_outputs
    from ansor.measure.verify import check_task_outputs, poisoned
    from test_gpu_sweep_fixes import _run_guarded_as_cpu_loops

    task = create_task(_log_softmax_row(n), name="lsm", target="cuda")
    sketches = generate_sketches(task)
    assert sketches[0].name == "r0"
    scripts = [default_script(task), *_samples(task, 3)]
    inputs, refs, _ = reference_outputs(task)
    for script in scripts:
        assert ".entry" in emit_ptx(task, script)
        outs = _run_guarded_as_cpu_loops(task, script, inputs, poisoned(task.outputs), no_copies=False, to_scf=False)
        assert check_task_outputs(task, outs, refs) is None, script


def _qkv(t: int, d: int, heads: int, hd: int) -> str:
    """A ViT block's QKV projection as torch-mlir leaves it: matmul + bias, the result reshaped
    to 1 x t x 3 x heads x hd and transposed to 3 x 1 x heads x t x hd."""
    n = 3 * heads * hd
    return f"""
func.func @qkv(%x: tensor<{t}x{d}xf32>, %w: tensor<{d}x{n}xf32>, %b: tensor<{n}xf32>) -> tensor<3x1x{heads}x{t}x{hd}xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{t}x{n}xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<{t}x{n}xf32>) -> tensor<{t}x{n}xf32>
  %m = linalg.matmul ins(%x, %w : tensor<{t}x{d}xf32>, tensor<{d}x{n}xf32>) outs(%f : tensor<{t}x{n}xf32>) -> tensor<{t}x{n}xf32>
  %y = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}}
      ins(%m, %b : tensor<{t}x{n}xf32>, tensor<{n}xf32>) outs(%e : tensor<{t}x{n}xf32>) {{
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  }} -> tensor<{t}x{n}xf32>
  %r = tensor.expand_shape %y [[0, 1], [2, 3, 4]] output_shape [1, {t}, 3, {heads}, {hd}]
      : tensor<{t}x{n}xf32> into tensor<1x{t}x3x{heads}x{hd}xf32>
  %et = tensor.empty() : tensor<3x1x{heads}x{t}x{hd}xf32>
  %tr = linalg.transpose ins(%r : tensor<1x{t}x3x{heads}x{hd}xf32>) outs(%et : tensor<3x1x{heads}x{t}x{hd}xf32>)
      permutation = [2, 0, 3, 1, 4]
  return %tr : tensor<3x1x{heads}x{t}x{hd}xf32>
}}
"""


@pytest.mark.parametrize("shape", [(97, 32, 2, 16), (197, 16, 3, 8)])
def test_multi_level_tiling_maps_the_largest_loops(shape: tuple[int, int, int, int]) -> None:
    """ViT's QKV projection fused with its head transpose (vit-tiny matmul#5): preprocessing writes
    the matmul over 1 x tokens x 3 x heads x head-dim, and binding the innermost three loops
    (64, 3, 3) left the 197 tokens in every thread (197 accumulators, ~1231 registers: no valid
    annotation). Where the innermost loops leave more than `MAX_THREAD_TILE` elements per thread,
    y and z now go to the two largest other loops (the tokens among them). The untuned program
    and three samples build and compute the projection."""
    task = create_task(_qkv(*shape), name="qkv", target="cuda")
    sk = generate_sketches(task)[0]
    st = sk.gpu_stage
    assert st.consumer is not None and 1 in st.mapped  # the token loop is bound
    _check_scripts(task, [default_script(task), *_samples(task, 3)])


def _ln_class_token(t: int, d: int) -> str:
    """ViT's final LayerNorm as its decomposition leaves it (the mean summed in f64, the variance
    from another task), of which the model keeps only the class token's row."""
    return f"""
func.func @ln_cls(%xd: tensor<{t}x{d}xf64>, %var: tensor<{t}xf32>, %x: tensor<{t}x{d}xf32>, %g: tensor<{d}xf32>,
                  %b: tensor<{d}xf32>) -> tensor<1x{d}xf32> {{
  %z = arith.constant 0.0 : f64
  %n = arith.constant {d}.0 : f64
  %nf = arith.constant {d}.0 : f32
  %eps = arith.constant 1.0e-6 : f32
  %e = tensor.empty() : tensor<{t}xf64>
  %f = linalg.fill ins(%z : f64) outs(%e : tensor<{t}xf64>) -> tensor<{t}xf64>
  %s = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}}
      ins(%xd : tensor<{t}x{d}xf64>) outs(%f : tensor<{t}xf64>) {{
  ^bb0(%a: f64, %o: f64):
    %v = arith.addf %a, %o : f64
    linalg.yield %v : f64
  }} -> tensor<{t}xf64>
  %eo = tensor.empty() : tensor<{t}x{d}xf32>
  %y = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i)>,
                                         affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}}
      ins(%x, %s, %var, %g, %b : tensor<{t}x{d}xf32>, tensor<{t}xf64>, tensor<{t}xf32>, tensor<{d}xf32>, tensor<{d}xf32>)
      outs(%eo : tensor<{t}x{d}xf32>) {{
  ^bb0(%xi: f32, %si: f64, %vi: f32, %gi: f32, %bi: f32, %o: f32):
    %m64 = arith.divf %si, %n : f64
    %m = arith.truncf %m64 : f64 to f32
    %v1 = arith.divf %vi, %nf : f32
    %v2 = arith.addf %v1, %eps : f32
    %r = math.rsqrt %v2 : f32
    %c = arith.subf %xi, %m : f32
    %u = arith.mulf %c, %r : f32
    %w = arith.mulf %u, %gi : f32
    %out = arith.addf %w, %bi : f32
    linalg.yield %out : f32
  }} -> tensor<{t}x{d}xf32>
  %cls = tensor.extract_slice %y[0, 0] [1, {d}] [1, 1] : tensor<{t}x{d}xf32> to tensor<1x{d}xf32>
  return %cls : tensor<1x{d}xf32>
}}
"""


@pytest.mark.parametrize("shape", [(197, 192), (37, 48)])
def test_row_task_returning_a_slice_computes_the_slice(shape: tuple[int, int]) -> None:
    """ViT's final LayerNorm + class-token slice (vit-tiny generic#15): the cross-thread
    reduction rule normalised all 197 rows into an intermediate buffer that the returned slice
    then read (refused: a host allocation between GPU kernels). The script now first computes
    every op on the returned slice only (`ansor-gpu-bubble-up-result-slices`: one row, one
    block). The untuned program and three samples build and, as CPU loops, compute the row."""
    from ansor.measure.measurer import reference_outputs
    from ansor.measure.verify import check_task_outputs, poisoned
    from test_gpu_sweep_fixes import _run_guarded_as_cpu_loops

    task = create_task(_ln_class_token(*shape), name="ln_cls", target="cuda")
    sk = generate_sketches(task)[0]
    assert sk.name == "r0" and sk.gpu_stage.sliced
    scripts = [default_script(task), *_samples(task, 3)]
    inputs, refs, _ = reference_outputs(task)
    for script in scripts:
        assert "ansor-gpu-bubble-up-result-slices" in script and ".entry" in emit_ptx(task, script)
        outs = _run_guarded_as_cpu_loops(task, script, inputs, poisoned(task.outputs), no_copies=False, to_scf=False)
        assert check_task_outputs(task, outs, refs) is None, script


@pytest.mark.gpu
@pytest.mark.parametrize("name,src", [
    ("se", _se_gate(48, 1152, 3, 3)),
    ("se-32x12x12", _se_gate(8, 32, 12, 12)),
    ("shuffle", _shuffle(2, 96, 3, 3)),
    ("gconv", _grouped_conv_bn(2, 16, 13, 2)),
    ("gconv-25", _grouped_conv_bn(25, 16, 8, 2)),
    ("lsm", _log_softmax_row(35)),
    ("qkv", _qkv(197, 16, 3, 8)),
    ("ln_cls", _ln_class_token(197, 192)),
])
def test_rule_gaps_on_the_gpu(name: str, src: str) -> None:
    """Each closed gap on the card: the untuned program and three samples against the reference,
    into outputs poisoned two ways."""
    from ansor.measure import verify
    from ansor.measure.measurer import reference_outputs
    from ansor.targets.cuda.lowering import compile_task_cuda

    task = create_task(src, name=name.replace("-", "_"), target="cuda")
    inputs, refs, _ = reference_outputs(task)
    for script in [default_script(task), *_samples(task, 3)]:
        kernel = compile_task_cuda(task, script)
        for which in (0, 1):
            outs = kernel.run(inputs, verify.poisoned(task.outputs, which))
            assert verify.check_task_outputs(task, outs, refs) is None

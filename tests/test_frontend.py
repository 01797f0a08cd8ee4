"""Model import: PyTorch -> linalg-on-tensors text that our pipeline accepts and computes PyTorch's numbers.

The exporter (torch-mlir) always runs in its own process; this process holds torch (for the
in-memory module and the reference) next to our MLIR, never torch-mlir. Tests that need torch-mlir
skip when it is absent; the i1 widening and the input checks run without torch.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import ansor
import numpy as np
import pytest
from ansor.frontend import torch_import as frontend
from ansor.targets.cpu import lowering
from ansor.frontend import workloads
from ansor.core.task import TaskError
from mlir import ir

needs_torch_mlir = pytest.mark.skipif(not frontend.torch_available(),
                                      reason="torch / torch-mlir not installed (pip install 'ansor-mlir[torch]')")


def _untuned(text: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Our untuned program's outputs: create_task + lowering with no schedule."""
    task = ansor.create_task(text)
    return lowering.compile_task(task, None).run(inputs)


def _ansor(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ansor.cli", *args], capture_output=True, text=True, cwd=cwd, check=False,
                          timeout=300)


def _one_line_error(p: subprocess.CompletedProcess, expected: str) -> None:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and expected in lines[0] and "Traceback" not in p.stderr, p.stderr


# ---- no torch needed ------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("1x3x224x224", ((1, 3, 224, 224), "f32")),
    ("128", ((128,), "f32")),
    ("1x128xi64", ((1, 128), "i64")),
    (" 2X4 ", ((2, 4), "f32")),
])
def test_parse_input_shape(text: str, expected: tuple) -> None:
    assert frontend.parse_input_shape(text) == expected


@pytest.mark.parametrize("text", ["", "1x", "1x3xq", "0x4", "-1x4", "i64", "1,3,224"])
def test_parse_input_shape_rejects(text: str) -> None:
    with pytest.raises(TaskError, match="bad input shape"):
        frontend.parse_input_shape(text)


# torch-mlir's shapes of boolean masks: a comparison yields i1, a constant i1 mask, a transposed
# and extracted mask, a filled mask, consumers select on them.
BOOL_MODULE = """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @f(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %true = arith.constant true
  %c0 = arith.constant 0 : index
  %m0 = arith.constant dense<[[true, false, false, false], [true, true, false, false],
                              [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %e = tensor.empty() : tensor<4x4xi1>
  %pos = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x4xf32>) outs(%e : tensor<4x4xi1>) {
  ^bb0(%a: f32, %o: i1):
    %c = arith.cmpf ogt, %a, %zero : f32
    linalg.yield %c : i1
  } -> tensor<4x4xi1>
  %et = tensor.empty() : tensor<4x4xi1>
  %mt = linalg.transpose ins(%m0 : tensor<4x4xi1>) outs(%et : tensor<4x4xi1>) permutation = [1, 0]
  %ones = linalg.fill ins(%true : i1) outs(%e : tensor<4x4xi1>) -> tensor<4x4xi1>
  %b = tensor.extract %mt[%c0, %c0] : tensor<4x4xi1>
  %fx = tensor.empty() : tensor<4x4xf32>
  %r = linalg.generic {indexing_maps = [#id, #id, #id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %pos, %mt, %ones : tensor<4x4xf32>, tensor<4x4xi1>, tensor<4x4xi1>, tensor<4x4xi1>)
      outs(%fx : tensor<4x4xf32>) {
  ^bb0(%a: f32, %p: i1, %m: i1, %one: i1, %o: f32):
    %s1 = arith.select %p, %a, %zero : f32
    %both = arith.andi %m, %one : i1
    %both2 = arith.andi %both, %b : i1
    %s2 = arith.select %both2, %s1, %a : f32
    linalg.yield %s2 : f32
  } -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}
"""


def _bool_reference(x: np.ndarray) -> np.ndarray:
    mt = np.tril(np.ones((4, 4), bool)).T  # the transposed constant mask; mt[0, 0] is true
    s1 = np.where(x > 0, x, 0)
    return np.where(mt, s1, x).astype(np.float32)


def test_widen_i1_tensors_keeps_the_numbers() -> None:
    text = frontend.finish(BOOL_MODULE, "bool.mlir")
    assert "xi1>" not in text and "xi8>" in text
    x = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    (out,) = _untuned(text, [x])
    np.testing.assert_array_equal(out, _bool_reference(x))


def test_widen_i1_tensors_counts_and_is_a_noop_without_booleans() -> None:
    with ir.Context(), ir.Location.unknown():
        # The constant, two tensor.empty, the comparison, the transpose and the fill.
        assert frontend.widen_i1_tensors(ir.Module.parse(BOOL_MODULE)) == 6
        plain = ir.Module.parse(workloads.matmul(8, 8, 8))
        before = str(plain)
        assert frontend.widen_i1_tensors(plain) == 0 and str(plain) == before


def test_bool_function_argument_rejected() -> None:
    text = "func.func @g(%m: tensor<4xi1>) -> tensor<4xi1> {\n  return %m : tensor<4xi1>\n}\n"
    with pytest.raises(TaskError, match=r"m\.mlir: @g argument #0 is a bool tensor tensor<4xi1>"):
        frontend.finish(text, "m.mlir")


def test_tm_tensor_text_rejected() -> None:
    text = "func.func @s(%a: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = tm_tensor.sort dimension(0) ...\n}\n"
    with pytest.raises(TaskError, match=r"s\.mlir: tm_tensor\.sort: torch-mlir TMTensor ops cannot be compiled"):
        frontend.finish(text, "s.mlir")


@pytest.mark.parametrize(("args", "expected"), [
    (["missing.py:make_model", "--input-shape", "1x4"], "missing.py: no such file"),
    (["model.py", "--input-shape", "1x4"], "bad model spec 'model.py'"),
    (["model.py:make_model", "--input-shape", "1x4xbf16"], "bad input shape '1x4xbf16'"),
    (["model.py:make_model"], "give the model's input shapes"),
    (["--network", "alexnet"], "unknown network 'alexnet' (built-in: mlp, "),
    (["--network", "mlp", "--input-shape", "1x4"], "--input-shape does not apply to --network mlp"),
    ([], "give a model spec"),
])
def test_cli_bad_input_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    (tmp_path / "model.py").write_text("def make_model():\n    raise AssertionError('never loaded here')\n")
    _one_line_error(_ansor("import", *args, "-o", "out.mlir", cwd=tmp_path), expected)
    assert not (tmp_path / "out.mlir").exists()


def test_cli_lists_networks() -> None:
    p = _ansor("import", "--list")
    assert p.returncode == 0, p.stderr
    names = [ln.split()[0] for ln in p.stdout.splitlines()]
    assert {"mlp", "small-cnn", "resnet18", "bert-layer", "mobilenet-v2"} <= set(names)


# ---- torch + torch-mlir ---------------------------------------------------------------------------


@needs_torch_mlir
def test_import_torch_mlp_matches_pytorch() -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()
    x = torch.randn(3, 16)
    text = frontend.import_torch(model, (x,))
    assert "dense_resource<" in text and "tm_tensor" not in text
    assert "linalg.transpose" not in text, "the weight transposes of nn.Linear are folded into the constants"
    task = ansor.create_task(text)
    assert [s.shape for s in task.inputs] == [(3, 16)], "weights must be embedded, not arguments"
    assert task.flops >= 2 * 3 * (16 * 32 + 32 * 8)
    (out,) = lowering.compile_task(task, None).run([x.numpy()])
    np.testing.assert_allclose(out, model(x).detach().numpy(), rtol=1e-5, atol=1e-6)


@needs_torch_mlir
def test_import_torch_bool_masks_widened() -> None:
    torch = pytest.importorskip("torch")

    class Masked(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("causal", torch.triu(torch.ones(6, 6, dtype=torch.bool), 1))

        def forward(self, x):
            y = torch.where(x > 0, x, 0.1 * x).masked_fill(self.causal, float("-inf"))
            return torch.softmax(y, -1) * (x.sum(-1, keepdim=True) > 0)

    x = torch.randn(2, 6, 6, generator=torch.Generator().manual_seed(1))
    text = frontend.import_torch(Masked().eval(), (x,))
    assert "xi1>" not in text
    (out,) = _untuned(text, [x.numpy()])
    np.testing.assert_allclose(out, Masked().eval()(x).numpy(), rtol=1e-5, atol=1e-6)


@needs_torch_mlir
def test_attention_block_partitions_with_i8_tasks() -> None:
    """`nn.MultiheadAttention` exports scaled dot-product attention with a guard for fully masked
    rows (an i8 mask reduced per row): split at each reduction (`split=True`), the partitioned
    model has tasks taking or returning i8 tensors; by default the mask's row reduction joins the
    scores + softmax task and the i8 tensors stay inside it. Either way the whole model, untuned,
    equals PyTorch."""
    torch = pytest.importorskip("torch")
    from ansor.compile import compile_network
    from ansor.frontend.models import vit_block
    from ansor.frontend.partition import extract_tasks

    model = vit_block(dim=16, heads=2, mlp=32)
    x = torch.randn(1, 7, 16, generator=torch.Generator().manual_seed(2))
    text = frontend.import_torch(model, (x,))
    net, split = extract_tasks(text), extract_tasks(text, split=True)
    assert any(s.dtype == "i8" for t in split.tasks for s in t.inputs + t.outputs)
    assert len(net.tasks) < len(split.tasks)
    for n in (net, split):
        out = compile_network(n)(x.numpy())
        np.testing.assert_allclose(out, model(x).detach().numpy(), rtol=1e-5, atol=1e-5)


@needs_torch_mlir
def test_import_file_conv_net_matches_pytorch(tmp_path: Path) -> None:
    (tmp_path / "convnet.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn

        def make_model():
            torch.manual_seed(3)
            net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                                nn.Conv2d(8, 4, 3, stride=2), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 3 * 3, 5))
            with torch.no_grad():
                net[1].running_mean.uniform_(-0.5, 0.5)
                net[1].running_var.uniform_(0.5, 1.5)
            return net.eval()
    """))
    spec = f"{tmp_path / 'convnet.py'}:make_model"
    text = frontend.import_file(spec, [(2, 3, 16, 16)])
    x = np.random.default_rng(2).standard_normal((2, 3, 16, 16)).astype(np.float32)
    (ref,) = frontend.torch_reference(spec, [x])
    (out,) = _untuned(text, [x])
    assert out.shape == (2, 5)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


@needs_torch_mlir
def test_unseeded_factory_imports_reproducibly(tmp_path: Path) -> None:
    """A factory that leaves its weights at torch's random init: torch seeds every process
    differently, so without the exporter's seed two imports differ and `torch_reference` (its own
    process) runs other weights than the imported model has."""
    (tmp_path / "lin.py").write_text(textwrap.dedent("""
        from torch import nn

        def make_model():
            return nn.Sequential(nn.Linear(6, 5), nn.Tanh()).eval()
    """))
    spec = f"{tmp_path / 'lin.py'}:make_model"
    first, second = (frontend.import_file(spec, [(3, 6)]) for _ in range(2))
    assert first == second
    x = np.random.default_rng(4).standard_normal((3, 6)).astype(np.float32)
    (ref,) = frontend.torch_reference(spec, [x])
    (out,) = _untuned(first, [x])
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


@needs_torch_mlir
def test_embedding_model_tunes_and_matches_pytorch(tmp_path: Path) -> None:
    """Token ids (i64) through `nn.Embedding`, then LayerNorm and an LSTM: the embedding task's
    random ids stay inside the table (they used to trip torch-mlir's bound asserts, so the task
    could never be measured), every task gets measured candidates, and the tuned model equals
    PyTorch."""
    (tmp_path / "emb.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(5, 8)  # fewer rows than the ids' old range [-8, 8)
                self.ln = nn.LayerNorm(8)
                self.rnn = nn.LSTM(8, 6, batch_first=True)

            def forward(self, ids):
                y, _ = self.rnn(self.ln(self.emb(ids)))
                return y

        def make_model():
            torch.manual_seed(4)
            return Net().eval()
    """))
    from ansor.compile import compile_network
    from ansor.measure.measurer import RunOptions
    from ansor.frontend.partition import extract_tasks
    from ansor.tuning.scheduler import TaskScheduler

    spec = f"{tmp_path / 'emb.py'}:make_model"
    text = frontend.import_file(spec, [(1, 4)], input_dtypes=["i64"])
    net = extract_tasks(text)
    log = tmp_path / "emb.jsonl"
    res = TaskScheduler(net.tasks, strategy="round-robin").tune(
        3 * len(net.tasks), batch_size=2, log_path=log, search="random",
        run_options=RunOptions(threads=1, repeat=1, min_repeat_ms=0))
    assert res.failed_tasks() == []
    assert all(r.best is not None for r in res.results), [t.name for t, r in zip(net.tasks, res.results) if not r.best]
    ids = np.array([[0, 4, 2, 4]], dtype=np.int64)
    (ref,) = frontend.torch_reference(spec, [ids])
    np.testing.assert_allclose(compile_network(net, log)(ids), ref, rtol=1e-5, atol=1e-6)


@needs_torch_mlir
def test_sort_rejected_naming_the_op() -> None:
    torch = pytest.importorskip("torch")

    class Sorts(torch.nn.Module):
        def forward(self, x):
            return torch.sort(x, dim=-1).values * 2

    with pytest.raises(TaskError) as info:
        frontend.import_torch(Sorts(), (torch.randn(4, 4),))
    msg = str(info.value)
    assert "\n" not in msg and "tm_tensor.sort" in msg and "test_frontend.py" in msg


@needs_torch_mlir
def test_cli_network_and_elided_weights(tmp_path: Path) -> None:
    p = _ansor("import", "--network", "mlp", "-o", "mlp.mlir", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    full = (tmp_path / "mlp.mlir").read_text()
    assert ansor.create_task(full).inputs[0].shape == (4, 64)
    p = _ansor("import", "--network", "mlp", "--elide-weights", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "dense_resource<" in p.stdout and len(p.stdout) < len(full) / 5
    assert "dialect_resources" not in p.stdout


@needs_torch_mlir
def test_cli_factory_errors_one_line(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def broken():\n    raise RuntimeError('no weights here')\n")
    _one_line_error(_ansor("import", "m.py:nothere", "--input-shape", "1x4", cwd=tmp_path),
                    "m.py:nothere: the file defines no 'nothere'")
    _one_line_error(_ansor("import", "m.py:broken", "--input-shape", "1x4", cwd=tmp_path),
                    "m.py:broken: broken() failed: RuntimeError: no weights here")


def test_networks_build_deterministically() -> None:
    """Every built-in network runs on its input shapes, and two builds (same seed) give the same numbers."""
    torch = pytest.importorskip("torch")
    from ansor.frontend.models import NETWORKS

    expected = {"mlp": (4, 10), "small-cnn": (1, 10), "resnet18": (1, 1000), "mobilenet-v2": (1, 1000),
                "bert-layer": (1, 128, 768), "vit-block": (1, 197, 192), "squeezenet1.1": (1, 1000),
                "shufflenet-v2-x0.5": (1, 1000), "efficientnet-b0": (1, 1000), "regnet-x-400mf": (1, 1000),
                "vit-tiny": (1, 1000), "gpt2-block": (1, 64, 384), "audio-conv1d": (1, 35)}
    assert set(expected) <= set(NETWORKS)
    for name, (factory, shapes) in NETWORKS.items():
        xs = [torch.randn(*s, generator=torch.Generator().manual_seed(0)) for s in shapes]
        with torch.no_grad():
            a, b = factory()(*xs), factory()(*xs)
        assert tuple(a.shape) == expected[name], name
        assert torch.equal(a, b) and torch.isfinite(a).all(), name


@needs_torch_mlir
def test_written_out_torchvision_models_have_torchvision_parameter_counts() -> None:
    """torchvision cannot be installed next to the CPU torch wheel: its small ImageNet models are
    written out in `models.py`; the parameter counts are torchvision's (its model docs)."""
    pytest.importorskip("torch")
    from ansor.frontend.models import NETWORKS

    expected = {"squeezenet1.1": 1_235_496, "shufflenet-v2-x0.5": 1_366_792, "efficientnet-b0": 5_288_548,
                "regnet-x-400mf": 5_495_976}
    for name, count in expected.items():
        assert sum(p.numel() for p in NETWORKS[name][0]().parameters()) == count, name


@needs_torch_mlir
def test_half_model_keeps_half_operands_and_reaches_tensor_cores() -> None:
    """torch-mlir widens every f16 operand of a half model's matmuls to f32 first (`arith.extf`
    generics): folded back into the matmuls (`frontend/precision.py`), each task takes the f16
    activation and the f16 weight, the CUDA target gives it the tensor-core sketch with the bias,
    rounding and GELU as its epilogue, and the whole model, untuned on the CPU, still computes
    PyTorch's numbers."""
    torch = pytest.importorskip("torch")
    from ansor.compile import compile_network
    from ansor.frontend.partition import extract_tasks
    from ansor.targets.cuda.tensorcore import tc_problem_for

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 32)).half().eval()
    x = torch.randn(16, 64).half()
    text = frontend.import_torch(model, (x,))
    gpu = extract_tasks(text, target="cuda")
    mms = [t for t in gpu.tasks if "linalg.matmul" in t.ir]
    assert len(mms) == 2
    for t in mms:
        assert [s.dtype for s in t.inputs[:2]] == ["f16", "f16"]  # activation and weight
        p, why = tc_problem_for(t)
        assert p is not None and "epilogue" in why and p.out == "f16"
    out = compile_network(extract_tasks(text))(x.numpy())
    ref = model(x).detach().float().numpy()
    np.testing.assert_allclose(out.astype(np.float32), ref, rtol=2e-2, atol=2e-2)

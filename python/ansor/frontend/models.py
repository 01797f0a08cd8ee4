"""Built-in networks: PyTorch models defined here, by name (`ansor import --network NAME`).

    name ("resnet18", "bert-layer", ...) --NETWORKS[name]--> (factory, input shapes)
    factory() --> nn.Module in eval mode, random weights drawn from a fixed seed

Random weights, because no pretrained checkpoint can be downloaded here and numerics only need to
match PyTorch on the same weights: a factory called twice, in any process, builds the same model.
Batch-norm running statistics are randomized too, so that the exported affine arithmetic is not an
identity. torchvision cannot be installed next to the CPU torch wheel, so the architectures are
written out here (ResNet-18: He et al. 2016; MobileNet-V2: Sandler et al. 2018; the encoder layer:
BERT-base, Devlin et al. 2019).

This module imports nothing from `ansor`, and torch only inside the factories, so that the exporter
process can load it by path (`ansor import` never puts torch-mlir next to our MLIR) and `ansor`
imports without torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn

#: Seed every factory draws its weights from.
SEED = 0


def _nn() -> Any:
    from torch import nn

    return nn


def _seeded_eval(model: nn.Module) -> nn.Module:
    """Randomize batch-norm statistics (seeded) and switch to inference mode."""
    import torch

    g = torch.Generator().manual_seed(SEED + 1)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.copy_(0.1 * torch.randn(m.num_features, generator=g))
                m.running_var.copy_(0.5 + torch.rand(m.num_features, generator=g))
                m.weight.copy_(0.5 + torch.rand(m.num_features, generator=g))
                m.bias.copy_(0.1 * torch.randn(m.num_features, generator=g))
    return model.eval()


def mlp(in_features: int = 64, hidden: int = 128, out_features: int = 10) -> nn.Module:
    """Two linear layers with a ReLU between: the smallest model with a contraction and a bias."""
    import torch

    nn = _nn()
    torch.manual_seed(SEED)
    return nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, out_features)).eval()


def small_cnn(num_classes: int = 10) -> nn.Module:
    """conv-bn-relu, max-pool, conv-bn-relu, global average pool, linear: ResNet's ops at toy size."""
    import torch

    nn = _nn()
    torch.manual_seed(SEED)
    return _seeded_eval(nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, num_classes),
    ))


def _basic_block(cin: int, cout: int, stride: int) -> nn.Module:
    nn = _nn()

    class BasicBlock(nn.Module):
        """Two 3x3 conv-bn stages and an identity (or 1x1 conv-bn) shortcut, ReLU after the sum."""

        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.shortcut = nn.Identity()
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.relu(self.bn1(self.conv1(x)))
            return self.relu(self.bn2(self.conv2(y)) + self.shortcut(x))

    return BasicBlock()


def resnet18(num_classes: int = 1000) -> nn.Module:
    """ResNet-18 for 224x224 images: 7x7 stem, 4 stages of 2 basic blocks (64..512 channels)."""
    import torch

    nn = _nn()
    torch.manual_seed(SEED)
    layers: list[nn.Module] = [
        nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
    ]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [_basic_block(cin, cout, stride), _basic_block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, num_classes)]
    return _seeded_eval(nn.Sequential(*layers))


def _inverted_residual(cin: int, cout: int, stride: int, expand: int) -> nn.Module:
    nn = _nn()

    def conv_bn(ci: int, co: int, k: int, s: int, groups: int, relu6: bool) -> list[nn.Module]:
        mods = [nn.Conv2d(ci, co, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(co)]
        return mods + [nn.ReLU6()] if relu6 else mods

    class InvertedResidual(nn.Module):
        """1x1 expansion, 3x3 depthwise, 1x1 linear projection; residual when shapes allow."""

        def __init__(self) -> None:
            super().__init__()
            hidden = cin * expand
            mods: list[nn.Module] = conv_bn(cin, hidden, 1, 1, 1, True) if expand != 1 else []
            mods += conv_bn(hidden, hidden, 3, stride, hidden, True) + conv_bn(hidden, cout, 1, 1, 1, False)
            self.body = nn.Sequential(*mods)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            return x + self.body(x) if self.residual else self.body(x)

    return InvertedResidual()


def mobilenet_v2(num_classes: int = 1000) -> nn.Module:
    """MobileNet-V2 (width 1.0) for 224x224 images: 17 inverted-residual blocks, 1280-wide head."""
    import torch

    nn = _nn()
    torch.manual_seed(SEED)
    layers: list[nn.Module] = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6()]
    cin = 32
    # (expansion t, output channels c, repeats n, first stride s): the paper's Table 2.
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            layers.append(_inverted_residual(cin, c, s if i == 0 else 1, t))
            cin = c
    layers += [nn.Conv2d(cin, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.ReLU6(),
               nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1280, num_classes)]
    return _seeded_eval(nn.Sequential(*layers))


def bert_layer(hidden: int = 768, heads: int = 12, ffn: int = 3072) -> nn.Module:
    """One BERT encoder layer (post-LN): multi-head self-attention, add & LayerNorm, GELU FFN, add & LayerNorm.

    Input and output: hidden states [batch, seq, hidden]. No attention mask (every token attends
    to every token), no dropout (inference).
    """
    import torch

    nn = _nn()
    torch.manual_seed(SEED)
    head_dim = hidden // heads

    class EncoderLayer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q, self.k, self.v = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
            self.out = nn.Linear(hidden, hidden)
            self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
            self.ffn_in, self.ffn_out = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)
            self.gelu = nn.GELU()
            self.ln2 = nn.LayerNorm(hidden, eps=1e-12)

        def split(self, t):
            b, s, _ = t.shape
            return t.reshape(b, s, heads, head_dim).transpose(1, 2)  # [b, heads, s, head_dim]

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(head_dim)
            ctx = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, s, hidden)
            h = self.ln1(x + self.out(ctx))
            return self.ln2(h + self.ffn_out(self.gelu(self.ffn_in(h))))

    return EncoderLayer().eval()


def vit_block(dim: int = 192, heads: int = 3, mlp: int = 768) -> nn.Module:
    """One ViT encoder block (pre-LN, ViT-Tiny sizes): `nn.MultiheadAttention` over 197 tokens, GELU MLP.

    PyTorch's attention here (scaled dot-product) exports with a guard for fully masked rows:
    an i8 mask reduced over each row, so a task of the model takes and returns i8 tensors; 197
    tokens is a prime extent (whole-row vectors, ragged register tiles)."""
    import torch

    nn = _nn()
    torch.manual_seed(SEED)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

        def forward(self, x):
            h = self.n1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.mlp(self.n2(x))

    return Block().eval()


#: name -> (factory, input shapes). Every input is float32.
NETWORKS: dict[str, tuple[Callable[[], nn.Module], list[tuple[int, ...]]]] = {
    "mlp": (mlp, [(4, 64)]),
    "small-cnn": (small_cnn, [(1, 3, 32, 32)]),
    "resnet18": (resnet18, [(1, 3, 224, 224)]),
    "mobilenet-v2": (mobilenet_v2, [(1, 3, 224, 224)]),
    "bert-layer": (bert_layer, [(1, 128, 768)]),
    "vit-block": (vit_block, [(1, 197, 192)]),
}


def describe() -> list[tuple[str, str]]:
    """(name, one-line description) of every built-in network."""
    out = []
    for name, (factory, shapes) in NETWORKS.items():
        doc = (factory.__doc__ or "").strip().splitlines()[0]
        out.append((name, f"{' '.join('x'.join(map(str, s)) for s in shapes)}  {doc}"))
    return out

"""Built-in networks: PyTorch models defined here, by name (`ansor import --network NAME`).

    name ("resnet18", "bert-layer", ...) --NETWORKS[name]--> (factory, input shapes)
    factory() --> nn.Module in eval mode, random weights drawn from a fixed seed

Random weights, because no pretrained checkpoint can be downloaded here and numerics only need to
match PyTorch on the same weights: a factory called twice, in any process, builds the same model.
Batch-norm running statistics are randomized too, so that the exported affine arithmetic is not an
identity. torchvision cannot be installed next to the CPU torch wheel, so the architectures are
written out here (ResNet-18: He et al. 2016; MobileNet-V2: Sandler et al. 2018; the encoder layer:
BERT-base, Devlin et al. 2019; the acceptance set below: torchvision's definitions).

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
        if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
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


# ----------------------------------------------------------------------------------------------
# The acceptance set (results/networks-acceptance): torchvision's small ImageNet models written out
# (torchvision's definitions, layer for layer, at width/depth settings named in each docstring),
# a whole ViT-Tiny, a GPT-2 block and a 1-D convolutional audio net.


def _conv_bn(ci: int, co: int, k: int, s: int = 1, groups: int = 1, act: Any = None) -> list[nn.Module]:
    """Conv2d (no bias, padding k // 2) + BatchNorm2d (+ the activation module `act`)."""
    nn = _nn()
    mods = [nn.Conv2d(ci, co, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(co)]
    return mods + [act] if act is not None else mods


def squeezenet1_1(num_classes: int = 1000) -> nn.Module:
    """SqueezeNet 1.1 (torchvision): Fire modules (1x1 squeeze, 1x1 + 3x3 expand, concatenated), ceil-mode max pools."""
    import torch

    nn = _nn()
    torch.manual_seed(SEED)

    class Fire(nn.Module):
        def __init__(self, cin: int, squeeze: int, e1: int, e3: int) -> None:
            super().__init__()
            self.squeeze = nn.Sequential(nn.Conv2d(cin, squeeze, 1), nn.ReLU())
            self.e1 = nn.Sequential(nn.Conv2d(squeeze, e1, 1), nn.ReLU())
            self.e3 = nn.Sequential(nn.Conv2d(squeeze, e3, 3, padding=1), nn.ReLU())

        def forward(self, x):
            x = self.squeeze(x)
            return torch.cat([self.e1(x), self.e3(x)], 1)

    def pool() -> nn.Module:
        return nn.MaxPool2d(3, 2, ceil_mode=True)

    return nn.Sequential(
        nn.Conv2d(3, 64, 3, 2), nn.ReLU(), pool(), Fire(64, 16, 64, 64), Fire(128, 16, 64, 64), pool(),
        Fire(128, 32, 128, 128), Fire(256, 32, 128, 128), pool(), Fire(256, 48, 192, 192),
        Fire(384, 48, 192, 192), Fire(384, 64, 256, 256), Fire(512, 64, 256, 256),
        nn.Conv2d(512, num_classes, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
    ).eval()


def shufflenet_v2_x0_5(num_classes: int = 1000) -> nn.Module:
    """ShuffleNet-V2 x0.5 (torchvision): channel split (chunk), depthwise 3x3, concat + channel shuffle."""
    import torch

    nn = _nn()
    torch.manual_seed(SEED)

    def shuffle(x, groups: int):
        b, c, h, w = x.shape
        return x.view(b, groups, c // groups, h, w).transpose(1, 2).contiguous().view(b, c, h, w)

    class Unit(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.stride, bf = stride, cout // 2
            if stride > 1:
                self.branch1 = nn.Sequential(*_conv_bn(cin, cin, 3, stride, cin), *_conv_bn(cin, bf, 1, act=nn.ReLU()))
            self.branch2 = nn.Sequential(*_conv_bn(cin if stride > 1 else bf, bf, 1, act=nn.ReLU()),
                                         *_conv_bn(bf, bf, 3, stride, bf), *_conv_bn(bf, bf, 1, act=nn.ReLU()))

        def forward(self, x):
            if self.stride == 1:
                x1, x2 = x.chunk(2, dim=1)
                out = torch.cat((x1, self.branch2(x2)), 1)
            else:
                out = torch.cat((self.branch1(x), self.branch2(x)), 1)
            return shuffle(out, 2)

    class ShuffleNetV2(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(*_conv_bn(3, 24, 3, 2, act=nn.ReLU()), nn.MaxPool2d(3, 2, 1))
            units: list[nn.Module] = []
            cin = 24
            for cout, repeats in ((48, 4), (96, 8), (192, 4)):
                units += [Unit(cin, cout, 2)] + [Unit(cout, cout, 1) for _ in range(repeats - 1)]
                cin = cout
            self.units = nn.Sequential(*units)
            self.conv5 = nn.Sequential(*_conv_bn(cin, 1024, 1, act=nn.ReLU()))
            self.fc = nn.Linear(1024, num_classes)

        def forward(self, x):
            return self.fc(self.conv5(self.units(self.stem(x))).mean([2, 3]))

    return _seeded_eval(ShuffleNetV2())


def efficientnet_b0(num_classes: int = 1000) -> nn.Module:
    """EfficientNet-B0 (torchvision): MBConv blocks with SiLU, squeeze-excitation (sigmoid gate), 3x3/5x5 depthwise."""
    import torch

    nn = _nn()
    torch.manual_seed(SEED)

    class MBConv(nn.Module):
        def __init__(self, cin: int, cout: int, k: int, stride: int, expand: int) -> None:
            super().__init__()
            hidden, squeeze = cin * expand, max(1, cin // 4)
            mods: list[nn.Module] = _conv_bn(cin, hidden, 1, act=nn.SiLU()) if expand != 1 else []
            self.expand_dw = nn.Sequential(*mods, *_conv_bn(hidden, hidden, k, stride, hidden, act=nn.SiLU()))
            self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(hidden, squeeze, 1), nn.SiLU(),
                                    nn.Conv2d(squeeze, hidden, 1), nn.Sigmoid())
            self.project = nn.Sequential(*_conv_bn(hidden, cout, 1))
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            h = self.expand_dw(x)
            y = self.project(h * self.se(h))
            return x + y if self.residual else y

    layers: list[nn.Module] = [*_conv_bn(3, 32, 3, 2, act=nn.SiLU())]
    cin = 32
    # (expansion, kernel, first stride, output channels, repeats): torchvision's B0 settings.
    for t, k, s, c, n in ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
                          (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)):
        for i in range(n):
            layers.append(MBConv(cin, c, k, s if i == 0 else 1, t))
            cin = c
    layers += [*_conv_bn(cin, 1280, 1, act=nn.SiLU()), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
               nn.Linear(1280, num_classes)]
    return _seeded_eval(nn.Sequential(*layers))


def regnet_x_400mf(num_classes: int = 1000) -> nn.Module:
    """RegNetX-400MF (torchvision): residual bottlenecks with grouped 3x3 convolutions (group width 16)."""
    import torch

    nn = _nn()
    torch.manual_seed(SEED)

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.proj = (nn.Sequential(*_conv_bn(cin, cout, 1, stride)) if stride != 1 or cin != cout
                         else nn.Identity())
            self.f = nn.Sequential(*_conv_bn(cin, cout, 1, act=nn.ReLU()),
                                   *_conv_bn(cout, cout, 3, stride, cout // 16, act=nn.ReLU()),
                                   *_conv_bn(cout, cout, 1))
            self.relu = nn.ReLU()

        def forward(self, x):
            return self.relu(self.proj(x) + self.f(x))

    layers: list[nn.Module] = [*_conv_bn(3, 32, 3, 2, act=nn.ReLU())]
    cin = 32
    for width, depth in ((32, 1), (64, 2), (160, 7), (400, 12)):
        for i in range(depth):
            layers.append(Block(cin, width, 2 if i == 0 else 1))
            cin = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, num_classes)]
    return _seeded_eval(nn.Sequential(*layers))


def vit_tiny(depth: int = 2, dim: int = 192, heads: int = 3, mlp: int = 768, patch: int = 16,
             num_classes: int = 1000) -> nn.Module:
    """ViT-Tiny/16 cut to 2 blocks: patch embedding (16x16 stride-16 conv), class token, 197 tokens, explicit softmax attention."""
    import torch

    nn = _nn()
    torch.manual_seed(SEED)
    head_dim = dim // heads

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = self.qkv(x).reshape(b, n, 3, heads, head_dim).permute(2, 0, 3, 1, 4).unbind(0)
            att = ((q * head_dim ** -0.5) @ k.transpose(-2, -1)).softmax(dim=-1)
            return self.proj((att @ v).transpose(1, 2).reshape(b, n, dim))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.n1, self.n2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
            self.attn = Attention()
            self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

        def forward(self, x):
            x = x + self.attn(self.n1(x))
            return x + self.mlp(self.n2(x))

    class ViT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Conv2d(3, dim, patch, patch)
            self.cls = nn.Parameter(0.02 * torch.randn(1, 1, dim))
            self.pos = nn.Parameter(0.02 * torch.randn(1, (224 // patch) ** 2 + 1, dim))
            self.blocks = nn.Sequential(*[Block() for _ in range(depth)])
            self.norm = nn.LayerNorm(dim, eps=1e-6)
            self.head = nn.Linear(dim, num_classes)

        def forward(self, x):
            x = self.embed(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            return self.head(self.norm(self.blocks(x))[:, 0])

    return ViT().eval()


def gpt2_block(dim: int = 384, heads: int = 6, ctx: int = 64) -> nn.Module:
    """A GPT-2 decoder block (nanoGPT's): pre-LN, causal attention through a tril mask (masked_fill -inf), tanh GELU MLP."""
    import torch

    nn = _nn()
    torch.manual_seed(SEED)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.c_attn, self.c_proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.c_fc, self.mlp_proj = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
            self.gelu = nn.GELU(approximate="tanh")
            self.register_buffer("bias", torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx))

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.c_attn(self.ln1(x)).split(dim, dim=2)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf")).softmax(dim=-1)
            x = x + self.c_proj((att @ v).transpose(1, 2).contiguous().view(b, t, c))
            return x + self.mlp_proj(self.gelu(self.c_fc(self.ln2(x))))

    return Block().eval()


def audio_conv1d(num_classes: int = 35) -> nn.Module:
    """M5-style raw-audio net (Dai et al. 2017): strided wide Conv1d, BatchNorm1d, max pools, a dilated residual block, mean."""
    import torch

    nn = _nn()
    torch.manual_seed(SEED)

    def stage(ci: int, co: int, k: int, s: int = 1) -> list[nn.Module]:
        return [nn.Conv1d(ci, co, k, s, bias=False), nn.BatchNorm1d(co), nn.ReLU()]

    class M5(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.front = nn.Sequential(*stage(1, 32, 80, 16), nn.MaxPool1d(4), *stage(32, 32, 3), nn.MaxPool1d(4),
                                       *stage(32, 64, 3), nn.MaxPool1d(4))
            self.res = nn.Sequential(nn.Conv1d(64, 64, 3, padding=2, dilation=2), nn.BatchNorm1d(64), nn.ReLU(),
                                     nn.Conv1d(64, 64, 3, padding=4, dilation=4))
            self.fc = nn.Linear(64, num_classes)

        def forward(self, x):
            x = self.front(x)
            x = torch.relu(x + self.res(x))
            return torch.log_softmax(self.fc(x.mean(-1)), dim=-1)

    return _seeded_eval(M5())


#: name -> (factory, input shapes). Every input is float32.
NETWORKS: dict[str, tuple[Callable[[], nn.Module], list[tuple[int, ...]]]] = {
    "mlp": (mlp, [(4, 64)]),
    "small-cnn": (small_cnn, [(1, 3, 32, 32)]),
    "resnet18": (resnet18, [(1, 3, 224, 224)]),
    "mobilenet-v2": (mobilenet_v2, [(1, 3, 224, 224)]),
    "bert-layer": (bert_layer, [(1, 128, 768)]),
    "vit-block": (vit_block, [(1, 197, 192)]),
    "squeezenet1.1": (squeezenet1_1, [(1, 3, 96, 96)]),
    "shufflenet-v2-x0.5": (shufflenet_v2_x0_5, [(1, 3, 96, 96)]),
    "efficientnet-b0": (efficientnet_b0, [(1, 3, 96, 96)]),
    "regnet-x-400mf": (regnet_x_400mf, [(1, 3, 96, 96)]),
    "vit-tiny": (vit_tiny, [(1, 3, 224, 224)]),
    "gpt2-block": (gpt2_block, [(1, 64, 384)]),
    "audio-conv1d": (audio_conv1d, [(1, 1, 8000)]),
}


def describe() -> list[tuple[str, str]]:
    """(name, one-line description) of every built-in network."""
    out = []
    for name, (factory, shapes) in NETWORKS.items():
        doc = (factory.__doc__ or "").strip().splitlines()[0]
        out.append((name, f"{' '.join('x'.join(map(str, s)) for s in shapes)}  {doc}"))
    return out

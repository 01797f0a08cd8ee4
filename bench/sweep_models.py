"""PyTorch models no issue lists, for bench.model_sweep (not a script). SWEEP maps a name to (class name,
input shapes as `ansor import` takes them): the class is the factory (`path:Class`), since the
exporter process seeds torch before building the model and puts it in eval mode."""

import torch
import torch.nn.functional as F
from torch import nn


class UNetTiny(nn.Module):
    def __init__(s):
        super().__init__()
        s.e1 = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        s.e2 = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        s.up = nn.ConvTranspose2d(32, 16, 2, stride=2)
        s.d1 = nn.Sequential(nn.Conv2d(32, 16, 3, padding=1), nn.ReLU())
        s.out = nn.Conv2d(16, 2, 1)
    def forward(s, x):
        a = s.e1(x)
        b = s.e2(F.max_pool2d(a, 2))
        u = s.up(b)
        u2 = F.interpolate(b, scale_factor=2, mode="nearest")[:, :16]
        return s.out(s.d1(torch.cat([a, u + u2], 1)))

class GPTBlock(nn.Module):
    def __init__(s, d=96, h=4, t=40):
        super().__init__()
        s.h = h
        s.ln1, s.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        s.qkv, s.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        s.fc1, s.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        s.register_buffer("mask", torch.tril(torch.ones(t, t)).bool())
    def forward(s, x):
        B, T, D = x.shape
        q, k, v = s.qkv(s.ln1(x)).split(D, dim=2)
        q = q.view(B, T, s.h, D // s.h).transpose(1, 2)
        k = k.view(B, T, s.h, D // s.h).transpose(1, 2)
        v = v.view(B, T, s.h, D // s.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / (D // s.h) ** 0.5
        att = att.masked_fill(~s.mask[:T, :T], float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, D)
        x = x + s.proj(y)
        return x + s.fc2(F.gelu(s.fc1(s.ln2(x)), approximate="tanh"))

class Audio1d(nn.Module):
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv1d(1, 16, 9, stride=2, padding=4)
        s.c2 = nn.Conv1d(16, 32, 5, padding=2, groups=4)
        s.fc = nn.Linear(32, 10)
    def forward(s, x):
        x = F.avg_pool1d(F.relu(s.c1(x)), 2)
        x = F.silu(s.c2(x))
        return F.log_softmax(s.fc(F.adaptive_avg_pool1d(x, 1).flatten(1)), -1)

class DiffBlock(nn.Module):
    def __init__(s):
        super().__init__()
        s.gn = nn.GroupNorm(4, 32)
        s.c = nn.Conv2d(32, 32, 3, padding=1)
        s.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(32, 8, 1), nn.Hardswish(), nn.Conv2d(8, 32, 1), nn.Hardsigmoid())
    def forward(s, x):
        y = s.c(F.silu(s.gn(x)))
        return x + y * s.se(y)

class EmbedMean(nn.Module):
    def __init__(s):
        super().__init__()
        s.e = nn.Embedding(100, 24)
        s.fc = nn.Linear(24, 3)
    def forward(s, ids):
        return torch.tanh(s.fc(s.e(ids).mean(1)))

class OddConv(nn.Module):
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv2d(3, 7, (3, 5), stride=(2, 1), padding=(1, 2), dilation=1)
        s.c2 = nn.Conv2d(7, 11, 3, dilation=2, padding=2)
        s.p = nn.AvgPool2d(3, stride=2, padding=1)
    def forward(s, x):
        return torch.clamp(s.p(s.c2(F.leaky_relu(s.c1(x), 0.1))), -1, 1) ** 2


class Vol(nn.Module):
    def __init__(s):
        super().__init__()
        s.c = nn.Conv3d(2, 4, 3, padding=1)
        s.n = nn.InstanceNorm3d(4)
    def forward(s, x):
        return F.max_pool3d(F.mish(s.n(s.c(x))), 2)

class SegHead(nn.Module):
    def __init__(s):
        super().__init__()
        s.c = nn.Conv2d(8, 5, 1)
        s.ps = nn.PixelShuffle(2)
    def forward(s, x):
        y = F.interpolate(s.c(x), scale_factor=2, mode="bilinear", align_corners=False)
        z = s.ps(torch.cat([x, x], 1)[:, :8])
        return y.argmax(1), z.amax(1), F.normalize(y, dim=1)

class Mixer(nn.Module):
    def __init__(s):
        super().__init__()
        s.w = nn.Parameter(torch.randn(12, 20, 16) * 0.1)
        s.ln = nn.LayerNorm([10, 16])
    def forward(s, x):
        y = torch.einsum("btd,hed->bthe", x, s.w)
        y = F.elu(y).sum(-1).transpose(1, 2)
        return F.softplus(s.ln(y[:, :10, :, None].expand(-1, -1, -1, 16).reshape(-1, 10, 16)))



SWEEP = {
    "unet": ("UNetTiny", ["1x3x32x32"]),
    "gpt": ("GPTBlock", ["1x40x96"]),
    "audio": ("Audio1d", ["1x1x400"]),
    "diff": ("DiffBlock", ["1x32x16x16"]),
    "embed": ("EmbedMean", ["2x7xi64"]),
    "oddconv": ("OddConv", ["1x3x33x29"]),
    "vol": ("Vol", ["1x2x6x8x8"]),
    "seg": ("SegHead", ["1x8x9x7"]),
    "mixer": ("Mixer", ["2x5x16"]),
}

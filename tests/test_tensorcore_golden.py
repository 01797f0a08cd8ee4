"""Golden safety net of the tensor-core kernel generator: the exact text `kernel_text` emits for a
broad, fixed sweep of problems and annotations, held as sha256 digests in `data/tc_golden.json`.

The sweep covers what the generator branches on: plain, ragged (M 1000, 197, 200), decode
(16x4096x4096) and f16/bf16-result matmuls, fused epilogues (GELU, a two-input chain read by row
and column, a rounding), batch matmuls with and without an epilogue, and implicit-GEMM
convolutions (stride 1 and 2, dilation, 1x1, several images, ragged pixel tiles); and for each
every value of every knob (bm, bn, wgm, stages, wait, group, ws, persist, splitk, tw) and the
combinations of the kernel's modes (producer warpgroup, persistence, split-K, one MMA in flight,
a staged store, grouped raster), plus records from before `persist`/`splitk` existed and
persistent kernels sized for several SM counts.

A case id names everything its text depends on -- `workload|knob=value,...|sm=N` -- so the test
rebuilds each case from its id alone, never from the sampler (whose changes must not move the
golden table). The annotations were drawn at generation time with `TcSketch.sample` (fixed seeds,
every one valid by `validate_tc`) and picked to cover the modes above. Six split-K cases of 8-block
clusters were added from a later draw when clusters of 8 were offered again (with the dynamic
shared buffer moved clear of the mbarriers, which changed every digest).

A refactor of the generator must leave every digest as it is. When the kernel is meant to change,
regenerate (with the same code that is to be committed) and review the diff of the table:

    .venv/bin/python tests/test_tensorcore_golden.py --regen
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import sys
import zlib
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "data" / "tc_golden.json"
#: The function name every kernel is built for (the text only carries it through).
FUNC = "tc_golden"

# IR the named workloads do not cover: written for this sweep.

#: f32 sums, two consumers (bias by column, scale by row), a clamp and rounding to bf16; ragged N.
_CHAIN = """#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
#row = affine_map<(i, j) -> (i)>
func.func @chain(%A: tensor<192x64xbf16>, %B: tensor<64x136xbf16>, %bias: tensor<136xf32>, %sc: tensor<192xf32>)
    -> tensor<192x136xbf16> {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<192x136xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<192x136xf32>) -> tensor<192x136xf32>
  %c = linalg.matmul ins(%A, %B : tensor<192x64xbf16>, tensor<64x136xbf16>) outs(%init : tensor<192x136xf32>)
      -> tensor<192x136xf32>
  %e2 = tensor.empty() : tensor<192x136xf32>
  %y = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias : tensor<192x136xf32>, tensor<136xf32>) outs(%e2 : tensor<192x136xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %t = arith.addf %a, %b : f32
    linalg.yield %t : f32
  } -> tensor<192x136xf32>
  %e3 = tensor.empty() : tensor<192x136xbf16>
  %z = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %sc : tensor<192x136xf32>, tensor<192xf32>) outs(%e3 : tensor<192x136xbf16>) {
  ^bb0(%a: f32, %s: f32, %o: bf16):
    %m = arith.mulf %a, %s : f32
    %r = arith.maximumf %m, %two : f32
    %h = arith.truncf %r : f32 to bf16
    linalg.yield %h : bf16
  } -> tensor<192x136xbf16>
  return %z : tensor<192x136xbf16>
}
"""

#: f32 sums rounded to f16 by the only consumer (an epilogue without extra inputs).
_ROUND = """#id = affine_map<(i, j) -> (i, j)>
func.func @round(%A: tensor<512x256xf16>, %B: tensor<256x384xf16>) -> tensor<512x384xf16> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<512x384xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<512x384xf32>) -> tensor<512x384xf32>
  %c = linalg.matmul ins(%A, %B : tensor<512x256xf16>, tensor<256x384xf16>) outs(%init : tensor<512x384xf32>)
      -> tensor<512x384xf32>
  %o = tensor.empty() : tensor<512x384xf16>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c : tensor<512x384xf32>) outs(%o : tensor<512x384xf16>) {
  ^bb0(%a: f32, %out: f16):
    %h = arith.truncf %a : f32 to f16
    linalg.yield %h : f16
  } -> tensor<512x384xf16>
  return %y : tensor<512x384xf16>
}
"""

#: A batch matmul scaled per batch and rounded to f16; ragged M and N.
_BATCH_SCALED = """#id = affine_map<(b, i, j) -> (b, i, j)>
#s = affine_map<(b, i, j) -> (b)>
func.func @bscaled(%A: tensor<6x197x128xf16>, %B: tensor<6x128x200xf16>, %s: tensor<6xf32>) -> tensor<6x197x200xf16> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6x197x200xf32>
  %eh = tensor.empty() : tensor<6x197x200xf16>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<6x197x200xf32>) -> tensor<6x197x200xf32>
  %C = linalg.batch_matmul ins(%A, %B : tensor<6x197x128xf16>, tensor<6x128x200xf16>)
      outs(%init : tensor<6x197x200xf32>) -> tensor<6x197x200xf32>
  %y = linalg.generic {indexing_maps = [#id, #s, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%C, %s : tensor<6x197x200xf32>, tensor<6xf32>) outs(%eh : tensor<6x197x200xf16>) {
  ^bb0(%a: f32, %sc: f32, %o: f16):
    %m = arith.mulf %a, %sc : f32
    %h = arith.truncf %m : f32 to f16
    linalg.yield %h : f16
  } -> tensor<6x197x200xf16>
  return %y : tensor<6x197x200xf16>
}
"""

#: A dilated (2), padded (2) bf16 convolution + bias + ReLU over a batch of 2 ragged 20x20 images
#: (test_tensorcore.py's, imported: the tests folder is on sys.path, as test_gpu imports test_sketches).
from test_tensorcore import _CONV_BIAS_RELU  # noqa: E402

#: A convolution returning its f32 sums (no epilogue: staged only because its tile is a patch).
_CONV_F32 = """func.func @conv_f32(%X: tensor<1x16x16x64xf16>, %W: tensor<3x3x64x64xf16>) -> tensor<1x14x14x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x14x14x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x14x14x64xf32>) -> tensor<1x14x14x64xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%X, %W : tensor<1x16x16x64xf16>, tensor<3x3x64x64xf16>) outs(%init : tensor<1x14x14x64xf32>)
      -> tensor<1x14x14x64xf32>
  return %c : tensor<1x14x14x64xf32>
}
"""


def _custom() -> dict[str, str]:
    from ansor.frontend import workloads

    return {
        "chain-bf16": _CHAIN,
        "round-f16": _ROUND,
        "bscaled-f16": _BATCH_SCALED,
        "conv-bias-relu-bf16": _CONV_BIAS_RELU,
        "conv-f32": _CONV_F32,
        # the matmul itself in half precision: its sums rounded to f16/bf16, no epilogue function
        "matmul-half-acc-256x256x512-f16": workloads.matmul(256, 256, 512, "f16"),
        "matmul-half-acc-200x136x128-bf16": workloads.matmul(200, 136, 128, "bf16"),
    }


#: The problems of the sweep: named workloads (`ansor.frontend.workloads`) and the IR above.
WORKLOADS = (
    # matmuls: f16/bf16, ragged M and N, decode, large (persistent), one tile
    "matmul-256x512x1024-f16", "matmul-256x512x1024-bf16", "matmul-200x136x256-f16", "matmul-1000x512x512-f16",
    "matmul-197x768x768-bf16", "matmul-16x4096x4096-f16", "matmul-2048x2048x512-f16", "matmul-128x128x128-f16",
    "matmul-half-acc-256x256x512-f16", "matmul-half-acc-200x136x128-bf16",
    # fused epilogues
    "mmgelu-256x512x1024-f16", "mmgelu-256x512x1024-bf16", "mmgelu-384x256x512-f16", "mmgelu-1000x768x256-bf16",
    "chain-bf16", "round-f16",
    # batch matmuls
    "gmm-4x256x512x256-f16", "gmm-12x197x200x64-f16", "gmm-4x256x512x256-bf16", "bscaled-f16",
    # implicit-GEMM convolutions: stride 1 and 2, 1x1, several images, dilation, ragged patches
    "c2d-1x56x56x64x64x3x1x1-f16", "c2d-2x28x28x128x128x3x1x1-f16", "c2d-1x14x14x256x256x1x1x0-bf16",
    "c2d-1x56x56x64x128x3x2x1-f16", "c2d-2x56x56x64x128x1x2x0-f16", "c2d-1x28x28x128x256x3x2x1-bf16",
    "c2d-4x7x7x512x512x3x1x1-f16", "conv-bias-relu-bf16", "conv-f32",
)


@functools.cache
def _problem(name: str):
    import ansor
    from ansor.frontend import workloads
    from ansor.targets.cuda.tensorcore import tc_problem_for

    ir = _custom().get(name) or workloads.get(name)
    problem, why = tc_problem_for(ansor.create_task(ir, name=name, target="cuda"))
    assert problem is not None, f"{name}: no tensor-core problem ({why})"
    return problem


def case_id(name: str, values: dict[str, int], sm: int) -> str:
    return f"{name}|{','.join(f'{k}={v}' for k, v in values.items())}|sm={sm}"


def parse_case(cid: str) -> tuple[str, dict[str, int], int]:
    name, vals, sm = cid.split("|")
    values = {k: int(x) for k, x in (kv.split("=") for kv in vals.split(","))}
    return name, values, int(sm.removeprefix("sm="))


def digest(cid: str) -> str:
    from ansor.targets.cuda.tensorcore import kernel_text

    name, values, sm = parse_case(cid)
    return hashlib.sha256(kernel_text(_problem(name), values, FUNC, sm_count=sm).encode()).hexdigest()


# ----------------------------------------------------------------------------------------------
# The sweep (run once, by --regen: the test replays the stored case ids)


def _modes(p, v: dict[str, int]) -> set[tuple]:
    """What of the kernel an annotation exercises, as features a sweep should cover per problem."""
    from ansor.targets.cuda.tensorcore import BK, _ceil, complete

    v = complete(v)
    bm, bn, splitk = v["bm"], v["bn"], v["splitk"]
    staged = p.staged(bm, bn) or splitk > 1
    gy = _ceil(p.m, bm)
    if p.conv:
        th, tw = p.conv.tile(bm, v["tw"])
        gy = p.conv.n * _ceil(p.conv.oh, th) * _ceil(p.conv.ow, tw)
    modes = {("mode", v["ws"], v["persist"], v["wait"], splitk > 1, staged),
             ("raster", v["group"] > 1 and gy > 1, v["persist"]),
             ("wgm", v["wgm"], v["ws"]), ("shallow", v["stages"] >= p.kt // splitk)}
    modes |= {(k, x) for k, x in v.items()}
    if staged:
        modes.add(("ragged", bool(p.m % bm), bool(p.n % bn), splitk > 1))
    if p.conv:
        modes.add(("patch", p.conv.oh % th != 0, p.conv.ow % tw != 0, _ceil(p.conv.c, BK) > 1))
    return modes


def generate() -> dict[str, str]:
    """The sweep with the current generator's digests: per problem, a few uniform draws of
    `TcSketch.sample` and then, greedily, draws that add a mode (`_modes`) not yet covered."""
    from ansor.space.schedule import SamplingError
    from ansor.targets.cuda.tensorcore import LATER_KNOBS, TcSketch

    cases: list[str] = []
    for name in WORKLOADS:
        p = _problem(name)
        sk = TcSketch("tc0", p)
        rng = random.Random(zlib.crc32(name.encode()))
        draws: list[dict[str, int]] = []
        for _ in range(400):
            try:
                values = {k.removeprefix("tc."): int(x) for k, x in sk.sample(rng).values().items()}
            except SamplingError:
                break
            if values not in draws:
                draws.append(values)
        picked = draws[:4]
        seen = set().union(*(_modes(p, v) for v in picked))
        for values in draws[4:]:
            new = _modes(p, values) - seen
            if new:
                picked.append(values)
                seen |= new
        for values in picked:
            sms = [132]
            if values["persist"]:  # a persistent grid of min(tiles, SMs) blocks
                sms.append(rng.choice((3, 16, 114)))
            for sm in sms:
                cases.append(case_id(name, values, sm))
        # records from before `persist` and `splitk` existed (kernel_text completes them)
        old = [v for v in picked if all(v[k] == x for k, x in LATER_KNOBS.items())][:1]
        for values in old:
            cases.append(case_id(name, {k: x for k, x in values.items() if k not in LATER_KNOBS}, 132))
    return {cid: digest(cid) for cid in cases}


# ----------------------------------------------------------------------------------------------
# The tests


@pytest.fixture(scope="module")
def golden() -> dict[str, str]:
    return json.loads(GOLDEN.read_text())


def test_golden_sweep_is_broad(golden: dict[str, str]) -> None:
    from ansor.targets.cuda.tensorcore import OPTIONS, validate_tc

    assert 200 <= len(golden) <= 410
    cases = [parse_case(cid) for cid in golden]
    assert {name for name, _, _ in cases} == set(WORKLOADS)
    for name, values, _ in cases:
        assert validate_tc(_problem(name), values) is None, (name, values)
    for knob, options in OPTIONS.items():
        assert {v.get(knob) for _, v, _ in cases} >= set(options), knob
    assert len({v["tw"] for _, v, _ in cases if "tw" in v}) >= 5
    assert any(v.get("persist") and sm != 132 for _, v, sm in cases)
    assert any("persist" not in v and "splitk" not in v for _, v, _ in cases)


def test_kernel_text_matches_the_golden_digests(golden: dict[str, str]) -> None:
    changed = [cid for cid, want in golden.items() if digest(cid) != want]
    assert not changed, (f"kernel_text changed for {len(changed)} of {len(golden)} cases, e.g.:\n"
                         + "\n".join(changed[:10]))


if __name__ == "__main__":
    if sys.argv[1:] != ["--regen"]:
        sys.exit(f"usage: {sys.argv[0]} --regen   (rewrites {GOLDEN})")
    table = generate()
    GOLDEN.write_text(json.dumps(table, indent=1) + "\n")
    print(f"{len(table)} cases -> {GOLDEN}")

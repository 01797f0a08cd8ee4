"""The CPU search space follows the host's vector width (AVX2: 256 bits, AVX-512: 512 bits).

The limits are fixed when `ansor.sketch` is imported, so each width is checked in a fresh
interpreter with `ANSOR_VECTOR_BITS` set (the suite itself pins 256 in `conftest.py`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = r"""
import json, random
import ansor
from ansor.frontend import workloads
from ansor.targets.cpu.annotation import VECTOR_LANES
from ansor.space.schedule import sample, validate
from ansor.targets import generate_sketches
from ansor.targets.cpu.params import MAX_REGISTER_TILE, MAX_VECTOR, VECTOR_BITS

task = ansor.create_task(workloads.matmul(64, 96, 64))
sk = generate_sketches(task)[0]
lanes = next(s for s in sk.splits if s.vector)
good = sample(sk, random.Random(0)).values()
wide = dict(good, **{lanes.tile_knobs[0]: 96, lanes.tile_knobs[1]: 96, lanes.tile_knobs[2]: 32})
rows = next(s for s in sk.splits if not s.vector and s.dim == 0)
wide = dict(wide, **{rows.tile_knobs[0]: 64, rows.tile_knobs[1]: 8, rows.tile_knobs[2]: 8})
print(json.dumps({"bits": VECTOR_BITS, "max_vector": MAX_VECTOR, "lanes": VECTOR_LANES,
                  "register_tile": MAX_REGISTER_TILE, "wide_32x8": validate(sk, wide)}))
"""


def _probe(bits: str | None) -> tuple[dict, str]:
    env = dict(os.environ)
    env.pop("ANSOR_VECTOR_BITS", None)
    if bits is not None:
        env["ANSOR_VECTOR_BITS"] = bits
    p = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


def test_avx2_limits() -> None:
    out, _ = _probe("256")
    assert out["bits"] == 256 and out["max_vector"] == 16 and out["lanes"] == 8 and out["register_tile"] == 256
    assert "innermost tile 32 too large" in out["wide_32x8"]  # 32 lanes: wider than two ymm registers


def test_avx512_limits_allow_two_zmm_rows() -> None:
    out, _ = _probe("512")
    assert out["bits"] == 512 and out["max_vector"] == 32 and out["lanes"] == 16 and out["register_tile"] == 512
    assert out["wide_32x8"] is None  # an 8 x 32 register tile: 16 zmm accumulators


def _host_bits() -> int:
    with open("/proc/cpuinfo") as f:
        flags = next((line.split() for line in f if line.startswith("flags")), [])
    return 512 if "avx512f" in flags else 256


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"), reason="needs Linux /proc/cpuinfo")
def test_default_follows_the_host_and_bad_values_warn() -> None:
    out, _ = _probe(None)
    assert out["bits"] == _host_bits()
    out, err = _probe("384")
    assert out["bits"] == _host_bits()
    assert "ANSOR_VECTOR_BITS='384' ignored" in err

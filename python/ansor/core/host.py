"""Facts about the host CPU that several stages need (the vector width the CPU search targets)."""

from __future__ import annotations

import os
import warnings

def host_vector_bits() -> int:
    """Bits of the host CPU's widest vector register the search targets: `ANSOR_VECTOR_BITS`
    (256 or 512) if set, else 512 where the CPU has AVX-512F (Linux `/proc/cpuinfo`), else 256.

    The sketches' vector and register-tile limits scale with it: on AVX-512 a register tile row
    of two 16-lane zmm registers and 32 of them in all. On a Zen 5 host, 128 trials, the AVX2
    limits gave matmul-1024 258 GFLOP/s and ResNet-18's 7x7x512 convolution 261; AVX-512's gave
    482 and 363, both with 32-lane rows."""
    env = os.environ.get("ANSOR_VECTOR_BITS")
    if env in ("256", "512"):
        return int(env)
    if env:
        warnings.warn(f"ANSOR_VECTOR_BITS={env!r} ignored (expected 256 or 512); using the host's vector width",
                      stacklevel=2)
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return 512 if "avx512f" in line.split() else 256
    except OSError:
        pass
    return 256

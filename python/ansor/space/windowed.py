"""Windowed ops (convolutions, pooling) as MLIR 22's vectorizer sees them; shared by every target's rules."""

from __future__ import annotations

#: Windowed named ops MLIR 22's vectorizer handles only in their 1-D form (a 2-D or 3-D one stays
#: scalar, ~1 GFLOP/s): op -> (its output-row loops, the transform op turning a register tile
#: whose row loops and matching window loops have extent 1 into the 1-D op). The row loops'
#: innermost tiles are limited to 1; every window loop steps by 1 in R1 anyway.
#: `transform.ansor.decompose_conv3d` is ours (dialects/AnsorTransformOps.td). The GPU rules use this
#: table too (`targets/cuda/rules.py`, GpuStage.decompose_rows).
DECOMPOSE = {
    **{name: ((1,), "transform.structured.decompose") for name in (
        "linalg.conv_2d_nhwc_hwcf", "linalg.conv_2d_nhwc_fhwc", "linalg.depthwise_conv_2d_nhwc_hwc",
        "linalg.pooling_nhwc_max", "linalg.pooling_nhwc_sum", "linalg.pooling_nhwc_min")},
    # (not linalg.depthwise_conv_2d_nchw_chw: MLIR 22's decomposition patterns have no 1-D form
    # for it, so `transform.structured.decompose` fails on it and the whole script with it; it
    # stays a 2-D window op: MobileNet-V2 channels-first on the GPU, tests/test_cuda_network.py)
    **{name: ((2,), "transform.structured.decompose") for name in (
        "linalg.conv_2d_nchw_fchw", "linalg.pooling_nchw_max", "linalg.pooling_nchw_sum")},
    "linalg.conv_3d_ndhwc_dhwcf": ((1, 2), "transform.ansor.decompose_conv3d"),
}

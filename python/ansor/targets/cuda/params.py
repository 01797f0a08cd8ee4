"""CUDA target parameters: device limits and knob options the GPU rules and search use."""

#: Default architecture when the device cannot be asked (H100/H200 are sm_90).
DEFAULT_ARCH = "sm_90"

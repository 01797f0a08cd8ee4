"""CUDA target parameters: device limits and knob options the GPU rules and search use."""

#: Default architecture when the device cannot be asked (H100/H200 are sm_90).
DEFAULT_ARCH = "sm_90"


#: Ansor's `auto_unroll_max_step` choices on CUDA.
GPU_UNROLL_OPTIONS: tuple[int, ...] = (0, 16, 64, 512, 1024)


MAX_THREADS_PER_BLOCK = 1024
#: A block's largest extent along x, y and z (CUDA: 1024, 1024, 64).
MAX_BLOCK_DIMS = (1024, 1024, 64)


MIN_THREADS_PER_BLOCK = 32


#: Static shared memory per block without opting in to more (bytes).
MAX_SHARED_BYTES = 48 * 1024


#: Accumulators (output elements) per thread.
MAX_THREAD_TILE = 64


#: Ansor's `max_vthread_extent` (product over the mapped loops here).
MAX_VTHREAD = 8


#: Innermost (register) factor of a space loop, Ansor's `max_innermost_split_factor`.
MAX_INNERMOST = 64


#: Space loops mapped to block/thread ids (x, y, z).
MAX_MAPPED = 3


#: gpu.block / gpu.thread mapping axes, outermost mapped loop first.
AXES = "xyz"


#: Default threads per block of the cross-thread reduction sketch (the untuned program).
DEFAULT_THREADS = 256

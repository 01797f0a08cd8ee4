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


#: Output elements per thread of a stage without reduction loops (the thread-binding rule): no
#: accumulator lives across a loop there, so the register budget below does not apply.
MAX_THREAD_TILE = 64


#: 32-bit registers one thread may use (ptxas's limit on sm_50 .. sm_90).
MAX_REGISTERS_PER_THREAD = 255
#: 32-bit registers of one block: the register file of an SM (64 K on sm_70 .. sm_90); the
#: kernel's `.maxntid` makes ptxas fit a thread into this / threads, spilling past it.
MAX_REGISTERS_PER_BLOCK = 65536
#: Registers of a multi-level tiled thread beyond its accumulators, operands and staged copies
#: (addresses, indices, loop counters, barrier state): calibrated against ptxas on sampled
#: matmul candidates (see `rules.thread_registers`).
OTHER_REGISTERS = 40


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

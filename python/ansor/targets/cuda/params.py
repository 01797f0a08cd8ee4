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
#: Multiply-adds one thread may spend recomputing the broadcast producer its tile reads (rule 3
#: with a broadcast producer, `rules._broadcast_consumer_stage`: the anchor's elements under the
#: thread's tile x the anchor's reduction steps, virtual threads included): a squeeze-excitation
#: gate recomputes 1-4 channels of a 4-48 deep 1x1 convolution per thread.
MAX_RECOMPUTE = 4096


#: 32-bit registers one thread may use (ptxas's limit on sm_50 .. sm_90).
MAX_REGISTERS_PER_THREAD = 255
#: 32-bit registers of one block: the register file of an SM (64 K on sm_70 .. sm_90); the
#: kernel's `.maxntid` makes ptxas fit a thread into this / threads, spilling past it.
MAX_REGISTERS_PER_BLOCK = 65536
#: Registers of a multi-level tiled thread beyond its accumulators, operands and staged copies
#: (addresses, indices, loop counters, barrier state): calibrated against ptxas on sampled
#: matmul candidates (see `rules.thread_registers`).
OTHER_REGISTERS = 40


#: Reduction nests one thread of a multi-level tiled stage may keep as loops (`rules.loop_nests`).
#: The schedule unrolls the thread's `S1` and `S3` loops, which sit outside the reduction loops
#: (`R0 S1 S2 S3 R1 R2 S4`): one copy of the `R1 R2` nest per vector of accumulators. When the
#: copies cannot all be unrolled (their work per `R0` step over the unroll knob, or over
#: `config.CUDA_MAX_UNROLLED_WORK` in all), they stay sibling loop nests of one kernel, and LLVM's
#: loop passes (ScalarEvolution, LCSSA checks) are superlinear in them: on this repository's
#: 2-core VM, 56-128 nests took 5-32 s of CPU in the NVPTX backend (the slowest builds of
#: c2d-1x56x56x64x64x3x1x1 and c2d-1x56x56x64x128x3x2x1), 32 nests 3-6 s, 16 or fewer under
#: 3 s (results/build-time/). Each such nest also reloads its operands from shared memory
#: (no register reuse across accumulators), so they are slow kernels too.
MAX_LOOP_NESTS = 32


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

//===- GpuLoweringBPasses.td - GPU lowering fix-ups (helper gpu-b) --*- tablegen -*-===//
//
// Structural rewrites the CUDA lowering runs between the transform script and the NVVM
// lowering, ported from python/ansor/targets/cuda/rewrites.py, behaviour unchanged.
//
//===----------------------------------------------------------------------------===//
#ifndef ANSOR_GPU_LOWERING_B_PASSES_TD
#define ANSOR_GPU_LOWERING_B_PASSES_TD

include "mlir/Pass/PassBase.td"

def GpuWorkgroupAttributions : Pass<"ansor-gpu-workgroup-attributions"> {
  let summary = "Shared-memory memref.alloc inside gpu.launch -> workgroup attributions";
  let description = [{
    `bufferize_to_allocation {memory_space = #gpu.address_space<workgroup>}` places the shared
    tiles' allocations where the copies are, inside the `gpu.launch`; the NVVM lowering only gives
    shared memory to the launch's workgroup attributions (they become `addrspace(3)` globals of
    the kernel). Every `memref.alloc` inside a launch whose type is in shared memory (address
    space 3 or `#gpu.address_space<workgroup>`) becomes a new workgroup attribution (appended
    after the existing ones) of the same shape and element type in memory space `3 : i64`; its
    `memref.dealloc`s are erased and, when the memory space was spelled differently, a
    `memref.memory_space_cast` back to the old type feeds the old users.

    It fails (one-line error) on a launch with private attributions, on a shared allocation
    without the `ansor.smem` marker (a per-thread buffer bufferization put in shared memory
    because its source is there: all threads of a block would share it), and on a dynamic shape.

    A `linalg.copy` or `memref.copy` into shared memory directly in the launch's body (run by
    every thread over the whole buffer: bufferization's copy-in of a block's accumulator tile
    whose old contents it could not prove undefined) gets a `gpu.barrier` after it, unless one
    follows already: the threads' own writes of their parts raced with it.

    Before:
    ```mlir
    gpu.launch ... {
      %a = memref.alloc() {ansor.smem} : memref<16x16xf32, #gpu.address_space<workgroup>>
    ```
    After:
    ```mlir
    gpu.launch ... workgroup(%wg : memref<16x16xf32, 3>) {
      %a = memref.memory_space_cast %wg : memref<16x16xf32, 3> to memref<16x16xf32, #gpu.address_space<workgroup>>
    ```
  }];
  let dependentDialects = ["gpu::GPUDialect", "memref::MemRefDialect"];
}

def GpuSinkConstants : Pass<"ansor-gpu-sink-constants"> {
  let summary = "Clone the constants a gpu.launch uses from above into its body";
  let description = [{
    `gpu-kernel-outlining` (MLIR 22) leaves constants defined above a `gpu.launch` outside: they
    would become kernel arguments, so that inside the kernel every loop bound, step and tile
    offset is a runtime value (no unrolling, no alignment or address folding by LLVM). For every
    op nested in a launch (post-order), every operand defined by an `arith.constant` or
    `ub.poison` outside that launch is replaced by a clone placed at the start of the launch
    body; one clone per (op name, `value` attribute, type) and launch. A `memref.get_global` of
    a `constant` global (a task's weight tensor) is cloned the same way (keyed by the global's
    name): `gpu-kernel-outlining` then copies the global into the GPU module, so the kernel
    reads a device global, not the host global's address passed as an argument.

    Before:
    ```mlir
    %c4 = arith.constant 4 : index
    gpu.launch ... { scf.for %i = %c0 to %c4 step %c1 { ... } }
    ```
    After:
    ```mlir
    gpu.launch ... { %c4_0 = arith.constant 4 : index  scf.for %i = %c0 to %c4_0 ... }
    ```
  }];
  let dependentDialects = ["gpu::GPUDialect"];
}

def GpuMarkNoalias : Pass<"ansor-gpu-mark-noalias"> {
  let summary = "llvm.noalias on the pointer arguments of the kernels (LLVM dialect)";
  let description = [{
    Every memref a kernel receives is a separate device allocation (host buffers are rejected by
    `ansor-gpu-check-host-allocs`) and only its aligned pointer is dereferenced, so no two
    arguments' accesses overlap. On every `llvm.func` with `gpu.kernel` (with a body) inside a
    `gpu.module`, every `!llvm.ptr` argument gets `llvm.noalias`: NVPTX may then read read-only
    buffers through the non-coherent cache (`ld.global.nc`) and move loads across stores.

    Off by default in the CUDA lowering (`ANSOR_CUDA_NOALIAS=1`): on an H100 it made the best
    matmul-4096 schedules 9-18% slower.
  }];
  let dependentDialects = ["LLVM::LLVMDialect"];
}

def GpuPromoteSingleIterationLoops : Pass<"ansor-gpu-promote-single-iteration-loops"> {
  let summary = "Inline the body of every scf.for that runs exactly once (what canonicalize did, alone)";
  let description = [{
    `convert-vector-to-scf{full-unroll=true}` (MLIR 22) lowers each transfer of a strided unit
    vector (`vector<1x1x1xf32>`: a register-tile element of an NHWC convolution) into
    single-iteration `scf.for` loops; `convert-scf-to-cf` is superlinear in them. The CUDA
    lowering used to run `canonicalize` there, but MLIR 22's canonicalizer also runs its
    RegionBranchOpInterface patterns (`RemoveDuplicateSuccessorInputUses`,
    `MakeRegionBranchOpSuccessorInputsDead`, ...) on every loop, and on a kernel whose `R0` loop
    carries 128 accumulators around ~650 nested loops they took 5.7-7.6 s of CPU (65% of the
    profile in `RemoveDuplicateSuccessorInputUses`) for 6.7K ops: most of some convolution
    candidates' build. This pass does only the folding that was wanted: every `scf.for` with a
    constant trip count of 1 (innermost first) is replaced by its body
    (`scf::ForOp::promoteIfSingleIteration`); a loop of trip count 0 is left to later passes.

    Before:
    ```mlir
    %r = scf.for %i = %c0 to %c1 step %c1 iter_args(%a = %v) -> (vector<1xf32>) {
      %x = memref.load %m[%i] : memref<4xf32>
      %y = vector.insert %x, %a [0] : f32 into vector<1xf32>
      scf.yield %y : vector<1xf32>
    }
    ```
    After:
    ```mlir
    %x = memref.load %m[%c0] : memref<4xf32>
    %r = vector.insert %x, %v [0] : f32 into vector<1xf32>
    ```
  }];
  let dependentDialects = ["scf::SCFDialect"];
}

#endif // ANSOR_GPU_LOWERING_B_PASSES_TD

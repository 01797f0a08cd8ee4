//===- GpuLoweringPasses.td - GPU lowering fix-ups ------------------*- tablegen -*-===//
//
// The structural fix-ups of the CUDA lowering (python/ansor/targets/cuda/lowering.py) around the
// transform script, outlining and the NVVM lowering. Ported from the Python rewrites, behaviour
// unchanged (tests/test_gpu_replay.py compares the PTX of both pipelines).
//
//===----------------------------------------------------------------------------===//
#ifndef ANSOR_GPU_LOWERING_PASSES_TD
#define ANSOR_GPU_LOWERING_PASSES_TD

include "mlir/Pass/PassBase.td"

def GpuOwnFillDestinations : Pass<"ansor-gpu-own-fill-destinations"> {
  let summary = "Give every linalg.fill its own tensor.empty";
  let description = [{
    Runs on the tensor payload before the transform script. CSE merges the `tensor.empty` a
    `linalg.fill` initialises with its consumer's destination; once the script fuses the fill
    into the consumer's tiles, the shared-memory accumulator would then start as a (useless) copy
    of the output tile. For every `linalg.fill` (post-order) whose destination is a `tensor.empty`
    with two or more uses at that moment, a clone of the `tensor.empty` is made right before the
    fill and becomes its destination.

    Before: `%e = tensor.empty()`, `linalg.fill ... outs(%e)`, `linalg.matmul ... outs(%e)`.
    After: `%e2 = tensor.empty()` before the fill, `linalg.fill ... outs(%e2)`.
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect", "::mlir::linalg::LinalgDialect"];
}

def GpuCopiesToLinalg : Pass<"ansor-gpu-copies-to-linalg"> {
  let summary = "memref.copy inside gpu.launch -> linalg.copy";
  let description = [{
    The NVVM lowering turns a strided `memref.copy` into a call to the host runtime's
    `memrefCopy`, which does not exist on the device; bufferization leaves such copies around
    rank-reducing slices. Every `memref.copy` nested in a `gpu.launch` becomes a `linalg.copy` of
    the same operands (lowered to loops later by `convert-linalg-to-loops`).
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def GpuAlignWorkgroupBuffers : Pass<"ansor-gpu-align-workgroup-buffers"> {
  let summary = "llvm.align = 16 on outlined kernels' shared tiles and global memref arguments";
  let description = [{
    On every `gpu.func` (after `gpu-kernel-outlining`): each workgroup attribution gets
    `{llvm.align = 16 : i64}` (`workgroup_attrib_attrs`), and each memref argument outside the
    workgroup address space gets `llvm.align = 16` added to its argument attributes (every
    argument gets an attribute dictionary). The kernels' global memrefs all come from device
    allocations (256-byte aligned; `ansor-gpu-check-host-allocs` rejects anything else) and a
    view's aligned pointer is its buffer's, so this is true; with it LLVM infers each access's
    alignment from the index arithmetic and 128-bit accesses stay `ld.global.v4`.
  }];
}

def GpuCheckHostAllocs : Pass<"ansor-gpu-check-host-allocs"> {
  let summary = "Reject host buffers and host compute around GPU kernels";
  let description = [{
    In every top-level `func.func` that contains a `gpu.launch`: a `memref.alloc` outside the
    workgroup address space is an error ("intermediate buffer TYPE between GPU kernels (host
    allocation): not supported on the cuda target"), and so is a `linalg.*`, `vector.*`, `scf.*`
    op or `memref.copy` directly in the function body ("'NAME' outside any gpu.launch (not mapped
    to the GPU)"): host code would read device pointers. The first offence (allocations in
    post-order first) fails the pass with that one-line message.
  }];
}

#endif // ANSOR_GPU_LOWERING_PASSES_TD

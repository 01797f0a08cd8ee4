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

def GpuDeviceIntermediates : Pass<"ansor-gpu-device-intermediates"> {
  let summary = "Buffers only GPU kernels use: the caller's device workspace";
  let description = [{
    A task of several kernels (`targets/cuda/multi_kernel.py`: one `gpu.launch` per fusion
    group) passes its intermediates from one launch to the next through buffers that
    bufferization allocates on the host (`memref.alloc`), which the kernels cannot read. In
    every top-level `func.func` with a `gpu.launch`, a static `memref.alloc` in the function's
    body outside the workgroup address space whose every use -- directly or through view ops
    (`memref.subview`, `expand_shape`, `collapse_shape`, `cast`) -- is inside a `gpu.launch`
    or is a `memref.dealloc` becomes a trailing argument of a public function: a workspace the
    caller allocates in device memory once and passes to every call (`CudaKernel` in
    `targets/cuda/runtime.py`), so no call allocates. Its deallocs are erased, and the function
    gets `ansor.workspace = N : i64`, the number of such trailing arguments (in allocation
    order):

    ```mlir
    // before
    func.func @f(%a: memref<33x17xf32>, %out: memref<33xf32>) {
      %buf = memref.alloc() : memref<33x65xf32>
      gpu.launch ... { ... memref.store %v, %buf[...] ... }
      gpu.launch ... { ... memref.load %buf[...] ... }
      memref.dealloc %buf : memref<33x65xf32>
      return
    }
    // after
    func.func @f(%a: memref<33x17xf32>, %out: memref<33xf32>, %buf: memref<33x65xf32>)
        attributes {ansor.workspace = 1 : i64} {
      gpu.launch ... { ... }
      gpu.launch ... { ... }
      return
    }
    ```

    A private function (its callers cannot pass a workspace), or any function with
    `workspace=false`, allocates the buffer on the device in every call instead (`gpu-to-llvm`
    lowers these to the runtime's `mgpuMemAlloc` / `mgpuMemFree` on a stream):

    ```mlir
    %t0 = gpu.wait async
    %buf, %t1 = gpu.alloc async [%t0] () : memref<33x65xf32>
    gpu.wait [%t1]
    gpu.launch ... { ... }
    gpu.launch ... { ... }
    %t2 = gpu.wait async
    %t3 = gpu.dealloc async [%t2] %buf : memref<33x65xf32>
    gpu.wait [%t3]
    return
    ```

    Other allocations are left for `ansor-gpu-check-host-allocs` to refuse.
  }];
  let options = [
    Option<"workspace", "workspace", "bool", /*default=*/"true",
           "Intermediates of a public function become trailing arguments (a workspace the caller "
           "allocates once) instead of a device allocation and free in every call">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def GpuReshapedResultsInPlace : Pass<"ansor-gpu-reshaped-results-in-place"> {
  let summary = "Write a result that is returned reshaped straight into its out-param";
  let description = [{
    A task whose result is a reshape of what its last op computes (a per-row sum returned as
    `1x128x1`, an op that preprocessing expanded to `1x128x1x768` returned as `1x128x768`) leaves
    after bufferization and `buffer-results-to-out-params`:
    ```mlir
    %alloc = memref.alloc() : memref<128xf32>          // written by the GPU kernel
    %e = memref.expand_shape %alloc [[0, 1, 2]] output_shape [1, 128, 1] : ... into memref<1x128x1xf32>
    memref.copy %e, %out : memref<1x128x1xf32> to memref<1x128x1xf32>
    ```
    a host buffer between the kernel and the out-param, which the cuda target cannot have
    (`ansor-gpu-check-host-allocs`). In every `func.func`, where a `memref.copy` copies an
    `expand_shape` or `collapse_shape` of a static, identity-layout `memref.alloc` whole into a
    function argument of the same type that nothing else uses, the copy and the alloc's deallocs
    are erased, and
    - if the reshape is the alloc's only user, the reshape's users write the argument itself;
    - else, if the copy is the reshape's only user, the alloc becomes the inverse reshape of the
      argument (`collapse_shape` with the same reassociation for an expand, `expand_shape` to the
      alloc's shape for a collapse), placed at the function's start:
    ```mlir
    %alloc = memref.expand_shape %out [[0], [1, 2], [3]] output_shape [1, 128, 1, 768]
    ```
    An argument read or written elsewhere is left alone.
  }];
}

def GpuRowValuesIntoLaunch : Pass<"ansor-gpu-row-values-into-launch"> {
  let summary = "Move a cross-thread reduction's per-row values into its launch";
  let description = [{
    The cross-thread reduction sketch (`targets/cuda/reduction.py`) gives each row a block. Every
    thread of the block computes the row's values itself (its max, its sum: it merges the partial
    results on its own), and bufferization allocates them inside the block's `scf.forall`, so
    they become per-thread stack arrays (`ansor-gpu-private-allocs-to-stack`). A task of a single
    row (LayerNorm or RMSNorm of one token, softmax of one row) has a one-iteration block forall,
    and the row values' `memref.alloc`s land outside it. After the mapping they are host
    buffers used inside the kernel, which `ansor-gpu-check-host-allocs` refuses.

    In every `gpu.launch` the sketch marked `ansor.row_values`, whose grid is one block, this pass
    takes each `memref.alloc` of a static shape in the default memory space, defined outside any
    launch, with every user other than a `memref.dealloc` inside this launch. It moves the alloc
    to the start of the launch body, as the multi-row program has it, and erases its deallocs.
  }];
}

#endif // ANSOR_GPU_LOWERING_PASSES_TD

//===- GpuRuntime.cpp - run-time support for ansor's CUDA kernels ---------------------------===//
//
// A cache in front of the MLIR CUDA runtime's `mgpuTensorMapEncodeTiledMemref`.
//
// The tensor-core GEMMs (python/ansor/targets/cuda/tensorcore.py) build their TMA descriptors on
// the host with `nvgpu.tma.create.descriptor`. Upstream lowers that op to a call of
// `mgpuTensorMapEncodeTiledMemref`, which encodes the descriptor and then allocates device memory
// for it and copies it there -- on every call of the function, never freed. Measured on an H200:
// about 60 µs per call on a ~260 µs kernel, and device memory that grows with every call.
// The lowering (targets/cuda/lowering.py) renames those calls to the function below, which returns
// the device copy made the first time for the same arguments (CUDA context, element type, the
// memref's pointers, offset, sizes and strides, box, swizzle, interleave, L2 promotion, OOB fill):
// the descriptor depends on nothing else, so a cached one is always the one upstream would build.
// Entries live as long as the process (one per distinct tensor, shape and tile).
//
//===----------------------------------------------------------------------------------------===//

#include <cstdint>
#include <cstdio>
#include <dlfcn.h>
#include <map>
#include <mutex>
#include <vector>

namespace {

using EncodeFn = void *(*)(int64_t, void *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t *);
using CurrentContextFn = int (*)(void **);

struct TensorMapCache {
  std::mutex mutex;
  std::map<std::vector<int64_t>, void *> entries;
};

TensorMapCache &cache() {
  static TensorMapCache *c = new TensorMapCache; // never destroyed: kernels may run at exit
  return *c;
}

} // namespace

extern "C" __attribute__((visibility("default"))) void *
ansorTensorMapEncodeTiledMemrefCached(int64_t rank, void *rankedDescriptor, int64_t elementType,
                                      int64_t interleave, int64_t swizzle, int64_t l2Promotion,
                                      int64_t oobFill, int64_t *boxDims) {
  // Resolved lazily: libmlir_cuda_runtime.so (and libcuda.so) are loaded by then.
  static EncodeFn encode =
      reinterpret_cast<EncodeFn>(dlsym(RTLD_DEFAULT, "mgpuTensorMapEncodeTiledMemref"));
  static CurrentContextFn currentContext =
      reinterpret_cast<CurrentContextFn>(dlsym(RTLD_DEFAULT, "cuCtxGetCurrent"));
  if (!encode) {
    fprintf(stderr, "ansor: mgpuTensorMapEncodeTiledMemref not found (is libmlir_cuda_runtime.so "
                    "loaded?)\n");
    return nullptr;
  }
  void *context = nullptr;
  if (currentContext)
    currentContext(&context);
  // StridedMemRefType layout: allocated, aligned, offset, sizes[rank], strides[rank].
  const int64_t *desc = static_cast<const int64_t *>(rankedDescriptor);
  std::vector<int64_t> key = {reinterpret_cast<int64_t>(context), rank, elementType, interleave,
                              swizzle, l2Promotion, oobFill};
  for (int64_t i = 0; i < 3 + 2 * rank; ++i)
    key.push_back(desc[i]);
  for (int64_t i = 0; i < rank; ++i)
    key.push_back(boxDims[i]);
  TensorMapCache &c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.entries.find(key);
  if (it != c.entries.end())
    return it->second;
  void *device = encode(rank, rankedDescriptor, elementType, interleave, swizzle, l2Promotion,
                        oobFill, boxDims);
  if (device)
    c.entries.emplace(std::move(key), device);
  return device;
}

//===----------------------------------------------------------------------------------------===//
// One reused stream per thread for JIT-compiled host code.
//
// MLIR 22 translates a synchronous `gpu.launch_func` into mgpuStreamCreate, mgpuLaunchKernel,
// mgpuStreamSynchronize and mgpuStreamDestroy around every launch: creating and destroying a CUDA
// stream costs more host time than a small kernel runs. `compile_task_cuda` registers these two
// functions under the upstream names in the JIT (explicit symbols win over the runtime library's),
// so each thread creates its stream once and every launch of the thread reuses it; the
// synchronisation after each launch is unchanged, so the function stays synchronous.
//===----------------------------------------------------------------------------------------===//

namespace {
using StreamCreateFn = void *(*)();
} // namespace

extern "C" __attribute__((visibility("default"))) void *ansorStreamCreateReused() {
  static StreamCreateFn create = reinterpret_cast<StreamCreateFn>(dlsym(RTLD_DEFAULT, "mgpuStreamCreate"));
  thread_local void *stream = nullptr; // kept for the thread's lifetime
  if (!stream && create)
    stream = create();
  return stream;
}

extern "C" __attribute__((visibility("default"))) void ansorStreamDestroyReused(void *) {}

//===----------------------------------------------------------------------------------------===//
// Deferred synchronisation for compiled networks (`targets/cuda/network.py`).
//
// A network calls its tasks' host functions one after the other on this thread's reused stream:
// the stream orders their kernels, so the synchronisation after every launch only adds host time
// (a few microseconds per call, more than many small kernels run). A network's JIT engines
// register `ansorStreamSynchronizeDeferrable` under the upstream name `mgpuStreamSynchronize`;
// it synchronises unless the thread has deferred it with `ansorDeferSynchronize(true)`, and
// `ansorSynchronizeReused` synchronises the thread's stream once at the end of the call.
//===----------------------------------------------------------------------------------------===//

namespace {
using StreamSyncFn = void (*)(void *);
thread_local bool deferSynchronize = false;

StreamSyncFn upstreamSynchronize() {
  static StreamSyncFn sync = reinterpret_cast<StreamSyncFn>(dlsym(RTLD_DEFAULT, "mgpuStreamSynchronize"));
  return sync;
}
} // namespace

extern "C" __attribute__((visibility("default"))) void ansorStreamSynchronizeDeferrable(void *stream) {
  if (!deferSynchronize && upstreamSynchronize())
    upstreamSynchronize()(stream);
}

extern "C" __attribute__((visibility("default"))) void ansorDeferSynchronize(bool defer) {
  deferSynchronize = defer;
}

extern "C" __attribute__((visibility("default"))) void ansorSynchronizeReused() {
  if (upstreamSynchronize())
    upstreamSynchronize()(ansorStreamCreateReused());
}

//===- GpuOptUtils.h - helpers of the GPU kernel-optimisation passes -*- C++ -*-===//
//
// Declarations of the ansor-gpu-* rewrites of GpuOptPasses.td and the memref facts they share:
// which buffer a view is a view of, which buffers a run of ops reads and writes.
//
//===----------------------------------------------------------------------------===//
#ifndef ANSOR_PASSES_GPU_GPUOPTUTILS_H
#define ANSOR_PASSES_GPU_GPUOPTUTILS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>

namespace mlir::ansor {
#define GEN_PASS_DECL
#include "passes/GPU/GpuOptPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/GPU/GpuOptPasses.h.inc"

namespace gpuopt {

/// Whether `op` only makes a view of its first operand (subview, cast, reshape, ...).
bool isViewOp(Operation *op);

/// The buffer a memref view is a view of: follows view ops back to the first value that is not
/// one (a kernel argument, an attribution, an allocation). Distinct kernel arguments are
/// distinct buffers: the runtime allocates each separately.
Value memrefRoot(Value v);

/// A memref type in shared memory (address space 3 or `#gpu.address_space<workgroup>`).
bool isWorkgroup(Type t);

/// Buffers (memref roots) read and written by a run of ops, nested ops included.
struct Effects {
  llvm::DenseSet<Value> reads, writes;
  bool touches(Value root) const { return reads.contains(root) || writes.contains(root); }
  bool empty() const { return reads.empty() && writes.empty(); }
};

/// Effects of `ops`. Known loads (transfer_read, vector.load, memref.load, memref.dim,
/// extract_strided_metadata) read their memref operands, known stores (transfer_write,
/// vector.store, memref.store) write their destination and read other memrefs, any other op
/// (views excepted) both reads and writes every memref it takes. nullopt when a `gpu.barrier`
/// is among or inside `ops`, unless `barriersOk`.
std::optional<Effects> effects(ArrayRef<Operation *> ops, bool barriersOk = false);

/// `a`'s operand `memA` is `b`'s `memB`, the index lists are equal, and both carry the same
/// `permutation_map`.
bool sameAccess(Operation *a, Operation *b, unsigned memA, unsigned memB, ValueRange idxA,
                ValueRange idxB);

/// A new `scf.for` right before `loop` with its bounds, attributes and iteration arguments plus
/// `extra`; `loop`'s body moves into it (its arguments remapped) and keeps its old terminator.
/// The caller rewires the terminator and the results, then erases `loop`.
scf::ForOp withMoreIterArgs(scf::ForOp loop, ValueRange extra);

/// Replaces `loop`'s terminator with one yielding its operands plus `more`.
void appendYieldOperands(scf::ForOp loop, ValueRange more);

/// All ops of kind `OpT` nested in `root` (post-order: inner ones first), collected before any
/// rewriting.
template <typename OpT> SmallVector<OpT> collect(Operation *root) {
  SmallVector<OpT> out;
  root->walk([&](OpT op) { out.push_back(op); });
  return out;
}

} // namespace gpuopt
} // namespace mlir::ansor

#endif // ANSOR_PASSES_GPU_GPUOPTUTILS_H

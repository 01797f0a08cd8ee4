//===- PipelineSharedCopies.cpp - ansor-gpu-pipeline-shared-copies ----------------===//
//
// scf.for %k { S = tile(k); barrier; compute(S); barrier } --(N stages: N buffers)-->
//   barrier; S[s] = tile(s) for s < N-1 (cp.async where it can, one group each)
//   scf.for %k { wait; barrier; S[(i+N-1)%N] = tile(k+N-1); compute(S[i%N]) }; wait all
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuOptUtils.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_GPUPIPELINESHAREDCOPIES
#include "passes/GPU/GpuOptPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;
using namespace mlir::ansor::gpuopt;

namespace {

constexpr llvm::StringLiteral kStagesAttr = "ansor.pipeline_stages";
constexpr int kZero = 30; // log2 divisor standing for "zero": divisible by anything we ask

int pow2Of(int64_t c) {
  return c == 0 ? kZero : std::min<int>(llvm::countr_zero(uint64_t(c)), kZero);
}

int pow2(Value v, int depth = 0);

int pow2Expr(AffineExpr e, ValueRange dims, ValueRange syms, int depth) {
  if (auto c = dyn_cast<AffineConstantExpr>(e))
    return pow2Of(c.getValue());
  if (auto d = dyn_cast<AffineDimExpr>(e))
    return pow2(dims[d.getPosition()], depth + 1);
  if (auto s = dyn_cast<AffineSymbolExpr>(e))
    return pow2(syms[s.getPosition()], depth + 1);
  auto bin = cast<AffineBinaryOpExpr>(e);
  int l = pow2Expr(bin.getLHS(), dims, syms, depth), r = pow2Expr(bin.getRHS(), dims, syms, depth);
  switch (e.getKind()) {
  case AffineExprKind::Add:
    return std::min(l, r);
  case AffineExprKind::Mul:
    return std::min(l + r, kZero);
  case AffineExprKind::Mod: // x mod c = x - c * q
    return std::min(l, r);
  default: // floordiv, ceildiv
    return 0;
  }
}

/// log2 of the largest power of two known to divide the index `v` (0: nothing known).
int pow2(Value v, int depth) {
  if (depth > 32)
    return 0;
  if (std::optional<int64_t> c = getConstantIntValue(v))
    return pow2Of(*c);
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto loop = dyn_cast<scf::ForOp>(arg.getOwner()->getParentOp());
    if (loop && loop.getInductionVar() == v)
      return std::min(pow2(loop.getLowerBound(), depth + 1), pow2(loop.getStep(), depth + 1));
    return 0;
  }
  Operation *op = v.getDefiningOp();
  if (auto apply = dyn_cast<affine::AffineApplyOp>(op)) {
    AffineMap map = apply.getAffineMap();
    ValueRange ops = apply.getMapOperands();
    return pow2Expr(map.getResult(0), ops.take_front(map.getNumDims()),
                    ops.drop_front(map.getNumDims()), depth);
  }
  if (isa<arith::AddIOp, arith::SubIOp, arith::MinSIOp, arith::MaxSIOp, arith::MinUIOp,
          arith::MaxUIOp>(op))
    return std::min(pow2(op->getOperand(0), depth + 1), pow2(op->getOperand(1), depth + 1));
  if (isa<arith::MulIOp>(op))
    return std::min(pow2(op->getOperand(0), depth + 1) + pow2(op->getOperand(1), depth + 1), kZero);
  if (auto sel = dyn_cast<arith::SelectOp>(op))
    return std::min(pow2(sel.getTrueValue(), depth + 1), pow2(sel.getFalseValue(), depth + 1));
  if (isa<arith::IndexCastOp, arith::IndexCastUIOp>(op))
    return pow2(op->getOperand(0), depth + 1);
  return 0;
}

/// log2 of the largest power of two known to divide the element offset of the element at
/// `indices` of the view `mem`, from its root (a function argument or an attribution with the
/// identity layout, whose base is at least 16-byte aligned: device allocations and
/// ansor-gpu-align-workgroup-buffers).
int addressPow2(Value mem, ValueRange indices) {
  auto type = cast<MemRefType>(mem.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)))
    return 0;
  int r;
  if (auto sv = mem.getDefiningOp<memref::SubViewOp>()) {
    MemRefType src = sv.getSourceType();
    SmallVector<int64_t> srcStrides;
    int64_t srcOffset;
    if (failed(src.getStridesAndOffset(srcStrides, srcOffset)))
      return 0;
    r = addressPow2(sv.getSource(), {});
    for (auto [o, s] : llvm::zip(sv.getMixedOffsets(), srcStrides)) {
      if (ShapedType::isDynamic(s))
        return 0;
      std::optional<int64_t> c = getConstantIntValue(o);
      int po = c ? pow2Of(*c) : pow2(cast<Value>(o));
      r = std::min(r, std::min(po + pow2Of(s), kZero));
    }
  } else if (isa<BlockArgument>(mem) && type.getLayout().isIdentity()) {
    r = kZero;
  } else {
    return 0;
  }
  for (auto [i, s] : llvm::zip(indices, strides)) {
    if (ShapedType::isDynamic(s))
      return 0;
    r = std::min(r, std::min(pow2(i) + pow2Of(s), kZero));
  }
  return r;
}

/// Every view between `v` and its root is a memref.subview.
bool subviewChain(Value v) {
  while (Operation *op = v.getDefiningOp()) {
    if (!isViewOp(op))
      return true;
    if (!isa<memref::SubViewOp>(op))
      return false;
    v = op->getOperand(0);
  }
  return true;
}

bool isRead(Operation *op) {
  return isa<vector::TransferReadOp, vector::LoadOp, memref::LoadOp>(op);
}

/// Appends to `slice` the ops of `loop`'s body (top level, or in the block `guard`) that `v`
/// depends on; false when one of them is neither free of memory effects nor a read of a global
/// buffer that the loop does not write, or sits elsewhere, or when `v` depends on an iteration
/// argument other than the induction variable.
bool valueSlice(Value v, scf::ForOp loop, Block *guard, const Effects &eff,
                llvm::SetVector<Operation *> &slice) {
  SmallVector<Value> stack{v};
  while (!stack.empty()) {
    Value x = stack.pop_back_val();
    Operation *op = x.getDefiningOp();
    if (!op) {
      if (x != loop.getInductionVar() && !loop.isDefinedOutsideOfLoop(x))
        return false;
      continue;
    }
    if (!loop->isProperAncestor(op))
      continue;
    if ((op->getParentOp() != loop && op->getBlock() != guard) || op->getNumRegions())
      return false;
    if (isRead(op)) {
      Value mem = op->getOperand(0);
      if (isWorkgroup(mem.getType()) || eff.writes.contains(memrefRoot(mem)))
        return false;
    } else if (!isMemoryEffectFree(op)) {
      return false;
    }
    if (!slice.insert(op))
      continue;
    llvm::append_range(stack, op->getOperands());
  }
  return true;
}

/// A store of a tile of global memory into a shared buffer: at the top level of the loop's
/// body, or in a guard (an `scf.if` at the top level, on a condition from outside the loop,
/// holding nothing but copies: the threads a copy of fewer vectors than threads uses).
struct Copy {
  vector::TransferWriteOp write;
  scf::IfOp guard;
  Value buffer;                      // the workgroup attribution it writes
  vector::TransferReadOp read;       // the global read it stores, when cp.async copies it
  int64_t chunk = 0;                 // elements per cp.async; 0: through registers
};

/// log2 of the largest power of two dividing every stride of `mem`'s last `k` dims but the last
/// (a vector's rows start at multiples of it).
int rowStridesPow2(Value mem, int64_t k) {
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(cast<MemRefType>(mem.getType()).getStridesAndOffset(strides, offset)))
    return 0;
  int r = kZero;
  for (int64_t s : ArrayRef<int64_t>(strides).take_back(k).drop_back())
    r = std::min(r, ShapedType::isDynamic(s) ? 0 : pow2Of(s));
  return r;
}

/// The elements per cp.async that copy `read` into `write` (4, 8 or 16 bytes, aligned at both
/// ends; one row of the vector after another), or 0.
int64_t asyncChunk(vector::TransferReadOp read, vector::TransferWriteOp write,
                   int64_t bufferElems) {
  VectorType vt = read.getVectorType();
  if (vt != write.getVectorType() || read.getMask() || write.getMask() ||
      !read.getPermutationMap().isMinorIdentity() || !write.getPermutationMap().isMinorIdentity() ||
      llvm::any_of(read.getInBoundsValues(), [](bool b) { return !b; }) ||
      llvm::any_of(write.getInBoundsValues(), [](bool b) { return !b; }) || vt.isScalable())
    return 0;
  ArrayRef<int64_t> shape = vt.getShape();
  auto src = cast<MemRefType>(read->getOperand(0).getType());
  auto dst = cast<MemRefType>(write->getOperand(1).getType());
  if (!src.isLastDimUnitStride() || !dst.isLastDimUnitStride() ||
      !vt.getElementType().isIntOrFloat())
    return 0;
  int64_t bits = vt.getElementTypeBitWidth();
  if (bits % 8)
    return 0;
  int64_t bytes = bits / 8, n = shape.back();
  int align = std::min({addressPow2(read->getOperand(0), read.getIndices()),
                        addressPow2(write->getOperand(1), write.getIndices()), pow2Of(bufferElems),
                        rowStridesPow2(read->getOperand(0), vt.getRank()),
                        rowStridesPow2(write->getOperand(1), vt.getRank())});
  for (int64_t e = 16 / bytes; e >= 1; e /= 2)
    if (e * bytes >= 4 && n % e == 0 && llvm::countr_zero(uint64_t(e)) <= align)
      return e;
  return 0;
}

/// Rebuilds views of a buffer (chains of memref.subview) on a new root view, for the reads of
/// the loop: views defined outside `loop` at `top`, the others right before themselves.
class Views {
public:
  Views(Value buffer, Value root, scf::ForOp loop) : loop(loop) { map[buffer] = root; }

  Value get(OpBuilder &top, Value v) {
    if (auto it = map.find(v); it != map.end())
      return it->second;
    auto sv = v.getDefiningOp<memref::SubViewOp>();
    Value src = get(top, sv.getSource());
    OpBuilder here(sv);
    OpBuilder &b = loop->isProperAncestor(sv) ? here : top;
    Value nv = subviewOf(b, sv, src, nullptr);
    map[v] = nv;
    return nv;
  }

  /// A copy of `sv` on `src` at `b`, its offsets, sizes and strides mapped through `map`.
  static Value subviewOf(OpBuilder &b, memref::SubViewOp sv, Value src, IRMapping *map) {
    auto mapped = [&](ArrayRef<OpFoldResult> ofrs) {
      return llvm::map_to_vector(ofrs, [&](OpFoldResult o) -> OpFoldResult {
        if (auto v = dyn_cast<Value>(o); v && map)
          return map->lookupOrDefault(v);
        return o;
      });
    };
    SmallVector<OpFoldResult> offsets = mapped(sv.getMixedOffsets());
    SmallVector<OpFoldResult> sizes = mapped(sv.getMixedSizes());
    SmallVector<OpFoldResult> strides = mapped(sv.getMixedStrides());
    auto type = memref::SubViewOp::inferRankReducedResultType(
        sv.getType().getShape(), cast<MemRefType>(src.getType()), offsets, sizes, strides);
    return memref::SubViewOp::create(b, sv.getLoc(), type, src, offsets, sizes, strides);
  }

private:
  scf::ForOp loop;
  DenseMap<Value, Value> map;
};

/// The view `v` of `buffer` rebuilt on `root` at `b`, operands mapped through `map`.
Value rebuildAt(OpBuilder &b, Value v, Value buffer, Value root, IRMapping &map) {
  if (v == buffer)
    return root;
  auto sv = v.getDefiningOp<memref::SubViewOp>();
  return Views::subviewOf(b, sv, rebuildAt(b, sv.getSource(), buffer, root, map), &map);
}

/// Stage `stage` of the multi-buffered `buffer` (memref<N x shape>) as a memref<shape> view.
Value stageView(OpBuilder &b, Location loc, Value buffer, OpFoldResult stage) {
  auto type = cast<MemRefType>(buffer.getType());
  int64_t rank = type.getRank();
  SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0)), sizes;
  SmallVector<OpFoldResult> strides(rank, b.getIndexAttr(1));
  offsets[0] = stage;
  sizes.push_back(b.getIndexAttr(1));
  for (int64_t d : type.getShape().drop_front())
    sizes.push_back(b.getIndexAttr(d));
  auto view = memref::SubViewOp::inferRankReducedResultType(type.getShape().drop_front(), type,
                                                            offsets, sizes, strides);
  return memref::SubViewOp::create(b, loc, view, buffer, offsets, sizes, strides);
}

/// Whether `op` is a guard of copies: an `scf.if` at the top level of `loop`'s body without
/// results or an else branch, on a condition from outside the loop.
bool isGuard(Operation *op, scf::ForOp loop) {
  auto guard = dyn_cast<scf::IfOp>(op);
  return guard && guard->getNumResults() == 0 && guard.getElseRegion().empty() &&
         loop.isDefinedOutsideOfLoop(guard.getCondition());
}

/// Pipelines `loop` over `stages` shared buffers (see GpuOptPasses.td); false when it does not
/// qualify (nothing changed).
bool pipeline(scf::ForOp loop, gpu::LaunchOp launch, int64_t stages) {
  std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound());
  std::optional<int64_t> ub = getConstantIntValue(loop.getUpperBound());
  std::optional<int64_t> step = getConstantIntValue(loop.getStep());
  if (!lb || !ub || !step || *step <= 0 || *ub - *lb <= *step)
    return false;
  int64_t last = *lb + (*ub - *lb - 1) / *step * *step;
  Block *body = loop.getBody();
  SmallVector<Operation *> all;
  for (Operation &op : body->without_terminator())
    all.push_back(&op);
  Effects eff = *effects(all, /*barriersOk=*/true);
  ArrayRef<BlockArgument> attributions = launch.getWorkgroupAttributions();

  // The copies: every store to shared memory at the top level or in a guard, each of a value
  // computed in this iteration from global memory; nothing else in the loop may write shared
  // memory.
  SmallVector<Copy> copies;
  SmallVector<Operation *> barriers;
  SmallVector<scf::IfOp> guards;
  llvm::SetVector<Value> buffers;
  auto addCopy = [&](Operation *op, scf::IfOp guard) {
    auto w = dyn_cast<vector::TransferWriteOp>(op);
    if (!w || !isWorkgroup(w->getOperand(1).getType()))
      return true; // not a store to shared memory
    Value root = memrefRoot(w->getOperand(1));
    if (!llvm::is_contained(attributions, root) || w.getMask() || !subviewChain(w->getOperand(1)))
      return false;
    copies.push_back({w, guard, root, nullptr, 0});
    buffers.insert(root);
    return true;
  };
  for (Operation *op : all) {
    if (isa<gpu::BarrierOp>(op)) {
      barriers.push_back(op);
    } else if (isGuard(op, loop)) {
      auto guard = cast<scf::IfOp>(op);
      size_t before = copies.size();
      for (Operation &inner : guard.thenBlock()->without_terminator())
        if (!addCopy(&inner, guard))
          return false;
      if (copies.size() > before)
        guards.push_back(guard);
    } else if (!addCopy(op, nullptr)) {
      return false;
    }
  }
  if (copies.empty())
    return false;
  bool nestedBarrier = false, otherWrites = false;
  loop.getBody()->walk([&](Operation *op) {
    if (isa<gpu::BarrierOp>(op) && op->getParentOp() != loop)
      nestedBarrier = true;
    if (llvm::any_of(copies, [&](const Copy &c) { return c.write == op; }) || isViewOp(op))
      return;
    bool read = isRead(op);
    for (Value v : op->getOperands())
      if (isa<MemRefType>(v.getType()) && !read && isWorkgroup(memrefRoot(v).getType()))
        otherWrites = true;
  });
  if (nestedBarrier || otherWrites)
    return false;
  // every use of a copied buffer: views (subviews), reads inside the loop, the copies
  for (Value buffer : buffers) {
    SmallVector<Value> stack{buffer};
    while (!stack.empty()) {
      Value v = stack.pop_back_val();
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        if (isa<memref::SubViewOp>(user)) {
          stack.push_back(user->getResult(0));
          continue;
        }
        bool inLoop = loop->isProperAncestor(user);
        bool copy = llvm::any_of(copies, [&](const Copy &c) { return c.write == user; });
        if (!inLoop || !(copy || (isRead(user) && use.getOperandNumber() == 0)))
          return false;
      }
    }
  }
  // what the copies need (values, indices, their views' offsets), and which cp.async can do
  llvm::SetVector<Operation *> slice;
  for (Copy &c : copies) {
    auto read = c.write.getVector().getDefiningOp<vector::TransferReadOp>();
    int64_t elems = cast<MemRefType>(c.buffer.getType()).getNumElements();
    if (read && loop->isProperAncestor(read) && read->hasOneUse() &&
        !isWorkgroup(read->getOperand(0).getType()) &&
        !eff.writes.contains(memrefRoot(read->getOperand(0)))) {
      c.chunk = asyncChunk(read, c.write, elems);
      if (c.chunk)
        c.read = read;
    }
    SmallVector<Value> needs(c.write.getIndices());
    if (c.read)
      llvm::append_range(needs, c.read->getOperands()); // its view and indices, not the read
    else
      needs.push_back(c.write.getVector());
    for (Value v = c.write->getOperand(1); v != c.buffer; v = v.getDefiningOp()->getOperand(0))
      if (!loop.isDefinedOutsideOfLoop(v))
        llvm::append_range(needs, v.getDefiningOp()->getOperands().drop_front());
    Block *guard = c.guard ? c.guard.thenBlock() : nullptr;
    for (Value v : needs)
      if (!valueSlice(v, loop, guard, eff, slice))
        return false;
  }
  // a guard holds copies and what they need only
  for (scf::IfOp guard : guards)
    for (Operation &op : guard.thenBlock()->without_terminator())
      if (!slice.contains(&op) && !isViewOp(&op) &&
          !llvm::any_of(copies, [&](const Copy &c) { return c.write == &op || c.read == &op; }))
        return false;
  SmallVector<Operation *> sliceOps(slice.begin(), slice.end());
  llvm::sort(sliceOps, [](Operation *a, Operation *b) { // (cloned block by block)
    return a->getBlock() == b->getBlock() ? a->isBeforeInBlock(b)
                                          : std::less<Block *>()(a->getBlock(), b->getBlock());
  });
  bool async = llvm::any_of(copies, [](const Copy &c) { return c.chunk > 0; });

  // Rewrite. The buffers get a leading stage dimension.
  MLIRContext *ctx = loop.getContext();
  Location loc = loop.getLoc();
  Type tokenType = nvgpu::DeviceAsyncTokenType::get(ctx);
  for (Value buffer : buffers) {
    auto t = cast<MemRefType>(buffer.getType());
    SmallVector<int64_t> shape{stages};
    llvm::append_range(shape, t.getShape());
    cast<BlockArgument>(buffer).setType(MemRefType::get(
        shape, t.getElementType(), MemRefLayoutAttrInterface(), t.getMemorySpace()));
  }
  // Stores the copies with the induction variable at `at` into `roots` (a stage view per
  // buffer) at `b`: the slice cloned, then cp.async, or a register store (at `late` when
  // given and the copy has no guard); a guard becomes a new `scf.if` holding its copies.
  Value iv = loop.getInductionVar();
  auto issue = [&](OpBuilder &b, OpBuilder *late, Value at, DenseMap<Value, Value> &roots) {
    IRMapping map;
    map.map(iv, at);
    auto mapped = [&](ValueRange vs) {
      return llvm::map_to_vector(vs, [&](Value v) { return map.lookupOrDefault(v); });
    };
    auto emit = [&](Copy &c, OpBuilder &e, OpBuilder *later) {
      SmallVector<Value> dstIdx = mapped(c.write.getIndices());
      Value dst = rebuildAt(e, c.write->getOperand(1), c.buffer, roots[c.buffer], map);
      if (!c.chunk) {
        OpBuilder &s = later ? *later : e;
        vector::TransferWriteOp::create(s, c.write.getLoc(), map.lookup(c.write.getVector()), dst,
                                        dstIdx, c.write.getPermutationMapAttr(),
                                        c.write.getInBoundsAttr());
        return;
      }
      Value src = map.lookupOrDefault(c.read->getOperand(0));
      SmallVector<Value> srcIdx = mapped(c.read.getIndices());
      VectorType vt = c.read.getVectorType();
      int64_t bytes = vt.getElementTypeBitWidth() / 8, k = vt.getRank();
      UnitAttr bypass = c.chunk * bytes == 16 ? e.getUnitAttr() : UnitAttr();
      // every element position of the vector, row by row, a chunk at a time (the vector's
      // dims are the memrefs' last k: minor identity maps)
      SmallVector<int64_t> pos(k, 0);
      while (true) {
        SmallVector<Value> s(srcIdx), d(dstIdx);
        for (int64_t j = 0; j < k; ++j) {
          if (!pos[j])
            continue;
          Value off = arith::ConstantIndexOp::create(e, loc, pos[j]);
          Value &si = s[s.size() - k + j], &di = d[d.size() - k + j];
          si = arith::AddIOp::create(e, loc, si, off);
          di = arith::AddIOp::create(e, loc, di, off);
        }
        // (the token is not needed: groups and waits count copies per thread)
        nvgpu::DeviceAsyncCopyOp::create(e, loc, tokenType, dst, d, src, s,
                                         e.getIndexAttr(c.chunk), Value(), bypass);
        int64_t j = k - 1;
        pos[j] += c.chunk;
        while (j > 0 && pos[j] >= vt.getDimSize(j)) {
          pos[j] = 0;
          ++pos[--j];
        }
        if (pos[0] >= vt.getDimSize(0))
          break;
      }
    };
    for (Operation *op : sliceOps)
      if (op->getParentOp() == loop)
        b.clone(*op, map);
    for (Copy &c : copies)
      if (!c.guard)
        emit(c, b, late);
    for (scf::IfOp guard : guards) {
      auto nif = scf::IfOp::create(b, guard.getLoc(), guard.getCondition(),
                                   /*withElseRegion=*/false);
      OpBuilder in = OpBuilder::atBlockTerminator(nif.thenBlock());
      for (Operation *op : sliceOps)
        if (op->getBlock() == guard.thenBlock())
          in.clone(*op, map);
      for (Copy &c : copies)
        if (c.guard == guard)
          emit(c, in, nullptr);
    }
  };
  // prologue: the first stages-1 tiles, after every thread is done with the buffers
  OpBuilder pre(loop);
  gpu::BarrierOp::create(pre, loc);
  Value token;
  for (int64_t s = 0; s + 1 < stages; ++s) {
    Value at = arith::ConstantIndexOp::create(pre, loc, std::min(*lb + s * *step, last));
    DenseMap<Value, Value> roots;
    for (Value buffer : buffers)
      roots[buffer] = stageView(pre, loc, buffer, pre.getIndexAttr(s));
    issue(pre, nullptr, at, roots);
    if (async) {
      Value group = nvgpu::DeviceAsyncCreateGroupOp::create(pre, loc, tokenType, ValueRange{});
      token = token ? token : group;
    }
  }
  // the body: wait for tile i, barrier, issue tile i+stages-1 into the stage computed longest
  // ago, compute on stage i % stages
  OpBuilder top = OpBuilder::atBlockBegin(body);
  Value rel = arith::SubIOp::create(top, loc, iv, loop.getLowerBound());
  Value i = arith::DivUIOp::create(top, loc, rel, loop.getStep());
  Value n = arith::ConstantIndexOp::create(top, loc, stages);
  Value cur = arith::RemUIOp::create(top, loc, i, n);
  Value ahead =
      arith::AddIOp::create(top, loc, i, arith::ConstantIndexOp::create(top, loc, stages - 1));
  Value nxt = arith::RemUIOp::create(top, loc, ahead, n);
  std::vector<std::unique_ptr<Views>> curViews;
  DenseMap<Value, Views *> curOf;
  DenseMap<Value, Value> nxtRoots;
  for (Value buffer : buffers) {
    curViews.push_back(std::make_unique<Views>(buffer, stageView(top, loc, buffer, cur), loop));
    curOf[buffer] = curViews.back().get();
    nxtRoots[buffer] = stageView(top, loc, buffer, nxt);
  }
  // (the views the computation reads are rebuilt first, at the top, so they dominate it)
  SmallVector<std::pair<OpOperand *, Value>> reads;
  body->walk([&](Operation *op) {
    if (!isRead(op))
      return;
    Value root = memrefRoot(op->getOperand(0));
    if (buffers.contains(root))
      reads.push_back({&op->getOpOperand(0), root});
  });
  for (auto [use, root] : reads)
    use->set(curOf[root]->get(top, use->get()));
  if (async)
    nvgpu::DeviceAsyncWaitOp::create(top, loc, token, top.getI32IntegerAttr(stages - 2));
  gpu::BarrierOp::create(top, loc);
  Value step2 = arith::ConstantIndexOp::create(top, loc, (stages - 1) * *step);
  Value at = arith::MinSIOp::create(top, loc, arith::AddIOp::create(top, loc, iv, step2),
                                    arith::ConstantIndexOp::create(top, loc, last));
  OpBuilder late(body->getTerminator());
  issue(top, &late, at, nxtRoots);
  if (async) {
    nvgpu::DeviceAsyncCreateGroupOp::create(top, loc, tokenType, ValueRange{});
    OpBuilder after(loop->getBlock(), std::next(loop->getIterator()));
    nvgpu::DeviceAsyncWaitOp::create(after, loc, token, after.getI32IntegerAttr(0));
  }
  // the old copies, guards and barriers, then whatever they left dead
  for (Copy &c : copies) {
    c.write->erase();
    if (c.read)
      c.read->erase();
  }
  for (scf::IfOp guard : guards)
    guard->erase();
  for (Operation *b : barriers)
    b->erase();
  for (Operation *op : llvm::reverse(sliceOps))
    if (op->getParentOp() == loop && op->use_empty())
      op->erase();
  bool changed = true;
  while (changed) { // the old views of the buffers, leaves first
    changed = false;
    SmallVector<memref::SubViewOp> dead;
    launch.walk([&](memref::SubViewOp sv) {
      if (sv->use_empty() && buffers.contains(memrefRoot(sv.getSource())))
        dead.push_back(sv);
    });
    for (memref::SubViewOp sv : dead) {
      sv->erase();
      changed = true;
    }
  }
  return true;
}

struct GpuPipelineSharedCopies
    : public ansor::impl::GpuPipelineSharedCopiesBase<GpuPipelineSharedCopies> {
  using Base::Base;
  void runOnOperation() override {
    for (gpu::LaunchOp launch : collect<gpu::LaunchOp>(getOperation())) {
      int64_t n = stages;
      if (n == 0)
        if (auto attr = launch->getAttrOfType<IntegerAttr>(kStagesAttr))
          n = attr.getInt();
      if (n < 2)
        continue;
      for (scf::ForOp loop : collect<scf::ForOp>(launch))
        pipeline(loop, launch, n);
    }
  }
};

} // namespace

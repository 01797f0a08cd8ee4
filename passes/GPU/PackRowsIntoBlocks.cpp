//===- PackRowsIntoBlocks.cpp - ansor-gpu-pack-rows-into-blocks -------------------===//
//
// gpu.launch {ansor.rows_per_block = R} grid (G, gy, gz) block (T, 1, 1), one row per block
//   --> grid (G / R, gy, gz) block (T, R, 1): row group y of block b runs what block b R + y
//       ran, on its own slice y of every shared buffer
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuOptUtils.h"
#include "passes/GPU/GpuReductionPasses.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_GPUPACKROWSINTOBLOCKS
#include "passes/GPU/GpuReductionPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;

namespace {

constexpr llvm::StringLiteral kRowsAttr = "ansor.rows_per_block";

std::optional<int64_t> constantIndex(Value v) {
  auto c = v.getDefiningOp<arith::ConstantIndexOp>();
  return c ? std::optional<int64_t>(c.value()) : std::nullopt;
}

/// Values of the launch body that depend on the row (the block id x) or on memory (any load:
/// a row's data): SSA operands, region arguments of ops taking such operands, and results of
/// regions yielding them; to a fixpoint.
llvm::DenseSet<Value> rowDependent(gpu::LaunchOp launch, Value row, Value group) {
  llvm::DenseSet<Value> dep{row, group};
  bool changed = true;
  auto mark = [&](ValueRange vs) {
    for (Value v : vs)
      changed |= dep.insert(v).second;
  };
  while (changed) {
    changed = false;
    launch.getBody().walk([&](Operation *op) {
      bool in = isa<memref::LoadOp, vector::TransferReadOp, vector::LoadOp>(op) ||
                llvm::any_of(op->getOperands(), [&](Value v) { return dep.contains(v); });
      if (!in)
        return;
      mark(op->getResults());
      for (Region &r : op->getRegions())
        for (Block &b : r)
          mark(b.getArguments());
      Operation *parent = op->getParentOp();
      if (op->hasTrait<OpTrait::IsTerminator>() && parent != launch) {
        mark(parent->getResults());
        for (Region &r : parent->getRegions())
          for (Block &b : r)
            mark(b.getArguments());
      }
    });
  }
  return dep;
}

/// Why a barrier of `launch` would not be reached by every row group alike (control flow that
/// depends on the row), or "" when every barrier is.
std::string divergentBarrier(gpu::LaunchOp launch, const llvm::DenseSet<Value> &dep) {
  std::string why;
  launch.getBody().walk([&](gpu::BarrierOp barrier) {
    for (Operation *p = barrier->getParentOp(); p && p != launch; p = p->getParentOp()) {
      bool uniform = true;
      if (auto ifOp = dyn_cast<scf::IfOp>(p))
        uniform = !dep.contains(ifOp.getCondition());
      else if (auto forOp = dyn_cast<scf::ForOp>(p))
        uniform = !dep.contains(forOp.getLowerBound()) && !dep.contains(forOp.getUpperBound()) &&
                  !dep.contains(forOp.getStep());
      else
        uniform = false;
      if (!uniform) {
        why = "a gpu.barrier under " + p->getName().getStringRef().str() +
              " whose control depends on the row";
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return why;
}

/// Gives row group `ty` its own slice of the shared buffer `arg` (memref<1 x ..., 3>): the
/// buffer becomes memref<R x ..., 3> and every access of it moves to row `ty` of the leading
/// dim. Failure (with the reason in `why`) on an access it cannot move.
LogicalResult privatize(BlockArgument arg, int64_t rows, Value ty, std::string &why) {
  auto t = cast<MemRefType>(arg.getType());
  std::string ty_s;
  llvm::raw_string_ostream(ty_s) << t;
  if (t.getRank() < 1 || t.getShape()[0] != 1 || !t.getLayout().isIdentity() ||
      !t.hasStaticShape()) {
    why = "shared buffer " + ty_s + " has no leading unit dim to give each row group its own";
    return failure();
  }
  SmallVector<int64_t> shape(t.getShape());
  shape[0] = rows;
  arg.setType(MemRefType::get(shape, t.getElementType(), t.getLayout(), t.getMemorySpace()));
  auto shifted = [&](OpBuilder &b, Location loc, Value i) -> Value {
    return arith::AddIOp::create(b, loc, i, ty);
  };
  for (OpOperand &use : llvm::make_early_inc_range(arg.getUses())) {
    Operation *user = use.getOwner();
    OpBuilder b(user);
    Location loc = user->getLoc();
    MutableOperandRange indices = [&]() -> MutableOperandRange {
      if (auto op = dyn_cast<memref::LoadOp>(user))
        return op.getIndicesMutable();
      if (auto op = dyn_cast<memref::StoreOp>(user))
        return op.getIndicesMutable();
      if (auto op = dyn_cast<vector::TransferReadOp>(user))
        return op.getIndicesMutable();
      if (auto op = dyn_cast<vector::TransferWriteOp>(user))
        return op.getIndicesMutable();
      if (auto op = dyn_cast<vector::LoadOp>(user))
        return op.getIndicesMutable();
      if (auto op = dyn_cast<vector::StoreOp>(user))
        return op.getIndicesMutable();
      return MutableOperandRange(user, 0, 0);
    }();
    if (indices.size() == static_cast<unsigned>(t.getRank())) {
      OpOperand &first = indices[0];
      first.set(shifted(b, loc, first.get()));
      continue;
    }
    if (auto sv = dyn_cast<memref::SubViewOp>(user)) {
      // The leading offset becomes dynamic; the result type stays when it already was
      // (the strides of the other dims do not change).
      int64_t offset;
      SmallVector<int64_t> strides;
      if (failed(sv.getType().getStridesAndOffset(strides, offset)) ||
          offset != ShapedType::kDynamic) {
        why = "a static-offset view of shared buffer " + ty_s;
        return failure();
      }
      SmallVector<OpFoldResult> offsets = sv.getMixedOffsets();
      Value o0 = getValueOrCreateConstantIndexOp(b, loc, offsets[0]);
      offsets[0] = shifted(b, loc, o0);
      auto nsv = memref::SubViewOp::create(b, loc, sv.getType(), arg, offsets, sv.getMixedSizes(),
                                           sv.getMixedStrides());
      sv.replaceAllUsesWith(nsv.getResult());
      sv.erase();
      continue;
    }
    if (isa<linalg::LinalgOp>(user)) {
      // the whole buffer: its slice of the row group (linalg ops take any strided layout)
      SmallVector<OpFoldResult> offsets(t.getRank(), b.getIndexAttr(0)), sizes, ones;
      offsets[0] = ty;
      for (int64_t d : t.getShape()) {
        sizes.push_back(b.getIndexAttr(d));
        ones.push_back(b.getIndexAttr(1));
      }
      use.set(memref::SubViewOp::create(b, loc, arg, offsets, sizes, ones));
      continue;
    }
    why = "shared buffer " + ty_s + " used by " + user->getName().getStringRef().str();
    return failure();
  }
  return success();
}

/// Packs `rows` rows (blocks along x) into each block of `launch` (see GpuReductionPasses.td).
LogicalResult pack(gpu::LaunchOp launch, int64_t rows) {
  auto refuse = [&](const Twine &why) -> LogicalResult {
    return launch.emitError("cannot pack ") << rows << " rows per block: " << why;
  };
  std::optional<int64_t> gx = constantIndex(launch.getGridSizeX());
  std::optional<int64_t> tx = constantIndex(launch.getBlockSizeX());
  std::optional<int64_t> ty1 = constantIndex(launch.getBlockSizeY());
  std::optional<int64_t> tz1 = constantIndex(launch.getBlockSizeZ());
  if (!gx || !tx || !ty1 || !tz1)
    return refuse("a grid or block size that is not a constant");
  if (*ty1 != 1 || *tz1 != 1)
    return refuse("a block that is not (T, 1, 1)");
  if (*tx % 32)
    return refuse(Twine(*tx) + " threads per row (a row group must be whole warps)");
  if (*gx % rows)
    return refuse(Twine(*gx) + " blocks along x (R must divide them)");
  if (*tx * rows > 1024)
    return refuse(Twine(*tx * rows) + " threads per block (1024 at most)");
  if (launch.getNumPrivateAttributions())
    return refuse("private attributions");
  if (!gpuopt::collect<gpu::GlobalIdOp>(launch).empty())
    return refuse("a gpu.global_id");
  for (memref::AllocOp alloc : gpuopt::collect<memref::AllocOp>(launch))
    if (gpuopt::isWorkgroup(alloc.getType()))
      return refuse("a shared buffer allocated in the body (not a workgroup attribution yet)");

  Block &body = launch.getBody().front();
  OpBuilder b(&body, body.begin());
  Location loc = launch.getLoc();
  // The ids and sizes of before, then the new ones.
  SmallVector<std::pair<Value, Value>> replace;
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value cg = arith::ConstantIndexOp::create(b, loc, *gx);
  Value bx = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value ty = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::y);
  Value r = arith::ConstantIndexOp::create(b, loc, rows);
  Value row = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, bx, r), ty);
  replace.push_back({launch.getBlockIds().x, row});
  replace.push_back({launch.getThreadIds().y, c0});
  replace.push_back({launch.getBlockSize().y, c1});
  replace.push_back({launch.getGridSize().x, cg});
  launch.getBody().walk([&](Operation *op) {
    if (op == bx.getDefiningOp() || op == ty.getDefiningOp())
      return;
    if (auto id = dyn_cast<gpu::BlockIdOp>(op); id && id.getDimension() == gpu::Dimension::x)
      replace.push_back({id, row});
    else if (auto id = dyn_cast<gpu::ThreadIdOp>(op); id && id.getDimension() == gpu::Dimension::y)
      replace.push_back({id, c0});
    else if (auto d = dyn_cast<gpu::BlockDimOp>(op); d && d.getDimension() == gpu::Dimension::y)
      replace.push_back({d, c1});
    else if (auto d = dyn_cast<gpu::GridDimOp>(op); d && d.getDimension() == gpu::Dimension::x)
      replace.push_back({d, cg});
  });
  for (auto [old, now] : replace) {
    old.replaceAllUsesWith(now);
    if (Operation *def = old.getDefiningOp())
      def->erase();
  }
  std::string why = divergentBarrier(launch, rowDependent(launch, row, ty));
  if (!why.empty())
    return refuse(why);
  for (BlockArgument arg : launch.getWorkgroupAttributions())
    if (failed(privatize(arg, rows, ty, why)))
      return refuse(why);

  OpBuilder outside(launch);
  launch.getGridSizeXMutable().set(
      arith::ConstantIndexOp::create(outside, loc, *gx / rows));
  launch.getBlockSizeYMutable().set(arith::ConstantIndexOp::create(outside, loc, rows));
  return success();
}

struct GpuPackRowsIntoBlocks
    : public ansor::impl::GpuPackRowsIntoBlocksBase<GpuPackRowsIntoBlocks> {
  void runOnOperation() override {
    for (gpu::LaunchOp launch : gpuopt::collect<gpu::LaunchOp>(getOperation())) {
      auto attr = launch->getAttrOfType<IntegerAttr>(kRowsAttr);
      if (!attr)
        continue;
      launch->removeAttr(kRowsAttr);
      int64_t rows = attr.getInt();
      if (rows < 1) {
        launch.emitError("ansor.rows_per_block = ") << rows << " (at least 1)";
        return signalPassFailure();
      }
      if (rows > 1 && failed(pack(launch, rows)))
        return signalPassFailure();
    }
  }
};

} // namespace

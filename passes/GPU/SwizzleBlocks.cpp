//===- SwizzleBlocks.cpp - ansor-gpu-swizzle-blocks -------------------------------===//
//
// gpu.block_id x/y (row-major launch order) --(groups of `group` block rows, column-major
//   inside a group)--> x', y'
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuOptUtils.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_GPUSWIZZLEBLOCKS
#include "passes/GPU/GpuOptPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;
using namespace mlir::ansor::gpuopt;

namespace {

std::optional<int64_t> constantOf(Value v) {
  auto c = v.getDefiningOp<arith::ConstantOp>();
  auto i = c ? dyn_cast<IntegerAttr>(c.getValue()) : IntegerAttr();
  return i ? std::optional<int64_t>(i.getInt()) : std::nullopt;
}

/// Swizzles `launch`'s block ids if its grid qualifies (see GpuOptPasses.td).
bool swizzle(gpu::LaunchOp launch, int64_t group) {
  std::optional<int64_t> gx = constantOf(launch.getGridSizeX());
  std::optional<int64_t> gy = constantOf(launch.getGridSizeY());
  std::optional<int64_t> gz = constantOf(launch.getGridSizeZ());
  if (!gx || !gy || !gz || *gz != 1 || *gy < 2 || *gx < 2 || *gy % group)
    return false;
  SmallVector<gpu::BlockIdOp> ids = collect<gpu::BlockIdOp>(launch);
  if (ids.empty())
    return false;
  OpBuilder b = OpBuilder::atBlockBegin(&launch.getBody().front());
  Location loc = launch.getLoc();
  auto c = [&](int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); };
  Value bx = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value by = gpu::BlockIdOp::create(b, loc, gpu::Dimension::y);
  Value lin = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, by, c(*gx)), bx);
  int64_t per = group * *gx;
  Value grp = arith::DivUIOp::create(b, loc, lin, c(per));
  Value rem = arith::RemUIOp::create(b, loc, lin, c(per));
  Value rows = arith::MulIOp::create(b, loc, grp, c(group));
  Value newY = arith::AddIOp::create(b, loc, rows, arith::RemUIOp::create(b, loc, rem, c(group)));
  Value newX = arith::DivUIOp::create(b, loc, rem, c(group));
  for (gpu::BlockIdOp id : ids) {
    if (id.getDimension() == gpu::Dimension::x)
      id->replaceAllUsesWith(ValueRange{newX});
    else if (id.getDimension() == gpu::Dimension::y)
      id->replaceAllUsesWith(ValueRange{newY});
    else
      continue;
    id.erase();
  }
  return true;
}

struct GpuSwizzleBlocks : public ansor::impl::GpuSwizzleBlocksBase<GpuSwizzleBlocks> {
  using Base::Base;
  void runOnOperation() override {
    if (group <= 1)
      return;
    for (gpu::LaunchOp launch : collect<gpu::LaunchOp>(getOperation()))
      swizzle(launch, group);
  }
};

} // namespace

//===- GpuLoweringPasses.cpp - GPU lowering fix-ups (GpuLoweringPasses.td) --------===//
//
//   tensor payload --ansor-gpu-own-fill-destinations--> (script) --ansor-gpu-copies-to-linalg,
//   ansor-gpu-check-host-allocs--> ... gpu-kernel-outlining --ansor-gpu-align-workgroup-buffers-->
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuLoweringPasses.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_GPUOWNFILLDESTINATIONS
#define GEN_PASS_DEF_GPUCOPIESTOLINALG
#define GEN_PASS_DEF_GPUALIGNWORKGROUPBUFFERS
#define GEN_PASS_DEF_GPUCHECKHOSTALLOCS
#define GEN_PASS_DEF_GPUDEVICEINTERMEDIATES
#define GEN_PASS_DEF_GPURESHAPEDRESULTSINPLACE
#define GEN_PASS_DEF_GPUROWVALUESINTOLAUNCH
#include "passes/GPU/GpuLoweringPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;

namespace {

/// How many trailing arguments of a function are its workspace (`ansor-gpu-device-intermediates`).
constexpr llvm::StringLiteral kWorkspaceAttr = "ansor.workspace";

/// Alignment (bytes) the kernels' buffers are known to have.
constexpr int64_t kBufferAlign = 16;

template <typename OpT> SmallVector<OpT> collectOps(Operation *root) {
  SmallVector<OpT> out;
  root->walk([&](OpT op) { out.push_back(op); });
  return out;
}

/// Shared memory: memory space 3 (as our scripts spell it) or #gpu.address_space<workgroup>.
bool isWorkgroup(Type t) {
  auto mt = dyn_cast<MemRefType>(t);
  if (!mt || !mt.getMemorySpace())
    return false;
  Attribute ms = mt.getMemorySpace();
  if (auto i = dyn_cast<IntegerAttr>(ms))
    return i.getInt() == 3;
  if (auto a = dyn_cast<gpu::AddressSpaceAttr>(ms))
    return a.getValue() == gpu::AddressSpace::Workgroup;
  return false;
}

struct GpuOwnFillDestinations
    : public ansor::impl::GpuOwnFillDestinationsBase<GpuOwnFillDestinations> {
  void runOnOperation() override {
    for (linalg::FillOp fill : collectOps<linalg::FillOp>(getOperation())) {
      OpOperand &dest = fill.getDpsInitsMutable()[0];
      auto empty = dest.get().getDefiningOp<tensor::EmptyOp>();
      if (!empty || std::distance(dest.get().use_begin(), dest.get().use_end()) < 2)
        continue;
      OpBuilder b(fill);
      Operation *clone = b.clone(*empty);
      dest.set(clone->getResult(0));
    }
  }
};

struct GpuCopiesToLinalg : public ansor::impl::GpuCopiesToLinalgBase<GpuCopiesToLinalg> {
  void runOnOperation() override {
    for (gpu::LaunchOp launch : collectOps<gpu::LaunchOp>(getOperation()))
      for (memref::CopyOp cp : collectOps<memref::CopyOp>(launch)) {
        OpBuilder b(cp);
        auto copy = linalg::CopyOp::create(b, cp.getLoc(), cp.getSource(), cp.getTarget());
        // as the Python bindings' linalg.copy builds it (no effect on same-type copies)
        copy->setAttr("cast", linalg::TypeFnAttr::get(b.getContext(), linalg::TypeFn::cast_signed));
        cp.erase();
      }
  }
};

struct GpuAlignWorkgroupBuffers
    : public ansor::impl::GpuAlignWorkgroupBuffersBase<GpuAlignWorkgroupBuffers> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    Builder b(ctx);
    NamedAttribute align(b.getStringAttr("llvm.align"), b.getI64IntegerAttr(kBufferAlign));
    for (gpu::GPUFuncOp f : collectOps<gpu::GPUFuncOp>(getOperation())) {
      int64_t n = 0;
      if (auto a = f->getAttrOfType<IntegerAttr>("workgroup_attributions"))
        n = a.getInt();
      if (n) {
        SmallVector<Attribute> dicts(n, b.getDictionaryAttr({align}));
        f->setAttr("workgroup_attrib_attrs", b.getArrayAttr(dicts));
      }
      auto old = f->getAttrOfType<ArrayAttr>("arg_attrs");
      SmallVector<Attribute> attrs;
      for (auto [i, t] : llvm::enumerate(f.getFunctionType().getInputs())) {
        SmallVector<NamedAttribute> entries;
        if (old && i < old.size())
          llvm::append_range(entries, cast<DictionaryAttr>(old[i]).getValue());
        if (isa<MemRefType>(t) && !isWorkgroup(t)) {
          llvm::erase_if(entries, [](NamedAttribute a) { return a.getName() == "llvm.align"; });
          entries.push_back(align);
        }
        attrs.push_back(b.getDictionaryAttr(entries));
      }
      f->setAttr("arg_attrs", b.getArrayAttr(attrs));
    }
  }
};

/// The pass's operation if it is a function, else the module's top-level functions.
SmallVector<func::FuncOp> topLevelFuncs(Operation *root) {
  SmallVector<func::FuncOp> funcs;
  if (auto f = dyn_cast<func::FuncOp>(root))
    funcs.push_back(f);
  else if (auto m = dyn_cast<ModuleOp>(root))
    for (auto f : m.getOps<func::FuncOp>())
      funcs.push_back(f);
  return funcs;
}

struct GpuCheckHostAllocs : public ansor::impl::GpuCheckHostAllocsBase<GpuCheckHostAllocs> {
  void runOnOperation() override {
    SmallVector<func::FuncOp> funcs = topLevelFuncs(getOperation());
    for (func::FuncOp f : funcs) {
      if (collectOps<gpu::LaunchOp>(f).empty())
        continue;
      for (memref::AllocOp alloc : collectOps<memref::AllocOp>(f))
        if (!isWorkgroup(alloc.getType())) {
          std::string type; // printed as the type's text (a diagnostic would quote a Type)
          llvm::raw_string_ostream(type) << alloc.getType();
          alloc.emitError() << "intermediate buffer " << type
                            << " between GPU kernels (host allocation): not supported on the cuda target";
          return signalPassFailure();
        }
      for (Block &block : f.getBody())
        for (Operation &op : block) {
          StringRef n = op.getName().getStringRef();
          if (n.starts_with("linalg.") || n.starts_with("vector.") || n.starts_with("scf.") || n == "memref.copy") {
            op.emitError() << "'" << n << "' outside any gpu.launch (not mapped to the GPU)";
            return signalPassFailure();
          }
        }
    }
  }
};

/// Whether every use of `v` (through view ops) is inside a `gpu.launch` or a `memref.dealloc`
/// (collected into `deallocs`).
bool onlyKernelUses(Value v, SmallVector<memref::DeallocOp> &deallocs) {
  for (OpOperand &use : v.getUses()) {
    Operation *u = use.getOwner();
    if (u->getParentOfType<gpu::LaunchOp>())
      continue;
    if (auto d = dyn_cast<memref::DeallocOp>(u)) {
      deallocs.push_back(d);
      continue;
    }
    if (isa<memref::SubViewOp, memref::ExpandShapeOp, memref::CollapseShapeOp, memref::CastOp>(u) &&
        onlyKernelUses(u->getResult(0), deallocs))
      continue;
    return false;
  }
  return true;
}

struct GpuDeviceIntermediates
    : public ansor::impl::GpuDeviceIntermediatesBase<GpuDeviceIntermediates> {
  using Base::Base;

  void runOnOperation() override {
    for (func::FuncOp f : topLevelFuncs(getOperation())) {
      if (f.isExternal() || collectOps<gpu::LaunchOp>(f).empty())
        continue;
      SmallVector<memref::AllocOp> allocs;
      for (Operation &op : f.getBody().front())
        if (auto a = dyn_cast<memref::AllocOp>(op);
            a && !isWorkgroup(a.getType()) && a.getType().hasStaticShape() && a.getType().getLayout().isIdentity())
          allocs.push_back(a);
      // a public function's caller passes its workspace; a private one's callers cannot
      bool asArguments = workspace && f.isPublic();
      int64_t added = 0;
      for (memref::AllocOp a : allocs) {
        SmallVector<memref::DeallocOp> deallocs;
        if (!onlyKernelUses(a.getResult(), deallocs))
          continue;
        if (asArguments) {
          unsigned index = f.getNumArguments();
          if (failed(f.insertArgument(index, a.getType(), DictionaryAttr::get(&getContext()), a.getLoc())))
            return signalPassFailure();
          a.getResult().replaceAllUsesWith(f.getArgument(index));
          for (memref::DeallocOp d : deallocs)
            d.erase();
          a.erase();
          ++added;
          continue;
        }
        OpBuilder b(a);
        Location loc = a.getLoc();
        auto tokenT = gpu::AsyncTokenType::get(&getContext());
        Value t0 = gpu::WaitOp::create(b, loc, tokenT, ValueRange{}).getAsyncToken();
        auto dev = gpu::AllocOp::create(b, loc, a.getType(), tokenT, ValueRange{t0}, ValueRange{}, ValueRange{},
                                        /*hostShared=*/false);
        gpu::WaitOp::create(b, loc, Type(), ValueRange{dev.getAsyncToken()});
        a.getResult().replaceAllUsesWith(dev.getMemref());
        a.erase();
        auto free = [&](Operation *before) {
          OpBuilder fb(before);
          Value w = gpu::WaitOp::create(fb, loc, tokenT, ValueRange{}).getAsyncToken();
          auto d = gpu::DeallocOp::create(fb, loc, tokenT, ValueRange{w}, dev.getMemref());
          gpu::WaitOp::create(fb, loc, Type(), ValueRange{d.getAsyncToken()});
        };
        if (deallocs.empty()) {
          free(f.getBody().front().getTerminator());
        } else {
          for (memref::DeallocOp d : deallocs) {
            free(d);
            d.erase();
          }
        }
      }
      if (added > 0)
        f->setAttr(kWorkspaceAttr, IntegerAttr::get(IntegerType::get(&getContext(), 64), added));
    }
  }
};

/// The alloc behind `copy`'s source when the copy writes a reshape of it into an argument of `f`
/// that nothing else uses, the alloc's users being the reshape, deallocs and (only where the
/// reshape has no other user) ops that may use it directly.
memref::AllocOp reshapedAlloc(func::FuncOp f, memref::CopyOp copy, Operation *&reshape) {
  auto target = dyn_cast<BlockArgument>(copy.getTarget());
  if (!target || target.getOwner() != &f.getBody().front() || !target.hasOneUse())
    return {};
  reshape = copy.getSource().getDefiningOp();
  if (!isa_and_nonnull<memref::ExpandShapeOp, memref::CollapseShapeOp>(reshape))
    return {};
  auto alloc = reshape->getOperand(0).getDefiningOp<memref::AllocOp>();
  if (!alloc || !alloc.getType().getLayout().isIdentity() || !alloc.getDynamicSizes().empty())
    return {};
  auto targetType = dyn_cast<MemRefType>(target.getType());
  if (!targetType || targetType != reshape->getResult(0).getType())
    return {};
  bool onlyReshape = llvm::all_of(alloc->getUsers(), [&](Operation *u) {
    return u == reshape || isa<memref::DeallocOp>(u);
  });
  if (!onlyReshape && !reshape->hasOneUse())
    return {};
  return alloc;
}

struct GpuReshapedResultsInPlace
    : public ansor::impl::GpuReshapedResultsInPlaceBase<GpuReshapedResultsInPlace> {
  void runOnOperation() override {
    SmallVector<func::FuncOp> funcs = topLevelFuncs(getOperation());
    for (func::FuncOp f : funcs) {
      if (f.isExternal())
        continue;
      for (memref::CopyOp copy : collectOps<memref::CopyOp>(f)) {
        Operation *reshape = nullptr;
        memref::AllocOp alloc = reshapedAlloc(f, copy, reshape);
        if (!alloc)
          continue;
        Value out = copy.getTarget();
        copy->erase();
        for (Operation *user : llvm::make_early_inc_range(alloc->getUsers()))
          if (isa<memref::DeallocOp>(user))
            user->erase();
        if (alloc->hasOneUse()) { // only the reshape: its users write the out-param itself
          reshape->getResult(0).replaceAllUsesWith(out);
          reshape->erase();
          alloc->erase();
          continue;
        }
        // the alloc is used directly too: it becomes the inverse reshape of the out-param
        OpBuilder b(&f.getBody().front(), f.getBody().front().begin());
        Value view;
        if (auto e = dyn_cast<memref::ExpandShapeOp>(reshape))
          view = b.create<memref::CollapseShapeOp>(alloc.getLoc(), alloc.getType(), out,
                                                   e.getReassociationIndices());
        else
          view = b.create<memref::ExpandShapeOp>(alloc.getLoc(), alloc.getType(), out,
                                                 cast<memref::CollapseShapeOp>(reshape).getReassociationIndices());
        reshape->erase();
        alloc.getResult().replaceAllUsesWith(view);
        alloc->erase();
      }
    }
  }
};

/// Whether every grid size of `launch` is the constant 1.
bool oneBlock(gpu::LaunchOp launch) {
  return llvm::all_of(ValueRange{launch.getGridSizeX(), launch.getGridSizeY(), launch.getGridSizeZ()},
                      [](Value v) {
                        auto c = v.getDefiningOp<arith::ConstantIndexOp>();
                        return c && c.value() == 1;
                      });
}

struct GpuRowValuesIntoLaunch : public ansor::impl::GpuRowValuesIntoLaunchBase<GpuRowValuesIntoLaunch> {
  void runOnOperation() override {
    for (gpu::LaunchOp launch : collectOps<gpu::LaunchOp>(getOperation())) {
      if (!launch->hasAttr("ansor.row_values") || !oneBlock(launch))
        continue;
      Operation *parent = launch->getParentOp();
      for (memref::AllocOp alloc : collectOps<memref::AllocOp>(parent)) {
        if (alloc->getParentOfType<gpu::LaunchOp>() || !alloc.getDynamicSizes().empty() ||
            isWorkgroup(alloc.getType()) || alloc.getType().getMemorySpace())
          continue;
        bool inside = true, used = false;
        for (Operation *user : alloc->getUsers()) {
          if (isa<memref::DeallocOp>(user))
            continue;
          used = true;
          inside &= launch->isProperAncestor(user);
        }
        if (!inside || !used)
          continue;
        for (Operation *user : llvm::make_early_inc_range(alloc->getUsers()))
          if (isa<memref::DeallocOp>(user))
            user->erase();
        alloc->moveBefore(&launch.getBody().front().front());
      }
    }
  }
};

} // namespace

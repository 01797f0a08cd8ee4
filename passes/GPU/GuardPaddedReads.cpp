//===- GuardPaddedReads.cpp - ansor-gpu-guard-padded-reads ------------------------===//
//
// alloc + fill(pad) + copy(src -> interior view); reads of the alloc (through subviews)
//   --> reads of src at the shifted indices, clamped into src, and a select of the padding value
//       where they were out of bounds on the padded dims
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuOptUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>
#include <vector>

namespace mlir::ansor {
#define GEN_PASS_DEF_GPUGUARDPADDEDREADS
#include "passes/GPU/GpuOptPasses.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;
using namespace mlir::ansor::gpuopt;

namespace {

/// An index: a constant known here (v null) or a value.
struct Ix {
  Value v;
  int64_t c = 0;
  bool isConst() const { return !v; }
};

/// The failure of the rewrite: a one-line message on an op.
struct Error {
  Operation *op;
  std::string msg;
};

/// Index arithmetic that folds constants (constants stay constants).
struct IndexBuilder {
  OpBuilder &b;
  Location loc;
  Value value(Ix x) {
    if (x.isConst())
      return arith::ConstantIndexOp::create(b, loc, x.c);
    return x.v;
  }
  Ix add(Ix a, Ix c) {
    if (a.isConst() && c.isConst())
      return Ix{Value(), a.c + c.c};
    if (a.isConst() && a.c == 0)
      return c;
    if (c.isConst() && c.c == 0)
      return a;
    Value va = value(a);
    Value vc = value(c);
    return Ix{arith::AddIOp::create(b, loc, va, vc)};
  }
  Ix mul(Ix a, Ix c) {
    if (a.isConst() && c.isConst())
      return Ix{Value(), a.c * c.c};
    if (a.isConst() && a.c == 1)
      return c;
    if (c.isConst() && c.c == 1)
      return a;
    if ((a.isConst() && a.c == 0) || (c.isConst() && c.c == 0))
      return Ix{Value(), 0};
    Value va = value(a);
    Value vc = value(c);
    return Ix{arith::MulIOp::create(b, loc, va, vc)};
  }
};

Ix ofFold(OpFoldResult f) {
  if (auto v = dyn_cast<Value>(f))
    return Ix{v};
  return Ix{Value(), cast<IntegerAttr>(cast<Attribute>(f)).getInt()};
}

/// A padded copy of `source` that bufferization left on the host.
struct PadBuffer {
  memref::AllocOp alloc;
  Value source;
  SmallVector<int64_t> low, srcShape;
  TypedAttr value;
  SmallVector<Operation *> init; // the copy, the interior view, the fill
  SmallVector<int64_t> padded;   // dims with padding on either side
};

TypedAttr constantOf(Value v) {
  auto c = v.getDefiningOp<arith::ConstantOp>();
  return c ? c.getValue() : TypedAttr();
}

std::optional<PadBuffer> padBuffer(memref::AllocOp alloc) {
  Value buf = alloc.getResult();
  auto mt = cast<MemRefType>(buf.getType());
  if (!mt.hasStaticShape())
    return std::nullopt;
  Operation *fill = nullptr, *copy = nullptr;
  memref::SubViewOp view;
  TypedAttr value;
  for (OpOperand &use : buf.getUses()) {
    Operation *owner = use.getOwner();
    StringRef name = owner->getName().getStringRef();
    if (name == "linalg.fill" && use.getOperandNumber() == 1) {
      fill = owner;
      value = constantOf(owner->getOperand(0));
    } else if (name == "linalg.map" && owner->getNumOperands() == 1) {
      Block &body = owner->getRegion(0).front();
      Operation *term = body.getTerminator();
      bool ok = term->getName().getStringRef() == "linalg.yield";
      for (Operation &o : body.without_terminator())
        ok = ok && (o.getName().getStringRef() == "linalg.index" || isa<arith::ConstantOp>(o));
      if (ok) {
        fill = owner;
        value = constantOf(term->getOperand(0));
      }
    } else if (auto sv = dyn_cast<memref::SubViewOp>(owner);
               sv && use.getOperandNumber() == 0 && owner->getNumOperands() == 1) {
      Value r = sv.getResult();
      if (r.hasOneUse()) {
        OpOperand &u = *r.getUses().begin();
        if (isa<memref::CopyOp>(u.getOwner()) && u.getOperandNumber() == 1) {
          view = sv;
          copy = u.getOwner();
        }
      }
    }
  }
  if (!fill || !copy || !view || !value)
    return std::nullopt;
  ArrayRef<int64_t> offs = view.getStaticOffsets(), sizes = view.getStaticSizes(),
                    strides = view.getStaticStrides();
  Value src = copy->getOperand(0);
  auto st = cast<MemRefType>(src.getType());
  if (llvm::any_of(strides, [](int64_t x) { return x != 1; }) || st.getRank() != mt.getRank() ||
      st.getShape() != sizes)
    return std::nullopt;
  if (!(fill->getBlock() == copy->getBlock() && copy->getBlock() == alloc->getBlock() &&
        fill->isBeforeInBlock(copy)))
    return std::nullopt;
  PadBuffer pb{alloc, src, SmallVector<int64_t>(offs), SmallVector<int64_t>(sizes), value,
               {copy, view, fill}, {}};
  for (int64_t k = 0; k < mt.getRank(); ++k)
    if (pb.low[k] || pb.srcShape[k] != mt.getShape()[k])
      pb.padded.push_back(k);
  return pb;
}

struct Guard {
  PadBuffer &pb;
  std::optional<Error> err;

  bool fail(Operation *op, std::string msg) {
    if (!err)
      err = Error{op, std::move(msg)};
    return false;
  }

  /// Source dims of a subview that its (possibly rank-reduced) result keeps.
  std::optional<SmallVector<int64_t>> keptDims(memref::SubViewOp view) {
    ArrayRef<int64_t> sizes = view.getStaticSizes();
    ArrayRef<int64_t> res = view.getType().getShape();
    SmallVector<int64_t> kept;
    if (res.size() == sizes.size()) {
      for (size_t k = 0; k < sizes.size(); ++k)
        kept.push_back(k);
      return kept;
    }
    size_t j = 0;
    for (auto [k, s] : llvm::enumerate(sizes)) {
      if (j < res.size() && s == res[j] && s != ShapedType::kDynamic) {
        kept.push_back(k);
        ++j;
      } else if (s != 1) {
        fail(view, "rank-reducing view of a padded buffer with a non-unit dropped dim");
        return std::nullopt;
      }
    }
    if (j != res.size()) {
      fail(view, "cannot match a rank-reducing view of a padded buffer");
      return std::nullopt;
    }
    return kept;
  }

  /// Indices into the root of element `idx` of view `v`.
  std::optional<SmallVector<Ix>> rootIndices(Operation *user, Value v, SmallVector<Ix> idx,
                                             IndexBuilder &b) {
    Value root = pb.alloc.getResult();
    while (v != root) {
      Operation *def = v.getDefiningOp();
      auto op = dyn_cast_or_null<memref::SubViewOp>(def);
      if (!op) {
        fail(user, std::string("padded buffer read through ") +
                       (def ? def->getName().getStringRef().str() : std::string("an argument")));
        return std::nullopt;
      }
      SmallVector<OpFoldResult> offs = op.getMixedOffsets(), strides = op.getMixedStrides();
      std::optional<SmallVector<int64_t>> kept = keptDims(op);
      if (!kept)
        return std::nullopt;
      SmallVector<Ix> next;
      for (int64_t k = 0; k < (int64_t)offs.size(); ++k) {
        Ix i{Value(), 0};
        auto it = llvm::find(*kept, k);
        if (it != kept->end())
          i = idx[it - kept->begin()];
        Ix m = b.mul(ofFold(strides[k]), i);
        next.push_back(b.add(ofFold(offs[k]), m));
      }
      idx = std::move(next);
      v = op.getSource();
    }
    return idx;
  }

  std::optional<SmallVector<int64_t>> dimsToRoot(Value v) {
    Value root = pb.alloc.getResult();
    SmallVector<int64_t> dims;
    for (int64_t d = 0; d < cast<MemRefType>(v.getType()).getRank(); ++d)
      dims.push_back(d);
    while (v != root) {
      auto op = v.getDefiningOp<memref::SubViewOp>();
      std::optional<SmallVector<int64_t>> kept = keptDims(op);
      if (!kept)
        return std::nullopt;
      for (int64_t &d : dims)
        d = (*kept)[d];
      v = op.getSource();
    }
    return dims;
  }

  std::optional<bool> unitStride(Value v, int64_t d) {
    Value root = pb.alloc.getResult();
    while (v != root) {
      auto op = v.getDefiningOp<memref::SubViewOp>();
      std::optional<SmallVector<int64_t>> kept = keptDims(op);
      if (!kept)
        return std::nullopt;
      if (op.getStaticStrides()[(*kept)[d]] != 1)
        return false;
      d = (*kept)[d];
      v = op.getSource();
    }
    return true;
  }

  /// Source indices of padded-buffer indices `p`, and whether they are inside the source:
  /// an i1 value, or (cond null) `known`. Where `cond` is a value, every index it tests is
  /// clamped into the source, so a read at the returned indices is always in bounds.
  SmallVector<Ix> guarded(ArrayRef<Ix> p, IndexBuilder &b, Value &cond, bool &known) {
    SmallVector<Ix> q;
    for (auto [x, lo] : llvm::zip_equal(p, pb.low))
      q.push_back(lo ? b.add(x, Ix{Value(), -lo}) : x);
    cond = Value();
    known = true;
    for (int64_t k : pb.padded) {
      if (q[k].isConst()) {
        if (!(0 <= q[k].c && q[k].c < pb.srcShape[k])) {
          cond = Value();
          known = false;
          return q;
        }
        continue;
      }
      Value bound = b.value(Ix{Value(), pb.srcShape[k]});
      Value c = arith::CmpIOp::create(b.b, b.loc, arith::CmpIPredicate::ult, q[k].v, bound);
      cond = cond ? Value(arith::AndIOp::create(b.b, b.loc, cond, c)) : c;
      Value zero = b.value(Ix{Value(), 0});
      Value top = b.value(Ix{Value(), pb.srcShape[k] - 1});
      Value low = arith::MaxSIOp::create(b.b, b.loc, q[k].v, zero);
      q[k] = Ix{arith::MinSIOp::create(b.b, b.loc, low, top)};
    }
    return q;
  }

  Value splat(OpBuilder &b, Location loc, Type t) {
    if (auto vt = dyn_cast<VectorType>(t))
      return arith::ConstantOp::create(b, loc, vt, DenseElementsAttr::get(vt, pb.value));
    return arith::ConstantOp::create(b, loc, t, pb.value);
  }

  /// `read(b)` where cond holds, the padding value elsewhere: a read at clamped indices (always
  /// in bounds, see `guarded`) and a select, not a branch. An `scf.if` per read made the fully
  /// unrolled register tiles of padded convolutions thousands of branches, on which upstream
  /// `convert-scf-to-cf` is superlinear (it splits the enclosing block at every `scf.if`): a
  /// 3x3 convolution candidate with 2688 guarded loads spent 6-10 s there and 8-10 s in NVPTX.
  /// Pinned by test_lit/gpu/guard-padded-reads.mlir and tests/test_gpu.py.
  Value selectRead(OpBuilder &b, Location loc, Value cond, bool known, Type t,
                   function_ref<Value(OpBuilder &)> read) {
    if (!cond && known)
      return read(b);
    if (!cond)
      return splat(b, loc, t);
    Value r = read(b);
    return arith::SelectOp::create(b, loc, cond, r, splat(b, loc, t));
  }

  bool rewriteLoad(memref::LoadOp op) {
    OpBuilder ob(op);
    IndexBuilder b{ob, op.getLoc()};
    SmallVector<Ix> idx;
    for (Value v : op.getIndices())
      idx.push_back(Ix{v});
    std::optional<SmallVector<Ix>> p = rootIndices(op, op.getMemref(), idx, b);
    if (!p)
      return false;
    Value cond;
    bool known;
    SmallVector<Ix> q = guarded(*p, b, cond, known);
    Value val = selectRead(ob, op.getLoc(), cond, known, op.getType(), [&](OpBuilder &b2) {
      IndexBuilder ib{b2, op.getLoc()};
      SmallVector<Value> vs;
      for (Ix x : q)
        vs.push_back(ib.value(x));
      return Value(memref::LoadOp::create(b2, op.getLoc(), pb.source, vs));
    });
    op.getResult().replaceAllUsesWith(val);
    op.erase();
    return true;
  }

  bool rewriteTransferRead(vector::TransferReadOp op) {
    Value root = pb.alloc.getResult();
    if (op.getMask())
      return fail(op, "masked transfer_read of a padded buffer");
    Location loc = op.getLoc();
    VectorType vt = op.getVectorType();
    AffineMap pmap = op.getPermutationMap();
    SmallVector<bool> inBounds;
    for (Attribute a : op.getInBounds())
      inBounds.push_back(cast<BoolAttr>(a).getValue());
    OpBuilder ob(op);
    IndexBuilder b{ob, loc};
    Value view = op.getBase();
    auto vmt = cast<MemRefType>(view.getType());
    SmallVector<Value> baseIdx(op.getIndices());
    Value padElem = op.getPadding();
    SmallVector<std::optional<int64_t>> vdims;
    for (AffineExpr e : pmap.getResults())
      if (auto d = dyn_cast<AffineDimExpr>(e))
        vdims.push_back(d.getPosition());
      else
        vdims.push_back(std::nullopt);
    SmallVector<int64_t> shape(vt.getShape());
    for (auto [r, ok] : llvm::enumerate(inBounds)) {
      std::optional<int64_t> d = vdims[r];
      TypedAttr start = d ? constantOf(baseIdx[*d]) : TypedAttr();
      if (!ok && (!start || vmt.getShape()[*d] == ShapedType::kDynamic ||
                  cast<IntegerAttr>(start).getInt() + shape[r] > vmt.getShape()[*d]))
        return fail(op, "possibly out-of-bounds transfer_read of a padded buffer");
    }
    std::optional<SmallVector<int64_t>> probeDims = dimsToRoot(view);
    if (!probeDims)
      return false;
    size_t last = shape.size() - 1;
    bool lastPadded = false;
    if (vdims[last] && shape[last] > 1) {
      if (llvm::is_contained(pb.padded, (*probeDims)[*vdims[last]])) {
        lastPadded = true;
      } else {
        std::optional<bool> unit = unitStride(view, *vdims[last]);
        if (!unit)
          return false;
        lastPadded = !*unit;
      }
    }
    int64_t piece = lastPadded ? 1 : shape[last];
    SmallVector<int64_t> outer(shape.begin(), shape.begin() + last);
    if (lastPadded)
      outer.push_back(shape[last]);
    unsigned nSrc = cast<MemRefType>(pb.source.getType()).getRank();
    auto pieceT = VectorType::get({piece}, vt.getElementType());
    AffineExpr srcExpr = vdims[last]
                             ? getAffineDimExpr((*probeDims)[*vdims[last]], op.getContext())
                             : getAffineConstantExpr(0, op.getContext());
    AffineMap srcMap = AffineMap::get(nSrc, 0, {srcExpr}, op.getContext());
    Value acc;
    SmallVector<int64_t> pos(outer.size(), 0);
    bool done = llvm::is_contained(outer, 0);
    while (!done) {
      SmallVector<Ix> idx;
      for (Value v : baseIdx)
        idx.push_back(Ix{v});
      for (auto [r, o] : llvm::enumerate(pos))
        if (o && vdims[r])
          idx[*vdims[r]] = b.add(idx[*vdims[r]], Ix{Value(), o});
      std::optional<SmallVector<Ix>> p = rootIndices(op, view, idx, b);
      if (!p)
        return false;
      Value cond;
      bool known;
      SmallVector<Ix> q = guarded(*p, b, cond, known);
      Value val = selectRead(ob, loc, cond, known, pieceT, [&](OpBuilder &b2) {
        IndexBuilder ib{b2, loc};
        SmallVector<Value> vs;
        for (Ix x : q)
          vs.push_back(ib.value(x));
        return Value(vector::TransferReadOp::create(b2, loc, pieceT, pb.source, vs,
                                                     AffineMapAttr::get(srcMap), padElem, Value(),
                                                     b2.getBoolArrayAttr({true})));
      });
      if (shape.size() == 1 && !lastPadded) {
        acc = val;
        break;
      }
      if (!acc)
        acc = splat(ob, loc, vt);
      SmallVector<int64_t> prefix(pos.begin(), pos.begin() + (lastPadded ? pos.size() : last));
      if (lastPadded) {
        Value elem = vector::ExtractOp::create(ob, loc, val, ArrayRef<int64_t>{0});
        acc = vector::InsertOp::create(ob, loc, elem, acc, prefix);
      } else {
        acc = vector::InsertOp::create(ob, loc, val, acc, prefix);
      }
      // next position (row-major, like itertools.product)
      done = true;
      for (int64_t i = (int64_t)pos.size() - 1; i >= 0; --i) {
        if (++pos[i] < outer[i]) {
          done = false;
          break;
        }
        pos[i] = 0;
      }
    }
    op.getResult().replaceAllUsesWith(acc);
    op.erase();
    return true;
  }

  /// Guards every read of the buffer and removes it; false on error (see `err`).
  bool run() {
    SmallVector<Operation *> reads, views, deallocs;
    SmallVector<Value> stack{pb.alloc.getResult()};
    while (!stack.empty()) {
      Value v = stack.pop_back_val();
      for (OpOperand &use : v.getUses()) {
        Operation *o = use.getOwner();
        if (llvm::is_contained(pb.init, o))
          continue;
        unsigned n = use.getOperandNumber();
        if (isa<memref::SubViewOp>(o) && n == 0) {
          views.push_back(o);
          stack.push_back(o->getResult(0));
        } else if (isa<vector::TransferReadOp, memref::LoadOp>(o) && n == 0) {
          reads.push_back(o);
        } else if (isa<memref::DeallocOp>(o)) {
          deallocs.push_back(o);
        } else {
          return fail(o, "padded buffer used by '" + o->getName().getStringRef().str() +
                             "' (only reads can be guarded)");
        }
      }
    }
    for (Operation *o : reads) {
      bool ok = isa<memref::LoadOp>(o) ? rewriteLoad(cast<memref::LoadOp>(o))
                                       : rewriteTransferRead(cast<vector::TransferReadOp>(o));
      if (!ok)
        return false;
    }
    for (Operation *o : llvm::reverse(views))
      if (o->getResult(0).use_empty())
        o->erase();
    for (Operation *o : deallocs)
      o->erase();
    for (Operation *o : pb.init)
      o->erase();
    if (!pb.alloc.getResult().use_empty())
      return fail(pb.alloc, "padded buffer still used after guarding its reads");
    pb.alloc.erase();
    return true;
  }
};

struct GpuGuardPaddedReads
    : public ansor::impl::GpuGuardPaddedReadsBase<GpuGuardPaddedReads> {
  void runOnOperation() override {
    std::vector<PadBuffer> bufs;
    for (Operation &f : getOperation().getBody()->getOperations()) {
      if (f.getName().getStringRef() != "func.func")
        continue;
      f.walk<WalkOrder::PreOrder>([&](memref::AllocOp alloc) {
        if (isWorkgroup(alloc.getType()))
          return;
        if (std::optional<PadBuffer> pb = padBuffer(alloc))
          bufs.push_back(std::move(*pb));
      });
    }
    for (PadBuffer &pb : bufs) {
      Guard g{pb, std::nullopt};
      if (!g.run()) {
        g.err->op->emitError() << g.err->msg;
        return signalPassFailure();
      }
    }
  }
};

} // namespace

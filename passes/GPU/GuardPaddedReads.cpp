//===- GuardPaddedReads.cpp - ansor-gpu-guard-padded-reads ------------------------===//
//
// alloc + fill(pad) + copy(src -> interior view); reads of the alloc (through subviews)
//   --> reads of src at the shifted indices, clamped into src, and a select of the padding value
//       where they were out of bounds on the padded dims
// alloc (padded result) + copy(interior view -> dest) after the kernels; accesses of the alloc
//   --> 1-D transfers of a row of dest, out-of-bounds lanes masked (rows out of bounds: the
//       column index moved past the row's end, so every lane is masked)
//
//===----------------------------------------------------------------------------===//
#include "passes/GPU/GpuOptUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

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

/// Steps `pos` to the next position in a box of `outer` (row-major, like itertools.product);
/// false after the last one.
bool nextPosition(SmallVector<int64_t> &pos, ArrayRef<int64_t> outer) {
  for (int64_t i = (int64_t)pos.size() - 1; i >= 0; --i) {
    if (++pos[i] < outer[i])
      return true;
    pos[i] = 0;
  }
  return false;
}

/// Indices of the element at offset `pos` of a vector read or written at `base`: vector dim r
/// moves view dim `vdims[r]` (none: a broadcast dim).
SmallVector<Ix> positionIndices(ValueRange base, ArrayRef<int64_t> pos,
                                ArrayRef<std::optional<int64_t>> vdims, IndexBuilder &b) {
  SmallVector<Ix> idx;
  for (Value v : base)
    idx.push_back(Ix{v});
  for (auto [r, o] : llvm::enumerate(pos))
    if (o && vdims[r])
      idx[*vdims[r]] = b.add(idx[*vdims[r]], Ix{Value(), o});
  return idx;
}

/// Subview chains from one root buffer: which dims they keep, indices into the root.
struct ViewWalk {
  Value root;
  std::optional<Error> err;

  bool fail(Operation *op, std::string msg) {
    if (!err)
      err = Error{op, std::move(msg)};
    return false;
  }

  /// Lowers `ops` (linalg ops, or `memref.copy`s of a tile, which become `linalg.copy` first:
  /// the CPU-loop form of a script has no `ansor-gpu-copies-to-linalg`) to loops of loads and
  /// stores; false (an error naming `what`) when one cannot be.
  bool lowerToLoops(ArrayRef<Operation *> ops, StringRef what) {
    for (Operation *o : ops) {
      IRRewriter rw(o->getContext());
      rw.setInsertionPoint(o);
      Operation *l = o;
      if (auto copy = dyn_cast<memref::CopyOp>(o))
        l = linalg::CopyOp::create(rw, o->getLoc(), copy.getSource(), copy.getTarget());
      if (failed(linalg::linalgOpToLoops(rw, cast<linalg::LinalgOp>(l))))
        return fail(o, "cannot lower '" + o->getName().getStringRef().str() + "' " + what.str() + " to loops");
      if (l != o)
        rw.eraseOp(l);
      rw.eraseOp(o);
    }
    return true;
  }

  /// Erases the `views` left unused, the `init` ops, then `alloc`; false (`msg`) if still used.
  bool removeBuffer(ArrayRef<Operation *> views, ArrayRef<Operation *> init, memref::AllocOp alloc,
                    StringRef msg) {
    for (Operation *o : llvm::reverse(views))
      if (o->getResult(0).use_empty())
        o->erase();
    for (Operation *o : init)
      o->erase();
    if (!alloc.getResult().use_empty())
      return fail(alloc, msg.str());
    alloc.erase();
    return true;
  }

  /// Visits every use of the root and of its subviews (those collected into `views`) but the
  /// ops in `skip`; stops with false when `visit` does.
  bool walkUses(ArrayRef<Operation *> skip, SmallVector<Operation *> &views,
                function_ref<bool(OpOperand &, Value)> visit) {
    SmallVector<Value> stack{root};
    while (!stack.empty()) {
      Value v = stack.pop_back_val();
      for (OpOperand &use : v.getUses()) {
        Operation *o = use.getOwner();
        if (llvm::is_contained(skip, o))
          continue;
        if (isa<memref::SubViewOp>(o) && use.getOperandNumber() == 0) {
          views.push_back(o);
          stack.push_back(o->getResult(0));
        } else if (!visit(use, v)) {
          return false;
        }
      }
    }
    return true;
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

};

struct Guard : ViewWalk {
  PadBuffer &pb;

  Guard(PadBuffer &pb) : ViewWalk{pb.alloc.getResult(), std::nullopt}, pb(pb) {}

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
      SmallVector<Ix> idx = positionIndices(baseIdx, pos, vdims, b);
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
      done = !nextPosition(pos, outer);
    }
    op.getResult().replaceAllUsesWith(acc);
    op.erase();
    return true;
  }

  /// Linalg ops and copies that only read the buffer (a copy to shared memory left whole: one
  /// thread's share of it is the whole tile) become loops of loads and stores first; false on error.
  bool readersToLoops() {
    SmallVector<Operation *> readers, views;
    walkUses(pb.init, views, [&](OpOperand &use, Value) {
      Operation *o = use.getOwner();
      auto l = dyn_cast<linalg::LinalgOp>(o);
      bool reads = (l && l.isDpsInput(&use)) || (isa<memref::CopyOp>(o) && use.getOperandNumber() == 0 &&
                                                 o->getOperand(0) != o->getOperand(1));
      if (reads && !llvm::is_contained(readers, o))
        readers.push_back(o);
      return true;
    });
    return lowerToLoops(readers, "reading a padded buffer");
  }

  /// Guards every read of the buffer and removes it; false on error (see `err`).
  bool run() {
    if (!readersToLoops())
      return false;
    SmallVector<Operation *> reads, views, deallocs;
    bool ok = walkUses(pb.init, views, [&](OpOperand &use, Value) {
      Operation *o = use.getOwner();
      if (isa<vector::TransferReadOp, memref::LoadOp>(o) && use.getOperandNumber() == 0)
        reads.push_back(o);
      else if (isa<memref::DeallocOp>(o))
        deallocs.push_back(o);
      else
        return fail(o, "padded buffer used by '" + o->getName().getStringRef().str() +
                           "' (only reads can be guarded)");
      return true;
    });
    if (!ok)
      return false;
    for (Operation *o : reads) {
      bool ok = isa<memref::LoadOp>(o) ? rewriteLoad(cast<memref::LoadOp>(o))
                                       : rewriteTransferRead(cast<vector::TransferReadOp>(o));
      if (!ok)
        return false;
    }
    for (Operation *o : deallocs)
      o->erase();
    return removeBuffer(views, pb.init, pb.alloc, "padded buffer still used after guarding its reads");
  }
};

/// A result computed into a padded buffer (a tile that overhangs the result), copied out of
/// its interior after the kernels: `memref.copy(subview(alloc)[0..][dest shape], dest)`.
struct ResultBuffer {
  memref::AllocOp alloc;
  Value dest;
  SmallVector<int64_t> shape;    // dest's (the interior's) shape
  SmallVector<Operation *> init; // the copy out, a dead copy in and its source, the interior view
  SmallVector<int64_t> padded;   // dims the alloc is larger on
};

/// A fill of `buf` with a constant (`linalg.fill`, or a `linalg.map` yielding a constant).
bool isFillOf(Operation *op, Value buf) {
  StringRef name = op->getName().getStringRef();
  if (name == "linalg.fill")
    return op->getNumOperands() == 2 && op->getOperand(1) == buf;
  if (name != "linalg.map" || op->getNumOperands() != 1 || op->getOperand(0) != buf)
    return false;
  Block &body = op->getRegion(0).front();
  for (Operation &o : body.without_terminator())
    if (!isa<arith::ConstantOp>(o) && o.getName().getStringRef() != "linalg.index")
      return false;
  return true;
}

std::optional<ResultBuffer> resultBuffer(memref::AllocOp alloc) {
  Value buf = alloc.getResult();
  auto mt = cast<MemRefType>(buf.getType());
  if (!mt.hasStaticShape())
    return std::nullopt;
  for (OpOperand &use : buf.getUses()) {
    auto sv = dyn_cast<memref::SubViewOp>(use.getOwner());
    if (!sv || use.getOperandNumber() != 0)
      continue;
    ArrayRef<int64_t> offs = sv.getStaticOffsets(), sizes = sv.getStaticSizes(),
                      strides = sv.getStaticStrides();
    if (llvm::any_of(offs, [](int64_t x) { return x != 0; }) ||
        llvm::any_of(strides, [](int64_t x) { return x != 1; }) || sv.getType().getRank() != mt.getRank())
      continue;
    // the copy out, and at most a copy in of an uninitialised buffer (a `tensor.empty` result
    // padded: bufferization copies the garbage in; the kernel writes every element read out)
    memref::CopyOp out, in;
    bool other = false;
    for (OpOperand &u : sv.getResult().getUses()) {
      auto copy = dyn_cast<memref::CopyOp>(u.getOwner());
      if (copy && u.getOperandNumber() == 0 && !out)
        out = copy;
      else if (copy && u.getOperandNumber() == 1 && !in && copy.getSource().getDefiningOp<memref::AllocOp>() &&
               copy.getSource().hasOneUse())
        in = copy;
      else
        other = true;
    }
    if (other || !out || out->getBlock() != alloc->getBlock() || (in && in->getBlock() != alloc->getBlock()))
      continue;
    auto dt = dyn_cast<MemRefType>(out.getTarget().getType());
    if (!dt || !dt.hasStaticShape() || dt.getShape() != sizes)
      continue;
    ResultBuffer rb{alloc, out.getTarget(), SmallVector<int64_t>(sizes), {out}, {}};
    if (in) {
      rb.init.push_back(in);
      rb.init.push_back(in.getSource().getDefiningOp());
    }
    rb.init.push_back(sv);
    for (int64_t k = 0; k < mt.getRank(); ++k)
      if (sizes[k] != mt.getShape()[k])
        rb.padded.push_back(k);
    if (rb.padded.empty())
      return std::nullopt;
    return rb;
  }
  return std::nullopt;
}

/// Moves every access of a padded result buffer onto its destination (see GpuOptPasses.td):
/// each access becomes 1-D transfers along a row of the destination (a rank-reducing view of
/// it, one per row, so `ansor-gpu-hoist-accumulators` still pairs a thread's reads and writes),
/// not in bounds on the row: lanes past its end are masked, and a row outside the destination
/// (clamped into it for the view) reads and writes at the row's end, every lane masked. No
/// branch: masked loads and stores.
struct ResultGuard : ViewWalk {
  ResultBuffer &rb;

  ResultGuard(ResultBuffer &rb) : ViewWalk{rb.alloc.getResult(), std::nullopt}, rb(rb) {}

  /// Rewrites one access: `view` at `baseIdx`, a vector of `shape` (empty: a scalar) whose dim
  /// r is the view's dim `vdims[r]`; `value` is what a write stores. Returns the value read
  /// (null for a write), or nullopt on error.
  std::optional<Value> rewrite(Operation *op, Value view, ValueRange baseIdx, ArrayRef<int64_t> shape,
                               ArrayRef<std::optional<int64_t>> vdims, Type elem, Value value) {
    Location loc = op->getLoc();
    OpBuilder ob(op);
    IndexBuilder b{ob, loc};
    int64_t rank = (int64_t)rb.shape.size();
    std::optional<SmallVector<int64_t>> rootDims = dimsToRoot(view);
    if (!rootDims)
      return std::nullopt;
    bool contiguous = false;
    if (!shape.empty() && (*rootDims)[*vdims.back()] == rank - 1) {
      std::optional<bool> unit = unitStride(view, *vdims.back());
      if (!unit)
        return std::nullopt;
      contiguous = *unit;
    }
    int64_t piece = contiguous ? shape.back() : 1;
    SmallVector<int64_t> outer(shape.begin(), shape.end() - (contiguous ? 1 : 0));
    auto pieceT = VectorType::get({piece}, elem);
    // a read: the padding of masked lanes, and the value read, assembled piece by piece
    Value zero, result;
    if (!value) {
      zero = arith::ConstantOp::create(ob, loc, ob.getZeroAttr(elem));
      if (!shape.empty()) {
        auto vt = VectorType::get(shape, elem);
        result = arith::ConstantOp::create(ob, loc, vt, DenseElementsAttr::get(vt, ob.getZeroAttr(elem)));
      }
    }
    SmallVector<int64_t> pos(outer.size(), 0);
    bool done = llvm::is_contained(outer, 0);
    while (!done) {
      SmallVector<Ix> idx = positionIndices(baseIdx, pos, vdims, b);
      std::optional<SmallVector<Ix>> p = rootIndices(op, view, idx, b);
      if (!p)
        return std::nullopt;
      // rows (all dims but the last) outside dest: known, or an i1 `rowOk`
      Value rowOk;
      bool out = false;
      SmallVector<Ix> q(*p);
      for (int64_t k : rb.padded) {
        if (k == rank - 1)
          continue;
        if (q[k].isConst()) {
          out = out || q[k].c >= rb.shape[k];
          continue;
        }
        Value bound = b.value(Ix{Value(), rb.shape[k]});
        Value c = arith::CmpIOp::create(ob, loc, arith::CmpIPredicate::ult, q[k].v, bound);
        rowOk = rowOk ? Value(arith::AndIOp::create(ob, loc, rowOk, c)) : c;
        q[k] = Ix{arith::MinUIOp::create(ob, loc, q[k].v, b.value(Ix{Value(), rb.shape[k] - 1}))};
      }
      Value piecePart;
      if (value && !out) {
        if (shape.empty())
          piecePart = vector::BroadcastOp::create(ob, loc, pieceT, value);
        else if (contiguous && shape.size() == 1)
          piecePart = value;
        else if (contiguous)
          piecePart = vector::ExtractOp::create(ob, loc, value, pos);
        else
          piecePart = vector::BroadcastOp::create(ob, loc, pieceT,
                                                  vector::ExtractOp::create(ob, loc, value, pos));
      }
      Value got;
      if (!out) {
        Value col = b.value(q[rank - 1]);
        if (rowOk)
          col = arith::SelectOp::create(ob, loc, rowOk, col, b.value(Ix{Value(), rb.shape[rank - 1]}));
        Value row = rb.dest;
        if (rank > 1) {
          SmallVector<OpFoldResult> offs, sizes, strides;
          for (int64_t k = 0; k < rank; ++k) {
            offs.push_back(k == rank - 1 ? OpFoldResult(ob.getIndexAttr(0))
                                         : (q[k].isConst() ? OpFoldResult(ob.getIndexAttr(q[k].c))
                                                           : OpFoldResult(q[k].v)));
            sizes.push_back(ob.getIndexAttr(k == rank - 1 ? rb.shape[k] : 1));
            strides.push_back(ob.getIndexAttr(1));
          }
          auto destT = cast<MemRefType>(rb.dest.getType());
          auto rowT = memref::SubViewOp::inferRankReducedResultType({rb.shape[rank - 1]}, destT,
                                                                    offs, sizes, strides);
          row = memref::SubViewOp::create(ob, loc, cast<MemRefType>(rowT), rb.dest, offs, sizes,
                                          strides);
        }
        auto map = AffineMapAttr::get(AffineMap::getMinorIdentityMap(1, 1, op->getContext()));
        if (value)
          vector::TransferWriteOp::create(ob, loc, piecePart, row, ValueRange{col}, map, Value(),
                                          ob.getBoolArrayAttr({false}));
        else
          got = vector::TransferReadOp::create(ob, loc, pieceT, row, ValueRange{col}, map, zero,
                                               Value(), ob.getBoolArrayAttr({false}));
      }
      if (!value) {
        if (!got)
          got = arith::ConstantOp::create(ob, loc, pieceT, DenseElementsAttr::get(pieceT, ob.getZeroAttr(elem)));
        if (shape.empty())
          result = vector::ExtractOp::create(ob, loc, got, ArrayRef<int64_t>{0});
        else if (contiguous && shape.size() == 1)
          result = got;
        else if (contiguous)
          result = vector::InsertOp::create(ob, loc, got, result, pos);
        else
          result = vector::InsertOp::create(ob, loc, vector::ExtractOp::create(ob, loc, got, ArrayRef<int64_t>{0}),
                                            result, pos);
      }
      done = !nextPosition(pos, outer);
    }
    return value ? Value() : result;
  }

  /// The view dims of a transfer's vector dims; nullopt (and an error) for a broadcast dim.
  std::optional<SmallVector<std::optional<int64_t>>> transferDims(Operation *op, AffineMap map) {
    SmallVector<std::optional<int64_t>> dims;
    for (AffineExpr e : map.getResults()) {
      auto d = dyn_cast<AffineDimExpr>(e);
      if (!d) {
        fail(op, "broadcasting transfer of a padded result buffer");
        return std::nullopt;
      }
      dims.push_back(d.getPosition());
    }
    return dims;
  }

  bool rewriteOne(Operation *o) {
    std::optional<Value> r;
    if (auto ld = dyn_cast<memref::LoadOp>(o)) {
      r = rewrite(o, ld.getMemref(), ld.getIndices(), {}, {}, ld.getType(), Value());
    } else if (auto st = dyn_cast<memref::StoreOp>(o)) {
      r = rewrite(o, st.getMemref(), st.getIndices(), {}, {}, st.getValueToStore().getType(),
                  st.getValueToStore());
    } else if (auto tr = dyn_cast<vector::TransferReadOp>(o)) {
      if (tr.getMask())
        return fail(o, "masked transfer_read of a padded result buffer");
      std::optional<SmallVector<std::optional<int64_t>>> dims = transferDims(o, tr.getPermutationMap());
      if (!dims)
        return false;
      r = rewrite(o, tr.getBase(), tr.getIndices(), tr.getVectorType().getShape(), *dims,
                  tr.getVectorType().getElementType(), Value());
    } else {
      auto tw = cast<vector::TransferWriteOp>(o);
      if (tw.getMask())
        return fail(o, "masked transfer_write of a padded result buffer");
      std::optional<SmallVector<std::optional<int64_t>>> dims = transferDims(o, tw.getPermutationMap());
      if (!dims)
        return false;
      r = rewrite(o, tw.getBase(), tw.getIndices(), tw.getVectorType().getShape(), *dims,
                  tw.getVectorType().getElementType(), tw.getVector());
    }
    if (!r)
      return false;
    if (*r)
      o->getResult(0).replaceAllUsesWith(*r);
    o->erase();
    return true;
  }

  /// Linalg ops and copies inside the kernels that access the buffer (a one-element tile's copy
  /// left as `linalg.copy`) become loops of loads and stores first; false on error. The
  /// host-side fill (in the alloc's block) is not one of them.
  bool accessorsToLoops() {
    SmallVector<Operation *> ops, views;
    walkUses(rb.init, views, [&](OpOperand &use, Value) {
      Operation *o = use.getOwner();
      bool kernel = o->getBlock() != rb.alloc->getBlock();
      if (kernel && (isa<linalg::LinalgOp>(o) || (isa<memref::CopyOp>(o) && o->getOperand(0) != o->getOperand(1))) &&
          !llvm::is_contained(ops, o))
        ops.push_back(o);
      return true;
    });
    return lowerToLoops(ops, "accessing a padded result buffer");
  }

  /// Moves every access of the buffer to dest and removes it; false on error (see `err`).
  bool run() {
    // a destination allocated after the kernel (an intermediate of a task of several kernels,
    // targets/cuda/multi_kernel.py): allocated before the padded buffer, so the kernel's
    // accesses of it are dominated by it
    if (auto a = rb.dest.getDefiningOp<memref::AllocOp>();
        a && a->getNumOperands() == 0 && a->getBlock() == rb.alloc->getBlock() && rb.alloc->isBeforeInBlock(a))
      a->moveBefore(rb.alloc);
    if (!accessorsToLoops())
      return false;
    SmallVector<Operation *> accesses, views, gone, fills;
    bool reads = false;
    bool ok = walkUses(rb.init, views, [&](OpOperand &use, Value v) {
      Operation *o = use.getOwner();
      unsigned n = use.getOperandNumber();
      if (isa<vector::TransferReadOp, memref::LoadOp>(o) && n == 0 && o->getResult(0).use_empty()) {
        // a read nothing uses (a lowered copy's load of its output): not a read of the fill
        gone.push_back(o);
      } else if ((isa<vector::TransferReadOp, memref::LoadOp>(o) && n == 0) ||
                 (isa<vector::TransferWriteOp, memref::StoreOp>(o) && n == 1)) {
        reads = reads || isa<vector::TransferReadOp, memref::LoadOp>(o);
        accesses.push_back(o);
      } else if (v == rb.alloc.getResult() && isFillOf(o, v) && o->getBlock() == rb.alloc->getBlock()) {
        fills.push_back(o); // dead when nothing reads the buffer
      } else if (isa<memref::DeallocOp>(o) ||
                 (isa<memref::CopyOp>(o) && o->getOperand(0) == o->getOperand(1))) {
        gone.push_back(o); // a dealloc, a copy of a view onto itself
      } else {
        return fail(o, "padded result buffer used by '" + o->getName().getStringRef().str() +
                           "' (only loads and stores can be guarded)");
      }
      return true;
    });
    if (!ok)
      return false;
    if (!fills.empty() && reads)
      return fail(fills.front(), "padded result buffer filled outside the kernel that reads it");
    for (Operation *o : gone)
      o->erase();
    for (Operation *o : fills)
      o->erase();
    for (Operation *o : accesses)
      if (!rewriteOne(o))
        return false;
    return removeBuffer(views, rb.init, rb.alloc, "padded result buffer still used after moving its accesses");
  }
};

/// Finds every buffer `find` recognises in the module's functions, then guards each with a
/// `G`; false (after the error) when one fails.
template <typename G, typename Buffer>
bool guardAll(ModuleOp module, std::optional<Buffer> (*find)(memref::AllocOp)) {
  std::vector<Buffer> bufs;
  for (Operation &f : module.getBody()->getOperations()) {
    if (f.getName().getStringRef() != "func.func")
      continue;
    f.walk<WalkOrder::PreOrder>([&](memref::AllocOp alloc) {
      if (isWorkgroup(alloc.getType()))
        return;
      if (std::optional<Buffer> b = find(alloc))
        bufs.push_back(std::move(*b));
    });
  }
  for (Buffer &b : bufs) {
    G g(b);
    if (!g.run()) {
      g.err->op->emitError() << g.err->msg;
      return false;
    }
  }
  return true;
}

struct GpuGuardPaddedReads
    : public ansor::impl::GpuGuardPaddedReadsBase<GpuGuardPaddedReads> {
  void runOnOperation() override {
    if (!guardAll<Guard, PadBuffer>(getOperation(), padBuffer) ||
        !guardAll<ResultGuard, ResultBuffer>(getOperation(), resultBuffer))
      return signalPassFailure();
  }
};

} // namespace

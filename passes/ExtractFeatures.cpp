//===- ExtractFeatures.cpp - ansor-extract-features -------------------------------===//
//
// scheduled payload (scf / vector / tensor / leftover linalg) --per storing statement-->
//   fixed-length feature row (Ansor's program features; definitions in Passes.td)
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

namespace mlir::ansor {
#define GEN_PASS_DEF_EXTRACTFEATURES
#include "passes/Passes.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;

namespace {

//===----------------------------------------------------------------------------===//
// Feature layout
//===----------------------------------------------------------------------------===//

enum Feature : int {
  // Compute (per statement, x executions x lanes).
  FloatMad, FloatAddSub, FloatMul, FloatDivMod, FloatCmp, FloatMath, IntOps,
  // Vectorization (the stored vector).
  VecNum, VecProd, VecLen, VecPosNone, VecPosInner, VecPosMiddle, VecPosOuter,
  // Unrolling (ansor.auto_unroll_max_step in effect).
  UnrollMaxStep, UnrollNum, UnrollProd, UnrollLen,
  // Parallelization (scf.forall dimensions).
  ParNum, ParProd, ParLen, ParPosNone, ParPosInner, ParPosMiddle, ParPosOuter,
  // The statement's loop nest.
  LoopProd, NumLoops, InnermostLen,
  BufferBase,
};

constexpr int kMaxBuffers = 5;
enum BufferField : int {
  AccRead, AccWrite, AccReadWrite, Bytes, UniqueBytes, Lines, UniqueLines, ReuseLoop,
  ReuseSerial, ReuseNone, ReuseDisIter, ReuseDisBytes, ReuseCt, BytesDReuseCt,
  UniqueBytesDReuseCt, LinesDReuseCt, UniqueLinesDReuseCt, Stride, kBufferFields,
};
constexpr int kCurvePoints = 10;
constexpr int kCurveBase = BufferBase + kMaxBuffers * kBufferFields;
enum TailFeature : int {
  AllocSize = kCurveBase + kCurvePoints, AllocProd, AllocOuterProd, AllocInnerProd, OuterProd,
  NumOuterLoops,
  // The tensor-core (wgmma + TMA) kernel of the statement's function, from its `ansor.tc.*`
  // annotation (all zero on other functions): knobs, MMA counts, shared memory and TMA bytes,
  // grid, waves over the SMs, and intensity per block.
  TcBase, TcProgram = TcBase, TcBm, TcBn, TcBk, TcWarpgroups, TcWarpgroupRows, TcMmaN,
  TcMmaPerKBlock, TcMmaPerTile, TcAccPerThread, TcThreads, TcStages, TcWait, TcGroup, TcWs,
  TcPersist, TcSplitK, TcTileWidth, TcKBlocks, TcStaged, TcSmemBytes, TcTmaBytes, TcTiles,
  TcBlocks, TcBlocksPerSm, TcSmFill, TcWaves, TcWaveEff, TcTileEff, TcIntensity, TcFlopsPerTile,
  // The CUDA-core kernel's shared-memory buffers per cached tile (`ansor.pipeline_stages` of
  // the enclosing op; 0 where none: CPU programs, tensor-core kernels).
  PipelineStages,
  // The rows of a row-wise kernel one block runs (`ansor.rows_per_block` of the enclosing
  // launch, the row sketch's `rows` knob: `ansor-gpu-pack-rows-into-blocks` divides the grid by
  // it after the loops the features see); 0 where none.
  RowsPerBlock,
  // The GPU launch the statement runs in (its nearest enclosing gpu.launch): blocks in the grid
  // and threads per block, products of its constant sizes; 0 where there is none. Every other
  // feature of a kernel statement is per thread, so without these two a 64x64 block tile of 256
  // threads and a 32x64 one of 128 looked alike but for the per-thread work.
  LaunchBlocks, LaunchThreads,
  kNumFeatures,
};
constexpr int kNumTc = PipelineStages - TcBase;
constexpr int64_t kCacheLine = 64;
constexpr llvm::StringLiteral kPipelineStagesAttr = "ansor.pipeline_stages";
constexpr llvm::StringLiteral kRowsPerBlockAttr = "ansor.rows_per_block";

const char *const kHeadNames[BufferBase] = {
    "float_mad", "float_addsub", "float_mul", "float_divmod", "float_cmp", "float_math",
    "int_ops", "vec_num", "vec_prod", "vec_len", "vec_pos_none", "vec_pos_inner",
    "vec_pos_middle", "vec_pos_outer", "unroll_max_step", "unroll_num", "unroll_prod",
    "unroll_len", "par_num", "par_prod", "par_len", "par_pos_none", "par_pos_inner",
    "par_pos_middle", "par_pos_outer", "loop_prod", "num_loops", "innermost_len"};
const char *const kBufferNames[kBufferFields] = {
    "acc_read", "acc_write", "acc_rw", "bytes", "unique_bytes", "lines", "unique_lines",
    "reuse_loop", "reuse_serial", "reuse_none", "reuse_dis_iter", "reuse_dis_bytes", "reuse_ct",
    "bytes_d_reuse_ct", "unique_bytes_d_reuse_ct", "lines_d_reuse_ct",
    "unique_lines_d_reuse_ct", "stride"};
const char *const kTailNames[TcBase - AllocSize] = {
    "alloc_size", "alloc_prod", "alloc_outer_prod", "alloc_inner_prod", "outer_prod",
    "num_outer_loops"};
const char *const kTcNames[kNumTc] = {
    "tc", "tc_bm", "tc_bn", "tc_bk", "tc_warpgroups", "tc_warpgroup_rows", "tc_mma_n",
    "tc_mma_per_kblock", "tc_mma_per_tile", "tc_acc_per_thread", "tc_threads", "tc_stages",
    "tc_wait", "tc_group", "tc_ws", "tc_persist", "tc_splitk", "tc_tw", "tc_kblocks",
    "tc_staged", "tc_smem_bytes", "tc_tma_bytes", "tc_tiles", "tc_blocks", "tc_blocks_per_sm",
    "tc_sm_fill", "tc_waves", "tc_wave_eff", "tc_tile_eff", "tc_intensity", "tc_flops_per_tile"};
const char *const kLastNames[kNumFeatures - PipelineStages] = {"pipeline_stages", "rows_per_block",
                                                                "launch_blocks", "launch_threads"};

const std::vector<std::string> &names() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> v(kHeadNames, kHeadNames + BufferBase);
    for (int b = 0; b < kMaxBuffers; ++b)
      for (const char *f : kBufferNames)
        v.push_back("B" + std::to_string(b) + "." + f);
    for (int i = 0; i < kCurvePoints; ++i)
      v.push_back("ai_" + std::to_string(i));
    v.insert(v.end(), kTailNames, kTailNames + (TcBase - AllocSize));
    v.insert(v.end(), kTcNames, kTcNames + kNumTc);
    v.insert(v.end(), kLastNames, kLastNames + (kNumFeatures - PipelineStages));
    return v;
  }();
  return all;
}

//===----------------------------------------------------------------------------===//
// Loops and linear index expressions
//===----------------------------------------------------------------------------===//

/// A loop variable: an induction variable (ptr = its Value), or dimension `dim` of a
/// leftover linalg / pad op's iteration domain (ptr = the op).
using Key = std::pair<const void *, unsigned>;

struct LoopEntry {
  Key key;
  double trip = 1, step = 1;
  bool parallel = false;
  scf::ForOp forOp; // null for forall dims and op-domain dims
};
using Chain = SmallVector<LoopEntry, 8>;

/// c + sum(coef * var): an index in terms of loop variables (approximate for div/mod/min).
struct LinExpr {
  int64_t c = 0;
  SmallVector<std::pair<Key, int64_t>, 4> terms;
  void add(const LinExpr &o, int64_t scale = 1) {
    c += o.c * scale;
    for (auto &[k, v] : o.terms) {
      auto it = llvm::find_if(terms, [&](auto &t) { return t.first == k; });
      if (it == terms.end())
        terms.push_back({k, v * scale});
      else
        it->second += v * scale;
    }
  }
  int64_t coeff(Key k) const {
    for (auto &[kk, v] : terms)
      if (kk == k)
        return v;
    return 0;
  }
  bool isConst() const { return terms.empty(); }
};

/// Static trip count of one loop dimension; nullopt when a bound or the step is not constant.
std::optional<double> staticTrip(OpFoldResult lb, OpFoldResult ub, OpFoldResult step) {
  auto l = getConstantIntValue(lb), u = getConstantIntValue(ub), s = getConstantIntValue(step);
  if (!l || !u || !s || *s <= 0)
    return std::nullopt;
  return *u > *l ? double((*u - *l + *s - 1) / *s) : 0;
}

double tripOf(OpFoldResult lb, OpFoldResult ub, OpFoldResult step) {
  return staticTrip(lb, ub, step).value_or(1);
}

/// Size of dimension `d` of a ranked tensor `v`; a dynamic size is taken from a `tensor.cast` of
/// `v` to a static size (what canonicalization folds into `v`'s type), else ShapedType::kDynamic.
int64_t staticDim(Value v, unsigned d) {
  auto t = cast<ShapedType>(v.getType());
  if (!t.isDynamicDim(d))
    return t.getDimSize(d);
  for (Operation *u : v.getUsers())
    if (auto c = dyn_cast<tensor::CastOp>(u))
      if (auto ct = dyn_cast<RankedTensorType>(c.getType()); ct && !ct.isDynamicDim(d))
        return ct.getDimSize(d);
  // A slice whose size is a constant SSA value (folding would make the type static).
  if (auto ex = v.getDefiningOp<tensor::ExtractSliceOp>()) {
    llvm::SmallBitVector dropped = ex.getDroppedDims();
    auto sizes = ex.getMixedSizes();
    for (unsigned i = 0, j = 0; i < sizes.size(); ++i) {
      if (dropped[i])
        continue;
      if (j++ == d)
        return getConstantIntValue(sizes[i]).value_or(ShapedType::kDynamic);
    }
  }
  return ShapedType::kDynamic;
}

/// Static loop ranges of a linalg op, dynamic ones resolved through `staticDim` of its operands.
SmallVector<int64_t> loopRanges(linalg::LinalgOp op) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (llvm::none_of(ranges, ShapedType::isDynamic))
    return ranges;
  SmallVector<int64_t> flat; // operand dims in the order of LinalgOp::getStaticShape
  for (OpOperand &o : op->getOpOperands())
    if (auto t = dyn_cast<ShapedType>(o.get().getType()); t && t.hasRank())
      for (unsigned d = 0; d < unsigned(t.getRank()); ++d)
        flat.push_back(staticDim(o.get(), d));
  AffineMap m = op.getShapesToLoopsMap();
  if (!m || m.getNumResults() != ranges.size())
    return ranges;
  for (auto [i, e] : llvm::enumerate(m.getResults()))
    if (auto de = dyn_cast<AffineDimExpr>(e); de && ShapedType::isDynamic(ranges[i]) &&
                                                de.getPosition() < flat.size())
      ranges[i] = flat[de.getPosition()];
  return ranges;
}

/// Whether `op` is a loop that runs its body exactly once: canonicalization inlines its body and
/// its attributes (an unroll pragma) are lost, so features treat it as absent.
bool singleIteration(Operation *op) {
  if (auto f = dyn_cast<scf::ForOp>(op)) {
    std::optional<APInt> t = f.getStaticTripCount();
    return t && *t == 1;
  }
  if (auto f = dyn_cast<scf::ForallOp>(op)) {
    auto lbs = f.getMixedLowerBound(), ubs = f.getMixedUpperBound(), st = f.getMixedStep();
    for (unsigned i = 0; i < f.getRank(); ++i)
      if (staticTrip(lbs[i], ubs[i], st[i]) != 1.0)
        return false;
    return true;
  }
  return false;
}

/// Everything computed once per extraction root.
class Extractor {
public:
  explicit Extractor(Operation *root) : root(root) {}
  LogicalResult run(std::vector<std::array<float, kNumFeatures>> &rows,
                    SmallVectorImpl<Operation *> &stmts);

private:
  struct Access {
    Operation *op;
    Value root;
    bool read;
    SmallVector<LinExpr, 4> off; // per root dim
    SmallVector<int64_t, 4> box; // elements touched per execution, per root dim
    SmallVector<int64_t, 4> shape;
    int64_t elemBytes = 4;
    double exec = 1;  // executions of `op` (incl. op-domain dims)
    unsigned depth;   // loops (of the statement chain) enclosing the access
  };
  struct Stmt {
    Operation *store;
    Chain chain;              // loops of the statement, outermost first
    unsigned storeDepth;      // how many of them enclose the store op itself
    double compute[7] = {0, 0, 0, 0, 0, 0, 0};
    SmallVector<Access, 8> accesses;
    VectorType vec;
  };

  Chain chainOf(Operation *op);
  const LinExpr &eval(Value v);
  LinExpr evalAffine(AffineExpr e, ArrayRef<LinExpr> dims, ArrayRef<LinExpr> syms);
  LinExpr ofr(OpFoldResult f) {
    if (auto c = getConstantIntValue(f))
      return LinExpr{*c, {}};
    return eval(cast<Value>(f));
  }
  /// Follows `t` up to the buffer it views, mapping offsets/box into the buffer's dims.
  Value resolve(Value t, SmallVectorImpl<LinExpr> &off, SmallVectorImpl<int64_t> &box);
  void addAccess(Stmt &s, Operation *op, Value tensor, bool read, SmallVector<LinExpr, 4> off,
                 SmallVector<int64_t, 4> box, double exec, unsigned depth);
  void addTransfer(Stmt &s, Operation *op, Value base, ValueRange indices, AffineMap perm,
                   VectorType vt, bool read, const Chain &opChain);
  void addCompute(Stmt &s, Operation *op, double exec);
  bool vectorStmt(vector::TransferWriteOp w, Stmt &s);
  void copyStmt(Operation *op, Value src, Value dest, Stmt &s);
  void linalgStmt(linalg::LinalgOp op, Stmt &s);
  void padStmt(tensor::PadOp op, Stmt &s);
  void featurize(Stmt &s, std::array<float, kNumFeatures> &row);
  double work(scf::ForOp loop);
  using TcRow = std::array<float, kNumTc>;
  /// The tensor-core kernel features of the function holding `op` (null: not annotated).
  const TcRow *tcOf(Operation *op);
  std::optional<TcRow> tcKernel(Operation *func);

  Operation *root;
  DenseMap<Value, LinExpr> evalCache;
  DenseMap<Operation *, Chain> chainCache;
  DenseMap<Operation *, std::optional<double>> workCache;
  DenseMap<Operation *, std::optional<TcRow>> tcCache;
  DenseSet<Value> outputs;
};

Chain Extractor::chainOf(Operation *op) {
  // Ops in the same region share their loops: cache by the parent op.
  Operation *parent = op->getParentOp();
  if (!parent || op == root)
    return {};
  auto it = chainCache.find(parent);
  if (it != chainCache.end())
    return it->second;
  SmallVector<Operation *, 8> loops;
  for (Operation *p = op->getParentOp(); p && p != root->getParentOp(); p = p->getParentOp()) {
    if (isa<scf::ForOp, scf::ForallOp, scf::ParallelOp>(p))
      loops.push_back(p);
    if (p == root)
      break;
  }
  Chain chain;
  // A loop (dimension) with exactly one iteration is no loop: skipping it here gives the
  // features canonicalization would (it folds such loops away), without running it.
  for (Operation *p : llvm::reverse(loops)) {
    if (auto f = dyn_cast<scf::ForOp>(p)) {
      if (singleIteration(f))
        continue;
      std::optional<APInt> t = f.getStaticTripCount();
      LoopEntry e;
      e.key = {f.getInductionVar().getAsOpaquePointer(), 0};
      e.trip = t && t->getActiveBits() <= 62 ? double(t->getZExtValue()) : 1;
      e.step = double(getConstantIntValue(f.getStep()).value_or(1));
      e.forOp = f;
      chain.push_back(e);
    } else if (auto f = dyn_cast<scf::ForallOp>(p)) {
      auto lbs = f.getMixedLowerBound(), ubs = f.getMixedUpperBound(), st = f.getMixedStep();
      for (auto [i, iv] : llvm::enumerate(f.getInductionVars())) {
        if (staticTrip(lbs[i], ubs[i], st[i]) == 1.0)
          continue;
        LoopEntry e;
        e.key = {iv.getAsOpaquePointer(), 0};
        e.trip = tripOf(lbs[i], ubs[i], st[i]);
        e.step = double(getConstantIntValue(st[i]).value_or(1));
        e.parallel = true;
        chain.push_back(e);
      }
    } else if (auto f = dyn_cast<scf::ParallelOp>(p)) {
      for (auto [i, iv] : llvm::enumerate(f.getInductionVars())) {
        if (staticTrip(f.getLowerBound()[i], f.getUpperBound()[i], f.getStep()[i]) == 1.0)
          continue;
        LoopEntry e;
        e.key = {iv.getAsOpaquePointer(), 0};
        e.trip = tripOf(f.getLowerBound()[i], f.getUpperBound()[i], f.getStep()[i]);
        e.step = double(getConstantIntValue(f.getStep()[i]).value_or(1));
        e.parallel = true;
        chain.push_back(e);
      }
    }
  }
  chainCache[parent] = chain;
  return chain;
}

const LinExpr &Extractor::eval(Value v) {
  auto it = evalCache.find(v);
  if (it != evalCache.end())
    return it->second;
  LinExpr r;
  evalCache[v] = r; // guards against cycles through block arguments
  if (auto c = getConstantIntValue(v)) {
    r.c = *c;
  } else if (auto ba = dyn_cast<BlockArgument>(v)) {
    Operation *owner = ba.getOwner()->getParentOp();
    // The variable of a single-iteration loop (not in the chain, see chainOf) is its lower bound.
    if (auto f = dyn_cast_or_null<scf::ForOp>(owner)) {
      if (v == f.getInductionVar() && singleIteration(f))
        r = eval(f.getLowerBound());
      else if (v == f.getInductionVar())
        r.terms.push_back({{v.getAsOpaquePointer(), 0}, 1});
    } else if (auto f = dyn_cast_or_null<scf::ForallOp>(owner)) {
      unsigned i = ba.getArgNumber();
      if (i < f.getRank()) {
        OpFoldResult lb = f.getMixedLowerBound()[i];
        if (staticTrip(lb, f.getMixedUpperBound()[i], f.getMixedStep()[i]) == 1.0)
          r.c = *getConstantIntValue(lb);
        else
          r.terms.push_back({{v.getAsOpaquePointer(), 0}, 1});
      }
    } else if (isa_and_nonnull<scf::ParallelOp>(owner)) {
      r.terms.push_back({{v.getAsOpaquePointer(), 0}, 1});
    }
  } else if (Operation *op = v.getDefiningOp()) {
    auto operandExprs = [&](ValueRange vals) {
      SmallVector<LinExpr, 4> out;
      for (Value o : vals)
        out.push_back(eval(o));
      return out;
    };
    if (auto ap = dyn_cast<affine::AffineApplyOp>(op)) {
      AffineMap m = ap.getAffineMap();
      auto vals = operandExprs(ap.getMapOperands());
      r = evalAffine(m.getResult(0), ArrayRef(vals).take_front(m.getNumDims()),
                     ArrayRef(vals).drop_front(m.getNumDims()));
    } else if (isa<affine::AffineMinOp, affine::AffineMaxOp>(op)) {
      // Exact when every result is constant; otherwise the tightest constant result (a tile
      // size bounding a remainder), else the first. Independent of the order of the results,
      // which canonicalization may change.
      auto m = op->getAttrOfType<AffineMapAttr>("map").getValue();
      auto vals = operandExprs(op->getOperands());
      bool isMin = isa<affine::AffineMinOp>(op);
      std::optional<int64_t> best;
      for (AffineExpr res : m.getResults()) {
        LinExpr x = evalAffine(res, ArrayRef(vals).take_front(m.getNumDims()),
                               ArrayRef(vals).drop_front(m.getNumDims()));
        if (x.isConst())
          best = !best ? x.c : isMin ? std::min(*best, x.c) : std::max(*best, x.c);
      }
      if (best)
        r.c = *best;
      else if (m.getNumResults() > 0)
        r = evalAffine(m.getResult(0), ArrayRef(vals).take_front(m.getNumDims()),
                       ArrayRef(vals).drop_front(m.getNumDims()));
    } else if (isa<arith::AddIOp, arith::SubIOp>(op)) {
      r = eval(op->getOperand(0));
      r.add(eval(op->getOperand(1)), isa<arith::SubIOp>(op) ? -1 : 1);
    } else if (isa<arith::MulIOp>(op)) {
      LinExpr a = eval(op->getOperand(0)), b = eval(op->getOperand(1));
      if (b.isConst())
        r.add(a, b.c);
      else if (a.isConst())
        r.add(b, a.c);
    } else if (isa<arith::IndexCastOp>(op)) {
      r = eval(op->getOperand(0));
    }
  }
  return evalCache[v] = r;
}

LinExpr Extractor::evalAffine(AffineExpr e, ArrayRef<LinExpr> dims, ArrayRef<LinExpr> syms) {
  LinExpr r;
  if (auto c = dyn_cast<AffineConstantExpr>(e)) {
    r.c = c.getValue();
  } else if (auto d = dyn_cast<AffineDimExpr>(e)) {
    if (d.getPosition() < dims.size())
      r = dims[d.getPosition()];
  } else if (auto s = dyn_cast<AffineSymbolExpr>(e)) {
    if (s.getPosition() < syms.size())
      r = syms[s.getPosition()];
  } else if (auto b = dyn_cast<AffineBinaryOpExpr>(e)) {
    LinExpr l = evalAffine(b.getLHS(), dims, syms), rr = evalAffine(b.getRHS(), dims, syms);
    switch (e.getKind()) {
    case AffineExprKind::Add:
      r = l;
      r.add(rr);
      break;
    case AffineExprKind::Mul:
      if (rr.isConst())
        r.add(l, rr.c);
      else if (l.isConst())
        r.add(rr, l.c);
      break;
    case AffineExprKind::FloorDiv:
    case AffineExprKind::CeilDiv:
      // Approximation: coefficients shrink by the divisor (at least 1 when non-zero).
      if (rr.isConst() && rr.c > 0) {
        r.c = l.c / rr.c;
        for (auto [k, v] : l.terms)
          r.terms.push_back({k, v / rr.c ? v / rr.c : (v > 0 ? 1 : -1)});
      }
      break;
    case AffineExprKind::Mod:
      r.terms = l.terms; // depends on the same variables; the range is not modelled
      break;
    default:
      break;
    }
  }
  return r;
}

Value Extractor::resolve(Value t, SmallVectorImpl<LinExpr> &off, SmallVectorImpl<int64_t> &box) {
  for (int steps = 0; steps < 256; ++steps) {
    if (auto ex = t.getDefiningOp<tensor::ExtractSliceOp>()) {
      llvm::SmallBitVector dropped = ex.getDroppedDims();
      auto offs = ex.getMixedOffsets();
      auto strides = ex.getMixedStrides();
      SmallVector<LinExpr, 4> nOff;
      SmallVector<int64_t, 4> nBox;
      unsigned j = 0;
      for (unsigned d = 0; d < offs.size(); ++d) {
        LinExpr o = ofr(offs[d]);
        int64_t stride = getConstantIntValue(strides[d]).value_or(1);
        if (dropped[d] || j >= off.size()) {
          nBox.push_back(1);
        } else {
          o.add(off[j], stride);
          nBox.push_back(box[j]);
          ++j;
        }
        nOff.push_back(std::move(o));
      }
      off.assign(nOff.begin(), nOff.end());
      box.assign(nBox.begin(), nBox.end());
      t = ex.getSource();
      continue;
    }
    if (auto ba = dyn_cast<BlockArgument>(t)) {
      Operation *owner = ba.getOwner()->getParentOp();
      if (auto f = dyn_cast_or_null<scf::ForOp>(owner)) {
        if (OpOperand *init = f.getTiedLoopInit(ba)) {
          t = init->get();
          continue;
        }
      } else if (auto f = dyn_cast_or_null<scf::ForallOp>(owner)) {
        if (ba.getArgNumber() >= f.getRank()) {
          t = f.getTiedOpOperand(ba)->get();
          continue;
        }
      }
      return t;
    }
    auto res = cast<OpResult>(t);
    Operation *op = res.getOwner();
    unsigned n = res.getResultNumber();
    if (auto f = dyn_cast<scf::ForOp>(op))
      t = f.getInits()[n];
    else if (auto f = dyn_cast<scf::ForallOp>(op))
      t = f.getOutputs()[n];
    else if (auto w = dyn_cast<vector::TransferWriteOp>(op))
      t = w.getBase();
    else if (auto c = dyn_cast<tensor::CastOp>(op))
      t = c.getSource();
    else if (auto dps = dyn_cast<DestinationStyleOpInterface>(op);
             dps && n < dps.getNumDpsInits() && !isa<tensor::PadOp>(op))
      t = dps.getDpsInitOperand(n)->get(); // insert_slice, linalg, ...
    else
      return t;
  }
  return t;
}

void Extractor::addAccess(Stmt &s, Operation *op, Value tensor, bool read,
                          SmallVector<LinExpr, 4> off, SmallVector<int64_t, 4> box,
                          double exec, unsigned depth) {
  Access a;
  a.op = op;
  a.read = read;
  a.root = resolve(tensor, off, box);
  a.off = std::move(off);
  a.box = std::move(box);
  a.exec = exec;
  a.depth = depth;
  if (auto st = dyn_cast<ShapedType>(a.root.getType())) {
    if (st.hasRank())
      for (unsigned i = 0; i < unsigned(st.getRank()); ++i) {
        int64_t d = staticDim(a.root, i);
        a.shape.push_back(ShapedType::isDynamic(d) ? int64_t(1) << 40 : d);
      }
    unsigned bits = st.getElementType().isIntOrFloat() ? st.getElementTypeBitWidth() : 32;
    a.elemBytes = std::max<int64_t>(1, bits / 8);
  }
  a.shape.resize(a.box.size(), int64_t(1) << 40);
  s.accesses.push_back(std::move(a));
}

double execOf(const Chain &c) {
  double p = 1;
  for (const LoopEntry &e : c)
    p *= e.trip;
  return p;
}

int64_t elemsOf(Type t) {
  // Null for an op without results in a body (torch-mlir's `cf.assert` on gather indices).
  if (auto v = dyn_cast_if_present<VectorType>(t))
    return v.getNumElements();
  return 1;
}

void Extractor::addTransfer(Stmt &s, Operation *op, Value base, ValueRange indices,
                            AffineMap perm, VectorType vt, bool read, const Chain &opChain) {
  SmallVector<LinExpr, 4> off;
  for (Value i : indices)
    off.push_back(eval(i));
  SmallVector<int64_t, 4> box(off.size(), 1);
  for (auto [i, r] : llvm::enumerate(perm.getResults()))
    if (auto d = dyn_cast<AffineDimExpr>(r))
      if (d.getPosition() < box.size())
        box[d.getPosition()] = vt.getDimSize(i);
  addAccess(s, op, base, read, std::move(off), std::move(box), execOf(opChain), opChain.size());
}

void Extractor::addCompute(Stmt &s, Operation *op, double exec) {
  int cat = -1;
  double n = double(elemsOf(op->getNumResults() ? op->getResult(0).getType() : Type()));
  Type elem = op->getNumResults() ? getElementTypeOrSelf(op->getResult(0).getType()) : Type();
  if (isa<vector::FMAOp, math::FmaOp>(op)) {
    cat = FloatMad;
  } else if (auto c = dyn_cast<vector::ContractionOp>(op)) {
    SmallVector<int64_t> bounds;
    c.getIterationBounds(bounds);
    n = 1;
    for (int64_t b : bounds)
      n *= double(b);
    cat = isa<FloatType>(elem) ? FloatMad : IntOps;
  } else if (auto o = dyn_cast<vector::OuterProductOp>(op)) {
    cat = o.getAcc() ? FloatMad : FloatMul;
  } else if (isa<vector::ReductionOp, vector::MultiDimReductionOp>(op)) {
    n = double(elemsOf(op->getOperand(0).getType()));
    auto kind = isa<vector::ReductionOp>(op) ? cast<vector::ReductionOp>(op).getKind()
                                             : cast<vector::MultiDimReductionOp>(op).getKind();
    bool fl = isa<FloatType>(getElementTypeOrSelf(op->getOperand(0).getType()));
    if (!fl)
      cat = IntOps;
    else if (kind == vector::CombiningKind::ADD)
      cat = FloatAddSub;
    else if (kind == vector::CombiningKind::MUL)
      cat = FloatMul;
    else
      cat = FloatCmp;
  } else if (isa<arith::AddFOp, arith::SubFOp, arith::NegFOp>(op)) {
    cat = FloatAddSub;
  } else if (isa<arith::MulFOp>(op)) {
    cat = FloatMul;
  } else if (isa<arith::DivFOp, arith::RemFOp>(op)) {
    cat = FloatDivMod;
  } else if (isa<arith::CmpFOp, arith::MaximumFOp, arith::MinimumFOp, arith::MaxNumFOp,
                 arith::MinNumFOp>(op)) {
    cat = FloatCmp;
  } else if (isa<arith::SelectOp>(op)) {
    cat = isa<FloatType>(elem) ? FloatCmp : IntOps;
  } else if (op->getDialect() && op->getDialect()->getNamespace() == "math") {
    cat = FloatMath;
  } else if (isa<arith::ArithDialect>(op->getDialect()) && !isa<arith::ConstantOp>(op) &&
             !isa<CastOpInterface>(op) && op->getNumOperands() > 0) {
    Type t = getElementTypeOrSelf(op->getOperand(0).getType());
    if (t.isInteger())
      cat = IntOps; // index arithmetic (addressing) is not counted
  }
  if (cat >= 0)
    s.compute[cat] += n * exec;
}

/// A vector.transfer_write: its backward slice through vector/scalar values (loop-carried
/// ones included) up to reads, constants and other statements' results.
bool Extractor::vectorStmt(vector::TransferWriteOp w, Stmt &s) {
  s.vec = w.getVectorType();
  Chain storeChain = chainOf(w);
  s.chain = storeChain;
  s.storeDepth = storeChain.size();
  SmallVector<Value, 16> work{w.getValueToStore()};
  DenseSet<Value> seen;
  DenseSet<Operation *> seenOps;
  Chain deepest = storeChain;
  auto visitOp = [&](Operation *op) -> Chain {
    Chain c = chainOf(op);
    if (c.size() > deepest.size())
      deepest = c;
    return c;
  };
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    Type t = v.getType();
    if (!isa<VectorType>(t) && !(t.isIntOrFloat()))
      continue; // tensors, indices: not data flowing into this statement
    if (auto ba = dyn_cast<BlockArgument>(v)) {
      if (auto f = dyn_cast_or_null<scf::ForOp>(ba.getOwner()->getParentOp())) {
        if (OpOperand *init = f.getTiedLoopInit(ba)) {
          work.push_back(init->get());
          work.push_back(f.getTiedLoopYieldedValue(ba)->get());
        }
      }
      continue;
    }
    Operation *op = cast<OpResult>(v).getOwner();
    unsigned n = cast<OpResult>(v).getResultNumber();
    if (auto f = dyn_cast<scf::ForOp>(op)) {
      work.push_back(f.getInits()[n]);
      work.push_back(f.getYieldedValues()[n]);
      continue;
    }
    if (auto f = dyn_cast<scf::IfOp>(op)) {
      work.push_back(f.thenYield().getOperand(n));
      if (!f.getElseRegion().empty())
        work.push_back(f.elseYield().getOperand(n));
      work.push_back(f.getCondition());
      continue;
    }
    if (!seenOps.insert(op).second)
      continue;
    if (auto r = dyn_cast<vector::TransferReadOp>(op)) {
      Chain c = visitOp(op);
      addTransfer(s, op, r.getBase(), r.getIndices(), r.getPermutationMap(), r.getVectorType(),
                  true, c);
      continue;
    }
    if (auto e = dyn_cast<tensor::ExtractOp>(op)) {
      Chain c = visitOp(op);
      SmallVector<LinExpr, 4> off;
      for (Value i : e.getIndices())
        off.push_back(eval(i));
      SmallVector<int64_t, 4> box(off.size(), 1);
      addAccess(s, op, e.getTensor(), true, std::move(off), std::move(box), execOf(c), c.size());
      continue;
    }
    Dialect *d = op->getDialect();
    if (!d || !(isa<arith::ArithDialect, math::MathDialect, vector::VectorDialect>(d)))
      continue;
    if (isa<arith::ConstantOp>(op))
      continue;
    Chain c = visitOp(op);
    addCompute(s, op, execOf(c));
    for (Value o : op->getOperands())
      work.push_back(o);
  }
  s.chain = deepest;
  // The statement's write.
  addTransfer(s, w, w.getBase(), w.getIndices(), w.getPermutationMap(), w.getVectorType(), false,
              storeChain);
  return true;
}

/// tensor.insert_slice / parallel_insert_slice of data that no other statement computed.
void Extractor::copyStmt(Operation *op, Value src, Value dest, Stmt &s) {
  s.chain = chainOf(op);
  s.storeDepth = s.chain.size();
  auto ofs = cast<OffsetSizeAndStrideOpInterface>(op);
  auto srcType = cast<RankedTensorType>(src.getType());
  SmallVector<LinExpr, 4> off;
  for (OpFoldResult o : ofs.getMixedOffsets())
    off.push_back(ofr(o));
  SmallVector<int64_t, 4> box;
  for (OpFoldResult z : ofs.getMixedSizes()) {
    LinExpr size = ofr(z); // constant after folding, e.g. an affine.min of constants
    box.push_back(size.isConst() ? size.c : 1);
  }
  double exec = execOf(s.chain);
  addAccess(s, op, src, true, SmallVector<LinExpr, 4>(srcType.getRank()),
            SmallVector<int64_t, 4>(srcType.getShape()), exec, s.chain.size());
  addAccess(s, op, dest, false, std::move(off), std::move(box), exec, s.chain.size());
}

/// A leftover linalg op: its iteration domain becomes serial loops inside the enclosing ones.
void Extractor::linalgStmt(linalg::LinalgOp op, Stmt &s) {
  s.chain = chainOf(op);
  s.storeDepth = s.chain.size();
  SmallVector<int64_t> ranges = loopRanges(op);
  SmallVector<LinExpr, 8> dims;
  for (auto [i, r] : llvm::enumerate(ranges)) {
    LoopEntry e;
    e.key = {op.getOperation(), unsigned(i) + 1};
    e.trip = ShapedType::isDynamic(r) ? 1 : double(r);
    s.chain.push_back(e);
    LinExpr x;
    x.terms.push_back({e.key, 1});
    dims.push_back(x);
  }
  double exec = execOf(s.chain);
  for (Operation &inner : op->getRegion(0).front().without_terminator())
    addCompute(s, &inner, exec);
  for (OpOperand &o : op->getOpOperands()) {
    if (!isa<RankedTensorType, MemRefType>(o.get().getType()))
      continue;
    AffineMap m = op.getMatchingIndexingMap(&o);
    SmallVector<LinExpr, 4> off;
    for (AffineExpr e : m.getResults())
      off.push_back(evalAffine(e, dims, {}));
    SmallVector<int64_t, 4> box(off.size(), 1);
    bool isInit = op.isDpsInit(&o);
    if (!isInit || op.payloadUsesValueFromOperand(&o))
      addAccess(s, op, o.get(), true, off, box, exec, s.chain.size());
    if (isInit)
      addAccess(s, op, o.get(), false, off, box, exec, s.chain.size());
  }
}

void Extractor::padStmt(tensor::PadOp op, Stmt &s) {
  s.chain = chainOf(op);
  s.storeDepth = s.chain.size();
  SmallVector<LinExpr, 4> off;
  for (unsigned i = 0; i < unsigned(op.getResultType().getRank()); ++i) {
    int64_t r = staticDim(op.getResult(), i);
    LoopEntry e;
    e.key = {op.getOperation(), i + 1};
    e.trip = ShapedType::isDynamic(r) ? 1 : double(r);
    s.chain.push_back(e);
    LinExpr x;
    x.terms.push_back({e.key, 1});
    off.push_back(x);
  }
  double exec = execOf(s.chain);
  SmallVector<int64_t, 4> box(off.size(), 1);
  addAccess(s, op, op.getSource(), true, off, box, exec, s.chain.size());
  addAccess(s, op, op.getResult(), false, off, box, exec, s.chain.size());
}

/// Ansor's unrolling work of a loop (see ansor-auto-unroll); nullopt = not static.
double Extractor::work(scf::ForOp loop) {
  auto it = workCache.find(loop);
  if (it != workCache.end())
    return it->second.value_or(INFINITY);
  double inner = 0;
  loop.getBody()->walk([&](scf::ForOp child) {
    if (child->getParentOfType<scf::ForOp>() == loop)
      inner += work(child);
  });
  std::optional<APInt> trip = loop.getStaticTripCount();
  double body = std::max(inner, double(bodyVectorRows(loop)));
  double w = trip && trip->getActiveBits() <= 62 ? double(trip->getZExtValue()) * body : INFINITY;
  workCache[loop] = std::isinf(w) ? std::nullopt : std::optional<double>(w);
  return w;
}

//===----------------------------------------------------------------------------===//
// The tensor-core kernel (python/ansor/targets/cuda/tensorcore.py)
//===----------------------------------------------------------------------------===//

/// What the tensor-core sketch's kernel is built from, mirrored from tensorcore.py: the K step
/// (one 128-byte swizzled row of f16/bf16), wgmma's M and K, the f32 padding of a staged row,
/// registers per thread besides the accumulators, and the card a kernel is sized for (H100/H200
/// SXM: SMs, shared memory and registers per SM, threads per SM, blocks per SM).
constexpr int64_t kTcBk = 64, kWgmmaM = 64, kWgmmaK = 16, kStagePad = 8, kRegsBesidesAcc = 40;
constexpr int64_t kSmCount = 132, kSmemPerSm = 228 * 1024, kSmemPerBlockReserved = 1024;
constexpr int64_t kRegsPerSm = 65536, kThreadsPerSm = 2048, kBlocksPerSm = 32;
constexpr llvm::StringLiteral kTcAttr = "ansor.tc.";

int64_t ceilDiv(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }

const Extractor::TcRow *Extractor::tcOf(Operation *op) {
  auto fn = op->getParentOfType<FunctionOpInterface>();
  if (!fn)
    return nullptr;
  Operation *func = fn.getOperation();
  auto it = tcCache.find(func);
  if (it == tcCache.end())
    it = tcCache.try_emplace(func, tcKernel(func)).first;
  return it->second ? &*it->second : nullptr;
}

/// The function's kernel, when its transform script annotated it (`ansor.tc.bm` ... on the
/// function) and it holds the contraction the kernel computes (`linalg.matmul`,
/// `linalg.batch_matmul` or `linalg.conv_2d_nhwc_hwcf`, tiled or not): the problem's extents
/// are those of the buffers the contraction's operands view (see `resolve`).
std::optional<Extractor::TcRow> Extractor::tcKernel(Operation *func) {
  auto knob = [&](StringRef name, int64_t dflt) {
    auto a = func->getAttrOfType<IntegerAttr>((kTcAttr + name).str());
    return a ? a.getInt() : dflt;
  };
  if (!func->hasAttr((kTcAttr + "bm").str()))
    return std::nullopt;
  // Knobs added after the first records: persist 0 and splitk 1 are what those records meant.
  int64_t bm = knob("bm", 0), bn = knob("bn", 0), wgm = knob("wgm", 1), stages = knob("stages", 0);
  int64_t wait = knob("wait", 0), group = knob("group", 1), ws = knob("ws", 0);
  int64_t persist = knob("persist", 0), splitk = knob("splitk", 1), tw = knob("tw", 0);
  if (bm <= 0 || bn <= 0 || wgm <= 0 || splitk <= 0)
    return std::nullopt;
  linalg::LinalgOp contraction;
  bool conv = false, fused = false;
  func->walk([&](linalg::LinalgOp op) {
    StringRef name = op->getName().getStringRef();
    if (!contraction && (name == "linalg.matmul" || name == "linalg.batch_matmul" ||
                         name == "linalg.conv_2d_nhwc_hwcf")) {
      contraction = op;
      conv = name == "linalg.conv_2d_nhwc_hwcf";
    } else if (!isa<linalg::FillOp>(op)) {
      fused = true; // an element-wise consumer: the epilogue runs in the kernel
    }
  });
  if (!contraction || contraction.getNumDpsInputs() != 2 || contraction.getNumDpsInits() != 1)
    return std::nullopt;
  auto shapeOf = [&](Value v) {
    SmallVector<LinExpr, 4> off;
    SmallVector<int64_t, 4> box;
    Value root = resolve(v, off, box);
    SmallVector<int64_t, 4> shape;
    if (auto t = dyn_cast<ShapedType>(root.getType()); t && t.hasRank())
      for (unsigned d = 0; d < unsigned(t.getRank()); ++d)
        shape.push_back(staticDim(root, d));
    return shape;
  };
  Value init = contraction.getDpsInitOperand(0)->get();
  SmallVector<int64_t, 4> a = shapeOf(contraction.getDpsInputOperand(0)->get());
  SmallVector<int64_t, 4> b = shapeOf(contraction.getDpsInputOperand(1)->get());
  SmallVector<int64_t, 4> c = shapeOf(init);
  auto dynamic = [](ArrayRef<int64_t> s) { return llvm::any_of(s, ShapedType::isDynamic); };
  if (dynamic(a) || dynamic(b) || dynamic(c))
    return std::nullopt;
  // f16/bf16: a k-block is one 128-byte swizzled row (64 elements), a wgmma k16; f32 operands (a
  // TF32 task): 32 elements and k8, and the stage also holds B K-major (the producer's copy).
  Type et = getElementTypeOrSelf(contraction.getDpsInputOperand(0)->get().getType());
  int64_t eb = et.isIntOrFloat() ? std::max<int64_t>(1, et.getIntOrFloatBitWidth() / 8) : 2;
  bool tf32 = et.isF32();
  int64_t bk = tf32 ? kTcBk / 2 : kTcBk, mmaK = tf32 ? kWgmmaK / 2 : kWgmmaK;
  // M x N x K (per batch), the k-blocks of a tile, and a convolution's pixel patch (th x tw).
  int64_t m, n, k, kt, batch = 1, oh = 0, ow = 0, images = 1;
  if (conv) {
    if (c.size() != 4 || b.size() != 4 || tw <= 0)
      return std::nullopt;
    images = c[0], oh = c[1], ow = c[2];
    m = images * oh * ow, n = c[3], k = b[0] * b[1] * b[2];
    kt = b[0] * b[1] * ceilDiv(b[2], bk);
  } else {
    if (c.size() < 2 || a.empty())
      return std::nullopt;
    if (c.size() == 3)
      batch = c[0];
    m = c[c.size() - 2], n = c.back(), k = a.back();
    kt = ceilDiv(k, bk);
  }
  fused |= !getElementTypeOrSelf(init.getType()).isF32(); // the sums are rounded before the store
  int64_t th = conv ? std::max<int64_t>(1, std::min(bm / tw, oh)) : bm;
  int64_t wm = bm / wgm, acc = wm * bn / 128, threads = 128 * (wgm + ws);
  int64_t kblocks = kt / splitk;
  bool staged = fused || conv || m % bm || n % bn;
  int64_t smem = std::max(stages * (bm + bn + (tf32 ? bn : 0)) * bk * eb,
                          staged || splitk > 1 ? bm * (bn + kStagePad) * 4 : 0);
  int64_t tma = ((conv ? th * tw : bm) + bn) * bk * eb;
  int64_t gy = conv ? images * ceilDiv(oh, th) * ceilDiv(ow, tw) : ceilDiv(m, bm);
  int64_t tiles = ceilDiv(n, bn) * gy * batch;
  int64_t blocks = persist ? std::min(tiles, kSmCount) : tiles * splitk;
  int64_t perSm = std::min({kSmemPerSm / (smem + kSmemPerBlockReserved),
                            kRegsPerSm / std::max<int64_t>(1, threads * (acc + kRegsBesidesAcc)),
                            kThreadsPerSm / threads, kBlocksPerSm});
  perSm = std::max<int64_t>(perSm, 1);
  // Waves: a persistent block loops over ceil(tiles / blocks) tiles on one SM each; otherwise
  // the grid runs perSm blocks per SM at a time. Efficiency: busy slots over slots the waves hold.
  int64_t slots = persist ? kSmCount : kSmCount * perSm;
  int64_t work = persist ? tiles : blocks;
  int64_t waves = persist ? ceilDiv(tiles, blocks) : ceilDiv(blocks, slots);
  double kblockFlops = 2.0 * double(bm) * double(bn) * double(bk);
  TcRow f{};
  auto set = [&](int feature, double x) { f[feature - TcBase] = float(x); };
  set(TcProgram, 1);
  set(TcBm, bm), set(TcBn, bn), set(TcBk, bk), set(TcWarpgroups, wgm), set(TcWarpgroupRows, wm);
  set(TcMmaN, bn), set(TcMmaPerKBlock, (bm / kWgmmaM) * (bk / mmaK));
  set(TcMmaPerTile, double((bm / kWgmmaM) * (bk / mmaK)) * double(kblocks));
  set(TcAccPerThread, acc), set(TcThreads, threads), set(TcStages, stages), set(TcWait, wait);
  set(TcGroup, group), set(TcWs, ws), set(TcPersist, persist), set(TcSplitK, splitk);
  set(TcTileWidth, conv ? tw : 0), set(TcKBlocks, kblocks);
  set(TcStaged, staged || splitk > 1); // split-K partial sums meet in the staged tile
  set(TcSmemBytes, smem), set(TcTmaBytes, tma), set(TcTiles, tiles), set(TcBlocks, blocks);
  set(TcBlocksPerSm, perSm), set(TcSmFill, double(std::min(blocks, kSmCount)) / double(kSmCount));
  set(TcWaves, waves);
  set(TcWaveEff, waves ? double(work) / double(waves * slots) : 0);
  set(TcTileEff, double(m) * double(n) * double(batch) / (double(tiles) * double(bm) * double(bn)));
  set(TcIntensity, kblockFlops / double(tma));
  set(TcFlopsPerTile, kblockFlops * double(kblocks));
  return f;
}

int position(int idx, int n) { return idx < 0 ? 0 : idx == 0 ? 3 : idx == n - 1 ? 1 : 2; }

void Extractor::featurize(Stmt &s, std::array<float, kNumFeatures> &row) {
  row.fill(0);
  const Chain &ch = s.chain;
  const unsigned n = ch.size();
  for (int i = 0; i < 7; ++i)
    row[FloatMad + i] = float(s.compute[i]);

  // Vectorization: dimensions of the stored vector.
  int vecPos = 0;
  if (s.vec && s.vec.getNumElements() > 1) {
    ArrayRef<int64_t> shape = s.vec.getShape();
    row[VecNum] = float(llvm::count_if(shape, [](int64_t d) { return d > 1; }));
    row[VecProd] = float(s.vec.getNumElements());
    row[VecLen] = float(shape.back());
    bool othersOne = llvm::all_of(shape.drop_front(), [](int64_t d) { return d == 1; });
    vecPos = shape.back() > 1 ? 1 : (shape.front() > 1 && othersOne ? 3 : 2);
  }
  row[VecPosNone + vecPos] = 1;

  // Unrolling: the nearest annotated ancestor of the statement's deepest op.
  Operation *anchor = s.store;
  Operation *annotated = nullptr;
  for (Operation *p = anchor; p; p = p->getParentOp()) {
    if (p->hasAttr(AnsorDialect::kAutoUnrollAttrName) && !singleIteration(p)) {
      annotated = p;
      break;
    }
    if (p == root)
      break;
  }
  if (annotated) {
    auto a = dyn_cast<IntegerAttr>(annotated->getAttr(AnsorDialect::kAutoUnrollAttrName));
    double maxStep = a ? double(a.getInt()) : 0;
    row[UnrollMaxStep] = float(maxStep);
    double prod = 1;
    int num = 0;
    float len = 0;
    for (const LoopEntry &e : ch) {
      if (!e.forOp || e.trip == 0)
        continue;
      if (e.forOp != annotated && !annotated->isProperAncestor(e.forOp))
        continue;
      if (work(e.forOp) <= maxStep) {
        ++num;
        prod *= e.trip;
        len = float(e.trip);
      }
    }
    row[UnrollNum] = float(num);
    row[UnrollProd] = num ? float(prod) : 0;
    row[UnrollLen] = len;
  }

  // Parallelism and the loop nest.
  int firstPar = -1, parNum = 0;
  double parProd = 1, loopProd = 1;
  for (auto [i, e] : llvm::enumerate(ch)) {
    loopProd *= e.trip;
    if (e.parallel) {
      if (firstPar < 0)
        firstPar = int(i);
      ++parNum;
      parProd *= e.trip;
      row[ParLen] = float(e.trip);
    }
  }
  row[ParNum] = float(parNum);
  row[ParProd] = parNum ? float(parProd) : 0;
  row[ParPosNone + position(firstPar, int(n))] = 1;
  row[LoopProd] = float(loopProd);
  row[NumLoops] = float(n);
  row[InnermostLen] = n ? float(ch.back().trip) : 0;

  // Touched region of an access when loops [level, n) iterate: elements per root dim.
  auto region = [&](const Access &a, unsigned level, SmallVectorImpl<double> &out) {
    out.clear();
    for (unsigned d = 0; d < a.box.size(); ++d) {
      double span = double(a.box[d]);
      for (unsigned l = level; l < n; ++l)
        span += std::abs(double(a.off[d].coeff(ch[l].key))) * ch[l].step * (ch[l].trip - 1);
      out.push_back(std::min(span, double(a.shape[d])));
    }
  };
  auto product = [](ArrayRef<double> v) {
    double p = 1;
    for (double x : v)
      p *= x;
    return p;
  };
  auto linesOf = [&](const Access &a, ArrayRef<double> r) {
    if (r.empty())
      return 1.0;
    double rows = product(r.drop_back());
    return rows * std::ceil(r.back() * double(a.elemBytes) / double(kCacheLine));
  };
  // touched[a][L] for L in 0..n.
  SmallVector<SmallVector<double, 8>, 8> touched(s.accesses.size());
  SmallVector<double, 4> r;
  for (auto [ai, a] : llvm::enumerate(s.accesses))
    for (unsigned l = 0; l <= n; ++l) {
      region(a, l, r);
      touched[ai].push_back(product(r) * double(a.elemBytes));
    }

  // Group accesses by buffer.
  struct Buf {
    Value root;
    SmallVector<unsigned, 4> acc;
    bool read = false, write = false;
    double bytes = 0, unique = 0, lines = 0, uniqueLines = 0;
    std::array<float, kBufferFields> f{};
  };
  SmallVector<Buf, 8> bufs;
  for (auto [ai, a] : llvm::enumerate(s.accesses)) {
    auto it = llvm::find_if(bufs, [&](const Buf &b) { return b.root == a.root; });
    if (it == bufs.end()) {
      bufs.push_back(Buf{a.root});
      it = std::prev(bufs.end());
    }
    it->acc.push_back(ai);
  }
  auto bytesAt = [&](unsigned level) {
    double total = 0;
    for (Buf &b : bufs) {
      double m = 0;
      for (unsigned ai : b.acc)
        m = std::max(m, touched[ai][level]);
      total += m;
    }
    return total;
  };
  for (Buf &b : bufs) {
    int reuseLevel = -1;
    unsigned bestAcc = b.acc.front();
    double bestBytes = -1;
    for (unsigned ai : b.acc) {
      const Access &a = s.accesses[ai];
      (a.read ? b.read : b.write) = true;
      double box = 1;
      for (int64_t x : a.box)
        box *= double(x);
      double accBytes = a.exec * box * double(a.elemBytes);
      b.bytes += accBytes;
      if (accBytes > bestBytes) {
        bestBytes = accBytes;
        bestAcc = ai;
      }
      b.unique = std::max(b.unique, touched[ai][0]);
      region(a, 0, r);
      b.uniqueLines = std::max(b.uniqueLines, linesOf(a, r));
      unsigned depth = std::min<unsigned>(a.depth, n);
      if (depth > 0) {
        region(a, depth - 1, r);
        b.lines += a.exec / std::max(ch[depth - 1].trip, 1.0) * linesOf(a, r);
      } else {
        region(a, n, r);
        b.lines += a.exec * linesOf(a, r);
      }
      for (int l = int(depth) - 1; l > reuseLevel; --l) {
        if (ch[l].trip <= 1)
          continue;
        bool invariant = llvm::all_of(a.off, [&](const LinExpr &x) { return !x.coeff(ch[l].key); });
        if (invariant) {
          reuseLevel = l;
          break;
        }
      }
    }
    auto &f = b.f;
    f[b.read && b.write ? AccReadWrite : b.read ? AccRead : AccWrite] = 1;
    f[Bytes] = float(b.bytes);
    f[UniqueBytes] = float(b.unique);
    f[Lines] = float(b.lines);
    f[UniqueLines] = float(b.uniqueLines);
    double ct = 0;
    if (reuseLevel >= 0) {
      f[ReuseLoop] = 1;
      double iters = 1;
      for (unsigned l = reuseLevel + 1; l < n; ++l)
        iters *= ch[l].trip;
      f[ReuseDisIter] = float(iters);
      f[ReuseDisBytes] = float(bytesAt(reuseLevel + 1));
      ct = ch[reuseLevel].trip;
    } else if (b.acc.size() > 1) {
      f[ReuseSerial] = 1;
      f[ReuseDisIter] = 1;
      f[ReuseDisBytes] = float(bytesAt(n));
      ct = double(b.acc.size() - 1);
    } else {
      f[ReuseNone] = 1;
    }
    f[ReuseCt] = float(ct);
    double div = std::max(ct, 1.0);
    f[BytesDReuseCt] = float(b.bytes / div);
    f[UniqueBytesDReuseCt] = float(b.unique / div);
    f[LinesDReuseCt] = float(b.lines / div);
    f[UniqueLinesDReuseCt] = float(b.uniqueLines / div);
    // Stride (elements): lanes along the last buffer dim are contiguous; else the row-major
    // stride of the innermost dim the access box spans; else the innermost loop that moves it.
    const Access &a = s.accesses[bestAcc];
    SmallVector<double, 4> rowStride(a.shape.size(), 1);
    for (int d = int(a.shape.size()) - 2; d >= 0; --d)
      rowStride[d] = rowStride[d + 1] * double(a.shape[d + 1]);
    double stride = 0;
    if (!a.box.empty() && a.box.back() > 1) {
      stride = 1;
    } else if (auto it = llvm::find_if(llvm::reverse(a.box), [](int64_t x) { return x > 1; });
               it != a.box.rend()) {
      stride = rowStride[a.box.size() - 1 - std::distance(a.box.rbegin(), it)];
    } else {
      for (int l = int(std::min<unsigned>(a.depth, n)) - 1; l >= 0 && stride == 0; --l) {
        double c = 0;
        for (unsigned d = 0; d < a.off.size(); ++d)
          c += double(a.off[d].coeff(ch[l].key)) * rowStride[d];
        stride = std::abs(c) * ch[l].step;
      }
    }
    f[Stride] = float(stride);
  }
  llvm::stable_sort(bufs, [](const Buf &x, const Buf &y) { return x.bytes > y.bytes; });
  for (unsigned i = 0; i < bufs.size() && i < kMaxBuffers; ++i)
    for (int k = 0; k < kBufferFields; ++k)
      row[BufferBase + i * kBufferFields + k] = bufs[i].f[k];

  // Arithmetic intensity curve, innermost level first, sampled at kCurvePoints points.
  double flops = 2 * s.compute[FloatMad];
  for (int i = FloatAddSub; i <= IntOps; ++i)
    flops += s.compute[i];
  SmallVector<double, 9> curve;
  double outer = 1;
  SmallVector<double, 9> outerAt(n + 1, 1);
  for (unsigned l = 0; l <= n; ++l) {
    outerAt[l] = outer;
    if (l < n)
      outer *= std::max(ch[l].trip, 1.0);
  }
  for (int l = int(n); l >= 0; --l) {
    double bytes = bytesAt(l);
    curve.push_back(bytes > 0 ? flops / outerAt[l] / bytes : 0);
  }
  for (int p = 0; p < kCurvePoints; ++p) {
    double x = double(p) * double(curve.size() - 1) / double(kCurvePoints - 1);
    unsigned lo = unsigned(std::floor(x));
    unsigned hi = std::min<unsigned>(lo + 1, curve.size() - 1);
    double t = x - lo;
    row[kCurveBase + p] = float(curve[lo] * (1 - t) + curve[hi] * t);
  }

  // Allocation of the written buffer, when it is local (not an argument, not returned).
  double outerProd = 1;
  for (unsigned l = 0; l < s.storeDepth && l < n; ++l)
    outerProd *= ch[l].trip;
  row[OuterProd] = float(outerProd);
  row[NumOuterLoops] = float(s.storeDepth);
  for (const Access &a : s.accesses) {
    if (a.read)
      continue;
    Operation *def = a.root.getDefiningOp();
    bool isAlloc = def && (isa<tensor::EmptyOp, tensor::PadOp>(def) ||
                           def->getName().getStringRef() == "bufferization.alloc_tensor");
    if (!isAlloc || outputs.contains(a.root))
      break;
    double size = double(a.elemBytes);
    for (int64_t d : a.shape)
      size *= double(d);
    double allocOuter = execOf(chainOf(def));
    row[AllocSize] = float(size);
    row[AllocProd] = float(size * allocOuter);
    row[AllocOuterProd] = float(allocOuter);
    row[AllocInnerProd] = float(outerProd / std::max(allocOuter, 1.0));
    break;
  }

  // The tensor-core kernel every statement of an annotated function runs in.
  if (const TcRow *tc = tcOf(s.store))
    llvm::copy(*tc, row.begin() + TcBase);

  // The pipeline depth of the kernel (gpu.launch) the statement runs in.
  for (Operation *p = s.store; p; p = p->getParentOp())
    if (auto a = p->getAttrOfType<IntegerAttr>(kPipelineStagesAttr)) {
      row[PipelineStages] = float(a.getInt());
      break;
    }
  // The rows per block of the row-wise kernel it runs in.
  for (Operation *p = s.store; p; p = p->getParentOp())
    if (auto a = p->getAttrOfType<IntegerAttr>(kRowsPerBlockAttr)) {
      row[RowsPerBlock] = float(a.getInt());
      break;
    }
  // The grid and block of the launch it runs in.
  if (auto launch = s.store->getParentOfType<gpu::LaunchOp>()) {
    auto product = [](std::initializer_list<Value> sizes) {
      double p = 1;
      for (Value v : sizes) {
        std::optional<int64_t> c = getConstantIntValue(v);
        if (!c)
          return 0.0;
        p *= double(*c);
      }
      return p;
    };
    row[LaunchBlocks] = float(product(
        {launch.getGridSizeX(), launch.getGridSizeY(), launch.getGridSizeZ()}));
    row[LaunchThreads] = float(product(
        {launch.getBlockSizeX(), launch.getBlockSizeY(), launch.getBlockSizeZ()}));
  }
}

/// True when an insert_slice's source is a copy of existing data, not the result of another
/// statement or of tensor plumbing (loops, writes, inserts).
bool isCopySource(Value src) {
  if (isa<BlockArgument>(src))
    return false;
  Operation *def = src.getDefiningOp();
  return !isa<vector::TransferWriteOp, tensor::InsertSliceOp, DestinationStyleOpInterface,
              scf::ForOp, scf::ForallOp, scf::IfOp, tensor::EmptyOp>(def);
}

LogicalResult Extractor::run(std::vector<std::array<float, kNumFeatures>> &rows,
                             SmallVectorImpl<Operation *> &stmts) {
  // Buffers that leave a function.
  root->walk([&](func::ReturnOp ret) {
    for (Value v : ret.getOperands()) {
      if (!isa<ShapedType>(v.getType()))
        continue;
      SmallVector<LinExpr, 4> off;
      SmallVector<int64_t, 4> box;
      outputs.insert(resolve(v, off, box));
    }
  });
  root->walk<WalkOrder::PreOrder>([&](Operation *op) {
    Stmt s;
    s.store = op;
    bool isStmt = true;
    if (auto w = dyn_cast<vector::TransferWriteOp>(op)) {
      vectorStmt(w, s);
    } else if (auto ins = dyn_cast<tensor::InsertSliceOp>(op)) {
      if (!isCopySource(ins.getSource()))
        return WalkResult::advance();
      copyStmt(op, ins.getSource(), ins.getDest(), s);
    } else if (auto pins = dyn_cast<tensor::ParallelInsertSliceOp>(op)) {
      if (!isCopySource(pins.getSource()))
        return WalkResult::advance();
      copyStmt(op, pins.getSource(), pins.getDest(), s);
    } else if (auto l = dyn_cast<linalg::LinalgOp>(op)) {
      linalgStmt(l, s);
    } else if (auto p = dyn_cast<tensor::PadOp>(op)) {
      padStmt(p, s);
    } else {
      isStmt = false;
    }
    if (isStmt) {
      rows.emplace_back();
      featurize(s, rows.back());
      stmts.push_back(op);
      // Linalg / pad bodies belong to their statement.
      if (isa<linalg::LinalgOp, tensor::PadOp>(op))
        return WalkResult::skip();
    }
    return WalkResult::advance();
  });
  return success();
}

struct ExtractFeatures : public ansor::impl::ExtractFeaturesBase<ExtractFeatures> {
  using Base::Base;

  void runOnOperation() override {
    // One block per function (`// func @name`), statements numbered within it.
    SmallVector<Operation *> funcs;
    getOperation()->walk<WalkOrder::PreOrder>([&](FunctionOpInterface f) {
      funcs.push_back(f);
      return WalkResult::skip();
    });
    if (funcs.empty())
      funcs.push_back(getOperation());
    const auto &n = names();
    llvm::raw_ostream &os = llvm::outs();
    for (Operation *f : funcs) {
      std::vector<std::array<float, kNumFeatures>> rows;
      SmallVector<Operation *> stmts;
      if (failed(extractFeatureRows(f, rows, stmts, logScale)))
        return signalPassFailure();
      if (auto sym = f->getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName()))
        os << "// func @" << sym.getValue() << "\n";
      for (auto [i, row] : llvm::enumerate(rows)) {
        os << "// stmt " << i << " (" << stmts[i]->getName() << "):";
        for (int k = 0; k < kNumFeatures; ++k)
          if (row[k] != 0)
            os << " " << n[k] << "=" << llvm::format("%g", double(row[k]));
        os << "\n";
      }
    }
    os.flush();
  }
};

} // namespace

int64_t mlir::ansor::numFeatures() { return kNumFeatures; }

const char *mlir::ansor::featureName(int64_t i) {
  if (i < 0 || i >= kNumFeatures)
    return nullptr;
  return names()[i].c_str();
}

LogicalResult mlir::ansor::extractFeatureRows(Operation *root,
                                              std::vector<std::array<float, kNumFeatures>> &rows,
                                              SmallVectorImpl<Operation *> &stmts, bool logScale) {
  static_assert(kNumFeatures == kNumProgramFeatures, "update kNumProgramFeatures in Passes.h");
  (void)names(); // built before any concurrent use
  Extractor ex(root);
  if (failed(ex.run(rows, stmts)))
    return failure();
  if (logScale)
    for (auto &row : rows)
      for (float &x : row)
        x = float(std::log2(1.0 + std::abs(double(x))));
  return success();
}

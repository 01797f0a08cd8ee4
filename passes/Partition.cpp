//===- Partition.cpp - ansor-partition --------------------------------------------===//
//
// public func.func --(anchors + fused producers/consumer chains)--> groups
//   --outline--> private @<func>__t<K> functions + func.call in the parent
//
// See Passes.td for the grouping rules. Invariant that makes outlining trivially valid: only a
// group's last op (in block order) has uses outside the group, so a call placed at that op sees
// every external operand already defined.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_PARTITION
#include "passes/Passes.h.inc"
} // namespace mlir::ansor

using namespace mlir;
using namespace mlir::ansor;

namespace {

bool isAnchor(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  return linalgOp && op->getNumRegions() > 0 && linalgOp.getNumReductionLoops() > 0;
}

/// All-parallel Linalg op (element-wise, broadcast, transpose, fill).
bool isAllParallel(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  return linalgOp && linalgOp.getNumReductionLoops() == 0 && linalgOp.getNumLoops() > 0 &&
         op->getNumResults() > 0;
}

/// A strided window (the shifted views a Winograd input transform reads), or any window of a
/// padded tensor: fused with its consumer, it is a view inside the task instead of a copy passed in.
bool isPadWindow(Operation *op) {
  auto slice = dyn_cast<tensor::ExtractSliceOp>(op);
  if (!slice || slice.getSourceType().getRank() != slice.getResultType().getRank())
    return false;
  return slice.getSource().getDefiningOp<tensor::PadOp>() ||
         llvm::any_of(slice.getStaticStrides(), [](int64_t s) { return s > 1; });
}

/// A crop: the leading corner of a tensor, same rank (a Winograd output computed in whole tiles
/// that overhang the output, cut back to its size). Fused as a consumer, it is a view in the task
/// and the element-wise consumers after it join the task too.
bool isCrop(Operation *op) {
  auto slice = dyn_cast<tensor::ExtractSliceOp>(op);
  return slice && slice.getSourceType().getRank() == slice.getResultType().getRank() &&
         llvm::all_of(slice.getStaticOffsets(), [](int64_t o) { return o == 0; }) &&
         llvm::all_of(slice.getStaticStrides(), [](int64_t s) { return s == 1; });
}

/// A leading piece: `t[i, j, ...]` over all of the trailing dims (unit strides), a contiguous
/// sub-tensor, as the Winograd output transform reads M[a, b] of the batched products. Fused with
/// its consumer it is a view inside the task instead of a copy passed in.
bool isLeadingPiece(Operation *op) {
  auto slice = dyn_cast<tensor::ExtractSliceOp>(op);
  if (!slice || slice.getType().getRank() == 0 || ShapedType::isDynamicShape(slice.getSourceType().getShape()))
    return false;
  ArrayRef<int64_t> shape = slice.getSourceType().getShape(), offsets = slice.getStaticOffsets(),
                    sizes = slice.getStaticSizes(), strides = slice.getStaticStrides();
  int64_t lead = shape.size() - slice.getType().getRank();
  if (lead <= 0 || llvm::any_of(strides, [](int64_t s) { return s != 1; }))
    return false;
  for (int64_t d = 0, e = shape.size(); d < e; ++d) {
    bool ok = d < lead ? sizes[d] == 1 && !ShapedType::isDynamic(offsets[d])
                       : offsets[d] == 0 && sizes[d] == shape[d];
    if (!ok)
      return false;
  }
  return true;
}

/// A map reading a tensor "row by row": its dim results are the leading loops d0, d1, ... in order
/// (any count, none skipped), constants allowed anywhere (a keepdim unit dim, `(d0, d1, 0)`). The
/// identity, a per-row value `(d0, d1)` broadcast along the reduced loops, a scalar.
bool isRowMap(AffineMap map) {
  unsigned next = 0;
  for (AffineExpr e : map.getResults()) {
    if (isa<AffineConstantExpr>(e))
      continue;
    auto dim = dyn_cast<AffineDimExpr>(e);
    if (!dim || dim.getPosition() != next)
      return false;
    ++next;
  }
  return true;
}

/// A row reduction: a Linalg op with a region, static loop ranges, p >= 1 parallel loops followed
/// by r >= 1 reduction loops (the trailing ones, nothing else), every result indexed by the p
/// row loops in order (`(d0, .., dp-1)`, keepdim constants allowed), and an input indexed by the
/// identity: the tensor whose rows it reduces (softmax's max and sum, a layer norm's moments).
bool isRowReduction(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || op->getNumRegions() == 0 || op->getNumResults() == 0)
    return false;
  SmallVector<utils::IteratorType> its = linalgOp.getIteratorTypesArray();
  unsigned p = linalgOp.getNumParallelLoops(), r = linalgOp.getNumReductionLoops();
  if (p == 0 || r == 0 || p + r != its.size() ||
      llvm::any_of(ArrayRef(its).take_front(p), [](utils::IteratorType t) { return t != utils::IteratorType::parallel; }))
    return false;
  if (ShapedType::isDynamicShape(linalgOp.getStaticLoopRanges()))
    return false;
  for (OpResult res : op->getResults()) {
    AffineMap map = linalgOp.getIndexingMapMatchingResult(res);
    if (!isRowMap(map) || map.getNumResults() - llvm::count_if(map.getResults(), [](AffineExpr e) {
          return isa<AffineConstantExpr>(e);
        }) != p)
      return false;
  }
  return llvm::any_of(linalgOp.getDpsInputOperands(),
                      [&](OpOperand *o) { return linalgOp.getMatchingIndexingMap(o).isIdentity(); });
}

bool isFusibleProducer(Operation *op) {
  return isAllParallel(op) || isa<tensor::PadOp>(op) || isPadWindow(op) || isLeadingPiece(op);
}

/// `tensor.insert_slice` of a group member's result into a buffer the group builds (a multi-result
/// op writing the pieces of one tensor, destination-passing style: Winograd transforms). Joining
/// the group keeps the pieces in place; left in the parent, each would be a copy.
bool isSliceStore(Operation *op) { return isa<tensor::InsertSliceOp>(op); }

/// Computes only from constants (e.g. batch-norm parameters folded at run time): stays in the
/// parent, where it costs next to nothing, instead of becoming a task of its own.
bool isConstantOnly(Operation *op, llvm::DenseMap<Operation *, bool> &memo) {
  auto it = memo.find(op);
  if (it != memo.end())
    return it->second;
  bool result = false;
  if (isa<arith::ConstantOp, tensor::EmptyOp>(op)) {
    result = true;
  } else if (isAllParallel(op) || isa<tensor::PadOp, tensor::ExpandShapeOp, tensor::CollapseShapeOp>(op)) {
    result = llvm::all_of(op->getOperands(), [&](Value v) {
      Operation *def = v.getDefiningOp();
      return def && isConstantOnly(def, memo);
    });
  }
  memo[op] = result;
  return result;
}

class Partitioner {
public:
  Partitioner(func::FuncOp func, int64_t maxInlineElements, bool rowChains)
      : func(func), maxInlineElements(maxInlineElements), rowChains(rowChains) {}

  LogicalResult run(SymbolTable &symbols);

private:
  using Group = SmallVector<Operation *>;

  bool inGroup(Operation *op, int64_t g) const {
    auto it = groupOf.find(op);
    return it != groupOf.end() && it->second == g;
  }
  bool allUsersIn(Operation *op, int64_t g) const {
    for (Operation *user : op->getUsers())
      if (!inGroup(user, g))
        return false;
    return !op->use_empty();
  }
  void add(Operation *op, int64_t g) {
    groupOf[op] = g;
    groups[g].push_back(op);
  }
  void addProducers(Operation *op, int64_t g);
  void addConsumers(int64_t g);
  bool isValid(int64_t g) const;
  bool rowAligned(Value v, int64_t g, llvm::DenseMap<Value, bool> &memo) const;
  bool joinsRowChain(Operation *op, int64_t g) const;
  static constexpr size_t kMaxGroupOps = 64;
  void grow(Operation *seed);
  bool isCloneable(Value v) const;
  LogicalResult outline(Group &group, int64_t index, SymbolTable &symbols);
  Operation *lastCallee = nullptr; // callees go after the parent, in program order

  func::FuncOp func;
  int64_t maxInlineElements;
  bool rowChains;
  Block *block = nullptr;
  llvm::DenseMap<Operation *, int64_t> groupOf;
  llvm::DenseMap<Operation *, bool> constantOnly;
  SmallVector<Group> groups;
};

void Partitioner::addProducers(Operation *op, int64_t g) {
  for (Value operand : op->getOperands()) {
    Operation *def = operand.getDefiningOp();
    if (!def || def->getBlock() != block || groupOf.count(def) || isa<linalg::FillOp>(def))
      continue; // (fills of cloneable values are cloned into each group that uses them)
    // A row reduction over the group's rows (a layer norm's mean, next to its variance), read
    // through row maps only, joins like an element-wise producer.
    auto rowProducer = [&] {
      return joinsRowChain(def, g) && llvm::all_of(def->getUses(), [&](OpOperand &use) {
               auto user = dyn_cast<linalg::LinalgOp>(use.getOwner());
               return !user || isRowMap(user.getMatchingIndexingMap(&use));
             });
    };
    if ((!isFusibleProducer(def) || isConstantOnly(def, constantOnly)) && !rowProducer())
      continue;
    if (isLeadingPiece(def) && !isAllParallel(op))
      continue; // pieces only feed element-wise transforms here; anchors get them as arguments
    // Only when the group is the producer's sole consumer (else its result escapes mid-group).
    bool sole = llvm::all_of(def->getUsers(), [&](Operation *u) { return u == op || inGroup(u, g); });
    if (!sole)
      continue;
    add(def, g);
    addProducers(def, g);
  }
}

bool Partitioner::isValid(int64_t g) const {
  Operation *escaping = nullptr;
  for (Operation *m : groups[g]) {
    if (llvm::all_of(m->getUsers(), [&](Operation *u) { return inGroup(u, g); }))
      continue;
    if (escaping)
      return false; // two ops with outside uses: no single call result
    escaping = m;
  }
  if (escaping && isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(escaping))
    return false; // a group does not end in a reshape (it stays a view in the parent)
  return !escaping || llvm::all_of(groups[g], [&](Operation *m) { return !escaping->isBeforeInBlock(m); });
}

/// Whether group member value `v` is laid out in the group's rows: the seed's results are; so is
/// the result of a member Linalg op that reads every member value through a row map (identity,
/// per-row broadcast) and writes through one, and a reshape of such a value (the same elements in
/// the same order). A transpose of a member (the NHWC -> NCHW transpose after a convolution) is not:
/// a tile of its rows is a column of the seed's.
bool Partitioner::rowAligned(Value v, int64_t g, llvm::DenseMap<Value, bool> &memo) const {
  Operation *def = v.getDefiningOp();
  if (!def || !inGroup(def, g))
    return false;
  if (def == groups[g].front())
    return true;
  if (auto it = memo.find(v); it != memo.end())
    return it->second;
  memo[v] = false; // (no cycles in SSA; this only guards the recursion)
  bool result = false;
  if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(def)) {
    result = rowAligned(def->getOperand(0), g, memo);
  } else if (auto linalgOp = dyn_cast<linalg::LinalgOp>(def); linalgOp && def->getNumRegions() > 0) {
    result = llvm::all_of(def->getResults(), [&](OpResult r) {
      return isRowMap(linalgOp.getIndexingMapMatchingResult(r));
    });
    for (OpOperand &o : def->getOpOperands()) {
      Operation *src = o.get().getDefiningOp();
      if (result && src && inGroup(src, g))
        result = isRowMap(linalgOp.getMatchingIndexingMap(&o)) && rowAligned(o.get(), g, memo);
    }
  }
  memo[v] = result;
  return result;
}

/// A row reduction over the group's rows (`row-chains`): reads every group member value through a
/// row map, each laid out in the group's rows, and its loop ranges are the shape of such a member
/// value (it reduces the trailing dims of a tensor the group computes: softmax's sum of exp) or
/// the loop ranges of a member row reduction with as many reduction loops (it reduces the same
/// rows again: a layer norm's variance next to its mean).
bool Partitioner::joinsRowChain(Operation *op, int64_t g) const {
  if (!rowChains || op->getBlock() != block || op == groups[g].front() || !isRowReduction(op))
    return false;
  auto linalgOp = cast<linalg::LinalgOp>(op);
  llvm::DenseMap<Value, bool> memo;
  for (OpOperand &o : op->getOpOperands()) {
    Operation *src = o.get().getDefiningOp();
    if (src && inGroup(src, g) && !(isRowMap(linalgOp.getMatchingIndexingMap(&o)) && rowAligned(o.get(), g, memo)))
      return false;
  }
  SmallVector<int64_t> ranges = linalgOp.getStaticLoopRanges();
  unsigned reductions = linalgOp.getNumReductionLoops();
  for (Operation *m : groups[g]) {
    if (m == op)
      continue; // (checked again once it is a member: its own rows are no witness)
    for (Value r : m->getResults()) {
      auto type = dyn_cast<RankedTensorType>(r.getType());
      if (type && type.hasStaticShape() && type.getShape() == ArrayRef(ranges) && rowAligned(r, g, memo))
        return true;
    }
    if (isRowReduction(m) && cast<linalg::LinalgOp>(m).getStaticLoopRanges() == ranges &&
        cast<linalg::LinalgOp>(m).getNumReductionLoops() == reductions && rowAligned(m->getResult(0), g, memo))
      return true;
  }
  return false;
}

void Partitioner::addConsumers(int64_t g) {
  size_t valid = groups[g].size();
  while (groups[g].size() < kMaxGroupOps) {
    llvm::SetVector<Operation *> outside;
    for (Operation *m : groups[g])
      for (Operation *u : m->getUsers())
        if (!inGroup(u, g))
          outside.insert(u);
    SmallVector<Operation *> rowReductions; // taken in by the row-chains rule
    bool fusible = !outside.empty() && llvm::all_of(outside, [&](Operation *u) {
      if (u->getBlock() != block || groupOf.count(u))
        return false;
      if ((isAllParallel(u) && !isa<linalg::FillOp>(u)) || isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(u) ||
          isSliceStore(u) || isCrop(u))
        return true;
      if (!joinsRowChain(u, g))
        return false;
      rowReductions.push_back(u);
      return true;
    });
    if (!fusible)
      break;
    for (Operation *u : outside) {
      if (groupOf.count(u))
        continue; // taken in as a producer of an earlier one
      add(u, g);
      // The new member's other operands may be produced by fusible ops used only here.
      addProducers(u, g);
    }
    // A row reduction may read an op that joined with it in this round (checked as coming from
    // outside then): its rows must still be the group's now.
    if (!llvm::all_of(rowReductions, [&](Operation *u) { return joinsRowChain(u, g); }))
      break;
    if (isValid(g))
      valid = groups[g].size();
  }
  while (groups[g].size() > valid) { // back to the last state with a single escaping op
    groupOf.erase(groups[g].back());
    groups[g].pop_back();
  }
}

void Partitioner::grow(Operation *seed) {
  int64_t g = groups.size();
  groups.emplace_back();
  add(seed, g);
  addProducers(seed, g);
  addConsumers(g);
  llvm::sort(groups[g], [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
}

bool Partitioner::isCloneable(Value v) const {
  Operation *def = v.getDefiningOp();
  if (!def)
    return false;
  if (isa<tensor::EmptyOp>(def))
    return def->getNumOperands() == 0;
  if (auto fill = dyn_cast<linalg::FillOp>(def)) // an initialiser, e.g. shared by two convolutions
    return llvm::all_of(fill->getOperands(), [&](Value o) { return isCloneable(o); });
  if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(def)) // a fresh destination reshaped (grouped convs)
    return def->getNumOperands() == 1 && isCloneable(def->getOperand(0));
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(def)) // a piece of a fresh destination
    return slice.getOffsets().empty() && slice.getSizes().empty() && slice.getStrides().empty() &&
           isCloneable(slice.getSource());
  if (auto cst = dyn_cast<arith::ConstantOp>(def)) {
    auto shaped = dyn_cast<ShapedType>(cst.getType());
    if (!shaped)
      return true;
    auto dense = dyn_cast<DenseElementsAttr>(cst.getValue());
    if (!dense) // dense_resource blobs (weights) stay in the parent: a callee alone has no blob
      return false;
    return dense.isSplat() || (shaped.hasStaticShape() && shaped.getNumElements() <= maxInlineElements);
  }
  return false;
}

/// Adds a cloneable op after the cloneable ops it uses (a fill after its constant and empty).
static void addClone(Operation *op, llvm::SetVector<Operation *> &clones) {
  for (Value v : op->getOperands())
    if (Operation *def = v.getDefiningOp())
      addClone(def, clones);
  clones.insert(op);
}

LogicalResult Partitioner::outline(Group &group, int64_t index, SymbolTable &symbols) {
  llvm::SmallPtrSet<Operation *, 16> members(group.begin(), group.end());
  llvm::SetVector<Value> args;
  llvm::SetVector<Operation *> clones;
  for (Operation *op : group) {
    op->walk([&](Operation *nested) {
      for (Value v : nested->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (def && (members.count(def) || op->isAncestor(def)))
          continue;
        if (!def && op->isAncestor(v.getParentBlock()->getParentOp()))
          continue; // a block argument of a region inside the member
        if (isCloneable(v))
          addClone(def, clones);
        else
          args.insert(v);
      }
    });
  }
  Operation *last = group.back();
  SmallVector<Type> argTypes, resultTypes(last->getResultTypes());
  for (Value v : args)
    argTypes.push_back(v.getType());

  // The callee, named after the parent and placed right after it.
  OpBuilder builder(func->getContext());
  builder.setInsertionPointAfter(lastCallee ? lastCallee : func.getOperation());
  std::string name = (func.getSymName() + "__t" + Twine(index)).str();
  auto callee = func::FuncOp::create(builder, group.front()->getLoc(), name,
                                     builder.getFunctionType(argTypes, resultTypes));
  callee.setPrivate();
  // Named after its anchor, else its multi-result Linalg op (a Winograd transform), else its last
  // Linalg op (not a slice store after it).
  Operation *anchor = last;
  auto multiResult = [](Operation *op) { return isa<linalg::LinalgOp>(op) && op->getNumResults() > 1; };
  if (auto it = llvm::find_if(group, isAnchor); it != group.end())
    anchor = *it;
  else if (auto mit = llvm::find_if(group, multiResult); mit != group.end())
    anchor = *mit;
  else if (auto rit = llvm::find_if(llvm::reverse(group), [](Operation *op) { return isa<linalg::LinalgOp>(op); });
           rit != llvm::reverse(group).end())
    anchor = *rit;
  callee->setAttr("ansor.group", builder.getStringAttr(anchor->getName().getStringRef()));
  symbols.insert(callee, Block::iterator(callee)); // uniques the name if it is taken
  lastCallee = callee;
  Block *body = callee.addEntryBlock();
  IRMapping map;
  for (auto [v, arg] : llvm::zip(args, body->getArguments()))
    map.map(v, arg);
  builder.setInsertionPointToStart(body);
  for (Operation *op : clones)
    builder.clone(*op, map);
  for (Operation *op : group)
    builder.clone(*op, map);
  SmallVector<Value> rets;
  for (Value r : last->getResults())
    rets.push_back(map.lookup(r));
  func::ReturnOp::create(builder, last->getLoc(), rets);

  // The call replaces the group.
  builder.setInsertionPoint(last);
  auto call = func::CallOp::create(builder, last->getLoc(), callee, args.getArrayRef());
  last->replaceAllUsesWith(call.getResults());
  for (Operation *op : group)
    for (Operation *user : op->getUsers())
      if (!members.count(user)) // an invariant of the grouping; checked before anything is erased
        return user->emitError("ansor-partition: uses a value from inside task ") << name;
  for (Operation *op : llvm::reverse(group))
    op->erase();
  return success();
}

LogicalResult Partitioner::run(SymbolTable &symbols) {
  if (!llvm::hasSingleElement(func.getBody()))
    return success();
  block = &func.getBody().front();
  for (Operation &op : *block)
    if (isAnchor(&op) && !groupOf.count(&op))
      grow(&op);
  // Element-wise ops reading windows or pieces go first: those views join a group only as
  // producers, so their consumer must claim them (with the pad and whatever produces the padded
  // tensor) before that producer starts a group of its own.
  auto readsViews = [](Operation *op) {
    return llvm::any_of(op->getOperands(), [](Value v) {
      Operation *def = v.getDefiningOp();
      return def && (isPadWindow(def) || isLeadingPiece(def));
    });
  };
  for (bool viewsFirst : {true, false})
    for (Operation &op : *block)
      if (isAllParallel(&op) && !isa<linalg::FillOp>(op) && !groupOf.count(&op) &&
          !isConstantOnly(&op, constantOnly) && (!viewsFirst || readsViews(&op)))
        grow(&op);
  // Program order of the groups: by their last op.
  llvm::sort(groups, [](const Group &a, const Group &b) { return a.back()->isBeforeInBlock(b.back()); });
  for (auto [i, group] : llvm::enumerate(groups))
    if (failed(outline(group, i, symbols)))
      return failure();
  // Producers cloned into callees (empties, small constants) may now be dead in the parent.
  // Fills and slices first, then what they used: walk backwards.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*block)))
    if (isa<tensor::EmptyOp, arith::ConstantOp, linalg::FillOp, tensor::ExtractSliceOp>(op) && op.use_empty())
      op.erase();
  return success();
}

struct PartitionPass : public mlir::ansor::impl::PartitionBase<PartitionPass> {
  using PartitionBase::PartitionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> funcs;
    for (auto f : module.getOps<func::FuncOp>())
      if (f.isPublic() && !f.isExternal())
        funcs.push_back(f);
    for (func::FuncOp f : funcs)
      if (failed(Partitioner(f, maxInlineElements, rowChains).run(symbols)))
        return signalPassFailure();
  }
};

} // namespace

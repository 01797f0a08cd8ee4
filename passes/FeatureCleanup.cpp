//===- FeatureCleanup.cpp - ansor-feature-cleanup ----------------------------------===//
//
// scheduled payload (right after a transform script) --(targeted canonicalization)--> IR for
// ansor-extract-features. See Passes.td for why not plain `canonicalize`.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::ansor {
#define GEN_PASS_DEF_FEATURECLEANUP
#include "passes/Passes.h.inc"
} // namespace mlir::ansor

using namespace mlir;

namespace {

/// Inlines the body of an scf.forall whose every dimension runs once. (scf.for's own
/// canonicalization patterns, added below, already do this for scf.for; scf.forall's full set is
/// the expensive part of canonicalization and is not needed otherwise.)
struct PromoteSingleIterationForall : public OpRewritePattern<scf::ForallOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(scf::ForallOp op, PatternRewriter &rewriter) const override {
    return op.promoteIfSingleIteration(rewriter); // fails unless every trip count is one
  }
};

template <typename... Ops>
void addCanonicalizations(RewritePatternSet &patterns, MLIRContext *ctx) {
  (Ops::getCanonicalizationPatterns(patterns, ctx), ...);
}

struct FeatureCleanup : public ansor::impl::FeatureCleanupBase<FeatureCleanup> {
  // Built once per pass instance (a reused PassManager initializes it once), not per run.
  std::shared_ptr<const FrozenRewritePatternSet> patterns;

  LogicalResult initialize(MLIRContext *ctx) override {
    RewritePatternSet set(ctx);
    // Chosen by comparing features after this pass and after `canonicalize` on random
    // candidates of every sketch kind (tests/test_features.py keeps a sample of that check):
    // - single-iteration loops disappear (scf.for by its own patterns, scf.forall by ours), so slices of their
    //   variables fold and transfer writes forward to the reads after them;
    // - scf.for's own patterns drop loop-carried tensors that only pass through (the
    //   reduction-chain sketches leave them), which also enables that forwarding;
    // - the vector ops vectorization leaves in reductions and broadcasts of unit dims fold
    //   (they change the compute counts), and a transfer write overwritten by the next one
    //   (a fused initialiser) is dropped.
    // scf.forall's and tensor's canonicalization patterns were the expensive part of the
    // full set and change no feature once the extractor reads through casts.
    set.add<PromoteSingleIterationForall>(ctx);
    addCanonicalizations<scf::ForOp, vector::MultiDimReductionOp, vector::TransposeOp,
                         vector::BroadcastOp, vector::ShapeCastOp, vector::TransferWriteOp>(set,
                                                                                         ctx);
    patterns = std::make_shared<const FrozenRewritePatternSet>(std::move(set));
    return success();
  }

  void runOnOperation() override {
    // Marks a cached script prefix left on the payload ops it handed to its suffix
    // (python/ansor/search/features.py): removed, so no op differs from its unmarked twin (CSE).
    getOperation()->walk([](Operation *op) {
      SmallVector<StringAttr> marks;
      for (NamedAttribute attr : op->getDiscardableAttrs())
        if (attr.getName().getValue().starts_with("ansor.prefix."))
          marks.push_back(attr.getName());
      for (StringAttr name : marks)
        op->removeDiscardableAttr(name);
    });
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    // Not converging within the default iteration limit is harmless here: features are read
    // from whatever IR results.
    (void)applyPatternsGreedily(getOperation(), *patterns, config);
  }
};

} // namespace

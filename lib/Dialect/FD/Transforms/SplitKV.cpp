//===- SplitKV.cpp - fd.attention -> partial attention + merge ------------===//
//
// The Flash-Decoding rewrite: attention over the whole cache becomes attention
// over S chunks (fd.partial_attention) and an exact log-sum-exp combine
// (fd.merge), with the intermediate partials in one explicit workspace.
//
//===----------------------------------------------------------------------===//

#include "fd/Dialect/FD/Transforms/Passes.h"
#include "fd/Dialect/FD/Utils/AttentionUtils.h"
#include "fd/Planning/SplitPlanner.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <limits>

using namespace mlir;
using namespace mlir::fd;

bool mlir::fd::isDecodeShaped(AttentionOp op) {
  return op.getGeometry().queryLength <= kMaxDecodeQueryLength;
}

/// A static dimension, else the hint, else failure with a message naming the
/// option that supplies it.
static FailureOr<int64_t> staticOrHint(AttentionOp op, int64_t dim,
                                       int64_t hint, StringRef what,
                                       StringRef option, bool emitErrors) {
  if (!ShapedType::isDynamic(dim))
    return dim;
  if (hint > 0)
    return hint;
  if (emitErrors)
    op.emitOpError() << "fd-split-kv: the " << what << " is dynamic; pass the '"
                     << option
                     << "' option (or a fixed 'num-splits') to plan the "
                        "split count";
  return failure();
}

::flashdecode::SplitPlannerOptions
mlir::fd::getSplitPlannerOptions(const FDSplitKVOptions &options) {
  ::flashdecode::SplitPlannerOptions planner;
  planner.smCount = options.smCount;
  planner.blocksPerSM = options.blocksPerSM;
  planner.minChunkLength = options.minChunkLength;
  planner.maxSplits = options.maxSplits;
  return planner;
}

/// The chip `options` plan for (an unknown one, which resolveNumSplits
/// refuses before anything is rewritten, plans as the default).
static const ::flashdecode::Chip &
getPlanningChip(const FDSplitKVOptions &options) {
  return ::flashdecode::findChipOrDefault(options.chip);
}

/// The schedule of `op`'s partial kernel: its own, else the planner's on
/// the planning chip.
static ::flashdecode::KernelSchedule
getPartialKernelSchedule(AttentionOp op, const FDSplitKVOptions &options) {
  return getOrPlanKernelSchedule(op, getPlanningChip(options));
}

::flashdecode::WorkspaceLayout
mlir::fd::getWorkspaceLayout(const AttentionGeometry &geometry,
                             int64_t numSplits, bool fusedMerge) {
  return ::flashdecode::WorkspaceLayout::get(
      geometry.queryLength, geometry.numQueryHeads, geometry.numKVHeads,
      numSplits, geometry.valueHeadDim, fusedMerge);
}

::flashdecode::SplitWorkload
mlir::fd::getSplitWorkload(AttentionOp op, const FDSplitKVOptions &options) {
  return ::flashdecode::getSplitWorkload(
      getKernelProblem(op), getPartialKernelSchedule(op, options),
      getPlanningChip(options), options.fusedMerge);
}

FailureOr<int64_t> mlir::fd::resolveNumSplits(AttentionOp op,
                                              const FDSplitKVOptions &options,
                                              bool emitErrors) {
  FailureOr<::flashdecode::SplitPlan> plan =
      resolveSplitPlan(op, options, emitErrors);
  if (failed(plan))
    return failure();
  return plan->numSplits;
}

FailureOr<::flashdecode::SplitPlan>
mlir::fd::resolveSplitPlan(AttentionOp op, const FDSplitKVOptions &options,
                           bool emitErrors) {
  auto fail = [&](const Twine &message) -> FailureOr<::flashdecode::SplitPlan> {
    if (emitErrors)
      op.emitOpError() << "fd-split-kv: " << message;
    return failure();
  };
  if (options.numSplits < 0)
    return fail("'num-splits' must be >= 0 (0 = automatic), got " +
                Twine(options.numSplits));
  if (options.chunkLength < 0)
    return fail("'chunk-length' must be >= 0 (0 = follow the sequence "
                "length), got " +
                Twine(options.chunkLength));
  if (std::string fixed = ::flashdecode::validateFixedSplitCount(
          options.numSplits, options.maxSplits);
      !fixed.empty())
    return fail(fixed);
  // The chip plans the schedule the partial op carries, whatever the count.
  if (!::flashdecode::findChip(options.chip))
    return fail("chip '" + options.chip + "' is not supported: expected " +
                ::flashdecode::getChipNameList());
  ::flashdecode::KernelSchedule schedule =
      getPartialKernelSchedule(op, options);
  ::flashdecode::SplitPlan given;
  given.clusterCtas = schedule.clusterCtas;
  if (options.numSplits > 0) {
    given.numSplits = options.numSplits;
    return given;
  }

  AttentionGeometry geometry = op.getGeometry();
  FailureOr<int64_t> batch = 1;
  if (options.chunkLength == 0)
    batch = staticOrHint(op, geometry.batch, options.batchHint,
                         "batch size (B)", "batch", emitErrors);
  if (failed(batch))
    return failure();
  // The splits cut the keys some query sees: with a window, at most
  // W + Lq - 1 of them however long the cache, so a window needs no
  // length hint.
  AttentionRules rules = op.getRules();
  int64_t lengthBound = geometry.maxLength;
  if (ShapedType::isDynamic(lengthBound) && rules.windowLeft &&
      options.maxLengthHint <= 0)
    lengthBound = std::numeric_limits<int64_t>::max();
  FailureOr<int64_t> maxLength =
      staticOrHint(op, lengthBound, options.maxLengthHint,
                   "cache length (Lmax)", "max-len", emitErrors);
  if (failed(maxLength))
    return failure();
  *maxLength = getAttendedLength(*maxLength, rules);
  // An automatic count with a fused merge: no more than it can merge (a
  // fixed count it cannot take is the lowering's error, which says how
  // many it can).
  int64_t cap = ::flashdecode::getAutomaticSplitCap(schedule, options.maxSplits,
                                                    options.fusedMerge);
  if (options.chunkLength > 0) {
    if (options.maxSplits < 1)
      return fail("'max-splits' must be >= 1, got " + Twine(options.maxSplits));
    given.numSplits = ::flashdecode::getChunkedSplitCount(
        *maxLength, options.chunkLength, cap);
    return given;
  }

  ::flashdecode::SplitPlannerOptions plannerOptions =
      getSplitPlannerOptions(options);
  std::string invalid = ::flashdecode::validateSplitPlannerInputs(
      *batch, geometry.numKVHeads, *maxLength, plannerOptions);
  if (!invalid.empty())
    return fail(invalid);
  plannerOptions.maxSplits = cap;
  ::flashdecode::KernelProblem problem = getKernelProblem(op);
  // The planner's schedule may give its chunks clusters; one the op
  // carries is built as written.
  return ::flashdecode::planNumSplits(
      problem.getBlockBatch(*batch), geometry.numKVHeads, *maxLength,
      plannerOptions,
      ::flashdecode::getSplitWorkload(
          problem, schedule, getPlanningChip(options), options.fusedMerge,
          /*plansClusters=*/!op.getScheduleAttr()));
}

namespace {

/// The enclosing function's argument marked as the workspace, if any.
Value findWorkspaceArgument(Operation *op) {
  auto function = op->getParentOfType<FunctionOpInterface>();
  if (!function || function.isExternal())
    return Value();
  for (unsigned i = 0, e = function.getNumArguments(); i < e; ++i)
    if (function.getArgAttr(i, kWorkspaceArgumentAttrName))
      return function.getArgument(i);
  return Value();
}

/// fd.attention (Lq <= 8) -> workspace + fd.partial_attention + fd.merge.
struct SplitDecodeAttention : OpRewritePattern<AttentionOp> {
  SplitDecodeAttention(MLIRContext *context, const FDSplitKVOptions &options)
      : OpRewritePattern(context), options(options) {}

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (!isDecodeShaped(op))
      return rewriter.notifyMatchFailure(op, "prefill-shaped (Lq > 8)");
    FailureOr<::flashdecode::SplitPlan> plan =
        resolveSplitPlan(op, options, /*emitErrors=*/false);
    if (failed(plan))
      return rewriter.notifyMatchFailure(op, "no split count");
    const int64_t *numSplits = &plan->numSplits;

    Location loc = op.getLoc();
    AttentionGeometry geometry = op.getGeometry();
    auto queryType = cast<MemRefType>(op.getQuery().getType());

    // Shapes of the partials: [B, (Lq,) Hq, S, D_v] and [B, (Lq,) Hq, S].
    SmallVector<int64_t> lseShape(queryType.getShape().drop_back());
    lseShape.push_back(*numSplits);
    SmallVector<int64_t> outputShape(lseShape);
    outputShape.push_back(geometry.valueHeadDim);
    Type f32 = rewriter.getF32Type();
    auto partialOutputType = MemRefType::get(outputShape, f32);
    auto partialLseType = MemRefType::get(lseShape, f32);

    ::flashdecode::WorkspaceLayout layout =
        getWorkspaceLayout(geometry, *numSplits, options.fusedMerge);

    Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
    SmallVector<Value> dynamicBatch;
    Value workspace =
        options.workspaceArgument ? findWorkspaceArgument(op) : Value();
    if (options.workspaceArgument && !workspace)
      return rewriter.notifyMatchFailure(op, "no workspace argument");
    Value lseOffset;
    if (ShapedType::isDynamic(queryType.getShape()[0])) {
      Value batch = memref::DimOp::create(rewriter, loc, op.getQuery(), 0);
      dynamicBatch.push_back(batch);
      auto scaled = [&](int64_t bytesPerSequence) -> Value {
        Value perSequence =
            arith::ConstantIndexOp::create(rewriter, loc, bytesPerSequence);
        return arith::MulIOp::create(rewriter, loc, batch, perSequence);
      };
      lseOffset = scaled(layout.partialOutputBytesPerSequence);
      if (!workspace)
        workspace = memref::AllocOp::create(
            rewriter, loc,
            MemRefType::get({ShapedType::kDynamic}, rewriter.getI8Type()),
            ValueRange{scaled(layout.getBytesPerSequence())},
            rewriter.getI64IntegerAttr(64));
    } else {
      int64_t batch = queryType.getShape()[0];
      if (!workspace)
        workspace = memref::AllocOp::create(
            rewriter, loc,
            MemRefType::get({layout.getBytes(batch)}, rewriter.getI8Type()),
            ValueRange{}, rewriter.getI64IntegerAttr(64));
      lseOffset = arith::ConstantIndexOp::create(
          rewriter, loc, layout.getPartialLseOffset(batch));
    }
    Value partialOutput = memref::ViewOp::create(
        rewriter, loc, partialOutputType, workspace, zero, dynamicBatch);
    Value partialLse = memref::ViewOp::create(
        rewriter, loc, partialLseType, workspace, lseOffset, dynamicBatch);

    IntegerAttr chunkLength =
        options.chunkLength > 0
            ? rewriter.getI64IntegerAttr(options.chunkLength)
            : IntegerAttr();
    // The partial kernel's schedule, the one the split count was planned
    // with (and its chunks' clusters): the lowering builds it.
    ::flashdecode::ScheduleChoice choice =
        getPartialKernelSchedule(op, options).getChoice();
    choice.clusterCtas = plan->clusterCtas;
    auto schedule = ScheduleAttr::get(rewriter.getContext(), choice);
    PartialAttentionOp::create(
        rewriter, loc, op.getQuery(), op.getKeyCache(), op.getValueCache(),
        op.getSeqLens(), op.getBlockTable(), op.getAlibiSlopes(),
        op.getQueryLens(), op.getKScale(), op.getVScale(), op.getKvShardRank(),
        op.getSuffixLens(), partialOutput, partialLse, op.getKvLayoutAttr(),
        op.getScaleAttr(), op.getWindowLeftAttr(), op.getLogitsSoftCapAttr(),
        op.getKvShardAttr(), op.getBlockTableHolesAttr(), schedule,
        chunkLength);
    // The sinks join the softmax once, in the merge, not per chunk; the
    // merge writes the padding rows the partial attention leaves alone.
    MergeOp::create(rewriter, loc, partialOutput, partialLse, op.getOutput(),
                    op.getLse(), op.getSinks(), op.getQueryLens());
    if (!options.workspaceArgument)
      memref::DeallocOp::create(rewriter, loc, workspace);
    rewriter.eraseOp(op);
    return success();
  }

  FDSplitKVOptions options;
};

} // namespace

void mlir::fd::populateSplitKVPatterns(RewritePatternSet &patterns,
                                       const FDSplitKVOptions &options) {
  patterns.add<SplitDecodeAttention>(patterns.getContext(), options);
}

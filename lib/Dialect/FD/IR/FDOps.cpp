//===- FDOps.cpp - Flash-Decoding dialect operations ----------------------===//

#include "CacheOperands.h"
#include "OperandChecks.h"
#include "fd/Dialect/FD/IR/FD.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::fd;
using namespace mlir::fd::detail;

AttentionGeometry
mlir::fd::computeAttentionGeometry(Value query, Value keyCache, Value seqLens,
                                   Value blockTable, Value output,
                                   KVLayout layout, Value suffixLens) {
  ArrayRef<int64_t> queryShape = memrefType(query).getShape();
  ArrayRef<int64_t> cacheShape = memrefType(keyCache).getShape();
  bool isNHD = layout == KVLayout::NHD;
  AttentionGeometry geometry;
  geometry.hasQueryLengthDim = queryShape.size() == 4;
  geometry.queryLength = geometry.hasQueryLengthDim ? queryShape[1] : 1;
  geometry.numQueryHeads = queryShape[queryShape.size() - 2];
  geometry.headDim = queryShape.back();
  geometry.valueHeadDim = memrefType(output).getShape().back();
  geometry.numKVHeads = cacheShape[isNHD ? 2 : 1];
  geometry.maxLength = cacheShape[isNHD ? 1 : 2];
  // A shared prefix's cache, lengths and block table are one sequence's.
  SmallVector<int64_t> batchSizes = {queryShape[0]};
  if (suffixLens)
    batchSizes.push_back(memrefType(suffixLens).getShape()[0]);
  else
    batchSizes.push_back(memrefType(seqLens).getShape()[0]);
  if (blockTable) {
    ArrayRef<int64_t> tableShape = memrefType(blockTable).getShape();
    geometry.pageSize = geometry.maxLength;
    geometry.maxLength = ShapedType::isDynamic(tableShape[1]) ||
                                 ShapedType::isDynamic(geometry.pageSize)
                             ? ShapedType::kDynamic
                             : tableShape[1] * geometry.pageSize;
    if (!suffixLens)
      batchSizes.push_back(tableShape[0]);
  } else if (!suffixLens) {
    batchSizes.push_back(cacheShape[0]);
  }
  geometry.batch = ShapedType::kDynamic;
  for (int64_t batch : batchSizes)
    if (!ShapedType::isDynamic(batch)) {
      geometry.batch = batch;
      break;
    }
  return geometry;
}

/// A [B] operand (`value`) holding one `what` per sequence: the lengths and
/// the query lengths.
static LogicalResult
verifyPerSequenceOperand(Operation *op, Value value, StringRef name,
                         StringRef what, const AttentionGeometry &geometry) {
  int64_t size = memrefType(value).getShape()[0];
  if (!dimsAgree(size, geometry.batch))
    return op->emitOpError()
           << "'" << name << "' must have one " << what
           << " per sequence: size " << formatShape({size})
           << " but the batch size is " << formatShape({geometry.batch});
  return success();
}

bool mlir::fd::isFloat8Cache(Value cache) {
  return isa<Float8E4M3FNType, Float8E5M2Type>(
      memrefType(cache).getElementType());
}

bool mlir::fd::isPerTensorScale(Value scales) {
  // A per-token shape is the cache's without D: rank 3 at least.
  return memrefType(scales).getRank() == 1;
}

/// The scales of an fp8 cache: both given exactly when the cache is fp8,
/// each per tensor ([1]) or per (token, KV head) (the cache's shape without
/// the head dim), both of one granularity.
static LogicalResult verifyKVScales(AttentionOpInterface op) {
  MemRefType cacheType = memrefType(op.getKeyCache());
  bool isFloat8 = isFloat8Cache(op.getKeyCache());
  // A latent cache's values are its own columns, scaled as its keys are.
  if (!op.getValueCache() && op.getVScale())
    return op->emitOpError()
           << "'v_scale' must be absent without 'value_cache': the values are "
              "the first D_v columns of 'key_cache', scaled by 'k_scale'";
  SmallVector<int64_t> perToken(cacheType.getShape().drop_back());
  std::string accepted = "[1] (per tensor) or " + formatShape(perToken) +
                         " (per token and KV head, the cache's shape without "
                         "the head dim) of f32";
  SmallVector<std::pair<StringRef, Value>> scales = {
      {"k_scale", op.getKScale()}};
  if (op.getValueCache())
    scales.push_back({"v_scale", op.getVScale()});
  for (auto [name, scale] : scales) {
    if (!isFloat8 && scale)
      return op->emitOpError()
             << "'" << name << "' applies to fp8 caches only, but "
             << "'key_cache' holds " << cacheType.getElementType();
    if (isFloat8 && !scale)
      return op->emitOpError()
             << "an fp8 'key_cache' (" << cacheType.getElementType()
             << ") needs '" << name << "': " << accepted;
    if (!scale)
      continue;
    ArrayRef<int64_t> shape = memrefType(scale).getShape();
    if (!shapesAgree(shape, {1}) && !shapesAgree(shape, perToken))
      return op->emitOpError() << "'" << name << "' must be " << accepted
                               << ", got " << scale.getType();
  }
  if (isFloat8 && op.getValueCache() &&
      memrefType(op.getKScale()).getRank() !=
          memrefType(op.getVScale()).getRank())
    return op->emitOpError()
           << "'k_scale' and 'v_scale' must be of one granularity (both per "
              "tensor or both per token and KV head), got "
           << op.getKScale().getType() << " and " << op.getVScale().getType();
  return success();
}

/// The value cache, or its absence, against the key cache and D_v (the
/// last dimension of `outputName`).
static LogicalResult verifyValues(Operation *op, Value keyCache,
                                  Value valueCache,
                                  const AttentionGeometry &geometry,
                                  StringRef outputName) {
  if (!isSupportedValueHeadDim(geometry.valueHeadDim))
    return op->emitOpError() << "'" << outputName << "' head dim (D_v) "
                             << formatShape({geometry.valueHeadDim})
                             << " is not supported: expected a static "
                             << ::flashdecode::describeSupportedValueHeadDims();
  ArrayRef<int64_t> keyShape = memrefType(keyCache).getShape();
  if (!valueCache) {
    if (geometry.valueHeadDim > geometry.headDim)
      return op->emitOpError()
             << "without 'value_cache' the values are the first D_v columns "
                "of 'key_cache': D_v ("
             << geometry.valueHeadDim << ", of '" << outputName
             << "') must be at most its head dim " << geometry.headDim;
    return success();
  }
  MemRefType valueType = memrefType(valueCache);
  SmallVector<int64_t> expected(keyShape.drop_back());
  expected.push_back(geometry.valueHeadDim);
  if (!shapesAgree(valueType.getShape(), expected))
    return op->emitOpError()
           << "'value_cache' shape " << formatShape(valueType.getShape())
           << " must be the 'key_cache' shape with the value head dim (D_v, "
              "of '"
           << outputName << "') last: " << formatShape(expected);
  return success();
}

/// Verifies the query, caches and lengths of the attention ops and returns
/// their geometry (D_v read off `output`, named `outputName`).
static FailureOr<AttentionGeometry>
verifyAttentionInputs(Operation *op, Value query, Value keyCache,
                      Value valueCache, Value seqLens, Value blockTable,
                      Value output, StringRef outputName, KVLayout layout,
                      Value suffixLens) {
  MemRefType queryType = memrefType(query);
  MemRefType keyType = memrefType(keyCache);

  // A 16- or 32-bit cache holds the query's type; an fp8 cache (scaled,
  // verifyKVScales) any of the query types.
  Type elementType = queryType.getElementType();
  Type cacheElementType = keyType.getElementType();
  bool isFloat8 = isFloat8Cache(keyCache);
  if (!isFloat8 && cacheElementType != elementType)
    return op->emitOpError()
           << "'key_cache' element type " << cacheElementType
           << " must match 'query' element type " << elementType;
  if (valueCache && memrefType(valueCache).getElementType() != cacheElementType)
    return op->emitOpError()
           << "'value_cache' element type "
           << memrefType(valueCache).getElementType() << " must match "
           << (isFloat8 ? "'key_cache'" : "'query'") << " element type "
           << cacheElementType;

  AttentionGeometry geometry = computeAttentionGeometry(
      query, keyCache, seqLens, blockTable, output, layout, suffixLens);
  if (!isSupportedKeyHeadDim(geometry.headDim))
    return op->emitOpError()
           << "'query' head dim " << formatShape({geometry.headDim})
           << " is not supported: expected a static "
           << ::flashdecode::describeSupportedKeyHeadDims();
  if (ShapedType::isDynamic(geometry.numQueryHeads) ||
      geometry.numQueryHeads < 1)
    return op->emitOpError("'query' head count (Hq) must be static and >= 1");
  if (ShapedType::isDynamic(geometry.queryLength) || geometry.queryLength < 1)
    return op->emitOpError("'query' token count (Lq) must be static and >= 1");

  ArrayRef<int64_t> cacheShape = keyType.getShape();
  bool isNHD = layout == KVLayout::NHD;
  StringRef layoutShape =
      blockTable
          ? (isNHD ? "[num_pages, page_size, Hkv, D] (paged NHD)"
                   : "[num_pages, Hkv, page_size, D] (paged HND)")
          : (isNHD ? "[B, Lmax, Hkv, D] (NHD)" : "[B, Hkv, Lmax, D] (HND)");
  if (ShapedType::isDynamic(geometry.numKVHeads) || geometry.numKVHeads < 1)
    return op->emitOpError()
           << "'key_cache' KV head count (Hkv) must be "
              "static and >= 1 in the layout "
           << layoutShape << ", got " << formatShape(cacheShape);
  if (cacheShape[3] != geometry.headDim)
    return op->emitOpError()
           << "'key_cache' head dim " << formatShape({cacheShape[3]})
           << " must equal the 'query' head dim " << geometry.headDim;
  if (geometry.numQueryHeads % geometry.numKVHeads != 0)
    return op->emitOpError()
           << "query heads (Hq = " << geometry.numQueryHeads
           << ") must be a multiple of KV heads (Hkv = " << geometry.numKVHeads
           << ") in 'key_cache' of layout " << layoutShape;

  int64_t queryBatch = queryType.getShape()[0];
  if (blockTable) {
    int64_t pageSize = geometry.pageSize;
    if (ShapedType::isDynamic(pageSize) ||
        !::flashdecode::isSupportedPageSize(pageSize))
      return op->emitOpError()
             << "paged 'key_cache' page size " << formatShape({pageSize})
             << " is not supported: expected a static "
             << ::flashdecode::describeSupportedPageSizes() << " in the layout "
             << layoutShape;
    int64_t tableBatch = memrefType(blockTable).getShape()[0];
    if (suffixLens && !dimsAgree(tableBatch, 1))
      return op->emitOpError()
             << "'block_table' with 'suffix_lens' holds the shared prefix's "
                "pages: one row, got "
             << formatShape({tableBatch}) << " rows";
    if (!suffixLens && !dimsAgree(tableBatch, queryBatch))
      return op->emitOpError()
             << "'block_table' must have one row per sequence: "
             << formatShape({tableBatch}) << " rows but the 'query' batch "
             << "size is " << formatShape({queryBatch});
  } else if (suffixLens && !dimsAgree(cacheShape[0], 1)) {
    return op->emitOpError()
           << "'key_cache' with 'suffix_lens' holds the shared prefix, one "
              "sequence: batch size [1], got "
           << formatShape({cacheShape[0]});
  } else if (!suffixLens && !dimsAgree(cacheShape[0], queryBatch)) {
    return op->emitOpError()
           << "'key_cache' batch size " << formatShape({cacheShape[0]})
           << " does not match the 'query' batch size "
           << formatShape({queryBatch});
  }
  if (suffixLens) {
    int64_t lengths = memrefType(seqLens).getShape()[0];
    if (!dimsAgree(lengths, 1))
      return op->emitOpError()
             << "'seq_lens' with 'suffix_lens' is the shared prefix's length: "
                "size [1], got "
             << formatShape({lengths});
    if (failed(verifyPerSequenceOperand(op, suffixLens, "suffix_lens",
                                        "suffix length", geometry)))
      return failure();
  } else if (failed(verifyPerSequenceOperand(op, seqLens, "seq_lens",
                                             "length", geometry))) {
    return failure();
  }
  if (
      failed(verifyValues(op, keyCache, valueCache, geometry, outputName)))
    return failure();
  return geometry;
}

/// The shape of one row-indexed tensor: [B, (Lq,) Hq] followed by `trailing`.
static SmallVector<int64_t> rowShape(const AttentionGeometry &geometry,
                                     ArrayRef<int64_t> trailing) {
  SmallVector<int64_t> shape = {geometry.batch};
  if (geometry.hasQueryLengthDim)
    shape.push_back(geometry.queryLength);
  shape.push_back(geometry.numQueryHeads);
  llvm::append_range(shape, trailing);
  return shape;
}

static LogicalResult verifyScale(Operation *op, FloatAttr scale) {
  if (!scale)
    return success();
  double value = scale.getValueAsDouble();
  if (!(std::isfinite(value) && value > 0.0))
    return op->emitOpError()
           << "'scale' must be a positive finite number, got " << value;
  return success();
}

/// The window and the soft-cap, with what they accept.
static LogicalResult verifyRules(AttentionOpInterface op) {
  if (IntegerAttr window = op.getWindowLeftAttr();
      window && window.getInt() < 1)
    return op->emitOpError()
           << "'window_left' must be >= 1 (a query sees itself and the "
              "window_left - 1 keys before it), got "
           << window.getInt();
  if (FloatAttr cap = op.getLogitsSoftCapAttr()) {
    double value = cap.getValueAsDouble();
    if (!(std::isfinite(value) && value > 0.0))
      return op->emitOpError()
             << "'logits_soft_cap' must be a positive finite number, got "
             << value;
  }
  if (op.getBlockTableHoles() && !op.getBlockTable())
    return op->emitOpError()
           << "'block_table_holes' says which block-table entries are holes: "
              "it needs a 'block_table'";
  if (op.getSuffixLens()) {
    StringRef other = op.getQueryLens()      ? "'query_lens'"
                      : op.getKvShardAttr()  ? "'kv_shard'"
                      : op.getBlockTableHoles() ? "'block_table_holes'"
                                                : "";
    if (!other.empty())
      return op->emitOpError()
             << "'suffix_lens' (a shared prefix) does not go with " << other
             << ": every sequence continuing the prefix has Lq query tokens "
                "and the prefix is one dense or paged sequence";
  }
  return verifyKVShard(op);
}

AttentionRules mlir::fd::getAttentionRules(Value query, IntegerAttr windowLeft,
                                           FloatAttr logitsSoftCap,
                                           Value queryLens,
                                           KVShardAttr kvShard,
                                           bool blockTableHoles,
                                           Value suffixLens) {
  ArrayRef<int64_t> queryShape = memrefType(query).getShape();
  AttentionRules rules;
  rules.queryLength = queryShape.size() == 4 ? queryShape[1] : 1;
  rules.perSequenceQueryLengths = static_cast<bool>(queryLens);
  if (windowLeft)
    rules.windowLeft = windowLeft.getInt();
  if (logitsSoftCap)
    rules.logitsSoftCap = static_cast<float>(logitsSoftCap.getValueAsDouble());
  if (kvShard)
    rules.kvShard = kvShard.getShard();
  rules.blockTableHoles = blockTableHoles;
  rules.sharedPrefix = static_cast<bool>(suffixLens);
  return rules;
}

static LogicalResult verifyLse(Operation *op, Value lse,
                               const AttentionGeometry &geometry) {
  if (!lse)
    return success();
  return verifyOperandShape(op, lse, "lse", rowShape(geometry, {}),
                            Float32Type::get(op->getContext()),
                            "[B, (Lq,) Hq]");
}

/// An optional f32 [Hq] operand (`value`, possibly null) holding one `what`
/// per query head: the sinks and the ALiBi slopes.
static LogicalResult verifyPerHeadOperand(Operation *op, Value value,
                                          StringRef name, StringRef what,
                                          const AttentionGeometry &geometry) {
  if (!value)
    return success();
  return verifyOperandShape(op, value, name, {geometry.numQueryHeads},
                            Float32Type::get(op->getContext()),
                            ("one " + what + " per query head, [Hq]").str());
}

static LogicalResult verifyAlibiSlopes(Operation *op, Value slopes,
                                       const AttentionGeometry &geometry) {
  return verifyPerHeadOperand(op, slopes, "alibi_slopes", "slope", geometry);
}

static LogicalResult verifySinks(Operation *op, Value sinks,
                                 const AttentionGeometry &geometry) {
  return verifyPerHeadOperand(op, sinks, "sinks", "logit", geometry);
}

/// The optional per-sequence query lengths: one per sequence.
static LogicalResult verifyQueryLens(Operation *op, Value queryLens,
                                     const AttentionGeometry &geometry) {
  if (!queryLens)
    return success();
  return verifyPerSequenceOperand(op, queryLens, "query_lens", "query length",
                                  geometry);
}

float mlir::fd::getEffectiveScale(FloatAttr scale, Value query) {
  if (scale)
    return static_cast<float>(scale.getValueAsDouble());
  int64_t headDim = memrefType(query).getShape().back();
  return 1.0f / std::sqrt(static_cast<float>(headDim));
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::verify() {
  FailureOr<AttentionGeometry> geometry = verifyAttentionInputs(
      *this, getQuery(), getKeyCache(), getValueCache(), getSeqLens(),
      getBlockTable(), getOutput(), "output", getKvLayout(), getSuffixLens());
  if (failed(geometry) || failed(verifyScale(*this, getScaleAttr())) ||
      failed(verifyRules(*this)) || failed(verifyKVScales(*this)))
    return failure();
  if (failed(verifyOperandShape(*this, getOutput(), "output",
                                rowShape(*geometry, {geometry->valueHeadDim}),
                                memrefType(getQuery()).getElementType(),
                                "shaped like 'query' with D_v last,")))
    return failure();
  if (getSinks() && getKvShardAttr())
    return emitOpError()
           << "'sinks' with 'kv_shard': each rank would count the sinks once "
              "more; merge the ranks' states, then join the sinks there as "
              "one more state (fd.merge_states)";
  if (failed(verifySinks(*this, getSinks(), *geometry)) ||
      failed(verifyAlibiSlopes(*this, getAlibiSlopes(), *geometry)) ||
      failed(verifyQueryLens(*this, getQueryLens(), *geometry)) ||
      failed(verifyLse(*this, getLse(), *geometry)))
    return failure();
  return verifySchedule(*this);
}

//===----------------------------------------------------------------------===//
// PartialAttentionOp
//===----------------------------------------------------------------------===//

int64_t PartialAttentionOp::getNumSplits() {
  ArrayRef<int64_t> shape = memrefType(getPartialOutput()).getShape();
  return shape[shape.size() - 2];
}

/// The split count S of a partial output [B, (Lq,) Hq, S, D], checked to be a
/// static positive number.
static FailureOr<int64_t> verifyNumSplits(Operation *op, Value partialOutput) {
  ArrayRef<int64_t> shape = memrefType(partialOutput).getShape();
  int64_t numSplits = shape[shape.size() - 2];
  if (ShapedType::isDynamic(numSplits) || numSplits < 1)
    return op->emitOpError()
           << "'partial_output' split count (S, the dimension before D) must "
              "be static and >= 1, got "
           << formatShape(shape);
  return numSplits;
}

LogicalResult PartialAttentionOp::verify() {
  FailureOr<AttentionGeometry> geometry = verifyAttentionInputs(
      *this, getQuery(), getKeyCache(), getValueCache(), getSeqLens(),
      getBlockTable(), getPartialOutput(), "partial_output", getKvLayout(), getSuffixLens());
  if (failed(geometry) || failed(verifyScale(*this, getScaleAttr())) ||
      failed(verifyRules(*this)) || failed(verifyKVScales(*this)))
    return failure();
  FailureOr<int64_t> numSplits = verifyNumSplits(*this, getPartialOutput());
  if (failed(numSplits))
    return failure();
  Type f32 = Float32Type::get(getContext());
  if (failed(verifyOperandShape(
          *this, getPartialOutput(), "partial_output",
          rowShape(*geometry, {*numSplits, geometry->valueHeadDim}), f32,
          "[B, (Lq,) Hq, S, D_v]")))
    return failure();
  if (failed(verifyOperandShape(*this, getPartialLse(), "partial_lse",
                                rowShape(*geometry, {*numSplits}), f32,
                                "[B, (Lq,) Hq, S]")))
    return failure();
  if (failed(verifyAlibiSlopes(*this, getAlibiSlopes(), *geometry)) ||
      failed(verifyQueryLens(*this, getQueryLens(), *geometry)))
    return failure();
  return verifySchedule(*this);
}

//===----------------------------------------------------------------------===//
// MergeOp
//===----------------------------------------------------------------------===//

int64_t MergeOp::getNumSplits() {
  ArrayRef<int64_t> shape = memrefType(getPartialOutput()).getShape();
  return shape[shape.size() - 2];
}

AttentionGeometry MergeOp::getGeometry() {
  ArrayRef<int64_t> partialShape = memrefType(getPartialOutput()).getShape();
  AttentionGeometry geometry;
  geometry.batch = partialShape.front();
  geometry.hasQueryLengthDim = partialShape.size() == 5;
  geometry.queryLength = geometry.hasQueryLengthDim ? partialShape[1] : 1;
  geometry.numQueryHeads = partialShape[partialShape.size() - 3];
  geometry.numKVHeads = 0;
  geometry.headDim = partialShape.back();
  geometry.valueHeadDim = geometry.headDim;
  geometry.maxLength = 0;
  return geometry;
}

LogicalResult MergeOp::verify() {
  FailureOr<int64_t> numSplits = verifyNumSplits(*this, getPartialOutput());
  if (failed(numSplits))
    return failure();
  AttentionGeometry geometry = getGeometry();
  if (!isSupportedValueHeadDim(geometry.headDim))
    return emitOpError() << "'partial_output' head dim "
                         << formatShape({geometry.headDim})
                         << " is not supported: expected a static "
                         << ::flashdecode::describeSupportedValueHeadDims();

  Type f32 = Float32Type::get(getContext());
  if (failed(verifyOperandShape(*this, getPartialLse(), "partial_lse",
                                rowShape(geometry, {*numSplits}), f32,
                                "[B, (Lq,) Hq, S] matching 'partial_output'")))
    return failure();
  MemRefType outputType = memrefType(getOutput());
  if (failed(verifyOperandShape(*this, getOutput(), "output",
                                rowShape(geometry, {geometry.headDim}),
                                outputType.getElementType(),
                                "[B, (Lq,) Hq, D] matching 'partial_output'")))
    return failure();
  if (failed(verifySinks(*this, getSinks(), geometry)) ||
      failed(verifyQueryLens(*this, getQueryLens(), geometry)))
    return failure();
  return verifyLse(*this, getLse(), geometry);
}

#include "fd/Dialect/FD/IR/FDInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "fd/Dialect/FD/IR/FDOps.cpp.inc"

//===- AttentionModule.cpp - The fd IR of a kernel configuration ----------===//

#include "fd/Compiler/AttentionModule.h"
#include "fd/Dialect/FD/IR/FD.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"

using namespace mlir;

namespace flashdecode {

Type getMLIRElementType(MLIRContext &context, ElementType type) {
  switch (type) {
  case ElementType::F16:
    return Float16Type::get(&context);
  case ElementType::BF16:
    return BFloat16Type::get(&context);
  case ElementType::F32:
    return Float32Type::get(&context);
  }
  llvm_unreachable("unknown element type");
}

/// The caches' element type: the query's, or fp8.
static Type getCacheElementType(MLIRContext &context,
                                const KernelConfig &config) {
  switch (config.kvCacheType) {
  case KVCacheType::SameAsQuery:
    return getMLIRElementType(context, config.elementType);
  case KVCacheType::E4M3:
    return Float8E4M3FNType::get(&context);
  case KVCacheType::E5M2:
    return Float8E5M2Type::get(&context);
  }
  llvm_unreachable("unknown KV cache type");
}

FunctionModule startFunctionModule(OpBuilder &builder, StringRef name,
                                   TypeRange argumentTypes) {
  MLIRContext &context = *builder.getContext();
  context.loadDialect<func::FuncDialect, mlir::fd::FDDialect>();
  Location loc = NameLoc::get(builder.getStringAttr(name));
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  builder.setInsertionPointToEnd(module->getBody());
  auto function = func::FuncOp::create(
      builder, loc, name, builder.getFunctionType(argumentTypes, {}));
  function->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                    builder.getUnitAttr());
  Block *entry = function.addEntryBlock();
  builder.setInsertionPointToStart(entry);
  return {std::move(module), loc, entry->getArguments()};
}

OwningOpRef<ModuleOp> buildAttentionModule(MLIRContext &context,
                                           const KernelConfig &config) {
  OpBuilder builder(&context);

  constexpr int64_t dynamic = ShapedType::kDynamic;
  Type elementType = getMLIRElementType(context, config.elementType);
  SmallVector<int64_t> rowShape = {dynamic};
  if (config.queryLength > 1)
    rowShape.push_back(config.queryLength);
  rowShape.push_back(config.numQueryHeads);
  SmallVector<int64_t> queryShape(rowShape);
  queryShape.push_back(config.headDim);
  bool isNHD = config.cacheLayout == CacheLayout::NHD;
  // Dense: [B, Lmax, ...]; paged: [num_pages, page_size, ...].
  int64_t positions = config.pageSize ? config.pageSize : dynamic;
  SmallVector<int64_t> cacheShape =
      isNHD ? SmallVector<int64_t>{dynamic, positions, config.numKVHeads,
                                   config.headDim}
            : SmallVector<int64_t>{dynamic, config.numKVHeads, positions,
                                   config.headDim};

  SmallVector<int64_t> outputShape(rowShape);
  outputShape.push_back(config.getValueHeadDim());
  SmallVector<int64_t> valueCacheShape(cacheShape);
  valueCacheShape.back() = config.getValueHeadDim();

  auto queryType = MemRefType::get(queryShape, elementType);
  Type cacheElementType = getCacheElementType(context, config);
  auto cacheType = MemRefType::get(cacheShape, cacheElementType);
  auto lengthsType = MemRefType::get({dynamic}, builder.getI32Type());
  // q, k, [v,] lengths, output: a shared cache has no value cache.
  SmallVector<Type> argumentTypes = {queryType, cacheType};
  if (!config.sharedKV)
    argumentTypes.push_back(MemRefType::get(valueCacheShape, cacheElementType));
  argumentTypes.append(
      {lengthsType, MemRefType::get(outputShape, elementType)});
  if (config.withLse)
    argumentTypes.push_back(MemRefType::get(rowShape, builder.getF32Type()));
  // A block table; of top-k lists, [B, K].
  if (config.pageSize)
    argumentTypes.push_back(MemRefType::get(
        {dynamic, config.topK ? config.topK : dynamic}, builder.getI32Type()));
  auto perHead = MemRefType::get({config.numQueryHeads}, builder.getF32Type());
  if (config.withSinks)
    argumentTypes.push_back(perHead);
  if (config.withAlibi)
    argumentTypes.push_back(perHead);
  if (config.withQueryLens)
    argumentTypes.push_back(lengthsType);
  // An fp8 cache's scales: [1], or per (token, KV head) the cache's shape
  // without the head dim.
  auto scaleType =
      MemRefType::get(config.kvScaleGranularity == KVScaleGranularity::Tensor
                          ? ArrayRef<int64_t>{1}
                          : ArrayRef<int64_t>(cacheShape).drop_back(),
                      builder.getF32Type());
  if (config.hasFloat8Cache())
    argumentTypes.push_back(scaleType);
  if (config.hasFloat8Cache() && !config.sharedKV)
    argumentTypes.push_back(scaleType);
  if (config.isKVSharded())
    argumentTypes.push_back(MemRefType::get({1}, builder.getI32Type()));
  if (config.sharedPrefix)
    argumentTypes.push_back(lengthsType);

  auto [module, loc, arguments] =
      startFunctionModule(builder, kAttentionFunctionName, argumentTypes);
  auto layout = mlir::fd::KVLayoutAttr::get(&context, config.cacheLayout);
  FloatAttr scale =
      config.scale ? builder.getF32FloatAttr(*config.scale) : FloatAttr();
  IntegerAttr window = config.windowLeft
                           ? builder.getI64IntegerAttr(config.windowLeft)
                           : IntegerAttr();
  FloatAttr softCap = config.logitsSoftCap
                          ? builder.getF32FloatAttr(*config.logitsSoftCap)
                          : FloatAttr();
  // q, k, [v,] lengths and output, then lse, block table, sinks, ALiBi
  // slopes, query lengths, k and v scales, the KV shard's rank, the suffix
  // lengths, each when configured.
  ValueRange optional = arguments;
  auto next = [&](bool present) {
    if (!present)
      return Value();
    Value argument = optional.front();
    optional = optional.drop_front();
    return argument;
  };
  Value query = next(true);
  Value keyCache = next(true);
  Value valueCache = next(!config.sharedKV);
  Value lengths = next(true);
  Value output = next(true);
  Value lse = next(config.withLse);
  Value blockTable = next(config.pageSize != 0);
  Value sinks = next(config.withSinks);
  Value alibiSlopes = next(config.withAlibi);
  Value queryLens = next(config.withQueryLens);
  Value kScale = next(config.hasFloat8Cache());
  Value vScale = next(config.hasFloat8Cache() && !config.sharedKV);
  Value shardRank = next(config.isKVSharded());
  Value suffixLens = next(config.sharedPrefix);
  mlir::fd::KVShardAttr shard =
      config.isKVSharded()
          ? mlir::fd::KVShardAttr::get(&context, config.kvShardWorld,
                                       config.kvShardInterleave)
          : mlir::fd::KVShardAttr();
  mlir::fd::AttentionOp::create(
      builder, loc, query, keyCache, valueCache, lengths, blockTable,
      alibiSlopes, queryLens, kScale, vScale, shardRank, suffixLens, output,
      lse, sinks,
      layout, scale, window, softCap, shard,
      config.topK ? builder.getUnitAttr() : UnitAttr(),
      config.schedule ? mlir::fd::ScheduleAttr::get(&context, *config.schedule)
                      : mlir::fd::ScheduleAttr());
  func::ReturnOp::create(builder, loc);
  return std::move(module);
}

} // namespace flashdecode

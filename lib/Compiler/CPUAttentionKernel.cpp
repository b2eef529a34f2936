//===- CPUAttentionKernel.cpp - Run fd attention on the CPU ---------------===//

#include "fd/Compiler/CPUAttentionKernel.h"
#include "CPUJit.h"
#include "fd/Compiler/AttentionModule.h"
#include "fd/Compiler/SplitKVOptions.h"
#include "fd/Dialect/FD/IR/FD.h"
#include "fd/Dialect/FD/Pipelines/Passes.h"
#include "fd/Dialect/FD/Transforms/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;

namespace flashdecode {

CPUAttentionKernel::~CPUAttentionKernel() = default;

llvm::Expected<std::unique_ptr<CPUAttentionKernel>>
CPUAttentionKernel::compile(const KernelRequest &request) {
  const KernelConfig &config = request.config;
  std::string invalid = request.validate();
  if (!invalid.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), invalid);

  DialectRegistry registry;
  mlir::fd::registerFDDialects(registry);
  MLIRContext context(registry);
  DiagnosticCollector diagnostics(context);
  OwningOpRef<ModuleOp> module = buildAttentionModule(context, config);

  std::unique_ptr<CPUAttentionKernel> kernel(new CPUAttentionKernel());
  kernel->config = config;
  if (config.splitKV) {
    PassManager splitPipeline(&context);
    splitPipeline.addPass(
        mlir::fd::createFDSplitKV(getSplitKVOptions(request)));
    if (failed(splitPipeline.run(*module)))
      return diagnostics.failure("fd-split-kv");
    module->walk([&](mlir::fd::PartialAttentionOp op) {
      kernel->numSplits = op.getNumSplits();
    });
  }
  llvm::raw_string_ostream(kernel->splitIR) << *module;

  auto engine = compileForCPU(*module, diagnostics);
  if (!engine)
    return engine.takeError();
  kernel->engine = std::move(*engine);
  return kernel;
}

llvm::Error CPUAttentionKernel::run(const AttentionBuffers &buffers) const {
  auto invalid = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  if (buffers.batch < 0 || buffers.maxLength < 0)
    return invalid("batch and maxLength must be >= 0");
  if (!buffers.query || !buffers.keyCache || !buffers.seqLens ||
      !buffers.output)
    return invalid("query, keyCache, seqLens and output buffers are required");
  if (config.sharedKV && (buffers.valueCache || buffers.vScale))
    return invalid("the kernel reads its values from the key cache "
                   "(shared_kv): valueCache and vScale must be null");
  if (!config.sharedKV && !buffers.valueCache)
    return invalid("valueCache is required (the kernel was compiled without "
                   "shared_kv)");
  if (config.withLse && !buffers.lse)
    return invalid("the kernel was compiled with an lse output: lse buffer "
                   "required");
  if (config.pageSize && (!buffers.blockTable || buffers.numPages < 1 ||
                          buffers.maxPagesPerSequence < 1))
    return invalid("the kernel reads paged caches: blockTable, numPages and "
                   "maxPagesPerSequence are required");
  if (config.topK && buffers.maxPagesPerSequence != config.topK)
    return invalid("the kernel reads top-k lists of " +
                   std::to_string(config.topK) +
                   " slots: maxPagesPerSequence must be " +
                   std::to_string(config.topK) + ", got " +
                   std::to_string(buffers.maxPagesPerSequence));
  if (config.withAlibi && !buffers.alibiSlopes)
    return invalid("the kernel was compiled with ALiBi: alibiSlopes buffer "
                   "(float [num_q_heads]) required");
  if (config.withSinks && !buffers.sinks)
    return invalid("the kernel was compiled with attention sinks: sinks "
                   "buffer (float [num_q_heads]) required");
  if (config.withQueryLens && !buffers.queryLens)
    return invalid("the kernel was compiled with per-sequence query lengths: "
                   "queryLens buffer (int32 [batch]) required");
  if (config.hasFloat8Cache() &&
      (!buffers.kScale || (!config.sharedKV && !buffers.vScale)))
    return invalid("the kernel reads an fp8 cache: kScale and vScale buffers "
                   "(float, per tensor or per token and KV head) required");
  if (config.isKVSharded() && !buffers.kvShardRank)
    return invalid("the kernel reads a sharded cache: kvShardRank buffer "
                   "(int32 [1], this rank) required");
  if (config.isKVSharded() &&
      (*buffers.kvShardRank < 0 || *buffers.kvShardRank >= config.kvShardWorld))
    return invalid("kvShardRank " + std::to_string(*buffers.kvShardRank) +
                   " is not a rank of the shard: expected 0 to " +
                   std::to_string(config.kvShardWorld - 1));
  if (config.sharedPrefix && !buffers.suffixLens)
    return invalid("the kernel continues a shared prefix: suffixLens buffer "
                   "(int32 [batch]) required");

  llvm::SmallVector<int64_t> rowShape = {buffers.batch};
  if (config.queryLength > 1)
    rowShape.push_back(config.queryLength);
  rowShape.push_back(config.numQueryHeads);
  llvm::SmallVector<int64_t> queryShape(rowShape);
  queryShape.push_back(config.headDim);
  // A shared prefix is one sequence of the caches.
  int64_t sequences = config.sharedPrefix ? 1 : buffers.batch;
  int64_t outer = config.pageSize ? buffers.numPages : sequences;
  int64_t positions = config.pageSize ? config.pageSize : buffers.maxLength;
  llvm::SmallVector<int64_t> cacheShape =
      config.cacheLayout == CacheLayout::NHD
          ? llvm::SmallVector<int64_t>{outer, positions, config.numKVHeads,
                                       config.headDim}
          : llvm::SmallVector<int64_t>{outer, config.numKVHeads, positions,
                                       config.headDim};

  llvm::SmallVector<int64_t> outputShape(rowShape);
  outputShape.push_back(config.getValueHeadDim());
  llvm::SmallVector<int64_t> valueCacheShape(cacheShape);
  valueCacheShape.back() = config.getValueHeadDim();
  // The function's arguments (AttentionModule.cpp): q, k, [v,] lengths,
  // output, then the optional ones.
  llvm::SmallVector<llvm::SmallVector<int64_t>> descriptors = {
      makeDescriptor(buffers.query, queryShape),
      makeDescriptor(buffers.keyCache, cacheShape)};
  if (!config.sharedKV)
    descriptors.push_back(makeDescriptor(buffers.valueCache, valueCacheShape));
  descriptors.push_back(makeDescriptor(buffers.seqLens, {sequences}));
  descriptors.push_back(makeDescriptor(buffers.output, outputShape));
  if (config.withLse)
    descriptors.push_back(makeDescriptor(buffers.lse, rowShape));
  if (config.pageSize)
    descriptors.push_back(makeDescriptor(
        buffers.blockTable, {sequences, buffers.maxPagesPerSequence}));
  if (config.withSinks)
    descriptors.push_back(
        makeDescriptor(buffers.sinks, {config.numQueryHeads}));
  if (config.withAlibi)
    descriptors.push_back(
        makeDescriptor(buffers.alibiSlopes, {config.numQueryHeads}));
  if (config.withQueryLens)
    descriptors.push_back(makeDescriptor(buffers.queryLens, {buffers.batch}));
  if (config.hasFloat8Cache()) {
    llvm::SmallVector<int64_t> scaleShape = {1};
    if (config.kvScaleGranularity == KVScaleGranularity::TokenHead)
      scaleShape.assign(cacheShape.begin(), cacheShape.end() - 1);
    descriptors.push_back(makeDescriptor(buffers.kScale, scaleShape));
    if (!config.sharedKV)
      descriptors.push_back(makeDescriptor(buffers.vScale, scaleShape));
  }
  if (config.isKVSharded())
    descriptors.push_back(makeDescriptor(buffers.kvShardRank, {1}));
  if (config.sharedPrefix)
    descriptors.push_back(makeDescriptor(buffers.suffixLens, {buffers.batch}));

  return invokeWithDescriptors(*engine, kAttentionFunctionName, descriptors);
}

} // namespace flashdecode

//===- SplitKVOptions.cpp - fd-split-kv's options for a config ------------===//

#include "fd/Compiler/SplitKVOptions.h"

namespace flashdecode {

mlir::fd::FDSplitKVOptions getSplitKVOptions(const KernelConfig &config) {
  mlir::fd::FDSplitKVOptions split;
  split.numSplits = config.numSplits;
  split.chunkLength = config.chunkLength;
  split.batchHint = config.batch;
  split.maxLengthHint = config.maxLength;
  SplitPlannerOptions planner = config.getPlannerOptions();
  split.smCount = planner.smCount;
  split.blocksPerSM = planner.blocksPerSM;
  split.minChunkLength = planner.minChunkLength;
  split.maxSplits = planner.maxSplits;
  return split;
}

} // namespace flashdecode

//===- SplitKVOptions.cpp - fd-split-kv's options for a config ------------===//

#include "fd/Compiler/SplitKVOptions.h"
#include "fd/Compiler/Compile.h"

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
  // An automatic count with a fused merge: no more than it can merge, and
  // planned with its serial tail (the CPU path, which ignores the flag,
  // then splits alike). A fixed count the merge cannot take is the
  // lowering's error, which says how many it can.
  split.maxSplits =
      config.numSplits ? config.maxSplits : getAutomaticMaxSplits(config);
  split.fusedMerge = config.fusedMerge;
  return split;
}

} // namespace flashdecode

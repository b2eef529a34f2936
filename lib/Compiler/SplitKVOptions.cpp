//===- SplitKVOptions.cpp - fd-split-kv's options for a config ------------===//

#include "fd/Compiler/SplitKVOptions.h"
#include "fd/Dialect/FD/Utils/AttentionUtils.h"

#include <algorithm>

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
  split.chip = config.arch;
  // fd-split-kv plans an automatic count with a fused merge's serial tail
  // and within what it can merge (the CPU path, which ignores the flag,
  // then splits alike).
  split.fusedMerge = config.fusedMerge;
  return split;
}

int64_t resolveNumSplits(const KernelConfig &config) {
  if (!config.splitKV)
    return 1;
  if (config.numSplits > 0)
    return config.numSplits;
  // The module's batch and cache length are the config's (or planned for
  // it, where dynamic); its rules bound the keys a sequence attends to.
  mlir::fd::AttentionRules rules;
  rules.queryLength = config.queryLength;
  if (config.windowLeft > 0)
    rules.windowLeft = config.windowLeft;
  int64_t attended = mlir::fd::getAttendedLength(config.maxLength, rules);
  KernelSchedule schedule = config.getKernelSchedule();
  SplitPlannerOptions planner = config.getPlannerOptions();
  planner.maxSplits =
      getAutomaticSplitCap(schedule, config.maxSplits, config.fusedMerge);
  if (config.chunkLength > 0)
    return getChunkedSplitCount(attended, config.chunkLength,
                                planner.maxSplits);
  return planNumSplits(config.batch, config.numKVHeads, attended, planner,
                       getSplitWorkload(config.getKernelProblem(), schedule,
                                        config.getChip(), config.fusedMerge))
      .numSplits;
}

KernelConfig resolveKernelConfig(const KernelConfig &request) {
  KernelConfig resolved = request;
  resolved.numSplits = resolveNumSplits(request);
  KernelConfig defaults;
  resolved.batch = defaults.batch;
  resolved.maxLength = defaults.maxLength;
  resolved.smCount = defaults.smCount;
  resolved.blocksPerSM = defaults.blocksPerSM;
  resolved.minChunkLength = defaults.minChunkLength;
  resolved.maxSplits = std::max(defaults.maxSplits, resolved.numSplits);
  return resolved;
}

} // namespace flashdecode

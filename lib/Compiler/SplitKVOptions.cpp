//===- SplitKVOptions.cpp - fd-split-kv's options for a config ------------===//

#include "fd/Compiler/SplitKVOptions.h"
#include "fd/Dialect/FD/Utils/AttentionUtils.h"

namespace flashdecode {

mlir::fd::FDSplitKVOptions getSplitKVOptions(const KernelRequest &request) {
  const KernelConfig &config = request.config;
  const PlanningHints &hints = request.hints;
  mlir::fd::FDSplitKVOptions split;
  split.numSplits = config.numSplits;
  split.chunkLength = config.chunkLength;
  split.batchHint = hints.batch;
  split.maxLengthHint = hints.maxLength;
  const SplitPlannerOptions &planner = hints.planner;
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

int64_t resolveNumSplits(const KernelRequest &request) {
  const KernelConfig &config = request.config;
  const PlanningHints &hints = request.hints;
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
  if (config.isKVSharded())
    rules.kvShard = config.getKVShard();
  // A top-k list attends at most its K tokens, however long the cache.
  int64_t attended = mlir::fd::getAttendedLength(
      config.topK ? config.topK : hints.maxLength, rules);
  KernelSchedule schedule = config.getKernelSchedule();
  SplitPlannerOptions planner = hints.planner;
  planner.maxSplits = getAutomaticSplitCap(schedule, hints.planner.maxSplits,
                                           config.fusedMerge);
  if (config.chunkLength > 0)
    return getChunkedSplitCount(attended, config.chunkLength,
                                planner.maxSplits);
  KernelProblem problem = config.getKernelProblem();
  // The planner's schedule may give its chunks clusters (fd-split-kv plans
  // the same).
  return planNumSplits(problem.getBlockBatch(hints.batch), config.numKVHeads,
                       attended, planner,
                       getSplitWorkload(problem, schedule, config.getChip(),
                                        config.fusedMerge,
                                        /*plansClusters=*/!config.schedule))
      .numSplits;
}

KernelConfig resolve(const KernelRequest &request) {
  KernelConfig resolved = request.config;
  resolved.numSplits = resolveNumSplits(request);
  return resolved;
}

} // namespace flashdecode

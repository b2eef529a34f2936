//===- SplitPlanner.cpp - Choosing the number of KV splits ----------------===//

#include "fd/Planning/SplitPlanner.h"
#include "IntegerMath.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

namespace flashdecode {

using detail::ceilDiv;

SplitWorkload getSplitWorkload(const KernelProblem &problem,
                               const KernelSchedule &schedule, const Chip &chip,
                               bool fusedMerge, bool plansClusters) {
  SplitWorkload workload;
  workload.rowsPerKVHead = problem.getRowsPerKVHead();
  workload.headDim = problem.headDim;
  workload.valueHeadDim = problem.getValueHeadDim();
  workload.valuesFromKeys = problem.valuesFromKeys;
  workload.kvElementBytes = problem.cacheElementBytes;
  workload.queryElementBytes = problem.queryElementBytes;
  workload.tokensPerStep = schedule.getTokensPerStep();
  workload.rowsPerTile = schedule.getRowsPerTile();
  workload.blocksPerSM = schedule.getResidentBlocks(chip);
  workload.form = schedule.form;
  workload.keyValueStages = schedule.keyValueStages;
  workload.splitValueTile = schedule.layout.splitsValues;
  workload.fusedMerge = fusedMerge;
  // The wide tiles' partial rows (D_v f32 a row: the split-value tile's
  // and the warpgroup tile's) are what clusters save; the per-warp and
  // CUDA-core tiles' are narrow.
  workload.clusterCtas = workload.mostClusterCtas = schedule.clusterCtas;
  bool wideRows =
      (schedule.layout.splitsValues && schedule.usesTensorCores()) ||
      schedule.usesWarpgroupTile();
  if (plansClusters && chip.hasClusters && wideRows && !fusedMerge)
    workload.mostClusterCtas = kMaxClusterCtas;
  return workload;
}

SplitPlan evaluateSplits(int64_t batch, int64_t numKVHeads, int64_t maxLength,
                         int64_t numSplits, const SplitPlannerOptions &options,
                         const SplitWorkload &workload) {
  SplitPlan plan;
  plan.numSplits = numSplits;
  // A known workload's rows take a block per row tile, and a chunk a
  // cluster of blocks.
  int64_t rowTiles = workload.isKnown() ? workload.getRowTiles() : 1;
  int64_t clusterCtas = workload.isKnown() ? workload.clusterCtas : 1;
  plan.clusterCtas = clusterCtas;
  plan.blocks = batch * numKVHeads * numSplits * rowTiles * clusterCtas;
  int64_t blocksPerSM = options.blocksPerSM;
  if (workload.isKnown() && workload.blocksPerSM > 0)
    blocksPerSM = std::min(blocksPerSM, workload.blocksPerSM);
  int64_t slots = options.smCount * blocksPerSM;
  // Clusters take whole GPCs' slots: a GPC holds floor(its slots / C).
  if (clusterCtas > 1) {
    int64_t gpcSMs = std::clamp<int64_t>(options.smsPerGpc, 1, options.smCount);
    slots = options.smCount / gpcSMs *
            std::max<int64_t>(1, gpcSMs * blocksPerSM / clusterCtas) *
            clusterCtas;
  }
  plan.waves = ceilDiv(plan.blocks, slots);
  plan.waveEfficiency = static_cast<double>(plan.blocks) /
                        static_cast<double>(plan.waves * slots);
  plan.chunkLength = ceilDiv(maxLength, numSplits);
  if (!workload.isKnown()) {
    plan.modeledCost = static_cast<double>(
        plan.waves * (plan.chunkLength + options.blockOverheadTokens));
    return plan;
  }
  // A known workload's blocks take whole steps of keys, at their kernel's
  // pace. A CUDA-core block streams its share of the SM's bytes a
  // token-time (smBytesPerTokenTime over the four blocks an SM runs: 512,
  // a token of f16 keys and values at D = 128), however wide its tokens:
  // its warps keep a bounded number of bytes in flight.
  // A clustered chunk's blocks take shares of its whole steps.
  int64_t stepsPerBlock =
      ceilDiv(ceilDiv(plan.chunkLength, clusterCtas), workload.tokensPerStep);
  double chunkKeys =
      static_cast<double>(stepsPerBlock * workload.tokensPerStep);
  double clusterOverhead =
      clusterCtas > 1 ? static_cast<double>(options.clusterMergeOverheadTokens)
                      : 0.0;
  double blockBytesPerTokenTime =
      static_cast<double>(options.smBytesPerTokenTime) /
      static_cast<double>(kPlannedBlocksPerSM);
  if (workload.splitValueTile) {
    // An SM streams its blocks' chunks one after another or together at
    // its share of DRAM, a block alone a little slower, or as its steps'
    // latency lets it where the tokens are narrow (then the SM's blocks
    // together are faster); the fixed costs of the blocks it holds at once
    // overlap.
    // The SMs the waves' slots lie on (clusters may leave a GPC's last
    // SMs idle).
    int64_t blocksOnSM =
        ceilDiv(plan.blocks, std::max<int64_t>(1, slots / blocksPerSM));
    double alone = std::min(
        static_cast<double>(options.splitValueBlockBytesPerTokenTime),
        options.splitValueBlockKeysPerTokenTime * workload.getTokenBytes());
    // Where row tiles share a chunk's wide tokens, the SM's issue bounds
    // its blocks rather than its share of DRAM (which dramCost counts
    // once). Narrow tokens, whose steps' latency binds a block, keep the
    // share (fitted there; fdemu rated e4m3 MLA at 128 heads 26 % slower
    // planned at the issue rate).
    bool wideTokens = alone >= options.splitValueBlockBytesPerTokenTime;
    double smRate =
        static_cast<double>(workload.getRowTiles() > 1 && wideTokens
                                ? options.splitValueSMBytesPerTokenTime
                                : options.smBytesPerTokenTime);
    double rate =
        blocksOnSM > 1
            ? std::min(static_cast<double>(blocksOnSM) * alone, smRate)
            : alone;
    plan.modeledCost =
        static_cast<double>(blocksOnSM) * chunkKeys * workload.getTokenBytes() /
            rate +
        static_cast<double>(plan.waves) *
            (static_cast<double>(options.splitValueBlockOverheadTokens) +
             clusterOverhead);
  } else {
    double blockCost =
        workload.usesTensorCores()
            ? chunkKeys /
                      static_cast<double>(options.tensorCoreKeysPerTokenTime) +
                  static_cast<double>(options.tensorCoreBlockOverheadTokens)
            : chunkKeys * workload.getTokenBytes() / blockBytesPerTokenTime +
                  static_cast<double>(options.blockOverheadTokens);
    blockCost += clusterOverhead;
    plan.modeledCost = static_cast<double>(plan.waves) * blockCost;
  }
  // One split reads the cache and writes the output directly; more write
  // partial rows that the merge reads back, after the partial kernel.
  double streams = static_cast<double>(batch * numKVHeads);
  double gpuBytesPerTokenTime =
      static_cast<double>(options.smCount * options.smBytesPerTokenTime);
  double partialBytes = numSplits > 1
                            ? streams * static_cast<double>(numSplits) *
                                  workload.getPartialBytes()
                            : 0.0;
  double cacheBytes =
      streams * static_cast<double>(maxLength) * workload.getTokenBytes();
  plan.dramCost = (cacheBytes + partialBytes) / gpuBytesPerTokenTime;
  // Little's law: a wave of tensor-core blocks with fewer bytes in flight
  // than the SMs need streams at that fraction of the DRAM rate.
  if (workload.usesTensorCores()) {
    double inFlight = static_cast<double>(std::min(plan.blocks, slots)) *
                      workload.getStepBytes();
    double needed =
        static_cast<double>(options.smCount * options.smBytesInFlight);
    plan.dramCost /= std::min(1.0, inFlight / needed);
  }
  // A fused merge's last block reads its stream's partials alone; many
  // streams' tails together read no faster than the merge kernel would.
  double mergeCost = partialBytes / gpuBytesPerTokenTime;
  if (workload.fusedMerge)
    mergeCost =
        std::max(mergeCost,
                 partialBytes / streams /
                     static_cast<double>(options.blockMergeBytesPerTokenTime));
  plan.modeledCost = std::max(plan.modeledCost, plan.dramCost) + mergeCost;
  return plan;
}

/// An option's or input's name with `wordSeparator` between its words.
static std::string spell(std::string words, char wordSeparator) {
  for (char &c : words)
    if (c == '-')
      c = wordSeparator;
  return words;
}

/// The message for an input or option that must be positive.
static std::string notPositive(const char *input, int64_t value,
                               char wordSeparator) {
  return spell(input, wordSeparator) + " must be >= 1, got " +
         std::to_string(value);
}

std::string validateSplitPlannerInputs(int64_t batch, int64_t numKVHeads,
                                       int64_t maxLength,
                                       const SplitPlannerOptions &options,
                                       char wordSeparator) {
  auto positive = [&](const char *input, int64_t value) {
    return notPositive(input, value, wordSeparator);
  };
  if (batch < 1)
    return positive("batch", batch);
  if (numKVHeads < 1)
    return positive("num-kv-heads", numKVHeads);
  if (maxLength < 0)
    return spell("max-len", wordSeparator) + " must be >= 0, got " +
           std::to_string(maxLength);
  if (options.smCount < 1)
    return positive("sm-count", options.smCount);
  if (options.blocksPerSM < 1)
    return positive("blocks-per-sm", options.blocksPerSM);
  if (options.minChunkLength < 1)
    return positive("min-chunk-length", options.minChunkLength);
  if (options.maxSplits < 1)
    return positive("max-splits", options.maxSplits);
  if (options.smBytesPerTokenTime < 1)
    return positive("sm-bytes-per-token-time", options.smBytesPerTokenTime);
  if (options.blockMergeBytesPerTokenTime < 1)
    return positive("block-merge-bytes-per-token-time",
                    options.blockMergeBytesPerTokenTime);
  if (options.tensorCoreKeysPerTokenTime < 1)
    return positive("tensor-core-keys-per-token-time",
                    options.tensorCoreKeysPerTokenTime);
  if (options.smBytesInFlight < 1)
    return positive("sm-bytes-in-flight", options.smBytesInFlight);
  if (options.splitValueSMBytesPerTokenTime < 1)
    return positive("split-value-sm-bytes-per-token-time",
                    options.splitValueSMBytesPerTokenTime);
  return "";
}

std::string validateFixedSplitCount(int64_t numSplits, int64_t maxSplits,
                                    char wordSeparator) {
  if (numSplits <= maxSplits)
    return "";
  std::string splits = spell("num-splits", wordSeparator);
  std::string cap = spell("max-splits", wordSeparator);
  return splits + " " + std::to_string(numSplits) + " is over " + cap + " (" +
         std::to_string(maxSplits) + "): at most " + cap + " splits (raise " +
         cap + " to allow more)";
}

std::string validateSplitWorkload(const SplitWorkload &workload,
                                  char wordSeparator) {
  if (!workload.isKnown())
    return "";
  auto positive = [&](const char *input, int64_t value) {
    return notPositive(input, value, wordSeparator);
  };
  if (workload.rowsPerKVHead < 1)
    return positive("rows-per-kv-head", workload.rowsPerKVHead);
  if (workload.headDim < 1)
    return positive("head-dim", workload.headDim);
  if (workload.tokensPerStep < 1)
    return positive("tokens-per-step", workload.tokensPerStep);
  if (workload.rowsPerTile < 1)
    return positive("rows-per-tile", workload.rowsPerTile);
  if (workload.blocksPerSM < 0)
    return spell("blocks-per-sm", wordSeparator) +
           " of the kernel's launch bounds must be >= 0 (0 = none), got " +
           std::to_string(workload.blocksPerSM);
  if (workload.kvElementBytes != 1 && workload.kvElementBytes != 2 &&
      workload.kvElementBytes != 4)
    return spell("kv-element-bytes", wordSeparator) +
           " must be 1 (fp8), 2 (f16, bf16) or 4 (f32), got " +
           std::to_string(workload.kvElementBytes);
  if (workload.queryElementBytes != 2 && workload.queryElementBytes != 4)
    return spell("query-element-bytes", wordSeparator) +
           " must be 2 (f16, bf16) or 4 (f32), got " +
           std::to_string(workload.queryElementBytes);
  return "";
}

SplitPlan planNumSplits(int64_t batch, int64_t numKVHeads, int64_t maxLength,
                        const SplitPlannerOptions &options,
                        const SplitWorkload &workload) {
  // Each cluster size the workload may take (its own, or with the planner's
  // split-value tile 1, 2, 4 and 8), at every split count whose blocks'
  // shares are no shorter than the shortest chunk.
  std::vector<int64_t> clusterSizes = {workload.clusterCtas};
  if (workload.mostClusterCtas > workload.clusterCtas)
    for (int64_t size = 2 * workload.clusterCtas;
         size <= workload.mostClusterCtas; size *= 2)
      clusterSizes.push_back(size);
  std::vector<SplitPlan> plans;
  for (int64_t clusterCtas : clusterSizes) {
    SplitWorkload clustered = workload;
    clustered.clusterCtas = clusterCtas;
    int64_t candidates =
        std::clamp<int64_t>(maxLength / (options.minChunkLength * clusterCtas),
                            1, options.maxSplits);
    for (int64_t numSplits = 1; numSplits <= candidates; ++numSplits)
      plans.push_back(evaluateSplits(batch, numKVHeads, maxLength, numSplits,
                                     options, clustered));
  }
  // The fastest plan of the workload's own cluster size, and of the larger
  // ones it may take.
  const SplitPlan *own = nullptr, *clustered = nullptr;
  for (const SplitPlan &plan : plans) {
    const SplitPlan *&best =
        plan.clusterCtas == workload.clusterCtas ? own : clustered;
    if (!best || plan.modeledCost < best->modeledCost)
      best = &plan;
  }
  // Clusters where they beat a block a chunk by more than the tolerance:
  // the fastest of them.
  if (clustered &&
      clustered->modeledCost * options.timeTolerance < own->modeledCost)
    return *clustered;
  // The fewest splits that come within the tolerance of the best time.
  double acceptable = own->modeledCost * options.timeTolerance;
  for (const SplitPlan &plan : plans)
    if (plan.clusterCtas == workload.clusterCtas &&
        plan.modeledCost <= acceptable)
      return plan;
  return *own;
}

int64_t getAutomaticSplitCap(const KernelSchedule &schedule, int64_t maxSplits,
                             bool fusedMerge) {
  if (!fusedMerge)
    return maxSplits;
  return std::clamp<int64_t>(schedule.getMostFusedMergeSplits(), 1, maxSplits);
}

int64_t getChunkedSplitCount(int64_t maxLength, int64_t chunkLength,
                             int64_t maxSplits) {
  return std::clamp<int64_t>(ceilDiv(maxLength, chunkLength), 1, maxSplits);
}

std::string describeSplitPlan(const SplitPlan &plan) {
  char text[160];
  std::snprintf(text, sizeof(text),
                "splits=%lld blocks=%lld waves=%lld wave-efficiency=%.2f "
                "chunk=%lld",
                static_cast<long long>(plan.numSplits),
                static_cast<long long>(plan.blocks),
                static_cast<long long>(plan.waves), plan.waveEfficiency,
                static_cast<long long>(plan.chunkLength));
  // Spelled only for clusters: plans without them read as before.
  if (plan.clusterCtas > 1)
    return text + std::string(" cluster-ctas=") +
           std::to_string(plan.clusterCtas);
  return text;
}

} // namespace flashdecode

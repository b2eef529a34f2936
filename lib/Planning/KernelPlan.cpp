//===- KernelPlan.cpp - The partial kernel's schedule, chosen once --------===//

#include "fd/Planning/KernelPlan.h"
#include "IntegerMath.h"
#include "fd/Planning/KernelChoice.h"

#include <algorithm>

namespace flashdecode {

using detail::ceilDiv;

int64_t WorkgroupBuffer::getNumElements() const {
  int64_t elements = 1;
  for (int64_t extent : shape)
    elements *= extent;
  return elements;
}

int64_t getMergeWeightsPerRow(int64_t numSplits) {
  return ceilDiv(numSplits, 4) * 4;
}

int64_t KernelSchedule::getRegisterBudget(const Chip &chip) const {
  if (minBlocksPerSM == 0)
    return chip.maxRegistersPerThread;
  // ptxas allocates a warp's registers 256 at a time: 8 a thread.
  int64_t perThread = chip.registersPerSM / (threads * minBlocksPerSM) / 8 * 8;
  return std::min<int64_t>(perThread, chip.maxRegistersPerThread);
}

std::vector<WorkgroupBuffer>
KernelSchedule::getWorkgroupBuffers(int64_t fusedMergeSplits) const {
  constexpr int64_t kWarps = PartialKernelLayout::kWarps;
  const int64_t headDim = layout.headDim;
  // A tensor-core tile's K/V stages take the accumulators' place: as many
  // rows as they need.
  const int64_t rowBytes = kWarps * headDim * 4;
  const int64_t accumulatorRows = std::max<int64_t>(
      layout.rowTile, ceilDiv(keyValueStages * layout.stageBytes(), rowBytes));
  std::vector<WorkgroupBuffer> buffers = {
      usesTensorCores() ? WorkgroupBuffer{{headDim / 16, 32, 4}, true}
                        : WorkgroupBuffer{{layout.rowTile, headDim}, false},
      WorkgroupBuffer{{kWarps, accumulatorRows, headDim}, false},
      WorkgroupBuffer{{kWarps, layout.rowTile, 2}, false}};
  // A fused merge keeps its rows' weights in the accumulators, free once
  // the chunk is done, or where they do not fit in a buffer of their own.
  int64_t weights = layout.rows * getMergeWeightsPerRow(fusedMergeSplits);
  if (fusedMergeSplits &&
      weights > buffers[kWarpAccumulatorsBuffer].getNumElements())
    buffers.push_back(WorkgroupBuffer{{weights}, false});
  return buffers;
}

int64_t KernelSchedule::getSharedMemoryBytes(int64_t fusedMergeSplits) const {
  // The kernels move workgroup memory 16 bytes at a time: every buffer
  // starts 16-byte aligned.
  int64_t bytes = 0;
  for (const WorkgroupBuffer &buffer : getWorkgroupBuffers(fusedMergeSplits))
    bytes = ceilDiv(bytes, 16) * 16 + buffer.getBytes();
  return bytes;
}

int64_t KernelSchedule::getMostFusedMergeSplits() const {
  std::vector<WorkgroupBuffer> own = getWorkgroupBuffers();
  int64_t floats =
      std::max(own[kWarpAccumulatorsBuffer].getNumElements(),
               (kMaxStaticSharedMemoryBytes - getSharedMemoryBytes()) / 4);
  // A row's weights are a multiple of 4 (getMergeWeightsPerRow).
  return floats / layout.rows / 4 * 4;
}

/// The tensor-core kernel's launch bounds and held q fragments.
static void planTensorCoreResidency(const KernelProblem &problem,
                                    const Chip &chip,
                                    KernelSchedule &schedule) {
  const PartialKernelLayout &layout = schedule.layout;
  const PartialKernelFeatures &features = problem.features;
  // The tensor-core kernel fits 128 registers (four blocks per SM, the
  // split planner's default wave) where ptxas would take a few more:
  // say so, as __launch_bounds__(128, 4) does. With a paged cache the
  // page lookups do not fit beside the fragments in 128 (ptxas spills a
  // few bytes in some configurations), nor do the query rows' windows
  // beside the soft-cap (8 bytes at MHA, Lq = 8 on sm_80), nor, at D =
  // 128, the rows' windows or query lengths beside q's held k-steps (4 to
  // 16 bytes at Hq / Hkv = 2 and 4, Lq > 1, on both arches), nor the ALiBi
  // slopes and positions of a lane's rows: three blocks, 168 registers.
  // So do 16-row tiles at D = 128 (MQA), to hold all of q's fragments:
  // read from workgroup memory, they made two blocks shared-memory-bound.
  bool rowsMasked = layout.causal && (features.window || features.queryLens);
  bool tight = features.paged || layout.alibi ||
               (layout.causal && features.window && features.softCap) ||
               (rowsMasked && layout.headDim == 128) ||
               (layout.rowTile == kTensorCoreTileRows && layout.headDim == 128);
  schedule.minBlocksPerSM = tight ? 3 : 4;
  // q's fragments all stay in registers through the token loop (else
  // they are read from workgroup memory every step: as much traffic as
  // K's and V's) where ptxas fits them: with three blocks' registers,
  // and with four at D = 64 on sm_90. Elsewhere ptxas 13.0 spills with
  // more than two held (sm_90, D = 128: 20 bytes with all eight).
  schedule.heldQuerySteps = layout.headDim / 16;
  bool hopper = chip.computeCapability >= 90;
  if (!tight && (!hopper || layout.headDim > 64))
    schedule.heldQuerySteps = 2;
}

KernelSchedule planKernel(const KernelProblem &problem, const Chip &chip) {
  KernelSchedule schedule;
  schedule.layout = PartialKernelLayout::get(
      problem.headDim, problem.queryElementBytes, problem.cacheElementBytes,
      problem.groupSize, problem.queryLength, problem.alibi);
  if (!schedule.layout.tensorCores)
    return schedule;
  schedule.form = KernelForm::TensorCores;
  schedule.keyValueStages = PartialKernelLayout::kKeyValueStages;
  planTensorCoreResidency(problem, chip, schedule);
  return schedule;
}

} // namespace flashdecode

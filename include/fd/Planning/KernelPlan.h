//===- KernelPlan.h - The partial kernel's schedule ------------*- C++ -*-===//
//
// What the partial-attention kernel of a problem is on a chip: its form
// (CUDA cores or tensor cores), tiling, launch bounds, what it keeps in
// registers and its workgroup memory. Standard C++ so that the split
// planner (which paces and counts the kernel's blocks), the GPU lowering
// (which builds exactly this schedule), the JIT and Python read one
// definition instead of working it out again.
//
//===----------------------------------------------------------------------===//

#ifndef FD_PLANNING_KERNELPLAN_H
#define FD_PLANNING_KERNELPLAN_H

#include "fd/Planning/Chip.h"
#include "fd/Planning/KernelChoice.h"
#include "fd/Planning/PartialKernelLayout.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashdecode {

/// What of a partial kernel, beyond its layout, takes registers.
struct PartialKernelFeatures {
  bool paged = false;
  bool window = false;
  bool softCap = false;
  /// Per-sequence query lengths.
  bool queryLens = false;
};

/// What of an attention problem its partial kernel's schedule depends on.
struct KernelProblem {
  /// D, the queries' and keys'.
  int64_t headDim = 0;
  /// D_v, the values' and outputs'; 0: headDim.
  int64_t valueHeadDim = 0;
  /// Whether the values are the first D_v columns of the key cache (no
  /// value cache of their own; MLA).
  bool valuesFromKeys = false;
  /// 2 (f16, bf16) or 4 (f32).
  int64_t queryElementBytes = 2;
  /// The cache's: 1 (fp8, decoded to the queries' type), 2 or 4.
  int64_t cacheElementBytes = 2;
  /// bf16 queries (not f16), and an fp8 cache's scales per token and KV
  /// head (not per tensor): together they keep a tensor-core tile's mma in
  /// bf16 (multipliesFloat8InHalf).
  bool bfloat16Queries = false;
  bool float8TokenScales = false;
  /// Hq / Hkv.
  int64_t groupSize = 1;
  int64_t queryLength = 1;
  bool alibi = false;
  /// A shared prefix (fd.attention's `suffix_lens`): the cache is one
  /// sequence that every query sequence continues, so a block's rows are
  /// those of getRequestsPerBlock() sequences, each streaming the prefix
  /// once for all of them.
  bool sharedPrefix = false;
  PartialKernelFeatures features;

  /// Query sequences whose rows one block (and its row tiles) computes: 1,
  /// or with a shared prefix as many as fill a tensor-core tile with their
  /// groupSize x queryLength rows (at least one).
  int64_t getRequestsPerBlock() const;
  /// Query tokens of one block's sequences: queryLength x
  /// getRequestsPerBlock().
  int64_t getTokensPerBlock() const {
    return queryLength * getRequestsPerBlock();
  }
  /// Query rows per KV head and block: groupSize x getTokensPerBlock().
  int64_t getRowsPerKVHead() const { return groupSize * getTokensPerBlock(); }
  /// The blocks along the batch that `batch` query sequences take:
  /// ceil(batch / getRequestsPerBlock()).
  int64_t getBlockBatch(int64_t batch) const;
  int64_t getValueHeadDim() const {
    return valueHeadDim ? valueHeadDim : headDim;
  }
  /// An fp8 cache that a tensor-core tile multiplies in f16.
  bool multipliesFloat8InHalf() const {
    return cacheElementBytes == 1 && queryElementBytes == 2 &&
           ::flashdecode::multipliesFloat8InHalf(bfloat16Queries,
                                                 float8TokenScales);
  }
};

/// The partial kernel's forms: CUDA cores; mma.sync tiles of up to 16
/// rows; wgmma tiles of 64 rows (sm_90a: the warpgroup tile).
enum class KernelForm { CudaCores, TensorCores, WarpgroupTensorCores };

/// The form's name in #fd.schedule and the manifest: "cuda_cores",
/// "tensor_cores", "warpgroup_tensor_cores".
std::string_view getKernelFormName(KernelForm form);
/// The form named `name`, or nothing.
std::optional<KernelForm> findKernelForm(std::string_view name);

/// What a schedule chooses, as `#fd.schedule` spells it (one field each, in
/// this order): the rest of a KernelSchedule follows from these and the
/// problem. planKernel chooses them; a test or a user may write them by
/// hand (getReasonScheduleInvalid says which cannot work).
struct ScheduleChoice {
  KernelForm form = KernelForm::CudaCores;
  /// Query rows one block computes, and blocks per (sequence, KV head,
  /// split) to cover a KV head's rows.
  int64_t rowsPerTile = 1;
  int64_t rowTiles = 1;
  int64_t threads = PartialKernelLayout::kThreads;
  /// KernelSchedule's fields of the same names.
  int64_t minBlocksPerSM = 0;
  int64_t heldQuerySteps = 0;
  int64_t keyValueStages = 0;
  int64_t clusterCtas = 1;

  bool operator==(const ScheduleChoice &other) const;
  bool operator!=(const ScheduleChoice &other) const {
    return !(*this == other);
  }
};

/// One of the partial kernel's workgroup (shared) memory buffers: 4-byte
/// elements, f32 or (a tensor-core tile's q fragments) i32 mma words.
struct WorkgroupBuffer {
  std::vector<int64_t> shape;
  bool integer = false;

  int64_t getNumElements() const;
  int64_t getBytes() const { return getNumElements() * 4; }
};

/// The partial kernel's workgroup buffers, in the order the kernel declares
/// them (and the lowering numbers them).
enum PartialKernelBuffer : unsigned {
  /// The query tile: f32 rows on CUDA cores; on tensor cores each lane's
  /// mma words per k-step, 4 each.
  kQueryBuffer,
  /// The warps' accumulators (on tensor cores also the K/V stages, free
  /// until the token loop ends).
  kWarpAccumulatorsBuffer,
  /// The warps' running max and sum per row.
  kWarpMaxSumBuffer,
  /// Only with a fused merge whose weights outgrow the accumulators.
  kMergeWeightsBuffer,
};

/// The most blocks per SM a schedule's launch bounds promise: the split
/// planner's wave (SplitPlannerOptions::blocksPerSM, which says why four).
/// Registers for more would be registers a thread could have used.
inline constexpr int64_t kPlannedBlocksPerSM = 4;

/// The most blocks a schedule's cluster has: the portable cluster size
/// (sm_90 takes 16 only after a non-portable opt-in at launch).
inline constexpr int64_t kMaxClusterCtas = 8;

/// Static shared memory a kernel may declare without an opt-in: 48 KiB on
/// every target (more needs dynamic shared memory).
inline constexpr int64_t kMaxStaticSharedMemoryBytes = 48 * 1024;
/// Shared memory the driver reserves for each resident block besides the
/// kernel's own (CUDA C++ Programming Guide, compute capabilities 8.0 on).
inline constexpr int64_t kReservedSharedMemoryPerBlock = 1024;

/// A row's merge weights in workgroup memory: its splits', padded with zeros
/// to a multiple of 4, so that each row starts 16-byte aligned for the
/// vector loads that read them.
int64_t getMergeWeightsPerRow(int64_t numSplits);

/// How the partial kernel of a problem runs on a chip.
struct KernelSchedule {
  PartialKernelLayout layout;
  KernelForm form = KernelForm::CudaCores;
  /// Threads of a block.
  int64_t threads = PartialKernelLayout::kThreads;
  /// The blocks per SM the launch bounds promise ptxas
  /// (`__launch_bounds__(threads, minBlocksPerSM)`), which caps its
  /// registers at the register file over that many blocks; 0: no launch
  /// bounds (ptxas takes the registers it wants, up to 255; a hand-written
  /// schedule may say so).
  int64_t minBlocksPerSM = 0;
  /// Tensor cores: q's 16-wide k-steps whose fragments stay in registers
  /// through the token loop (the rest are read from workgroup memory each
  /// step); the CUDA-core kernel holds its query slice per row instead.
  int64_t heldQuerySteps = 0;
  /// Tensor cores: the steps of K and V in workgroup memory at once (cp.async
  /// copies the ones after the step the block computes into the others); 0
  /// on CUDA cores.
  int64_t keyValueStages = 0;
  /// The blocks (a thread block cluster, sm_90) that share a chunk: each
  /// streams a C-th of its keys, and they merge their rows through
  /// distributed shared memory into the chunk's one partial. 1: a block a
  /// chunk.
  int64_t clusterCtas = 1;

  bool usesTensorCores() const { return form == KernelForm::TensorCores; }
  /// The warpgroup tile: two warpgroups of a 64-row tile (wgmma), its
  /// q, K/V stages and P in dynamic shared memory.
  bool usesWarpgroupTile() const {
    return form == KernelForm::WarpgroupTensorCores;
  }
  /// Query rows one block computes.
  int64_t getRowsPerTile() const { return layout.rowTile; }
  /// Blocks per (sequence, KV head, split): each streams the chunk.
  int64_t getNumRowTiles() const { return layout.numRowTiles; }
  /// Keys the block takes per step: a chunk costs whole steps.
  int64_t getTokensPerStep() const { return layout.tokensPerStep(); }
  /// Registers a thread may take: the register file over minBlocksPerSM
  /// blocks, in ptxas's allocation unit, at most `chip`'s per-thread limit.
  int64_t getRegisterBudget(const Chip &chip) const;
  /// The blocks of this kernel one SM of `chip` holds at once: no more than
  /// its launch bounds promise (registers for no more), its shared memory
  /// allows (its own, a fused merge's weights buffer aside, and the
  /// driver's reserve each) and the SM's blocks and warps allow. What the
  /// split planner's waves hold.
  int64_t getResidentBlocks(const Chip &chip) const;

  /// The warp states the token loop leaves for the combine: one per warp,
  /// or a split-value tile's one (its warps share the rows' max and sum and
  /// each holds a quarter of the value dims).
  int64_t getPublishedWarpStates() const;
  /// A split-value tile: the bytes of its q fragments' 16 rows
  /// (queryStageRowBytes each) in the stages' buffer before the token loop,
  /// and where they lie: at the end of the buffer (the accumulators', at
  /// least the S stages), 16-byte aligned, so the first steps' copies go to
  /// the stages before them while q is read.
  int64_t getQueryStageBytes() const {
    return kTensorCoreTileRows * layout.queryStageRowBytes;
  }
  int64_t getQueryStageOffset() const;
  /// Rows of the accumulators' buffer (kWarpAccumulatorsBuffer): the tile's,
  /// or as many as the K/V stages or a split-value tile's q take.
  int64_t getAccumulatorRows() const;
  /// The workgroup buffers (PartialKernelBuffer) of this kernel when it
  /// merges `fusedMergeSplits` splits itself (0: no fused merge).
  std::vector<WorkgroupBuffer>
  getWorkgroupBuffers(int64_t fusedMergeSplits = 0) const;
  /// Their bytes, each buffer 16-byte aligned as the kernel declares them,
  /// and the dynamic shared memory beside them.
  int64_t getSharedMemoryBytes(int64_t fusedMergeSplits = 0) const;
  /// The warpgroup tile's dynamic shared memory (0 for the other forms):
  /// 1 KB to align its start to the 128-byte swizzle's 1024-byte atoms, q's
  /// rows, the K/V stages and the step's P (getWarpgroupRegions).
  int64_t getDynamicSharedMemoryBytes() const;
  /// Where the warpgroup tile's regions lie from the aligned start, in
  /// bytes: q (rowTile rows of D elements), then the stages
  /// (keys x D each), then P (a 16-byte row a row and 8 keys).
  struct WarpgroupRegions {
    int64_t query = 0, stages = 0, probabilities = 0, end = 0;
  };
  WarpgroupRegions getWarpgroupRegions() const;
  /// The most splits a fused merge in this kernel merges: their weights fit
  /// in the warps' accumulators or in the static shared memory the kernel
  /// leaves (0 when not even 4 do).
  int64_t getMostFusedMergeSplits() const;
  /// The fewest registers a thread holds through the token loop: a
  /// CUDA-core tile's rows (registersPerRow each) and the loads in flight; a
  /// tensor-core tile's softmax state, output accumulator and held q
  /// fragments and a step's scores and K words. ptxas may need more (the
  /// planner's choices are checked against it); a schedule whose budget is
  /// below this cannot work.
  int64_t getLeastLoopRegisters() const;
  /// The register model: the registers a thread of `problem`'s kernel
  /// takes with this schedule, from which planKernel sets the launch bounds
  /// (the most blocks, up to kPlannedBlocksPerSM, whose budget covers it) and a
  /// tensor-core tile's held k-steps. A CUDA-core tile's rows
  /// (registersPerRow each), a fixed term and the decoding of a paged fp8
  /// cache; a tensor-core tile's
  /// getLeastLoopRegisters, its addresses and pipeline state, and the state
  /// of paged, sloped or masked rows. PTXAssemblyTest checks it against
  /// ptxas: no spills within the budget.
  int64_t getRegisterDemand(const KernelProblem &problem) const;

  ScheduleChoice getChoice() const;
};

/// The schedule `choice` makes of `problem`'s kernel: its layout follows
/// from the form and the row tiling. Unchecked (getReasonScheduleInvalid).
KernelSchedule getKernelSchedule(const KernelProblem &problem,
                                 const ScheduleChoice &choice);

/// Why `choice` cannot work for `problem` on some target: a sentence naming
/// the field (as #fd.schedule spells it) and what it accepts; empty when it
/// can.
std::string getReasonScheduleInvalid(const KernelProblem &problem,
                                     const ScheduleChoice &choice);

/// Why `schedule` cannot run on `chip` (a wgmma tile without wgmma, a
/// cluster without clusters): a sentence naming the field and what to do;
/// empty when it can.
std::string getReasonScheduleUnsupportedOnChip(const KernelSchedule &schedule,
                                               const Chip &chip);

/// Visits `choice`'s integer fields under #fd.schedule's names, in its
/// order (rows_per_tile .. stages, then cluster_ctas where it is not 1, so
/// that a schedule without clusters spells as it did before the field;
/// `form` is getKernelFormName's).
void forEachScheduleField(
    const ScheduleChoice &choice,
    const std::function<void(const char *name, int64_t value)> &visit);
/// `choice` as #fd.schedule's body spells it: "form = tensor_cores,
/// rows_per_tile = 16, row_tiles = 1, threads = 128, min_blocks_per_sm = 4,
/// held_query_steps = 2, stages = 2".
std::string formatScheduleChoice(const ScheduleChoice &choice);
/// The schedule `text` spells: that body (or the whole `#fd.schedule<...>`),
/// `name = value` pairs in any order and spacing, min_blocks_per_sm,
/// held_query_steps and stages 0 and cluster_ctas 1 when left out. Otherwise
/// nothing, with `error` naming what is wrong.
std::optional<ScheduleChoice> parseScheduleChoice(std::string_view text,
                                                  std::string &error);

/// The schedule of `problem`'s partial kernel on `chip`.
KernelSchedule planKernel(const KernelProblem &problem, const Chip &chip);

/// The partial kernel's schedule for `problem`: `choice` (written by hand)
/// if given, else planKernel's on `chip`.
KernelSchedule
findPartialKernelSchedule(const KernelProblem &problem,
                          const std::optional<ScheduleChoice> &choice,
                          const Chip &chip);

} // namespace flashdecode

#endif // FD_PLANNING_KERNELPLAN_H

//===- SplitPlanner.h - Choosing the number of KV splits --------*- C++ -*-===//
//
// How many chunks Flash-Decoding cuts the KV cache into. A pure function of
// the problem size and the machine, shared by the `fd-split-kv` pass, the JIT
// and the Python module, so that every tool makes (and prints) the same
// choice. Standard C++ only: the runtime may use it too.
//
//===----------------------------------------------------------------------===//

#ifndef FD_PLANNING_SPLITPLANNER_H
#define FD_PLANNING_SPLITPLANNER_H

#include "fd/Planning/Chip.h"
#include "fd/Planning/KernelChoice.h"
#include "fd/Planning/KernelPlan.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

namespace flashdecode {

struct SplitPlannerOptions {
  /// Streaming multiprocessors of the target (the default chip's: an
  /// H100/H200 SXM's 132).
  int64_t smCount = getDefaultChip().defaultSMCount;
  /// Partial-kernel blocks one SM runs at once: a wave holds smCount *
  /// blocksPerSM blocks. One 128-thread block alone on an SM is
  /// latency-bound, far below the SM's share of HBM bandwidth: measured on
  /// an H200 (bench/RESULTS.md, 2026-11-29) the same Llama-3-8B kernel
  /// streamed 0.88 TB/s with 128 blocks and 2.65 TB/s with 512, and MHA 86 %
  /// of the copy bandwidth with 512. So a wave is four blocks per SM.
  int64_t blocksPerSM = kPlannedBlocksPerSM;
  /// No chunk is shorter than this many tokens at the planning length.
  int64_t minChunkLength = 128;
  /// Upper bound on the split count (bounds the workspace, B * Lq * Hq * S *
  /// (D + 1) * 4 bytes; minChunkLength usually binds first).
  int64_t maxSplits = 512;
  /// Fixed cost of one CUDA-core block (prologue, partial write, its share
  /// of the merge), in tokens of KV streamed: about 1 us of one SM's
  /// bandwidth. Such a block streams its share of an SM's bytes a
  /// token-time (smBytesPerTokenTime over kPlannedBlocksPerSM: a token of
  /// f16 keys and values at D = 128), a wider token taking longer.
  int64_t blockOverheadTokens = 64;
  /// Keys a tensor-core block streams per token-time: fdemu's model of the
  /// pipelined tiles (compiler 0.2.17; the calibration left it, bound by
  /// the chain of mmas) takes 13.1 cycles a key at D = 128 and 10.5 at
  /// D = 64, whatever the rows, where a token-time (2048 bytes of an H200
  /// SM's share of the achievable 4.22 TB/s: 64 ns) is 127 cycles at
  /// 1.98 GHz: 9.7 keys.
  int64_t tensorCoreKeysPerTokenTime = 10;
  /// A tensor-core block's fixed cost in token-times: fdemu's model puts a
  /// 16-row tile (MQA) at 3,140 cycles besides its keys, 4- and 8-row tiles
  /// at about 2,100; the rows matter where the keys do not bind (MQA), so
  /// the 16-row cost is taken: 24.8 token-times of 127 cycles.
  int64_t tensorCoreBlockOverheadTokens = 25;
  /// The bytes a split-value tile's block streams a token-time alone on its
  /// SM, as the plans were fitted (fdemu's calibrated model, FDEMU_TRACE_CTA:
  /// MLA's 9,216-byte steps in about 620 cycles, 1,888 bytes in 127). The
  /// steps now take about 454 cycles (2,578 bytes), but this model shares
  /// an SM's 2048 between its blocks, which holds where DRAM binds and
  /// under-rates two latency-bound blocks: at 2,578 (and 27 token-times of
  /// fixed cost, below) the planner put one block an SM where fdemu
  /// rates two faster (MLA at 128 heads, B=1: 16 splits 61.8 us a layer,
  /// 32 51.3) and took 108 splits at 16 heads (12.25 against 11.63 at 121;
  /// bench/RESULTS.md, 2026-12-06 (third)).
  int64_t splitValueBlockBytesPerTokenTime = 1888;
  /// The split-value tile's fixed cost a block in token-times, as fitted:
  /// about 4,500 cycles before its first step and 4,000 after its last then
  /// (67 token-times of 127 cycles); about 1,980 and 1,450 now.
  int64_t splitValueBlockOverheadTokens = 67;
  /// The keys a split-value tile's block streams a token-time alone, its
  /// steps' latency binding: 8 keys in about 454 cycles (FDEMU_TRACE_CTA,
  /// MLA at 16 heads), 2.24 a token-time of 127 cycles. Only narrow tokens
  /// are bound by it (fp8 MLA's 576 bytes: 1,290 bytes a token-time, under
  /// splitValueBlockBytesPerTokenTime), and then two blocks an SM stream
  /// faster than one (e4m3 MLA at B=1, modeled: 118 splits, one block an
  /// SM, 12.37 us a layer; 264, two, 9.35).
  double splitValueBlockKeysPerTokenTime = 2.24;
  /// The bytes an SM's split-value blocks stream together a token-time
  /// where several row tiles read each chunk (DRAM serves a chunk once, L2
  /// the other tiles), so the SM's share of DRAM, smBytesPerTokenTime, does
  /// not bound them; their issue does: fdemu's calibrated model, Kimi K2 (64
  /// heads, four row tiles) at B=1, L=32k, two blocks an SM streamed 3,590
  /// bytes a token-time (66 splits, bound by integer issue), where one
  /// block streamed 2,750. Tokens narrow enough for splitValueBlockKeys...
  /// to bind a block (e4m3's 576 bytes) keep smBytesPerTokenTime.
  int64_t splitValueSMBytesPerTokenTime = 3584;
  /// Bytes an SM must have in flight to draw its share of DRAM bandwidth
  /// (Little's law: the achievable 4.22 TB/s x ~600 ns of loaded latency
  /// over 132 SMs, 19.2 KB; 19 KiB). A tensor-core block has S - 1 steps
  /// of keys in flight (its cp.async pipeline copies that far ahead of the
  /// step it computes: one with the planner's two stages), so a plan of few
  /// such blocks streams the cache at a fraction of the DRAM rate.
  /// fdemu's calibrated model holds a warp's register loads to 1 KB in
  /// flight but not cp.async's, and its loads take 600 cycles (0.3 us):
  /// it sees less of this than an H200, whose measurements needed four
  /// CUDA-core blocks per SM (the token-time below).
  int64_t smBytesInFlight = 19456;
  /// The bytes one SM's share of DRAM bandwidth delivers in the time one
  /// block streams one token of one KV head (a "token-time"): the DRAM side
  /// of the model, used where the workload is known. 2048 = four blocks per
  /// SM of 512 bytes a token (f16, D = 128), the occupancy the H200 needed
  /// to approach its bandwidth (measured, docs/SplitHeuristic.md): at the
  /// achievable 4.22 TB/s a token-time is 64 ns.
  int64_t smBytesPerTokenTime = 2048;
  /// The partial bytes one block merges in a token-time: the rate of a
  /// fused merge's serial tail (the last block of a sequence and KV head
  /// reads every split's partial rows). Fitted to fdemu's model of the
  /// fused kernels at B=1 L=32k over split counts: Llama-3-8B (4 rows, D =
  /// 128) merges 4.1 KB per 56 ns, MQA (32 rows, more serial sums per
  /// thread) 2.8 KB; at a token-time of 64 ns, 4.7 and 3.2 KB: 3.5 KiB.
  int64_t blockMergeBytesPerTokenTime = 3584;
  /// The fewest splits whose modeled time is within this factor of the best
  /// are taken: fewer partials for a near-equal time. Clusters a chunk
  /// (where the workload may take them) only where they are faster than
  /// one block a chunk by more than it: then the fastest of them.
  double timeTolerance = 1.05;
  /// SMs of a GPC, the unit thread block clusters are placed in: a wave
  /// holds floor(smsPerGpc x blocks an SM / C) clusters of C a GPC, in
  /// smCount / smsPerGpc GPCs (an H100/H200 SXM's 132 SMs lie in 8 GPCs of
  /// 16 or 18: assumed 16, as fdemu's GPCs hold the same clusters of 8).
  int64_t smsPerGpc = 16;
  /// A clustered block's cost beyond its chunk's share, in token-times: two
  /// cluster barriers and the reads of the other blocks' rows over the
  /// SM-to-SM network (fdemu's model, FDEMU_TRACE_CTA: about 1,000 cycles
  /// more than writing the partial, MLA at 16 heads).
  int64_t clusterMergeOverheadTokens = 8;
};

/// What one block of the partial kernel reads and writes, which gives a split
/// count its DRAM cost: every token's K and V, and one partial row (D f32
/// values and a log-sum-exp) per query row, written by the partial kernel and
/// read by the merge. A default-constructed workload (rows and head dim 0) is
/// unknown: the plan is the wave model alone.
struct SplitWorkload {
  /// Query rows one block computes: the group (Hq / Hkv) times the query
  /// length.
  int64_t rowsPerKVHead = 0;
  int64_t headDim = 0;
  /// D_v, the values' and the partials' (0: headDim), and whether the
  /// values are the keys' first D_v columns, read with them.
  int64_t valueHeadDim = 0;
  bool valuesFromKeys = false;
  /// Bytes of one cached K or V element: 2 (f16, bf16), 1 (fp8), 4 (f32).
  int64_t kvElementBytes = 2;
  /// Bytes of one query element: 2 (f16, bf16) or 4 (f32). An fp8 cache
  /// is decoded to the queries' type, so it does not say which.
  int64_t queryElementBytes = 2;
  /// Keys a block takes per step: a chunk costs whole steps. The
  /// kernel's (KernelSchedule::getTokensPerStep) in getSplitWorkload; a
  /// hand-made workload assumes a tensor-core block's 4 warps x 8 keys.
  int64_t tokensPerStep = 32;
  /// Query rows one block serves: more rows take a block per tile, each
  /// streaming the chunk. The kernel's (KernelSchedule::getRowsPerTile:
  /// tensor-core tiles of up to 16, CUDA-core tiles as planKernel tiles
  /// them) in getSplitWorkload; a hand-made workload assumes 16.
  int64_t rowsPerTile = 16;
  /// The blocks of the kernel an SM holds (KernelSchedule::getResidentBlocks:
  /// its launch bounds, shared memory and the SM's limits): a wave holds no
  /// more than that many per SM however many SplitPlannerOptions::blocksPerSM
  /// says; 0, no bound.
  int64_t blocksPerSM = 0;
  /// The kernel's form (KernelSchedule::form) in getSplitWorkload; absent
  /// in a hand-made workload, which takes choosesTensorCores' choice.
  std::optional<KernelForm> form;
  /// Tensor cores: the K/V stages (KernelSchedule::keyValueStages); a
  /// block has S - 1 steps of keys in flight.
  int64_t keyValueStages = PartialKernelLayout::kKeyValueStages;
  /// Whether the kernel is the split-value tile
  /// (PartialKernelLayout::splitsValues): its four warps share each step,
  /// so a block streams bytes: an SM its blocks' chunks at its share of
  /// DRAM (smBytesPerTokenTime; where row tiles share a chunk of wide
  /// tokens, at SplitPlannerOptions::splitValueSMBytesPerTokenTime; one
  /// block alone at splitValueBlockBytesPerTokenTime), plus
  /// splitValueBlockOverheadTokens a wave.
  bool splitValueTile = false;
  /// Whether the partial kernel merges (fd-compile --fused-merge): then the
  /// last block of each sequence and KV head reads every split's partial
  /// rows after the others finish, a tail that grows with the split count,
  /// instead of a merge kernel reading them at the whole GPU's rate.
  bool fusedMerge = false;
  /// The blocks of a chunk's thread block cluster (KernelSchedule::
  /// clusterCtas): the chunk's blocks each stream a share of its steps,
  /// and the partials stay a chunk's.
  int64_t clusterCtas = 1;
  /// The most planNumSplits may give a chunk (it weighs 1, 2, 4 and 8 up
  /// to it): kMaxClusterCtas for the planner's split-value tile and the
  /// warpgroup tile on a chip with clusters (getSplitWorkload); else
  /// clusterCtas, kept as it is.
  int64_t mostClusterCtas = 1;

  bool isKnown() const { return headDim != 0 || rowsPerKVHead != 0; }
  /// Whether the partial kernel runs the rows on tensor cores, whose blocks
  /// stream at SplitPlannerOptions::tensorCoreKeysPerTokenTime.
  bool usesTensorCores() const {
    if (!isKnown())
      return false;
    if (form)
      return *form == KernelForm::TensorCores;
    return choosesTensorCores(queryElementBytes, headDim, rowsPerKVHead);
  }
  int64_t getValueHeadDim() const {
    return valueHeadDim ? valueHeadDim : headDim;
  }
  /// K and V of one token of one KV head.
  double getTokenBytes() const {
    int64_t elements = headDim + (valuesFromKeys ? 0 : getValueHeadDim());
    return static_cast<double>(elements) * static_cast<double>(kvElementBytes);
  }
  /// What a tensor-core block has in flight: S - 1 steps of K and V (its
  /// cp.async copies run that far ahead of the step it computes).
  double getStepBytes() const {
    return static_cast<double>(tokensPerStep) * getTokenBytes() *
           static_cast<double>(std::max<int64_t>(1, keyValueStages - 1));
  }
  /// Blocks per (sequence, KV head, split): ceil(rows / rowsPerTile).
  int64_t getRowTiles() const {
    return (rowsPerKVHead + rowsPerTile - 1) / rowsPerTile;
  }
  /// The partial rows of one (sequence, KV head, split), written once and
  /// read once by the merge.
  double getPartialBytes() const {
    return static_cast<double>(rowsPerKVHead) *
           static_cast<double>(getValueHeadDim() + 1) * 4.0;
  }
};

/// The workload of `problem`'s partial kernel as `schedule` builds it on
/// `chip`: its rows, tiles, keys per step, form, stages and resident
/// blocks (`fusedMerge`: the kernel merges too). What fd-split-kv, the JIT,
/// fd-plan and Python plan with. `plansClusters`: the schedule is the
/// planner's (none written by hand), so the plan may give its chunks
/// clusters (mostClusterCtas).
SplitWorkload getSplitWorkload(const KernelProblem &problem,
                               const KernelSchedule &schedule, const Chip &chip,
                               bool fusedMerge = false,
                               bool plansClusters = false);

/// A split count and what it does on the machine.
struct SplitPlan {
  int64_t numSplits = 1;
  /// The blocks of each chunk's thread block cluster (1: a block a chunk),
  /// which the schedule the plan is for takes (cluster_ctas).
  int64_t clusterCtas = 1;
  /// Thread blocks of the partial kernel: batch * kvHeads * numSplits, times
  /// the row tiles of a known workload and its chunks' clusters.
  int64_t blocks = 0;
  /// ceil(blocks / (smCount * blocksPerSM)), blocksPerSM no more than the
  /// workload's launch bounds allow.
  int64_t waves = 0;
  /// blocks / (waves * smCount * blocksPerSM): how full the waves are.
  double waveEfficiency = 0.0;
  /// Tokens of the longest chunk at the planning length.
  int64_t chunkLength = 0;
  /// Modeled time, in token-times of one block: the waves' time, waves *
  /// (chunk + overhead) (a known workload: a CUDA-core block's chunk in
  /// bytes at its share of the SM's, a tensor-core block's at its pace), or
  /// with a known workload the larger of it and the DRAM time of K, V and the
  /// partials, plus the merge: the merge kernel's DRAM time, or a fused merge's
  /// serial tail.
  double modeledCost = 0;
  /// The DRAM time alone (0 when the workload is unknown), longer where a
  /// wave of tensor-core blocks keeps too few bytes in flight.
  double dramCost = 0;
};

/// Describes what `numSplits` splits do for the given problem.
SplitPlan evaluateSplits(int64_t batch, int64_t numKVHeads, int64_t maxLength,
                         int64_t numSplits,
                         const SplitPlannerOptions &options = {},
                         const SplitWorkload &workload = {});

/// Chooses the split count for `batch` sequences of up to `maxLength` tokens
/// over `numKVHeads` KV heads (one block serves a whole query-head group).
///
/// Candidates are 1 .. min(maxSplits, maxLength / minChunkLength). Each is
/// scored with a wave model: the partial kernel runs ceil(blocks / (smCount *
/// blocksPerSM)) waves, each as long as one chunk plus a fixed per-block
/// overhead (a known workload on CUDA cores: the chunk's bytes at a block's
/// share of smBytesPerTokenTime; on tensor cores: the chunk at
/// tensorCoreKeysPerTokenTime plus tensorCoreBlockOverheadTokens; the
/// split-value tile: each SM's blocks' chunks in bytes at
/// smBytesPerTokenTime (splitValueSMBytesPerTokenTime where row tiles share
/// wide tokens), one block alone at splitValueBlockBytesPerTokenTime,
/// plus splitValueBlockOverheadTokens a wave); with a
/// known `workload`, no faster than DRAM moves K, V and the partials
/// (smBytesPerTokenTime per SM; tensor-core blocks: slower where they keep
/// fewer than smBytesInFlight per SM in flight), and the merge reads the
/// partials after it (a fused merge: one block per sequence and KV head, at
/// blockMergeBytesPerTokenTime). The fewest splits within `timeTolerance` of
/// the best score win.
/// Unlike FlashAttention-2's heuristic this has no "at least 80 % of the SMs
/// busy, so do not split" shortcut: an unsplit grid that spills a few blocks
/// into a second wave is split when that shortens the step.
///
/// Arguments must be positive (maxLength may be 0); see
/// validateSplitPlannerInputs.
SplitPlan planNumSplits(int64_t batch, int64_t numKVHeads, int64_t maxLength,
                        const SplitPlannerOptions &options = {},
                        const SplitWorkload &workload = {});

/// The most splits an automatic count may take for a kernel of `schedule`:
/// `maxSplits`, and with a fused merge no more than it can merge (at least
/// 1; KernelSchedule::getMostFusedMergeSplits).
int64_t getAutomaticSplitCap(const KernelSchedule &schedule, int64_t maxSplits,
                             bool fusedMerge);

/// The split count of chunks of `chunkLength` tokens (>= 1) over
/// `maxLength`: ceil(maxLength / chunkLength) within 1 .. maxSplits.
int64_t getChunkedSplitCount(int64_t maxLength, int64_t chunkLength,
                             int64_t maxSplits);

/// An empty string when the inputs are valid, otherwise a sentence naming the
/// offending input and what is accepted. Names are written with
/// `wordSeparator` between words: '-' as fd-split-kv and the tools spell
/// them (`sm-count`), '_' as KernelConfig and Python do (`sm_count`).
std::string validateSplitPlannerInputs(int64_t batch, int64_t numKVHeads,
                                       int64_t maxLength,
                                       const SplitPlannerOptions &options,
                                       char wordSeparator = '-');

/// An empty string when a fixed split count (`numSplits` >= 1) is within the
/// planner's cap, otherwise the sentence that refuses it (never clamped: S
/// partials a row is a workspace no plan would make), names spelled as for
/// validateSplitPlannerInputs.
std::string validateFixedSplitCount(int64_t numSplits, int64_t maxSplits,
                                    char wordSeparator = '-');

/// An empty string when a known workload is valid (rows, head dim and tokens
/// per step >= 1, KV element bytes 1, 2 or 4, query element bytes 2 or 4),
/// otherwise a sentence naming the input as validateSplitPlannerInputs does.
/// An unknown workload is valid.
std::string validateSplitWorkload(const SplitWorkload &workload,
                                  char wordSeparator = '-');

/// A one-line account of a plan: splits, blocks, waves, efficiency, chunk.
std::string describeSplitPlan(const SplitPlan &plan);

} // namespace flashdecode

#endif // FD_PLANNING_SPLITPLANNER_H

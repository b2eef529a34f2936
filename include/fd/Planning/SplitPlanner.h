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

#include <cstdint>
#include <string>

namespace flashdecode {

struct SplitPlannerOptions {
  /// Streaming multiprocessors of the target (H100/H200 SXM: 132).
  int64_t smCount = 132;
  /// Partial-kernel blocks one SM runs at once: a wave holds smCount *
  /// blocksPerSM blocks. One 128-thread block alone on an SM is
  /// latency-bound, far below the SM's share of HBM bandwidth: measured on
  /// an H200 (bench/RESULTS.md, 2026-11-29) the same Llama-3-8B kernel
  /// streamed 0.88 TB/s with 128 blocks and 2.65 TB/s with 512, and MHA 86 %
  /// of the copy bandwidth with 512. So a wave is four blocks per SM.
  int64_t blocksPerSM = 4;
  /// No chunk is shorter than this many tokens at the planning length.
  int64_t minChunkLength = 128;
  /// Upper bound on the split count (bounds workspace and merge work).
  int64_t maxSplits = 128;
  /// Fixed cost of one block (prologue, partial write, its share of the
  /// merge), in tokens of KV streamed: about 1 us of one SM's bandwidth.
  int64_t blockOverheadTokens = 64;
  /// The fewest splits whose modeled time is within this factor of the best
  /// are taken: fewer partials for a near-equal time.
  double timeTolerance = 1.05;
};

/// A split count and what it does on the machine.
struct SplitPlan {
  int64_t numSplits = 1;
  /// Thread blocks of the partial kernel: batch * kvHeads * numSplits.
  int64_t blocks = 0;
  /// ceil(blocks / (smCount * blocksPerSM)).
  int64_t waves = 0;
  /// blocks / (waves * smCount * blocksPerSM): how full the waves are.
  double waveEfficiency = 0.0;
  /// Tokens of the longest chunk at the planning length.
  int64_t chunkLength = 0;
  /// Modeled time, in token-times of one block: waves * (chunk + overhead).
  int64_t modeledCost = 0;
};

/// Describes what `numSplits` splits do for the given problem.
SplitPlan evaluateSplits(int64_t batch, int64_t numKVHeads, int64_t maxLength,
                         int64_t numSplits,
                         const SplitPlannerOptions &options = {});

/// Chooses the split count for `batch` sequences of up to `maxLength` tokens
/// over `numKVHeads` KV heads (one block serves a whole query-head group).
///
/// Candidates are 1 .. min(maxSplits, maxLength / minChunkLength). Each is
/// scored with a wave model: the partial kernel runs ceil(blocks / (smCount *
/// blocksPerSM)) waves, each as long as one chunk plus a fixed per-block
/// overhead. The
/// fewest splits within `timeTolerance` of the best score win. Unlike
/// FlashAttention-2's heuristic this has no "at least 80 % of the SMs busy,
/// so do not split" shortcut: an unsplit grid that spills a few blocks into a
/// second wave is split when that shortens the step.
///
/// Arguments must be positive (maxLength may be 0); see
/// validateSplitPlannerInputs.
SplitPlan planNumSplits(int64_t batch, int64_t numKVHeads, int64_t maxLength,
                        const SplitPlannerOptions &options = {});

/// An empty string when the inputs are valid, otherwise a sentence naming the
/// offending input and what is accepted. Names are written with
/// `wordSeparator` between words: '-' as fd-split-kv and the tools spell
/// them (`sm-count`), '_' as KernelConfig and Python do (`sm_count`).
std::string validateSplitPlannerInputs(int64_t batch, int64_t numKVHeads,
                                       int64_t maxLength,
                                       const SplitPlannerOptions &options,
                                       char wordSeparator = '-');

/// A one-line account of a plan: splits, blocks, waves, efficiency, chunk.
std::string describeSplitPlan(const SplitPlan &plan);

/// Bytes of the split-KV workspace: the f32 partial outputs
/// [B, Lq, Hq, S, D] followed by the f32 partial log-sum-exps [B, Lq, Hq, S],
/// that is B * Lq * Hq * S * (D + 1) * 4.
int64_t getWorkspaceBytes(int64_t batch, int64_t queryLength,
                          int64_t numQueryHeads, int64_t numSplits,
                          int64_t headDim);

} // namespace flashdecode

#endif // FD_PLANNING_SPLITPLANNER_H

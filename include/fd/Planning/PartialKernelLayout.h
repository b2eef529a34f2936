//===- PartialKernelLayout.h - The partial kernel's tiling ------*- C++ -*-===//
//
// How the partial-attention kernel tiles its work, in standard C++ so that
// the GPU lowering (convert-fd-to-gpu), the JIT and the planners read one
// definition: the lowering builds exactly this layout.
//
//===----------------------------------------------------------------------===//

#ifndef FD_PLANNING_PARTIALKERNELLAYOUT_H
#define FD_PLANNING_PARTIALKERNELLAYOUT_H

#include <cstdint>
#include <string>

namespace flashdecode {

/// How the partial-attention kernel maps one (sequence, KV head, chunk) onto
/// a thread block, given its form and row tiling (KernelSchedule chooses
/// them).
///
/// A key row of `headDim` cache elements is `vectorsPerRow` vectors of
/// `vectorWidth` elements: 16 bytes each, or 8 where a key or value row is
/// not a whole number of 16-byte vectors (fp8 rows whose head dim is not a
/// multiple of 16; their rows start only 8-byte aligned); a value row of
/// `valueHeadDim` elements is `valueVectorsPerRow` of them.
/// `lanesPerToken` lanes (the next power of two, at most 32) read one key
/// row and one value row together, each `vectorsPerLane` key vectors and
/// `valueVectorsPerLane` value vectors, vector v of a lane being the same
/// piece of both rows, so a warp reads `tokensPerWarp` rows per step with
/// coalesced 16-byte loads; when a vector count is not a power of two the
/// lanes past the row idle. Where the values are the key cache's first
/// valueHeadDim columns (MLA's latent cache) the lane's first key vectors,
/// read once, are its value vectors too. `unroll` steps of loads
/// are issued before any is used. A KV head's `rows` query
/// rows (group size x Lq, times the sequences of a block with a shared
/// prefix) are `numRowTiles` tiles of `rowTile` (the last may hold padding
/// rows), each tile a block of its own streaming the chunk. Where rows see
/// different keys (`causal`: Lq > 1, or the rows of sequences continuing a
/// shared prefix) the keys some row may not see stream first, in loops of
/// their own with a per-row mask.
///
/// With `tensorCores` (f16/bf16 queries) the block instead
/// computes a tile of up to 16 rows with mma.sync: each warp takes 8 keys
/// per step (tokensPerWarp), loads their K and V rows straight into mma
/// fragments (docs/KernelABI.md, "Tensor-core tiles"; an fp8 cache decoded
/// to the query's type on the way) and keeps the tile's scores, softmax
/// state and output accumulator in registers; `vectorsPerLane`,
/// `lanesPerToken` and `unroll` then do not apply. That tile takes D of 64
/// or 128 with values of their own at D. Any other tensor-core tile
/// `splitsValues` (usesSplitValueTile): its four warps share each step's 8
/// keys, which the block copies into workgroup memory a row each
/// (`stageRowBytes`: K, then V unless the values are K's first D_v
/// columns, then padding), each warp computing q K^T over a quarter of the
/// head dim and P V for a quarter of the value dims.
struct PartialKernelLayout {
  static constexpr int64_t kWarps = 4;
  static constexpr int64_t kThreads = kWarps * 32;
  /// 16-byte vectors of keys and of values a lane has in flight.
  static constexpr int64_t kVectorsInFlight = 4;
  /// Registers a thread may give to the rows of a tile (`registersPerRow`
  /// each), of ptxas's 255; the rest hold the loads in flight (32), the
  /// converted key and value elements, addresses and the paging state.
  /// Calibrated against ptxas 13.0, which takes all 255 registers for most
  /// multi-row tiles and there spills a few bytes in some configurations
  /// even where 200 would do (8-row f16 tiles at D = 144 spill uncapped,
  /// not with --maxrregcount 200); f32 tiles of 13 rows spill at D = 96.
  /// PTXAssemblyTest's sweep fails on any spill.
  static constexpr int64_t kRowRegisterBudget = 176;
  /// Taken from the budget when the rows take more than one tile: sized
  /// when a block looped over its tiles (the loop kept the chunk bounds and
  /// the tile's first row live through the token loop; f16 tiles of 8 rows
  /// then spilled in some configurations, MQA at D = 144 with pages of 16);
  /// kept now that each tile is a block, so tile sizes, and the spill-free
  /// ptxas sweep, stay as they were.
  static constexpr int64_t kRowTileLoopRegisters = 22;
  /// Tensor cores: the steps of K and V in workgroup memory at once that
  /// planKernel chooses (the step being computed and the one being copied:
  /// cp.async). Two fit the 48 KB of static shared memory a block may have
  /// at D = 128.
  static constexpr int64_t kKeyValueStages = 2;

  int64_t headDim;
  /// D_v, the values' and the partials' (headDim on tensor cores).
  int64_t valueHeadDim;
  /// Whether rows carry an ALiBi slope and position.
  bool alibi = false;
  int64_t vectorWidth;
  int64_t vectorsPerRow, valueVectorsPerRow;
  int64_t lanesPerToken;
  int64_t vectorsPerLane, valueVectorsPerLane;
  int64_t unroll;
  int64_t tokensPerWarp;
  int64_t rows;
  bool causal;
  int64_t rowTile;
  int64_t numRowTiles;
  bool tensorCores;
  /// Tensor cores: the warps share each step's keys and split the value
  /// dims (usesSplitValueTile).
  bool splitsValues = false;
  /// The warpgroup tile (wgmma): two warpgroups take a 64-row tile, each
  /// S = q K^T for half a step's keys (tokensPerWarp) and P V for half the
  /// value dims; a key's row in a stage is its D elements
  /// (stageRowBytes), a query row D elements (queryStageRowBytes).
  bool warpgroupTile = false;
  /// Tensor cores: per lane and step, the slots of `slotBytes` (16, fp8 8)
  /// its K and V vectors take in a stage (D / 32 each), then with an fp8
  /// cache two for the per-token scales of its two keys (K's, V's).
  int64_t stageSlots = 0, slotBytes = 0;
  /// A split-value tile: a key's row in a stage: its K elements, then its
  /// V elements at `stageValueOffset` (0 where the values are K's first
  /// D_v columns), then at `stageScaleOffset` an fp8 cache's per-token
  /// scales (K's, V's), and padding to `stageRowBytes`: rows 32 bytes
  /// apart modulo 128 (16 for fp8) keep the K reads of a half-warp's four
  /// keys (a warp's eight) in distinct banks.
  int64_t stageRowBytes = 0, stageValueOffset = 0, stageScaleOffset = 0;
  /// A split-value tile: keys 4 to 7 of a stage hold their K and V bytes
  /// at offsets with the `stageSwizzleBytes` bit flipped (0: none). A pass
  /// of V reads takes keys 2p (or 2p + 1) of every p; with 2-byte
  /// elements, rows 32 bytes apart modulo 128 put keys k and k + 4 of a
  /// pass in the same banks (two wavefronts where one would do). The flip
  /// moves keys 4 to 7 into the other half of each 32-byte pair where a
  /// lane reads 32 bytes of a key in two 16-byte passes (D_v = 512), else
  /// of each 64-byte pair. The K reads keep their banks (a half-warp's
  /// four keys flip together). fp8 rows, 16 bytes apart modulo 128, meet
  /// distinct banks as they lie.
  int64_t stageSwizzleBytes = 0;
  /// A split-value tile: a query row in workgroup memory, where the block
  /// copies the tile's q with cp.async before each warp reads its
  /// fragments: D elements and 16 bytes of padding (rows 16 bytes apart
  /// modulo 128, so the 8-byte reads of a warp's 8 rows and 4 pairs meet
  /// 32 distinct banks).
  int64_t queryStageRowBytes = 0;

  /// The layout of a kernel of the given form whose rows are one tile (the
  /// caller sets rowTile and numRowTiles). With `withAlibi` each row of a
  /// CUDA-core tile also keeps its ALiBi slope and position.
  /// `cacheElementBytes` is 1 for fp8 caches, else the query's
  /// `elementBytes`. `valueHeadDim` 0 is `headDim`.
  static PartialKernelLayout
  get(int64_t headDim, int64_t elementBytes, int64_t cacheElementBytes,
      int64_t groupSize, int64_t queryLength, bool withAlibi = false,
      bool tensorCores = false, int64_t valueHeadDim = 0,
      bool valuesFromKeys = false, bool warpgroupTile = false);
  /// Keys the block reads per step: one per token group of each warp (a
  /// split-value tile's warps share theirs).
  int64_t tokensPerStep() const {
    return splitsValues || warpgroupTile ? tokensPerWarp
                                         : kWarps * tokensPerWarp;
  }
  /// Tensor cores: the bytes of one stage of K and V.
  int64_t stageBytes() const {
    return splitsValues || warpgroupTile ? tokensPerWarp * stageRowBytes
                                         : kThreads * stageSlots * slotBytes;
  }
  /// A split-value tile: the head dims of q K^T each warp takes (16-wide
  /// k-steps: D / 64 of them), and the value dims it accumulates.
  int64_t warpHeadDims() const { return headDim / kWarps; }
  int64_t warpValueDims() const { return valueHeadDim / kWarps; }
  /// Key (and query) elements of each lane's slice.
  int64_t dimsPerLane() const { return vectorsPerLane * vectorWidth; }
  /// Value elements each lane accumulates.
  int64_t valueDimsPerLane() const { return valueVectorsPerLane * vectorWidth; }
  /// Registers one row of a tile holds through the token loop: its running
  /// max and sum, its accumulator slice, its query slice (read from
  /// workgroup memory once per unrolled step and kept for all of it) and
  /// its score for each token of the step (and with ALiBi its slope and
  /// position).
  int64_t registersPerRow() const {
    return 2 + dimsPerLane() + valueDimsPerLane() + unroll + (alibi ? 2 : 0);
  }
  /// Whether some lanes' last key vector lies past the end of the row.
  bool hasIdleLanes() const {
    return lanesPerToken * vectorsPerLane != vectorsPerRow;
  }
  /// Whether some lanes' last value vector lies past the end of the row.
  bool hasIdleValueLanes() const {
    return lanesPerToken * valueVectorsPerLane != valueVectorsPerRow;
  }
};

/// Whether a tensor-core tile of these dims is the split-value tile (any
/// but D of 64 or 128 with values of their own at D).
bool usesSplitValueTile(int64_t headDim, int64_t valueHeadDim,
                        bool valuesFromKeys);

/// Why a split-value tile cannot take these dims and caches: a sentence
/// naming what it accepts; empty when it can.
std::string getReasonNoSplitValueTile(int64_t headDim, int64_t valueHeadDim,
                                      int64_t cacheElementBytes);

} // namespace flashdecode

#endif // FD_PLANNING_PARTIALKERNELLAYOUT_H

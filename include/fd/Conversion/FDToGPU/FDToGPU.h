//===- FDToGPU.h - fd split-KV ops to GPU kernels ---------------*- C++ -*-===//

#ifndef FD_CONVERSION_FDTOGPU_FDTOGPU_H
#define FD_CONVERSION_FDTOGPU_FDTOGPU_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace mlir::fd {

/// How the partial-attention kernel maps one (sequence, KV head, chunk) onto
/// a thread block; a pure function of the head dim, the element size and the
/// number of query rows (Hq / Hkv * Lq) the block serves.
///
/// A row of `headDim` elements is `vectorsPerRow` 16-byte vectors.
/// `lanesPerToken` lanes (the next power of two, at most 32) read one key (or
/// value) row together, each `vectorsPerLane` vectors, so a warp reads
/// `tokensPerWarp` rows per step with coalesced 16-byte loads; when the
/// vector count is not a power of two the lanes past the row idle. `unroll`
/// steps of loads are issued before any is used. Rows are processed
/// `rowTile` at a time (the accumulators live in registers); with more rows
/// than that the chunk is streamed once per tile.
struct PartialKernelLayout {
  static constexpr int64_t kWarps = 4;
  static constexpr int64_t kThreads = kWarps * 32;
  /// 16-byte vectors of keys and of values a lane has in flight.
  static constexpr int64_t kVectorsInFlight = 4;
  /// f32 accumulators a thread keeps per row tile.
  static constexpr int64_t kAccumulatorBudget = 64;

  int64_t headDim;
  int64_t vectorWidth;
  int64_t vectorsPerRow;
  int64_t lanesPerToken;
  int64_t vectorsPerLane;
  int64_t unroll;
  int64_t tokensPerWarp;
  int64_t rows;
  int64_t rowTile;
  int64_t numRowTiles;

  static PartialKernelLayout get(int64_t headDim, int64_t elementBytes,
                                 int64_t rows);
  /// Head-dim elements each lane accumulates.
  int64_t dimsPerLane() const { return vectorsPerLane * vectorWidth; }
  /// Whether some lanes' last vector lies past the end of the row.
  bool hasIdleLanes() const {
    return lanesPerToken * vectorsPerLane != vectorsPerRow;
  }
  /// Static shared memory: the query tile and the per-warp partial states.
  int64_t sharedMemoryBytes() const {
    return 4 * (rowTile * headDim + kWarps * rowTile * headDim +
                kWarps * rowTile * 2);
  }
};

/// The lowest PTX ISA version (times ten) the kernels need on `chip`, or 0
/// when they are not built for it (sm_80, sm_86, sm_89, sm_90, sm_90a).
int getMinimumPTXVersion(llvm::StringRef chip);

/// Patterns replacing fd.partial_attention and fd.merge with launches of GPU
/// kernels, each in a `gpu.module` of its own name in the enclosing module:
///   partial: grid (S, Hkv, B), block (128); args (q, k, v, seq_lens,
///            partial_output, partial_lse: !llvm.ptr<1>, max_len: i32)
///   merge:   grid (Hq, Lq, B), block (D); args (partial_output,
///            partial_lse, output[, lse]: !llvm.ptr<1>)
/// The memrefs must be contiguous (identity layout).
void populateFDToGPUConversionPatterns(RewritePatternSet &patterns);

} // namespace mlir::fd

#endif // FD_CONVERSION_FDTOGPU_FDTOGPU_H

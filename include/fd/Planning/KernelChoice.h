//===- KernelChoice.h - Which partial kernel a workload gets ----*- C++ -*-===//
//
// The rule that picks the tensor-core or the CUDA-core partial kernel, in
// standard C++ so that the lowering (PartialKernelLayout) and the split
// planner, which must know how fast the chosen kernel's blocks stream,
// share one definition.
//
//===----------------------------------------------------------------------===//

#ifndef FD_PLANNING_KERNELCHOICE_H
#define FD_PLANNING_KERNELCHOICE_H

#include <cstdint>

namespace flashdecode {

/// Rows of a tensor-core tile (mma.sync's M): more rows take a block per
/// tile.
inline constexpr int64_t kTensorCoreTileRows = 16;
/// The fewest rows a KV head must have for its tile to go to tensor cores.
inline constexpr int64_t kTensorCoreMinRows = 2;
/// The warpgroup tile (wgmma, sm_90a): rows (wgmma's M), threads (two
/// warpgroups) and keys a step (16 a warpgroup: its S is one m64n16
/// wgmma chain; at 8 the q reads of its k-steps, 2 KB each, made the tile
/// shared-memory-bound, bench/RESULTS.md).
inline constexpr int64_t kWarpgroupTileRows = 64;
inline constexpr int64_t kWarpgroupTileThreads = 256;
inline constexpr int64_t kWarpgroupStepKeys = 32;
/// The most K/V stages a warpgroup tile takes (a step's copy in flight
/// each).
inline constexpr int64_t kMostWarpgroupStages = 4;
/// wgmma's 128-byte swizzle, in which the warpgroup tile lays out q and
/// its stages: a row of a 64-dim block is 128 bytes, and the pattern
/// repeats every 8 rows (1024 bytes), on which its regions start.
inline constexpr int64_t kWarpgroupSwizzleRowBytes = 128;
inline constexpr int64_t kWarpgroupSwizzleAtomBytes = 1024;

/// Whether the partial kernel computes a KV head's `rows` query rows (group
/// size x query length) on tensor cores: where a tile has rows to fill (each
/// row costs the CUDA-core kernel its own FMAs, exp and shuffles per key; an
/// mma costs the same for 1 row as for 16; `minRows`, kTensorCoreMinRows
/// unless planKernel says otherwise) and the fragment layout fits: 16-bit
/// queries (mma.sync has no exact f32 form; an fp8 cache is decoded to the
/// queries' type), a head dim of 64 or 128 (the accumulator, 16 x D f32 per
/// warp, lives in registers).
bool choosesTensorCores(int64_t queryElementBytes, int64_t headDim,
                        int64_t rows, int64_t minRows = kTensorCoreMinRows);

/// Whether a tensor-core tile over an fp8 cache multiplies in f16: with f16
/// queries, and with bf16 queries whose cache has per-tensor scales (or
/// none): the tile converts q once, and each fp8 pair decodes to f16 with
/// one conversion where bf16 took twelve instructions. With per-token value
/// scales P carries them, which f16 could not hold for large values: bf16
/// queries keep bf16 pairs there.
inline bool multipliesFloat8InHalf(bool bfloat16Queries,
                                   bool float8TokenScales) {
  return !bfloat16Queries || !float8TokenScales;
}

} // namespace flashdecode

#endif // FD_PLANNING_KERNELCHOICE_H

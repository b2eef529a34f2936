//===- KernelMatrix.h - The configurations of the kernel tests -*- C++ -*-===//
//
// The configuration matrix of the kernel tests: PTXAssemblyTest assembles
// each with ptxas (no spills), KernelMatrixOnGPUTest runs each on a GPU (in
// `make test`: fdemu, with its memory, race and initialization checks)
// against the float64 reference. One list, so that both cover the same
// configurations: every dtype, head dim, head ratio, query length, page
// size, layout, arch, model feature, fp8 cache and the fused merge, and
// the wide heads (value dims apart, MLA's latent cache, head dims to 576),
// sampled
// so that every combination of any four axes appears (KernelMatrix.cpp
// says how each part samples).
//
//===----------------------------------------------------------------------===//

#ifndef FD_UNITTESTS_KERNELMATRIX_H
#define FD_UNITTESTS_KERNELMATRIX_H

#include "fd/Compiler/Compile.h"

#include <ostream>
#include <string>
#include <vector>

namespace flashdecode::test {

/// One configuration of the matrix: what sets the kernels' registers and
/// instructions (KernelConfig's fields the matrix varies; numSplits is 4).
struct MatrixConfig {
  ElementType type;
  int64_t headDim;
  /// Hq / Hkv (the heads: toKernelConfig).
  int64_t groupSize;
  int64_t queryLength;
  /// 0: dense.
  int64_t pageSize;
  CacheLayout layout;
  std::string arch;
  /// The model features that cost registers: a sliding window (a lower
  /// mask per row with Lq > 1) and logit soft-capping (per score).
  bool windowAndSoftCap = false;
  /// The window alone.
  bool window = false;
  /// ALiBi: a slope load per row and a bias per score.
  bool alibi = false;
  /// Attention sinks: a load and a max in the merge.
  bool sinks = false;
  /// Per-sequence query lengths: a load and a clamp in both kernels, a
  /// dynamic row-tile count and position in the partial kernel.
  bool queryLens = false;
  /// An fp8 cache: 16 elements per load decoded to f16 pairs (cvt on
  /// sm_90, bit operations on sm_80), its scales per tensor or per token.
  KVCacheType kvCacheType = KVCacheType::SameAsQuery;
  KVScaleGranularity kvScale = KVScaleGranularity::Tensor;
  /// The merge in the partial kernel: the last block's merge after its
  /// chunk, in the registers the kernel's launch bounds leave.
  bool fusedMerge = false;
  /// The matrix's part that holds it (its generator's name).
  const char *suite = "";
  /// D_v, the values' (0: headDim), and whether the values are the keys'
  /// first D_v columns (MLA's latent cache: no value cache).
  int64_t valueHeadDim = 0;
  bool sharedKV = false;
  /// A cache sharded by token over kvShardWorld ranks (0: not sharded),
  /// kvShardInterleave tokens at a time: the rank a load, the chunk and the
  /// masks from global positions.
  int64_t kvShardWorld = 0;
  int64_t kvShardInterleave = 1;
  /// Top-k sparse decode: the lists of K slots (pages of one position)
  /// with holes; 0, off.
  int64_t topK = 0;
  /// The blocks of a chunk's thread block cluster (the planner's schedule
  /// with cluster_ctas set; 1: the planner's as it is).
  int64_t clusterCtas = 1;
  /// The split count (4 but where a test needs chunks of more keys).
  int64_t numSplits = 4;
};

/// The configuration's name: its suite, dtype, D, Hq / Hkv, Lq, paging,
/// layout, arch and features (a test name: letters, digits, underscores).
std::string describe(const MatrixConfig &config);

/// gtest prints the configuration in test listings by its name.
void PrintTo(const MatrixConfig &config, std::ostream *os);

/// What fd-compile compiles for `config`: 4 splits, with the lse, and
/// Hkv = min(lcm(32, G) / G, FD_MATRIX_MAX_KV_HEADS) heads of G = Hq / Hkv
/// query heads each. FD_MATRIX_MAX_KV_HEADS is 2 by default: two KV heads
/// run every path of the kernels that 32 run (for every configuration, the
/// same instructions and guards each way on fdemu,
/// tools/compare_matrix_coverage.sh) in a sixteenth of the CTAs; 32 gives
/// Hq = lcm(32, G), the heads the matrix had before (bench/RESULTS.md).
KernelConfig toKernelConfig(const MatrixConfig &config);

/// The kernels of `config`, compiled once for both matrix tests: through
/// the JIT's disk cache in the build tree (FD_MATRIX_CACHE_DIR; the key holds
/// the compiler's source hash), so whichever of PTXAssemblyTest and
/// KernelMatrixOnGPUTest runs a configuration second reads what the first
/// compiled (the cache hands out the same bytes or recompiles:
/// KernelCacheTest, KernelCacheProcessesTest).
llvm::Expected<CompiledKernels> compileMatrixConfig(const MatrixConfig &config);

/// Every configuration of the matrix, part by part.
std::vector<MatrixConfig> getKernelMatrix();

} // namespace flashdecode::test

#endif // FD_UNITTESTS_KERNELMATRIX_H

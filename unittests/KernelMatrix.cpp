//===- KernelMatrix.cpp - The configurations of the kernel tests ----------===//

#include "KernelMatrix.h"

#include "fd/Conversion/FDToGPU/FDToGPU.h"

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <utility>

namespace flashdecode::test {

namespace {

const ElementType kTypes[] = {ElementType::F16, ElementType::BF16,
                              ElementType::F32};
const int64_t kPageSizes[] = {0, 1, 16};
const CacheLayout kLayouts[] = {CacheLayout::NHD, CacheLayout::HND};
const char *const kArchs[] = {"sm_80", "sm_90"};

// What sets the partial kernel's registers: the element type, the head dim
// (lanes per key row, idle lanes, elements per lane), the rows a block
// serves (Hq / Hkv x Lq, which the row tiles divide), the masked loop
// (Lq > 1) and paging. The sweep takes every (dtype, D, Hq / Hkv, Lq) at the
// extremes: f16, bf16, f32 x D in {32, 40, 96, 128, 256} (the smallest; 5
// vectors a row, idle lanes; 12 and 16 vectors; the largest) x MHA, GQA-8,
// MQA x Lq in {1, 4, 8}, 135 configurations, and gives each the page size
// (dense, 1, 16) indexed by the sum of its four axis indices mod 3. Then
// every combination of any four of the five axes appears: each page size
// with every (D, Hq / Hkv, Lq), with every (dtype, D, Lq), and so on. The
// arch (sm_80, sm_90) is that sum mod 2, the layout (dtype + ratio) mod 2.
// The full product of the six axes (810 configurations) was assembled once
// for the register range docs/Dialect.md states (convert-fd-to-gpu).
std::vector<MatrixConfig> extremes() {
  const int64_t headDims[] = {32, 40, 96, 128, 256};
  const int64_t groupSizes[] = {1, 8, 32};
  const int64_t queryLengths[] = {1, 4, 8};
  std::vector<MatrixConfig> params;
  for (int t = 0; t < 3; ++t)
    for (int d = 0; d < 5; ++d)
      for (int g = 0; g < 3; ++g)
        for (int q = 0; q < 3; ++q) {
          int sum = t + d + g + q;
          params.push_back({kTypes[t], headDims[d], groupSizes[g],
                            queryLengths[q], kPageSizes[sum % 3],
                            kLayouts[(t + g) % 2], kArchs[sum % 2]});
        }
  return params;
}

// Every supported head dim, f16 and f32, at the largest row tiles the
// layout gives: a block whose rows fit one tile of the most rows, and one
// whose rows take three tiles of the most rows per tile when there are
// several (with Lq = 3: the masked loop too). Hq is then 32 or a multiple
// of it the group size divides. Page size and arch rotate; with an fp8
// `cacheType` (its row tiles are the layout's for 1-byte caches) the
// scales' granularity alternates.
std::vector<MatrixConfig>
everyHeadDim(KVCacheType cacheType = KVCacheType::SameAsQuery) {
  using mlir::fd::PartialKernelLayout;
  const bool isFloat8 = cacheType != KVCacheType::SameAsQuery;
  std::vector<MatrixConfig> params;
  int index = 0;
  for (ElementType type : {ElementType::F16, ElementType::F32})
    for (int64_t headDim = 32; headDim <= 256; headDim += 8) {
      int64_t rowRegisters = PartialKernelLayout::get(
                                 headDim, getElementTypeSize(type),
                                 isFloat8 ? 1 : getElementTypeSize(type), 1, 1)
                                 .registersPerRow();
      int64_t oneTile = PartialKernelLayout::kRowRegisterBudget / rowRegisters;
      int64_t manyTiles = (PartialKernelLayout::kRowRegisterBudget -
                           PartialKernelLayout::kRowTileLoopRegisters) /
                          rowRegisters;
      for (auto [groupSize, queryLength] :
           {std::pair(oneTile, int64_t(1)), std::pair(manyTiles, int64_t(3))}) {
        params.push_back({type, headDim, groupSize, queryLength,
                          kPageSizes[index % 3], CacheLayout::NHD,
                          kArchs[(index + index / 2) % 2]});
        params.back().kvCacheType = cacheType;
        params.back().kvScale = index % 2 ? KVScaleGranularity::TokenHead
                                          : KVScaleGranularity::Tensor;
        ++index;
      }
    }
  return params;
}

// Every other configuration of extremes() with a window of 3 keys (below
// Lq: both ends of a chunk masked) and a soft-cap: every (dtype, D) with
// several of (Hq / Hkv, Lq, page size).
std::vector<MatrixConfig> withWindowAndSoftCap() {
  std::vector<MatrixConfig> params;
  std::vector<MatrixConfig> all = extremes();
  for (size_t i = 0; i < all.size(); i += 2) {
    params.push_back(all[i]);
    params.back().windowAndSoftCap = true;
  }
  return params;
}

// One configuration of every four of extremes(), the first and the second
// in turn (an index's parity is its arch's: both arches, and half of them
// not in WindowSoftCap), with ALiBi on top of the window and the soft-cap:
// every dtype, head dim, ratio and Lq, 34 configurations.
std::vector<MatrixConfig> withAlibi() {
  std::vector<MatrixConfig> params;
  std::vector<MatrixConfig> all = extremes();
  for (size_t k = 0; 4 * k + k % 2 < all.size(); ++k) {
    params.push_back(all[4 * k + k % 2]);
    params.back().windowAndSoftCap = true;
    params.back().alibi = true;
  }
  return params;
}

// Per-sequence query lengths alone on one configuration of every four of
// extremes(), those withAlibi() leaves (the third and the fourth in turn:
// both arches), every (dtype, D), (Hq / Hkv, Lq) and (dtype, Lq), 33
// configurations.
std::vector<MatrixConfig> withQueryLens() {
  std::vector<MatrixConfig> params;
  std::vector<MatrixConfig> all = extremes();
  for (size_t k = 0; 4 * k + 2 + k % 2 < all.size(); ++k) {
    params.push_back(all[4 * k + 2 + k % 2]);
    params.back().queryLens = true;
  }
  return params;
}

// Every model feature at once (a window of 3, a soft-cap, ALiBi, sinks and
// per-sequence query lengths) on the configurations of withAlibi().
std::vector<MatrixConfig> withEveryFeature() {
  std::vector<MatrixConfig> params = withAlibi();
  for (MatrixConfig &param : params) {
    param.sinks = true;
    param.queryLens = true;
  }
  return params;
}

// Every feature at every Lq from 1 to 8 in both forms of the partial
// kernel: tensor cores (f16 or bf16, Hq / Hkv = 8 or 4, D = 64 or 128,
// each pair twice) and CUDA cores (f32, or the 16-bit type at D = 96,
// which the mma fragments do not fit, with the same heads).
std::vector<MatrixConfig> everyQueryLengthWithEveryFeature() {
  std::vector<MatrixConfig> params;
  for (int64_t queryLength = 1; queryLength <= 8; ++queryLength) {
    int64_t headDim = (queryLength / 2) % 2 ? 64 : 128;
    int64_t groupSize = queryLength <= 4 ? 8 : 4;
    MatrixConfig tensorCores{queryLength % 2 ? ElementType::BF16
                                             : ElementType::F16,
                             headDim,
                             groupSize,
                             queryLength,
                             kPageSizes[queryLength % 3],
                             kLayouts[(queryLength / 4) % 2],
                             kArchs[queryLength % 2],
                             /*windowAndSoftCap=*/true,
                             /*alibi=*/true,
                             /*sinks=*/true,
                             /*queryLens=*/true};
    MatrixConfig cudaCores = tensorCores;
    cudaCores.arch = kArchs[(queryLength + 1) % 2];
    if (queryLength % 2)
      cudaCores.headDim = 96;
    else
      cudaCores.type = ElementType::F32;
    params.push_back(tensorCores);
    params.push_back(cudaCores);
  }
  return params;
}

// FP8 caches on every configuration of extremes() (every dtype, D, ratio,
// Lq, page size, layout, both arches: both decoders), the format and the
// scales' granularity alternating so that each meets every other axis.
std::vector<MatrixConfig> withFloat8() {
  std::vector<MatrixConfig> params = extremes();
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].kvCacheType = i % 2 ? KVCacheType::E5M2 : KVCacheType::E4M3;
    params[i].kvScale = (i / 2) % 2 ? KVScaleGranularity::TokenHead
                                    : KVScaleGranularity::Tensor;
  }
  return params;
}

// The fused merge on every configuration of extremes(), every other one
// with sinks and per-sequence query lengths (what the merge reads besides
// the partials).
std::vector<MatrixConfig> withFusedMerge() {
  std::vector<MatrixConfig> params = extremes();
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].fusedMerge = true;
    params[i].sinks = params[i].queryLens = i % 2;
  }
  return params;
}

/// The tensor-core tiles of the served shapes, every one: dense, Lq = 1,
/// f16 and bf16 (and f16 queries over an E4M3 cache), D = 64 and 128, group
/// sizes 2 to 32 (MQA), on sm_80 and sm_90. The sampled sweeps above missed
/// sm_90 at D = 128 dense, where holding all of q's k-steps spilled.
std::vector<MatrixConfig> tensorCoreTiles() {
  std::vector<MatrixConfig> params;
  for (const char *arch : kArchs)
    for (int64_t headDim : {64, 128})
      for (int64_t groupSize : {2, 4, 8, 32}) {
        for (ElementType type : {ElementType::F16, ElementType::BF16})
          params.push_back(
              {type, headDim, groupSize, 1, 0, CacheLayout::NHD, arch});
        MatrixConfig float8{ElementType::F16, headDim, groupSize, 1, 0,
                            CacheLayout::NHD, arch};
        float8.kvCacheType = KVCacheType::E4M3;
        params.push_back(float8);
      }
  return params;
}

/// Rows masked apart (Lq > 1) at D = 128 on tensor cores: a window without
/// a soft-cap, per-sequence query lengths, and both with sinks in the fused
/// merge, at the small groups whose tiles have the fewest spare registers,
/// on both arches and layouts. An exhaustive ptxas run of the tensor-core
/// configurations found these spilling 4 to 16 bytes in compiler 0.2.18.
std::vector<MatrixConfig> maskedRowsAtHeadDim128() {
  std::vector<MatrixConfig> params;
  const std::pair<int64_t, int64_t> groupsAndLengths[] = {
      {2, 2}, {2, 3}, {2, 4}, {4, 2}, {8, 7}};
  int i = 0;
  for (const char *arch : kArchs)
    for (CacheLayout layout : kLayouts)
      for (auto [groupSize, queryLength] : groupsAndLengths)
        for (int feature = 0; feature < 3; ++feature, ++i) {
          MatrixConfig param{i % 2 ? ElementType::BF16 : ElementType::F16,
                             128,
                             groupSize,
                             queryLength,
                             0,
                             layout,
                             arch};
          param.window = feature == 0;
          param.queryLens = feature > 0;
          param.fusedMerge = param.sinks = feature == 2;
          params.push_back(param);
        }
  return params;
}

/// Heads wider than 256 and values apart from the keys, all on CUDA cores:
/// MLA's absorbed decode (D 576 over a latent cache whose first 512
/// columns are the values) at DeepSeek's 16 and 128 heads per GPU and Kimi
/// K2's 64 (with Lq = 2: 128 rows), in bf16, f16 and f32 and over e4m3
/// caches with either scale, dense and in pages of 1, 16 and 64, with the
/// fused merge and every model feature on one each; Gemma 4's global
/// layers (D = D_v = 512, values of their own) at group sizes 2 and 8 with
/// its soft-cap and a window; and the shapes apart between them: D 192 /
/// D_v 128 (DeepSeek's unabsorbed heads), D_v wider than D with idle value
/// lanes (64 / 264), a latent cache read for 32 values, and MHA at D 264;
/// last, MLA on sm_90a's warpgroup tile.
std::vector<MatrixConfig> wideHeads() {
  auto make = [](ElementType type, int64_t headDim, int64_t valueHeadDim,
                 bool sharedKV, int64_t groupSize, int64_t queryLength,
                 int64_t pageSize, CacheLayout layout, const char *arch) {
    MatrixConfig config{type,     headDim, groupSize, queryLength,
                        pageSize, layout,  arch};
    config.valueHeadDim = valueHeadDim;
    config.sharedKV = sharedKV;
    return config;
  };
  const CacheLayout nhd = CacheLayout::NHD, hnd = CacheLayout::HND;
  std::vector<MatrixConfig> params = {
      make(ElementType::BF16, 576, 512, true, 16, 1, 64, nhd, "sm_90"),
      make(ElementType::F16, 576, 512, true, 128, 1, 0, nhd, "sm_80"),
      make(ElementType::BF16, 576, 512, true, 64, 2, 16, nhd, "sm_90"),
      make(ElementType::F32, 576, 512, true, 16, 1, 0, hnd, "sm_80"),
      make(ElementType::BF16, 512, 512, false, 8, 1, 16, nhd, "sm_90"),
      make(ElementType::F32, 512, 512, false, 2, 3, 1, hnd, "sm_80"),
      make(ElementType::F16, 192, 128, false, 4, 1, 1, nhd, "sm_90"),
      make(ElementType::BF16, 64, 264, false, 8, 2, 0, hnd, "sm_80"),
      make(ElementType::F16, 264, 264, false, 1, 8, 16, nhd, "sm_90")};
  // fp8 latent caches, per token and per tensor.
  MatrixConfig float8 =
      make(ElementType::BF16, 576, 512, true, 16, 2, 1, nhd, "sm_80");
  float8.kvCacheType = KVCacheType::E4M3;
  float8.kvScale = KVScaleGranularity::TokenHead;
  params.push_back(float8);
  float8 = make(ElementType::F16, 576, 32, true, 32, 1, 16, hnd, "sm_90");
  float8.kvCacheType = KVCacheType::E4M3;
  params.push_back(float8);
  MatrixConfig gemmaFloat8 =
      make(ElementType::BF16, 512, 512, false, 2, 1, 0, nhd, "sm_90");
  gemmaFloat8.kvCacheType = KVCacheType::E5M2;
  gemmaFloat8.kvScale = KVScaleGranularity::TokenHead;
  params.push_back(gemmaFloat8);
  // The fused merge (with sinks) and every model feature.
  MatrixConfig fused =
      make(ElementType::BF16, 576, 512, true, 16, 1, 64, nhd, "sm_80");
  fused.fusedMerge = fused.sinks = true;
  params.push_back(fused);
  MatrixConfig every =
      make(ElementType::F16, 576, 512, true, 16, 3, 16, nhd, "sm_90");
  every.windowAndSoftCap = every.alibi = every.sinks = every.queryLens = true;
  params.push_back(every);
  MatrixConfig gemma =
      make(ElementType::BF16, 512, 512, false, 8, 2, 16, hnd, "sm_80");
  gemma.windowAndSoftCap = gemma.queryLens = true;
  params.push_back(gemma);
  // The warpgroup tile (wgmma, sm_90a) of MLA's 64-row tiles: DeepSeek's
  // 128 heads in pages of 64, Kimi K2's 64 with Lq = 2 (causal) dense,
  // 80 rows (a tile of padding rows), and every model feature at Lq = 3.
  params.push_back(
      make(ElementType::BF16, 576, 512, true, 128, 1, 64, nhd, "sm_90a"));
  params.push_back(
      make(ElementType::F16, 576, 512, true, 64, 2, 0, hnd, "sm_90a"));
  params.push_back(
      make(ElementType::BF16, 576, 512, true, 80, 1, 1, nhd, "sm_90a"));
  MatrixConfig everyWarpgroup =
      make(ElementType::BF16, 576, 512, true, 64, 3, 16, nhd, "sm_90a");
  everyWarpgroup.windowAndSoftCap = everyWarpgroup.alibi =
      everyWarpgroup.sinks = everyWarpgroup.queryLens = true;
  params.push_back(everyWarpgroup);
  return params;
}

/// Caches sharded by token (decode context parallelism): tensor cores with
/// every feature at global positions (Lq = 4 causal, a window, ALiBi, query
/// lengths, a soft-cap) on both arches, CUDA cores (f32, and MHA) with a
/// window across the shards, paged shards of an fp8 cache per token, and
/// MLA's latent cache; 1 to 4 ranks of 1 to 16 tokens (the tests run the
/// last rank, which holds some of every length they use past a round).
std::vector<MatrixConfig> kvShards() {
  auto make = [](ElementType type, int64_t headDim, int64_t groupSize,
                 int64_t queryLength, int64_t pageSize, CacheLayout layout,
                 const char *arch, int64_t world, int64_t interleave) {
    MatrixConfig config{type,     headDim, groupSize, queryLength,
                        pageSize, layout,  arch};
    config.kvShardWorld = world;
    config.kvShardInterleave = interleave;
    return config;
  };
  const CacheLayout nhd = CacheLayout::NHD, hnd = CacheLayout::HND;
  std::vector<MatrixConfig> params;
  for (const char *arch : kArchs) {
    params.push_back(make(ElementType::F16, 128, 8, 4, 0, nhd, arch, 3, 2));
    params.back().windowAndSoftCap = params.back().alibi =
        params.back().queryLens = true;
  }
  params.push_back(make(ElementType::F32, 64, 4, 2, 0, hnd, "sm_80", 2, 1));
  params.back().window = params.back().alibi = true;
  params.push_back(make(ElementType::BF16, 64, 1, 4, 16, nhd, "sm_90", 4, 3));
  params.back().window = true;
  params.push_back(make(ElementType::F16, 128, 4, 1, 16, hnd, "sm_90", 2, 16));
  params.back().kvCacheType = KVCacheType::E4M3;
  params.back().kvScale = KVScaleGranularity::TokenHead;
  params.push_back(make(ElementType::BF16, 576, 16, 2, 64, nhd, "sm_90", 4, 8));
  params.back().valueHeadDim = 512;
  params.back().sharedKV = true;
  params.push_back(make(ElementType::F16, 64, 8, 1, 0, nhd, "sm_80", 1, 1));
  params.back().fusedMerge = true;
  return params;
}

/// Top-k sparse decode (pages of one position whose negative entries are
/// holes: a load predicated, a copy zero-filled, a score masked): tensor
/// cores (GQA, MQA's two tiles, fp8 per token) and CUDA cores (f32, MLA's
/// latent cache), with sinks. Lists of 45 slots: the kernel tests' longest
/// length at pages of one position (KernelMatrixOnGPUTest.cpp).
std::vector<MatrixConfig> topK() {
  auto make = [](ElementType type, int64_t headDim, int64_t groupSize,
                 const char *arch) {
    MatrixConfig config{type, headDim, groupSize, 1, 1, CacheLayout::NHD, arch};
    config.topK = 45;
    return config;
  };
  std::vector<MatrixConfig> params = {make(ElementType::F16, 128, 8, "sm_90"),
                                      make(ElementType::BF16, 64, 32, "sm_80"),
                                      make(ElementType::F32, 64, 4, "sm_90")};
  params.back().sinks = true;
  params.push_back(make(ElementType::F16, 128, 4, "sm_80"));
  params.back().kvCacheType = KVCacheType::E4M3;
  params.back().kvScale = KVScaleGranularity::TokenHead;
  params.push_back(make(ElementType::BF16, 576, 16, "sm_90"));
  params.back().valueHeadDim = 512;
  params.back().sharedKV = true;
  params.back().sinks = true;
  return params;
}

/// Thread block clusters (cluster_ctas, sm_90): a chunk's blocks each
/// stream a share of whole steps and merge in distributed shared memory.
/// MLA's split-value tile at 16 heads in pages of 64 (8 blocks a chunk:
/// 32 for the tests' 4 splits, most shares empty at the short lengths),
/// Kimi K2's 64 heads at Lq = 2 over an fp8 cache per token (four row
/// tiles), per-warp tensor-core tiles with ALiBi, sinks and query lengths
/// (one chunk, so that two blocks' shares of 32-key steps hold keys) and
/// with a window and a soft-cap (the window leaves most shares empty), CUDA
/// cores in f32 (four warp states a block) and over a sharded cache.
std::vector<MatrixConfig> clusters() {
  auto make = [](ElementType type, int64_t headDim, int64_t groupSize,
                 int64_t queryLength, int64_t pageSize, int64_t clusterCtas) {
    MatrixConfig config{type,     headDim,          groupSize, queryLength,
                        pageSize, CacheLayout::NHD, "sm_90"};
    config.clusterCtas = clusterCtas;
    return config;
  };
  std::vector<MatrixConfig> params;
  params.push_back(make(ElementType::BF16, 576, 16, 1, 64, 8));
  params.back().valueHeadDim = 512;
  params.back().sharedKV = true;
  params.push_back(make(ElementType::BF16, 576, 64, 2, 16, 2));
  params.back().valueHeadDim = 512;
  params.back().sharedKV = true;
  params.back().kvCacheType = KVCacheType::E4M3;
  params.back().kvScale = KVScaleGranularity::TokenHead;
  params.push_back(make(ElementType::F16, 128, 8, 3, 16, 4));
  params.back().alibi = params.back().sinks = params.back().queryLens = true;
  params.back().numSplits = 1;
  params.push_back(make(ElementType::F16, 128, 8, 2, 16, 2));
  params.back().windowAndSoftCap = true;
  params.push_back(make(ElementType::F32, 128, 4, 1, 0, 3));
  params.push_back(make(ElementType::F32, 64, 4, 2, 1, 2));
  params.back().kvShardWorld = 2;
  params.back().kvShardInterleave = 4;
  params.back().numSplits = 1;
  // sm_90a's warpgroup tile (Kimi K2's 64 heads): its rows staged in its
  // dynamic shared memory for the merge; one chunk of two blocks' 32-key
  // shares, and Lq = 2 (128 rows, two tiles) over 4 chunks with query
  // lengths.
  for (int64_t queryLength : {1, 2}) {
    params.push_back(
        make(queryLength == 1 ? ElementType::BF16 : ElementType::F16, 576, 64,
             queryLength, queryLength == 1 ? 16 : 0, 2));
    params.back().arch = "sm_90a";
    params.back().valueHeadDim = 512;
    params.back().sharedKV = true;
    params.back().numSplits = queryLength == 1 ? 1 : 4;
    params.back().queryLens = queryLength == 2;
  }
  return params;
}

} // namespace

std::string describe(const MatrixConfig &config) {
  return std::string(config.suite) + "_" + getElementTypeName(config.type) +
         "_D" + std::to_string(config.headDim) +
         (config.valueHeadDim ? "_Dv" + std::to_string(config.valueHeadDim)
                              : std::string()) +
         (config.sharedKV ? "_shared_kv" : "") + "_G" +
         std::to_string(config.groupSize) + "_Lq" +
         std::to_string(config.queryLength) +
         (config.pageSize ? "_page" + std::to_string(config.pageSize)
                          : std::string("_dense")) +
         "_" + getCacheLayoutName(config.layout) + "_" + config.arch +
         (config.windowAndSoftCap ? "_window_softcap" : "") +
         (config.window ? "_window" : "") + (config.alibi ? "_alibi" : "") +
         (config.sinks ? "_sinks" : "") +
         (config.queryLens ? "_query_lens" : "") +
         (config.fusedMerge ? "_fused_merge" : "") +
         (config.kvCacheType == KVCacheType::E4M3   ? "_e4m3"
          : config.kvCacheType == KVCacheType::E5M2 ? "_e5m2"
                                                    : "") +
         (config.kvCacheType != KVCacheType::SameAsQuery &&
                  config.kvScale == KVScaleGranularity::TokenHead
              ? "_token_head"
              : "") +
         (config.kvShardWorld
              ? "_shard" + std::to_string(config.kvShardWorld) + "x" +
                    std::to_string(config.kvShardInterleave)
              : std::string()) +
         (config.clusterCtas > 1
              ? "_cluster" + std::to_string(config.clusterCtas)
              : std::string());
}

void PrintTo(const MatrixConfig &config, std::ostream *os) {
  *os << describe(config);
}

/// FD_MATRIX_MAX_KV_HEADS, 2 when unset (toKernelConfig).
static int64_t getMatrixMaxKVHeads() {
  const char *value = std::getenv("FD_MATRIX_MAX_KV_HEADS");
  if (!value || !*value)
    return 2;
  char *end = nullptr;
  long long heads = std::strtoll(value, &end, 10);
  if (*end != '\0' || heads < 1) {
    std::fprintf(stderr,
                 "FD_MATRIX_MAX_KV_HEADS='%s' is not a positive integer\n",
                 value);
    std::exit(2);
  }
  return heads;
}

KernelConfig toKernelConfig(const MatrixConfig &matrixConfig) {
  KernelConfig config;
  config.headDim = matrixConfig.headDim;
  config.valueHeadDim = matrixConfig.valueHeadDim;
  config.sharedKV = matrixConfig.sharedKV;
  static const int64_t maxKVHeads = getMatrixMaxKVHeads();
  config.numKVHeads = std::min(std::lcm<int64_t>(32, matrixConfig.groupSize) /
                                   matrixConfig.groupSize,
                               maxKVHeads);
  config.numQueryHeads = config.numKVHeads * matrixConfig.groupSize;
  config.queryLength = matrixConfig.queryLength;
  config.elementType = matrixConfig.type;
  config.cacheLayout = matrixConfig.layout;
  config.arch = matrixConfig.arch;
  config.pageSize = matrixConfig.pageSize;
  config.numSplits = matrixConfig.numSplits;
  config.withLse = true;
  if (matrixConfig.windowAndSoftCap || matrixConfig.window)
    config.windowLeft = 3;
  if (matrixConfig.windowAndSoftCap)
    config.logitsSoftCap = 50.0f;
  config.withAlibi = matrixConfig.alibi;
  config.withSinks = matrixConfig.sinks;
  config.withQueryLens = matrixConfig.queryLens;
  config.kvCacheType = matrixConfig.kvCacheType;
  config.kvScaleGranularity = matrixConfig.kvScale;
  config.fusedMerge = matrixConfig.fusedMerge;
  config.kvShardWorld = matrixConfig.kvShardWorld;
  config.kvShardInterleave = matrixConfig.kvShardInterleave;
  config.topK = matrixConfig.topK;
  if (matrixConfig.clusterCtas > 1) {
    ScheduleChoice choice =
        planKernel(config.getKernelProblem(), *findChip(config.arch))
            .getChoice();
    choice.clusterCtas = matrixConfig.clusterCtas;
    config.schedule = choice;
  }
  return config;
}

llvm::Expected<CompiledKernels>
compileMatrixConfig(const MatrixConfig &config) {
  CompileOptions options;
  options.useMemoryCache = false;
  options.cacheDirectory = FD_MATRIX_CACHE_DIR;
  auto kernels = compile(toKernelConfig(config), options);
  if (!kernels)
    return kernels.takeError();
  return **kernels;
}

std::vector<MatrixConfig> getKernelMatrix() {
  const std::pair<const char *, std::vector<MatrixConfig>> suites[] = {
      {"Extremes", extremes()},
      {"FusedMerge", withFusedMerge()},
      {"WindowSoftCap", withWindowAndSoftCap()},
      {"Alibi", withAlibi()},
      {"QueryLens", withQueryLens()},
      {"EveryFeature", withEveryFeature()},
      {"QueryLensEveryLq", everyQueryLengthWithEveryFeature()},
      {"Float8", withFloat8()},
      {"HeadDims", everyHeadDim()},
      {"TensorCoreTiles", tensorCoreTiles()},
      {"MaskedRows", maskedRowsAtHeadDim128()},
      // fp8 rows hold twice the elements per load: the same at every head
      // dim.
      {"Float8HeadDims", everyHeadDim(KVCacheType::E4M3)},
      {"WideHeads", wideHeads()},
      {"KVShards", kvShards()},
      {"TopK", topK()},
      {"Clusters", clusters()}};
  std::vector<MatrixConfig> matrix;
  for (const auto &[suite, configs] : suites)
    for (MatrixConfig config : configs) {
      config.suite = suite;
      matrix.push_back(config);
    }
  return matrix;
}

} // namespace flashdecode::test

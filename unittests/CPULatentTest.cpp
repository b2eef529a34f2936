//===- CPULatentTest.cpp - MLA and value dims apart on the CPU ------------===//
//
// The CPU path with key and value head dims apart against the float64
// reference on fresh random inputs (FD_TEST_SEED=N repeats a run): MLA's
// absorbed decode (576-wide queries and keys over one latent KV head, the
// values the first 512 columns of each cache row), a value cache of its own
// with D_v != D, dense and paged (pages of 1, 16 and 64, spare pages of
// poison never read), lengths 0, 1 and not a multiple of the chunk or page,
// more splits than tokens, Lq = 2 causal with per-sequence query lengths,
// fp8 latent caches (per tensor and per token), and Gemma 4's 512-wide
// global-layer heads.
//
//===----------------------------------------------------------------------===//

#include "CPUAttentionHarness.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace flashdecode;
using namespace flashdecode::test;

namespace {

class CPULatent : public testing::Test, public Seeded {};

/// DeepSeek-V3's absorbed MLA decode at `heads` query heads: D = 576
/// (512 latent + 64 rope), D_v = 512, one latent KV head, the values read
/// from it; the scale is a parameter (1/sqrt(192), not 1/sqrt(576)).
KernelConfig latentConfig(ElementType type, int64_t heads,
                          int64_t queryLength = 1) {
  KernelConfig config;
  config.elementType = type;
  config.numQueryHeads = heads;
  config.numKVHeads = 1;
  config.headDim = 576;
  config.valueHeadDim = 512;
  config.sharedKV = true;
  config.queryLength = queryLength;
  config.scale = 1.0f / std::sqrt(192.0f);
  config.withLse = true;
  return config;
}

TEST_F(CPULatent, DeepSeekLatentDecodeEverySplit) {
  // Lengths 0, 1, one under and over a chunk of 64, a long one; split
  // counts up to more than the tokens of every sequence but the last.
  for (ElementType type : {ElementType::BF16, ElementType::F32}) {
    SCOPED_TRACE(testing::Message()
                 << getElementTypeName(type) << " " << seedNote());
    Problem problem(latentConfig(type, 16), {0, 1, 63, 65, 300}, 300, random);
    expectEverySplitMatches(problem, {1, 3, 7, 64, 301});
  }
}

TEST_F(CPULatent, HeadCountsOfDeepSeekAndKimi) {
  // 16 (128 heads over 8 GPUs), 64 (Kimi K2), 128 (data-parallel attention).
  for (int64_t heads : {16, 32, 64, 128}) {
    SCOPED_TRACE(testing::Message() << "Hq=" << heads << " " << seedNote());
    Problem problem(latentConfig(ElementType::BF16, heads), {37, 1, 130}, 130,
                    random);
    expectEverySplitMatches(problem, {4});
  }
}

TEST_F(CPULatent, PagedLatentCachesReadOnlyTheirPages) {
  // Pages of 1, 16 and MLA's usual 64; a spare page of 0x55 bytes the
  // kernel must never read; sequence 1 shares sequence 0's first page.
  for (int64_t pageSize : {1, 16, 64}) {
    SCOPED_TRACE(testing::Message()
                 << "page_size=" << pageSize << " " << seedNote());
    KernelConfig config = latentConfig(ElementType::BF16, 16);
    Problem problem(config, {70, 129, 0, 1}, 130, random);
    PagedCaches paged(problem, pageSize, /*sparePages=*/1, random);
    config.numSplits = 3;
    expectPagedMatchesDense(config, problem, paged, pageSize);
  }
}

TEST_F(CPULatent, MultiTokenPredictionIsCausal) {
  // Lq = 2 (DeepSeek's MTP): the first token sees one key less; with
  // per-sequence query lengths of 2, 0, 1.
  KernelConfig config = latentConfig(ElementType::BF16, 16, /*queryLength=*/2);
  Problem problem(config, {1, 2, 50, 129}, 129, random);
  SCOPED_TRACE(seedNote());
  expectEverySplitMatches(problem, {1, 5, 130});
  config.withQueryLens = true;
  Problem ragged(config, {1, 2, 50, 129}, 129, random);
  ragged.queryLens = {2, 0, 1, 2};
  expectEverySplitMatches(ragged, {1, 5});
}

TEST_F(CPULatent, Float8LatentCaches) {
  // e4m3 latent caches: one k_scale scales keys and values alike, per
  // tensor or per (token, KV head).
  for (KVScaleGranularity granularity :
       {KVScaleGranularity::Tensor, KVScaleGranularity::TokenHead}) {
    SCOPED_TRACE(testing::Message()
                 << (granularity == KVScaleGranularity::Tensor ? "tensor"
                                                               : "token-head")
                 << " " << seedNote());
    KernelConfig config = latentConfig(ElementType::BF16, 16);
    config.kvCacheType = KVCacheType::E4M3;
    config.kvScaleGranularity = granularity;
    Problem problem(config, {0, 17, 200}, 200, random);
    expectEverySplitMatches(problem, {1, 6});
  }
}

TEST_F(CPULatent, ValueCachesOfTheirOwnWidth) {
  // D = 192 over D_v = 128 (values apart, GQA-4), and Gemma 4's global
  // layers (D = D_v = 512, GQA-2), HND and NHD.
  for (auto [headDim, valueHeadDim] :
       {std::pair<int64_t, int64_t>{192, 128}, {512, 512}, {64, 264}}) {
    for (CacheLayout layout : {CacheLayout::NHD, CacheLayout::HND}) {
      SCOPED_TRACE(testing::Message() << "D=" << headDim << " D_v="
                                      << valueHeadDim << " " << seedNote());
      KernelConfig config;
      config.elementType = ElementType::F32;
      config.numQueryHeads = 8;
      config.numKVHeads = headDim == 512 ? 4 : 2;
      config.headDim = headDim;
      config.valueHeadDim = valueHeadDim;
      config.cacheLayout = layout;
      config.withLse = true;
      Problem problem(config, {0, 1, 33, 96}, 96, random);
      expectEverySplitMatches(problem, {1, 4, 97});
    }
  }
}

TEST_F(CPULatent, ConfigurationsAreChecked) {
  KernelConfig config = latentConfig(ElementType::BF16, 16);
  config.valueHeadDim = 600;
  EXPECT_EQ(config.validate(), "v_head_dim 600 is not supported: expected 0 "
                               "(the head dim) or a multiple of 8 in [32, "
                               "512]");
  config.valueHeadDim = 0;
  EXPECT_EQ(config.validate(),
            "head_dim 576 is the value head dim too, which is at most 512: "
            "give v_head_dim, a multiple of 8 in [32, 512]");
  config.headDim = 128;
  config.valueHeadDim = 256;
  EXPECT_EQ(config.validate(),
            "shared_kv reads the values from the key cache's first v_head_dim "
            "columns: v_head_dim (256) must be at most head_dim (128)");
  config.headDim = 584;
  EXPECT_EQ(config.validate(), "head_dim 584 is not supported: expected a "
                               "multiple of 8 in [32, 576]");
}

} // namespace

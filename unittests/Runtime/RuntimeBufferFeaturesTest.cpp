//===- RuntimeBufferFeaturesTest.cpp - Feature buffers, without a GPU -----===//
//
// The features whose kernels read a device buffer at every launch, attention
// sinks (DecodeBuffers::sinks), ALiBi slopes (alibiSlopes) and per-sequence
// query lengths (queryLens), in fdrt against the fake driver (FakeDriver.h),
// each test run on every feature: the manifest's flag (`with_sinks`,
// `with_alibi`, `with_query_lens`) and DecodePlan's rules for the buffer:
// required exactly when the kernels were compiled with the feature, 4-byte
// aligned, bound by name to its kernels' parameter ("sinks": the merge's;
// "alibi_slopes": the partial kernel's; "query_lens": both's), rebound with
// the buffers; and every set of them together. Then fp8 caches' scales
// (DecodeBuffers::kScale and vScale): required exactly when the manifest's
// `kv_dtype` is e4m3 or e5m2, each named with its shape (which `kv_scale`,
// the layout and paging decide) when missing, 4-byte aligned, bound by name
// to the partial kernel's "k_scale" and "v_scale".
//
//===----------------------------------------------------------------------===//

#include "FakeDriver.h"

#include "fd/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

using namespace flashdecode::rt;
using namespace flashdecode::test;

namespace {

/// A feature that reads a device buffer, and what the runtime says of it.
struct BufferFeature {
  /// For test names.
  const char *name;
  /// The manifest's config flag and the kernels' parameter.
  const char *flag, *parameter;
  bool Manifest::*compiled;
  CUdeviceptr DecodeBuffers::*buffer;
  /// Which kernels take the parameter (last, as fd-compile writes them).
  bool partial, merge;
  /// DecodePlan's messages: without the buffer, with a misaligned one, with
  /// one for kernels compiled without the feature.
  const char *required, *misaligned, *forbidden;
};

const BufferFeature kSinks{
    "sinks",
    "with_sinks",
    "sinks",
    &Manifest::withSinks,
    &DecodeBuffers::sinks,
    /*partial=*/false,
    /*merge=*/true,
    "DecodePlan: the kernels read attention sinks: sinks buffer (float "
    "[num_q_heads]) required",
    "DecodePlan: sinks address is not 4-byte aligned: the merge reads it as "
    "float",
    "DecodePlan: the kernels were compiled without attention sinks: sinks "
    "must be 0"};
const BufferFeature kAlibi{
    "alibi",
    "with_alibi",
    "alibi_slopes",
    &Manifest::withAlibi,
    &DecodeBuffers::alibiSlopes,
    /*partial=*/true,
    /*merge=*/false,
    "DecodePlan: the kernels apply ALiBi: alibiSlopes buffer (float "
    "[num_q_heads]) required",
    "DecodePlan: alibiSlopes address is not 4-byte aligned: the partial "
    "kernel reads it as float",
    "DecodePlan: the kernels were compiled without ALiBi: alibiSlopes must "
    "be 0"};
const BufferFeature kQueryLens{
    "query_lens",
    "with_query_lens",
    "query_lens",
    &Manifest::withQueryLens,
    &DecodeBuffers::queryLens,
    /*partial=*/true,
    /*merge=*/true,
    "DecodePlan: the kernels read per-sequence query lengths: queryLens "
    "buffer (int32 [batch]) required",
    "DecodePlan: queryLens address is not 4-byte aligned: the kernels read "
    "it as int32",
    "DecodePlan: the kernels were compiled without per-sequence query "
    "lengths: queryLens must be 0"};

void PrintTo(const BufferFeature *feature, std::ostream *os) {
  *os << feature->name;
}

/// Every feature, in the order fd-compile adds their parameters.
const std::vector<const BufferFeature *> kFeatures = {&kSinks, &kAlibi,
                                                      &kQueryLens};

const char *const kPartial = "fd_partial_attention";
const char *const kMerge = "fd_merge";

/// kManifest as fd-compile writes it with `features`: each flag true in the
/// config and each parameter appended to its kernels in kFeatures' order.
std::string manifestWith(const std::vector<const BufferFeature *> &features) {
  std::string manifest = kManifest;
  for (const BufferFeature *feature : kFeatures) {
    if (std::find(features.begin(), features.end(), feature) == features.end())
      continue;
    if (feature->partial && feature->merge)
      manifest = withBufferParameter(manifest, feature->flag,
                                     feature->parameter, {kPartial, kMerge});
    else
      manifest =
          withBufferParameter(manifest, feature->flag, feature->parameter,
                              {feature->partial ? kPartial : kMerge});
  }
  return manifest;
}

/// The arguments kManifest's kernels take: the partial kernel's, or with
/// `workspace` the merge's.
std::vector<uint64_t> baseArguments(bool merge, CUdeviceptr workspace) {
  if (merge)
    return {workspace, workspace + 3 * 8192, 0x5000, 0x6000};
  return {0x1000, 0x2000, 0x3000, 0x4000, workspace, workspace + 3 * 8192,
          4096};
}

/// `manifest` with `parameter` moved to position `index` of `kernel`'s
/// parameters.
std::string moveParameter(std::string manifest, const std::string &kernel,
                          const std::string &parameter, size_t index) {
  size_t at = manifest.find("\"name\": \"" + kernel + "\"");
  EXPECT_NE(at, std::string::npos) << kernel;
  if (at == std::string::npos)
    return manifest;
  const std::string open = "\"params\": [";
  size_t begin = manifest.find(open, at) + open.size();
  size_t end = manifest.find(']', begin);
  // The parameters are objects without nested braces.
  std::vector<std::string> params;
  for (size_t from = manifest.find('{', begin); from < end;
       from = manifest.find('{', from + 1))
    params.push_back(
        manifest.substr(from, manifest.find('}', from) + 1 - from));
  const std::string moved =
      "{\"name\": \"" + parameter + "\", \"type\": \"ptr\"}";
  auto it = std::find(params.begin(), params.end(), moved);
  EXPECT_NE(it, params.end()) << parameter;
  if (it == params.end())
    return manifest;
  params.erase(it);
  params.insert(params.begin() + index, moved);
  std::string list;
  for (const std::string &param : params)
    list += (list.empty() ? "" : ", ") + param;
  return manifest.replace(begin, end - begin, list);
}

std::string
featureName(const testing::TestParamInfo<const BufferFeature *> &info) {
  return info.param->name;
}

class ManifestFeature : public testing::TestWithParam<const BufferFeature *> {};

TEST_P(ManifestFeature, ParsesTheFlag) {
  const BufferFeature &feature = *GetParam();
  Manifest manifest = Manifest::parse(manifestWith({&feature}));
  for (const BufferFeature *each : kFeatures)
    EXPECT_EQ(manifest.*each->compiled, each == &feature) << each->flag;
  // Absent: no feature (manifests older than it).
  EXPECT_FALSE(Manifest::parse(kManifest).*feature.compiled);
  for (const char *value : {"1", "\"yes\""}) {
    std::string wrong = manifestWith({&feature});
    replaceFirst(wrong, "\"" + std::string(feature.flag) + "\": true",
                 "\"" + std::string(feature.flag) + "\": " + value);
    try {
      Manifest::parse(wrong);
      ADD_FAILURE() << "no error for " << value;
    } catch (const std::invalid_argument &error) {
      EXPECT_EQ(std::string(error.what()), "manifest: 'config." +
                                               std::string(feature.flag) +
                                               "' must be a boolean");
    }
  }
}

/// The fake runtime over kernels compiled with the feature.
class FakeRuntimeFeature
    : public FakeRuntime,
      public testing::WithParamInterface<const BufferFeature *> {
protected:
  void SetUp() override {
    FakeRuntime::SetUp();
    bundle.manifest = Manifest::parse(manifestWith({&feature()}));
    state.partialParamCount = 7 + feature().partial;
    state.mergeParamCount = 4 + feature().merge;
  }
  const BufferFeature &feature() const { return *GetParam(); }

  /// What kernel `merge` (else the partial kernel) takes with the buffer at
  /// `address` last when the feature binds it there.
  std::vector<uint64_t> arguments(bool merge, CUdeviceptr workspace,
                                  uint64_t address) const {
    std::vector<uint64_t> arguments = baseArguments(merge, workspace);
    if (merge ? feature().merge : feature().partial)
      arguments.push_back(address);
    return arguments;
  }
};

TEST_P(FakeRuntimeFeature, PlanRequiresTheBuffer) {
  EXPECT_EQ(planError(*device, bundle, buffers), feature().required);
  EXPECT_TRUE(state.launches.empty());
}

TEST_P(FakeRuntimeFeature, PlanRejectsAMisalignedPointer) {
  for (CUdeviceptr address : {0x7001, 0x7002, 0x7003}) {
    DecodeBuffers misaligned = buffers;
    misaligned.*feature().buffer = address;
    EXPECT_EQ(planError(*device, bundle, misaligned), feature().misaligned);
  }
  EXPECT_TRUE(state.launches.empty());
}

TEST_P(FakeRuntimeFeature, PlanBindsTheBufferToItsKernels) {
  // 4-byte alignment is enough: each reads 4-byte elements.
  buffers.*feature().buffer = 0x7004;
  DecodePlan plan(*device, bundle, buffers);
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  CUdeviceptr workspace = state.allocations[0].first;
  EXPECT_EQ(state.launches[0].kernel, kPartial);
  EXPECT_EQ(state.launches[0].arguments, arguments(false, workspace, 0x7004));
  EXPECT_EQ(state.launches[1].kernel, kMerge);
  EXPECT_EQ(state.launches[1].arguments, arguments(true, workspace, 0x7004));

  // Rebinding moves it; the graph captured before is stale, a new launch
  // passes the new address.
  Graph graph = Graph::capture(*device, {&plan}, stream);
  DecodeBuffers moved = buffers;
  moved.*feature().buffer = 0x8000;
  plan.setBuffers(moved);
  EXPECT_TRUE(graph.isStale());
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 6u);
  EXPECT_EQ(state.launches[4].kernel, kPartial);
  EXPECT_EQ(state.launches[5].kernel, kMerge);
  if (feature().partial) {
    EXPECT_EQ(state.launches[4].arguments.back(), 0x8000u);
  }
  if (feature().merge) {
    EXPECT_EQ(state.launches[5].arguments.back(), 0x8000u);
  }
  // Dropping it is refused.
  moved.*feature().buffer = 0;
  try {
    plan.setBuffers(moved);
    FAIL() << "no error";
  } catch (const std::invalid_argument &error) {
    EXPECT_EQ(std::string(error.what()), feature().required);
  }
}

TEST_P(FakeRuntimeFeature, ParameterOrderFollowsTheManifest) {
  // The binding is by name: a kernel that takes the buffer first, or
  // before its last other parameter (the merge's lse, the partial kernel's
  // max_len), gets it there; the other kernel keeps its order.
  for (bool merge : {false, true}) {
    if (!(merge ? feature().merge : feature().partial))
      continue;
    const size_t count = merge ? 5 : 8;
    for (size_t index : {size_t(0), count - 2}) {
      SCOPED_TRACE(testing::Message()
                   << (merge ? kMerge : kPartial) << " position " << index);
      bundle.manifest = Manifest::parse(
          moveParameter(manifestWith({&feature()}), merge ? kMerge : kPartial,
                        feature().parameter, index));
      buffers.*feature().buffer = 0x7010;
      state.launches.clear();
      DecodePlan plan(*device, bundle, buffers);
      plan.launch(stream);
      ASSERT_EQ(state.launches.size(), 2u);
      CUdeviceptr workspace = state.allocations.back().first;
      std::vector<uint64_t> moved = baseArguments(merge, workspace);
      moved.insert(moved.begin() + index, 0x7010);
      EXPECT_EQ(state.launches[merge].arguments, moved);
      EXPECT_EQ(state.launches[!merge].arguments,
                arguments(!merge, workspace, 0x7010));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Features, ManifestFeature,
                         testing::ValuesIn(kFeatures), featureName);
INSTANTIATE_TEST_SUITE_P(Features, FakeRuntimeFeature,
                         testing::ValuesIn(kFeatures), featureName);

/// The fake runtime over kernels compiled without any of them.
class FakeRuntimeWithoutFeature
    : public FakeRuntime,
      public testing::WithParamInterface<const BufferFeature *> {};

TEST_P(FakeRuntimeWithoutFeature, PlanRejectsTheBuffer) {
  DecodeBuffers withBuffer = buffers;
  withBuffer.*GetParam()->buffer = 0x7000;
  EXPECT_EQ(planError(*device, bundle, withBuffer), GetParam()->forbidden);
  EXPECT_TRUE(state.launches.empty());
}

INSTANTIATE_TEST_SUITE_P(Features, FakeRuntimeWithoutFeature,
                         testing::ValuesIn(kFeatures), featureName);

/// The fake runtime over kernels compiled with two or three of them.
class FakeRuntimeFeatureSet
    : public FakeRuntime,
      public testing::WithParamInterface<std::vector<const BufferFeature *>> {};

TEST_P(FakeRuntimeFeatureSet, EachBufferIsRequiredAndBindsApart) {
  // Each buffer goes to its own kernels' parameters, after the others' in
  // kFeatures' order, and each is required on its own.
  const std::vector<const BufferFeature *> &features = GetParam();
  bundle.manifest = Manifest::parse(manifestWith(features));
  std::vector<uint64_t> partial, merge;
  for (size_t i = 0; i < kFeatures.size(); ++i) {
    const BufferFeature &feature = *kFeatures[i];
    bool with = std::count(features.begin(), features.end(), &feature) == 1;
    EXPECT_EQ(bundle.manifest.*feature.compiled, with) << feature.flag;
    if (!with)
      continue;
    CUdeviceptr address = 0x7100 + 0x100 * i;
    buffers.*feature.buffer = address;
    if (feature.partial)
      partial.push_back(address);
    if (feature.merge)
      merge.push_back(address);
  }
  state.partialParamCount = 7 + partial.size();
  state.mergeParamCount = 4 + merge.size();
  for (const BufferFeature *missing : features) {
    DecodeBuffers without = buffers;
    without.*missing->buffer = 0;
    EXPECT_EQ(planError(*device, bundle, without), missing->required);
  }
  DecodePlan plan(*device, bundle, buffers);
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  CUdeviceptr workspace = state.allocations[0].first;
  std::vector<uint64_t> expected = baseArguments(false, workspace);
  expected.insert(expected.end(), partial.begin(), partial.end());
  EXPECT_EQ(state.launches[0].arguments, expected);
  expected = baseArguments(true, workspace);
  expected.insert(expected.end(), merge.begin(), merge.end());
  EXPECT_EQ(state.launches[1].arguments, expected);
}

INSTANTIATE_TEST_SUITE_P(
    Sets, FakeRuntimeFeatureSet,
    testing::Values(std::vector<const BufferFeature *>{&kSinks, &kAlibi},
                    std::vector<const BufferFeature *>{&kSinks, &kQueryLens},
                    std::vector<const BufferFeature *>{&kAlibi, &kQueryLens},
                    std::vector<const BufferFeature *>{&kSinks, &kAlibi,
                                                       &kQueryLens}),
    [](const testing::TestParamInfo<std::vector<const BufferFeature *>> &info) {
      std::string name;
      for (const BufferFeature *feature : info.param)
        name += (name.empty() ? "" : "_") + std::string(feature->name);
      return name;
    });

//===----------------------------------------------------------------------===//
// fp8 caches: k_scale and v_scale
//===----------------------------------------------------------------------===//

/// The fake runtime over kernels that read e4m3 caches with one scale per
/// tensor (the partial kernel's k_scale and v_scale last).
class FakeRuntimeFloat8 : public FakeRuntime {
protected:
  void SetUp() override {
    FakeRuntime::SetUp();
    bundle.manifest = Manifest::parse(withFloat8Cache(kManifest));
    state.partialParamCount = 9;
  }
};

TEST_F(FakeRuntimeFloat8, PlanBindsTheScalesToThePartialKernel) {
  for (const char *kvDtype : {"e4m3", "e5m2"})
    for (const char *kvScale : {"tensor", "token-head"}) {
      SCOPED_TRACE(testing::Message() << kvDtype << " " << kvScale);
      bundle.manifest =
          Manifest::parse(withFloat8Cache(kManifest, kvDtype, kvScale));
      state.launches.clear();
      state.allocations.clear();
      // 4-byte alignment is enough: the kernel reads floats.
      buffers.kScale = 0x7004;
      buffers.vScale = 0x7108;
      DecodePlan plan(*device, bundle, buffers);
      plan.launch(stream);
      ASSERT_EQ(state.launches.size(), 2u);
      CUdeviceptr workspace = state.allocations[0].first;
      std::vector<uint64_t> partial = baseArguments(false, workspace);
      partial.insert(partial.end(), {0x7004, 0x7108});
      EXPECT_EQ(state.launches[0].kernel, kPartial);
      EXPECT_EQ(state.launches[0].arguments, partial);
      EXPECT_EQ(state.launches[1].kernel, kMerge);
      EXPECT_EQ(state.launches[1].arguments, baseArguments(true, workspace));
    }

  // Rebinding moves them; the graph captured before is stale.
  DecodePlan plan(*device, bundle, buffers);
  Graph graph = Graph::capture(*device, {&plan}, stream);
  DecodeBuffers moved = buffers;
  moved.kScale = 0x8000;
  moved.vScale = 0x9000;
  plan.setBuffers(moved);
  EXPECT_TRUE(graph.isStale());
  state.launches.clear();
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  const std::vector<uint64_t> &partial = state.launches[0].arguments;
  ASSERT_EQ(partial.size(), 9u);
  EXPECT_EQ(partial[7], 0x8000u);
  EXPECT_EQ(partial[8], 0x9000u);
}

TEST_F(FakeRuntimeFloat8, ParameterOrderFollowsTheManifest) {
  // By name: scales taken right after the caches get them there.
  bundle.manifest = Manifest::parse(moveParameter(
      moveParameter(withFloat8Cache(kManifest), kPartial, "k_scale", 3),
      kPartial, "v_scale", 4));
  buffers.kScale = 0x7010;
  buffers.vScale = 0x7020;
  DecodePlan plan(*device, bundle, buffers);
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  CUdeviceptr workspace = state.allocations[0].first;
  std::vector<uint64_t> partial = baseArguments(false, workspace);
  partial.insert(partial.begin() + 3, {0x7010, 0x7020});
  EXPECT_EQ(state.launches[0].arguments, partial);
  EXPECT_EQ(state.launches[1].arguments, baseArguments(true, workspace));
}

TEST_F(FakeRuntimeFloat8, PlanRequiresEachScaleNamingItsShape) {
  struct Case {
    const char *kvScale, *layout;
    bool paged;
    const char *shape;
  };
  for (const Case &each : std::vector<Case>{
           {"tensor", "NHD", false, "[1]"},
           {"tensor", "HND", true, "[1]"},
           {"token-head", "NHD", false, "[batch, maxLength, num_kv_heads]"},
           {"token-head", "HND", false, "[batch, num_kv_heads, maxLength]"},
           {"token-head", "NHD", true, "[numPages, page_size, num_kv_heads]"},
           {"token-head", "HND", true,
            "[numPages, num_kv_heads, page_size]"}}) {
    SCOPED_TRACE(testing::Message() << each.kvScale << " " << each.layout
                                    << (each.paged ? " paged" : " dense"));
    std::string manifest = withFloat8Cache(kManifest, "e5m2", each.kvScale);
    replaceFirst(manifest, "\"kv_layout\": \"NHD\"",
                 std::string("\"kv_layout\": \"") + each.layout + "\"" +
                     (each.paged ? ", \"page_size\": 16" : ""));
    bundle.manifest = Manifest::parse(manifest);
    DecodeBuffers scaled = buffers;
    if (each.paged) {
      scaled.blockTable = 0x7000;
      scaled.numPages = 300;
    }
    scaled.kScale = 0x7100;
    scaled.vScale = 0x7200;
    for (CUdeviceptr DecodeBuffers::*missing :
         {&DecodeBuffers::kScale, &DecodeBuffers::vScale}) {
      DecodeBuffers without = scaled;
      without.*missing = 0;
      EXPECT_EQ(planError(*device, bundle, without),
                std::string("DecodePlan: the kernels read fp8 caches: ") +
                    (missing == &DecodeBuffers::kScale ? "kScale" : "vScale") +
                    " buffer (float " + each.shape + ") required");
    }
  }
  EXPECT_TRUE(state.launches.empty());
}

TEST_F(FakeRuntimeFloat8, PlanRejectsMisalignedScales) {
  buffers.kScale = 0x7100;
  buffers.vScale = 0x7200;
  for (CUdeviceptr DecodeBuffers::*scale :
       {&DecodeBuffers::kScale, &DecodeBuffers::vScale})
    for (CUdeviceptr offset : {1, 2, 3}) {
      DecodeBuffers misaligned = buffers;
      misaligned.*scale += offset;
      EXPECT_EQ(planError(*device, bundle, misaligned),
                std::string("DecodePlan: ") +
                    (scale == &DecodeBuffers::kScale ? "kScale" : "vScale") +
                    " address is not 4-byte aligned: the partial kernel reads "
                    "it as float");
    }
  EXPECT_TRUE(state.launches.empty());
}

TEST_F(FakeRuntime, PlanRejectsScalesForCachesOfTheQueryType) {
  // kManifest, and a manifest that says so explicitly.
  for (const std::string &manifest :
       {std::string(kManifest), withFloat8Cache(kManifest, "f16", "none")}) {
    bundle.manifest = Manifest::parse(manifest);
    DecodeBuffers withKScale = buffers, withVScale = buffers;
    withKScale.kScale = 0x7000;
    withVScale.vScale = 0x7000;
    EXPECT_EQ(planError(*device, bundle, withKScale),
              "DecodePlan: the kernels were compiled without fp8 caches: "
              "kScale must be 0");
    EXPECT_EQ(planError(*device, bundle, withVScale),
              "DecodePlan: the kernels were compiled without fp8 caches: "
              "vScale must be 0");
  }
  EXPECT_TRUE(state.launches.empty());
}

} // namespace

/// The fake runtime over kernels compiled for a cache sharded over 4 ranks
/// of 16 tokens: the partial kernel takes "kv_shard_rank" last.
class FakeRuntimeKVShard : public FakeRuntime {
protected:
  void SetUp() override {
    FakeRuntime::SetUp();
    bundle.manifest = Manifest::parse(withKVShard(kManifest));
    state.partialParamCount = 8;
  }

  static std::string withKVShard(std::string manifest) {
    replaceFirst(manifest, "\"with_lse\": true",
                 "\"with_lse\": true, \"kv_shard_world\": 4, "
                 "\"kv_shard_interleave\": 16");
    return appendPointerParameter(manifest, kPartial, "kv_shard_rank");
  }
};

TEST_F(FakeRuntimeKVShard, ParsesTheShard) {
  EXPECT_EQ(bundle.manifest.kvShardWorld, 4);
  EXPECT_EQ(bundle.manifest.kvShardInterleave, 16);
  // Absent: not sharded (manifests older than it).
  Manifest plain = Manifest::parse(kManifest);
  EXPECT_EQ(plain.kvShardWorld, 0);
  EXPECT_EQ(plain.kvShardInterleave, 1);
  std::string manifest = withKVShard(kManifest);
  replaceFirst(manifest, "\"kv_shard_interleave\": 16",
               "\"kv_shard_interleave\": 0");
  try {
    Manifest::parse(manifest);
    ADD_FAILURE() << "no error for interleave 0";
  } catch (const std::invalid_argument &error) {
    EXPECT_EQ(std::string(error.what()),
              "manifest: 'config.kv_shard_world and "
              "config.kv_shard_interleave' must be 0 (not sharded) or a world "
              ">= 1, and an interleave >= 1");
  }
}

TEST_F(FakeRuntimeKVShard, PlanRequiresAlignsAndBindsTheRank) {
  EXPECT_EQ(planError(*device, bundle, buffers),
            "DecodePlan: the kernels read a sharded cache: kvShardRank buffer "
            "(int32 [1]) required");
  DecodeBuffers misaligned = buffers;
  misaligned.kvShardRank = 0x7002;
  EXPECT_EQ(planError(*device, bundle, misaligned),
            "DecodePlan: kvShardRank address is not 4-byte aligned: the "
            "partial kernel reads it as int32");
  buffers.kvShardRank = 0x7004;
  DecodePlan plan(*device, bundle, buffers);
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  CUdeviceptr workspace = state.allocations[0].first;
  std::vector<uint64_t> partial = baseArguments(false, workspace);
  partial.push_back(0x7004);
  EXPECT_EQ(state.launches[0].arguments, partial);
  EXPECT_EQ(state.launches[1].arguments, baseArguments(true, workspace));
}

TEST_F(FakeRuntime, PlanRejectsARankForACacheNotSharded) {
  buffers.kvShardRank = 0x7000;
  EXPECT_EQ(planError(*device, bundle, buffers),
            "DecodePlan: the kernels were compiled without a sharded cache: "
            "kvShardRank must be 0");
  EXPECT_TRUE(state.launches.empty());
}

TEST_F(FakeRuntime, PlanTakesTopKListsOfTheirLength) {
  // Top-k lists of 4 slots (pages of one position): the block table's rows
  // are the lists, so the length the kernels read rows by is K.
  std::string manifest = kManifest;
  replaceFirst(manifest, "\"with_lse\": true",
               "\"with_lse\": true, \"page_size\": 1, \"top_k\": 4");
  bundle.manifest = Manifest::parse(manifest);
  EXPECT_EQ(bundle.manifest.topK, 4);
  buffers.blockTable = 0x7000;
  buffers.numPages = 100;
  EXPECT_EQ(planError(*device, bundle, buffers),
            "DecodePlan: top-k lists (config.top_k 4): maxLength must be the "
            "lists' length, 4, got 4096");
}

//===- RuntimeQueryLensTest.cpp - Query lengths in fdrt, without a GPU ----===//
//
// The manifest's `with_query_lens` and DecodePlan's rules for
// DecodeBuffers::queryLens against the fake driver (FakeDriver.h): required
// exactly when the kernels read per-sequence query lengths, 4-byte aligned,
// bound to the "query_lens" parameter of both kernels (their last), rebound
// with the buffers; beside attention sinks and ALiBi slopes.
//
//===----------------------------------------------------------------------===//

#include "FakeDriver.h"

#include "fd/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace fd::rt;
using namespace fd::test;

namespace {

/// kManifest as fd-compile --with-query-lens writes it: the config says so
/// and both kernels take "query_lens" last; with `sinksAndAlibi` the merge
/// takes "sinks" and the partial kernel "alibi_slopes" before it.
std::string queryLensManifest(bool sinksAndAlibi = false) {
  std::string manifest = kManifest;
  if (sinksAndAlibi) {
    manifest =
        withBufferParameter(manifest, "with_sinks", "sinks", {"fd_merge"});
    manifest = withBufferParameter(manifest, "with_alibi", "alibi_slopes",
                                   {"fd_partial_attention"});
  }
  return withBufferParameter(manifest, "with_query_lens", "query_lens",
                             {"fd_partial_attention", "fd_merge"});
}

const char *const kRequired = "DecodePlan: the kernels read per-sequence "
                              "query lengths: queryLens buffer (int32 "
                              "[batch]) required";

class FakeRuntimeQueryLens : public FakeRuntime {
protected:
  void SetUp() override {
    FakeRuntime::SetUp();
    bundle.manifest = Manifest::parse(queryLensManifest());
    state.partialParamCount = 8;
    state.mergeParamCount = 5;
  }
};

TEST(ManifestQueryLens, ParsesWithQueryLens) {
  Manifest manifest = Manifest::parse(queryLensManifest());
  EXPECT_TRUE(manifest.withQueryLens);
  EXPECT_FALSE(manifest.withSinks);
  EXPECT_FALSE(manifest.withAlibi);
  // Absent: none (manifests older than query lengths).
  EXPECT_FALSE(Manifest::parse(kManifest).withQueryLens);
  std::string wrong = queryLensManifest();
  replaceFirst(wrong, "\"with_query_lens\": true", "\"with_query_lens\": 1");
  try {
    Manifest::parse(wrong);
    FAIL() << "no error";
  } catch (const std::invalid_argument &error) {
    EXPECT_EQ(std::string(error.what()),
              "manifest: 'config.with_query_lens' must be a boolean");
  }
}

TEST_F(FakeRuntimeQueryLens, PlanRequiresTheQueryLens) {
  EXPECT_EQ(planError(*device, bundle, buffers), kRequired);
  EXPECT_TRUE(state.launches.empty());
}

TEST_F(FakeRuntimeQueryLens, PlanRejectsAMisalignedQueryLensPointer) {
  for (CUdeviceptr address : {0x7001, 0x7002, 0x7003}) {
    DecodeBuffers misaligned = buffers;
    misaligned.queryLens = address;
    EXPECT_EQ(planError(*device, bundle, misaligned),
              "DecodePlan: queryLens address is not 4-byte aligned: the "
              "kernels read it as int32");
  }
  EXPECT_TRUE(state.launches.empty());
}

TEST_F(FakeRuntimeQueryLens, PlanBindsTheQueryLensToBothKernels) {
  // 4-byte alignment is enough: each block reads one int32.
  buffers.queryLens = 0x7004;
  DecodePlan plan(*device, bundle, buffers);
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  CUdeviceptr workspace = state.allocations[0].first;
  EXPECT_EQ(state.launches[0].kernel, "fd_partial_attention");
  EXPECT_EQ(state.launches[0].arguments,
            (std::vector<uint64_t>{0x1000, 0x2000, 0x3000, 0x4000, workspace,
                                   workspace + 3 * 8192, 4096, 0x7004}));
  EXPECT_EQ(state.launches[1].kernel, "fd_merge");
  EXPECT_EQ(state.launches[1].arguments,
            (std::vector<uint64_t>{workspace, workspace + 3 * 8192, 0x5000,
                                   0x6000, 0x7004}));

  // Rebinding moves them in both; the graph captured before is stale, a
  // new launch passes the new address.
  Graph graph = Graph::capture(*device, {&plan}, stream);
  DecodeBuffers moved = buffers;
  moved.queryLens = 0x8000;
  plan.setBuffers(moved);
  EXPECT_TRUE(graph.isStale());
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 6u);
  EXPECT_EQ(state.launches[4].arguments.back(), 0x8000u);
  EXPECT_EQ(state.launches[5].arguments.back(), 0x8000u);
  // Dropping them is refused.
  moved.queryLens = 0;
  try {
    plan.setBuffers(moved);
    FAIL() << "no error";
  } catch (const std::invalid_argument &error) {
    EXPECT_EQ(std::string(error.what()), kRequired);
  }
}

TEST_F(FakeRuntimeQueryLens, BindBesideSinksAndSlopes) {
  // Each buffer goes to its parameters, the query lengths last in both
  // kernels, and each is required on its own.
  bundle.manifest = Manifest::parse(queryLensManifest(/*sinksAndAlibi=*/true));
  state.partialParamCount = 9;
  state.mergeParamCount = 6;
  buffers.sinks = 0x7100;
  buffers.alibiSlopes = 0x7200;
  EXPECT_EQ(planError(*device, bundle, buffers), kRequired);
  buffers.queryLens = 0x7300;
  DecodeBuffers noSinks = buffers;
  noSinks.sinks = 0;
  EXPECT_EQ(planError(*device, bundle, noSinks),
            "DecodePlan: the kernels read attention sinks: sinks buffer "
            "(float [num_q_heads]) required");
  DecodePlan plan(*device, bundle, buffers);
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  const std::vector<uint64_t> &partial = state.launches[0].arguments;
  ASSERT_EQ(partial.size(), 9u);
  EXPECT_EQ(partial[7], 0x7200u);
  EXPECT_EQ(partial[8], 0x7300u);
  const std::vector<uint64_t> &merge = state.launches[1].arguments;
  ASSERT_EQ(merge.size(), 6u);
  EXPECT_EQ(merge[4], 0x7100u);
  EXPECT_EQ(merge[5], 0x7300u);
}

TEST_F(FakeRuntimeQueryLens, ParameterOrderFollowsTheManifest) {
  // The binding is by name: a merge that takes the query lengths first
  // gets them there.
  std::string manifest = queryLensManifest();
  const std::string queryLens = "{\"name\": \"query_lens\", \"type\": \"ptr\"}";
  const std::string lse = "{\"name\": \"lse\", \"type\": \"ptr\"}";
  replaceFirst(manifest, lse + ", " + queryLens, lse);
  replaceFirst(manifest, "\"params\": [{\"name\": \"partial_output\"",
               "\"params\": [" + queryLens + ", {\"name\": \"partial_output\"");
  bundle.manifest = Manifest::parse(manifest);
  buffers.queryLens = 0x7010;
  DecodePlan plan(*device, bundle, buffers);
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  EXPECT_EQ(state.launches[0].arguments.back(), 0x7010u);
  const std::vector<uint64_t> &merge = state.launches[1].arguments;
  ASSERT_EQ(merge.size(), 5u);
  EXPECT_EQ(merge[0], 0x7010u);
  EXPECT_EQ(merge[4], 0x6000u);
}

TEST_F(FakeRuntime, PlanRejectsQueryLensForKernelsWithoutThem) {
  DecodeBuffers queryLens = buffers;
  queryLens.queryLens = 0x7000;
  EXPECT_EQ(planError(*device, bundle, queryLens),
            "DecodePlan: the kernels were compiled without per-sequence "
            "query lengths: queryLens must be 0");
  EXPECT_TRUE(state.launches.empty());
}

} // namespace

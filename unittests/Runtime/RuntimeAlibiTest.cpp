//===- RuntimeAlibiTest.cpp - ALiBi in fdrt, without a GPU ----------------===//
//
// The manifest's `with_alibi` and DecodePlan's rules for
// DecodeBuffers::alibiSlopes against the fake driver (FakeDriver.h):
// required exactly when the kernels apply ALiBi, 4-byte aligned, bound to
// the partial kernel's "alibi_slopes" parameter (its last; no other kernel
// takes it), rebound with the buffers; beside attention sinks.
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

/// kManifest as fd-compile --with-alibi writes it: the config says so and
/// the partial kernel takes "alibi_slopes" last, after max_len; with
/// `sinks`, the merge takes "sinks" too.
std::string alibiManifest(bool sinks = false) {
  std::string manifest = withBufferParameter(
      kManifest, "with_alibi", "alibi_slopes", {"fd_partial_attention"});
  return sinks ? withBufferParameter(manifest, "with_sinks", "sinks",
                                     {"fd_merge"})
               : manifest;
}

class FakeRuntimeAlibi : public FakeRuntime {
protected:
  void SetUp() override {
    FakeRuntime::SetUp();
    bundle.manifest = Manifest::parse(alibiManifest());
    state.partialParamCount = 8;
  }
};

TEST(ManifestAlibi, ParsesWithAlibi) {
  Manifest manifest = Manifest::parse(alibiManifest());
  EXPECT_TRUE(manifest.withAlibi);
  EXPECT_FALSE(manifest.withSinks);
  EXPECT_TRUE(Manifest::parse(alibiManifest(/*sinks=*/true)).withSinks);
  // Absent: no ALiBi (manifests older than ALiBi).
  EXPECT_FALSE(Manifest::parse(kManifest).withAlibi);
  std::string wrong = alibiManifest();
  replaceFirst(wrong, "\"with_alibi\": true", "\"with_alibi\": \"yes\"");
  try {
    Manifest::parse(wrong);
    FAIL() << "no error";
  } catch (const std::invalid_argument &error) {
    EXPECT_EQ(std::string(error.what()),
              "manifest: 'config.with_alibi' must be a boolean");
  }
}

TEST_F(FakeRuntimeAlibi, PlanRequiresTheSlopes) {
  EXPECT_EQ(planError(*device, bundle, buffers),
            "DecodePlan: the kernels apply ALiBi: alibiSlopes buffer (float "
            "[num_q_heads]) required");
  EXPECT_TRUE(state.launches.empty());
}

TEST_F(FakeRuntimeAlibi, PlanRejectsAMisalignedSlopesPointer) {
  for (CUdeviceptr address : {0x7001, 0x7002, 0x7003}) {
    DecodeBuffers misaligned = buffers;
    misaligned.alibiSlopes = address;
    EXPECT_EQ(planError(*device, bundle, misaligned),
              "DecodePlan: alibiSlopes address is not 4-byte aligned: the "
              "partial kernel reads it as float");
  }
  EXPECT_TRUE(state.launches.empty());
}

TEST_F(FakeRuntimeAlibi, PlanBindsTheSlopesToThePartialKernelOnly) {
  // 4-byte alignment is enough: the partial kernel reads one float per
  // head.
  buffers.alibiSlopes = 0x7004;
  DecodePlan plan(*device, bundle, buffers);
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  CUdeviceptr workspace = state.allocations[0].first;
  EXPECT_EQ(state.launches[0].kernel, "fd_partial_attention");
  EXPECT_EQ(state.launches[0].arguments,
            (std::vector<uint64_t>{0x1000, 0x2000, 0x3000, 0x4000, workspace,
                                   workspace + 3 * 8192, 4096, 0x7004}));
  EXPECT_EQ(state.launches[1].kernel, "fd_merge");
  EXPECT_EQ(
      state.launches[1].arguments,
      (std::vector<uint64_t>{workspace, workspace + 3 * 8192, 0x5000, 0x6000}));

  // Rebinding moves them; the graph captured before is stale, a new launch
  // passes the new address.
  Graph graph = Graph::capture(*device, {&plan}, stream);
  DecodeBuffers moved = buffers;
  moved.alibiSlopes = 0x8000;
  plan.setBuffers(moved);
  EXPECT_TRUE(graph.isStale());
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 6u);
  EXPECT_EQ(state.launches[4].kernel, "fd_partial_attention");
  EXPECT_EQ(state.launches[4].arguments.back(), 0x8000u);
  // Dropping them is refused.
  moved.alibiSlopes = 0;
  EXPECT_THROW(plan.setBuffers(moved), std::invalid_argument);
}

TEST_F(FakeRuntimeAlibi, SlopesAndSinksBindApart) {
  // Both: the slopes go to the partial kernel, the sinks to the merge; each
  // is required on its own.
  bundle.manifest = Manifest::parse(alibiManifest(/*sinks=*/true));
  state.mergeParamCount = 5;
  buffers.alibiSlopes = 0x7004;
  EXPECT_EQ(planError(*device, bundle, buffers),
            "DecodePlan: the kernels read attention sinks: sinks buffer "
            "(float [num_q_heads]) required");
  buffers.sinks = 0x7100;
  DecodeBuffers noSlopes = buffers;
  noSlopes.alibiSlopes = 0;
  EXPECT_EQ(planError(*device, bundle, noSlopes),
            "DecodePlan: the kernels apply ALiBi: alibiSlopes buffer (float "
            "[num_q_heads]) required");
  DecodePlan plan(*device, bundle, buffers);
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  EXPECT_EQ(state.launches[0].arguments.size(), 8u);
  EXPECT_EQ(state.launches[0].arguments.back(), 0x7004u);
  EXPECT_EQ(state.launches[1].arguments.size(), 5u);
  EXPECT_EQ(state.launches[1].arguments.back(), 0x7100u);
}

TEST_F(FakeRuntimeAlibi, ParameterOrderFollowsTheManifest) {
  // The binding is by name: a partial kernel that takes the slopes first
  // gets them there.
  std::string manifest = alibiManifest();
  replaceFirst(manifest, ", {\"name\": \"alibi_slopes\", \"type\": \"ptr\"}",
               "");
  replaceFirst(manifest, "\"params\": [{\"name\": \"query\"",
               "\"params\": [{\"name\": \"alibi_slopes\", \"type\": \"ptr\"}, "
               "{\"name\": \"query\"");
  bundle.manifest = Manifest::parse(manifest);
  buffers.alibiSlopes = 0x7010;
  DecodePlan plan(*device, bundle, buffers);
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  const std::vector<uint64_t> &partial = state.launches[0].arguments;
  ASSERT_EQ(partial.size(), 8u);
  EXPECT_EQ(partial[0], 0x7010u);
  EXPECT_EQ(partial[1], 0x1000u);
  EXPECT_EQ(partial[7], 4096u);
}

TEST_F(FakeRuntime, PlanRejectsSlopesForKernelsWithoutThem) {
  DecodeBuffers slopes = buffers;
  slopes.alibiSlopes = 0x7000;
  EXPECT_EQ(planError(*device, bundle, slopes),
            "DecodePlan: the kernels were compiled without ALiBi: "
            "alibiSlopes must be 0");
  EXPECT_TRUE(state.launches.empty());
}

} // namespace

//===- RuntimeSinksTest.cpp - Attention sinks in fdrt, without a GPU ------===//
//
// The manifest's `with_sinks` and DecodePlan's rules for DecodeBuffers::sinks
// against the fake driver (FakeDriver.h): required exactly when the kernels
// read sinks, 4-byte aligned, bound to the merge's "sinks" parameter (and to
// no other kernel), rebound with the buffers.
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

/// kManifest as fd-compile --with-sinks writes it: the config says so and
/// the merge takes "sinks" after the lse.
std::string sinksManifest() {
  return withBufferParameter(kManifest, "with_sinks", "sinks", {"fd_merge"});
}

class FakeRuntimeSinks : public FakeRuntime {
protected:
  void SetUp() override {
    FakeRuntime::SetUp();
    bundle.manifest = Manifest::parse(sinksManifest());
    state.mergeParamCount = 5;
  }
};

TEST(ManifestSinks, ParsesWithSinks) {
  EXPECT_TRUE(Manifest::parse(sinksManifest()).withSinks);
  // Absent: no sinks (manifests older than sinks).
  EXPECT_FALSE(Manifest::parse(kManifest).withSinks);
  std::string wrong = sinksManifest();
  wrong.replace(wrong.find("\"with_sinks\": true"), 18, "\"with_sinks\": 1");
  try {
    Manifest::parse(wrong);
    FAIL() << "no error";
  } catch (const std::invalid_argument &error) {
    EXPECT_EQ(std::string(error.what()),
              "manifest: 'config.with_sinks' must be a boolean");
  }
}

TEST_F(FakeRuntimeSinks, PlanRequiresTheSinks) {
  std::string message = planError(*device, bundle, buffers);
  EXPECT_EQ(message, "DecodePlan: the kernels read attention sinks: sinks "
                     "buffer (float [num_q_heads]) required");
  EXPECT_NE(message.find("sinks"), std::string::npos) << message;
  EXPECT_TRUE(state.launches.empty());
}

TEST_F(FakeRuntimeSinks, PlanRejectsAMisalignedSinksPointer) {
  for (CUdeviceptr address : {0x7001, 0x7002, 0x7003}) {
    DecodeBuffers misaligned = buffers;
    misaligned.sinks = address;
    std::string message = planError(*device, bundle, misaligned);
    EXPECT_NE(message.find("sinks"), std::string::npos) << message;
    EXPECT_NE(message.find("4-byte aligned"), std::string::npos) << message;
  }
  EXPECT_TRUE(state.launches.empty());
}

TEST_F(FakeRuntimeSinks, PlanBindsTheSinksToTheMergeOnly) {
  // 4-byte alignment is enough: the merge reads one float per head.
  buffers.sinks = 0x7004;
  DecodePlan plan(*device, bundle, buffers);
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  CUdeviceptr workspace = state.allocations[0].first;
  EXPECT_EQ(state.launches[0].kernel, "fd_partial_attention");
  EXPECT_EQ(state.launches[0].arguments,
            (std::vector<uint64_t>{0x1000, 0x2000, 0x3000, 0x4000, workspace,
                                   workspace + 3 * 8192, 4096}));
  EXPECT_EQ(state.launches[1].kernel, "fd_merge");
  EXPECT_EQ(state.launches[1].arguments,
            (std::vector<uint64_t>{workspace, workspace + 3 * 8192, 0x5000,
                                   0x6000, 0x7004}));

  // Rebinding moves them; the graph captured before is stale, a new one
  // holds the new address.
  Graph graph = Graph::capture(*device, {&plan}, stream);
  DecodeBuffers moved = buffers;
  moved.sinks = 0x8000;
  plan.setBuffers(moved);
  EXPECT_TRUE(graph.isStale());
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 6u);
  EXPECT_EQ(state.launches[5].arguments.back(), 0x8000u);
  // Dropping them is refused.
  moved.sinks = 0;
  EXPECT_THROW(plan.setBuffers(moved), std::invalid_argument);
}

TEST_F(FakeRuntimeSinks, ParameterOrderFollowsTheManifest) {
  // The binding is by name: a merge that takes the sinks before the lse
  // gets them there.
  std::string manifest = sinksManifest();
  std::string lse = "{\"name\": \"lse\", \"type\": \"ptr\"}, ";
  std::string sinks = "{\"name\": \"sinks\", \"type\": \"ptr\"}";
  size_t at = manifest.find(lse + sinks);
  ASSERT_NE(at, std::string::npos);
  manifest.replace(at, lse.size() + sinks.size(),
                   sinks + ", {\"name\": \"lse\", \"type\": \"ptr\"}");
  bundle.manifest = Manifest::parse(manifest);
  buffers.sinks = 0x7010;
  DecodePlan plan(*device, bundle, buffers);
  plan.launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  const std::vector<uint64_t> &merge = state.launches[1].arguments;
  ASSERT_EQ(merge.size(), 5u);
  EXPECT_EQ(merge[3], 0x7010u);
  EXPECT_EQ(merge[4], 0x6000u);
}

TEST_F(FakeRuntime, PlanRejectsSinksForKernelsWithoutThem) {
  DecodeBuffers sinks = buffers;
  sinks.sinks = 0x7000;
  std::string message = planError(*device, bundle, sinks);
  EXPECT_EQ(message, "DecodePlan: the kernels were compiled without "
                     "attention sinks: sinks must be 0");
  EXPECT_TRUE(state.launches.empty());
}

} // namespace

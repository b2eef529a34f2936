//===- RuntimeProgrammaticLaunchTest.cpp - Overlapped launches, no GPU ----===//
//
// Kernels that wait for the grid before them (griddepcontrol.wait, first
// thing) carry `programmatic_launch` in the manifest; fdrt launches every
// kernel with cuLaunchKernelEx, those with programmatic stream
// serialization so that their launch overlaps the kernel before them. The
// manifest's field and DecodePlan's launches against the fake driver
// (FakeDriver.h).
//
//===----------------------------------------------------------------------===//

#include "FakeDriver.h"

#include "fd/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

using namespace flashdecode::rt;
using namespace flashdecode::test;

namespace {

TEST(ProgrammaticLaunchManifest, ReadsWhichKernelsOverlap) {
  EXPECT_FALSE(Manifest::parse(kManifest).kernels[1].programmaticLaunch);
  std::string json = kManifest;
  replaceFirst(json, "\"ptx\": \"fd_merge.ptx\",",
               "\"ptx\": \"fd_merge.ptx\", \"programmatic_launch\": true,");
  Manifest manifest = Manifest::parse(json);
  EXPECT_FALSE(manifest.kernels[0].programmaticLaunch);
  EXPECT_TRUE(manifest.kernels[1].programmaticLaunch);
  replaceFirst(json, "\"programmatic_launch\": true",
               "\"programmatic_launch\": 1");
  try {
    Manifest::parse(json);
    FAIL() << "no error";
  } catch (const std::invalid_argument &error) {
    EXPECT_EQ(std::string(error.what()),
              "manifest: 'kernels[fd_merge].programmatic_launch' must be a "
              "boolean");
  }
}

TEST_F(FakeRuntime, ProgrammaticKernelsLaunchWithTheAttribute) {
  DecodePlan(*device, bundle, buffers).launch(stream);
  ASSERT_EQ(state.launches.size(), 2u);
  EXPECT_FALSE(state.launches[0].programmatic);
  EXPECT_FALSE(state.launches[1].programmatic);
  bundle.manifest.kernels[1].programmaticLaunch = true;
  DecodePlan(*device, bundle, buffers).launch(stream);
  ASSERT_EQ(state.launches.size(), 4u);
  EXPECT_FALSE(state.launches[2].programmatic);
  EXPECT_TRUE(state.launches[3].programmatic);
  // The rest of the launch as cuLaunchKernel had it.
  EXPECT_EQ(state.launches[3].kernel, "fd_merge");
  EXPECT_EQ(state.launches[3].grid[0], 8u);
  EXPECT_EQ(state.launches[3].grid[2], 3u);
  EXPECT_EQ(state.launches[3].block[0], 64u);
  ASSERT_EQ(state.launches[3].arguments.size(), 4u);
  EXPECT_EQ(state.launches[3].arguments[2], 0x5000u); // output
  EXPECT_EQ(state.launches[3].arguments[3], 0x6000u); // lse
  // FD_PROGRAMMATIC_LAUNCH=0 when a plan is made launches it in order.
  setenv("FD_PROGRAMMATIC_LAUNCH", "0", 1);
  DecodePlan ordered(*device, bundle, buffers);
  setenv("FD_PROGRAMMATIC_LAUNCH", "1", 1);
  DecodePlan overlapped(*device, bundle, buffers);
  unsetenv("FD_PROGRAMMATIC_LAUNCH");
  EXPECT_FALSE(ordered.isProgrammatic(1));
  EXPECT_TRUE(overlapped.isProgrammatic(1));
  EXPECT_FALSE(overlapped.isProgrammatic(0));
  EXPECT_FALSE(overlapped.isProgrammatic(2)); // no third kernel
  ordered.launch(stream);
  overlapped.launch(stream);
  ASSERT_EQ(state.launches.size(), 8u);
  EXPECT_FALSE(state.launches[5].programmatic);
  EXPECT_TRUE(state.launches[7].programmatic);
}

TEST_F(FakeRuntime, DynamicSharedMemoryPast48KBIsAllowedPerFunction) {
  // As for the warpgroup tile: a kernel with more than the 48 KB a launch
  // may give by default has its limit raised once, when the plan is made;
  // its launches pass the bytes. A kernel within 48 KB is left alone.
  bundle.manifest.kernels[0].dynamicSharedMemoryBytes = 226304;
  bundle.manifest.kernels[1].dynamicSharedMemoryBytes = 48 * 1024;
  DecodePlan plan(*device, bundle, buffers);
  ASSERT_EQ(state.functionAttributes.size(), 1u);
  EXPECT_EQ(state.functionAttributes[0].kernel, "fd_partial_attention");
  EXPECT_EQ(state.functionAttributes[0].attribute,
            kFuncAttributeMaxDynamicSharedSizeBytes);
  EXPECT_EQ(state.functionAttributes[0].value, 226304);
  plan.launch(stream);
  plan.launch(stream);
  EXPECT_EQ(count("cuFuncSetAttribute"), 1u);
  ASSERT_EQ(state.launches.size(), 4u);
  EXPECT_EQ(state.launches[0].sharedBytes, 226304u);
  EXPECT_EQ(state.launches[1].sharedBytes, 48u * 1024);
}

} // namespace

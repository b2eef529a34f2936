//===- LimitsTest.cpp - The shapes the kernels are built for --------------===//

#include "fd/Planning/Limits.h"

#include <gtest/gtest.h>

using namespace flashdecode;

namespace {

TEST(Limits, KeyDimsReach576AndValueDims512) {
  for (int64_t headDim : {32, 40, 96, 200, 256, 264, 512, 576})
    EXPECT_TRUE(isSupportedKeyHeadDim(headDim)) << headDim;
  for (int64_t headDim : {0, 8, 24, 36, 100, 255, 580, 584, 640, -32})
    EXPECT_FALSE(isSupportedKeyHeadDim(headDim)) << headDim;
  for (int64_t headDim : {32, 264, 512})
    EXPECT_TRUE(isSupportedValueHeadDim(headDim)) << headDim;
  for (int64_t headDim : {24, 516, 520, 576})
    EXPECT_FALSE(isSupportedValueHeadDim(headDim)) << headDim;
  EXPECT_EQ(describeSupportedKeyHeadDims(), "multiple of 8 in [32, 576]");
  EXPECT_EQ(describeSupportedValueHeadDims(), "multiple of 8 in [32, 512]");
}

TEST(Limits, HeadDimsApartOrSharedNameTheField) {
  EXPECT_EQ(getReasonHeadDimsUnsupported(576, 512, true), "");
  EXPECT_EQ(getReasonHeadDimsUnsupported(512, 0, false), "");
  EXPECT_EQ(getReasonHeadDimsUnsupported(64, 264, false), "");
  EXPECT_EQ(getReasonHeadDimsUnsupported(100, 0, false),
            "head_dim 100 is not supported: expected a multiple of 8 in "
            "[32, 576]");
  EXPECT_EQ(getReasonHeadDimsUnsupported(128, 520, false),
            "v_head_dim 520 is not supported: expected 0 (the head dim) or a "
            "multiple of 8 in [32, 512]");
  EXPECT_EQ(getReasonHeadDimsUnsupported(576, 0, true),
            "head_dim 576 is the value head dim too, which is at most 512: "
            "give v_head_dim, a multiple of 8 in [32, 512]");
  EXPECT_EQ(getReasonHeadDimsUnsupported(128, 256, true),
            "shared_kv reads the values from the key cache's first v_head_dim "
            "columns: v_head_dim (256) must be at most head_dim (128)");
}

TEST(Limits, PageSizesArePowersOfTwoUpTo256) {
  for (int64_t pageSize : {1, 2, 16, 64, 256})
    EXPECT_TRUE(isSupportedPageSize(pageSize)) << pageSize;
  for (int64_t pageSize : {0, 3, 24, 255, 512, -16})
    EXPECT_FALSE(isSupportedPageSize(pageSize)) << pageSize;
  EXPECT_EQ(describeSupportedPageSizes(), "power of two from 1 to 256");
  EXPECT_EQ(kMaxDecodeQueryLength, 8);
}

} // namespace

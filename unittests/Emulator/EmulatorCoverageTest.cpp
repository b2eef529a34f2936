//===- EmulatorCoverageTest.cpp - fdemu runs every PTX the compiler emits -===//
//
// The configuration matrix of PTXAssemblyTest (head dims, dtypes, layouts,
// paged caches, MHA/GQA/MQA, sm_80/sm_90) plus multi-token queries and fp8
// caches (both decoders), each
// compiled and checked to parse and to use only instruction forms fdemu
// implements: what it loads, it executes exactly, so a new instruction in
// the generated code fails here rather than in a GPU test run on fdemu.
//
//===----------------------------------------------------------------------===//

#include "fd/Compiler/Compile.h"
#include "fd/Emulator/Executor.h"
#include "fd/Emulator/Program.h"

#include <gtest/gtest.h>

#include <tuple>

using namespace flashdecode;

namespace {

// head dim, Hq / Hkv, dtype, layout, arch, page size (0: dense), Lq, the
// cache's type (fp8 with per-token scales for E5M2, per tensor for E4M3).
using Param = std::tuple<int64_t, int64_t, ElementType, CacheLayout,
                         std::string, int64_t, int64_t, KVCacheType>;

class EmulatorCoverage : public testing::TestWithParam<Param> {};

TEST_P(EmulatorCoverage, EveryInstructionIsImplemented) {
  auto [headDim, groupSize, type, layout, arch, pageSize, queryLength,
        cacheType] = GetParam();
  KernelConfig config;
  config.headDim = headDim;
  config.numQueryHeads = 32;
  config.numKVHeads = 32 / groupSize;
  config.elementType = type;
  config.cacheLayout = layout;
  config.arch = arch;
  config.pageSize = pageSize;
  config.queryLength = queryLength;
  config.numSplits = 4;
  config.withLse = true;
  config.kvCacheType = cacheType;
  if (cacheType == KVCacheType::E5M2)
    config.kvScaleGranularity = KVScaleGranularity::TokenHead;
  llvm::Expected<CompiledKernels> kernels = compileUncached(config);
  ASSERT_TRUE(static_cast<bool>(kernels))
      << llvm::toString(kernels.takeError());
  for (const auto &[name, ptx] : kernels->ptx) {
    emu::Module module;
    try {
      module = emu::parseModule(ptx);
    } catch (const emu::ParseError &error) {
      FAIL() << name << ": " << error.message;
    }
    EXPECT_EQ(module.target, arch) << name;
    ASSERT_EQ(module.kernels.count(name), 1u)
        << name << " is not a kernel of its PTX";
    for (const auto &[kernelName, kernel] : module.kernels)
      EXPECT_EQ(emu::checkImplemented(*kernel), "") << kernelName;
  }
}

std::string paramName(const testing::TestParamInfo<Param> &info) {
  auto [headDim, groupSize, type, layout, arch, pageSize, queryLength,
        cacheType] = info.param;
  return "D" + std::to_string(headDim) + "_G" + std::to_string(groupSize) +
         "_" + getElementTypeName(type) + "_" + getCacheLayoutName(layout) +
         "_" + arch + (pageSize ? "_page" + std::to_string(pageSize) : "") +
         (queryLength > 1 ? "_Lq" + std::to_string(queryLength) : "") +
         (cacheType == KVCacheType::E4M3   ? "_e4m3"
          : cacheType == KVCacheType::E5M2 ? "_e5m2"
                                           : "");
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, EmulatorCoverage,
    testing::Combine(testing::Values(64, 128, 256),
                     // MHA, GQA 4 and 8, MQA (Hq = 32, Hkv = 1).
                     testing::Values(1, 4, 8, 32),
                     testing::Values(ElementType::F16, ElementType::BF16),
                     testing::Values(CacheLayout::NHD, CacheLayout::HND),
                     testing::Values("sm_80", "sm_90"), testing::Values(0),
                     testing::Values(1),
                     testing::Values(KVCacheType::SameAsQuery)),
    paramName);

INSTANTIATE_TEST_SUITE_P(
    Paged, EmulatorCoverage,
    testing::Combine(testing::Values(64, 128), testing::Values(4, 32),
                     testing::Values(ElementType::F16),
                     testing::Values(CacheLayout::NHD, CacheLayout::HND),
                     testing::Values("sm_90"), testing::Values(1, 16, 256),
                     testing::Values(1),
                     testing::Values(KVCacheType::SameAsQuery)),
    paramName);

std::vector<int64_t> everyHeadDim() {
  std::vector<int64_t> headDims;
  for (int64_t headDim = 32; headDim <= 256; headDim += 8)
    headDims.push_back(headDim);
  return headDims;
}

INSTANTIATE_TEST_SUITE_P(
    HeadDims, EmulatorCoverage,
    testing::Combine(testing::ValuesIn(everyHeadDim()), testing::Values(4),
                     testing::Values(ElementType::F16, ElementType::F32),
                     testing::Values(CacheLayout::NHD),
                     testing::Values("sm_90"), testing::Values(0),
                     testing::Values(1),
                     testing::Values(KVCacheType::SameAsQuery)),
    paramName);

// Several query tokens per sequence (causal within the new tokens), dense
// and paged.
INSTANTIATE_TEST_SUITE_P(
    QueryLengths, EmulatorCoverage,
    testing::Combine(testing::Values(128), testing::Values(1, 8),
                     testing::Values(ElementType::F16, ElementType::BF16),
                     testing::Values(CacheLayout::NHD, CacheLayout::HND),
                     testing::Values("sm_90"), testing::Values(0, 16),
                     testing::Values(2, 8),
                     testing::Values(KVCacheType::SameAsQuery)),
    paramName);

// FP8 caches: 8-byte vectors (D = 40) and 16-byte ones, both kernel forms,
// every query dtype, the bit-operation decoder (sm_80, sm_89) and cvt
// (sm_90).
INSTANTIATE_TEST_SUITE_P(
    Float8, EmulatorCoverage,
    testing::Combine(testing::Values(40, 128), testing::Values(1, 8),
                     testing::Values(ElementType::F16, ElementType::BF16,
                                     ElementType::F32),
                     testing::Values(CacheLayout::NHD),
                     testing::Values("sm_80", "sm_89", "sm_90"),
                     testing::Values(0), testing::Values(1),
                     testing::Values(KVCacheType::E4M3, KVCacheType::E5M2)),
    paramName);

} // namespace

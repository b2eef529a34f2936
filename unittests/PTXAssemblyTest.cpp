//===- PTXAssemblyTest.cpp - ptxas accepts every PTX we emit --------------===//
//
// Compiles a matrix of configurations and assembles each kernel with
// `ptxas -v`: it must assemble with no spills. Prints registers and shared
// memory per kernel. Skips with a reason when ptxas is not installed.
//
//===----------------------------------------------------------------------===//

#include "fd/Compiler/Compile.h"
#include "fd/Compiler/Ptxas.h"

#include <gtest/gtest.h>

#include <tuple>

using namespace fd;

namespace {

// head dim, Hq / Hkv, dtype, layout, arch, page size (0: dense).
using Param = std::tuple<int64_t, int64_t, ElementType, CacheLayout,
                         std::string, int64_t>;

class PTXAssembly : public testing::TestWithParam<Param> {};

TEST_P(PTXAssembly, AssemblesWithoutSpills) {
  std::optional<std::string> ptxas = findPtxas();
  if (!ptxas)
    GTEST_SKIP() << "ptxas not found (/usr/local/cuda/bin/ptxas or PATH)";
  auto [headDim, groupSize, type, layout, arch, pageSize] = GetParam();
  KernelConfig config;
  config.headDim = headDim;
  config.numQueryHeads = 32;
  config.numKVHeads = 32 / groupSize;
  config.elementType = type;
  config.cacheLayout = layout;
  config.arch = arch;
  config.pageSize = pageSize;
  config.numSplits = 4;
  config.withLse = true;
  llvm::Expected<CompiledKernels> kernels = compileUncached(config);
  ASSERT_TRUE(static_cast<bool>(kernels))
      << llvm::toString(kernels.takeError());
  for (const auto &[name, ptx] : kernels->ptx) {
    auto report = assembleWithPtxas(*ptxas, ptx, arch);
    ASSERT_TRUE(static_cast<bool>(report))
        << name << ": " << llvm::toString(report.takeError());
    EXPECT_EQ(report->spillStoreBytes, 0) << name << ":\n" << report->log;
    EXPECT_EQ(report->spillLoadBytes, 0) << name << ":\n" << report->log;
    std::printf("%s %s: %lld registers, %lld bytes shared memory\n",
                testing::UnitTest::GetInstance()->current_test_info()->name(),
                name.c_str(), static_cast<long long>(report->registers),
                static_cast<long long>(report->sharedMemoryBytes));
  }
}

std::string paramName(const testing::TestParamInfo<Param> &info) {
  auto [headDim, groupSize, type, layout, arch, pageSize] = info.param;
  return "D" + std::to_string(headDim) + "_G" + std::to_string(groupSize) +
         "_" + getElementTypeName(type) + "_" + getCacheLayoutName(layout) +
         "_" + arch + (pageSize ? "_page" + std::to_string(pageSize) : "");
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, PTXAssembly,
    testing::Combine(testing::Values(64, 128, 256),
                     // MHA, GQA 4 and 8, MQA (Hq = 32, Hkv = 1).
                     testing::Values(1, 4, 8, 32),
                     testing::Values(ElementType::F16, ElementType::BF16),
                     testing::Values(CacheLayout::NHD, CacheLayout::HND),
                     testing::Values("sm_80", "sm_90"), testing::Values(0)),
    paramName);

// Paged caches: every page size kind, both layouts, GQA and MQA.
INSTANTIATE_TEST_SUITE_P(
    Paged, PTXAssembly,
    testing::Combine(testing::Values(64, 128), testing::Values(4, 32),
                     testing::Values(ElementType::F16),
                     testing::Values(CacheLayout::NHD, CacheLayout::HND),
                     testing::Values("sm_90"),
                     testing::Values(1, 16, 256)),
    paramName);

std::vector<int64_t> everyHeadDim() {
  std::vector<int64_t> headDims;
  for (int64_t headDim = 32; headDim <= 256; headDim += 8)
    headDims.push_back(headDim);
  return headDims;
}

// Every supported head dim, including those whose row is not a power-of-two
// number of 16-byte vectors (idle lanes).
INSTANTIATE_TEST_SUITE_P(
    HeadDims, PTXAssembly,
    testing::Combine(testing::ValuesIn(everyHeadDim()), testing::Values(4),
                     testing::Values(ElementType::F16, ElementType::F32),
                     testing::Values(CacheLayout::NHD),
                     testing::Values("sm_90"), testing::Values(0)),
    paramName);

} // namespace

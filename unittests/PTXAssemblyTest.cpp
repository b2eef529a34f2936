//===- PTXAssemblyTest.cpp - ptxas accepts every PTX we emit --------------===//
//
// Compiles a matrix of configurations and assembles each kernel with
// `ptxas -v`: it must assemble with no spills. Prints registers and shared
// memory per kernel. Skips with a reason when ptxas is not installed.
//
//===----------------------------------------------------------------------===//

#include "fd/Compiler/Compile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <tuple>

using namespace fd;

namespace {

std::optional<std::string> findPtxas() {
  if (llvm::sys::fs::can_execute("/usr/local/cuda/bin/ptxas"))
    return std::string("/usr/local/cuda/bin/ptxas");
  if (llvm::ErrorOr<std::string> path = llvm::sys::findProgramByName("ptxas"))
    return *path;
  return std::nullopt;
}

struct Assembly {
  int exitCode = -1;
  std::string log;
};

Assembly assemble(const std::string &ptxas, const std::string &arch,
                  llvm::StringRef ptx) {
  llvm::SmallString<128> input, log;
  llvm::sys::fs::createTemporaryFile("fd-ptxas", "ptx", input);
  llvm::sys::fs::createTemporaryFile("fd-ptxas", "log", log);
  {
    std::error_code error;
    llvm::raw_fd_ostream stream(input, error);
    stream << ptx;
  }
  std::string archFlag = "-arch=" + arch;
  llvm::SmallVector<llvm::StringRef> arguments = {ptxas, "-v", archFlag,
                                                  input, "-o", "/dev/null"};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log.str(),
                                                log.str()};
  Assembly result;
  result.exitCode =
      llvm::sys::ExecuteAndWait(ptxas, arguments, std::nullopt, redirects);
  if (auto buffer = llvm::MemoryBuffer::getFile(log))
    result.log = (*buffer)->getBuffer().str();
  llvm::sys::fs::remove(input);
  llvm::sys::fs::remove(log);
  return result;
}

// head dim, Hq / Hkv, dtype, layout, arch.
using Param =
    std::tuple<int64_t, int64_t, ElementType, CacheLayout, std::string>;

class PTXAssembly : public testing::TestWithParam<Param> {};

TEST_P(PTXAssembly, AssemblesWithoutSpills) {
  std::optional<std::string> ptxas = findPtxas();
  if (!ptxas)
    GTEST_SKIP() << "ptxas not found (/usr/local/cuda/bin/ptxas or PATH)";
  auto [headDim, groupSize, type, layout, arch] = GetParam();
  KernelConfig config;
  config.headDim = headDim;
  config.numQueryHeads = 32;
  config.numKVHeads = 32 / groupSize;
  config.elementType = type;
  config.cacheLayout = layout;
  config.arch = arch;
  config.numSplits = 4;
  config.withLse = true;
  llvm::Expected<CompiledKernels> kernels = compileUncached(config);
  ASSERT_TRUE(static_cast<bool>(kernels))
      << llvm::toString(kernels.takeError());
  for (const auto &[name, ptx] : kernels->ptx) {
    Assembly assembly = assemble(*ptxas, arch, ptx);
    ASSERT_EQ(assembly.exitCode, 0) << name << ":\n" << assembly.log;
    llvm::Regex spills("([0-9]+) bytes spill stores, ([0-9]+) bytes spill "
                       "loads");
    llvm::Regex usage("Used ([0-9]+) registers(, used [0-9]+ barriers)?"
                      "(, ([0-9]+) bytes smem)?");
    llvm::SmallVector<llvm::StringRef> spillMatch, usageMatch;
    ASSERT_TRUE(spills.match(assembly.log, &spillMatch)) << assembly.log;
    ASSERT_TRUE(usage.match(assembly.log, &usageMatch)) << assembly.log;
    EXPECT_EQ(spillMatch[1], "0") << name << " spills:\n" << assembly.log;
    EXPECT_EQ(spillMatch[2], "0") << name << " spills:\n" << assembly.log;
    llvm::StringRef sharedBytes =
        usageMatch[4].empty() ? llvm::StringRef("0") : usageMatch[4];
    std::printf("%s %s: %s registers, %s bytes shared memory\n",
                testing::UnitTest::GetInstance()->current_test_info()->name(),
                name.c_str(), usageMatch[1].str().c_str(),
                sharedBytes.str().c_str());
  }
}

std::string paramName(const testing::TestParamInfo<Param> &info) {
  auto [headDim, groupSize, type, layout, arch] = info.param;
  return "D" + std::to_string(headDim) + "_G" + std::to_string(groupSize) +
         "_" + getElementTypeName(type) + "_" + getCacheLayoutName(layout) +
         "_" + arch;
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, PTXAssembly,
    testing::Combine(testing::Values(64, 128, 256),
                     // MHA, GQA 4 and 8, MQA (Hq = 32, Hkv = 1).
                     testing::Values(1, 4, 8, 32),
                     testing::Values(ElementType::F16, ElementType::BF16),
                     testing::Values(CacheLayout::NHD, CacheLayout::HND),
                     testing::Values("sm_80", "sm_90")),
    paramName);

} // namespace

//===- PTXAssemblyTest.cpp - ptxas accepts every PTX we emit --------------===//
//
// Compiles every configuration of the kernel matrix (KernelMatrix.h) and
// assembles each kernel with `ptxas -v`: it must assemble with no spills,
// and the partial kernel must be what its schedule (fd/Planning/KernelPlan.h)
// says: registers within the schedule's budget, the launch bounds the split
// planner counts on, the schedule's shared memory. Prints registers and
// shared memory per kernel, and the partial kernel's register model
// (KernelSchedule::getRegisterDemand) and budget beside ptxas's count.
// Skips with a reason when ptxas is not installed.
//
//===----------------------------------------------------------------------===//

#include "KernelMatrix.h"

#include "fd/Planning/SplitPlanner.h"
#include "fd/TestSupport/Ptxas.h"

#include "llvm/Support/JSON.h"

#include <gtest/gtest.h>

#include <ostream>

using namespace flashdecode;
using namespace flashdecode::test;

namespace {

class PTXAssembly : public testing::TestWithParam<MatrixConfig> {};

TEST_P(PTXAssembly, AssemblesWithoutSpills) {
  std::optional<std::string> ptxas = findPtxas();
  if (!ptxas)
    GTEST_SKIP() << "ptxas not found (/usr/local/cuda/bin/ptxas or PATH)";
  llvm::Expected<CompiledKernels> kernels = compileMatrixConfig(GetParam());
  ASSERT_TRUE(static_cast<bool>(kernels))
      << llvm::toString(kernels.takeError());
  // The manifest's shared memory, read from the IR's workgroup buffers,
  // is what ptxas allocates.
  llvm::Expected<llvm::json::Value> manifest =
      llvm::json::parse(kernels->manifest);
  ASSERT_TRUE(static_cast<bool>(manifest))
      << llvm::toString(manifest.takeError());
  const llvm::json::Array *entries =
      manifest->getAsObject()->getArray("kernels");
  ASSERT_TRUE(entries && entries->size() == kernels->ptx.size());
  KernelConfig config = toKernelConfig(GetParam());
  const Chip *chip = findChip(config.arch);
  ASSERT_NE(chip, nullptr) << config.arch;
  KernelProblem problem = config.getKernelProblem();
  KernelSchedule schedule = planKernel(problem, *chip);
  for (const auto &[entry, kernel] : llvm::zip(*entries, kernels->ptx)) {
    const auto &[name, ptx] = kernel;
    auto report = assembleWithPtxas(*ptxas, ptx, GetParam().arch);
    ASSERT_TRUE(static_cast<bool>(report))
        << name << ": " << llvm::toString(report.takeError());
    EXPECT_EQ(report->spillStoreBytes, 0) << name << ":\n" << report->log;
    EXPECT_EQ(report->spillLoadBytes, 0) << name << ":\n" << report->log;
    EXPECT_EQ(entry.getAsObject()->getString("name"), name);
    EXPECT_EQ(entry.getAsObject()->getInteger("static_shared_memory_bytes"),
              report->sharedMemoryBytes)
        << name << ":\n"
        << report->log;
    // The partial kernel's register model and budget beside ptxas's count.
    std::string model;
    if (name == "fd_partial_attention") {
      EXPECT_LE(report->registers, schedule.getRegisterBudget(*chip))
          << name << ": " << schedule.minBlocksPerSM << " blocks per SM";
      model = " (model " + std::to_string(schedule.getRegisterDemand(problem)) +
              ", budget " + std::to_string(schedule.getRegisterBudget(*chip)) +
              ")";
      // ptxas counts the static shared memory; the warpgroup tile's dynamic
      // memory is the launch's.
      EXPECT_EQ(schedule.getSharedMemoryBytes(
                    config.fusedMerge ? kernels->numSplits : 0) -
                    schedule.getDynamicSharedMemoryBytes(),
                report->sharedMemoryBytes)
          << name;
      EXPECT_EQ(entry.getAsObject()->getInteger("dynamic_shared_memory_bytes"),
                schedule.getDynamicSharedMemoryBytes())
          << name;
      // Every planned kernel has launch bounds (the register model's), and
      // they are the blocks the split planner fills its waves with: on these
      // chips (sm_80, sm_90) the kernels' shared memory holds as many.
      ASSERT_GT(schedule.minBlocksPerSM, 0) << name;
      EXPECT_NE(
          ptx.find(".minnctapersm " + std::to_string(schedule.minBlocksPerSM)),
          std::string::npos)
          << name;
      EXPECT_EQ(getSplitWorkload(problem, schedule, *chip).blocksPerSM,
                schedule.minBlocksPerSM)
          << name;
    }
    std::printf("%s %s: %lld registers%s, %lld bytes shared memory\n",
                testing::UnitTest::GetInstance()->current_test_info()->name(),
                name.c_str(), static_cast<long long>(report->registers),
                model.c_str(),
                static_cast<long long>(report->sharedMemoryBytes));
  }
}

std::string configName(const testing::TestParamInfo<MatrixConfig> &info) {
  return describe(info.param);
}

INSTANTIATE_TEST_SUITE_P(Matrix, PTXAssembly,
                         testing::ValuesIn(getKernelMatrix()), configName);

} // namespace

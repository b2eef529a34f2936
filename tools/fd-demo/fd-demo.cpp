//===- fd-demo.cpp - One Llama-3-8B decode step, explained ----------------===//
//
// `make demo`: for a decode step of Llama-3-8B (B=1, Hq=32, Hkv=8, D=128,
// L=32768, f16) prints the split count the planner picks and why, the IR
// before and after fd-split-kv, runs the step through the CPU path and
// reports its error against the float64 reference, then compiles the GPU
// kernels, writes their PTX and manifest to --ptx-dir (default
// fd-demo-ptx) and prints ptxas's resource usage when ptxas is installed.
//
//===----------------------------------------------------------------------===//

#include "fd/Compiler/AttentionModule.h"
#include "fd/Compiler/CPUAttentionKernel.h"
#include "fd/Compiler/Compile.h"
#include "fd/Dialect/FD/Pipelines/Passes.h"
#include "fd/Planning/SplitPlanner.h"
#include "fd/Planning/WorkspaceLayout.h"
#include "fd/Reference/Reference.h"
#include "fd/TestSupport/Ptxas.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <random>

using namespace flashdecode;

namespace {

constexpr int64_t kBatch = 1, kQueryHeads = 32, kKVHeads = 8, kHeadDim = 128,
                  kLength = 32768;

/// Random f16 values and the doubles they hold.
void fillHalf(std::vector<uint16_t> &bits, std::vector<double> &values,
              double deviation, std::mt19937 &random) {
  std::normal_distribution<float> distribution(0.0f, deviation);
  for (size_t i = 0; i < bits.size(); ++i) {
    bits[i] = reference::floatToHalf(distribution(random));
    values[i] = reference::halfToFloat(bits[i]);
  }
}

/// Compiles the GPU kernels of `request`, writes them to `directory` and
/// prints what ptxas says of each. False when compilation or writing fails.
bool writeGPUKernels(const KernelRequest &request,
                     const std::string &directory) {
  const KernelConfig &config = request.config;
  llvm::outs() << "\n== GPU kernels (fd-lower-to-ptx, " << config.arch << ")\n";
  auto start = std::chrono::steady_clock::now();
  auto kernels = compileUncached(request);
  if (!kernels) {
    llvm::errs() << "fd-demo: " << llvm::toString(kernels.takeError()) << "\n";
    return false;
  }
  double compileMs = std::chrono::duration<double, std::milli>(
                         std::chrono::steady_clock::now() - start)
                         .count();
  llvm::sys::fs::create_directories(directory);
  auto write = [&](const std::string &name, llvm::StringRef text) {
    std::error_code error;
    llvm::raw_fd_ostream stream(directory + "/" + name, error);
    stream << text;
    return !error;
  };
  if (!write("manifest.json", kernels->manifest + "\n"))
    return false;
  std::optional<std::string> ptxas = findPtxas();
  llvm::outs() << llvm::format("compiled in %.0f ms, %lld splits; ", compileMs,
                               static_cast<long long>(kernels->numSplits))
               << "wrote " << directory << "/manifest.json\n";
  for (const auto &[name, ptx] : kernels->ptx) {
    if (!write(name + ".ptx", ptx))
      return false;
    llvm::outs() << "  " << directory << "/" << name << ".ptx";
    if (!ptxas) {
      llvm::outs() << "\n";
      continue;
    }
    auto report = assembleWithPtxas(*ptxas, ptx, config.arch);
    if (!report) {
      llvm::errs() << "fd-demo: " << llvm::toString(report.takeError()) << "\n";
      return false;
    }
    llvm::outs() << llvm::format(
        ": ptxas %lld registers, %lld bytes shared memory, %lld/%lld bytes "
        "spilled\n",
        static_cast<long long>(report->registers),
        static_cast<long long>(report->sharedMemoryBytes),
        static_cast<long long>(report->spillStoreBytes),
        static_cast<long long>(report->spillLoadBytes));
  }
  if (!ptxas)
    llvm::outs() << "  (ptxas not found: no resource usage)\n";
  return true;
}

} // namespace

int main(int argc, char **argv) {
  std::string ptxDirectory = "fd-demo-ptx";
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--ptx-dir" && i + 1 < argc) {
      ptxDirectory = argv[++i];
      continue;
    }
    llvm::errs() << "usage: fd-demo [--ptx-dir DIR]\n";
    return 2;
  }
  KernelConfig config;
  config.headDim = kHeadDim;
  config.numQueryHeads = kQueryHeads;
  config.numKVHeads = kKVHeads;
  config.elementType = ElementType::F16;
  config.withLse = true;
  PlanningHints hints;
  hints.batch = kBatch;
  hints.maxLength = kLength;
  KernelRequest request(config, hints);

  llvm::outs() << "== Llama-3-8B decode step: B=" << kBatch
               << " Hq=" << kQueryHeads << " Hkv=" << kKVHeads
               << " D=" << kHeadDim << " L=" << kLength << " f16, "
               << hints.planner.smCount << " SMs\n\n";
  // What fd-split-kv plans with: the workload of the kernel the config
  // gets.
  KernelProblem kernelProblem = config.getKernelProblem();
  SplitWorkload workload = getSplitWorkload(
      kernelProblem, config.getKernelSchedule(), config.getChip());
  SplitPlan unsplit =
      evaluateSplits(kBatch, kKVHeads, kLength, 1, {}, workload);
  SplitPlan plan = planNumSplits(kBatch, kKVHeads, kLength, {}, workload);
  llvm::outs() << "unsplit: " << describeSplitPlan(unsplit) << "\n"
               << "  one block per (sequence, KV head) keeps " << unsplit.blocks
               << " of " << hints.planner.smCount << " SMs busy\n"
               << "chosen:  " << describeSplitPlan(plan) << "\n"
               << "  " << plan.numSplits << " chunks of " << plan.chunkLength
               << " tokens per KV head: " << plan.blocks << " "
               << (workload.usesTensorCores() ? "tensor-core" : "CUDA-core")
               << " blocks, enough bytes in flight for DRAM's rate, fewer "
                  "partials than more would write; workspace "
               << WorkspaceLayout::get(1, kQueryHeads, kKVHeads, plan.numSplits,
                                       kHeadDim, config.fusedMerge)
                      .getBytes(kBatch)
               << " bytes\n\n";

  {
    mlir::DialectRegistry registry;
    mlir::fd::registerFDDialects(registry);
    mlir::MLIRContext context(registry);
    llvm::outs() << "== IR before fd-split-kv\n"
                 << *buildAttentionModule(context, config) << "\n";
  }

  auto start = std::chrono::steady_clock::now();
  auto kernel = CPUAttentionKernel::compile(request);
  if (!kernel) {
    llvm::errs() << "fd-demo: " << llvm::toString(kernel.takeError()) << "\n";
    return 1;
  }
  double compileMs = std::chrono::duration<double, std::milli>(
                         std::chrono::steady_clock::now() - start)
                         .count();
  llvm::outs() << "== IR after fd-split-kv (batch=" << kBatch
               << " max-len=" << kLength << ")\n"
               << (*kernel)->getSplitIR() << "\n";

  std::mt19937 random(std::random_device{}());
  size_t cacheSize = kBatch * kLength * kKVHeads * kHeadDim;
  size_t querySize = kBatch * kQueryHeads * kHeadDim;
  std::vector<uint16_t> query(querySize), keys(cacheSize), values(cacheSize),
      output(querySize);
  std::vector<double> queryValues(querySize), keyValues(cacheSize),
      valueValues(cacheSize);
  fillHalf(query, queryValues, 2.0, random);
  fillHalf(keys, keyValues, 1.0, random);
  fillHalf(values, valueValues, 1.0, random);
  std::vector<int32_t> lengths = {static_cast<int32_t>(kLength)};
  std::vector<float> lse(kBatch * kQueryHeads);

  AttentionBuffers buffers;
  buffers.query = query.data();
  buffers.keyCache = keys.data();
  buffers.valueCache = values.data();
  buffers.seqLens = lengths.data();
  buffers.output = output.data();
  buffers.lse = lse.data();
  buffers.batch = kBatch;
  buffers.maxLength = kLength;
  start = std::chrono::steady_clock::now();
  if (llvm::Error error = (*kernel)->run(buffers)) {
    llvm::errs() << "fd-demo: " << llvm::toString(std::move(error)) << "\n";
    return 1;
  }
  double runMs = std::chrono::duration<double, std::milli>(
                     std::chrono::steady_clock::now() - start)
                     .count();

  reference::AttentionProblem problem;
  problem.batch = kBatch;
  problem.numQueryHeads = kQueryHeads;
  problem.numKVHeads = kKVHeads;
  problem.headDim = kHeadDim;
  problem.maxLength = kLength;
  problem.scale = 1.0 / std::sqrt(double(kHeadDim));
  problem.query = queryValues.data();
  problem.keyCache = keyValues.data();
  problem.valueCache = valueValues.data();
  problem.lengths = lengths.data();
  std::vector<double> expected, expectedLse;
  reference::attention(problem, expected, expectedLse);
  double maxError = 0.0, maxValue = 0.0, maxLseError = 0.0;
  for (size_t i = 0; i < output.size(); ++i) {
    maxError = std::max(
        maxError, std::abs(reference::halfToFloat(output[i]) - expected[i]));
    maxValue = std::max(maxValue, std::abs(expected[i]));
  }
  for (size_t i = 0; i < lse.size(); ++i)
    maxLseError = std::max(maxLseError, std::abs(lse[i] - expectedLse[i]));

  llvm::outs() << "== CPU run (fd-lower-to-cpu + ExecutionEngine)\n";
  llvm::outs() << llvm::format(
      "compile %.0f ms, run %.0f ms; max |out - ref| = %.3g (%.2e of "
      "max |ref|, f16 tolerance 1e-2), max |lse - ref| = %.3g\n",
      compileMs, runMs, maxError, maxError / maxValue, maxLseError);
  bool accurate = maxError <= 1e-2 * maxValue && maxLseError <= 1e-4;
  if (!accurate) {
    llvm::errs() << "fd-demo: the CPU result is outside the tolerance\n";
    return 1;
  }
  if (!writeGPUKernels(request, ptxDirectory))
    return 1;
  llvm::outs() << "On a GPU: fdrt loads these (DecodePlan, Graph); "
                  "bench/run_on_device.sh checks and times them.\n";
  return 0;
}

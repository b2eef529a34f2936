//===- compile_latency.cpp - JIT compile latency vs an nvcc anchor --------===//
//
// For 24 configurations: cold in-process compilation
// (flashdecode::compileUncached), a disk-cache hit and a memory-cache hit;
// then, in the same run, `nvcc -ptx -arch=sm_90` on bench/splitkv_decode.cu, a
// CUDA C++ split-KV kernel pair of comparable size, as the anchor for
// nvcc-based JITs. Prints a table and the medians; --csv FILE writes the rows.
//
//===----------------------------------------------------------------------===//

#include "fd/Compiler/Compile.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

using namespace flashdecode;

namespace {

using Clock = std::chrono::steady_clock;

double millisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle]
                           : (values[middle - 1] + values[middle]) / 2;
}

std::string describe(const KernelConfig &config) {
  return "D=" + std::to_string(config.headDim) +
         " Hq=" + std::to_string(config.numQueryHeads) +
         " Hkv=" + std::to_string(config.numKVHeads) +
         " Lq=" + std::to_string(config.queryLength) + " " +
         getElementTypeName(config.elementType) + " " +
         getCacheLayoutName(config.cacheLayout) + " " + config.arch +
         (config.withLse ? " (with lse)" : "");
}

std::vector<KernelRequest> benchmarkConfigs() {
  std::vector<KernelRequest> configs;
  for (int64_t headDim : {64, 128, 256})
    for (int64_t kvHeads : {8, 32, 1})
      for (ElementType type : {ElementType::F16, ElementType::BF16}) {
        KernelConfig config;
        config.headDim = headDim;
        config.numKVHeads = kvHeads;
        config.elementType = type;
        PlanningHints hints;
        hints.maxLength = 32768;
        configs.emplace_back(config, hints);
      }
  for (int64_t queryLength : {2, 4}) {
    KernelConfig config;
    config.queryLength = queryLength;
    configs.push_back(config);
  }
  KernelConfig hnd;
  hnd.cacheLayout = CacheLayout::HND;
  configs.push_back(hnd);
  KernelConfig ampere;
  ampere.arch = "sm_80";
  ampere.ptxVersion = 70;
  configs.push_back(ampere);
  KernelConfig withLse;
  withLse.withLse = true;
  configs.push_back(withLse);
  KernelConfig f32;
  f32.elementType = ElementType::F32;
  configs.push_back(f32);
  return configs;
}

/// Median seconds of `repeats` runs of nvcc -ptx on the anchor, or a negative
/// value when nvcc is not there.
double timeNvcc(const std::string &source, int repeats) {
  std::string nvcc = "/usr/local/cuda/bin/nvcc";
  if (!llvm::sys::fs::can_execute(nvcc)) {
    llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName("nvcc");
    if (!found)
      return -1;
    nvcc = *found;
  }
  llvm::SmallString<128> output;
  llvm::sys::fs::createTemporaryFile("anchor", "ptx", output);
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    Clock::time_point start = Clock::now();
    int code = llvm::sys::ExecuteAndWait(
        nvcc, {nvcc, "-ptx", "-arch=sm_90", "-o", output.str(), source});
    if (code != 0)
      return -1;
    times.push_back(millisecondsSince(start));
  }
  llvm::sys::fs::remove(output);
  return median(times);
}

} // namespace

int main(int argc, char **argv) {
  std::string csvPath;
  std::string anchor = std::string(FD_SOURCE_DIR) + "/bench/splitkv_decode.cu";
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef flag = argv[i];
    if (flag == "--csv" && i + 1 < argc) {
      csvPath = argv[++i];
    } else {
      std::fprintf(stderr, "usage: compile_latency [--csv FILE]\n");
      return 2;
    }
  }

  llvm::SmallString<128> cacheDirectory;
  llvm::sys::fs::createUniqueDirectory("fd-compile-latency", cacheDirectory);
  CompileOptions options;
  options.cacheDirectory = std::string(cacheDirectory);

  // The first compilation of a process also initializes LLVM's targets and
  // registers the dialects: reported on its own.
  Clock::time_point start = Clock::now();
  KernelConfig warmup;
  warmup.numSplits = 3;
  if (!compileUncached(warmup)) {
    std::fprintf(stderr, "compile_latency: the warm-up compilation failed\n");
    return 1;
  }
  double firstMs = millisecondsSince(start);

  std::printf("| config | splits | cold ms | disk hit ms | memory hit us |\n"
              "|---|---:|---:|---:|---:|\n");
  std::vector<double> cold, disk, memory;
  std::string csv = "config,num_splits,cold_ms,disk_hit_ms,memory_hit_us\n";
  for (const KernelRequest &config : benchmarkConfigs()) {
    start = Clock::now();
    auto uncached = compileUncached(config);
    cold.push_back(millisecondsSince(start));
    if (!uncached) {
      std::fprintf(stderr, "compile_latency: %s\n",
                   llvm::toString(uncached.takeError()).c_str());
      return 1;
    }
    // Fill the disk cache, then time a disk hit and a memory hit.
    clearMemoryCache();
    if (!compile(config, options))
      return 1;
    clearMemoryCache();
    start = Clock::now();
    auto fromDisk = compile(config, options);
    disk.push_back(millisecondsSince(start));
    start = Clock::now();
    auto fromMemory = compile(config, options);
    memory.push_back(millisecondsSince(start) * 1000.0);
    if (!fromDisk || !fromMemory)
      return 1;
    std::printf("| %s | %lld | %.1f | %.2f | %.1f |\n",
                describe(config.config).c_str(),
                static_cast<long long>(uncached->numSplits), cold.back(),
                disk.back(), memory.back());
    csv += describe(config.config) + "," + std::to_string(uncached->numSplits) +
           "," + std::to_string(cold.back()) + "," +
           std::to_string(disk.back()) + "," + std::to_string(memory.back()) +
           "\n";
  }
  double nvccMs = timeNvcc(anchor, 5);
  std::printf("\nmedians over %zu configs: cold %.1f ms, disk hit %.2f ms, "
              "memory hit %.1f us (first compile of the process: %.1f ms)\n",
              cold.size(), median(cold), median(disk), median(memory), firstMs);
  if (nvccMs >= 0)
    std::printf("anchor: nvcc -ptx -arch=sm_90 bench/splitkv_decode.cu: "
                "%.0f ms (median of 5) = %.1fx our cold compile\n",
                nvccMs, nvccMs / median(cold));
  else
    std::printf("anchor: nvcc not found, not timed\n");
  if (!csvPath.empty()) {
    std::FILE *file = std::fopen(csvPath.c_str(), "w");
    if (!file) {
      std::fprintf(stderr, "compile_latency: cannot write %s\n",
                   csvPath.c_str());
      return 1;
    }
    std::fputs(csv.c_str(), file);
    std::fclose(file);
  }
  llvm::sys::fs::remove_directories(cacheDirectory);
  return 0;
}

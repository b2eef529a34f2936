//===- merge_states_bench.cpp - The merge kernel's time per call ----------===//
//
//   FD_CUDA_DRIVER=build/lib/libfdemu.so build/bin/merge_states_bench \
//       --csv bench/out/merge-states.csv
//
// Times fd.merge_states' GPU kernel (flashdecode::compileMergeStates,
// rt::MergeStatesKernel) for N = 2, 4, 8 states a row at Llama-3-8B's and
// MLA's output shapes, T = 64 rows: CUDA events around one launch (the
// median of 20 on a GPU; on fdemu one launch, whose events give the model's
// time, launch overhead included). Prints a table and writes CSV with the
// bytes moved, the bandwidth, and its fraction of the device copy's
// bandwidth (fdemu: the model's DRAM rate) and of the datasheet's.
//
//===----------------------------------------------------------------------===//

#include "fd/Compiler/Compile.h"
#include "fd/Compiler/MergeStates.h"
#include "fd/Runtime/MergeStates.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <random>
#include <string>
#include <vector>

using namespace flashdecode;

namespace {

struct Shape {
  const char *name;
  int64_t heads, headDim;
};

/// The outputs a decode step merges: Llama-3-8B's 32 query heads of 128,
/// and MLA's latent outputs (512) at 16 heads (DeepSeek-V3 over 8 GPUs) and
/// 128 (data-parallel attention).
constexpr Shape kShapes[] = {
    {"llama3-8b", 32, 128}, {"mla-hq16", 16, 512}, {"mla-hq128", 128, 512}};
constexpr int64_t kRows = 64;
constexpr int64_t kStateCounts[] = {2, 4, 8};

/// fdemu's model constants when the loaded driver is fdemu: its DRAM
/// bandwidth, what a copy achieves there.
double getEmulatedDramBytesPerSecond() {
  void *library =
      dlopen(rt::getDriverLibraryName().c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!library)
    return 0;
  auto constants = reinterpret_cast<void (*)(double *, double *, double *)>(
      dlsym(library, "fdemuGetModelConstants"));
  double dram = 0;
  if (constants)
    constants(nullptr, nullptr, &dram);
  return dram;
}

class Timer {
public:
  Timer(const rt::DriverApi &driver, rt::CUstream stream)
      : driver(driver), stream(stream) {
    rt::check(driver, driver.cuEventCreate(&start, 0), "creating an event");
    rt::check(driver, driver.cuEventCreate(&stop, 0), "creating an event");
  }
  ~Timer() {
    driver.cuEventDestroy(start);
    driver.cuEventDestroy(stop);
  }

  /// The median of `repeats` timings of `body`, in microseconds.
  template <typename Body> double median(int repeats, Body body) {
    std::vector<double> times;
    for (int i = 0; i < repeats; ++i) {
      rt::check(driver, driver.cuEventRecord(start, stream), "recording");
      body();
      rt::check(driver, driver.cuEventRecord(stop, stream), "recording");
      rt::check(driver, driver.cuEventSynchronize(stop), "synchronizing");
      float ms = 0;
      rt::check(driver, driver.cuEventElapsedTime(&ms, start, stop),
                "reading an event");
      times.push_back(ms * 1e3);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  }

private:
  const rt::DriverApi &driver;
  rt::CUstream stream;
  rt::CUevent start = nullptr, stop = nullptr;
};

/// A device buffer of `bytes` filled with random bf16 values of magnitude
/// about 1 (the lses too read them as floats: finite, small).
rt::DeviceBuffer randomBuffer(const rt::Device &device, size_t bytes,
                              std::mt19937 &random, bool floats) {
  std::vector<uint8_t> host(bytes);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t i = 0; i + 4 <= bytes; i += 4) {
    float value = normal(random);
    uint32_t bits;
    std::memcpy(&bits, &value, 4);
    if (!floats) // Two bf16: the high halves of two floats.
      bits = (bits >> 16) | (bits & 0xffff0000u);
    std::memcpy(&host[i], &bits, 4);
  }
  rt::DeviceBuffer buffer(device, bytes);
  buffer.upload(host.data(), bytes);
  return buffer;
}

} // namespace

int main(int argc, char **argv) {
  std::string csvPath;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--csv" && i + 1 < argc) {
      csvPath = argv[++i];
      continue;
    }
    std::fprintf(stderr, "usage: merge_states_bench [--csv FILE]\n");
    return 2;
  }
  try {
    rt::Device device;
    const rt::DriverApi &driver = device.getDriverApi();
    rt::CUstream stream;
    rt::check(driver, driver.cuStreamCreate(&stream, rt::kStreamNonBlocking),
              "creating a stream");
    auto [major, minor] = device.getComputeCapability();
    std::string target = rt::getTargetForComputeCapability(major, minor);
    double emulatedDram = getEmulatedDramBytesPerSecond();
    const bool modeled = emulatedDram > 0;
    Timer timer(driver, stream);
    double copyBandwidth = emulatedDram;
    if (!modeled) {
      size_t bytes = size_t(1) << 30;
      rt::DeviceBuffer source(device, bytes), destination(device, bytes);
      double us = timer.median(20, [&] {
        rt::check(driver,
                  driver.cuMemcpyDtoDAsync(destination.getAddress(),
                                           source.getAddress(), bytes, stream),
                  "copying device memory");
      });
      copyBandwidth = 2.0 * bytes / (us * 1e-6);
    }
    double datasheet = device.getPeakDramBytesPerSecond();
    std::string gpu = device.getName();
    std::replace(gpu.begin(), gpu.end(), ',', ' ');
    std::printf("%s merge_states on %s (%s), T = %lld, bf16; copy %.0f GB/s, "
                "datasheet %.0f GB/s\n\n",
                modeled ? "Modeled (fdemu)" : "Measured", gpu.c_str(),
                target.c_str(), static_cast<long long>(kRows),
                copyBandwidth / 1e9, datasheet / 1e9);
    std::printf("| shape | N | H | D | us | MB | GB/s | of copy | of "
                "datasheet |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    std::string csv = "gpu,modeled,shape,dtype,rows,states,heads,head_dim,us,"
                      "bytes,gb_per_s,copy_gb_per_s,copy_fraction,"
                      "datasheet_gb_per_s,datasheet_fraction\n";
    std::mt19937 random(2026);
    for (const Shape &shape : kShapes)
      for (int64_t states : kStateCounts) {
        MergeStatesConfig config;
        config.elementType = ElementType::BF16;
        config.statesPerOperand = {states};
        config.numHeads = shape.heads;
        config.headDim = shape.headDim;
        auto compiled =
            compileMergeStates(config, target, KernelConfig().ptxVersion);
        if (!compiled) {
          std::fprintf(stderr, "merge_states_bench: %s\n",
                       llvm::toString(compiled.takeError()).c_str());
          return 1;
        }
        rt::MergeStatesLaunch launch;
        launch.heads = shape.heads;
        MergeStatesEntry entry = getMergeStatesEntry(*compiled);
        launch.kernelName = entry.name;
        launch.threads = entry.threads;
        launch.operands = 1;
        rt::MergeStatesKernel kernel(device, compiled->ptx.front().second,
                                     launch);
        size_t stateBytes = kRows * states * shape.heads * shape.headDim * 2;
        size_t lseBytes = kRows * states * shape.heads * 4;
        size_t outBytes = kRows * shape.heads * shape.headDim * 2;
        size_t outLseBytes = kRows * shape.heads * 4;
        rt::DeviceBuffer values =
            randomBuffer(device, stateBytes, random, false);
        rt::DeviceBuffer lses = randomBuffer(device, lseBytes, random, true);
        rt::DeviceBuffer output(device, outBytes), lse(device, outLseBytes);
        std::vector<rt::CUdeviceptr> pointers = {
            values.getAddress(), lses.getAddress(), output.getAddress(),
            lse.getAddress()};
        kernel.launch(pointers, kRows, stream); // Loads, warms.
        double us = timer.median(
            modeled ? 1 : 20, [&] { kernel.launch(pointers, kRows, stream); });
        double bytes = stateBytes + lseBytes + outBytes + outLseBytes;
        double bandwidth = bytes / (us * 1e-6);
        std::printf("| %s | %lld | %lld | %lld | %.2f | %.2f | %.0f | %.3f | "
                    "%.3f |\n",
                    shape.name, static_cast<long long>(states),
                    static_cast<long long>(shape.heads),
                    static_cast<long long>(shape.headDim), us, bytes / 1e6,
                    bandwidth / 1e9, bandwidth / copyBandwidth,
                    datasheet > 0 ? bandwidth / datasheet : 0.0);
        char line[512];
        std::snprintf(
            line, sizeof(line),
            "%s,%d,%s,bf16,%lld,%lld,%lld,%lld,%.3f,%.0f,%.2f,%.2f,"
            "%.4f,%.2f,%.4f\n",
            gpu.c_str(), modeled ? 1 : 0, shape.name,
            static_cast<long long>(kRows), static_cast<long long>(states),
            static_cast<long long>(shape.heads),
            static_cast<long long>(shape.headDim), us, bytes, bandwidth / 1e9,
            copyBandwidth / 1e9, bandwidth / copyBandwidth, datasheet / 1e9,
            datasheet > 0 ? bandwidth / datasheet : 0.0);
        csv += line;
      }
    driver.cuStreamDestroy(stream);
    if (!csvPath.empty()) {
      FILE *file = std::fopen(csvPath.c_str(), "w");
      if (!file) {
        std::fprintf(stderr, "merge_states_bench: cannot write %s\n",
                     csvPath.c_str());
        return 1;
      }
      std::fputs(csv.c_str(), file);
      std::fclose(file);
    }
  } catch (const std::exception &error) {
    std::fprintf(stderr, "merge_states_bench: %s\n", error.what());
    return 1;
  }
  return 0;
}

//===- fd-bench.cpp - Decode attention on the GPU: correct, then fast -----===//
//
//   fd-bench --kernels DIR [--csv FILE] [--quick] [--configs A,B]
//            [--shapes BxL,...] [--page-sizes P,...] [--tokens-per-split N]
//            [--instruction-mix FILE]
//
// DIR holds what bench/prepare_kernels.sh had fd-compile write, one
// directory per shape and split mode: DIR/<config>/B<batch>_L<len>_<auto|s1>
// (and _p<page> for --page-sizes' paged rows); or DIR is one configuration
// fd-compile -o wrote (DIR/manifest.json): its heads at --shapes, its split
// count fixed (mode s<N>). Queries may be f16 or bf16.
// For every shape: checks the output against a float64 reference (a subset
// of sizes; output poisoned first), then times the partial + merge launch
// with CUDA events (median, KV buffers rotated when they fit in L2), auto
// splits vs one split, and a 32-layer decode step eager vs CUDA-graph
// replay. Prints a table, writes CSV. Runtime only: no MLIR. Without a GPU
// it says so on one line and exits with 2. On fdemu, times are modeled from
// the interpreter's counters and extrapolated from short lengths
// (Emulated.h), and only affordable shapes are checked. Kernels compiled for
// fp8 caches (fd-compile --kv-dtype e4m3|e5m2) read 1-byte caches of random
// finite values and random scales in [0.01, 1] (per tensor or per token and
// KV head, as compiled); their rows say so in the kv_dtype column.
//
//===----------------------------------------------------------------------===//

#include "Emulated.h"
#include "InstructionMix.h"
#include "Measured.h"
#include "ModelConfigs.h"
#include "Verify.h"

#include "fd/Runtime/Runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

using namespace flashdecode;
using namespace flashdecode::rt;
using namespace flashdecode::bench;

namespace {

constexpr int kNoGPUExitCode = 2;

/// The largest KV cache (K and V) fd-bench checks on fdemu: a few seconds
/// each in the interpreter; `make test` runs --quick.
size_t getEmulatorCheckBytes(bool quick) {
  return size_t(quick ? 32 : 128) << 20;
}

std::string formatDouble(const char *format, double value) {
  char text[32];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

class Bench {
public:
  Bench(Device &device, std::string kernelRoot, bool quick, Emulator *emulator,
        int64_t tokensPerSplit)
      : device(device), driver(device.getDriverApi()),
        kernelRoot(std::move(kernelRoot)), quick(quick), emulator(emulator),
        tokensPerSplit(tokensPerSplit), deviceName(device.getName()),
        peakBandwidth(device.getPeakDramBytesPerSecond()) {
    // A CSV field: no commas.
    std::replace(deviceName.begin(), deviceName.end(), ',', ' ');
    check(driver, driver.cuStreamCreate(&stream, kStreamNonBlocking),
          "creating a stream");
    timer = std::make_unique<EventTimer>(device, stream, quick);
  }
  ~Bench() {
    timer.reset();
    driver.cuStreamDestroy(stream);
  }

  /// The bandwidth "% of copy" compares with. On fdemu, the modeled DRAM
  /// bandwidth (fdemu models copies at that rate; copying 1 GiB in the
  /// interpreter would only measure the host), which makes the column the
  /// fraction of the HBM roofline.
  double measureCopyBandwidth() {
    copyBandwidth = emulator ? emulator->getDramBytesPerSecond()
                             : timer->measureCopyBandwidth();
    return copyBandwidth;
  }

  void runShape(const ModelConfig &config, int64_t batch, int64_t length,
                FILE *csv) {
    bool verify = shouldVerify(config, batch, length);
    std::map<std::string, std::string> previousPtx;
    double maxRelativeError = -1;
    Timing timing;
    for (std::string mode : {"auto", "s1"}) {
      KernelBundle bundle = loadKernels(kernelRoot + "/" + config.name + "/B" +
                                        std::to_string(batch) + "_L" +
                                        std::to_string(length) + "_" + mode);
      // On fdemu, one split chosen by the planner is the s1 kernels again:
      // the interpreter would repeat the same check and the same counts.
      bool repeat = emulator && bundle.ptx == previousPtx;
      previousPtx = bundle.ptx;
      size_t kvBytes = config.getKVBytes(
          batch, length, bundle.manifest.getCacheElementBytes());
      if (!repeat) {
        maxRelativeError =
            verify ? verifyOutput(config, batch, length, bundle) : -1;
        timing = time(bundle, batch, length, mode == "auto");
      }
      if (mode == "auto")
        denseMicroseconds[{config.name, batch, length}] = timing.microseconds;
      else
        timing.eagerStepMicroseconds = timing.graphStepMicroseconds = -1;
      printRow(config, bundle.manifest, batch, length, /*pageSize=*/0, mode,
               mode, timing, kvBytes,
               maxRelativeError < 0 ? "-"
                                    : formatDouble("%.1e", maxRelativeError),
               maxRelativeError, csv);
      if (verify && !(maxRelativeError >= 0 && maxRelativeError <= 1e-2))
        failures++;
    }
  }

  /// Paged caches (pages shuffled in the pool) against the dense time of
  /// the same shape: the cost of reading through a block table. The
  /// kernels are in DIR/<directory>/B<batch>_L<length>_p<pageSize>. The
  /// decode step is modeled on fdemu only: on a GPU the one pool would
  /// stay in L2 from layer to layer.
  void runPaged(const ModelConfig &config, const std::string &directory,
                int64_t batch, int64_t length, int64_t pageSize, FILE *csv) {
    KernelBundle bundle = loadKernels(
        kernelRoot + "/" + directory + "/B" + std::to_string(batch) + "_L" +
        std::to_string(length) + "_p" + std::to_string(pageSize));
    size_t kvBytes = config.getKVBytes(batch, length,
                                       bundle.manifest.getCacheElementBytes());
    Timing timing =
        time(bundle, batch, length, /*withStep=*/emulator != nullptr);
    auto dense = denseMicroseconds.find({config.name, batch, length});
    std::string mode = "p" + std::to_string(pageSize);
    printRow(config, bundle.manifest, batch, length, pageSize, "paged " + mode,
             mode, timing, kvBytes,
             "vs dense: " +
                 (dense == denseMicroseconds.end()
                      ? std::string("-")
                      : formatDouble(
                            "%+.1f %%",
                            100.0 * (timing.microseconds / dense->second - 1))),
             -1, csv);
  }

  /// The kernels fd-compile -o wrote to the root (one configuration, its
  /// split count fixed: mode s<N>, s<N>p<P> paged) at `batch` x `length`;
  /// checked where
  /// shouldVerify says (dense kernels: the check binds no block table).
  void runDirectory(const ModelConfig &config, int64_t batch, int64_t length,
                    FILE *csv) {
    KernelBundle bundle = loadKernels(kernelRoot);
    const Manifest &manifest = bundle.manifest;
    // The check reads a cache per sequence (python/tests cover a shared
    // prefix's kernels on fdemu).
    bool verify = !manifest.pageSize && !manifest.sharedPrefix &&
                  shouldVerify(config, batch, length);
    double maxRelativeError =
        verify ? verifyOutput(config, batch, length, bundle) : -1;
    Timing timing = time(bundle, batch, length, /*withStep=*/true);
    std::string mode =
        "s" + std::to_string(manifest.numSplits) +
        (manifest.pageSize ? "p" + std::to_string(manifest.pageSize) : "");
    // A shared prefix is read once for the batch.
    printRow(
        config, manifest, batch, length, manifest.pageSize, mode, mode, timing,
        config.getKVBytes(manifest.sharedPrefix ? 1 : batch, length,
                          manifest.getCacheElementBytes()),
        maxRelativeError < 0 ? "-" : formatDouble("%.1e", maxRelativeError),
        maxRelativeError, csv);
    if (verify && !(maxRelativeError >= 0 && maxRelativeError <= 1e-2))
      failures++;
  }

  int failures = 0;

  /// The instruction mix of every row modeled from two lengths.
  const InstructionMixTable &getInstructionMix() const {
    return instructionMix;
  }

private:
  /// Measured with events on a GPU, modeled on fdemu.
  Timing time(const KernelBundle &bundle, int64_t batch, int64_t length,
              bool withStep) {
    if (!emulator)
      return timer->measure(bundle, batch, length, withStep);
    Timing timing =
        emulator->model(device, stream, bundle, batch, length, tokensPerSplit);
    if (!withStep)
      timing.eagerStepMicroseconds = timing.graphStepMicroseconds = -1;
    return timing;
  }

  /// One table row and one CSV line (the CSV's columns are a contract:
  /// new ones go at the end) for the kernels of `manifest`.
  void printRow(const ModelConfig &model, const Manifest &manifest,
                int64_t batch, int64_t length, int64_t pageSize,
                const std::string &tableMode, const std::string &csvMode,
                const Timing &timing, size_t kvBytes, const std::string &check,
                double maxRelativeError, FILE *csv) {
    const char *config = model.name;
    int64_t splits = manifest.numSplits;
    std::string kvType =
        manifest.kvDtype +
        (manifest.hasFloat8Cache() ? " " + manifest.kvScale : "");
    if (!timing.partialInstructionMix.empty())
      instructionMix.add({config, batch, length, csvMode, splits,
                          manifest.dtype, manifest.kvDtype, kvType,
                          timing.partialInstructionMix});
    double us = timing.microseconds;
    double percentOfCopy = 100.0 * kvBytes / (us * 1e-6) / copyBandwidth;
    std::string source =
        !timing.modeled ? "measured"
        : timing.shortLength == timing.longLength
            ? "modeled at L"
            : "modeled from L=" + std::to_string(timing.shortLength) + "," +
                  std::to_string(timing.longLength);
    auto step = [](double value) {
      return value < 0 ? std::string("-") : formatDouble("%.0f", value);
    };
    std::printf("| %s | %lld | %lld | %s | %lld | %.1f | %.1f | %.2f | "
                "%.0f %% | %s | %s | %s | %s | %s | %s |\n",
                config, static_cast<long long>(batch),
                static_cast<long long>(length), tableMode.c_str(),
                static_cast<long long>(splits), us, kvBytes / 1e6,
                kvBytes / (us * 1e-6) / 1e12, percentOfCopy, check.c_str(),
                step(timing.eagerStepMicroseconds).c_str(),
                step(timing.graphStepMicroseconds).c_str(), source.c_str(),
                timing.bound.c_str(), kvType.c_str());
    std::fflush(stdout);
    if (csv)
      std::fprintf(
          csv, "%s,%lld,%lld,%s,%lld,%.3f,%zu,%.4f,%.2f,%g,%.2f,%.2f,%s,%s",
          config, static_cast<long long>(batch), static_cast<long long>(length),
          csvMode.c_str(), static_cast<long long>(splits), us, kvBytes,
          kvBytes / (us * 1e-6) / 1e12, percentOfCopy, maxRelativeError,
          timing.eagerStepMicroseconds, timing.graphStepMicroseconds,
          timing.modeled ? "modeled" : "measured", timing.bound.c_str());
    if (csv) {
      // The fewest bytes the call must move: K and V once (1 byte per
      // element in fp8 caches) and their scales, q read and the output
      // written once (f16 or bf16); the roofline fraction is their time at
      // the datasheet's bandwidth over the call's time, the copy fraction
      // at the achievable one (a device copy's; fdemu: its model's).
      size_t rowBytes = size_t(2) * batch * model.numQueryHeads *
                        (model.headDim + model.getValueHeadDim());
      size_t bytes =
          kvBytes + model.getScaleBytes(manifest, batch, length) + rowBytes;
      std::fprintf(
          csv, ",%s,%s,%lld,%lld,%lld,%s,%lld,%zu,%.4f,%s,%s",
          deviceName.c_str(), timing.modeled ? "true" : "false",
          static_cast<long long>(model.numQueryHeads),
          static_cast<long long>(model.numKVHeads),
          static_cast<long long>(model.headDim), manifest.dtype.c_str(),
          static_cast<long long>(pageSize), bytes,
          peakBandwidth > 0 ? bytes / (us * 1e-6) / peakBandwidth : -1.0,
          manifest.kvDtype.c_str(), manifest.kvScale.c_str());
      double graph = timing.graphStepMicroseconds;
      std::fprintf(csv, ",%.4f,%.3f,%lld,%s,%s,%.0f",
                   bytes / (us * 1e-6) / copyBandwidth,
                   graph < 0 ? -1.0 : graph / kLayers,
                   static_cast<long long>(model.getValueHeadDim()),
                   model.sharedKV ? "true" : "false",
                   manifest.sharedPrefix ? "true" : "false",
                   timing.dramLoadBytes);
      // Modeled: each launch's time and binding term, name:us:bound joined
      // by ';' in launch order; '-' measured.
      std::string kernelTimes;
      for (const Timing::KernelTime &kernel : timing.kernelTimes)
        kernelTimes += (kernelTimes.empty() ? "" : ";") + kernel.name + ":" +
                       formatDouble("%.3f", kernel.microseconds) + ":" +
                       kernel.bound;
      std::fprintf(csv, ",%s", kernelTimes.empty() ? "-" : kernelTimes.c_str());
    }
    // A run stopped at its time limit still leaves the rows it finished.
    if (csv) {
      std::fputc('\n', csv);
      std::fflush(csv);
    }
  }

  /// On fdemu the check runs in the interpreter, which reads a few MiB of
  /// KV cache per second: only caches of at most getEmulatorCheckBytes().
  bool shouldVerify(const ModelConfig &config, int64_t batch,
                    int64_t length) const {
    // A window's kernels read only its keys, whatever the length.
    if (emulator)
      return batch <= 8 && (length <= 4096 || config.windowLeft) &&
             config.getKVBytes(batch, length) <= getEmulatorCheckBytes(quick);
    return (batch <= 8 && length <= 4096) || (batch == 1 && length <= 16384);
  }

  double verifyOutput(const ModelConfig &config, int64_t batch, int64_t length,
                      const KernelBundle &bundle) {
    return verifyDecode(device, stream, bundle, config, batch, length, random);
  }

  /// The kernels in `directory`, which this GPU must be able to load.
  KernelBundle loadKernels(const std::string &directory) const {
    KernelBundle bundle = KernelBundle::load(directory);
    auto [major, minor] = device.getComputeCapability();
    const std::string &arch = bundle.manifest.arch;
    if (!arch.empty() && !canLoadTarget(arch, major, minor))
      throw std::runtime_error(
          "the kernels in " + directory + " were compiled for " + arch +
          ", which " + device.getName() + " (compute capability " +
          std::to_string(major) + "." + std::to_string(minor) +
          ") cannot load: compile them for " +
          getTargetForComputeCapability(major, minor) +
          " (bench/prepare_kernels.sh --arch " +
          getTargetForComputeCapability(major, minor) + ")");
    return bundle;
  }

  Device &device;
  const DriverApi &driver;
  std::string kernelRoot;
  bool quick;
  Emulator *emulator;
  int64_t tokensPerSplit;
  std::string deviceName;
  CUstream stream = nullptr;
  std::unique_ptr<EventTimer> timer;
  double copyBandwidth = 1;
  /// The datasheet's DRAM bandwidth (roofline_fraction).
  double peakBandwidth = 0;
  // Auto-split dense times by (config, batch, length), for the paged rows.
  std::map<std::tuple<std::string, int64_t, int64_t>, double> denseMicroseconds;
  InstructionMixTable instructionMix;
  std::mt19937 random{std::random_device{}()};
};

void usage() {
  std::printf(
      "usage: fd-bench --kernels DIR [--csv FILE] [--quick] [--configs A,B]\n"
      "                [--shapes BxL,...] [--page-sizes P,...]\n"
      "                [--tokens-per-split N] [--instruction-mix FILE]\n"
      "  --kernels DIR   what bench/prepare_kernels.sh wrote, or one\n"
      "                  configuration fd-compile -o wrote (then --shapes,\n"
      "                  its split count fixed, no --configs)\n"
      "  --csv FILE      also write the rows as CSV\n"
      "  --quick         B in {1, 8}, L in {1k, 16k}, fewer iterations\n"
      "  --configs LIST  of %s (default: the first two)\n"
      "  --shapes LIST   batch x length pairs, e.g. 1x32768,16x4096, instead\n"
      "                  of the grid (whose paged rows are Llama-3-8B's)\n"
      "  --page-sizes LIST  with --shapes: also paged rows of every config\n"
      "                  and shape, kernels in DIR/<config>/B<b>_L<l>_p<page>\n"
      "  --tokens-per-split N  fdemu: extrapolate from two runs N tokens per\n"
      "                  split apart (a multiple of 32; times a chunk's\n"
      "                  cluster_ctas; 0: interpret the full length);\n"
      "                  default 128, 32 with --quick\n"
      "  --instruction-mix FILE  fdemu: also the partial kernel's warp\n"
      "                  instructions per token and KV head by class, as a\n"
      "                  table and as CSV in FILE (rows modeled from two\n"
      "                  lengths)\n",
      getConfigNames().c_str());
}

std::vector<std::string> splitList(const std::string &list) {
  std::vector<std::string> items;
  std::stringstream stream(list);
  for (std::string item; std::getline(stream, item, ',');)
    items.push_back(item);
  return items;
}

} // namespace

int main(int argc, char **argv) {
  std::string kernels, csvPath, mixPath;
  bool quick = false;
  int64_t tokensPerSplit = -1;
  std::vector<const ModelConfig *> configs = {&kConfigs[0], &kConfigs[1]};
  bool configsGiven = false;
  std::vector<std::pair<int64_t, int64_t>> shapes;
  std::vector<int64_t> pageSizes;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--kernels" && i + 1 < argc) {
      kernels = argv[++i];
    } else if (flag == "--csv" && i + 1 < argc) {
      csvPath = argv[++i];
    } else if (flag == "--quick") {
      quick = true;
    } else if (flag == "--tokens-per-split" && i + 1 < argc) {
      tokensPerSplit = std::atoll(argv[++i]);
      if (tokensPerSplit < 0 || tokensPerSplit % 32) {
        std::fprintf(stderr, "fd-bench: --tokens-per-split must be a "
                             "multiple of 32 (0: the full length)\n");
        return 2;
      }
    } else if (flag == "--configs" && i + 1 < argc) {
      configsGiven = true;
      configs.clear();
      for (const std::string &name : splitList(argv[++i])) {
        auto found = std::find_if(
            std::begin(kConfigs), std::end(kConfigs),
            [&](const ModelConfig &config) { return name == config.name; });
        if (found == std::end(kConfigs)) {
          std::fprintf(stderr, "fd-bench: unknown config '%s' (%s)\n",
                       name.c_str(), getConfigNames().c_str());
          return 2;
        }
        configs.push_back(found);
      }
    } else if (flag == "--shapes" && i + 1 < argc) {
      for (const std::string &shape : splitList(argv[++i])) {
        long long batch = 0, length = 0;
        char extra = 0;
        if (std::sscanf(shape.c_str(), "%lldx%lld%c", &batch, &length,
                        &extra) != 2 ||
            batch < 1 || length < 1) {
          std::fprintf(stderr,
                       "fd-bench: bad shape '%s' (expected BxL, e.g. "
                       "1x32768)\n",
                       shape.c_str());
          return 2;
        }
        shapes.emplace_back(batch, length);
      }
    } else if (flag == "--instruction-mix" && i + 1 < argc) {
      mixPath = argv[++i];
    } else if (flag == "--page-sizes" && i + 1 < argc) {
      for (const std::string &size : splitList(argv[++i])) {
        long long pageSize = 0;
        char extra = 0;
        if (std::sscanf(size.c_str(), "%lld%c", &pageSize, &extra) != 1 ||
            pageSize < 1) {
          std::fprintf(stderr,
                       "fd-bench: bad page size '%s' (expected a positive "
                       "number of tokens, e.g. 16)\n",
                       size.c_str());
          return 2;
        }
        pageSizes.push_back(pageSize);
      }
    } else if (flag == "--help") {
      usage();
      return 0;
    } else {
      std::fprintf(stderr, "fd-bench: unknown flag '%s'\n", argv[i]);
      usage();
      return 2;
    }
  }
  if (kernels.empty()) {
    std::fprintf(stderr, "fd-bench: --kernels DIR is required\n");
    return 2;
  }
  // One configuration fd-compile -o wrote: its heads, at --shapes.
  std::string oneConfigName;
  std::optional<ModelConfig> oneConfig;
  if (std::ifstream(kernels + "/manifest.json").good()) {
    if (shapes.empty() || configsGiven || !pageSizes.empty()) {
      std::fprintf(stderr,
                   "fd-bench: %s holds one configuration (fd-compile -o): "
                   "give --shapes, and no --configs or --page-sizes\n",
                   kernels.c_str());
      return 2;
    }
    // Named after DIR (a trailing '/' aside).
    std::string directory =
        kernels.substr(0, kernels.find_last_not_of('/') + 1);
    oneConfigName = directory.substr(directory.find_last_of('/') + 1);
    try {
      oneConfig = ModelConfig::fromManifest(
          KernelBundle::load(kernels).manifest, oneConfigName.c_str());
    } catch (const std::exception &error) {
      std::fprintf(stderr, "fd-bench: %s\n", error.what());
      return 2;
    }
    configs = {&*oneConfig};
  }
  if (!pageSizes.empty() && shapes.empty()) {
    std::fprintf(stderr, "fd-bench: --page-sizes needs --shapes (the grid "
                         "has its own paged rows)\n");
    return 2;
  }

  std::unique_ptr<Device> device;
  try {
    device = std::make_unique<Device>();
  } catch (const CudaError &error) {
    std::printf("fd-bench: no GPU: %s\n", error.what());
    return kNoGPUExitCode;
  }

  try {
    std::unique_ptr<Emulator> emulator = Emulator::detect();
    if (tokensPerSplit < 0)
      tokensPerSplit = quick ? Emulator::kQuickTokensPerSplit
                             : Emulator::kShortTokensPerSplit;
    Bench bench(*device, kernels, quick, emulator.get(), tokensPerSplit);
    double bandwidth = bench.measureCopyBandwidth();
    std::string name = device->getName();
    auto [major, minor] = device->getComputeCapability();
    std::string capability = std::to_string(major) + "." +
                             std::to_string(minor) + " (" +
                             getTargetForComputeCapability(major, minor) + ")";
    if (emulator) {
      std::printf("device: %s, compute capability %s, %d SMs; modeled DRAM "
                  "bandwidth: %.2f TB/s\n",
                  name.c_str(), capability.c_str(),
                  device->getMultiprocessorCount(), bandwidth / 1e12);
      if (tokensPerSplit)
        std::printf("modeled on %s: times extrapolated from L=l1 and L=l2 "
                    "(per row in 'source'), every sequence at l1 and at "
                    "l2 = l1 + S x C x %lld tokens (S splits, C blocks a "
                    "chunk's cluster)",
                    name.c_str(), static_cast<long long>(tokensPerSplit));
      else
        std::printf("modeled on %s: every shape interpreted at its full "
                    "length",
                    name.c_str());
      std::printf("; outputs checked in the interpreter where B <= 8, "
                  "L <= 4096 and the KV cache is at most %zu MiB\n\n",
                  getEmulatorCheckBytes(quick) >> 20);
    } else {
      std::printf("device: %s, compute capability %s, %d SMs; "
                  "device-to-device copy: %.2f TB/s\n\n",
                  name.c_str(), capability.c_str(),
                  device->getMultiprocessorCount(), bandwidth / 1e12);
    }
    std::printf("| config | B | L | splits mode | S | us | KV MB | TB/s | "
                "%% of copy | max rel err | 32-layer eager us | 32-layer "
                "graph us | source | bound | KV dtype |\n|---|---:|---:|---|"
                "---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|\n");
    FILE *csv = csvPath.empty() ? nullptr : std::fopen(csvPath.c_str(), "w");
    if (csv)
      std::fputs("config,batch,max_len,mode,num_splits,time_us,kv_bytes,"
                 "tb_per_s,pct_copy_bw,max_rel_err,step32_eager_us,"
                 "step32_graph_us,source,bound,device,modeled,num_q_heads,"
                 "num_kv_heads,head_dim,dtype,page_size,bytes,"
                 "roofline_fraction,kv_dtype,kv_scale,copy_fraction,"
                 "graph_us_per_layer,v_head_dim,shared_kv,shared_prefix,"
                 "dram_load_bytes,kernel_us\n",
                 csv);
    bool grid = shapes.empty();
    if (grid)
      for (int64_t batch :
           quick ? std::vector<int64_t>{1, 8} : std::vector<int64_t>{1, 8, 64})
        for (int64_t length :
             quick ? std::vector<int64_t>{1024, 16384}
                   : std::vector<int64_t>{1024, 4096, 16384, 65536, 131072})
          shapes.emplace_back(batch, length);
    for (const ModelConfig *config : configs)
      for (auto [batch, length] : shapes) {
        size_t kvBytes = config->getKVBytes(batch, length);
        if (kvBytes > (size_t(100) << 30)) {
          std::printf("| %s | %lld | %lld | skipped: KV cache of %.0f GB "
                      "does not fit |\n",
                      config->name, static_cast<long long>(batch),
                      static_cast<long long>(length), kvBytes / 1e9);
          continue;
        }
        if (oneConfig) {
          bench.runDirectory(*config, batch, length, csv);
          continue;
        }
        bench.runShape(*config, batch, length, csv);
        for (int64_t pageSize : pageSizes)
          bench.runPaged(*config, config->name, batch, length, pageSize, csv);
      }
    // Paged vs dense (issue goal: within 5 % at L >= 16k).
    if (grid)
      for (int64_t batch : {1, 8})
        for (int64_t length : {16384, 65536})
          for (int64_t pageSize : {16, 64})
            bench.runPaged(kConfigs[0], "paged", batch, length, pageSize, csv);
    if (csv)
      std::fclose(csv);
    if (!mixPath.empty() && emulator)
      bench.getInstructionMix().print(mixPath);
    else if (!mixPath.empty())
      std::fprintf(stderr,
                   "fd-bench: --instruction-mix counts fdemu's "
                   "instructions; a GPU has none to give, no %s\n",
                   mixPath.c_str());
    if (emulator)
      std::printf("\nfdemu interpreted %.3g thread instructions for the "
                  "modeled runs in %.1f s: %.1f M/s (FDEMU_THREADS=%s)\n",
                  emulator->getThreadInstructions(),
                  emulator->getInterpreterSeconds(),
                  emulator->getThreadInstructions() /
                      emulator->getInterpreterSeconds() / 1e6,
                  std::getenv("FDEMU_THREADS") ? std::getenv("FDEMU_THREADS")
                                               : "unset: all cores");
    if (bench.failures) {
      std::printf("fd-bench: %d shapes outside the 1e-2 tolerance\n",
                  bench.failures);
      return 1;
    }
  } catch (const std::exception &error) {
    std::fprintf(stderr, "fd-bench: %s\n", error.what());
    return 1;
  }
  return 0;
}

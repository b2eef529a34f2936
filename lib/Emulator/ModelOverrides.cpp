//===- ModelOverrides.cpp - FDEMU_MODEL: the model's constants by name ----===//

#include "fd/Emulator/PerformanceModel.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace flashdecode::emu {

namespace {

/// A constant FDEMU_MODEL may set: its name, whether it counts whole cycles
/// (or instructions), and where it goes.
struct NamedConstant {
  const char *name;
  bool whole;
  std::function<void(GpuModel &, double)> set;
};

template <typename T> NamedConstant real(const char *name, T GpuModel::*field) {
  return {name, false, [field](GpuModel &gpu, double value) {
            gpu.*field = static_cast<T>(value);
          }};
}

NamedConstant cycles(const char *name, unsigned LatencyModel::*field) {
  return {name, true, [field](GpuModel &gpu, double value) {
            gpu.latencyModel.*field = static_cast<unsigned>(value);
          }};
}

const std::vector<NamedConstant> &getNamedConstants() {
  static const std::vector<NamedConstant> constants = {
      real("clock_ghz", &GpuModel::clockGHz),
      real("dram_bytes_per_second", &GpuModel::dramBytesPerSecond),
      real("peak_dram_bytes_per_second", &GpuModel::peakDramBytesPerSecond),
      real("tensor_per_clock", &GpuModel::tensorPerClock),
      real("warpgroup_tensor_per_clock", &GpuModel::warpgroupTensorPerClock),
      real("eager_launch_us", &GpuModel::eagerLaunchMicroseconds),
      real("graph_node_us", &GpuModel::graphNodeMicroseconds),
      real("submission_us", &GpuModel::submissionMicroseconds),
      cycles("alu", &LatencyModel::alu),
      cycles("conversion", &LatencyModel::conversion),
      cycles("special_function", &LatencyModel::specialFunction),
      cycles("shuffle", &LatencyModel::shuffle),
      cycles("shared_load", &LatencyModel::sharedLoad),
      cycles("global_load", &LatencyModel::globalLoad),
      cycles("l2_hit", &LatencyModel::l2Hit),
      cycles("barrier", &LatencyModel::barrier),
      cycles("tensor_core", &LatencyModel::tensorCore),
      cycles("distributed_shared", &LatencyModel::distributedShared),
      cycles("cluster_barrier", &LatencyModel::clusterBarrier),
      cycles("window", &LatencyModel::window),
      cycles("load_lead", &LatencyModel::loadLead),
      cycles("warp_bytes_in_flight", &LatencyModel::warpBytesInFlight),
  };
  return constants;
}

std::string listNames() {
  std::string names;
  for (const NamedConstant &constant : getNamedConstants())
    names += std::string(names.empty() ? "" : ", ") + constant.name;
  return names;
}

} // namespace

std::string applyModelOverrides(GpuModel &gpu, const std::string &spec) {
  std::stringstream items(spec);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty())
      continue;
    size_t equals = item.find('=');
    std::string name = item.substr(0, equals);
    const NamedConstant *found = nullptr;
    for (const NamedConstant &constant : getNamedConstants())
      if (name == constant.name)
        found = &constant;
    if (equals == std::string::npos || !found)
      return "FDEMU_MODEL: '" + item + "' is not NAME=VALUE with a NAME of " +
             listNames();
    std::string text = item.substr(equals + 1);
    char *end = nullptr;
    double value = std::strtod(text.c_str(), &end);
    bool wholeOk =
        !found->whole || (value == std::floor(value) && value <= 1e9);
    // A latency of 0 is allowed (one cycle per instruction); the rates,
    // bandwidths and the window must be positive.
    bool positive =
        value > 0 || (found->whole && value == 0 && name != "window");
    if (text.empty() || *end || !std::isfinite(value) || !wholeOk || !positive)
      return "FDEMU_MODEL: " + name + "='" + text + "' must be " +
             (!found->whole      ? "a positive number"
              : name == "window" ? "a whole number of instructions >= 1"
                                 : "a whole number >= 0");
    found->set(gpu, value);
  }
  return "";
}

} // namespace flashdecode::emu

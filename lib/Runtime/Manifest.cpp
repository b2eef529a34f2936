//===- Manifest.cpp - What fd-compile wrote, read back --------------------===//

#include "fd/Runtime/Manifest.h"

#include "Json.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace flashdecode::rt {

namespace {

[[noreturn]] void missing(const std::string &field,
                          const std::string &expected) {
  throw std::invalid_argument("manifest: '" + field + "' must be " + expected);
}

const json::Value &member(const json::Value &object, const std::string &key,
                          const std::string &path) {
  const json::Value *value = object.find(key);
  if (!value)
    missing(path + key, "present");
  return *value;
}

int64_t integer(const json::Value &object, const std::string &key,
                const std::string &path = "") {
  const json::Value &value = member(object, key, path);
  if (value.kind != json::Value::Kind::Number ||
      value.number != static_cast<double>(static_cast<int64_t>(value.number)))
    missing(path + key, "an integer");
  return static_cast<int64_t>(value.number);
}

std::string string(const json::Value &object, const std::string &key,
                   const std::string &path = "") {
  const json::Value &value = member(object, key, path);
  if (value.kind != json::Value::Kind::String)
    missing(path + key, "a string");
  return value.string;
}

/// Sets `flag` from `object[key]` when present (a boolean); leaves it as it
/// is when absent: fields newer manifests add.
void optionalFlag(const json::Value &object, const std::string &key,
                  const std::string &path, bool &flag) {
  if (const json::Value *value = object.find(key)) {
    if (value->kind != json::Value::Kind::Bool)
      missing(path + key, "a boolean");
    flag = value->boolean;
  }
}

const std::vector<json::Value> &array(const json::Value &object,
                                      const std::string &key, size_t size,
                                      const std::string &path) {
  const json::Value &value = member(object, key, path);
  if (value.kind != json::Value::Kind::Array ||
      (size && value.array.size() != size))
    missing(path + key, size == 3 ? "an array of 3" : "an array");
  return value.array;
}

LaunchDim launchDim(const json::Value &value, const std::string &field) {
  LaunchDim dim;
  if (value.kind == json::Value::Kind::Number) {
    dim.value = static_cast<int64_t>(value.number);
  } else if (value.kind == json::Value::Kind::String &&
             value.string == "batch") {
    dim.symbol = LaunchDim::Symbol::Batch;
  } else if (value.kind == json::Value::Kind::String &&
             value.string == "num_splits") {
    dim.symbol = LaunchDim::Symbol::NumSplits;
  } else if (value.kind == json::Value::Kind::String &&
             value.string.rfind("batch/", 0) == 0 &&
             value.string.size() > 6 && value.string.size() < 12 &&
             value.string.find_first_not_of("0123456789", 6) ==
                 std::string::npos &&
             std::stoll(value.string.substr(6)) >= 1) {
    dim.symbol = LaunchDim::Symbol::Batch;
    dim.batchDivisor = std::stoll(value.string.substr(6));
  } else {
    missing(field,
            "a number, \"batch\", \"batch/N\" (N >= 1) or \"num_splits\"");
  }
  return dim;
}

std::string readFile(const std::string &path) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream)
    throw std::runtime_error("cannot read " + path);
  std::ostringstream contents;
  contents << stream.rdbuf();
  return contents.str();
}

} // namespace

Manifest Manifest::parse(const std::string &text) {
  json::Value root;
  try {
    root = json::parse(text);
  } catch (const std::runtime_error &error) {
    throw std::invalid_argument(std::string("manifest: ") + error.what());
  }
  if (root.kind != json::Value::Kind::Object)
    missing("(root)", "an object");
  Manifest manifest;
  manifest.compilerVersion = string(root, "compiler_version");
  const json::Value &config = member(root, "config", "");
  manifest.headDim = integer(config, "head_dim", "config.");
  manifest.valueHeadDim = manifest.headDim;
  if (config.find("v_head_dim"))
    manifest.valueHeadDim = integer(config, "v_head_dim", "config.");
  optionalFlag(config, "shared_kv", "config.", manifest.sharedKV);
  if (manifest.sharedKV && manifest.valueHeadDim > manifest.headDim)
    missing("config.v_head_dim",
            "at most config.head_dim with config.shared_kv (the values are "
            "the keys' first v_head_dim columns)");
  manifest.numQueryHeads = integer(config, "num_q_heads", "config.");
  manifest.numKVHeads = integer(config, "num_kv_heads", "config.");
  manifest.queryLength = integer(config, "query_len", "config.");
  manifest.dtype = string(config, "dtype", "config.");
  if (manifest.dtype != "f16" && manifest.dtype != "bf16" &&
      manifest.dtype != "f32")
    missing("config.dtype", "f16, bf16 or f32");
  manifest.kvLayout = string(config, "kv_layout", "config.");
  // fp8 caches (optional: older manifests' caches hold the dtype).
  manifest.kvDtype = manifest.dtype;
  if (config.find("kv_dtype"))
    manifest.kvDtype = string(config, "kv_dtype", "config.");
  if (manifest.kvDtype != manifest.dtype && !manifest.hasFloat8Cache())
    missing("config.kv_dtype",
            "e4m3, e5m2 or the dtype (" + manifest.dtype + ")");
  if (config.find("kv_scale"))
    manifest.kvScale = string(config, "kv_scale", "config.");
  else if (manifest.hasFloat8Cache())
    missing("config.kv_scale", "present with an fp8 kv_dtype");
  if (manifest.hasFloat8Cache()
          ? manifest.kvScale != "tensor" && manifest.kvScale != "token-head"
          : manifest.kvScale != "none")
    missing("config.kv_scale",
            manifest.hasFloat8Cache()
                ? "tensor or token-head (kv_dtype " + manifest.kvDtype + ")"
                : "none (kv_dtype " + manifest.kvDtype + ")");
  if (config.find("arch"))
    manifest.arch = string(config, "arch", "config.");
  if (config.find("page_size"))
    manifest.pageSize = integer(config, "page_size", "config.");
  if (config.find("window_left"))
    manifest.windowLeft = integer(config, "window_left", "config.");
  if (const json::Value *scale = config.find("scale")) {
    if (scale->kind != json::Value::Kind::Number || !(scale->number > 0))
      missing("config.scale", "a positive number");
    manifest.scale = scale->number;
  }
  if (const json::Value *cap = config.find("logits_soft_cap")) {
    if (cap->kind != json::Value::Kind::Number || !(cap->number > 0))
      missing("config.logits_soft_cap", "a positive number");
    manifest.logitsSoftCap = cap->number;
  }
  optionalFlag(config, "with_sinks", "config.", manifest.withSinks);
  optionalFlag(config, "with_alibi", "config.", manifest.withAlibi);
  optionalFlag(config, "with_query_lens", "config.", manifest.withQueryLens);
  optionalFlag(config, "fused_merge", "config.", manifest.fusedMerge);
  optionalFlag(config, "shared_prefix", "config.", manifest.sharedPrefix);
  if (config.find("top_k")) {
    manifest.topK = integer(config, "top_k", "config.");
    if (manifest.topK < 0)
      missing("config.top_k", "0 (dense) or the lists' length K >= 1");
  }
  if (config.find("kv_shard_world")) {
    manifest.kvShardWorld = integer(config, "kv_shard_world", "config.");
    manifest.kvShardInterleave =
        integer(config, "kv_shard_interleave", "config.");
    if (manifest.kvShardWorld < 0 || manifest.kvShardInterleave < 1)
      missing("config.kv_shard_world and config.kv_shard_interleave",
              "0 (not sharded) or a world >= 1, and an interleave >= 1");
  }
  const json::Value &withLse = member(config, "with_lse", "config.");
  if (withLse.kind != json::Value::Kind::Bool)
    missing("config.with_lse", "a boolean");
  manifest.withLse = withLse.boolean;
  manifest.numSplits = integer(root, "num_splits");
  if (const json::Value *schedule = root.find("schedule"))
    if (schedule->find("cluster_ctas")) {
      manifest.clusterCtas = integer(*schedule, "cluster_ctas", "schedule.");
      if (manifest.clusterCtas < 1)
        missing("schedule.cluster_ctas", "an integer >= 1");
    }
  const json::Value &workspace = member(root, "workspace", "");
  // The partial outputs fill the workspace up to the log-sum-exps.
  int64_t bytesPerSequence =
      integer(workspace, "bytes_per_sequence", "workspace.");
  int64_t lseOffset =
      integer(workspace, "partial_lse_offset_per_sequence", "workspace.");
  if (lseOffset < 0 || lseOffset > bytesPerSequence)
    missing("workspace.partial_lse_offset_per_sequence",
            "an integer from 0 to workspace.bytes_per_sequence");
  manifest.workspace.partialOutputBytesPerSequence = lseOffset;
  manifest.workspace.partialLseBytesPerSequence = bytesPerSequence - lseOffset;
  if (workspace.find("merge_counter_bytes_per_sequence"))
    manifest.workspace.mergeCounterBytesPerSequence =
        integer(workspace, "merge_counter_bytes_per_sequence", "workspace.");
  if (manifest.fusedMerge &&
      manifest.workspace.mergeCounterBytesPerSequence <= 0)
    missing("workspace.merge_counter_bytes_per_sequence",
            "a positive integer with config.fused_merge");

  for (const json::Value &kernel : array(root, "kernels", 0, "")) {
    KernelSpec spec;
    spec.name = string(kernel, "name", "kernels[].");
    std::string path = "kernels[" + spec.name + "].";
    spec.ptxFile = string(kernel, "ptx", path);
    for (const json::Value &param : array(kernel, "params", 0, path)) {
      std::string type = string(param, "type", path + "params[].");
      if (type != "ptr" && type != "i32")
        missing(path + "params[].type", "\"ptr\" or \"i32\"");
      spec.params.push_back(
          {string(param, "name", path + "params[]."),
           type == "ptr" ? ParamType::Pointer : ParamType::I32});
    }
    const auto &grid = array(kernel, "grid", 3, path);
    const auto &block = array(kernel, "block", 3, path);
    for (int i = 0; i < 3; ++i) {
      spec.grid[i] = launchDim(grid[i], path + "grid");
      if (block[i].kind != json::Value::Kind::Number)
        missing(path + "block", "numbers");
      spec.block[i] = static_cast<int64_t>(block[i].number);
    }
    spec.staticSharedMemoryBytes =
        integer(kernel, "static_shared_memory_bytes", path);
    spec.dynamicSharedMemoryBytes =
        integer(kernel, "dynamic_shared_memory_bytes", path);
    optionalFlag(kernel, "programmatic_launch", path, spec.programmaticLaunch);
    manifest.kernels.push_back(std::move(spec));
  }
  if (manifest.kernels.empty())
    missing("kernels", "a non-empty array");
  return manifest;
}

KernelBundle KernelBundle::load(const std::string &directory) {
  KernelBundle bundle;
  std::string manifestPath = directory + "/manifest.json";
  try {
    bundle.manifest = Manifest::parse(readFile(manifestPath));
  } catch (const std::invalid_argument &error) {
    throw std::runtime_error(manifestPath + ": " + error.what());
  }
  for (const KernelSpec &kernel : bundle.manifest.kernels)
    bundle.ptx[kernel.name] = readFile(directory + "/" + kernel.ptxFile);
  return bundle;
}

} // namespace flashdecode::rt

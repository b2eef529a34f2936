//===- FakeDriver.h - A driver table that records calls ---------*- C++ -*-===//
//
// What RuntimeTest and the per-feature fake-driver tests share: the manifest
// fd-compile writes for a small GQA kernel and its variants with a
// feature's device buffer, and a fake CUDA driver table that records calls
// and launches (kernel, grid, block, arguments) and allocates fake
// addresses, with the FakeRuntime fixture over it.
//
//===----------------------------------------------------------------------===//

#ifndef FD_UNITTESTS_RUNTIME_FAKEDRIVER_H
#define FD_UNITTESTS_RUNTIME_FAKEDRIVER_H

#include "fd/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace flashdecode::test {

using namespace flashdecode::rt;

// The manifest fd-compile writes for D=64, Hq=8, Hkv=2, f16, 4 splits, lse.
inline const char *const kManifest = R"json({
  "compiler_version": "flashdecode 0.1.0 (MLIR 22)",
  "config": {"arch": "sm_90", "chunk_length": 0, "dtype": "f16",
             "head_dim": 64, "kv_layout": "NHD", "num_kv_heads": 2,
             "num_q_heads": 8, "planned_batch": 1, "planned_max_len": 4096,
             "ptx_version": 80, "query_len": 1, "sm_count": 132,
             "with_lse": true},
  "kernels": [
    {"block": [128, 1, 1], "dynamic_shared_memory_bytes": 0,
     "grid": ["num_splits", 2, "batch"], "name": "fd_partial_attention",
     "params": [{"name": "query", "type": "ptr"},
                {"name": "key_cache", "type": "ptr"},
                {"name": "value_cache", "type": "ptr"},
                {"name": "seq_lens", "type": "ptr"},
                {"name": "partial_output", "type": "ptr"},
                {"name": "partial_lse", "type": "ptr"},
                {"name": "max_len", "type": "i32"}],
     "ptx": "fd_partial_attention.ptx", "static_shared_memory_bytes": 5248},
    {"block": [64, 1, 1], "dynamic_shared_memory_bytes": 0,
     "grid": [8, 1, "batch"], "name": "fd_merge",
     "params": [{"name": "partial_output", "type": "ptr"},
                {"name": "partial_lse", "type": "ptr"},
                {"name": "output", "type": "ptr"},
                {"name": "lse", "type": "ptr"}],
     "ptx": "fd_merge.ptx", "static_shared_memory_bytes": 0}],
  "num_splits": 4,
  "workspace": {"bytes_per_sequence": 8320, "formula": "batch * 8320",
                "partial_lse_offset_per_sequence": 8192,
                "partial_output_offset": 0}
})json";

struct Launch {
  std::string kernel;
  unsigned grid[3], block[3];
  std::vector<uint64_t> arguments;
  /// Launched with programmatic stream serialization.
  bool programmatic = false;
  unsigned sharedBytes = 0;
};

/// A cuFuncSetAttribute call: the kernel, the attribute and its value.
struct FunctionAttribute {
  std::string kernel;
  int attribute, value;
};

/// What the fake driver saw and how it answers.
struct FakeDriver {
  std::vector<std::string> calls;
  std::vector<Launch> launches;
  std::vector<FunctionAttribute> functionAttributes;
  CUresult launchResult = kCudaSuccess;
  CUresult loadResult = kCudaSuccess;
  size_t graphNodes = 0;
  size_t partialParamCount = 7;
  size_t mergeParamCount = 4;
  bool capturing = false;
  CUdeviceptr nextAddress = 0x10000;
  std::vector<std::pair<CUdeviceptr, size_t>> allocations;
};
/// The fake driver of the running test (FakeRuntime sets it).
inline FakeDriver *fake = nullptr;

inline CUresult record(const char *call) {
  fake->calls.push_back(call);
  return kCudaSuccess;
}

inline DriverApi fakeDriverApi() {
  DriverApi api;
  api.cuInit = [](unsigned) { return record("cuInit"); };
  api.cuGetErrorName = [](CUresult error, const char **name) {
    *name = error == 700   ? "CUDA_ERROR_ILLEGAL_ADDRESS"
            : error == 218 ? "CUDA_ERROR_INVALID_PTX"
                           : "CUDA_ERROR_UNKNOWN";
    return kCudaSuccess;
  };
  api.cuGetErrorString = [](CUresult, const char **text) {
    *text = "fake";
    return kCudaSuccess;
  };
  api.cuDeviceGetCount = [](int *count) {
    *count = 1;
    return record("cuDeviceGetCount");
  };
  api.cuDeviceGet = [](CUdevice *device, int) {
    *device = 0;
    return record("cuDeviceGet");
  };
  api.cuDeviceGetAttribute = [](int *value, int, CUdevice) {
    *value = 132;
    return kCudaSuccess;
  };
  api.cuDevicePrimaryCtxRetain = [](CUcontext *context, CUdevice) {
    *context = reinterpret_cast<CUcontext>(0x1);
    return record("cuDevicePrimaryCtxRetain");
  };
  api.cuDevicePrimaryCtxRelease = [](CUdevice) {
    return record("cuDevicePrimaryCtxRelease");
  };
  api.cuCtxSetCurrent = [](CUcontext) { return record("cuCtxSetCurrent"); };
  api.cuModuleLoadDataEx = [](CUmodule *module, const void *image, unsigned,
                              int *options, void **values) {
    record("cuModuleLoadDataEx");
    // The image must end in a NUL; the options carry the JIT log buffer.
    EXPECT_EQ(options[0], kJitErrorLogBuffer);
    if (fake->loadResult != kCudaSuccess) {
      std::strcpy(static_cast<char *>(values[0]),
                  "ptxas fatal: Unresolved extern function 'f'");
      return fake->loadResult;
    }
    *module = reinterpret_cast<CUmodule>(
        new std::string(static_cast<const char *>(image)));
    return kCudaSuccess;
  };
  api.cuModuleUnload = [](CUmodule module) {
    delete reinterpret_cast<std::string *>(module);
    return record("cuModuleUnload");
  };
  api.cuModuleGetFunction = [](CUfunction *function, CUmodule,
                               const char *name) {
    *function = reinterpret_cast<CUfunction>(new std::string(name));
    return kCudaSuccess;
  };
  api.cuFuncSetAttribute = [](CUfunction function, int attribute, int value) {
    fake->functionAttributes.push_back(
        {*reinterpret_cast<std::string *>(function), attribute, value});
    return record("cuFuncSetAttribute");
  };
  api.cuLaunchKernelEx = [](const CUlaunchConfig *config, CUfunction function,
                            void **params, void **) {
    record("cuLaunchKernelEx");
    if (fake->launchResult != kCudaSuccess)
      return fake->launchResult;
    Launch launch{*reinterpret_cast<std::string *>(function),
                  {config->gridDimX, config->gridDimY, config->gridDimZ},
                  {config->blockDimX, config->blockDimY, config->blockDimZ},
                  {}};
    launch.sharedBytes = config->sharedMemBytes;
    for (unsigned i = 0; i < config->numAttrs; ++i)
      if (config->attrs[i].id ==
          kLaunchAttributeProgrammaticStreamSerialization)
        launch.programmatic =
            config->attrs[i].value.programmaticStreamSerializationAllowed;
    size_t count = launch.kernel == "fd_merge" ? fake->mergeParamCount
                                               : fake->partialParamCount;
    for (size_t i = 0; i < count; ++i)
      launch.arguments.push_back(*static_cast<uint64_t *>(params[i]));
    fake->launches.push_back(launch);
    if (fake->capturing)
      ++fake->graphNodes;
    return kCudaSuccess;
  };
  api.cuMemAlloc = [](CUdeviceptr *pointer, size_t bytes) {
    *pointer = fake->nextAddress;
    fake->allocations.emplace_back(*pointer, bytes);
    fake->nextAddress += (bytes + 0xffff) & ~size_t(0xffff);
    return record("cuMemAlloc");
  };
  api.cuMemFree = [](CUdeviceptr) { return record("cuMemFree"); };
  api.cuStreamSynchronize = [](CUstream) {
    return record("cuStreamSynchronize");
  };
  // Device 3 holds what the fake allocated; 0xbad fails; the rest is unknown.
  api.cuPointerGetAttribute = [](void *data, int attribute,
                                 CUdeviceptr pointer) {
    EXPECT_EQ(attribute, kPointerAttributeDeviceOrdinal);
    if (pointer == 0xbad)
      return CUresult(700);
    for (const auto &[address, bytes] : fake->allocations)
      if (pointer >= address && pointer < address + bytes) {
        *static_cast<int *>(data) = 3;
        return kCudaSuccess;
      }
    return kCudaErrorInvalidValue;
  };
  api.cuStreamBeginCapture = [](CUstream, int) {
    fake->capturing = true;
    return record("cuStreamBeginCapture");
  };
  api.cuStreamEndCapture = [](CUstream, CUgraph *graph) {
    fake->capturing = false;
    *graph = reinterpret_cast<CUgraph>(0x6);
    return record("cuStreamEndCapture");
  };
  api.cuGraphGetNodes = [](CUgraph, CUgraphNode *, size_t *count) {
    *count = fake->graphNodes;
    return record("cuGraphGetNodes");
  };
  api.cuGraphInstantiateWithFlags = [](CUgraphExec *exec, CUgraph,
                                       unsigned long long) {
    *exec = reinterpret_cast<CUgraphExec>(0x7);
    return record("cuGraphInstantiate");
  };
  api.cuGraphLaunch = [](CUgraphExec, CUstream) {
    return record("cuGraphLaunch");
  };
  api.cuGraphExecDestroy = [](CUgraphExec) {
    return record("cuGraphExecDestroy");
  };
  api.cuGraphDestroy = [](CUgraph) { return record("cuGraphDestroy"); };
  return api;
}

class FakeRuntime : public testing::Test {
protected:
  void SetUp() override {
    fake = &state;
    driver = fakeDriverApi();
    device = std::make_unique<Device>(driver);
    bundle.manifest = Manifest::parse(kManifest);
    bundle.ptx["fd_partial_attention"] = "// partial";
    bundle.ptx["fd_merge"] = "// merge";
    buffers = {0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 3, 4096};
  }
  void TearDown() override {
    device.reset();
    fake = nullptr;
  }
  size_t count(const std::string &call) const {
    return std::count(state.calls.begin(), state.calls.end(), call);
  }

  FakeDriver state;
  DriverApi driver;
  std::unique_ptr<Device> device;
  KernelBundle bundle;
  DecodeBuffers buffers;
  CUstream stream = reinterpret_cast<CUstream>(0x5);
};

/// `text` with its first `from` replaced by `to` (a failure if absent): for
/// variants of kManifest.
inline void replaceFirst(std::string &text, const std::string &from,
                         const std::string &to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos)
    text.replace(at, from.size(), to);
}

/// `manifest` with a pointer parameter `parameter` last in `kernel`.
inline std::string appendPointerParameter(std::string manifest,
                                          const std::string &kernel,
                                          const std::string &parameter) {
  // The kernel's parameters are an array of objects: its first ']' ends it.
  size_t at = manifest.find("\"name\": \"" + kernel + "\"");
  EXPECT_NE(at, std::string::npos) << kernel;
  if (at == std::string::npos)
    return manifest;
  size_t end = manifest.find(']', manifest.find("\"params\": [", at));
  return manifest.insert(end, ", {\"name\": \"" + parameter +
                                  "\", \"type\": \"ptr\"}");
}

/// `manifest` (kManifest or a variant of it) as fd-compile writes it with a
/// feature that reads a device buffer: `flag` true in the config and a
/// pointer parameter `parameter` last in each kernel of `kernels`.
inline std::string
withBufferParameter(std::string manifest, const std::string &flag,
                    const std::string &parameter,
                    std::initializer_list<std::string> kernels) {
  replaceFirst(manifest, "\"with_lse\": true",
               "\"with_lse\": true, \"" + flag + "\": true");
  for (const std::string &kernel : kernels)
    manifest = appendPointerParameter(manifest, kernel, parameter);
  return manifest;
}

/// `manifest` (kManifest or a variant of it) as fd-compile writes it for
/// fp8 caches: `kv_dtype` and `kv_scale` in the config and the partial
/// kernel's pointer parameters k_scale and v_scale last.
inline std::string withFloat8Cache(std::string manifest,
                                   const std::string &kvDtype = "e4m3",
                                   const std::string &kvScale = "tensor") {
  replaceFirst(manifest, "\"dtype\": \"f16\",",
               "\"dtype\": \"f16\", \"kv_dtype\": \"" + kvDtype +
                   "\", \"kv_scale\": \"" + kvScale + "\",");
  for (const char *parameter : {"k_scale", "v_scale"})
    manifest =
        appendPointerParameter(manifest, "fd_partial_attention", parameter);
  return manifest;
}

/// The message of the std::invalid_argument that constructing a plan
/// throws, or "no error".
inline std::string planError(rt::Device &device, const rt::KernelBundle &bundle,
                             const rt::DecodeBuffers &buffers) {
  try {
    rt::DecodePlan plan(device, bundle, buffers);
  } catch (const std::invalid_argument &error) {
    return error.what();
  }
  return "no error";
}

} // namespace flashdecode::test

#endif // FD_UNITTESTS_RUNTIME_FAKEDRIVER_H

//===- EmulatorHarness.cpp - Run hand-written PTX on libfdemu.so ----------===//

#include "EmulatorHarness.h"

#include <dlfcn.h>

#include <cstdlib>

namespace flashdecode::emutest {

const EmulatorDriver *getEmulatorDriver(std::string &error) {
  static std::string failure;
  static const EmulatorDriver *loaded = []() -> const EmulatorDriver * {
    const char *path = std::getenv("FD_EMULATOR_LIBRARY");
    if (!path)
      path = FD_EMULATOR_LIBRARY;
    void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      const char *reason = dlerror();
      failure = std::string("cannot load ") + path + ": " +
                (reason ? reason : "dlopen failed");
      return nullptr;
    }
    static EmulatorDriver driver;
#define FD_LOAD_EMULATOR_FUNCTION(name, parameters)                            \
  driver.name =                                                                \
      reinterpret_cast<decltype(driver.name)>(dlsym(library, #name));          \
  if (!driver.name) {                                                          \
    failure = std::string(path) + " lacks " #name;                             \
    return nullptr;                                                            \
  }
    FD_EMULATOR_TEST_FUNCTIONS(FD_LOAD_EMULATOR_FUNCTION)
    FD_LOAD_EMULATOR_FUNCTION(fdemuRecordLaunches, ())
    FD_LOAD_EMULATOR_FUNCTION(fdemuGetLaunchCounters, ())
    FD_LOAD_EMULATOR_FUNCTION(fdemuScheduleLaunch, ())
#undef FD_LOAD_EMULATOR_FUNCTION
    if (CUresult result = driver.cuInit(0)) {
      failure = "cuInit failed with " + std::to_string(result);
      return nullptr;
    }
    return &driver;
  }();
  error = failure;
  return loaded;
}

std::vector<void *> KernelArguments::pointers() {
  std::vector<void *> pointers;
  for (std::vector<uint8_t> &value : storage)
    pointers.push_back(value.data());
  return pointers;
}

void EmulatorTest::SetUp() {
  std::string error;
  driver = getEmulatorDriver(error);
  ASSERT_NE(driver, nullptr) << error;
  CUdevice device = -1;
  ASSERT_EQ(driver->cuDeviceGet(&device, 0), kSuccess);
  ASSERT_EQ(driver->cuCtxCreate_v2(&context, 0, device), kSuccess);
  uint64_t seed = std::random_device{}();
  if (const char *fixed = std::getenv("FD_TEST_SEED"))
    seed = std::strtoull(fixed, nullptr, 10);
  random.seed(seed);
  seedTrace.emplace(__FILE__, __LINE__,
                    "random seed " + std::to_string(seed) + " (FD_TEST_SEED=" +
                        std::to_string(seed) + " repeats it)");
}

void EmulatorTest::TearDown() {
  if (!driver)
    return;
  // fdemu's allocations outlive contexts (one device memory per process):
  // free them even after a fault, whatever the result.
  for (CUdeviceptr pointer : allocations)
    driver->cuMemFree_v2(pointer);
  for (CUmodule module : modules)
    driver->cuModuleUnload(module);
  if (context) {
    EXPECT_EQ(driver->cuCtxDestroy_v2(context), kSuccess);
  }
  seedTrace.reset();
}

LoadResult EmulatorTest::tryLoad(const std::string &ptx) {
  LoadResult loaded;
  char log[4096] = {};
  int options[] = {rt::kJitErrorLogBuffer, rt::kJitErrorLogBufferSizeBytes};
  void *values[] = {log, reinterpret_cast<void *>(sizeof(log))};
  loaded.result = driver->cuModuleLoadDataEx(&loaded.module, ptx.c_str(), 2,
                                             options, values);
  loaded.log = log;
  if (loaded.result == kSuccess)
    modules.push_back(loaded.module);
  return loaded;
}

CUfunction EmulatorTest::getKernel(const std::string &ptx, const char *name) {
  LoadResult loaded = tryLoad(ptx);
  EXPECT_EQ(loaded.result, kSuccess) << loaded.log << "\n" << ptx;
  if (loaded.result != kSuccess)
    return nullptr;
  CUfunction function = nullptr;
  EXPECT_EQ(driver->cuModuleGetFunction(&function, loaded.module, name),
            kSuccess)
      << name;
  return function;
}

CUdeviceptr EmulatorTest::allocate(size_t bytes) {
  CUdeviceptr pointer = 0;
  EXPECT_EQ(driver->cuMemAlloc_v2(&pointer, bytes), kSuccess);
  allocations.push_back(pointer);
  return pointer;
}

CUdeviceptr EmulatorTest::uploadBytes(const void *data, size_t bytes) {
  CUdeviceptr pointer = allocate(bytes);
  EXPECT_EQ(driver->cuMemcpyHtoD_v2(pointer, data, bytes), kSuccess);
  return pointer;
}

CUresult EmulatorTest::launch(CUfunction function, Dim3 grid, Dim3 block,
                              KernelArguments arguments, unsigned sharedBytes,
                              std::optional<Dim3> cluster) {
  if (!function)
    return -1;
  std::vector<void *> parameters = arguments.pointers();
  if (cluster) {
    rt::CUlaunchAttribute attribute;
    attribute.id = rt::kLaunchAttributeClusterDimension;
    attribute.value.clusterDim = {cluster->x, cluster->y, cluster->z};
    rt::CUlaunchConfig config;
    config.gridDimX = grid.x;
    config.gridDimY = grid.y;
    config.gridDimZ = grid.z;
    config.blockDimX = block.x;
    config.blockDimY = block.y;
    config.blockDimZ = block.z;
    config.sharedMemBytes = sharedBytes;
    config.attrs = &attribute;
    config.numAttrs = 1;
    if (CUresult result = driver->cuLaunchKernelEx(&config, function,
                                                   parameters.data(), nullptr))
      return result;
  } else if (CUresult result = driver->cuLaunchKernel(
                 function, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                 sharedBytes, nullptr, parameters.data(), nullptr)) {
    return result;
  }
  return driver->cuCtxSynchronize();
}

testing::AssertionResult
EmulatorTest::launchSucceeds(CUfunction function, Dim3 grid, Dim3 block,
                             KernelArguments arguments, unsigned sharedBytes,
                             std::optional<Dim3> cluster) {
  CUresult result =
      launch(function, grid, block, std::move(arguments), sharedBytes, cluster);
  if (result == kSuccess)
    return testing::AssertionSuccess();
  return testing::AssertionFailure()
         << "the launch gave CUresult " << result << ": "
         << (result > 0 ? errorString(result) : "no kernel");
}

FdemuCounters EmulatorTest::launchCounted(CUfunction function, Dim3 grid,
                                          Dim3 block, KernelArguments arguments,
                                          unsigned sharedBytes,
                                          std::optional<Dim3> cluster) {
  FdemuCounters counters;
  std::memset(&counters, 0, sizeof(counters));
  driver->fdemuRecordLaunches(1);
  EXPECT_TRUE(launchSucceeds(function, grid, block, std::move(arguments),
                             sharedBytes, cluster));
  EXPECT_EQ(driver->fdemuGetLaunchCounters(0, &counters), 0);
  driver->fdemuRecordLaunches(0);
  return counters;
}

std::string EmulatorTest::errorString(CUresult error) {
  const char *text = nullptr;
  EXPECT_EQ(driver->cuGetErrorString(error, &text), kSuccess);
  return text ? text : "";
}

} // namespace flashdecode::emutest

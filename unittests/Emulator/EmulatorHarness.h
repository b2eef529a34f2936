//===- EmulatorHarness.h - Run hand-written PTX on libfdemu.so --*- C++ -*-===//
//
// The emulator tests reach fdemu only as a CUDA application reaches a GPU:
// through the driver API of build/lib/libfdemu.so, loaded with dlopen. The
// fixture gives each test a fresh context (faults are sticky in a context),
// device buffers it frees, and launches that return the CUresult of the
// synchronizing call, where a kernel fault shows.
//
//===----------------------------------------------------------------------===//

#ifndef FD_UNITTESTS_EMULATOR_EMULATORHARNESS_H
#define FD_UNITTESTS_EMULATOR_EMULATORHARNESS_H

#include "fd/Emulator/Emulator.h"
#include "fd/Runtime/Driver.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace flashdecode::emutest {

using rt::CUcontext;
using rt::CUdevice;
using rt::CUdeviceptr;
using rt::CUfunction;
using rt::CUmodule;
using rt::CUresult;

/// The module header of the tests' hand-written PTX.
constexpr const char *kPtxHeader = ".version 8.0\n"
                                   ".target sm_90\n"
                                   ".address_size 64\n";

constexpr CUresult kSuccess = 0;
constexpr CUresult kInvalidImage = 200;
constexpr CUresult kInvalidPtx = 218;
constexpr CUresult kIllegalAddress = 700;
constexpr CUresult kMisalignedAddress = 716;
constexpr CUresult kLaunchFailed = 719;

// X(member, parameter list): the entry points the tests call, by their
// exported (cuda.h) names.
#define FD_EMULATOR_TEST_FUNCTIONS(X)                                          \
  X(cuInit, (unsigned flags))                                                  \
  X(cuDeviceGet, (CUdevice * device, int ordinal))                             \
  X(cuCtxCreate_v2, (CUcontext * context, unsigned flags, CUdevice device))    \
  X(cuCtxDestroy_v2, (CUcontext context))                                      \
  X(cuCtxSetCurrent, (CUcontext context))                                      \
  X(cuCtxSynchronize, ())                                                      \
  X(cuModuleLoadData, (CUmodule * module, const void *image))                  \
  X(cuModuleLoadDataEx, (CUmodule * module, const void *image,                 \
                         unsigned numOptions, int *options, void **values))    \
  X(cuModuleUnload, (CUmodule module))                                         \
  X(cuModuleGetFunction,                                                       \
    (CUfunction * function, CUmodule module, const char *name))                \
  X(cuMemAlloc_v2, (CUdeviceptr * pointer, size_t bytes))                      \
  X(cuMemFree_v2, (CUdeviceptr pointer))                                       \
  X(cuMemcpyHtoD_v2,                                                           \
    (CUdeviceptr destination, const void *source, size_t bytes))               \
  X(cuMemcpyDtoH_v2, (void *destination, CUdeviceptr source, size_t bytes))    \
  X(cuLaunchKernel,                                                            \
    (CUfunction function, unsigned gridX, unsigned gridY, unsigned gridZ,      \
     unsigned blockX, unsigned blockY, unsigned blockZ, unsigned sharedBytes,  \
     rt::CUstream stream, void **params, void **extra))                        \
  X(cuLaunchKernelEx, (const rt::CUlaunchConfig *config, CUfunction function,  \
                       void **params, void **extra))                           \
  X(cuStreamCreate, (rt::CUstream * stream, unsigned flags))                   \
  X(cuStreamDestroy_v2, (rt::CUstream stream))                                 \
  X(cuEventCreate, (rt::CUevent * event, unsigned flags))                      \
  X(cuEventRecord, (rt::CUevent event, rt::CUstream stream))                   \
  X(cuEventElapsedTime,                                                        \
    (float *milliseconds, rt::CUevent start, rt::CUevent end))                 \
  X(cuEventDestroy_v2, (rt::CUevent event))                                    \
  X(cuStreamBeginCapture_v2, (rt::CUstream stream, int mode))                  \
  X(cuStreamEndCapture, (rt::CUstream stream, rt::CUgraph * graph))            \
  X(cuGraphInstantiateWithFlags,                                               \
    (rt::CUgraphExec * exec, rt::CUgraph graph, unsigned long long flags))     \
  X(cuGraphLaunch, (rt::CUgraphExec exec, rt::CUstream stream))                \
  X(cuGraphExecDestroy, (rt::CUgraphExec exec))                                \
  X(cuGraphDestroy, (rt::CUgraph graph))                                       \
  X(cuFuncGetAttribute, (int *value, int attribute, CUfunction function))      \
  X(cuFuncSetAttribute, (CUfunction function, int attribute, int value))       \
  X(cuGetErrorString, (CUresult error, const char **text))

struct EmulatorDriver {
#define FD_DECLARE_EMULATOR_FUNCTION(name, parameters)                         \
  CUresult(*name) parameters = nullptr;
  FD_EMULATOR_TEST_FUNCTIONS(FD_DECLARE_EMULATOR_FUNCTION)
#undef FD_DECLARE_EMULATOR_FUNCTION
  /// fdemu's own entry points (fd/Emulator/Emulator.h).
  void (*fdemuRecordLaunches)(int enable) = nullptr;
  int (*fdemuGetLaunchCounters)(int index, FdemuCounters *counters) = nullptr;
  int (*fdemuScheduleLaunch)(FdemuStreamClock *clock,
                             const FdemuCounters *counters, int fromGraph,
                             int programmatic) = nullptr;
};

/// libfdemu.so ($FD_EMULATOR_LIBRARY, else the build's copy), loaded and
/// initialized once; null with `error` set when that fails.
const EmulatorDriver *getEmulatorDriver(std::string &error);

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

/// The result of cuModuleLoadDataEx with a JIT error log.
struct LoadResult {
  CUresult result = kSuccess;
  std::string log;
  CUmodule module = nullptr;
};

/// The parameters' bytes, in order, for a launch.
class KernelArguments {
public:
  template <typename... Values> explicit KernelArguments(Values... values) {
    (add(values), ...);
  }
  std::vector<void *> pointers();

private:
  template <typename T> void add(T value) {
    storage.emplace_back(sizeof(T));
    std::memcpy(storage.back().data(), &value, sizeof(T));
  }
  std::vector<std::vector<uint8_t>> storage;
};

class EmulatorTest : public testing::Test {
protected:
  void SetUp() override;
  void TearDown() override;

  /// Loads `ptx` and returns the result, the JIT log and the module (owned
  /// by the fixture).
  LoadResult tryLoad(const std::string &ptx);
  /// Loads `ptx` (a test failure names the log) and returns kernel `name`,
  /// or null.
  CUfunction getKernel(const std::string &ptx, const char *name);

  /// Device memory nothing has written yet, freed after the test.
  CUdeviceptr allocate(size_t bytes);
  CUdeviceptr uploadBytes(const void *data, size_t bytes);
  template <typename T> CUdeviceptr upload(const std::vector<T> &values) {
    return uploadBytes(values.data(), values.size() * sizeof(T));
  }
  template <typename T>
  std::vector<T> download(CUdeviceptr pointer, size_t count) {
    std::vector<T> values(count);
    EXPECT_EQ(
        driver->cuMemcpyDtoH_v2(values.data(), pointer, count * sizeof(T)),
        kSuccess);
    return values;
  }

  /// Launches on the default stream and returns cuCtxSynchronize's result
  /// (or the launch's, when the launch itself fails); with `cluster`, by
  /// cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION.
  CUresult launch(CUfunction function, Dim3 grid, Dim3 block,
                  KernelArguments arguments, unsigned sharedBytes = 0,
                  std::optional<Dim3> cluster = std::nullopt);

  /// Launches with fdemu recording and returns the launch's counters (a
  /// test failure when the launch fails).
  FdemuCounters launchCounted(CUfunction function, Dim3 grid, Dim3 block,
                              KernelArguments arguments,
                              unsigned sharedBytes = 0,
                              std::optional<Dim3> cluster = std::nullopt);

  /// launch, as a gtest assertion whose failure carries fdemu's report.
  testing::AssertionResult
  launchSucceeds(CUfunction function, Dim3 grid, Dim3 block,
                 KernelArguments arguments, unsigned sharedBytes = 0,
                 std::optional<Dim3> cluster = std::nullopt);

  /// cuGetErrorString of `error`: fdemu's report of the last fault with
  /// that code.
  std::string errorString(CUresult error);

  const EmulatorDriver *driver = nullptr;
  CUcontext context = nullptr;
  /// Seeded afresh per test; the seed is in the test's failure messages.
  std::mt19937_64 random;

private:
  std::vector<CUmodule> modules;
  std::vector<CUdeviceptr> allocations;
  std::optional<testing::ScopedTrace> seedTrace;
};

} // namespace flashdecode::emutest

#endif // FD_UNITTESTS_EMULATOR_EMULATORHARNESS_H

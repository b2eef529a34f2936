//===- DriverDevice.cpp - libfdemu.so: errors, the device, contexts -------===//
//
// Entry points with the driver's names and C ABI (cuda.h's `_v2` names and
// the plain ones), so a program written against libcuda runs unmodified.
// This file: errors, initialization, the device and contexts. Modules and
// memory: DriverMemory.cpp; streams, events, graphs, launches:
// DriverStreams.cpp.
//
//===----------------------------------------------------------------------===//

#include "DriverState.h"

#include <cmath>
#include <cstdio>

using namespace flashdecode::rt;
using namespace flashdecode::emu;

namespace flashdecode::emu {

thread_local CUctx_st *Driver::current = nullptr;
thread_local std::vector<CUctx_st *> Driver::contextStack;

Driver &Driver::get() {
  static Driver *driver = new Driver; // never destroyed: atexit-safe
  return *driver;
}

CUresult Driver::contextError() const {
  if (!initialized)
    return kNotInitialized;
  if (!current)
    return kInvalidContext;
  return current->stickyError;
}

} // namespace flashdecode::emu

namespace {

struct ErrorInfo {
  CUresult code;
  const char *name;
  const char *text;
};

const ErrorInfo kErrors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {401, "CUDA_ERROR_ILLEGAL_STATE",
     "the operation cannot be performed in "
     "the present state"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {715, "CUDA_ERROR_ILLEGAL_INSTRUCTION",
     "an illegal instruction was encountered"},
    {716, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {904, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
     "capture was not initiated in this stream"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorInfo *findError(CUresult code) {
  for (const ErrorInfo &info : kErrors)
    if (info.code == code)
      return &info;
  return nullptr;
}

using Lock = std::lock_guard<std::recursive_mutex>;

} // namespace

#define FDEMU_API extern "C" __attribute__((visibility("default")))

FDEMU_API CUresult cuGetErrorName(CUresult error, const char **name) {
  const ErrorInfo *info = findError(error);
  if (!name)
    return kInvalidValue;
  *name = info ? info->name : nullptr;
  return info ? 0 : kInvalidValue;
}

FDEMU_API CUresult cuGetErrorString(CUresult error, const char **text) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  const ErrorInfo *info = findError(error);
  if (!text)
    return kInvalidValue;
  if (!info) {
    *text = nullptr;
    return kInvalidValue;
  }
  std::string &report = driver.lastReport[error];
  *text = report.empty() ? info->text : report.c_str();
  return 0;
}

FDEMU_API CUresult cuInit(unsigned flags) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  if (flags != 0)
    return kInvalidValue;
  // An emulated GPU fdemu does not know, or a constant it cannot set, is
  // the caller's to fix: no run on another model than the one asked for.
  if (const std::string &error = getGpuModelError(); !error.empty()) {
    driver.lastReport[kInvalidValue] = "fdemu: " + error;
    return kInvalidValue;
  }
  driver.initialized = true;
  return 0;
}

FDEMU_API CUresult cuDriverGetVersion(int *version) {
  if (!version)
    return kInvalidValue;
  *version = 13000;
  return 0;
}

FDEMU_API CUresult cuDeviceGetCount(int *count) {
  if (!count)
    return kInvalidValue;
  if (!Driver::get().initialized)
    return kNotInitialized;
  *count = 1;
  return 0;
}

FDEMU_API CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  if (!Driver::get().initialized)
    return kNotInitialized;
  if (!device)
    return kInvalidValue;
  if (ordinal != 0)
    return kInvalidDevice;
  *device = 0;
  return 0;
}

FDEMU_API CUresult cuDeviceGetAttribute(int *value, int attribute,
                                        CUdevice device) {
  if (!Driver::get().initialized)
    return kNotInitialized;
  if (!value)
    return kInvalidValue;
  if (device != 0)
    return kInvalidDevice;
  const GpuModel &gpu = getGpuModel();
  switch (attribute) {
  case 1: // MAX_THREADS_PER_BLOCK
  case 2: // MAX_BLOCK_DIM_X
  case 3:
    *value = 1024;
    return 0;
  case 4:
    *value = 64;
    return 0;
  case 5:
    *value = 2147483647;
    return 0;
  case 6:
  case 7:
    *value = 65535;
    return 0;
  case 8: // MAX_SHARED_MEMORY_PER_BLOCK
    *value = 49152;
    return 0;
  case 10: // WARP_SIZE
    *value = 32;
    return 0;
  case 12: // MAX_REGISTERS_PER_BLOCK
    *value = 65536;
    return 0;
  case 13: // CLOCK_RATE (kHz)
    *value = static_cast<int>(gpu.clockGHz * 1e6);
    return 0;
  case kDeviceAttributeMultiprocessorCount:
    *value = gpu.numSMs;
    return 0;
  case kDeviceAttributeMemoryClockRate: // kHz, two transfers per clock
    *value = static_cast<int>(std::lround(gpu.peakDramBytesPerSecond /
                                          (2.0 * gpu.memoryBusBits / 8) / 1e3));
    return 0;
  case kDeviceAttributeGlobalMemoryBusWidth:
    *value = gpu.memoryBusBits;
    return 0;
  case 38: // L2_CACHE_SIZE
    *value = gpu.l2Bytes;
    return 0;
  case 39: // MAX_THREADS_PER_MULTIPROCESSOR
    *value = 2048;
    return 0;
  case 41: // UNIFIED_ADDRESSING
    *value = 1;
    return 0;
  case 75: // COMPUTE_CAPABILITY_MAJOR
    *value = gpu.computeMajor;
    return 0;
  case 76:
    *value = gpu.computeMinor;
    return 0;
  case 81: // MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
    *value = gpu.computeMajor >= 9 ? 233472 : 167936;
    return 0;
  case 97: // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    *value = gpu.computeMajor >= 9 ? 232448 : 166912;
    return 0;
  default:
    *value = 0;
    return attribute > 0 && attribute < 140 ? 0 : kInvalidValue;
  }
}

FDEMU_API CUresult cuDeviceGetName(char *name, int length, CUdevice device) {
  if (!Driver::get().initialized)
    return kNotInitialized;
  if (!name || length <= 0)
    return kInvalidValue;
  if (device != 0)
    return kInvalidDevice;
  std::snprintf(name, length, "%s", getGpuModel().deviceName.c_str());
  return 0;
}

FDEMU_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice device) {
  if (!bytes)
    return kInvalidValue;
  if (device != 0)
    return kInvalidDevice;
  *bytes = getGpuModel().memoryBytes;
  return 0;
}

FDEMU_API CUresult cuDeviceTotalMem(size_t *bytes, CUdevice device) {
  return cuDeviceTotalMem_v2(bytes, device);
}

FDEMU_API CUresult cuDeviceComputeCapability(int *major, int *minor,
                                             CUdevice device) {
  if (!major || !minor)
    return kInvalidValue;
  if (device != 0)
    return kInvalidDevice;
  *major = getGpuModel().computeMajor;
  *minor = getGpuModel().computeMinor;
  return 0;
}

FDEMU_API CUresult cuDevicePrimaryCtxRetain(CUcontext *context,
                                            CUdevice device) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  if (!driver.initialized)
    return kNotInitialized;
  if (!context)
    return kInvalidValue;
  if (device != 0)
    return kInvalidDevice;
  if (driver.primaryReferences++ == 0)
    driver.primary.stickyError = 0;
  driver.primary.isPrimary = true;
  *context = &driver.primary;
  return 0;
}

FDEMU_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  if (device != 0)
    return kInvalidDevice;
  if (driver.primaryReferences == 0)
    return kInvalidContext;
  --driver.primaryReferences;
  return 0;
}

FDEMU_API CUresult cuDevicePrimaryCtxRelease(CUdevice device) {
  return cuDevicePrimaryCtxRelease_v2(device);
}

FDEMU_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice device) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  if (device != 0)
    return kInvalidDevice;
  driver.primary.stickyError = 0;
  return 0;
}

FDEMU_API CUresult cuDevicePrimaryCtxReset(CUdevice device) {
  return cuDevicePrimaryCtxReset_v2(device);
}

FDEMU_API CUresult cuCtxSetCurrent(CUcontext context) {
  if (!Driver::get().initialized)
    return kNotInitialized;
  Driver::current = context;
  return 0;
}

FDEMU_API CUresult cuCtxGetCurrent(CUcontext *context) {
  if (!context)
    return kInvalidValue;
  *context = Driver::current;
  return 0;
}

FDEMU_API CUresult cuCtxGetDevice(CUdevice *device) {
  if (!device)
    return kInvalidValue;
  if (!Driver::current)
    return kInvalidContext;
  *device = 0;
  return 0;
}

FDEMU_API CUresult cuCtxCreate_v2(CUcontext *context, unsigned,
                                  CUdevice device) {
  if (!Driver::get().initialized)
    return kNotInitialized;
  if (!context)
    return kInvalidValue;
  if (device != 0)
    return kInvalidDevice;
  *context = new CUctx_st;
  Driver::current = *context;
  return 0;
}

FDEMU_API CUresult cuCtxCreate(CUcontext *context, unsigned flags,
                               CUdevice device) {
  return cuCtxCreate_v2(context, flags, device);
}

FDEMU_API CUresult cuCtxDestroy_v2(CUcontext context) {
  if (!context || context->isPrimary)
    return kInvalidContext;
  if (Driver::current == context)
    Driver::current = nullptr;
  delete context;
  return 0;
}

FDEMU_API CUresult cuCtxDestroy(CUcontext context) {
  return cuCtxDestroy_v2(context);
}

FDEMU_API CUresult cuCtxPushCurrent_v2(CUcontext context) {
  if (!context)
    return kInvalidContext;
  Driver::contextStack.push_back(Driver::current);
  Driver::current = context;
  return 0;
}

FDEMU_API CUresult cuCtxPopCurrent_v2(CUcontext *context) {
  if (!Driver::current)
    return kInvalidContext;
  if (context)
    *context = Driver::current;
  Driver::current = nullptr;
  if (!Driver::contextStack.empty()) {
    Driver::current = Driver::contextStack.back();
    Driver::contextStack.pop_back();
  }
  return 0;
}

FDEMU_API CUresult cuCtxSynchronize() {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  return driver.contextError();
}

// Entry points a driver-API program may look up that fdemu cannot honour:
// present, so the program gets CUDA_ERROR_NOT_SUPPORTED rather than a
// missing symbol.
FDEMU_API CUresult cuModuleGetGlobal_v2(CUdeviceptr *, size_t *, CUmodule,
                                        const char *) {
  return kNotSupported;
}
FDEMU_API CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned) {
  return kNotSupported;
}
FDEMU_API CUresult cuLaunchCooperativeKernel(CUfunction, unsigned, unsigned,
                                             unsigned, unsigned, unsigned,
                                             unsigned, unsigned, CUstream,
                                             void **) {
  return kNotSupported;
}
FDEMU_API CUresult cuMemcpy2D_v2(const void *) { return kNotSupported; }

//===- DriverApi.cpp - The CUDA driver API of libfdemu.so: devices, memory --===//
//
// Entry points with the driver's names and C ABI (cuda.h's `_v2` names and
// the plain ones), so a program written against libcuda runs unmodified.
// This file: errors, initialization, the device, contexts, modules and
// memory. Streams, events, graphs and launches: DriverStreams.cpp.
//
//===----------------------------------------------------------------------===//

#include "DriverState.h"

#include <cstdio>
#include <cstring>
#include <new>

using namespace fd::rt;
using namespace fd::emu;

namespace fd::emu {

thread_local CUctx_st *Driver::current = nullptr;

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

} // namespace fd::emu

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
    {401, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in "
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

/// [address, address + bytes) inside one allocation, or null.
Allocation *findRange(Driver &driver, CUdeviceptr address, size_t bytes) {
  return driver.memory.find(address, bytes ? bytes : 1);
}

unsigned parseSmVersion(const std::string &target) {
  // "sm_90", "sm_90a", "sm_80, debug"
  if (target.rfind("sm_", 0) != 0)
    return 0;
  return static_cast<unsigned>(std::strtoul(target.c_str() + 3, nullptr, 10));
}

void writeLog(unsigned numOptions, const int *options, void **values,
              const std::string &message) {
  char *buffer = nullptr;
  size_t size = 0;
  for (unsigned i = 0; i < numOptions; ++i) {
    if (options[i] == kJitErrorLogBuffer)
      buffer = static_cast<char *>(values[i]);
    if (options[i] == kJitErrorLogBufferSizeBytes)
      size = reinterpret_cast<size_t>(values[i]);
  }
  if (buffer && size) {
    std::strncpy(buffer, message.c_str(), size - 1);
    buffer[size - 1] = '\0';
  }
}

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

FDEMU_API CUresult cuCtxCreate_v2(CUcontext *context, unsigned, CUdevice device) {
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

FDEMU_API CUresult cuCtxSynchronize() {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  return driver.contextError();
}

FDEMU_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image,
                                      unsigned numOptions, int *options,
                                      void **values) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  if (CUresult error = driver.contextError())
    return error;
  if (!module || !image)
    return kInvalidValue;
  const char *text = static_cast<const char *>(image);
  if (std::memcmp(text, "\x7f" "ELF", 4) == 0) {
    writeLog(numOptions, options, values,
             "fdemu: this image is a cubin; fdemu executes PTX text only");
    return kInvalidImage;
  }
  auto loaded = std::make_unique<CUmod_st>();
  try {
    loaded->module = parseModule(text);
  } catch (const ParseError &error) {
    writeLog(numOptions, options, values, "fdemu: " + error.message);
    return kInvalidPtx;
  } catch (const std::exception &error) {
    writeLog(numOptions, options, values,
             std::string("fdemu: malformed PTX: ") + error.what());
    return kInvalidPtx;
  }
  const GpuModel &gpu = getGpuModel();
  unsigned required = parseSmVersion(loaded->module.target);
  unsigned available = gpu.computeMajor * 10 + gpu.computeMinor;
  if (required > available) {
    writeLog(numOptions, options, values,
             "ptxas fatal: .target " + loaded->module.target +
                 " is newer than the device (" + gpu.deviceName + ", sm_" +
                 std::to_string(available) + ")");
    return kInvalidPtx;
  }
  for (const auto &[name, kernel] : loaded->module.kernels) {
    std::string missing = checkImplemented(*kernel);
    if (!missing.empty()) {
      writeLog(numOptions, options, values,
               "fdemu: kernel " + name + ": " + missing);
      return kInvalidPtx;
    }
  }
  *module = loaded.release();
  return 0;
}

FDEMU_API CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  return cuModuleLoadDataEx(module, image, 0, nullptr, nullptr);
}

FDEMU_API CUresult cuModuleUnload(CUmodule module) {
  if (!module)
    return kInvalidHandle;
  Lock lock(Driver::get().mutex);
  delete module;
  return 0;
}

FDEMU_API CUresult cuModuleGetFunction(CUfunction *function, CUmodule module,
                                       const char *name) {
  if (!function || !module || !name)
    return !module ? kInvalidHandle : kInvalidValue;
  Lock lock(Driver::get().mutex);
  auto found = module->module.kernels.find(name);
  if (found == module->module.kernels.end())
    return kNotFound;
  module->functions.push_back(std::make_unique<CUfunc_st>());
  module->functions.back()->kernel = found->second;
  *function = module->functions.back().get();
  return 0;
}

FDEMU_API CUresult cuFuncGetAttribute(int *value, int attribute,
                                      CUfunction function) {
  if (!value || !function)
    return kInvalidValue;
  const Kernel &kernel = *function->kernel;
  switch (attribute) {
  case 0: // MAX_THREADS_PER_BLOCK
    *value = kernel.maxThreads ? kernel.maxThreads : 1024;
    return 0;
  case 1: // SHARED_SIZE_BYTES
    *value = kernel.staticSharedBytes;
    return 0;
  case 3: // LOCAL_SIZE_BYTES
    *value = kernel.localBytes;
    return 0;
  default:
    *value = 0;
    return 0;
  }
}

FDEMU_API CUresult cuMemAlloc_v2(CUdeviceptr *pointer, size_t bytes) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  if (CUresult error = driver.contextError())
    return error;
  if (!pointer || bytes == 0)
    return kInvalidValue;
  if (driver.memory.getBytesInUse() + bytes > getGpuModel().memoryBytes)
    return kOutOfMemory;
  *pointer = driver.memory.allocate(bytes);
  return *pointer ? 0 : kOutOfMemory;
}

FDEMU_API CUresult cuMemAlloc(CUdeviceptr *pointer, size_t bytes) {
  return cuMemAlloc_v2(pointer, bytes);
}

FDEMU_API CUresult cuMemFree_v2(CUdeviceptr pointer) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  if (!driver.initialized)
    return kNotInitialized;
  if (pointer == 0)
    return 0;
  return driver.memory.free(pointer) ? 0 : kInvalidValue;
}

FDEMU_API CUresult cuMemFree(CUdeviceptr pointer) {
  return cuMemFree_v2(pointer);
}

FDEMU_API CUresult cuMemGetInfo_v2(size_t *freeBytes, size_t *totalBytes) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  if (!freeBytes || !totalBytes)
    return kInvalidValue;
  *totalBytes = getGpuModel().memoryBytes;
  *freeBytes = *totalBytes - driver.memory.getBytesInUse();
  return 0;
}

FDEMU_API CUresult cuMemcpyHtoD_v2(CUdeviceptr destination, const void *source,
                                   size_t bytes) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  if (CUresult error = driver.contextError())
    return error;
  if (bytes == 0)
    return 0;
  Allocation *allocation = findRange(driver, destination, bytes);
  if (!allocation || !source)
    return kInvalidValue;
  uint64_t offset = destination - allocation->base;
  std::memcpy(allocation->data.get() + offset, source, bytes);
  std::memset(allocation->initialized.get() + offset, 1, bytes);
  return 0;
}

FDEMU_API CUresult cuMemcpyHtoD(CUdeviceptr destination, const void *source,
                                size_t bytes) {
  return cuMemcpyHtoD_v2(destination, source, bytes);
}

FDEMU_API CUresult cuMemcpyDtoH_v2(void *destination, CUdeviceptr source,
                                   size_t bytes) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  if (CUresult error = driver.contextError())
    return error;
  if (bytes == 0)
    return 0;
  Allocation *allocation = findRange(driver, source, bytes);
  if (!allocation || !destination)
    return kInvalidValue;
  std::memcpy(destination, allocation->data.get() + (source - allocation->base),
              bytes);
  return 0;
}

FDEMU_API CUresult cuMemcpyDtoH(void *destination, CUdeviceptr source,
                                size_t bytes) {
  return cuMemcpyDtoH_v2(destination, source, bytes);
}

FDEMU_API CUresult cuPointerGetAttribute(void *data, int attribute,
                                         CUdeviceptr pointer) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  if (!data)
    return kInvalidValue;
  if (!findRange(driver, pointer, 1))
    return kInvalidValue;
  switch (attribute) {
  case 1: // CONTEXT
    *static_cast<CUcontext *>(data) = Driver::current;
    return 0;
  case 2: // MEMORY_TYPE: device
    *static_cast<unsigned *>(data) = 2;
    return 0;
  case 3: // DEVICE_POINTER
    *static_cast<CUdeviceptr *>(data) = pointer;
    return 0;
  case 9: // DEVICE_ORDINAL
    *static_cast<int *>(data) = 0;
    return 0;
  default:
    return kNotSupported;
  }
}

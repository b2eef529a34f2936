//===- DriverMemory.cpp - libfdemu.so: modules and device memory ----------===//
//
// cuModuleLoadData parses and checks the PTX once (an unsupported construct
// or a .target newer than the emulated GPU is CUDA_ERROR_INVALID_PTX with a
// JIT log naming it); allocations live in fdemu's DeviceMemory, and host
// copies mark the bytes they write as initialized.
//
//===----------------------------------------------------------------------===//

#include "DriverState.h"
#include "Opcodes.h"
#include "Ptxas.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace flashdecode::rt;
using namespace flashdecode::emu;

namespace {

using Lock = std::lock_guard<std::recursive_mutex>;

/// [address, address + bytes) inside one allocation, or null.
Allocation *findRange(Driver &driver, CUdeviceptr address, size_t bytes) {
  return driver.memory.find(address, bytes ? bytes : 1);
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
  if (std::memcmp(text,
                  "\x7f"
                  "ELF",
                  4) == 0) {
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
  // The GPU's JIT assembles for the device, so ptxas does too (keeping the
  // "a" of architecture-specific PTX such as sm_90a).
  const std::string &target = loaded->module.target;
  size_t suffix = target.find_first_not_of("0123456789", 3);
  bool specific = required == available && suffix != std::string::npos &&
                  target[suffix] == 'a';
  loaded->registers = getPtxasRegisters(
      text, "sm_" + std::to_string(available) + (specific ? "a" : ""));
  *module = loaded.release();
  return 0;
}

FDEMU_API CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  return cuModuleLoadDataEx(module, image, 0, nullptr, nullptr);
}

FDEMU_API CUresult cuModuleLoad(CUmodule *module, const char *path) {
  std::ifstream file(path ? path : "");
  if (!file)
    return kNotFound;
  std::stringstream text;
  text << file.rdbuf();
  return cuModuleLoadData(module, text.str().c_str());
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
  auto registers = module->registers.find(name);
  if (registers != module->registers.end()) {
    module->functions.back()->registersPerThread = registers->second;
    module->functions.back()->registersAssumed = false;
  }
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
  case 4: // NUM_REGS: ptxas's count, or the one fdemu assumes
    *value = static_cast<int>(function->registersPerThread);
    return 0;
  default:
    *value = 0;
    return 0;
  }
}

/// What the latency model assumes too: the CTAs of `blockSize` threads one
/// SM of the emulated GPU holds, from the kernel's registers (ptxas's count
/// or the assumed one) and shared memory.
FDEMU_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(
    int *numBlocks, CUfunction function, int blockSize,
    size_t dynamicSharedBytes) {
  if (!numBlocks || !function || blockSize <= 0 || blockSize > 1024)
    return kInvalidValue;
  const Kernel &kernel = *function->kernel;
  *numBlocks = static_cast<int>(getResidentCtasPerSM(
      getGpuModel().smResources, static_cast<uint64_t>(blockSize),
      kernel.getSharedBytes(static_cast<uint32_t>(dynamicSharedBytes)),
      function->registersPerThread));
  return 0;
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
  if (!driver.memory.free(pointer))
    return kInvalidValue;
  // Freed, but a faulted context reports its error here too, as a GPU's.
  return Driver::current ? Driver::current->stickyError : 0;
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

// Host copies run at once, also on a stream (work runs in enqueue order).
FDEMU_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr destination,
                                        const void *source, size_t bytes,
                                        CUstream stream) {
  if (stream && stream->capture)
    return kCaptureUnsupported;
  return cuMemcpyHtoD_v2(destination, source, bytes);
}

FDEMU_API CUresult cuMemcpyDtoHAsync_v2(void *destination, CUdeviceptr source,
                                        size_t bytes, CUstream stream) {
  if (stream && stream->capture)
    return kCaptureUnsupported;
  return cuMemcpyDtoH_v2(destination, source, bytes);
}

// Page-locked host memory is ordinary host memory here.
FDEMU_API CUresult cuMemAllocHost_v2(void **pointer, size_t bytes) {
  if (!pointer)
    return kInvalidValue;
  *pointer = std::malloc(bytes ? bytes : 1);
  return *pointer ? 0 : kOutOfMemory;
}

FDEMU_API CUresult cuMemHostAlloc(void **pointer, size_t bytes, unsigned) {
  return cuMemAllocHost_v2(pointer, bytes);
}

FDEMU_API CUresult cuMemFreeHost(void *pointer) {
  std::free(pointer);
  return 0;
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

//===- Driver.cpp - The CUDA driver API, loaded with dlopen ---------------===//

#include "fd/Runtime/Driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace flashdecode::rt {

DriverApi loadDriver(const char *libraryName) {
  void *library = dlopen(libraryName, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *reason = dlerror();
    throw CudaError(std::string("no CUDA driver: ") + libraryName +
                        " not found (" + (reason ? reason : "dlopen failed") +
                        ")",
                    -1);
  }
  DriverApi driver;
#define FD_LOAD_DRIVER_FUNCTION(member, symbol, parameters)                    \
  driver.member =                                                              \
      reinterpret_cast<decltype(driver.member)>(dlsym(library, symbol));       \
  if (!driver.member)                                                          \
    throw CudaError(std::string("CUDA driver ") + libraryName +                \
                        " lacks " symbol "; a driver for CUDA 12 or newer is " \
                        "needed",                                              \
                    -1);
  FD_CUDA_DRIVER_FUNCTIONS(FD_LOAD_DRIVER_FUNCTION)
#undef FD_LOAD_DRIVER_FUNCTION
  // The library stays loaded for the life of the process, like the table.
  return driver;
}

std::string getDriverLibraryName() {
  const char *chosen = std::getenv("FD_CUDA_DRIVER");
  return chosen && *chosen ? chosen : "libcuda.so.1";
}

const DriverApi &getDriver(const char *libraryName) {
  static std::once_flag once;
  static DriverApi driver;
  static std::string failure;
  std::call_once(once, [&] {
    try {
      driver = loadDriver(libraryName ? libraryName
                                      : getDriverLibraryName().c_str());
      check(driver, driver.cuInit(0), "initializing the CUDA driver");
    } catch (const CudaError &error) {
      failure = error.what();
    }
  });
  if (!failure.empty())
    throw CudaError(failure, -1);
  return driver;
}

void check(const DriverApi &driver, CUresult result, const std::string &what) {
  if (result == kCudaSuccess)
    return;
  const char *name = nullptr, *text = nullptr;
  if (driver.cuGetErrorName)
    driver.cuGetErrorName(result, &name);
  if (driver.cuGetErrorString)
    driver.cuGetErrorString(result, &text);
  std::string message =
      what + ": " + (name ? name : "CUDA error " + std::to_string(result));
  if (text)
    message += std::string(" (") + text + ")";
  throw CudaError(message, result);
}

} // namespace flashdecode::rt

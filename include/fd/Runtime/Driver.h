//===- Driver.h - The CUDA driver API, loaded with dlopen -------*- C++ -*-===//
//
// The runtime reaches the CUDA driver through a table of function pointers
// filled from libcuda.so.1 at run time, so nothing links libcuda and every
// binary loads (and says clearly what is missing) on machines without a GPU.
// Tests fill the table with fakes. Standard C++ only: no CUDA headers.
//
//===----------------------------------------------------------------------===//

#ifndef FD_RUNTIME_DRIVER_H
#define FD_RUNTIME_DRIVER_H

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace flashdecode::rt {

// The few driver types the runtime uses, ABI-compatible with cuda.h.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUevent = struct CUevent_st *;
using CUgraph = struct CUgraph_st *;
using CUgraphExec = struct CUgraphExec_st *;
using CUgraphNode = struct CUgraphNode_st *;

constexpr CUresult kCudaSuccess = 0;
constexpr CUresult kCudaErrorInvalidValue = 1;
constexpr int kJitErrorLogBuffer = 5; // CU_JIT_ERROR_LOG_BUFFER
constexpr int kJitErrorLogBufferSizeBytes =
    6; // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
constexpr int kStreamCaptureModeThreadLocal = 1;
constexpr int kDeviceAttributeMultiprocessorCount = 16;
constexpr int kDeviceAttributeComputeCapabilityMajor = 75;
constexpr int kDeviceAttributeComputeCapabilityMinor = 76;
/// kHz and bits: the DRAM's datasheet bandwidth (Device).
constexpr int kDeviceAttributeMemoryClockRate = 36;
constexpr int kDeviceAttributeGlobalMemoryBusWidth = 37;
constexpr unsigned kStreamNonBlocking = 1;
constexpr int kPointerAttributeDeviceOrdinal =
    9; // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
/// A kernel launches with at most this much dynamic shared memory unless
/// cuFuncSetAttribute raises its CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_
/// BYTES.
constexpr int64_t kDefaultDynamicSharedMemoryBytes = 48 * 1024;
constexpr int kFuncAttributeMaxDynamicSharedSizeBytes = 8;

/// cuLaunchKernelEx's configuration and attributes (CUlaunchConfig,
/// CUlaunchAttribute: an id, padding to 8 bytes and a 64-byte value).
constexpr int kLaunchAttributeProgrammaticStreamSerialization =
    6; // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
constexpr int kLaunchAttributeClusterDimension =
    4; // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
/// CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: clusters of more
/// than the portable 8 CTAs (16 on sm_90).
constexpr int kFuncAttributeNonPortableClusterSizeAllowed = 14;
struct CUlaunchAttribute {
  int id = 0;
  char pad[4] = {};
  union Value {
    char pad[64];
    int programmaticStreamSerializationAllowed;
    struct {
      unsigned x, y, z;
    } clusterDim;
  } value{};
};
struct CUlaunchConfig {
  unsigned gridDimX = 1, gridDimY = 1, gridDimZ = 1;
  unsigned blockDimX = 1, blockDimY = 1, blockDimZ = 1;
  unsigned sharedMemBytes = 0;
  CUstream hStream = nullptr;
  CUlaunchAttribute *attrs = nullptr;
  unsigned numAttrs = 0;
};
static_assert(sizeof(CUlaunchAttribute) == 72 && sizeof(CUlaunchConfig) == 56,
              "cuda.h's layouts");

// X(member, exported symbol, parameter list): every driver entry point used.
#define FD_CUDA_DRIVER_FUNCTIONS(X)                                            \
  X(cuInit, "cuInit", (unsigned flags))                                        \
  X(cuGetErrorName, "cuGetErrorName", (CUresult error, const char **name))     \
  X(cuGetErrorString, "cuGetErrorString", (CUresult error, const char **text)) \
  X(cuDeviceGetCount, "cuDeviceGetCount", (int *count))                        \
  X(cuDeviceGet, "cuDeviceGet", (CUdevice * device, int ordinal))              \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute",                              \
    (int *value, int attribute, CUdevice device))                              \
  X(cuDeviceGetName, "cuDeviceGetName",                                        \
    (char *name, int length, CUdevice device))                                 \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain",                      \
    (CUcontext * context, CUdevice device))                                    \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2",                 \
    (CUdevice device))                                                         \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", (CUcontext context))                   \
  X(cuModuleLoadDataEx, "cuModuleLoadDataEx",                                  \
    (CUmodule * module, const void *image, unsigned numOptions, int *options,  \
     void **values))                                                           \
  X(cuModuleUnload, "cuModuleUnload", (CUmodule module))                       \
  X(cuModuleGetFunction, "cuModuleGetFunction",                                \
    (CUfunction * function, CUmodule module, const char *name))                \
  X(cuFuncSetAttribute, "cuFuncSetAttribute",                                  \
    (CUfunction function, int attribute, int value))                           \
  X(cuLaunchKernel, "cuLaunchKernel",                                          \
    (CUfunction function, unsigned gridX, unsigned gridY, unsigned gridZ,      \
     unsigned blockX, unsigned blockY, unsigned blockZ, unsigned sharedBytes,  \
     CUstream stream, void **params, void **extra))                            \
  X(cuLaunchKernelEx, "cuLaunchKernelEx",                                      \
    (const CUlaunchConfig *config, CUfunction function, void **params,         \
     void **extra))                                                            \
  X(cuMemAlloc, "cuMemAlloc_v2", (CUdeviceptr * pointer, size_t bytes))        \
  X(cuMemFree, "cuMemFree_v2", (CUdeviceptr pointer))                          \
  X(cuMemcpyHtoD, "cuMemcpyHtoD_v2",                                           \
    (CUdeviceptr destination, const void *source, size_t bytes))               \
  X(cuMemcpyDtoH, "cuMemcpyDtoH_v2",                                           \
    (void *destination, CUdeviceptr source, size_t bytes))                     \
  X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2",                                 \
    (CUdeviceptr destination, CUdeviceptr source, size_t bytes,                \
     CUstream stream))                                                         \
  X(cuPointerGetAttribute, "cuPointerGetAttribute",                            \
    (void *data, int attribute, CUdeviceptr pointer))                          \
  X(cuMemsetD8Async, "cuMemsetD8Async",                                        \
    (CUdeviceptr destination, unsigned char value, size_t count,               \
     CUstream stream))                                                         \
  X(cuStreamCreate, "cuStreamCreate", (CUstream * stream, unsigned flags))     \
  X(cuStreamDestroy, "cuStreamDestroy_v2", (CUstream stream))                  \
  X(cuStreamSynchronize, "cuStreamSynchronize", (CUstream stream))             \
  X(cuStreamBeginCapture, "cuStreamBeginCapture_v2",                           \
    (CUstream stream, int mode))                                               \
  X(cuStreamEndCapture, "cuStreamEndCapture",                                  \
    (CUstream stream, CUgraph * graph))                                        \
  X(cuGraphGetNodes, "cuGraphGetNodes",                                        \
    (CUgraph graph, CUgraphNode * nodes, size_t * count))                      \
  X(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags",                \
    (CUgraphExec * exec, CUgraph graph, unsigned long long flags))             \
  X(cuGraphLaunch, "cuGraphLaunch", (CUgraphExec exec, CUstream stream))       \
  X(cuGraphExecDestroy, "cuGraphExecDestroy", (CUgraphExec exec))              \
  X(cuGraphDestroy, "cuGraphDestroy", (CUgraph graph))                         \
  X(cuEventCreate, "cuEventCreate", (CUevent * event, unsigned flags))         \
  X(cuEventRecord, "cuEventRecord", (CUevent event, CUstream stream))          \
  X(cuEventSynchronize, "cuEventSynchronize", (CUevent event))                 \
  X(cuEventElapsedTime, "cuEventElapsedTime",                                  \
    (float *milliseconds, CUevent start, CUevent end))                         \
  X(cuEventDestroy, "cuEventDestroy_v2", (CUevent event))

/// The driver entry points. A default-constructed table has every entry
/// null; loadDriver fills one from libcuda.so.1.
struct DriverApi {
#define FD_DECLARE_DRIVER_FUNCTION(member, symbol, parameters)                 \
  CUresult(*member) parameters = nullptr;
  FD_CUDA_DRIVER_FUNCTIONS(FD_DECLARE_DRIVER_FUNCTION)
#undef FD_DECLARE_DRIVER_FUNCTION
};

/// A CUDA call (or the driver's absence) failed. what() says what the
/// runtime was doing and the driver's error name, e.g. "launching
/// fd_merge: CUDA_ERROR_INVALID_VALUE (invalid argument)".
class CudaError : public std::runtime_error {
public:
  CudaError(const std::string &message, CUresult result)
      : std::runtime_error(message), result(result) {}
  /// The driver's CUresult, or -1 when there was no driver to ask.
  CUresult getResult() const { return result; }

private:
  CUresult result;
};

/// The driver library getDriver loads: $FD_CUDA_DRIVER when set (a path,
/// e.g. build/lib/libfdemu.so, the emulator), libcuda.so.1 otherwise.
std::string getDriverLibraryName();

/// The process's driver table, loaded from `libraryName` (default:
/// getDriverLibraryName()) and initialized (cuInit) on first use. Throws
/// CudaError "no CUDA driver: libcuda.so.1 not found (...)" when the library
/// or a symbol is missing.
const DriverApi &getDriver(const char *libraryName = nullptr);

/// Loads a table from `libraryName` without caching it; for tests of the
/// no-driver path.
DriverApi loadDriver(const char *libraryName);

/// Throws CudaError when `result` is not success, naming `what` and the
/// error (through the table's cuGetErrorName when it has one).
void check(const DriverApi &driver, CUresult result, const std::string &what);

} // namespace flashdecode::rt

#endif // FD_RUNTIME_DRIVER_H

//===- DriverState.h - The objects behind fdemu's driver handles -*- C++
//-*-===//
//
// One emulated device. Every entry point takes the driver lock, so kernels
// run while no allocation, module or stream changes. Work is executed when
// it is enqueued (streams are in order and nothing overlaps), except on a
// capturing stream, which records it into the graph being built. Each
// stream keeps a modeled clock that events read; on it, a programmatic
// launch may overlap the kernel before it (scheduleKernel).
//
//===----------------------------------------------------------------------===//

#ifndef FD_EMULATOR_DRIVERSTATE_H
#define FD_EMULATOR_DRIVERSTATE_H

#include "fd/Emulator/Emulator.h"
#include "fd/Emulator/Executor.h"
#include "fd/Emulator/PerformanceModel.h"
#include "fd/Runtime/Driver.h"

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace flashdecode::rt {

struct CUctx_st {
  bool isPrimary = false;
  /// A kernel fault poisons the context until it is destroyed (as on a
  /// GPU): every later call returns it.
  CUresult stickyError = 0;
};

struct CUfunc_st {
  std::shared_ptr<const emu::Kernel> kernel;
  /// As ptxas allocates them, or assumed (Ptxas.h).
  unsigned registersPerThread = emu::kAssumedRegistersPerThread;
  bool registersAssumed = true;
  /// The most dynamic shared memory a launch may give it, as
  /// cuFuncSetAttribute set it; unset, what 48 KB leaves beside its static
  /// memory, as on a GPU.
  std::optional<unsigned> maxDynamicSharedBytes;
  /// CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: clusters of up to
  /// 16 CTAs.
  bool nonPortableClusterSizeAllowed = false;
};

struct CUmod_st {
  emu::Module module;
  std::vector<std::unique_ptr<CUfunc_st>> functions;
  /// Registers per thread by kernel name; kernels ptxas did not report on
  /// are absent.
  std::map<std::string, unsigned> registers;
};

/// Work a stream executes or a graph records.
struct Operation {
  enum class Kind { Launch, Memset, Copy } kind = Kind::Launch;
  std::shared_ptr<const emu::Kernel> kernel;
  emu::LaunchRequest launch;
  CUdeviceptr destination = 0, source = 0;
  size_t bytes = 0;
  /// Memset: the pattern and its width (1 for D8, 4 for D32).
  uint32_t value = 0;
  unsigned elementBytes = 1;
};

struct CUgraph_st {
  std::vector<Operation> operations;
};

struct CUgraphExec_st {
  std::vector<Operation> operations;
};

struct CUstream_st {
  /// Modeled time of the work enqueued so far (PerformanceModel.h).
  emu::StreamClock clock;
  CUgraph_st *capture = nullptr;
};

struct CUevent_st {
  double time = 0;
  bool recorded = false;
};

} // namespace flashdecode::rt

namespace flashdecode::emu {

constexpr rt::CUresult kInvalidValue = 1;
constexpr rt::CUresult kOutOfMemory = 2;
constexpr rt::CUresult kNotInitialized = 3;
constexpr rt::CUresult kNoDevice = 100;
constexpr rt::CUresult kInvalidDevice = 101;
constexpr rt::CUresult kInvalidImage = 200;
constexpr rt::CUresult kInvalidContext = 201;
constexpr rt::CUresult kInvalidPtx = 218;
constexpr rt::CUresult kInvalidHandle = 400;
constexpr rt::CUresult kNotFound = 500;
constexpr rt::CUresult kNotReady = 600;
constexpr rt::CUresult kNotSupported = 801;
constexpr rt::CUresult kCaptureUnsupported = 900;
constexpr rt::CUresult kCaptureInvalidated = 901;
constexpr rt::CUresult kCaptureUnmatched = 904;
constexpr rt::CUresult kIllegalState = 401;

/// Shared memory one block may use (the opt-in maximum of sm_90).
constexpr int kMaxSharedBytesPerBlock = 232448;
/// What a block may have in all without its function's opt-in.
constexpr unsigned kDefaultSharedBytesPerBlock = 48 * 1024;

class Driver {
public:
  static Driver &get();

  std::recursive_mutex mutex;
  bool initialized = false;
  DeviceMemory memory;
  rt::CUctx_st primary;
  int primaryReferences = 0;
  rt::CUstream_st defaultStream;
  /// The report of the last failed launch, per error code, for
  /// cuGetErrorString.
  std::string lastReport[1024];
  bool recordLaunches = false;
  std::deque<LaunchCounters> launchLog;
  static thread_local rt::CUctx_st *current;
  /// cuCtxPushCurrent / cuCtxPopCurrent.
  static thread_local std::vector<rt::CUctx_st *> contextStack;

  /// Error of the current context: not initialized, no context, sticky.
  rt::CUresult contextError() const;
  rt::CUstream_st &stream(rt::CUstream stream) {
    return stream ? *stream : defaultStream;
  }
  /// FDEMU_COVERAGE=FILE: the coverage a launch of `kernel` adds to, kept
  /// per kernel (name and code) and appended to FILE at exit
  /// (DriverCoverage.cpp); null when unset.
  std::vector<uint8_t> *coverageOf(std::shared_ptr<const Kernel> kernel);
  /// Runs (or, on a capturing stream, records) `operation`.
  rt::CUresult submit(rt::CUstream_st &stream, rt::Operation operation,
                      bool fromGraph);
};

} // namespace flashdecode::emu

#endif // FD_EMULATOR_DRIVERSTATE_H

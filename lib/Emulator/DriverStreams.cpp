//===- DriverStreams.cpp - libfdemu.so: launches, streams, events, graphs ===//
//
// Work runs when it is enqueued, in order; a capturing stream records it
// instead (launch arguments copied, as the driver does), and a graph launch
// runs the recorded work again, reading device memory as it is then. A
// kernel fault is reported on stderr, kept for cuGetErrorString and made
// sticky in the context, so the launch itself succeeds and the next
// synchronizing call returns the error, as on a GPU.
//
//===----------------------------------------------------------------------===//

#include "DriverState.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace flashdecode::rt;
using namespace flashdecode::emu;

namespace {

using Lock = std::lock_guard<std::recursive_mutex>;

unsigned workerThreads() {
  static unsigned threads = [] {
    const char *value = std::getenv("FDEMU_THREADS");
    return value ? static_cast<unsigned>(std::strtoul(value, nullptr, 10)) : 0u;
  }();
  return threads;
}

/// FDEMU_TRACE_CTA=N: CTA N of every launch writes its issued instructions
/// to stderr (docs/Emulator.md); -1 when unset or not a number. Read per
/// launch, so a tool can trace one launch of many.
int64_t tracedCta() {
  const char *value = std::getenv("FDEMU_TRACE_CTA");
  if (!value || !*value)
    return -1;
  char *end = nullptr;
  long long cta = std::strtoll(value, &end, 10);
  return *end == '\0' && cta >= 0 ? cta : -1;
}

} // namespace

namespace flashdecode::emu {

CUresult Driver::submit(CUstream_st &stream, Operation operation,
                        bool fromGraph) {
  if (stream.capture) {
    stream.capture->operations.push_back(std::move(operation));
    return 0;
  }
  const GpuModel &gpu = getGpuModel();
  switch (operation.kind) {
  case Operation::Kind::Memset: {
    Allocation *allocation = memory.find(operation.destination,
                                         operation.bytes ? operation.bytes : 1);
    if (!allocation)
      return kInvalidValue;
    uint64_t offset = operation.destination - allocation->base;
    for (size_t i = 0; i < operation.bytes; i += operation.elementBytes)
      std::memcpy(allocation->data.get() + offset + i, &operation.value,
                  operation.elementBytes);
    std::memset(allocation->initialized.get() + offset, 1, operation.bytes);
    scheduleTransfer(stream.clock,
                     operation.bytes / gpu.dramBytesPerSecond * 1e6);
    return 0;
  }
  case Operation::Kind::Copy: {
    Allocation *to = memory.find(operation.destination, operation.bytes);
    Allocation *from = memory.find(operation.source, operation.bytes);
    if (!to || !from)
      return kInvalidValue;
    uint64_t toOffset = operation.destination - to->base;
    uint64_t fromOffset = operation.source - from->base;
    std::memmove(to->data.get() + toOffset, from->data.get() + fromOffset,
                 operation.bytes);
    std::memmove(to->initialized.get() + toOffset,
                 from->initialized.get() + fromOffset, operation.bytes);
    scheduleTransfer(stream.clock,
                     2.0 * operation.bytes / gpu.dramBytesPerSecond * 1e6);
    return 0;
  }
  case Operation::Kind::Launch:
    break;
  }
  operation.launch.kernel = operation.kernel.get();
  LaunchResult result = executeLaunch(operation.launch, memory);
  if (result.error == kInvalidValue || result.error == kInvalidClusterSize) {
    std::fprintf(stderr, "%s\n", result.report.c_str());
    return result.error;
  }
  if (recordLaunches)
    launchLog.push_back(result.counters);
  scheduleKernel(stream.clock, modelLaunch(result.counters, gpu),
                 fromGraph ? gpu.graphNodeMicroseconds
                           : gpu.eagerLaunchMicroseconds,
                 operation.launch.programmatic, gpu);
  if (result.error) {
    std::fprintf(stderr, "%s\n", result.report.c_str());
    lastReport[result.error] = result.report;
    if (current && !current->stickyError)
      current->stickyError = result.error;
  }
  return 0;
}

} // namespace flashdecode::emu

#define FDEMU_API extern "C" __attribute__((visibility("default")))

/// The launch's cluster: `cluster` (CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
/// null when not given) or the kernel's .reqnctapercluster, checked as a
/// GPU checks it: sm_90+, dividing the grid, at most 8 CTAs (16 with the
/// function's non-portable opt-in) and the kernel's own limits.
static CUresult setCluster(const CUfunc_st &function, const GpuModel &gpu,
                           const unsigned *cluster, LaunchRequest &launch) {
  const Kernel &kernel = *function.kernel;
  auto refuse = [&](CUresult code, const std::string &why) {
    std::fprintf(stderr, "fdemu: kernel %s: %s\n", kernel.name.c_str(),
                 why.c_str());
    return code;
  };
  bool required = kernel.requiredCluster[0] != 0;
  if (!cluster && !required) {
    if (kernel.explicitCluster)
      return refuse(kInvalidClusterSize,
                    "the kernel is .explicitcluster: its launch must name a "
                    "cluster (CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)");
    return 0;
  }
  const unsigned *size = cluster ? cluster : kernel.requiredCluster;
  std::string named = std::to_string(size[0]) + " x " +
                      std::to_string(size[1]) + " x " + std::to_string(size[2]);
  if (gpu.smsPerGpc.empty())
    return refuse(kNotSupported, "clusters need sm_90 or later; the "
                                 "emulated " +
                                     gpu.name + " has none");
  if (required && cluster &&
      !std::equal(size, size + 3, kernel.requiredCluster))
    return refuse(kInvalidClusterSize,
                  "a cluster of " + named +
                      " CTAs, but the kernel's .reqnctapercluster is " +
                      std::to_string(kernel.requiredCluster[0]) + " x " +
                      std::to_string(kernel.requiredCluster[1]) + " x " +
                      std::to_string(kernel.requiredCluster[2]));
  uint64_t ctas = uint64_t(size[0]) * size[1] * size[2];
  unsigned most = function.nonPortableClusterSizeAllowed ? kMaxClusterCtas : 8;
  if (kernel.maxClusterRank)
    most = std::min(most, kernel.maxClusterRank);
  if (size[0] == 0 || size[1] == 0 || size[2] == 0 || ctas > most)
    return refuse(kInvalidClusterSize,
                  "a cluster of " + named + " CTAs: clusters have 1 to " +
                      std::to_string(most) +
                      " CTAs (8 are portable; up to 16 after "
                      "CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED; "
                      "no more than the kernel's .maxclusterrank)");
  for (int i = 0; i < 3; ++i)
    if (launch.grid[i] % size[i] != 0)
      return refuse(kInvalidClusterSize,
                    "a cluster of " + named +
                        " CTAs does not divide the grid "
                        "of " +
                        std::to_string(launch.grid[0]) + " x " +
                        std::to_string(launch.grid[1]) + " x " +
                        std::to_string(launch.grid[2]) + " CTAs");
  std::copy(size, size + 3, launch.cluster);
  launch.explicitCluster = true;
  return 0;
}

/// cuLaunchKernel and cuLaunchKernelEx: `programmatic` is the launch's
/// programmatic stream serialization.
static CUresult enqueueLaunch(CUfunction function, unsigned gridX,
                              unsigned gridY, unsigned gridZ, unsigned blockX,
                              unsigned blockY, unsigned blockZ,
                              unsigned sharedBytes, CUstream stream,
                              void **params, void **extra, bool programmatic,
                              const unsigned *cluster = nullptr) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  if (CUresult error = driver.contextError())
    return error;
  if (!function)
    return kInvalidHandle;
  const Kernel &kernel = *function->kernel;
  Operation operation;
  operation.kind = Operation::Kind::Launch;
  operation.kernel = function->kernel;
  LaunchRequest &launch = operation.launch;
  launch.grid[0] = gridX;
  launch.grid[1] = gridY;
  launch.grid[2] = gridZ;
  launch.block[0] = blockX;
  launch.block[1] = blockY;
  launch.block[2] = blockZ;
  launch.dynamicSharedBytes = sharedBytes;
  launch.programmatic = programmatic;
  const GpuModel &gpu = getGpuModel();
  launch.numSMs = gpu.numSMs;
  launch.smsPerGpc = gpu.smsPerGpc;
  if (CUresult error = setCluster(*function, gpu, cluster, launch))
    return error;
  launch.workerThreads = workerThreads();
  launch.traceCta = tracedCta();
  if (launch.traceCta >= 0)
    launch.traceStream = stderr;
  launch.coverage = driver.coverageOf(function->kernel);
  launch.latencyModel = gpu.latencyModel;
  launch.smResources = gpu.smResources;
  launch.mmaProductsPerSum = gpu.mmaProductsPerSum;
  launch.registersPerThread = function->registersPerThread;
  launch.registersAssumed = function->registersAssumed;
  launch.parameters.assign(kernel.parameterBytes, 0);
  // Past 48 KB in all, dynamic memory needs the function's opt-in.
  unsigned mostDynamic = function->maxDynamicSharedBytes.value_or(
      kDefaultSharedBytesPerBlock -
      std::min(kernel.staticSharedBytes, kDefaultSharedBytesPerBlock));
  if (kernel.staticSharedBytes + sharedBytes > kMaxSharedBytesPerBlock ||
      sharedBytes > mostDynamic)
    return kInvalidValue;
  if (params) {
    for (size_t i = 0; i < kernel.parameters.size(); ++i) {
      if (!params[i])
        return kInvalidValue;
      std::memcpy(launch.parameters.data() + kernel.parameters[i].offset,
                  params[i], kernel.parameters[i].size);
    }
  } else if (extra) {
    // CU_LAUNCH_PARAM_BUFFER_POINTER (1), BUFFER_SIZE (2), END (0).
    const void *buffer = nullptr;
    size_t size = 0;
    for (size_t i = 0; extra[i]; i += 2) {
      if (extra[i] == reinterpret_cast<void *>(1))
        buffer = extra[i + 1];
      else if (extra[i] == reinterpret_cast<void *>(2))
        size = *static_cast<size_t *>(extra[i + 1]);
      else
        return kInvalidValue;
    }
    if (!buffer || size < kernel.parameterBytes)
      return kInvalidValue;
    std::memcpy(launch.parameters.data(), buffer, kernel.parameterBytes);
  } else if (!kernel.parameters.empty()) {
    return kInvalidValue;
  }
  return driver.submit(driver.stream(stream), std::move(operation), false);
}

FDEMU_API CUresult cuLaunchKernel(CUfunction function, unsigned gridX,
                                  unsigned gridY, unsigned gridZ,
                                  unsigned blockX, unsigned blockY,
                                  unsigned blockZ, unsigned sharedBytes,
                                  CUstream stream, void **params,
                                  void **extra) {
  return enqueueLaunch(function, gridX, gridY, gridZ, blockX, blockY, blockZ,
                       sharedBytes, stream, params, extra,
                       /*programmatic=*/false);
}

FDEMU_API CUresult cuLaunchKernelEx(const CUlaunchConfig *config,
                                    CUfunction function, void **params,
                                    void **extra) {
  if (!config || (config->numAttrs && !config->attrs))
    return kInvalidValue;
  bool programmatic = false;
  unsigned clusterDims[3];
  const unsigned *cluster = nullptr;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const CUlaunchAttribute &attribute = config->attrs[i];
    if (attribute.id == kLaunchAttributeProgrammaticStreamSerialization) {
      programmatic =
          attribute.value.programmaticStreamSerializationAllowed != 0;
    } else if (attribute.id == kLaunchAttributeClusterDimension) {
      clusterDims[0] = attribute.value.clusterDim.x;
      clusterDims[1] = attribute.value.clusterDim.y;
      clusterDims[2] = attribute.value.clusterDim.z;
      cluster = clusterDims;
    } else {
      std::fprintf(stderr,
                   "fdemu: cuLaunchKernelEx: launch attribute %d is not "
                   "emulated (fdemu takes "
                   "CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, "
                   "%d, and CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, %d)\n",
                   attribute.id,
                   kLaunchAttributeProgrammaticStreamSerialization,
                   kLaunchAttributeClusterDimension);
      return kNotSupported;
    }
  }
  return enqueueLaunch(function, config->gridDimX, config->gridDimY,
                       config->gridDimZ, config->blockDimX, config->blockDimY,
                       config->blockDimZ, config->sharedMemBytes,
                       config->hStream, params, extra, programmatic, cluster);
}

static CUresult enqueueCopy(CUdeviceptr destination, CUdeviceptr source,
                            size_t bytes, CUstream stream) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  if (CUresult error = driver.contextError())
    return error;
  if (bytes == 0)
    return 0;
  Operation operation;
  operation.kind = Operation::Kind::Copy;
  operation.destination = destination;
  operation.source = source;
  operation.bytes = bytes;
  return driver.submit(driver.stream(stream), std::move(operation), false);
}

static CUresult enqueueMemset(CUdeviceptr destination, uint32_t value,
                              unsigned elementBytes, size_t count,
                              CUstream stream) {
  size_t bytes = count * elementBytes;
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  if (CUresult error = driver.contextError())
    return error;
  if (bytes == 0)
    return 0;
  Operation operation;
  operation.kind = Operation::Kind::Memset;
  operation.destination = destination;
  operation.bytes = bytes;
  operation.value = value;
  operation.elementBytes = elementBytes;
  if (destination % elementBytes)
    return kInvalidValue;
  return driver.submit(driver.stream(stream), std::move(operation), false);
}

FDEMU_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr destination,
                                        CUdeviceptr source, size_t bytes,
                                        CUstream stream) {
  return enqueueCopy(destination, source, bytes, stream);
}
FDEMU_API CUresult cuMemcpyDtoDAsync(CUdeviceptr destination,
                                     CUdeviceptr source, size_t bytes,
                                     CUstream stream) {
  return enqueueCopy(destination, source, bytes, stream);
}
FDEMU_API CUresult cuMemcpyDtoD_v2(CUdeviceptr destination, CUdeviceptr source,
                                   size_t bytes) {
  return enqueueCopy(destination, source, bytes, nullptr);
}
FDEMU_API CUresult cuMemcpyDtoD(CUdeviceptr destination, CUdeviceptr source,
                                size_t bytes) {
  return enqueueCopy(destination, source, bytes, nullptr);
}
FDEMU_API CUresult cuMemsetD8Async(CUdeviceptr destination, unsigned char value,
                                   size_t count, CUstream stream) {
  return enqueueMemset(destination, value, 1, count, stream);
}
FDEMU_API CUresult cuMemsetD8_v2(CUdeviceptr destination, unsigned char value,
                                 size_t count) {
  return enqueueMemset(destination, value, 1, count, nullptr);
}
FDEMU_API CUresult cuMemsetD8(CUdeviceptr destination, unsigned char value,
                              size_t count) {
  return enqueueMemset(destination, value, 1, count, nullptr);
}
FDEMU_API CUresult cuMemsetD32Async(CUdeviceptr destination, unsigned value,
                                    size_t count, CUstream stream) {
  return enqueueMemset(destination, value, 4, count, stream);
}
FDEMU_API CUresult cuMemsetD32_v2(CUdeviceptr destination, unsigned value,
                                  size_t count) {
  return enqueueMemset(destination, value, 4, count, nullptr);
}
FDEMU_API CUresult cuMemsetD32(CUdeviceptr destination, unsigned value,
                               size_t count) {
  return enqueueMemset(destination, value, 4, count, nullptr);
}

FDEMU_API CUresult cuStreamCreate(CUstream *stream, unsigned) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  if (CUresult error = driver.contextError())
    return error;
  if (!stream)
    return kInvalidValue;
  *stream = new CUstream_st;
  return 0;
}

FDEMU_API CUresult cuStreamDestroy_v2(CUstream stream) {
  Lock lock(Driver::get().mutex);
  if (!stream)
    return kInvalidHandle;
  delete stream->capture;
  delete stream;
  return 0;
}
FDEMU_API CUresult cuStreamDestroy(CUstream stream) {
  return cuStreamDestroy_v2(stream);
}

FDEMU_API CUresult cuStreamSynchronize(CUstream stream) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  if (stream && stream->capture)
    return kCaptureUnsupported;
  return driver.contextError();
}

FDEMU_API CUresult cuStreamQuery(CUstream stream) {
  return cuStreamSynchronize(stream);
}

// Work runs in enqueue order, so everything an event marks has run.
FDEMU_API CUresult cuStreamWaitEvent(CUstream, CUevent event, unsigned) {
  return event ? 0 : kInvalidHandle;
}

FDEMU_API CUresult cuFuncSetAttribute(CUfunction function, int attribute,
                                      int value) {
  if (!function)
    return kInvalidHandle;
  // MAX_DYNAMIC_SHARED_SIZE_BYTES: what a launch may give, beside the
  // function's static memory within the block's most.
  if (attribute == 8) {
    if (value < 0 ||
        static_cast<unsigned>(value) + function->kernel->staticSharedBytes >
            kMaxSharedBytesPerBlock)
      return kInvalidValue;
    function->maxDynamicSharedBytes = static_cast<unsigned>(value);
  }
  if (attribute == kFuncAttributeNonPortableClusterSizeAllowed)
    function->nonPortableClusterSizeAllowed = value != 0;
  return 0;
}

FDEMU_API CUresult cuStreamBeginCapture_v2(CUstream stream, int) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  if (CUresult error = driver.contextError())
    return error;
  if (!stream)
    return kCaptureUnsupported; // the legacy stream cannot be captured
  if (stream->capture)
    return kIllegalState;
  stream->capture = new CUgraph_st;
  return 0;
}
FDEMU_API CUresult cuStreamBeginCapture(CUstream stream, int mode) {
  return cuStreamBeginCapture_v2(stream, mode);
}

FDEMU_API CUresult cuStreamEndCapture(CUstream stream, CUgraph *graph) {
  Lock lock(Driver::get().mutex);
  if (!stream || !stream->capture)
    return kIllegalState;
  if (!graph)
    return kInvalidValue;
  *graph = stream->capture;
  stream->capture = nullptr;
  return 0;
}

FDEMU_API CUresult cuStreamIsCapturing(CUstream stream, int *status) {
  if (!status)
    return kInvalidValue;
  *status = stream && stream->capture ? 1 : 0;
  return 0;
}

FDEMU_API CUresult cuGraphGetNodes(CUgraph graph, CUgraphNode *nodes,
                                   size_t *count) {
  if (!graph || !count)
    return kInvalidValue;
  size_t total = graph->operations.size();
  if (nodes) {
    // Opaque handles: the driver's own are pointers too; these are only
    // good for counting and identity.
    for (size_t i = 0; i < std::min(*count, total); ++i)
      nodes[i] = reinterpret_cast<CUgraphNode>(&graph->operations[i]);
  }
  *count = total;
  return 0;
}

FDEMU_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph,
                                               unsigned long long) {
  Lock lock(Driver::get().mutex);
  if (!exec || !graph)
    return kInvalidValue;
  *exec = new CUgraphExec_st{graph->operations};
  return 0;
}

FDEMU_API CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  if (CUresult error = driver.contextError())
    return error;
  if (!exec)
    return kInvalidValue;
  CUstream_st &target = driver.stream(stream);
  if (target.capture)
    return kCaptureUnsupported;
  // A graph's first kernel starts after the stream's work before it: its
  // programmatic edges are between its own nodes.
  target.clock.dependentsFrom = target.clock.now;
  for (const Operation &operation : exec->operations)
    if (CUresult error = driver.submit(target, operation, true))
      return error;
  return 0;
}

FDEMU_API CUresult cuGraphExecDestroy(CUgraphExec exec) {
  delete exec;
  return 0;
}

FDEMU_API CUresult cuGraphDestroy(CUgraph graph) {
  delete graph;
  return 0;
}

FDEMU_API CUresult cuEventCreate(CUevent *event, unsigned) {
  if (!event)
    return kInvalidValue;
  *event = new CUevent_st;
  return 0;
}

FDEMU_API CUresult cuEventRecord(CUevent event, CUstream stream) {
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  if (CUresult error = driver.contextError())
    return error;
  if (!event)
    return kInvalidHandle;
  CUstream_st &target = driver.stream(stream);
  if (target.capture)
    return kCaptureUnsupported;
  event->time = target.clock.now;
  event->recorded = true;
  return 0;
}

FDEMU_API CUresult cuEventSynchronize(CUevent event) {
  if (!event)
    return kInvalidHandle;
  Driver &driver = Driver::get();
  Lock lock(driver.mutex);
  return driver.contextError();
}

FDEMU_API CUresult cuEventQuery(CUevent event) {
  return cuEventSynchronize(event);
}

FDEMU_API CUresult cuEventElapsedTime(float *milliseconds, CUevent start,
                                      CUevent end) {
  if (!milliseconds || !start || !end)
    return kInvalidValue;
  if (!start->recorded || !end->recorded)
    return kInvalidHandle;
  *milliseconds = static_cast<float>((end->time - start->time) / 1000.0);
  return 0;
}

FDEMU_API CUresult cuEventDestroy_v2(CUevent event) {
  delete event;
  return 0;
}
FDEMU_API CUresult cuEventDestroy(CUevent event) {
  return cuEventDestroy_v2(event);
}

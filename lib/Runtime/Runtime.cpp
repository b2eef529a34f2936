//===- Runtime.cpp - Devices, buffers, modules and decode plans ----------===//

#include "fd/Runtime/Runtime.h"
#include "fd/Planning/Chip.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <utility>

namespace flashdecode::rt {

//===----------------------------------------------------------------------===//
// Device
//===----------------------------------------------------------------------===//

Device::Device(const DriverApi &driver, int ordinal) : driver(driver) {
  int count = 0;
  check(driver, driver.cuDeviceGetCount(&count), "counting CUDA devices");
  if (ordinal < 0 || ordinal >= count)
    throw CudaError("no CUDA device " + std::to_string(ordinal) + " (" +
                        std::to_string(count) + " present)",
                    -1);
  check(driver, driver.cuDeviceGet(&device, ordinal), "opening CUDA device");
  check(driver, driver.cuDevicePrimaryCtxRetain(&context, device),
        "retaining the primary context");
  check(driver, driver.cuCtxSetCurrent(context),
        "making the primary context current");
}

Device::~Device() { driver.cuDevicePrimaryCtxRelease(device); }

void Device::makeCurrent() const {
  check(driver, driver.cuCtxSetCurrent(context),
        "making the primary context current");
}

int Device::getMultiprocessorCount() const {
  int count = 0;
  check(driver,
        driver.cuDeviceGetAttribute(&count, kDeviceAttributeMultiprocessorCount,
                                    device),
        "reading the multiprocessor count");
  return count;
}

std::pair<int, int> Device::getComputeCapability() const {
  int major = 0, minor = 0;
  check(driver,
        driver.cuDeviceGetAttribute(
            &major, kDeviceAttributeComputeCapabilityMajor, device),
        "reading the compute capability");
  check(driver,
        driver.cuDeviceGetAttribute(
            &minor, kDeviceAttributeComputeCapabilityMinor, device),
        "reading the compute capability");
  return {major, minor};
}

std::string getTargetForComputeCapability(int major, int minor) {
  const Chip *chip = getChipForComputeCapability(major, minor);
  if (!chip)
    throw std::invalid_argument(
        "compute capability " + std::to_string(major) + "." +
        std::to_string(minor) + " is not supported: the kernels need " +
        std::string(getChips().front().name) + " or newer");
  return std::string(chip->name);
}

std::optional<int> getDeviceOfPointer(const DriverApi &driver,
                                      CUdeviceptr address) {
  int ordinal = -1;
  CUresult result = driver.cuPointerGetAttribute(
      &ordinal, kPointerAttributeDeviceOrdinal, address);
  // The driver's answer for an address outside everything it allocated or
  // mapped.
  if (result == kCudaErrorInvalidValue)
    return std::nullopt;
  check(driver, result, "asking the driver which device holds an address");
  return ordinal;
}

bool canLoadTarget(const std::string &target, int major, int minor) {
  const Chip *chip = findChip(target);
  return chip && canRunOn(*chip, major, minor);
}

std::string Device::getName() const {
  char name[256] = {};
  check(driver, driver.cuDeviceGetName(name, sizeof(name), device),
        "reading the device name");
  return name;
}

double Device::getPeakDramBytesPerSecond() const {
  int kiloHertz = 0, bits = 0;
  check(driver,
        driver.cuDeviceGetAttribute(&kiloHertz, kDeviceAttributeMemoryClockRate,
                                    device),
        "reading the memory clock");
  check(driver,
        driver.cuDeviceGetAttribute(&bits, kDeviceAttributeGlobalMemoryBusWidth,
                                    device),
        "reading the memory bus width");
  return 2.0 * kiloHertz * 1e3 * bits / 8;
}

//===----------------------------------------------------------------------===//
// DeviceBuffer
//===----------------------------------------------------------------------===//

DeviceBuffer::DeviceBuffer(const Device &device, size_t bytes)
    : device(&device), driver(&device.getDriverApi()), size(bytes) {
  device.makeCurrent();
  check(*driver, driver->cuMemAlloc(&address, bytes ? bytes : 1),
        "allocating " + std::to_string(bytes) + " bytes of device memory");
}

DeviceBuffer::~DeviceBuffer() { release(); }

void DeviceBuffer::release() noexcept {
  if (!address)
    return;
  // Freeing from a thread without the context current would fail.
  driver->cuCtxSetCurrent(device->getContext());
  driver->cuMemFree(address);
  address = 0;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer &&other) noexcept
    : device(other.device), driver(other.driver),
      address(std::exchange(other.address, 0)),
      size(std::exchange(other.size, 0)) {}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&other) noexcept {
  if (this != &other) {
    release();
    device = other.device;
    driver = other.driver;
    address = std::exchange(other.address, 0);
    size = std::exchange(other.size, 0);
  }
  return *this;
}

void DeviceBuffer::zero() {
  // A memset on the legacy default stream, waited for: a copy from pageable
  // memory may return before its DMA lands, and a launch on a non-blocking
  // stream would not wait for it.
  device->makeCurrent();
  check(*driver, driver->cuMemsetD8Async(address, 0, size, nullptr),
        "zeroing " + std::to_string(size) + " bytes of device memory");
  check(*driver, driver->cuStreamSynchronize(nullptr),
        "waiting for device memory to be zeroed");
}

void DeviceBuffer::upload(const void *data, size_t bytes) {
  if (bytes > size)
    throw std::invalid_argument("upload of " + std::to_string(bytes) +
                                " bytes into a buffer of " +
                                std::to_string(size));
  device->makeCurrent();
  check(*driver, driver->cuMemcpyHtoD(address, data, bytes),
        "copying to the device");
}

void copyToHost(const Device &device, CUstream stream, CUdeviceptr address,
                void *data, size_t bytes) {
  const DriverApi &driver = device.getDriverApi();
  device.makeCurrent();
  check(driver, driver.cuStreamSynchronize(stream),
        "waiting for the stream before a copy from the device");
  check(driver, driver.cuMemcpyDtoH(data, address, bytes),
        "copying from the device");
}

void DeviceBuffer::download(void *data, size_t bytes) const {
  if (bytes > size)
    throw std::invalid_argument("download of " + std::to_string(bytes) +
                                " bytes from a buffer of " +
                                std::to_string(size));
  device->makeCurrent();
  check(*driver, driver->cuMemcpyDtoH(data, address, bytes),
        "copying from the device");
}

//===----------------------------------------------------------------------===//
// Module
//===----------------------------------------------------------------------===//

Module::Module(const Device &device, const std::string &ptx,
               const std::string &label)
    : driver(device.getDriverApi()), label(label) {
  device.makeCurrent();
  // The driver wants a NUL-terminated image; MLIR's PTX may lack the NUL.
  std::string image = ptx;
  image.push_back('\0');
  char log[8192] = {};
  int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSizeBytes};
  void *values[] = {log, reinterpret_cast<void *>(sizeof(log))};
  CUresult result =
      driver.cuModuleLoadDataEx(&module, image.data(), 2, options, values);
  if (result != kCudaSuccess) {
    try {
      check(driver, result, "loading the PTX of " + label);
    } catch (const CudaError &error) {
      throw CudaError(std::string(error.what()) +
                          (log[0] ? std::string("; JIT log: ") + log : ""),
                      result);
    }
  }
}

Module::~Module() {
  if (module)
    driver.cuModuleUnload(module);
}

CUfunction Module::getFunction(const std::string &name) const {
  CUfunction function = nullptr;
  check(driver, driver.cuModuleGetFunction(&function, module, name.c_str()),
        "finding kernel " + name + " in " + label);
  return function;
}

//===----------------------------------------------------------------------===//
// DecodePlan
//===----------------------------------------------------------------------===//

/// FD_PROGRAMMATIC_LAUNCH=0 launches every kernel in plain stream order
/// (to compare, or to rule the overlap out); anything else, or unset,
/// overlaps the kernels whose manifest entry allows it.
static bool isProgrammaticLaunchAllowed() {
  const char *setting = std::getenv("FD_PROGRAMMATIC_LAUNCH");
  return !setting || std::string(setting) != "0";
}

/// A kernel with its launch shape and argument storage bound to buffers.
struct DecodePlan::BoundKernel {
  const KernelSpec *spec;
  CUfunction function;
  /// Launched with programmatic stream serialization.
  bool programmatic;
  unsigned grid[3];
  unsigned block[3];
  /// One 8-byte slot per parameter; the driver reads pointers or i32s there.
  std::vector<uint64_t> values;
  std::vector<void *> arguments;
};

DecodePlan::DecodePlan(const Device &device, const KernelBundle &bundle,
                       const DecodeBuffers &buffers)
    : device(device), manifest(bundle.manifest), buffers(buffers) {
  for (const KernelSpec &spec : manifest.kernels) {
    auto ptx = bundle.ptx.find(spec.name);
    if (ptx == bundle.ptx.end())
      throw std::invalid_argument("no PTX for kernel " + spec.name);
    modules.push_back(std::make_unique<Module>(device, ptx->second, spec.name));
    auto kernel = std::make_unique<BoundKernel>();
    kernel->spec = &spec;
    kernel->function = modules.back()->getFunction(spec.name);
    // More than 48 KB of dynamic shared memory (the warpgroup tile's) is
    // an opt-in per function.
    if (spec.dynamicSharedMemoryBytes > kDefaultDynamicSharedMemoryBytes)
      check(device.getDriverApi(),
            device.getDriverApi().cuFuncSetAttribute(
                kernel->function, kFuncAttributeMaxDynamicSharedSizeBytes,
                static_cast<int>(spec.dynamicSharedMemoryBytes)),
            "allowing kernel " + spec.name + " " +
                std::to_string(spec.dynamicSharedMemoryBytes) +
                " bytes of dynamic shared memory");
    kernel->programmatic =
        spec.programmaticLaunch && isProgrammaticLaunchAllowed();
    kernels.push_back(std::move(kernel));
  }
  bind();
}

DecodePlan::~DecodePlan() = default;

int64_t DecodePlan::getWorkspaceBytes() const {
  return manifest.getWorkspaceBytes(buffers.batch);
}

void DecodePlan::setBuffers(const DecodeBuffers &newBuffers) {
  DecodeBuffers previous = buffers;
  buffers = newBuffers;
  try {
    bind();
  } catch (...) {
    buffers = previous;
    throw;
  }
  ++generation;
}

CUdeviceptr DecodePlan::growPlanBuffer(std::unique_ptr<DeviceBuffer> &buffer,
                                       int64_t bytes, bool zeroed) {
  if (!buffer || buffer->getSize() < static_cast<size_t>(bytes)) {
    // Launches queued before the rebind may still use the old buffer: it
    // lives as long as the plan.
    if (buffer)
      retiredWorkspaces.push_back(std::move(buffer));
    buffer = std::make_unique<DeviceBuffer>(device, bytes);
    if (zeroed)
      buffer->zero();
  }
  return buffer->getAddress();
}

void DecodePlan::bind() {
  // Every Python decode_attention call rebinds a plan, so the checks build
  // their messages only when they fail.
  auto fail = [](const std::string &message) {
    throw std::invalid_argument("DecodePlan: " + message);
  };
  if (buffers.batch < 1)
    fail("batch must be >= 1, got " + std::to_string(buffers.batch));
  if (buffers.maxLength < 1 || buffers.maxLength > INT32_MAX)
    fail("maxLength must be in [1, 2^31), got " +
         std::to_string(buffers.maxLength));
  if (!buffers.query || !buffers.keyCache || !buffers.seqLens ||
      !buffers.output)
    fail("query, keyCache, seqLens and output must be device addresses");
  if (manifest.sharedKV ? buffers.valueCache != 0 : !buffers.valueCache)
    fail(manifest.sharedKV
             ? "the kernels read the values from the key cache's first "
               "v_head_dim columns (config.shared_kv): valueCache must be 0"
             : "valueCache must be a device address");
  if ((manifest.pageSize != 0) != (buffers.blockTable != 0))
    fail(manifest.pageSize
             ? "the kernels read paged caches: blockTable required"
             : "the kernels read dense caches: blockTable must be 0");
  if (manifest.pageSize && buffers.maxLength % manifest.pageSize != 0)
    fail("paged caches: maxLength must be max_pages * page_size");
  if (manifest.topK && buffers.maxLength != manifest.topK)
    fail("top-k lists (config.top_k " + std::to_string(manifest.topK) +
         "): maxLength must be the lists' length, " +
         std::to_string(manifest.topK) + ", got " +
         std::to_string(buffers.maxLength));
  if (manifest.pageSize &&
      (buffers.numPages < 1 || buffers.numPages > INT32_MAX))
    fail("paged caches: numPages (the pages in each pool) must be in [1, "
         "2^31), got " +
         std::to_string(buffers.numPages));
  if (manifest.withLse != (buffers.lse != 0))
    fail(manifest.withLse ? "the kernels write an lse: lse buffer required"
                          : "the kernels were compiled without an lse "
                            "output: lse must be 0");
  // A buffer of 4-byte `element`s (`shape`) that `reader` ("the merge
  // reads") when the kernels were compiled with `feature` (`use` says how
  // they use it).
  auto requireFeatureBuffer = [&](const char *field, CUdeviceptr address,
                                  bool compiledWith, const char *use,
                                  const char *feature, const char *element,
                                  const char *shape, const char *reader) {
    if (compiledWith != (address != 0))
      fail(compiledWith ? std::string("the kernels ") + use + ": " + field +
                              " buffer (" + element + " " + shape + ") required"
                        : std::string("the kernels were compiled without ") +
                              feature + ": " + field + " must be 0");
    if (address % 4 != 0)
      fail(std::string(field) + " address is not 4-byte aligned: " + reader +
           " it as " + element);
  };
  requireFeatureBuffer("sinks", buffers.sinks, manifest.withSinks,
                       "read attention sinks", "attention sinks", "float",
                       "[num_q_heads]", "the merge reads");
  requireFeatureBuffer("alibiSlopes", buffers.alibiSlopes, manifest.withAlibi,
                       "apply ALiBi", "ALiBi", "float", "[num_q_heads]",
                       "the partial kernel reads");
  // A fused merge's counters are optional (the plan's own otherwise), and
  // only for kernels that take them.
  if (buffers.mergeCounters && !manifest.fusedMerge)
    fail("the kernels were compiled without a fused merge: mergeCounters "
         "must be 0");
  if (buffers.mergeCounters % 4 != 0)
    fail("mergeCounters address is not 4-byte aligned: the partial kernel "
         "counts in it with int32 atomics");
  requireFeatureBuffer("queryLens", buffers.queryLens, manifest.withQueryLens,
                       "read per-sequence query lengths",
                       "per-sequence query lengths", "int32", "[batch]",
                       "the kernels read");
  requireFeatureBuffer("kvShardRank", buffers.kvShardRank,
                       manifest.kvShardWorld != 0, "read a sharded cache",
                       "a sharded cache", "int32", "[1]",
                       "the partial kernel reads");
  requireFeatureBuffer("suffixLens", buffers.suffixLens, manifest.sharedPrefix,
                       "continue a shared prefix", "a shared prefix", "int32",
                       "[batch]", "the partial kernel reads");
  // The scales' shape: the caches' without the head dim, or one per tensor.
  bool nhd = manifest.kvLayout == "NHD";
  const char *scaleShape = !manifest.hasTokenHeadScales() ? "[1]"
                           : manifest.pageSize
                               ? (nhd ? "[numPages, page_size, num_kv_heads]"
                                      : "[numPages, num_kv_heads, page_size]")
                               : (nhd ? "[batch, maxLength, num_kv_heads]"
                                      : "[batch, num_kv_heads, maxLength]");
  requireFeatureBuffer("kScale", buffers.kScale, manifest.hasFloat8Cache(),
                       "read fp8 caches", "fp8 caches", "float", scaleShape,
                       "the partial kernel reads");
  if (manifest.sharedKV && buffers.vScale)
    fail("the values are the key cache's (config.shared_kv), scaled by "
         "kScale: vScale must be 0");
  if (!manifest.sharedKV)
    requireFeatureBuffer("vScale", buffers.vScale, manifest.hasFloat8Cache(),
                         "read fp8 caches", "fp8 caches", "float", scaleShape,
                         "the partial kernel reads");

  // The kernels move 16 bytes per access: a misaligned base (a view that
  // starts inside a buffer) would fault on the GPU, so say so here.
  auto requireAligned = [&](const char *name, CUdeviceptr address) {
    if (address % kBufferAlignment == 0)
      return;
    char hex[32];
    std::snprintf(hex, sizeof(hex), "0x%llx",
                  static_cast<unsigned long long>(address));
    fail(std::string(name) + " address " + hex + " is not " +
         std::to_string(kBufferAlignment) + "-byte aligned (address mod " +
         std::to_string(kBufferAlignment) + " = " +
         std::to_string(address % kBufferAlignment) +
         "); the kernels access it 16 bytes at a time");
  };
  requireAligned("query", buffers.query);
  requireAligned("keyCache", buffers.keyCache);
  requireAligned("valueCache", buffers.valueCache);
  requireAligned("output", buffers.output);
  requireAligned("lse", buffers.lse);
  requireAligned("blockTable", buffers.blockTable);

  CUdeviceptr partialOutput = buffers.workspace;
  if (!partialOutput)
    partialOutput =
        growPlanBuffer(workspace, manifest.getWorkspaceBytes(buffers.batch),
                       /*zeroed=*/false);
  requireAligned("workspace", partialOutput);
  CUdeviceptr partialLse =
      partialOutput + manifest.workspace.getPartialLseOffset(buffers.batch);
  // A fused merge's counters: the caller's, or the plan's own, zeroed once
  // (each launch leaves them zero).
  CUdeviceptr counters = buffers.mergeCounters;
  if (manifest.fusedMerge && !counters)
    counters = growPlanBuffer(mergeCounters,
                              manifest.getMergeCounterBytes(buffers.batch),
                              /*zeroed=*/true);

  for (std::unique_ptr<BoundKernel> &kernel : kernels) {
    const KernelSpec &spec = *kernel->spec;
    kernel->values.assign(spec.params.size(), 0);
    kernel->arguments.resize(spec.params.size());
    for (size_t i = 0; i < spec.params.size(); ++i) {
      const std::string &name = spec.params[i].name;
      uint64_t value =
          name == "query"            ? buffers.query
          : name == "key_cache"      ? buffers.keyCache
          : name == "value_cache"    ? buffers.valueCache
          : name == "seq_lens"       ? buffers.seqLens
          : name == "output"         ? buffers.output
          : name == "lse"            ? buffers.lse
          : name == "block_table"    ? buffers.blockTable
          : name == "partial_output" ? partialOutput
          : name == "partial_lse"    ? partialLse
          : name == "max_len"        ? static_cast<uint64_t>(buffers.maxLength)
          : name == "num_pages"      ? static_cast<uint64_t>(buffers.numPages)
          : name == "sinks"          ? buffers.sinks
          : name == "alibi_slopes"   ? buffers.alibiSlopes
          : name == "query_lens"     ? buffers.queryLens
          : name == "kv_shard_rank"  ? buffers.kvShardRank
          : name == "suffix_lens"    ? buffers.suffixLens
          : name == "batch"          ? static_cast<uint64_t>(buffers.batch)
          : name == "k_scale"        ? buffers.kScale
          : name == "v_scale"        ? buffers.vScale
          : name == "merge_counters" ? counters
                                     : ~uint64_t(0);
      if (value == ~uint64_t(0))
        fail("kernel " + spec.name + " takes parameter '" + name +
             "', which this runtime does not know");
      if (name == "merge_counters" && !manifest.fusedMerge)
        fail("kernel " + spec.name +
             " takes merge_counters but the manifest's config.fused_merge "
             "is not true");
      kernel->values[i] = value;
      // An i32 parameter reads the low 4 bytes: little-endian hosts only.
      kernel->arguments[i] = &kernel->values[i];
    }
    for (int d = 0; d < 3; ++d) {
      kernel->grid[d] = static_cast<unsigned>(
          spec.grid[d].resolve(buffers.batch, manifest.numSplits));
      kernel->block[d] = static_cast<unsigned>(spec.block[d]);
    }
  }
}

bool DecodePlan::isProgrammatic(size_t index) const {
  return index < kernels.size() && kernels[index]->programmatic;
}

void DecodePlan::launch(CUstream stream) const {
  const DriverApi &driver = device.getDriverApi();
  device.makeCurrent();
  // A kernel that waits for the grid before it (programmatic_launch) is
  // launched to overlap it: its launch and the previous kernel's tail run
  // together, and the wait keeps its reads after that kernel's writes.
  CUlaunchAttribute overlap;
  overlap.id = kLaunchAttributeProgrammaticStreamSerialization;
  overlap.value.programmaticStreamSerializationAllowed = 1;
  for (const std::unique_ptr<BoundKernel> &kernel : kernels) {
    CUlaunchConfig config;
    config.gridDimX = kernel->grid[0];
    config.gridDimY = kernel->grid[1];
    config.gridDimZ = kernel->grid[2];
    config.blockDimX = kernel->block[0];
    config.blockDimY = kernel->block[1];
    config.blockDimZ = kernel->block[2];
    config.sharedMemBytes =
        static_cast<unsigned>(kernel->spec->dynamicSharedMemoryBytes);
    config.hStream = stream;
    if (kernel->programmatic) {
      config.attrs = &overlap;
      config.numAttrs = 1;
    }
    CUresult result = driver.cuLaunchKernelEx(
        &config, kernel->function,
        const_cast<void **>(kernel->arguments.data()), nullptr);
    // The message is built only on failure: this is the per-call path.
    if (result != kCudaSuccess)
      check(driver, result, "launching " + kernel->spec->name);
  }
}

} // namespace flashdecode::rt

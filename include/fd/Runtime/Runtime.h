//===- Runtime.h - Load the PTX, launch, capture CUDA graphs ----*- C++ -*-===//
//
// fdrt: standard C++17 over the CUDA driver API (Driver.h), no MLIR or LLVM.
//
//   rt::Device device;                        // primary context of GPU 0
//   rt::KernelBundle kernels = rt::KernelBundle::load("out/");
//   rt::DecodePlan plan(device, kernels, buffers);  // allocates the workspace
//   plan.launch(stream);                      // partial + merge
//   rt::Graph graph = rt::Graph::capture(device, {&plan}, stream);
//   graph.replay(stream);                     // lengths may change in between
//
// Errors are exceptions: CudaError (with the driver's error name and what was
// being done) for driver failures, std::invalid_argument for bad use.
//
//===----------------------------------------------------------------------===//

#ifndef FD_RUNTIME_RUNTIME_H
#define FD_RUNTIME_RUNTIME_H

#include "fd/Namespace.h"
#include "fd/Runtime/Driver.h"
#include "fd/Runtime/Manifest.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace flashdecode::rt {

/// A GPU's primary context, retained for the object's life and made current.
class Device {
public:
  explicit Device(const DriverApi &driver = getDriver(), int ordinal = 0);
  ~Device();
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;

  const DriverApi &getDriverApi() const { return driver; }
  CUcontext getContext() const { return context; }
  /// Makes the context current on the calling thread (the driver's current
  /// context is per thread): every fdrt call that needs it does this first,
  /// so any thread may use a Device.
  void makeCurrent() const;
  int getMultiprocessorCount() const;
  std::string getName() const;
  /// The DRAM's datasheet bandwidth, bytes/s: two transfers per memory
  /// clock over the bus width (0 when the driver reports neither).
  double getPeakDramBytesPerSecond() const;
  /// Compute capability, e.g. {9, 0} for an H100/H200, {8, 0} for an A100.
  std::pair<int, int> getComputeCapability() const;
  int getOrdinal() const { return device; }

private:
  const DriverApi &driver;
  CUdevice device = 0;
  CUcontext context = nullptr;
};

/// The PTX target to compile for a GPU of compute capability major.minor
/// (getChipForComputeCapability, fd/Planning/Chip.h): sm_80 for 8.0, sm_86
/// for 8.6 and 8.7, sm_89 for 8.9, sm_90 for 9.x, and for newer GPUs sm_90
/// too (PTX is forward-compatible: the driver JIT compiles it for the newer
/// GPU). Throws std::invalid_argument below 8.0, which the kernels do not
/// support.
std::string getTargetForComputeCapability(int major, int minor);

/// Whether a GPU of compute capability major.minor can load PTX compiled
/// for `target` ("sm_80", "sm_90a", ...; false for a target the chip table
/// does not have): the target's version must not exceed the GPU's, and an
/// architecture-specific target ("a") loads only on exactly its GPU.
bool canLoadTarget(const std::string &target, int major, int minor);

/// The ordinal of the device whose memory `address` points into (the
/// driver's CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL), or nullopt when the driver
/// does not know the address (memory it neither allocated nor mapped, e.g. a
/// host pointer). Throws CudaError for any other failure.
std::optional<int> getDeviceOfPointer(const DriverApi &driver,
                                      CUdeviceptr address);

/// Copies `bytes` at `address` (device memory of `device`) to `data` once
/// the work queued on `stream` is done (the legacy default stream when
/// null, which waits for every blocking stream's): a synchronization, for
/// checks that must read what the kernels are about to read.
void copyToHost(const Device &device, CUstream stream, CUdeviceptr address,
                void *data, size_t bytes);

/// Device memory, freed with the object.
class DeviceBuffer {
public:
  DeviceBuffer(const Device &device, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer &&other) noexcept;
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept;

  CUdeviceptr getAddress() const { return address; }
  size_t getSize() const { return size; }
  void upload(const void *data, size_t bytes);
  /// Sets every byte to 0, and waits until it is done.
  void zero();
  void download(void *data, size_t bytes) const;

private:
  void release() noexcept;

  const Device *device;
  const DriverApi *driver;
  CUdeviceptr address = 0;
  size_t size = 0;
};

/// A loaded PTX module.
class Module {
public:
  /// Throws CudaError carrying the JIT's error log when the PTX is rejected.
  Module(const Device &device, const std::string &ptx,
         const std::string &label);
  ~Module();
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;

  CUfunction getFunction(const std::string &name) const;

private:
  const DriverApi &driver;
  CUmodule module = nullptr;
  std::string label;
};

/// The alignment DecodePlan requires of every buffer it binds (lengths
/// aside): the kernels access them 16 bytes at a time.
constexpr uint64_t kBufferAlignment = 16;

/// Device addresses of one decode step's buffers (contiguous, in the shapes
/// of docs/KernelABI.md), and the batch and cache length they hold.
struct DecodeBuffers {
  CUdeviceptr query = 0;
  CUdeviceptr keyCache = 0;
  /// 0 exactly when the values are the key cache's first v_head_dim
  /// columns (Manifest::sharedKV, MLA's latent cache).
  CUdeviceptr valueCache = 0;
  /// int32 [batch] in device memory; may change between launches/replays.
  CUdeviceptr seqLens = 0;
  CUdeviceptr output = 0;
  /// Required exactly when the kernels were compiled with an lse output.
  CUdeviceptr lse = 0;
  int64_t batch = 0;
  /// Dense caches: Lmax. Paged caches: max_pages * page_size.
  int64_t maxLength = 0;
  /// Paged caches: int32 [batch, max_pages] page indices in device memory;
  /// like the lengths, its contents may change between replays.
  CUdeviceptr blockTable = 0;
  /// Paged caches: the pages in each pool (the caches' first dimension);
  /// the kernels clamp block-table entries into [0, numPages).
  int64_t numPages = 0;
  /// Required exactly when the kernels were compiled with attention sinks:
  /// float [num_q_heads] in device memory, read by the merge at every
  /// launch (so it may change between replays).
  CUdeviceptr sinks = 0;
  /// Required exactly when the kernels were compiled with ALiBi: float
  /// [num_q_heads] slopes in device memory, read by the partial kernel at
  /// every launch.
  CUdeviceptr alibiSlopes = 0;
  /// Required exactly when the kernels were compiled with per-sequence
  /// query lengths: int32 [batch] in device memory, each clamped to [0,
  /// query_len] by the kernels, read at every launch (so, like the lengths,
  /// it may change between replays).
  CUdeviceptr queryLens = 0;
  /// Required exactly when the kernels read a sharded cache
  /// (Manifest::kvShardWorld): int32 [1] in device memory, this rank in
  /// [0, kv_shard_world) (the kernel clamps it into that range), read by
  /// the partial kernel at every launch. The lengths are then global.
  CUdeviceptr kvShardRank = 0;
  /// Required exactly when the kernels continue a shared prefix
  /// (Manifest::sharedPrefix): int32 [batch] in device memory, each query
  /// sequence's tokens after the prefix (clamped to [0, 2^30] by the
  /// kernel), read by the partial kernel at every launch. The caches then
  /// hold the prefix alone: seqLens is its length, int32 [1], a blockTable
  /// one row, a dense cache one sequence.
  CUdeviceptr suffixLens = 0;
  /// Required exactly when the kernels read fp8 caches
  /// (Manifest::hasFloat8Cache; the caches then hold 1 byte per element):
  /// float scales of the keys and of the values in device memory, [1] per
  /// tensor, or per token and KV head the caches' shape without the head
  /// dim (dense NHD [batch, maxLength, num_kv_heads], dense HND [batch,
  /// num_kv_heads, maxLength], paged NHD [numPages, page_size,
  /// num_kv_heads], paged HND [numPages, num_kv_heads, page_size]); read by
  /// the partial kernel at every launch (so they may change between
  /// replays). vScale is 0 with Manifest::sharedKV: kScale scales the
  /// latent cache's rows, values included.
  CUdeviceptr kScale = 0, vScale = 0;
  /// A workspace of at least Manifest::getWorkspaceBytes(batch) bytes that
  /// the caller owns and keeps alive while launches may use it (e.g. one per
  /// stream from StreamWorkspaces, shared by every plan launched there);
  /// 0: the plan allocates its own.
  CUdeviceptr workspace = 0;
  /// With a fused merge (Manifest::fusedMerge): at least
  /// Manifest::getMergeCounterBytes(batch) bytes, all zero before the first
  /// launch; every launch leaves them zero. Not shared by launches that may
  /// run at once (one per stream: StreamWorkspaces with zeroed buffers).
  /// 0: the plan allocates and zeroes its own.
  CUdeviceptr mergeCounters = 0;
};

/// A compiled configuration bound to fixed buffers, with its workspace
/// allocated once (or the caller's): what a CUDA graph records.
class DecodePlan {
public:
  DecodePlan(const Device &device, const KernelBundle &kernels,
             const DecodeBuffers &buffers);
  ~DecodePlan();
  DecodePlan(const DecodePlan &) = delete;
  DecodePlan &operator=(const DecodePlan &) = delete;

  /// Launches the kernels on `stream`, in the manifest's order, with
  /// cuLaunchKernelEx: those whose manifest entry says programmatic_launch
  /// with programmatic stream serialization (their launch overlaps the
  /// kernel before them; docs/KernelABI.md), unless FD_PROGRAMMATIC_LAUNCH
  /// was 0 when the plan was made.
  void launch(CUstream stream) const;
  /// Whether launch() gives kernel `index` (manifest order) programmatic
  /// stream serialization.
  bool isProgrammatic(size_t index) const;

  const DecodeBuffers &getBuffers() const { return buffers; }
  /// Rebinds the plan to other buffers or shapes (reallocating the
  /// workspace if the batch grew). Graphs captured before become stale.
  void setBuffers(const DecodeBuffers &buffers);
  /// Changes with every setBuffers.
  uint64_t getGeneration() const { return generation; }
  int64_t getWorkspaceBytes() const;
  const Manifest &getManifest() const { return manifest; }

private:
  struct BoundKernel;
  void bind();
  /// `buffer`'s address once it holds `bytes`: an outgrown one is retired
  /// (launches queued before the rebind may still use it) and replaced,
  /// zeroed when `zeroed`.
  CUdeviceptr growPlanBuffer(std::unique_ptr<DeviceBuffer> &buffer,
                             int64_t bytes, bool zeroed);

  const Device &device;
  Manifest manifest;
  std::vector<std::unique_ptr<Module>> modules;
  std::vector<std::unique_ptr<BoundKernel>> kernels;
  DecodeBuffers buffers;
  std::unique_ptr<DeviceBuffer> workspace, mergeCounters;
  /// Workspaces and counters outgrown by setBuffers, kept for launches
  /// still queued.
  std::vector<std::unique_ptr<DeviceBuffer>> retiredWorkspaces;
  uint64_t generation = 0;
};

/// One workspace per stream for plans that bind a caller's workspace
/// (DecodeBuffers::workspace): launches on one stream run one after another,
/// so one buffer serves every plan launched there, whatever its
/// configuration. A buffer only grows, at least doubling, so a growing batch
/// reallocates rarely; before it frees the smaller buffer it synchronizes
/// the stream, because launches queued there may still use it. Destroying
/// the object frees the buffers: synchronize the streams first.
class StreamWorkspaces {
public:
  /// `zeroed`: every buffer is all zero when handed out first (a fused
  /// merge's counters, which its launches leave zero).
  explicit StreamWorkspaces(const Device &device, bool zeroed = false)
      : device(device), zeroed(zeroed) {}

  /// The address of a workspace of at least `bytes` bytes (16-byte aligned)
  /// for launches on `stream`. Not thread-safe: callers serialize.
  CUdeviceptr get(CUstream stream, size_t bytes);
  /// Bytes of `stream`'s workspace; 0 before the first get.
  size_t getSize(CUstream stream) const;

private:
  const Device &device;
  bool zeroed;
  std::map<CUstream, DeviceBuffer> buffers;
};

/// The launches of one or more plans, recorded once and replayed with a
/// single launch. Lengths in device memory may change between replays;
/// rebinding a plan (setBuffers) makes the graph stale, and replay then
/// throws: capture a new one.
class Graph {
public:
  /// Records `plans` in order on `stream` (not the legacy default stream).
  /// The capture is always ended, also when a launch fails; a capture that
  /// recorded nothing is rejected.
  static Graph capture(const Device &device,
                       const std::vector<const DecodePlan *> &plans,
                       CUstream stream);
  /// Records what `record` launches on `stream` (as above): kernels of
  /// `plans`, whose rebinding makes the graph stale, and any others (a
  /// merge of their outputs, a cascade's).
  static Graph capture(const Device &device,
                       const std::vector<const DecodePlan *> &plans,
                       CUstream stream,
                       const std::function<void(CUstream)> &record);
  ~Graph();
  Graph(Graph &&other) noexcept;
  Graph &operator=(Graph &&other) noexcept;

  void replay(CUstream stream) const;
  /// Whether a captured plan was rebound since.
  bool isStale() const;

private:
  explicit Graph(const Device &device)
      : device(&device), driver(&device.getDriverApi()) {}
  void release();

  const Device *device;
  const DriverApi *driver;
  CUgraph graph = nullptr;
  CUgraphExec executable = nullptr;
  std::vector<std::pair<const DecodePlan *, uint64_t>> plans;
};

} // namespace flashdecode::rt

#endif // FD_RUNTIME_RUNTIME_H

//===- CudaModule.cpp - The runtime half of the flashdecode extension -----===//
//
// backend="cuda" and Decoder: one primary context per GPU, a Decoder's plan
// (CudaPlan), decode_attention's kernels loaded once per configuration and
// GPU (CudaLauncher) with the fp8 scales it stages (StagedScale), device
// memory for DeviceArray, and what the driver says about GPUs and pointers.
//
//===----------------------------------------------------------------------===//

#include "FlashDecodeModule.h"

#include "fd/Compiler/Compile.h"
#include "fd/Compiler/SplitKVOptions.h"
#include "fd/Runtime/Runtime.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <variant>

namespace py = pybind11;
using namespace flashdecode;

namespace {

/// What the process opened on one GPU: its primary context, and what
/// decode_attention's launches share per stream: the split workspaces and
/// the fp8 scales they stage (StagedScale) and a fused merge's counters
/// (zeroed; each launch leaves them zero).
struct OpenDevice {
  explicit OpenDevice(int ordinal)
      : device(rt::getDriver(), ordinal), workspaces(device),
        stagedScales(device), mergeCounters(device, /*zeroed=*/true) {}
  rt::Device device;
  rt::StreamWorkspaces workspaces;
  rt::StreamWorkspaces stagedScales;
  rt::StreamWorkspaces mergeCounters;

  /// Rank `rank` of a sharded cache as the kernels read it, an int32 in
  /// device memory: written once (synchronously) and kept, so every launch
  /// and graph of that rank binds the same address.
  rt::CUdeviceptr getShardRank(int32_t rank) {
    std::unique_ptr<rt::DeviceBuffer> &buffer = shardRanks[rank];
    if (!buffer) {
      buffer = std::make_unique<rt::DeviceBuffer>(device, sizeof(rank));
      buffer->upload(&rank, sizeof(rank));
    }
    return buffer->getAddress();
  }

private:
  std::map<int32_t, std::unique_ptr<rt::DeviceBuffer>> shardRanks;
};

/// GPU `ordinal`, opened on first use. Never closed, like everything the
/// per-call path loads: kernels queued on a stream may still use its memory
/// when the interpreter exits, and the driver releases it with the process.
OpenDevice &getOpenDevice(int ordinal) {
  static std::mutex mutex;
  static auto *devices = new std::map<int, std::unique_ptr<OpenDevice>>();
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<OpenDevice> &open = (*devices)[ordinal];
  if (!open)
    open = std::make_unique<OpenDevice>(ordinal);
  return *open;
}

rt::Device &getDevice(int ordinal) { return getOpenDevice(ordinal).device; }

} // namespace

rt::Device &flashdecode::python::getCudaDevice(int ordinal) {
  return getDevice(ordinal);
}

namespace {

rt::KernelBundle toBundle(const CompiledKernels &kernels) {
  rt::KernelBundle bundle;
  bundle.manifest = rt::Manifest::parse(kernels.manifest);
  for (const auto &[name, ptx] : kernels.ptx)
    bundle.ptx[name] = ptx;
  return bundle;
}

/// Device memory behind flashdecode.DeviceArray, which keeps the shape and
/// dtype. Copies are synchronous on the legacy default stream, so they are
/// ordered after work queued on blocking streams (a plan's own stream).
class PyDeviceBuffer {
public:
  PyDeviceBuffer(size_t bytes, int ordinal)
      : buffer(getDevice(ordinal), bytes) {}

  uintptr_t getAddress() const { return buffer.getAddress(); }
  size_t getSize() const { return buffer.getSize(); }

  void upload(const py::array &array) {
    const void *data = python::checkedData(array, buffer.getSize(), "a");
    if (buffer.getSize())
      buffer.upload(data, buffer.getSize());
  }
  void download(py::array &array) const {
    python::checkedData(array, buffer.getSize(), "destination");
    if (buffer.getSize())
      buffer.download(array.mutable_data(), buffer.getSize());
  }

private:
  rt::DeviceBuffer buffer;
};

/// The kernels of `request` (the JIT compiles once for every request that
/// resolves to them, whatever batch each planned for).
std::shared_ptr<const CompiledKernels>
compileOrThrow(const KernelRequest &request) {
  auto kernels = compile(request);
  if (!kernels)
    throw std::runtime_error(llvm::toString(kernels.takeError()));
  return *kernels;
}

/// A DecodePlan for Python's Decoder: compiled kernels bound once to fixed
/// device pointers on GPU `ordinal`, with a workspace of its own (a captured
/// graph keeps its address, so it cannot share a growing one). Without a
/// caller's stream it runs on a stream of its own: the legacy default stream
/// cannot be captured into a graph.
class PyCudaPlan {
public:
  PyCudaPlan(const KernelRequest &request, int ordinal, uintptr_t query,
             uintptr_t keys, uintptr_t values, uintptr_t lengths,
             uintptr_t output, uintptr_t lse, uintptr_t blockTable,
             int64_t numPages, uintptr_t sinks, uintptr_t alibiSlopes,
             uintptr_t queryLens, uintptr_t kScale, uintptr_t vScale,
             uintptr_t kvShardRank, uintptr_t suffixLens)
      : device(getDevice(ordinal)), driver(device.getDriverApi()),
        bundle(toBundle(*compileOrThrow(request))), arch(request.config.arch) {
    rt::DecodeBuffers buffers{query,
                              keys,
                              values,
                              lengths,
                              output,
                              lse,
                              request.hints.batch,
                              request.hints.maxLength,
                              blockTable};
    buffers.numPages = numPages;
    buffers.sinks = sinks;
    buffers.alibiSlopes = alibiSlopes;
    buffers.queryLens = queryLens;
    buffers.kScale = kScale;
    buffers.vScale = vScale;
    buffers.kvShardRank = kvShardRank;
    buffers.suffixLens = suffixLens;
    plan = std::make_unique<rt::DecodePlan>(device, bundle, buffers);
  }

  ~PyCudaPlan() {
    // The workspace and modules go with the plan: let every launch queued
    // on a stream it used finish first. (Errors are ignored: a destructor
    // cannot report them, and a faulted context has nothing to wait for.)
    driver.cuCtxSetCurrent(device.getContext());
    for (rt::CUstream stream : usedStreams)
      driver.cuStreamSynchronize(stream);
    graph.reset();
    plan.reset();
    if (ownStream)
      driver.cuStreamDestroy(ownStream);
  }

  void launch(std::optional<uintptr_t> stream) {
    plan->launch(resolve(stream));
  }
  void capture(std::optional<uintptr_t> stream) {
    graph = std::make_unique<rt::Graph>(
        rt::Graph::capture(device, {plan.get()}, resolve(stream)));
  }
  void replay(std::optional<uintptr_t> stream) {
    if (!graph)
      throw std::runtime_error("replay() before capture()");
    graph->replay(resolve(stream));
  }
  int64_t numSplits() const { return bundle.manifest.numSplits; }
  const std::string &getArch() const { return arch; }
  /// The plan's own stream (made now if it was not): what a caller that
  /// launches it beside others (a cascade) runs them all on.
  uintptr_t getOwnStream() {
    return reinterpret_cast<uintptr_t>(resolve(std::nullopt));
  }

private:
  /// The caller's stream, or the plan's own (a blocking one, so synchronous
  /// copies on the legacy stream wait for it), created on first use.
  rt::CUstream resolve(std::optional<uintptr_t> stream) {
    rt::CUstream resolved = reinterpret_cast<rt::CUstream>(stream.value_or(0));
    if (!stream) {
      if (!ownStream) {
        device.makeCurrent();
        rt::check(driver, driver.cuStreamCreate(&ownStream, 0),
                  "creating the decoder's stream");
      }
      resolved = ownStream;
    }
    usedStreams.insert(resolved);
    return resolved;
  }

  const rt::Device &device;
  const rt::DriverApi &driver;
  rt::KernelBundle bundle;
  std::string arch;
  std::unique_ptr<rt::DecodePlan> plan;
  std::unique_ptr<rt::Graph> graph;
  rt::CUstream ownStream = nullptr;
  std::set<rt::CUstream> usedStreams;
};

/// A CUDA graph of what a Python callable launched on one stream (a
/// cascade's two plans and their merge), replayed as one launch.
class PyCudaGraph {
public:
  PyCudaGraph(int ordinal, uintptr_t stream, const py::function &record)
      : graph(rt::Graph::capture(
            getDevice(ordinal), {}, reinterpret_cast<rt::CUstream>(stream),
            [&](rt::CUstream) { record(); })) {}

  void replay(uintptr_t stream) {
    graph.replay(reinterpret_cast<rt::CUstream>(stream));
  }

private:
  rt::Graph graph;
};

/// An fp8 scale buffer (k_scale or v_scale) that decode_attention writes
/// into device memory before a launch, on the launch's stream: `count`
/// copies of `value` (a Python float) or of the float at device address
/// `source` (a per-tensor scale beside a per-token one, broadcast to the
/// caches' shape without the head dim). Stream-ordered, so launches queued
/// before still read what they were given.
struct StagedScale {
  std::optional<float> value;
  uintptr_t source = 0;
  int64_t count = 1;
};

/// A scale buffer as decode_attention passes it: a device address the
/// kernel reads as it is (0: none), or one to stage.
using ScaleArgument = std::variant<uintptr_t, StagedScale>;

/// Writes the 4 bytes at `word` to `destination` on `stream`, byte by
/// byte: the driver table has no 32-bit memset, and a copy from the host
/// would be synchronous.
void stageWord(const rt::DriverApi &driver, const void *word,
               rt::CUdeviceptr destination, rt::CUstream stream,
               const char *what) {
  unsigned char bytes[4];
  std::memcpy(bytes, word, 4);
  for (size_t i = 0; i < 4; ++i)
    rt::check(driver,
              driver.cuMemsetD8Async(destination + i, bytes[i], 1, stream),
              what);
}

/// Writes `scale` at `destination` (room for scale.count floats) on
/// `stream`: its first float from the host value or from the source, then
/// doubling copies of what is written, so a broadcast costs about
/// log2(count) copies.
void stageScale(const rt::DriverApi &driver, const StagedScale &scale,
                rt::CUdeviceptr destination, rt::CUstream stream) {
  if (scale.value) {
    stageWord(driver, &*scale.value, destination, stream,
              "writing an fp8 scale");
  } else {
    rt::check(driver,
              driver.cuMemcpyDtoDAsync(destination, scale.source, sizeof(float),
                                       stream),
              "copying a per-tensor fp8 scale");
  }
  for (int64_t written = 1; written < scale.count;) {
    int64_t copied = std::min(written, scale.count - written);
    rt::check(driver,
              driver.cuMemcpyDtoDAsync(destination + written * sizeof(float),
                                       destination, copied * sizeof(float),
                                       stream),
              "broadcasting a per-tensor fp8 scale");
    written += copied;
  }
}

/// decode_attention's per-call path for one configuration on one GPU: the
/// PTX is compiled and loaded once, and each call rebinds the plan to its
/// buffers and launches on the caller's stream without synchronizing. The
/// workspace is the device's for that stream (StreamWorkspaces), sized for
/// the largest batch seen; the GIL serializes calls. Staged fp8 scales
/// live in the device's staging buffer for that stream, grown alike.
class CudaLauncher {
public:
  /// `config`: a resolved config (resolve()).
  CudaLauncher(const KernelConfig &config, int ordinal, OpenDevice &open)
      : open(open), bundle(toBundle(*compileOrThrow(config))), config(config),
        ordinal(ordinal) {}

  void launch(uintptr_t query, uintptr_t keys, uintptr_t values,
              uintptr_t lengths, uintptr_t output, uintptr_t lse,
              uintptr_t blockTable, int64_t numPages, int64_t batch,
              int64_t maxLength, uintptr_t streamHandle, uintptr_t sinks,
              uintptr_t alibiSlopes, uintptr_t queryLens,
              const ScaleArgument &kScale, const ScaleArgument &vScale,
              uintptr_t kvShardRank, uintptr_t suffixLens,
              std::optional<int32_t> stagedLength) {
    auto stream = reinterpret_cast<rt::CUstream>(streamHandle);
    rt::DecodeBuffers buffers{query, keys,  values,    lengths,   output,
                              lse,   batch, maxLength, blockTable};
    buffers.numPages = numPages;
    buffers.sinks = sinks;
    buffers.alibiSlopes = alibiSlopes;
    buffers.queryLens = queryLens;
    buffers.kvShardRank = kvShardRank;
    buffers.suffixLens = suffixLens;
    buffers.workspace =
        open.workspaces.get(stream, bundle.manifest.getWorkspaceBytes(batch));
    if (bundle.manifest.fusedMerge)
      buffers.mergeCounters = open.mergeCounters.get(
          stream, bundle.manifest.getMergeCounterBytes(batch));
    stage(kScale, vScale, stagedLength, stream, buffers);
    // The plan loads the modules; made with the first call's buffers (a
    // failed load, e.g. PTX too new for the GPU, is retried next call).
    if (plan)
      plan->setBuffers(buffers);
    else
      plan = std::make_unique<rt::DecodePlan>(open.device, bundle, buffers);
    plan->launch(stream);
    ++launchCount;
  }

  int64_t numSplits() const { return bundle.manifest.numSplits; }
  const std::string &getArch() const { return config.arch; }
  const KernelConfig &getConfig() const { return config; }
  int getDevice() const { return ordinal; }
  int64_t getLaunchCount() const { return launchCount; }

private:
  /// Sets buffers.kScale and vScale: the addresses given, or those of the
  /// scales staged on `stream` (k first, then v, 16-byte aligned each); and
  /// with a `stagedLength` (a shared prefix's length given as a number)
  /// buffers.seqLens to where it is staged after them.
  void stage(const ScaleArgument &kScale, const ScaleArgument &vScale,
             std::optional<int32_t> stagedLength, rt::CUstream stream,
             rt::DecodeBuffers &buffers) {
    const auto *kStaged = std::get_if<StagedScale>(&kScale);
    const auto *vStaged = std::get_if<StagedScale>(&vScale);
    auto bytes = [](const StagedScale *scale) -> size_t {
      return scale ? (scale->count * sizeof(float) + 15) / 16 * 16 : 0;
    };
    size_t lengthBytes = stagedLength ? 16 : 0;
    rt::CUdeviceptr staging = 0;
    if (kStaged || vStaged || stagedLength) {
      for (const StagedScale *scale : {kStaged, vStaged})
        if (scale && (scale->count < 1 || (!scale->value && !scale->source)))
          throw py::value_error("a staged fp8 scale needs a value or a "
                                "source and a count >= 1");
      staging = open.stagedScales.get(stream, bytes(kStaged) +
                                                  bytes(vStaged) + lengthBytes);
      open.device.makeCurrent();
    }
    const rt::DriverApi &driver = open.device.getDriverApi();
    if (kStaged)
      stageScale(driver, *kStaged, staging, stream);
    if (vStaged)
      stageScale(driver, *vStaged, staging + bytes(kStaged), stream);
    buffers.kScale = kStaged ? staging : std::get<uintptr_t>(kScale);
    buffers.vScale =
        vStaged ? staging + bytes(kStaged) : std::get<uintptr_t>(vScale);
    if (stagedLength) {
      buffers.seqLens = staging + bytes(kStaged) + bytes(vStaged);
      stageWord(driver, &*stagedLength, buffers.seqLens, stream,
                "writing a shared prefix's length");
    }
  }

  OpenDevice &open;
  rt::KernelBundle bundle;
  KernelConfig config;
  int ordinal;
  std::unique_ptr<rt::DecodePlan> plan;
  int64_t launchCount = 0;
};

/// The process's launchers, by resolved config and GPU (see
/// getOpenDevice).
using LauncherMap =
    std::map<std::pair<std::string, int>, std::unique_ptr<CudaLauncher>>;
LauncherMap &getLaunchers() {
  static auto *launchers = new LauncherMap();
  return *launchers;
}

/// The launcher of the kernels `request` resolves to on GPU `ordinal`, made
/// on first use and kept for the process: requests that plan the same
/// kernels share one, whatever batch and length each planned for.
CudaLauncher &getLauncher(const KernelRequest &request, int ordinal) {
  KernelConfig config = resolve(request);
  std::pair<std::string, int> key{config.toString(), ordinal};
  LauncherMap &launchers = getLaunchers();
  auto found = launchers.find(key);
  if (found == launchers.end())
    found = launchers
                .emplace(key, std::make_unique<CudaLauncher>(
                                  config, ordinal, getOpenDevice(ordinal)))
                .first;
  return *found->second;
}

} // namespace

void flashdecode::python::defineCudaBindings(py::module_ &module) {
  py::class_<PyDeviceBuffer>(module, "DeviceBuffer")
      .def(py::init<size_t, int>(), py::arg("nbytes"), py::arg("device") = 0)
      .def_property_readonly("address", &PyDeviceBuffer::getAddress)
      .def_property_readonly("nbytes", &PyDeviceBuffer::getSize)
      .def("upload", &PyDeviceBuffer::upload, py::arg("a"))
      .def("download", &PyDeviceBuffer::download, py::arg("destination"));

  // The plan binds the buffers of `request`'s planned batch of sequences of
  // its planned max_len positions on GPU `device`. stream=None is the plan's
  // own stream. `sinks`: a float [num_q_heads] device pointer, required
  // exactly when the config has with_sinks (0: none); like every buffer
  // its contents are read at each launch or replay. `alibi_slopes`
  // likewise: float [num_q_heads], required exactly with with_alibi;
  // `query_lens`: int32 [batch], required exactly with with_query_lens;
  // `k_scale` and `v_scale`: float, [1] or the caches' shape without the
  // head dim (the config's kv_scale), required exactly with an fp8
  // kv_dtype; `kv_shard_rank`: int32 [1] (shard_rank_address), required
  // exactly with kv_shard_world; `suffix_lens`: int32 [batch], required
  // exactly with shared_prefix (`seq_lens` is then the prefix's, [1]).
  py::class_<PyCudaPlan>(module, "CudaPlan")
      .def(py::init<const KernelRequest &, int, uintptr_t, uintptr_t, uintptr_t,
                    uintptr_t, uintptr_t, uintptr_t, uintptr_t, int64_t,
                    uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t,
                    uintptr_t, uintptr_t>(),
           py::arg("request"), py::arg("device"), py::arg("q"),
           py::arg("k_cache"), py::arg("v_cache"), py::arg("seq_lens"),
           py::arg("out"), py::arg("lse"), py::arg("block_table"),
           py::arg("num_pages"), py::kw_only(), py::arg("sinks") = 0,
           py::arg("alibi_slopes") = 0, py::arg("query_lens") = 0,
           py::arg("k_scale") = 0, py::arg("v_scale") = 0,
           py::arg("kv_shard_rank") = 0, py::arg("suffix_lens") = 0)
      .def("launch", &PyCudaPlan::launch, py::arg("stream"))
      .def("capture", &PyCudaPlan::capture, py::arg("stream"))
      .def("replay", &PyCudaPlan::replay, py::arg("stream"))
      .def_property_readonly("num_splits", &PyCudaPlan::numSplits)
      .def_property_readonly("arch", &PyCudaPlan::getArch)
      .def_property_readonly("own_stream", &PyCudaPlan::getOwnStream);

  // Records what `record` (no arguments) launches on `stream` of GPU
  // `device` (not the legacy default stream) into a graph; a launch that
  // fails, or nothing launched, raises.
  py::class_<PyCudaGraph>(module, "CudaGraph")
      .def(py::init<int, uintptr_t, const py::function &>(),
           py::arg("device"), py::arg("stream"), py::arg("record"))
      .def("replay", &PyCudaGraph::replay, py::arg("stream"));

  py::class_<StagedScale>(module, "StagedScale")
      .def(py::init(
               [](std::optional<float> value, uintptr_t source, int64_t count) {
                 return StagedScale{value, source, count};
               }),
           py::kw_only(), py::arg("value") = std::nullopt,
           py::arg("source") = 0, py::arg("count") = 1)
      .def_readonly("value", &StagedScale::value)
      .def_readonly("source", &StagedScale::source)
      .def_readonly("count", &StagedScale::count);

  // Owned by the process (a reference, never freed by Python). `k_scale`
  // and `v_scale`: device addresses (as CudaPlan's) or StagedScales;
  // `staged_seq_len`: a shared prefix's length as a number, written into
  // device memory on the stream before the launch (`seq_lens` unused).
  py::class_<CudaLauncher, std::unique_ptr<CudaLauncher, py::nodelete>>(
      module, "CudaLauncher")
      .def("launch", &CudaLauncher::launch, py::arg("q"), py::arg("k_cache"),
           py::arg("v_cache"), py::arg("seq_lens"), py::arg("out"),
           py::arg("lse"), py::arg("block_table"), py::arg("num_pages"),
           py::arg("batch"), py::arg("max_len"), py::arg("stream"),
           py::kw_only(), py::arg("sinks") = 0, py::arg("alibi_slopes") = 0,
           py::arg("query_lens") = 0, py::arg("k_scale") = uintptr_t(0),
           py::arg("v_scale") = uintptr_t(0), py::arg("kv_shard_rank") = 0,
           py::arg("suffix_lens") = 0,
           py::arg("staged_seq_len") = std::optional<int32_t>())
      .def_property_readonly("num_splits", &CudaLauncher::numSplits)
      .def_property_readonly("arch", &CudaLauncher::getArch)
      .def_property_readonly("launch_count", &CudaLauncher::getLaunchCount)
      .def_property_readonly("config", &CudaLauncher::getConfig,
                             "The resolved config (resolve()).")
      .def_property_readonly("device", &CudaLauncher::getDevice);
  module.def(
      "shard_rank_address",
      [](int rank, int ordinal) -> uintptr_t {
        if (rank < 0)
          throw py::value_error("a shard's rank is >= 0, got " +
                                std::to_string(rank));
        return getOpenDevice(ordinal).getShardRank(rank);
      },
      "The device address of an int32 holding `rank` on GPU `device`, "
      "kept for the process: the kv_shard_rank a sharded cache's kernels "
      "read.",
      py::arg("rank"), py::arg("device"));
  module.def(
      "read_int32",
      [](uintptr_t address, size_t count, int ordinal, uintptr_t stream) {
        py::array_t<int32_t> host(static_cast<py::ssize_t>(count));
        if (count)
          rt::copyToHost(getDevice(ordinal),
                         reinterpret_cast<rt::CUstream>(stream), address,
                         host.mutable_data(), count * sizeof(int32_t));
        return host;
      },
      "count int32 values at a device address, read once the work queued on "
      "`stream` (0: the legacy default stream) is done.",
      py::arg("address"), py::arg("count"), py::arg("device"),
      py::arg("stream"));
  module.def("cuda_launcher", &getLauncher,
             "The process's launcher of the kernels `request` resolves to "
             "(its split count planned with its hints) on `device`.",
             py::arg("request"), py::arg("device"),
             py::return_value_policy::reference);
  module.def(
      "cuda_launchers",
      [] {
        std::vector<CudaLauncher *> all;
        for (auto &[key, launcher] : getLaunchers())
          all.push_back(launcher.get());
        return all;
      },
      "The launchers made so far, in the order of their resolved configs.",
      py::return_value_policy::reference);
  module.def(
      "cuda_workspace_bytes",
      [](int ordinal, uintptr_t stream) {
        return getOpenDevice(ordinal).workspaces.getSize(
            reinterpret_cast<rt::CUstream>(stream));
      },
      py::arg("device"), py::arg("stream"));
  // Bytes of a fused merge's counters for `stream` (0 before its first
  // fused launch there).
  module.def(
      "cuda_merge_counter_bytes",
      [](int ordinal, uintptr_t stream) {
        return getOpenDevice(ordinal).mergeCounters.getSize(
            reinterpret_cast<rt::CUstream>(stream));
      },
      py::arg("device"), py::arg("stream"));

  module.def(
      "cuda_device_name",
      [](int ordinal) { return getDevice(ordinal).getName(); },
      py::arg("device") = 0);
  module.def(
      "cuda_sm_count",
      [](int ordinal) { return getDevice(ordinal).getMultiprocessorCount(); },
      py::arg("device") = 0);
  // The PTX target for the GPU's compute capability.
  module.def(
      "cuda_target",
      [](int ordinal) {
        auto [major, minor] = getDevice(ordinal).getComputeCapability();
        try {
          return rt::getTargetForComputeCapability(major, minor);
        } catch (const std::invalid_argument &error) {
          // The GPU, not an argument, is wrong: RuntimeError, not ValueError.
          throw std::runtime_error("GPU " + std::to_string(ordinal) + ": " +
                                   error.what());
        }
      },
      py::arg("device") = 0);
  // The ordinal of the GPU whose memory holds `address`; None when the
  // driver does not know the address.
  module.def(
      "pointer_device",
      [](uintptr_t address) {
        return rt::getDeviceOfPointer(rt::getDriver(), address);
      },
      py::arg("address"));

  // Driver failures (no GPU, bad PTX, launch errors) are RuntimeError.
  py::register_exception<rt::CudaError>(module, "CudaError",
                                        PyExc_RuntimeError);
}

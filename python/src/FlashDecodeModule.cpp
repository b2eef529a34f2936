//===- FlashDecodeModule.cpp - The flashdecode Python extension -----------===//
//
// The native half of the `flashdecode` package: the split planner, the JIT,
// the CPU kernels, the runtime (one primary context per GPU, a Decoder's
// plan, decode_attention's kernels loaded once per configuration and GPU)
// and device memory for DeviceArray. Argument checking that names Python
// arguments lives in flashdecode/__init__.py; this layer re-checks buffer
// sizes so a wrong call can never read or write out of bounds.
//
//===----------------------------------------------------------------------===//

#include "fd/Compiler/CPUAttentionKernel.h"
#include "fd/Compiler/Compile.h"
#include "fd/Dialect/FD/Utils/AttentionUtils.h"
#include "fd/Planning/SplitPlanner.h"
#include "fd/Runtime/Runtime.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <mutex>
#include <set>

namespace py = pybind11;
using namespace fd;

namespace {

ElementType parseElementType(const std::string &name) {
  if (name == "f16")
    return ElementType::F16;
  if (name == "bf16")
    return ElementType::BF16;
  if (name == "f32")
    return ElementType::F32;
  throw py::value_error("dtype must be f16, bf16 or f32, got '" + name + "'");
}

KernelConfig makeConfig(int64_t headDim, int64_t numQueryHeads,
                        int64_t numKVHeads, int64_t queryLength,
                        const std::string &dtype, const std::string &kvLayout,
                        int64_t pageSize, int64_t numSplits, bool splitKV,
                        std::optional<float> scale, bool withLse, int64_t batch,
                        int64_t maxLength, int64_t smCount,
                        const std::string &arch, int64_t blocksPerSM,
                        int64_t minChunkLength, int64_t maxSplits,
                        int64_t windowLeft, std::optional<float> logitsSoftCap,
                        bool withSinks, bool withAlibi) {
  KernelConfig config;
  config.headDim = headDim;
  config.numQueryHeads = numQueryHeads;
  config.numKVHeads = numKVHeads;
  config.queryLength = queryLength;
  config.elementType = parseElementType(dtype);
  if (kvLayout != "NHD" && kvLayout != "HND")
    throw py::value_error("kv_layout must be 'NHD' or 'HND', got '" + kvLayout +
                          "'");
  config.cacheLayout = kvLayout == "NHD" ? CacheLayout::NHD : CacheLayout::HND;
  config.pageSize = pageSize;
  config.numSplits = numSplits;
  config.splitKV = splitKV;
  config.scale = scale;
  config.withLse = withLse;
  config.batch = batch;
  config.maxLength = maxLength;
  config.smCount = smCount;
  config.arch = arch;
  config.blocksPerSM = blocksPerSM;
  config.minChunkLength = minChunkLength;
  config.maxSplits = maxSplits;
  config.windowLeft = windowLeft;
  config.logitsSoftCap = logitsSoftCap;
  config.withSinks = withSinks;
  config.withAlibi = withAlibi;
  std::string invalid = config.validate();
  if (!invalid.empty())
    throw py::value_error(invalid);
  return config;
}

#define FD_CONFIG_ARGS                                                         \
  py::arg("head_dim"), py::arg("num_q_heads"), py::arg("num_kv_heads"),        \
      py::arg("query_len"), py::arg("dtype"), py::arg("kv_layout"),            \
      py::arg("page_size"), py::arg("num_splits"), py::arg("split_kv"),        \
      py::arg("scale"), py::arg("with_lse"), py::arg("batch"),                 \
      py::arg("max_len"), py::arg("sm_count"), py::arg("arch"),                \
      py::arg("blocks_per_sm") = KernelConfig().blocksPerSM,                   \
      py::arg("min_chunk_length") = KernelConfig().minChunkLength,             \
      py::arg("max_splits") = KernelConfig().maxSplits, py::kw_only(),         \
      py::arg("window_left") = KernelConfig().windowLeft,                      \
      py::arg("logits_soft_cap") = py::none(),                                 \
      py::arg("with_sinks") = KernelConfig().withSinks,                        \
      py::arg("with_alibi") = KernelConfig().withAlibi

/// The data pointer of a C-contiguous array of exactly `bytes` bytes.
void *checkedData(const py::array &array, size_t bytes, const char *name) {
  if (!(array.flags() & py::array::c_style))
    throw py::value_error(std::string(name) + " must be C-contiguous");
  if (static_cast<size_t>(array.nbytes()) != bytes)
    throw py::value_error(std::string(name) + " holds " +
                          std::to_string(array.nbytes()) + " bytes, expected " +
                          std::to_string(bytes));
  return const_cast<void *>(array.data());
}

class PyCPUKernel {
public:
  explicit PyCPUKernel(const KernelConfig &config) {
    auto compiled = CPUAttentionKernel::compile(config);
    if (!compiled)
      throw std::runtime_error(llvm::toString(compiled.takeError()));
    kernel = std::move(*compiled);
  }

  /// Dense caches: `maxLength` positions per sequence. Paged caches:
  /// `blockTable` [batch, maxPages] into pools of `numPages` pages. `sinks`
  /// (float32 [num_q_heads]) exactly when the kernel has attention sinks,
  /// `alibiSlopes` (float32 [num_q_heads]) exactly when it applies ALiBi.
  void run(const py::array &query, const py::array &keys,
           const py::array &values, const py::array &lengths, py::array &output,
           std::optional<py::array> lse, int64_t batch, int64_t maxLength,
           std::optional<py::array> blockTable, int64_t numPages,
           int64_t maxPages, std::optional<py::array> sinks,
           std::optional<py::array> alibiSlopes) {
    const KernelConfig &config = kernel->getConfig();
    size_t element = getElementTypeSize(config.elementType);
    size_t rows = batch * config.queryLength * config.numQueryHeads;
    size_t cache =
        config.pageSize
            ? numPages * config.pageSize * config.numKVHeads * config.headDim
            : batch * maxLength * config.numKVHeads * config.headDim;
    AttentionBuffers buffers;
    buffers.query = checkedData(query, rows * config.headDim * element, "q");
    buffers.keyCache = checkedData(keys, cache * element, "k_cache");
    buffers.valueCache = checkedData(values, cache * element, "v_cache");
    buffers.seqLens = static_cast<const int32_t *>(
        checkedData(lengths, batch * sizeof(int32_t), "seq_lens"));
    buffers.output =
        checkedData(output, rows * config.headDim * element, "output");
    if (config.withLse) {
      if (!lse)
        throw py::value_error("this kernel writes an lse: lse required");
      buffers.lse =
          static_cast<float *>(checkedData(*lse, rows * sizeof(float), "lse"));
    }
    if (config.pageSize) {
      if (!blockTable)
        throw py::value_error("this kernel reads paged caches: block_table "
                              "required");
      buffers.blockTable = static_cast<const int32_t *>(checkedData(
          *blockTable, batch * maxPages * sizeof(int32_t), "block_table"));
      buffers.numPages = numPages;
      buffers.maxPagesPerSequence = maxPages;
    }
    if (config.withSinks != sinks.has_value())
      throw py::value_error(
          config.withSinks
              ? "this kernel reads attention sinks: sinks (float32 "
                "[num_q_heads]) required"
              : "this kernel was compiled without attention sinks: sinks "
                "must be None");
    if (sinks) {
      if (!sinks->dtype().is(py::dtype::of<float>()))
        throw py::value_error("sinks must be float32");
      buffers.sinks = static_cast<const float *>(
          checkedData(*sinks, config.numQueryHeads * sizeof(float), "sinks"));
    }
    if (config.withAlibi != alibiSlopes.has_value())
      throw py::value_error(
          config.withAlibi
              ? "this kernel applies ALiBi: alibi_slopes (float32 "
                "[num_q_heads]) required"
              : "this kernel was compiled without ALiBi: alibi_slopes "
                "must be None");
    if (alibiSlopes) {
      if (!alibiSlopes->dtype().is(py::dtype::of<float>()))
        throw py::value_error("alibi_slopes must be float32");
      buffers.alibiSlopes = static_cast<const float *>(checkedData(
          *alibiSlopes, config.numQueryHeads * sizeof(float), "alibi_slopes"));
    }
    buffers.batch = batch;
    buffers.maxLength = maxLength;
    llvm::Error error = llvm::Error::success();
    {
      py::gil_scoped_release release;
      error = kernel->run(buffers);
    }
    if (error)
      throw std::runtime_error(llvm::toString(std::move(error)));
  }

  int64_t numSplits() const { return kernel->getNumSplits(); }

private:
  std::unique_ptr<CPUAttentionKernel> kernel;
};

/// What the process opened on one GPU: its primary context, and the
/// workspaces decode_attention's launches share per stream.
struct OpenDevice {
  explicit OpenDevice(int ordinal)
      : device(rt::getDriver(), ordinal), workspaces(device) {}
  rt::Device device;
  rt::StreamWorkspaces workspaces;
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
    const void *data = checkedData(array, buffer.getSize(), "a");
    if (buffer.getSize())
      buffer.upload(data, buffer.getSize());
  }
  void download(py::array &array) const {
    checkedData(array, buffer.getSize(), "destination");
    if (buffer.getSize())
      buffer.download(array.mutable_data(), buffer.getSize());
  }

private:
  rt::DeviceBuffer buffer;
};

std::shared_ptr<const CompiledKernels>
compileOrThrow(const KernelConfig &config) {
  auto kernels = compile(config);
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
  PyCudaPlan(const KernelConfig &config, int ordinal, uintptr_t query,
             uintptr_t keys, uintptr_t values, uintptr_t lengths,
             uintptr_t output, uintptr_t lse, uintptr_t blockTable,
             int64_t numPages, uintptr_t sinks, uintptr_t alibiSlopes)
      : device(getDevice(ordinal)), driver(device.getDriverApi()),
        bundle(toBundle(*compileOrThrow(config))), arch(config.arch) {
    rt::DecodeBuffers buffers{query,     keys, values,       lengths,
                              output,    lse,  config.batch, config.maxLength,
                              blockTable};
    buffers.numPages = numPages;
    buffers.sinks = sinks;
    buffers.alibiSlopes = alibiSlopes;
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

/// decode_attention's per-call path for one configuration on one GPU: the
/// PTX is compiled and loaded once, and each call rebinds the plan to its
/// buffers and launches on the caller's stream without synchronizing. The
/// workspace is the device's for that stream (StreamWorkspaces), sized for
/// the largest batch seen; the GIL serializes calls.
class CudaLauncher {
public:
  CudaLauncher(const KernelConfig &config, OpenDevice &open)
      : open(open), bundle(toBundle(*compileOrThrow(config))),
        arch(config.arch) {}

  void launch(uintptr_t query, uintptr_t keys, uintptr_t values,
              uintptr_t lengths, uintptr_t output, uintptr_t lse,
              uintptr_t blockTable, int64_t numPages, int64_t batch,
              int64_t maxLength, uintptr_t streamHandle, uintptr_t sinks,
              uintptr_t alibiSlopes) {
    auto stream = reinterpret_cast<rt::CUstream>(streamHandle);
    rt::DecodeBuffers buffers{query, keys,  values,    lengths,   output,
                              lse,   batch, maxLength, blockTable};
    buffers.numPages = numPages;
    buffers.sinks = sinks;
    buffers.alibiSlopes = alibiSlopes;
    buffers.workspace =
        open.workspaces.get(stream, bundle.manifest.getWorkspaceBytes(batch));
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
  const std::string &getArch() const { return arch; }
  int64_t getLaunchCount() const { return launchCount; }

private:
  OpenDevice &open;
  rt::KernelBundle bundle;
  std::string arch;
  std::unique_ptr<rt::DecodePlan> plan;
  int64_t launchCount = 0;
};

/// The launcher of `config` on GPU `ordinal`, made on first use and kept
/// for the process (see getOpenDevice).
CudaLauncher &getLauncher(const KernelConfig &config, int ordinal) {
  static auto *launchers = new std::map<std::pair<std::string, int>,
                                        std::unique_ptr<CudaLauncher>>();
  std::pair<std::string, int> key{config.toString(), ordinal};
  auto found = launchers->find(key);
  if (found == launchers->end())
    found = launchers
                ->emplace(key, std::make_unique<CudaLauncher>(
                                   config, getOpenDevice(ordinal)))
                .first;
  return *found->second;
}

} // namespace

PYBIND11_MODULE(_flashdecode, module) {
  module.doc() = "Native part of flashdecode; use the flashdecode package.";

  module.def(
      "attended_length",
      [](int64_t maxLength, int64_t queryLength, int64_t windowLeft) {
        mlir::fd::AttentionRules rules;
        rules.queryLength = queryLength;
        if (windowLeft > 0)
          rules.windowLeft = windowLeft;
        return mlir::fd::getAttendedLength(maxLength, rules);
      },
      "The most keys one sequence attends to, what automatic splits are "
      "planned for (fd-split-kv's rule): the cache length, or with a window "
      "of W keys at most W + Lq - 1 of them.",
      py::arg("max_len"), py::arg("query_len"), py::arg("window_left"));

  module.def(
      "plan_splits",
      [](int64_t batch, int64_t numKVHeads, int64_t maxLength, int64_t smCount,
         int64_t blocksPerSM, int64_t minChunkLength, int64_t maxSplits) {
        SplitPlannerOptions options;
        options.smCount = smCount;
        options.blocksPerSM = blocksPerSM;
        options.minChunkLength = minChunkLength;
        options.maxSplits = maxSplits;
        std::string invalid = validateSplitPlannerInputs(
            batch, numKVHeads, maxLength, options, /*wordSeparator=*/'_');
        if (!invalid.empty())
          throw py::value_error(invalid);
        return planNumSplits(batch, numKVHeads, maxLength, options).numSplits;
      },
      py::arg("batch"), py::arg("num_kv_heads"), py::arg("max_len"),
      py::arg("sm_count") = SplitPlannerOptions().smCount,
      py::arg("blocks_per_sm") = SplitPlannerOptions().blocksPerSM,
      py::arg("min_chunk_length") = SplitPlannerOptions().minChunkLength,
      py::arg("max_splits") = SplitPlannerOptions().maxSplits);

  // One configuration object, validated once, serves compile(), the CPU
  // kernels and the GPU plans.
  py::class_<KernelConfig>(module, "KernelConfig")
      .def(py::init(&makeConfig), FD_CONFIG_ARGS)
      .def("__repr__", &KernelConfig::toString);

  module.def(
      "compile",
      [](const KernelConfig &config) {
        std::shared_ptr<const CompiledKernels> kernels;
        {
          py::gil_scoped_release release;
          auto compiled = fd::compile(config);
          if (!compiled) {
            std::string message = llvm::toString(compiled.takeError());
            py::gil_scoped_acquire acquire;
            throw std::runtime_error(message);
          }
          kernels = *compiled;
        }
        py::dict ptx;
        for (const auto &[name, text] : kernels->ptx)
          ptx[py::str(name)] = text;
        return py::make_tuple(ptx, kernels->manifest, kernels->numSplits);
      },
      py::arg("config"));

  py::class_<PyCPUKernel>(module, "CPUKernel")
      .def(py::init<const KernelConfig &>(), py::arg("config"))
      .def("run", &PyCPUKernel::run, py::arg("q"), py::arg("k_cache"),
           py::arg("v_cache"), py::arg("seq_lens"), py::arg("out"),
           py::arg("lse"), py::arg("batch"), py::arg("max_len"),
           py::arg("block_table") = std::nullopt, py::arg("num_pages") = 0,
           py::arg("max_pages") = 0, py::kw_only(),
           py::arg("sinks") = std::nullopt,
           py::arg("alibi_slopes") = std::nullopt)
      .def_property_readonly("num_splits", &PyCPUKernel::numSplits);

  py::class_<PyDeviceBuffer>(module, "DeviceBuffer")
      .def(py::init<size_t, int>(), py::arg("nbytes"), py::arg("device") = 0)
      .def_property_readonly("address", &PyDeviceBuffer::getAddress)
      .def_property_readonly("nbytes", &PyDeviceBuffer::getSize)
      .def("upload", &PyDeviceBuffer::upload, py::arg("a"))
      .def("download", &PyDeviceBuffer::download, py::arg("destination"));

  // The plan binds the buffers of `config.batch` sequences of
  // `config.max_len` positions on GPU `device`. stream=None is the plan's
  // own stream. `sinks`: a float [num_q_heads] device pointer, required
  // exactly when the config has with_sinks (0: none); like every buffer
  // its contents are read at each launch or replay. `alibi_slopes`
  // likewise: float [num_q_heads], required exactly with with_alibi.
  py::class_<PyCudaPlan>(module, "CudaPlan")
      .def(py::init<const KernelConfig &, int, uintptr_t, uintptr_t, uintptr_t,
                    uintptr_t, uintptr_t, uintptr_t, uintptr_t, int64_t,
                    uintptr_t, uintptr_t>(),
           py::arg("config"), py::arg("device"), py::arg("q"),
           py::arg("k_cache"), py::arg("v_cache"), py::arg("seq_lens"),
           py::arg("out"), py::arg("lse"), py::arg("block_table"),
           py::arg("num_pages"), py::kw_only(), py::arg("sinks") = 0,
           py::arg("alibi_slopes") = 0)
      .def("launch", &PyCudaPlan::launch, py::arg("stream"))
      .def("capture", &PyCudaPlan::capture, py::arg("stream"))
      .def("replay", &PyCudaPlan::replay, py::arg("stream"))
      .def_property_readonly("num_splits", &PyCudaPlan::numSplits)
      .def_property_readonly("arch", &PyCudaPlan::getArch);

  // Owned by the process (a reference, never freed by Python).
  py::class_<CudaLauncher, std::unique_ptr<CudaLauncher, py::nodelete>>(
      module, "CudaLauncher")
      .def("launch", &CudaLauncher::launch, py::arg("q"), py::arg("k_cache"),
           py::arg("v_cache"), py::arg("seq_lens"), py::arg("out"),
           py::arg("lse"), py::arg("block_table"), py::arg("num_pages"),
           py::arg("batch"), py::arg("max_len"), py::arg("stream"),
           py::kw_only(), py::arg("sinks") = 0, py::arg("alibi_slopes") = 0)
      .def_property_readonly("num_splits", &CudaLauncher::numSplits)
      .def_property_readonly("arch", &CudaLauncher::getArch)
      .def_property_readonly("launch_count", &CudaLauncher::getLaunchCount);
  module.def("cuda_launcher", &getLauncher, py::arg("config"),
             py::arg("device"), py::return_value_policy::reference);
  module.def(
      "cuda_workspace_bytes",
      [](int ordinal, uintptr_t stream) {
        return getOpenDevice(ordinal).workspaces.getSize(
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

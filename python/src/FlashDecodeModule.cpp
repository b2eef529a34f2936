//===- FlashDecodeModule.cpp - The flashdecode Python extension -----------===//
//
// The native half of the `flashdecode` package: the split planner, the JIT,
// the CPU kernels, the runtime and device memory for DeviceArray. Argument
// checking that names Python arguments lives in flashdecode/__init__.py; this
// layer re-checks buffer sizes so a wrong call can never read or write out of
// bounds.
//
//===----------------------------------------------------------------------===//

#include "fd/Compiler/CPUAttentionKernel.h"
#include "fd/Compiler/Compile.h"
#include "fd/Planning/SplitPlanner.h"
#include "fd/Runtime/Runtime.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <mutex>

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
                        const std::string &arch) {
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
      py::arg("max_len"), py::arg("sm_count"), py::arg("arch")

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
  /// `blockTable` [batch, maxPages] into pools of `numPages` pages.
  void run(const py::array &query, const py::array &keys,
           const py::array &values, const py::array &lengths, py::array &output,
           std::optional<py::array> lse, int64_t batch, int64_t maxLength,
           std::optional<py::array> blockTable, int64_t numPages,
           int64_t maxPages) {
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

/// The process's GPU, opened on first use.
rt::Device &getDevice() {
  static std::mutex mutex;
  static std::unique_ptr<rt::Device> device;
  std::lock_guard<std::mutex> lock(mutex);
  if (!device)
    device = std::make_unique<rt::Device>();
  return *device;
}

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
  explicit PyDeviceBuffer(size_t bytes) : buffer(getDevice(), bytes) {}

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

/// A DecodePlan for Python: compiled kernels bound to device pointers.
/// Without a caller's stream it runs on a stream of its own: the legacy
/// default stream cannot be captured into a graph.
class PyCudaPlan {
public:
  PyCudaPlan(const KernelConfig &config, uintptr_t query, uintptr_t keys,
             uintptr_t values, uintptr_t lengths, uintptr_t output,
             uintptr_t lse, uintptr_t blockTable)
      : driver(getDevice().getDriverApi()) {
    auto kernels = compile(config);
    if (!kernels)
      throw std::runtime_error(llvm::toString(kernels.takeError()));
    bundle = toBundle(**kernels);
    rt::DecodeBuffers buffers{query,     keys, values,       lengths,
                              output,    lse,  config.batch, config.maxLength,
                              blockTable};
    plan = std::make_unique<rt::DecodePlan>(getDevice(), bundle, buffers);
  }

  ~PyCudaPlan() {
    // The workspace is freed with the plan: let queued kernels finish first.
    if (ownStream)
      driver.cuStreamSynchronize(ownStream);
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
        rt::Graph::capture(getDevice(), {plan.get()}, resolve(stream)));
  }
  void replay(std::optional<uintptr_t> stream) {
    if (!graph)
      throw std::runtime_error("replay() before capture()");
    graph->replay(resolve(stream));
  }
  int64_t numSplits() const { return bundle.manifest.numSplits; }

private:
  /// The caller's stream, or the plan's own (a blocking one, so synchronous
  /// copies on the legacy stream wait for it), created on first use.
  rt::CUstream resolve(std::optional<uintptr_t> stream) {
    if (stream)
      return reinterpret_cast<rt::CUstream>(*stream);
    if (!ownStream)
      rt::check(driver, driver.cuStreamCreate(&ownStream, 0),
                "creating the decoder's stream");
    return ownStream;
  }

  const rt::DriverApi &driver;
  rt::KernelBundle bundle;
  std::unique_ptr<rt::DecodePlan> plan;
  std::unique_ptr<rt::Graph> graph;
  rt::CUstream ownStream = nullptr;
};

} // namespace

PYBIND11_MODULE(_flashdecode, module) {
  module.doc() = "Native part of flashdecode; use the flashdecode package.";

  module.def(
      "plan_splits",
      [](int64_t batch, int64_t numKVHeads, int64_t maxLength,
         int64_t smCount) {
        SplitPlannerOptions options;
        options.smCount = smCount;
        std::string invalid =
            validateSplitPlannerInputs(batch, numKVHeads, maxLength, options);
        if (!invalid.empty())
          throw py::value_error(invalid);
        return planNumSplits(batch, numKVHeads, maxLength, options).numSplits;
      },
      py::arg("batch"), py::arg("num_kv_heads"), py::arg("max_len"),
      py::arg("sm_count") = 132);

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
           py::arg("max_pages") = 0)
      .def_property_readonly("num_splits", &PyCPUKernel::numSplits);

  py::class_<PyDeviceBuffer>(module, "DeviceBuffer")
      .def(py::init<size_t>(), py::arg("nbytes"))
      .def_property_readonly("address", &PyDeviceBuffer::getAddress)
      .def_property_readonly("nbytes", &PyDeviceBuffer::getSize)
      .def("upload", &PyDeviceBuffer::upload, py::arg("a"))
      .def("download", &PyDeviceBuffer::download, py::arg("destination"));

  // The plan binds the buffers of `config.batch` sequences of
  // `config.max_len` positions. stream=None is the plan's own stream.
  py::class_<PyCudaPlan>(module, "CudaPlan")
      .def(py::init<const KernelConfig &, uintptr_t, uintptr_t, uintptr_t,
                    uintptr_t, uintptr_t, uintptr_t, uintptr_t>(),
           py::arg("config"), py::arg("q"), py::arg("k_cache"),
           py::arg("v_cache"), py::arg("seq_lens"), py::arg("out"),
           py::arg("lse"), py::arg("block_table"))
      .def("launch", &PyCudaPlan::launch, py::arg("stream"))
      .def("capture", &PyCudaPlan::capture, py::arg("stream"))
      .def("replay", &PyCudaPlan::replay, py::arg("stream"))
      .def_property_readonly("num_splits", &PyCudaPlan::numSplits);

  module.def("cuda_device_name", [] { return getDevice().getName(); });
  module.def("cuda_sm_count",
             [] { return getDevice().getMultiprocessorCount(); });

  // Driver failures (no GPU, bad PTX, launch errors) are RuntimeError.
  py::register_exception<rt::CudaError>(module, "CudaError",
                                        PyExc_RuntimeError);
}

//===- MergeStatesModule.cpp - merge_states in the Python extension -------===//
//
// The CPU merges of attention states (fd.merge_states through the CPU
// lowering) on numpy buffers. The flashdecode package checks the arguments
// and names them; this layer re-checks sizes so that a wrong call cannot
// read or write out of bounds.
//
//===----------------------------------------------------------------------===//

#include "FlashDecodeModule.h"

#include "fd/Compiler/CPUMergeStatesKernel.h"
#include "fd/Compiler/Compile.h"
#include "fd/Planning/Limits.h"
#include "fd/Runtime/MergeStates.h"

#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;
using namespace flashdecode;

namespace {

/// The process's CPU merge kernels, one per config, made on first use.
const CPUMergeStatesKernel &getKernel(const MergeStatesConfig &config) {
  static auto *kernels =
      new std::map<std::string, std::unique_ptr<CPUMergeStatesKernel>>();
  std::unique_ptr<CPUMergeStatesKernel> &kernel = (*kernels)[config.toString()];
  if (!kernel) {
    auto compiled = CPUMergeStatesKernel::compile(config);
    if (!compiled)
      throw py::value_error(llvm::toString(compiled.takeError()));
    kernel = std::move(*compiled);
  }
  return *kernel;
}

/// The process's merge kernels on GPUs, per (config, GPU), compiled for the
/// GPU's compute capability and loaded on first use.
const rt::MergeStatesKernel &getCudaKernel(const MergeStatesConfig &config,
                                           int ordinal) {
  static std::mutex mutex;
  static auto *kernels = new std::map<std::pair<std::string, int>,
                                      std::unique_ptr<rt::MergeStatesKernel>>();
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<rt::MergeStatesKernel> &kernel =
      (*kernels)[{config.toString(), ordinal}];
  if (kernel)
    return *kernel;
  rt::Device &device = python::getCudaDevice(ordinal);
  auto [major, minor] = device.getComputeCapability();
  std::string target = rt::getTargetForComputeCapability(major, minor);
  auto compiled = compileMergeStates(config, target, KernelConfig().ptxVersion);
  if (!compiled)
    throw std::runtime_error(llvm::toString(compiled.takeError()));
  rt::MergeStatesLaunch launch;
  MergeStatesEntry entry = getMergeStatesEntry(*compiled);
  launch.kernelName = entry.name;
  launch.threads = entry.threads;
  launch.heads = config.numHeads;
  launch.operands = static_cast<int64_t>(config.statesPerOperand.size());
  launch.withMask = config.withMask;
  kernel = std::make_unique<rt::MergeStatesKernel>(
      device, compiled->ptx.front().second, launch);
  return *kernel;
}

MergeStatesConfig makeConfig(const std::string &dtype, int64_t heads,
                             int64_t headDim,
                             const std::vector<int64_t> &statesPerOperand,
                             bool lseBase2, bool withMask) {
  MergeStatesConfig config;
  config.elementType = python::parseElementType(dtype);
  config.statesPerOperand = statesPerOperand;
  config.numHeads = heads;
  config.headDim = headDim;
  config.lseBase2 = lseBase2;
  config.withMask = withMask;
  std::string invalid = config.validate();
  if (!invalid.empty())
    throw py::value_error(invalid);
  return config;
}

/// Merges device buffers (pointers of `rows` rows in the config's shapes,
/// as cpu_merge_states' arrays) on GPU `ordinal`, queued on `stream`.
void cudaMergeStates(const std::vector<uintptr_t> &states,
                     const std::vector<uintptr_t> &lses, uintptr_t output,
                     uintptr_t lse, uintptr_t mask, const std::string &dtype,
                     int64_t rows, int64_t heads, int64_t headDim,
                     const std::vector<int64_t> &statesPerOperand,
                     bool lseBase2, int ordinal, uintptr_t stream) {
  MergeStatesConfig config =
      makeConfig(dtype, heads, headDim, statesPerOperand, lseBase2, mask != 0);
  if (states.size() != statesPerOperand.size() ||
      lses.size() != statesPerOperand.size())
    throw py::value_error("one states and one lses pointer per operand");
  std::vector<rt::CUdeviceptr> pointers(states.begin(), states.end());
  pointers.insert(pointers.end(), lses.begin(), lses.end());
  pointers.push_back(output);
  pointers.push_back(lse);
  if (mask)
    pointers.push_back(mask);
  py::gil_scoped_release release;
  getCudaKernel(config, ordinal)
      .launch(pointers, rows, reinterpret_cast<rt::CUstream>(stream));
}

/// Merges `states` ([rows, N_i, heads, headDim] each) weighed by `lses`
/// ([rows, N_i, heads] float32 each) into `output` and `lse`.
void mergeStates(const std::vector<py::array> &states,
                 const std::vector<py::array> &lses, py::array &output,
                 py::array &lse, const std::optional<py::array> &mask,
                 const std::string &dtype, int64_t rows, int64_t heads,
                 int64_t headDim, const std::vector<int64_t> &statesPerOperand,
                 bool lseBase2) {
  using python::checkedData;
  MergeStatesConfig config = makeConfig(dtype, heads, headDim, statesPerOperand,
                                        lseBase2, mask.has_value());
  if (rows < 0)
    throw py::value_error("rows must be >= 0, got " + std::to_string(rows));
  if (states.size() != statesPerOperand.size() ||
      lses.size() != statesPerOperand.size())
    throw py::value_error("one states and one lses array per operand");
  const size_t element = getElementTypeSize(config.elementType);
  MergeStatesBuffers buffers;
  buffers.rows = rows;
  for (auto [array, count] : llvm::zip_equal(states, statesPerOperand))
    buffers.states.push_back(
        checkedData(array, rows * count * heads * headDim * element, "states"));
  for (auto [array, count] : llvm::zip_equal(lses, statesPerOperand))
    buffers.stateLses.push_back(static_cast<const float *>(
        checkedData(array, rows * count * heads * sizeof(float), "lses")));
  buffers.output =
      checkedData(output, rows * heads * headDim * element, "output");
  buffers.lse = static_cast<float *>(
      checkedData(lse, rows * heads * sizeof(float), "lse"));
  if (mask)
    buffers.mask =
        static_cast<const int8_t *>(checkedData(*mask, rows, "mask"));
  const CPUMergeStatesKernel &kernel = getKernel(config);
  llvm::Error error = llvm::Error::success();
  {
    py::gil_scoped_release release;
    error = kernel.run(buffers);
  }
  if (error)
    throw std::runtime_error(llvm::toString(std::move(error)));
}

} // namespace

void flashdecode::python::defineMergeStatesBindings(py::module_ &module) {
  module.attr("MAX_MERGED_STATES") = kMaxMergedStates;
  module.def("cpu_merge_states", &mergeStates,
             "fd.merge_states on the CPU: `states` and `lses` one array per "
             "operand (C-contiguous, [rows, N_i, heads, head_dim] of `dtype` "
             "and [rows, N_i, heads] float32), into `output` and `lse` "
             "([rows, heads, head_dim], [rows, heads]; may be an operand's "
             "memory), rows where `mask` (int8 [rows]) is nonzero only.",
             py::arg("states"), py::arg("lses"), py::arg("output"),
             py::arg("lse"), py::arg("mask"), py::arg("dtype"), py::arg("rows"),
             py::arg("heads"), py::arg("head_dim"),
             py::arg("states_per_operand"), py::arg("lse_base2"));
  module.def("cuda_merge_states", &cudaMergeStates,
             "fd.merge_states on GPU `device`, queued on `stream` (a "
             "CUstream handle; 0 the legacy default stream): device "
             "pointers as cpu_merge_states' arrays (mask 0: none).",
             py::arg("states"), py::arg("lses"), py::arg("output"),
             py::arg("lse"), py::arg("mask"), py::arg("dtype"), py::arg("rows"),
             py::arg("heads"), py::arg("head_dim"),
             py::arg("states_per_operand"), py::arg("lse_base2"),
             py::arg("device"), py::arg("stream"));
}

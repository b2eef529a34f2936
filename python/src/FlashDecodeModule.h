//===- FlashDecodeModule.h - Shared by the extension's files ----*- C++ -*-===//
//
// What FlashDecodeModule.cpp (the planner, the JIT, the CPU kernels),
// CudaModule.cpp (the runtime) and MergeStatesModule.cpp (the merges of
// states) share.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHDECODE_PYTHON_FLASHDECODEMODULE_H
#define FLASHDECODE_PYTHON_FLASHDECODEMODULE_H

#include "fd/Compiler/KernelConfig.h"
#include "fd/Runtime/Runtime.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

namespace flashdecode::python {

/// "f16", "bf16" or "f32"; ValueError otherwise.
ElementType parseElementType(const std::string &name);

/// The data pointer of a C-contiguous array of exactly `bytes` bytes;
/// ValueError naming the array otherwise.
void *checkedData(const pybind11::array &array, size_t bytes, const char *name);

/// Defines the runtime's part of the module: DeviceBuffer, CudaPlan,
/// CudaLauncher, cuda_* and pointer_device, and CudaError.
void defineCudaBindings(pybind11::module_ &module);

/// GPU `ordinal`'s primary context, opened once for the process (the one
/// every CUDA path of the module uses).
rt::Device &getCudaDevice(int ordinal);

/// Defines cpu_merge_states, cuda_merge_states and MAX_MERGED_STATES
/// (MergeStatesModule.cpp).
void defineMergeStatesBindings(pybind11::module_ &module);

} // namespace flashdecode::python

#endif // FLASHDECODE_PYTHON_FLASHDECODEMODULE_H

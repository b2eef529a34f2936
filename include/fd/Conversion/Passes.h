//===- Passes.h - Flash-Decoding conversion passes --------------*- C++ -*-===//

#ifndef FD_CONVERSION_PASSES_H
#define FD_CONVERSION_PASSES_H

#include "fd/Conversion/FDToGPU/FDToGPU.h"
#include "fd/Conversion/FDToLoops/FDToLoops.h"
#include "fd/Planning/Chip.h"
#include "mlir/Pass/Pass.h"

namespace mlir::fd {

#define GEN_PASS_DECL
#include "fd/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fd/Conversion/Passes.h.inc"

} // namespace mlir::fd

#endif // FD_CONVERSION_PASSES_H

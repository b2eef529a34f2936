//===- Stage.h - The stages emitStage can stop after ------------*- C++ -*-===//

#ifndef FD_COMPILER_STAGE_H
#define FD_COMPILER_STAGE_H

#include "fd/Dialect/FD/Pipelines/LowerToPTXStage.h"
#include "fd/Namespace.h"

namespace flashdecode {

/// The stages of the GPU lowering, under the JIT's name: those of the
/// dialect's fd-lower-to-ptx pipeline, which the JIT runs.
using Stage = mlir::fd::LowerToPTXStage;

} // namespace flashdecode

#endif // FD_COMPILER_STAGE_H

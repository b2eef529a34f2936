//===- LowerToPTXStage.h - The stages of fd-lower-to-ptx --------*- C++ -*-===//
//
// Apart from Passes.h so that the JIT's public API (flashdecode::emitStage)
// can name a stage without pulling in the pass options and the generated
// pass declarations.
//
//===----------------------------------------------------------------------===//

#ifndef FD_DIALECT_FD_PIPELINES_LOWERTOPTXSTAGE_H
#define FD_DIALECT_FD_PIPELINES_LOWERTOPTXSTAGE_H

namespace mlir::fd {

/// The stages of `fd-lower-to-ptx`, in order: a pipeline runs a range of
/// them, and `flashdecode::emitStage` prints the IR (or PTX) after one.
enum class LowerToPTXStage {
  /// The fd.attention input (no pass).
  Input,
  /// fd-split-kv: fd.partial_attention + fd.merge.
  Split,
  /// convert-fd-to-gpu: gpu.module with the kernels, gpu.launch_func.
  GPU,
  /// The kernels in the LLVM dialect with NVVM ops.
  LLVM,
  /// gpu-module-to-binary: a gpu.binary holding the PTX.
  PTX,
};

} // namespace mlir::fd

#endif // FD_DIALECT_FD_PIPELINES_LOWERTOPTXSTAGE_H

//===- Stage.h - The stages of the GPU lowering ------------------*- C++
//-*-===//

#ifndef FD_COMPILER_STAGE_H
#define FD_COMPILER_STAGE_H

namespace fd {

/// The stages of `fd-lower-to-ptx`, in order: a pipeline runs a range of
/// them, and `emitStage` prints the IR (or PTX) after one.
enum class Stage {
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

} // namespace fd

#endif // FD_COMPILER_STAGE_H

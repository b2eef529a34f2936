//===- LowerToPTXPipeline.cpp - fd ops to PTX -----------------------------===//

#include "fd/Conversion/Passes.h"
#include "fd/Dialect/FD/Pipelines/Passes.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

namespace mlir::fd {

void buildLowerToPTXPipeline(OpPassManager &pm, const FDSplitKVOptions &split,
                             int ptxVersion, LowerToPTXStage firstStage,
                             LowerToPTXStage lastStage) {
  auto runs = [&](LowerToPTXStage stage) {
    return firstStage <= stage && stage <= lastStage;
  };
  if (runs(LowerToPTXStage::Split)) {
    FDCheckNVVMTargetOptions check;
    check.chip = split.chip;
    check.ptxVersion = ptxVersion;
    pm.addPass(createFDCheckNVVMTarget(check));
    pm.addPass(createFDSplitKV(split));
  }
  if (runs(LowerToPTXStage::GPU)) {
    ConvertFDToGPUOptions kernels;
    kernels.chip = split.chip;
    kernels.fuseMerge = split.fusedMerge;
    pm.addPass(createConvertFDToGPU(kernels));
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
  if (runs(LowerToPTXStage::LLVM)) {
    OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
    kernels.addPass(createSCFToControlFlowPass());
    kernels.addPass(createConvertGpuOpsToNVVMOps());
    // NVVM ops that LLVM has no intrinsic for (wgmma.mma_async) become
    // inline PTX.
    kernels.addPass(createConvertNVVMToLLVMPass());
    kernels.addPass(createCanonicalizerPass());
    kernels.addPass(createCSEPass());
    kernels.addPass(createReconcileUnrealizedCastsPass());
  }
  if (runs(LowerToPTXStage::PTX)) {
    GpuNVVMAttachTargetOptions attach;
    attach.chip = split.chip;
    attach.features = "+ptx" + std::to_string(ptxVersion);
    attach.optLevel = 3;
    pm.addPass(createGpuNVVMAttachTarget(attach));
    GpuModuleToBinaryPassOptions binary;
    binary.compilationTarget = "isa";
    pm.addPass(createGpuModuleToBinaryPass(binary));
  }
}

} // namespace mlir::fd

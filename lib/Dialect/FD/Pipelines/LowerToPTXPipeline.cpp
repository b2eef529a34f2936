//===- LowerToPTXPipeline.cpp - fd ops to PTX -----------------------------===//

#include "fd/Conversion/Passes.h"
#include "fd/Dialect/FD/Pipelines/Passes.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

namespace mlir::fd {

void buildLowerToPTXPipeline(OpPassManager &pm, const PTXTarget &target,
                             const FDSplitKVOptions &split,
                             LowerToPTXStage firstStage,
                             LowerToPTXStage lastStage) {
  auto runs = [&](LowerToPTXStage stage) {
    return firstStage <= stage && stage <= lastStage;
  };
  if (runs(LowerToPTXStage::Split)) {
    FDCheckNVVMTargetOptions check;
    check.chip = target.chip;
    check.ptxVersion = target.ptxVersion;
    pm.addPass(createFDCheckNVVMTarget(check));
    pm.addPass(createFDSplitKV(split));
  }
  if (runs(LowerToPTXStage::GPU)) {
    ConvertFDToGPUOptions kernels;
    kernels.chip = target.chip;
    kernels.fuseMerge = target.fuseMerge;
    pm.addPass(createConvertFDToGPU(kernels));
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
  if (runs(LowerToPTXStage::LLVM)) {
    OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
    kernels.addPass(createSCFToControlFlowPass());
    kernels.addPass(createConvertGpuOpsToNVVMOps());
    kernels.addPass(createCanonicalizerPass());
    kernels.addPass(createCSEPass());
    kernels.addPass(createReconcileUnrealizedCastsPass());
  }
  if (runs(LowerToPTXStage::PTX)) {
    GpuNVVMAttachTargetOptions attach;
    attach.chip = target.chip;
    attach.features = "+ptx" + std::to_string(target.ptxVersion);
    attach.optLevel = 3;
    pm.addPass(createGpuNVVMAttachTarget(attach));
    GpuModuleToBinaryPassOptions binary;
    binary.compilationTarget = "isa";
    pm.addPass(createGpuModuleToBinaryPass(binary));
  }
}

} // namespace mlir::fd

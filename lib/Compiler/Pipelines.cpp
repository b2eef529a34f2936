//===- Pipelines.cpp - Named flashdecode pipelines ------------------------===//

#include "fd/Compiler/Pipelines.h"
#include "fd/Conversion/Passes.h"
#include "fd/Dialect/FD/IR/FD.h"
#include "fd/Dialect/FD/Transforms/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace fd {

void buildLowerToCPUPipeline(OpPassManager &pm) {
  pm.addPass(mlir::fd::createConvertFDToLoops());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // bf16 <-> f32 conversions become integer code: no libcalls for the JIT.
  arith::ArithExpandOpsPassOptions expandOptions;
  expandOptions.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expandOptions));
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

mlir::fd::FDSplitKVOptions getSplitKVOptions(const KernelConfig &config) {
  mlir::fd::FDSplitKVOptions split;
  split.numSplits = config.numSplits;
  split.chunkLength = config.chunkLength;
  split.batchHint = config.batch;
  split.maxLengthHint = config.maxLength;
  SplitPlannerOptions planner = config.getPlannerOptions();
  split.smCount = planner.smCount;
  split.blocksPerSM = planner.blocksPerSM;
  split.minChunkLength = planner.minChunkLength;
  split.maxSplits = planner.maxSplits;
  return split;
}

void buildLowerToPTXPipeline(OpPassManager &pm, const PTXTarget &target,
                             const mlir::fd::FDSplitKVOptions &split,
                             Stage firstStage, Stage lastStage) {
  auto runs = [&](Stage stage) {
    return firstStage <= stage && stage <= lastStage;
  };
  if (runs(Stage::Split)) {
    mlir::fd::FDCheckNVVMTargetOptions check;
    check.chip = target.chip;
    check.ptxVersion = target.ptxVersion;
    pm.addPass(mlir::fd::createFDCheckNVVMTarget(check));
    pm.addPass(mlir::fd::createFDSplitKV(split));
  }
  if (runs(Stage::GPU)) {
    pm.addPass(mlir::fd::createConvertFDToGPU());
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
  if (runs(Stage::LLVM)) {
    OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
    kernels.addPass(createSCFToControlFlowPass());
    kernels.addPass(createConvertGpuOpsToNVVMOps());
    kernels.addPass(createCanonicalizerPass());
    kernels.addPass(createCSEPass());
    kernels.addPass(createReconcileUnrealizedCastsPass());
  }
  if (runs(Stage::PTX)) {
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

void registerFDDialects(DialectRegistry &registry) {
  registry
      .insert<mlir::fd::FDDialect, affine::AffineDialect, arith::ArithDialect,
              cf::ControlFlowDialect, func::FuncDialect, LLVM::LLVMDialect,
              math::MathDialect, memref::MemRefDialect, scf::SCFDialect>();
  // Every dialect's ConvertToLLVM interface and the translation extensions:
  // convert-gpu-to-nvvm converts arith/cf/memref inside kernels through them.
  registerAllExtensions(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  // gpu-module-to-binary serializes through the NVVM target and the GPU and
  // NVVM translations; without them it fails with "missing
  // LLVMTranslationDialectInterface".
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerConvertNVVMToLLVMInterface(registry);
}

void registerFDPassesAndPipelines() {
  mlir::fd::registerFDPasses();
  mlir::fd::registerFDConversionPasses();
  PassPipelineRegistration<>(
      "fd-lower-to-cpu",
      "Lower fd ops to loops and then to the LLVM dialect for the CPU",
      buildLowerToCPUPipeline);
  PassPipelineRegistration<LowerToPTXOptions>(
      "fd-lower-to-ptx",
      "Split fd.attention, lower it to GPU kernels and emit PTX "
      "(gpu.binary, format=isa)",
      [](OpPassManager &pm, const LowerToPTXOptions &options) {
        mlir::fd::FDSplitKVOptions split;
        split.numSplits = options.numSplits;
        split.smCount = options.smCount;
        split.blocksPerSM = options.blocksPerSM;
        split.minChunkLength = options.minChunkLength;
        split.maxSplits = options.maxSplits;
        split.chunkLength = options.chunkLength;
        split.batchHint = options.batch;
        split.maxLengthHint = options.maxLength;
        buildLowerToPTXPipeline(pm, {options.chip, options.ptxVersion}, split);
      });
}

} // namespace fd

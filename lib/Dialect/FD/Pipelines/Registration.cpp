//===- Registration.cpp - The fd dialects, passes and pipelines -----------===//

#include "fd/Conversion/Passes.h"
#include "fd/Dialect/FD/IR/FD.h"
#include "fd/Dialect/FD/Pipelines/Passes.h"

#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"

namespace mlir::fd {

void registerFDDialects(DialectRegistry &registry) {
  registry.insert<FDDialect, affine::AffineDialect, arith::ArithDialect,
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
  registerFDPasses();
  registerFDConversionPasses();
  PassPipelineRegistration<>(
      "fd-lower-to-cpu",
      "Lower fd ops to loops and then to the LLVM dialect for the CPU",
      buildLowerToCPUPipeline);
  PassPipelineRegistration<LowerToPTXOptions>(
      "fd-lower-to-ptx",
      "Split fd.attention, lower it to GPU kernels and emit PTX "
      "(gpu.binary, format=isa)",
      [](OpPassManager &pm, const LowerToPTXOptions &options) {
        buildLowerToPTXPipeline(pm, readSplitKVOptions(options),
                                options.ptxVersion);
      });
}

} // namespace mlir::fd

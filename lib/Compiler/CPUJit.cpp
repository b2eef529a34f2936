//===- CPUJit.cpp - JIT-compiling fd IR for the host CPU ------------------===//

#include "CPUJit.h"
#include "fd/Dialect/FD/Pipelines/Passes.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/TargetSelect.h"

#include <mutex>

using namespace mlir;

namespace flashdecode {

static void initializeNativeTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

llvm::Expected<std::unique_ptr<ExecutionEngine>>
compileForCPU(ModuleOp module, const DiagnosticCollector &diagnostics) {
  initializeNativeTarget();
  PassManager lowering(module.getContext());
  mlir::fd::buildLowerToCPUPipeline(lowering);
  if (failed(lowering.run(module)))
    return diagnostics.failure("fd-lower-to-cpu");

  ExecutionEngineOptions engineOptions;
  auto optimize = makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0,
                                            /*targetMachine=*/nullptr);
  engineOptions.transformer = optimize;
  engineOptions.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  auto engine = ExecutionEngine::create(module, engineOptions);
  if (!engine)
    return llvm::joinErrors(diagnostics.failure("JIT compilation"),
                            engine.takeError());
  (*engine)->initialize();
  return std::move(*engine);
}

llvm::SmallVector<int64_t> makeDescriptor(const void *data,
                                          llvm::ArrayRef<int64_t> shape) {
  auto address = static_cast<int64_t>(reinterpret_cast<uintptr_t>(data));
  llvm::SmallVector<int64_t> words = {address, address, 0};
  llvm::append_range(words, shape);
  llvm::SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t dim = static_cast<int64_t>(shape.size()) - 2; dim >= 0; --dim)
    strides[dim] = strides[dim + 1] * shape[dim + 1];
  llvm::append_range(words, strides);
  return words;
}

llvm::Error
invokeWithDescriptors(ExecutionEngine &engine, const std::string &function,
                      llvm::ArrayRef<llvm::SmallVector<int64_t>> descriptors) {
  // The packed interface takes the address of each argument, and each
  // argument of the C interface is a pointer to a descriptor.
  llvm::SmallVector<void *> descriptorPointers;
  for (const auto &descriptor : descriptors)
    descriptorPointers.push_back(const_cast<int64_t *>(descriptor.data()));
  llvm::SmallVector<void *> packedArguments;
  for (void *&pointer : descriptorPointers)
    packedArguments.push_back(&pointer);
  return engine.invokePacked("_mlir_ciface_" + function, packedArguments);
}

} // namespace flashdecode

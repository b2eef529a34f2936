//===- CPUMergeStatesKernel.cpp - fd.merge_states on the CPU --------------===//

#include "fd/Compiler/CPUMergeStatesKernel.h"
#include "CPUJit.h"
#include "fd/Dialect/FD/IR/FD.h"
#include "fd/Dialect/FD/Pipelines/Passes.h"

#include "mlir/IR/MLIRContext.h"

using namespace mlir;

namespace flashdecode {

CPUMergeStatesKernel::~CPUMergeStatesKernel() = default;

llvm::Expected<std::unique_ptr<CPUMergeStatesKernel>>
CPUMergeStatesKernel::compile(const MergeStatesConfig &config) {
  std::string invalid = config.validate();
  if (!invalid.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), invalid);
  DialectRegistry registry;
  mlir::fd::registerFDDialects(registry);
  MLIRContext context(registry);
  DiagnosticCollector diagnostics(context);
  OwningOpRef<ModuleOp> module = buildMergeStatesModule(context, config);
  if (failed(module->verify()))
    return diagnostics.failure("fd.merge_states");
  auto engine = compileForCPU(*module, diagnostics);
  if (!engine)
    return engine.takeError();
  std::unique_ptr<CPUMergeStatesKernel> kernel(new CPUMergeStatesKernel());
  kernel->config = config;
  kernel->engine = std::move(*engine);
  return kernel;
}

llvm::Error CPUMergeStatesKernel::run(const MergeStatesBuffers &buffers) const {
  auto invalid = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  const size_t operands = config.statesPerOperand.size();
  if (buffers.states.size() != operands || buffers.stateLses.size() != operands)
    return invalid("the kernel merges " + llvm::Twine(operands) +
                   " states operands: as many states and lses buffers "
                   "required");
  if (buffers.rows < 0)
    return invalid("rows must be >= 0, got " + llvm::Twine(buffers.rows));
  if (!buffers.output || !buffers.lse ||
      llvm::is_contained(buffers.states, nullptr) ||
      llvm::is_contained(buffers.stateLses, nullptr))
    return invalid("every states, lses, output and lse buffer is required");
  if (config.withMask != (buffers.mask != nullptr))
    return invalid(config.withMask
                       ? "the kernel reads a mask: mask (int8 [rows]) required"
                       : "the kernel was compiled without a mask: no mask");
  const int64_t rows = buffers.rows, heads = config.numHeads,
                headDim = config.headDim;
  llvm::SmallVector<llvm::SmallVector<int64_t>> descriptors;
  for (auto [states, count] :
       llvm::zip_equal(buffers.states, config.statesPerOperand))
    descriptors.push_back(
        makeDescriptor(states, {rows, count, heads, headDim}));
  for (auto [lses, count] :
       llvm::zip_equal(buffers.stateLses, config.statesPerOperand))
    descriptors.push_back(makeDescriptor(lses, {rows, count, heads}));
  descriptors.push_back(makeDescriptor(buffers.output, {rows, heads, headDim}));
  descriptors.push_back(makeDescriptor(buffers.lse, {rows, heads}));
  if (config.withMask)
    descriptors.push_back(makeDescriptor(buffers.mask, {rows}));
  return invokeWithDescriptors(*engine, kMergeStatesFunctionName, descriptors);
}

} // namespace flashdecode

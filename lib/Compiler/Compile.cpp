//===- Compile.cpp - The in-process JIT: config -> PTX + manifest ---------===//

#include "fd/Compiler/Compile.h"
#include "DiagnosticCollector.h"
#include "SourceHash.h"
#include "fd/Compiler/AttentionModule.h"
#include "fd/Compiler/Pipelines.h"
#include "fd/Conversion/FDToGPU/FDToGPU.h"
#include "fd/Dialect/FD/IR/FD.h"
#include "fd/Planning/SplitPlanner.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"

using namespace mlir;

namespace fd {

const char *getCompilerVersion() { return "flashdecode 0.2.7 (MLIR 22)"; }

const char *getCompilerSourceHash() { return FD_COMPILER_SOURCE_HASH; }

namespace {

llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// One compilation: a context with the dialects, the config's module and the
/// diagnostics collected for error messages.
class Compilation {
public:
  explicit Compilation(const KernelConfig &config)
      : context(makeRegistry(), MLIRContext::Threading::DISABLED),
        diagnostics(context), module(buildAttentionModule(context, config)),
        split(getSplitKVOptions(config)) {
    target.chip = config.arch;
    target.ptxVersion = config.ptxVersion;
    // fd.attention always goes through fd-split-kv on the GPU: num-splits=1
    // is the unsplit kernel.
    if (!config.splitKV)
      split.numSplits = 1;
  }

  /// Runs the stages first..last on the module.
  llvm::Error run(Stage first, Stage last) {
    PassManager pm(&context);
    buildLowerToPTXPipeline(pm, target, split, first, last);
    if (failed(pm.run(*module)))
      return diagnostics.failure("fd-lower-to-ptx");
    return llvm::Error::success();
  }

  ModuleOp getModule() { return *module; }

private:
  static DialectRegistry makeRegistry() {
    DialectRegistry registry;
    registerFDDialects(registry);
    return registry;
  }

  MLIRContext context;
  DiagnosticCollector diagnostics;
  OwningOpRef<ModuleOp> module;
  PTXTarget target;
  mlir::fd::FDSplitKVOptions split;
};

std::string printIR(ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream(text) << module;
  return text;
}

llvm::Expected<std::vector<std::pair<std::string, std::string>>>
extractPTX(ModuleOp module) {
  std::vector<std::pair<std::string, std::string>> kernels;
  // The partial kernel first: the order the runtime launches them in.
  for (StringRef name : {"fd_partial_attention", "fd_merge"}) {
    auto binary = module.lookupSymbol<gpu::BinaryOp>(name);
    if (!binary || binary.getObjects().size() != 1)
      return makeError("no PTX was produced for kernel " + name);
    auto object = cast<gpu::ObjectAttr>(binary.getObjects()[0]);
    kernels.emplace_back(name.str(), object.getObject().str());
  }
  return kernels;
}

/// Each kernel's parameters, {"name", "type"} in order, read off its
/// gpu.func: the names convert-fd-to-gpu recorded (kKernelParamsAttrName)
/// and the types of the arguments ("ptr" or "i32").
llvm::Expected<llvm::StringMap<llvm::json::Array>>
readKernelParameters(ModuleOp module) {
  llvm::StringMap<llvm::json::Array> kernels;
  WalkResult walk = module.walk([&](gpu::GPUFuncOp kernel) {
    auto names =
        kernel->getAttrOfType<ArrayAttr>(mlir::fd::kKernelParamsAttrName);
    if (!names || names.size() != kernel.getNumArguments())
      return WalkResult::interrupt();
    llvm::json::Array &params = kernels[kernel.getName()];
    for (auto [name, type] : llvm::zip(names, kernel.getArgumentTypes()))
      params.push_back(llvm::json::Object{
          {"name", cast<StringAttr>(name).getValue()},
          {"type", isa<LLVM::LLVMPointerType>(type) ? "ptr" : "i32"}});
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return makeError("a kernel does not name each of its parameters");
  return kernels;
}

/// The manifest: everything the runtime needs to allocate and launch.
std::string buildManifest(const KernelConfig &config, int64_t numSplits,
                          llvm::StringMap<llvm::json::Array> params) {
  int64_t rows = config.queryLength * config.numQueryHeads;
  mlir::fd::PartialKernelLayout layout = mlir::fd::PartialKernelLayout::get(
      config.headDim, getElementTypeSize(config.elementType),
      config.numQueryHeads / config.numKVHeads, config.queryLength,
      config.withAlibi);
  int64_t workspacePerSequence = getWorkspaceBytes(
      1, config.queryLength, config.numQueryHeads, numSplits, config.headDim);

  llvm::json::Object configJson;
  config.forEachField(
      [&](const char *name, const KernelConfig::FieldValue &value) {
        if (auto *integer = std::get_if<int64_t>(&value))
          configJson[name] = *integer;
        else if (auto *flag = std::get_if<bool>(&value))
          configJson[name] = *flag;
        else if (auto *string = std::get_if<std::string>(&value))
          configJson[name] = *string;
        else if (auto &number = std::get<std::optional<float>>(value))
          configJson[name] = static_cast<double>(*number);
      });

  llvm::json::Object manifest{
      {"compiler_version", getCompilerVersion()},
      {"compiler_source_hash", getCompilerSourceHash()},
      {"config", std::move(configJson)},
      {"num_splits", numSplits},
      {"workspace",
       llvm::json::Object{
           {"bytes_per_sequence", workspacePerSequence},
           {"formula", "batch * " + std::to_string(workspacePerSequence)},
           {"partial_output_offset", 0},
           {"partial_lse_offset_per_sequence",
            rows * numSplits * config.headDim * 4}}},
      {"kernels",
       llvm::json::Array{
           llvm::json::Object{
               {"name", "fd_partial_attention"},
               {"ptx", "fd_partial_attention.ptx"},
               {"params", std::move(params["fd_partial_attention"])},
               {"grid",
                llvm::json::Array{"num_splits", config.numKVHeads, "batch"}},
               {"block",
                llvm::json::Array{mlir::fd::PartialKernelLayout::kThreads, 1,
                                  1}},
               {"static_shared_memory_bytes", layout.sharedMemoryBytes()},
               {"dynamic_shared_memory_bytes", 0},
               // Which units compute it (docs/KernelABI.md), for the
               // people and benchmarks reading the manifest.
               {"math_units",
                layout.tensorCores ? "tensor_cores" : "cuda_cores"}},
           llvm::json::Object{
               {"name", "fd_merge"},
               {"ptx", "fd_merge.ptx"},
               {"params", std::move(params["fd_merge"])},
               {"grid", llvm::json::Array{config.numQueryHeads,
                                          config.queryLength, "batch"}},
               {"block", llvm::json::Array{config.headDim, 1, 1}},
               {"static_shared_memory_bytes", 0},
               {"dynamic_shared_memory_bytes", 0}}}}};
  std::string text;
  llvm::raw_string_ostream stream(text);
  stream << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest)));
  return text;
}

} // namespace

llvm::Expected<CompiledKernels> compileUncached(const KernelConfig &config) {
  std::string invalid = config.validate();
  if (!invalid.empty())
    return makeError(invalid);
  Compilation compilation(config);
  if (llvm::Error error = compilation.run(Stage::Split, Stage::Split))
    return std::move(error);
  CompiledKernels result;
  compilation.getModule().walk([&](mlir::fd::PartialAttentionOp op) {
    result.numSplits = op.getNumSplits();
  });
  // The ABI as the lowering built it, then on to PTX.
  if (llvm::Error error = compilation.run(Stage::GPU, Stage::GPU))
    return std::move(error);
  auto params = readKernelParameters(compilation.getModule());
  if (!params)
    return params.takeError();
  if (llvm::Error error = compilation.run(Stage::LLVM, Stage::PTX))
    return std::move(error);
  auto ptx = extractPTX(compilation.getModule());
  if (!ptx)
    return ptx.takeError();
  result.ptx = std::move(*ptx);
  result.manifest = buildManifest(config, result.numSplits, std::move(*params));
  return result;
}

llvm::Expected<std::string> emitStage(const KernelConfig &config, Stage stage) {
  std::string invalid = config.validate();
  if (!invalid.empty())
    return makeError(invalid);
  Compilation compilation(config);
  if (stage != Stage::Input)
    if (llvm::Error error = compilation.run(Stage::Split, stage))
      return std::move(error);
  if (stage != Stage::PTX)
    return printIR(compilation.getModule());
  auto ptx = extractPTX(compilation.getModule());
  if (!ptx)
    return ptx.takeError();
  std::string text;
  for (auto &[name, kernelPTX] : *ptx)
    text += "// kernel: " + name + "\n" + kernelPTX;
  return text;
}

} // namespace fd

//===- Compile.cpp - The in-process JIT: config -> PTX + manifest ---------===//

#include "fd/Compiler/Compile.h"
#include "DiagnosticCollector.h"
#include "SourceHash.h"
#include "fd/Compiler/AttentionModule.h"
#include "fd/Compiler/MergeStates.h"
#include "fd/Compiler/SplitKVOptions.h"
#include "fd/Conversion/FDToGPU/FDToGPU.h"
#include "fd/Dialect/FD/IR/FD.h"
#include "fd/Dialect/FD/Pipelines/Passes.h"
#include "fd/Planning/SplitPlanner.h"
#include "fd/Planning/WorkspaceLayout.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <array>

using namespace mlir;

namespace flashdecode {

int64_t getAutomaticMaxSplits(const KernelRequest &request) {
  return getAutomaticSplitCap(request.config.getKernelSchedule(),
                              request.hints.planner.maxSplits,
                              request.config.fusedMerge);
}

const char *getCompilerVersion() {
  return "flashdecode " FD_COMPILER_VERSION " (MLIR 22)";
}

const char *getCompilerSourceHash() { return FD_COMPILER_SOURCE_HASH; }

namespace {

llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// One compilation: a context with the dialects, the config's module and the
/// diagnostics collected for error messages.
class Compilation {
public:
  /// The module `build` makes, lowered with `split`'s options (its chip the
  /// target) to PTX of ISA `ptxVersion`.
  Compilation(function_ref<OwningOpRef<ModuleOp>(MLIRContext &)> build,
              const mlir::fd::FDSplitKVOptions &split, int ptxVersion)
      : context(makeRegistry(), MLIRContext::Threading::DISABLED),
        diagnostics(context), module(build(context)), split(split),
        ptxVersion(ptxVersion) {}

  explicit Compilation(const KernelRequest &request)
      : Compilation(
            [&](MLIRContext &context) {
              return buildAttentionModule(context, request.config);
            },
            getSplitKVOptions(request), request.config.ptxVersion) {
    // fd.attention always goes through fd-split-kv on the GPU: num-splits=1
    // is the unsplit kernel.
    if (!request.config.splitKV)
      split.numSplits = 1;
  }

  /// Runs the stages first..last on the module.
  llvm::Error run(Stage first, Stage last) {
    PassManager pm(&context);
    mlir::fd::buildLowerToPTXPipeline(pm, split, ptxVersion, first, last);
    if (failed(pm.run(*module)))
      return diagnostics.failure("fd-lower-to-ptx");
    return llvm::Error::success();
  }

  ModuleOp getModule() { return *module; }

  /// The rest, from split IR: the kernels' ABI as convert-fd-to-gpu built
  /// them (readKernelABI), then their PTX.
  llvm::Error
  lowerSplitModule(llvm::json::Array &kernels,
                   std::vector<std::pair<std::string, std::string>> &ptx);

private:
  static DialectRegistry makeRegistry() {
    DialectRegistry registry;
    mlir::fd::registerFDDialects(registry);
    return registry;
  }

  MLIRContext context;
  DiagnosticCollector diagnostics;
  OwningOpRef<ModuleOp> module;
  mlir::fd::FDSplitKVOptions split;
  int ptxVersion;
};

std::string printIR(ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream(text) << module;
  return text;
}

/// The PTX of each kernel, in launch order (the order the runtime launches
/// them in).
llvm::Expected<std::vector<std::pair<std::string, std::string>>>
extractPTX(ModuleOp module) {
  std::vector<std::pair<std::string, std::string>> kernels;
  SmallVector<std::string> names;
  module.walk([&](gpu::LaunchFuncOp launch) {
    names.push_back(launch.getKernelModuleName().str());
  });
  for (const std::string &name : names) {
    auto binary = module.lookupSymbol<gpu::BinaryOp>(name);
    if (!binary || binary.getObjects().size() != 1)
      return makeError("no PTX was produced for kernel " + name);
    auto object = cast<gpu::ObjectAttr>(binary.getObjects()[0]);
    kernels.emplace_back(name, object.getObject().str());
  }
  return kernels;
}

/// Bytes of the workgroup (shared) memory `kernel` declares, each buffer at
/// its alignment.
int64_t getStaticSharedMemoryBytes(gpu::GPUFuncOp kernel) {
  int64_t bytes = 0;
  for (auto [index, buffer] :
       llvm::enumerate(kernel.getWorkgroupAttributions())) {
    auto type = cast<MemRefType>(buffer.getType());
    int64_t alignment = 1;
    if (auto align = kernel.getWorkgroupAttributionAttr(
            index, LLVM::LLVMDialect::getAlignAttrName()))
      alignment = cast<IntegerAttr>(align).getInt();
    bytes = llvm::alignTo(bytes, alignment) +
            type.getNumElements() * type.getElementTypeBitWidth() / 8;
  }
  return bytes;
}

/// A launch's grid or block as the manifest writes it: per dimension, the
/// symbol the lowering named it by (kLaunchGridSymbolsAttrName), else the
/// constant it is launched with.
llvm::Expected<llvm::json::Array> readDimensions(gpu::KernelDim3 dimensions,
                                                 ArrayAttr symbols) {
  llvm::json::Array result;
  std::array<Value, 3> values = {dimensions.x, dimensions.y, dimensions.z};
  for (auto [index, value] : llvm::enumerate(values)) {
    StringRef symbol =
        symbols ? cast<StringAttr>(symbols[index]).getValue() : "";
    std::optional<int64_t> constant = getConstantIntValue(value);
    if (!symbol.empty())
      result.push_back(symbol.str());
    else if (constant)
      result.push_back(*constant);
    else
      return makeError("a launch dimension is neither a constant nor named");
  }
  return result;
}

/// The kernels' ABI as convert-fd-to-gpu built it, in launch order (the
/// order the runtime launches them in): each kernel's name, parameters
/// ({"name", "type"}: the names recorded on the gpu.func,
/// kKernelParamsAttrName, and "ptr" or "i32"), grid and block (the launch's
/// operands) and shared memory (the gpu.func's workgroup attributions).
llvm::Expected<llvm::json::Array> readKernelABI(ModuleOp module) {
  llvm::json::Array kernels;
  llvm::Error error = llvm::Error::success();
  module.walk([&](gpu::LaunchFuncOp launch) {
    std::string name = launch.getKernelModuleName().str();
    auto kernel = SymbolTable::lookupNearestSymbolFrom<gpu::GPUFuncOp>(
        launch, launch.getKernel());
    auto names =
        kernel
            ? kernel->getAttrOfType<ArrayAttr>(mlir::fd::kKernelParamsAttrName)
            : ArrayAttr();
    if (!names || names.size() != kernel.getNumArguments()) {
      error = makeError("kernel " + name + " does not name its parameters");
      return WalkResult::interrupt();
    }
    llvm::json::Array params;
    for (auto [parameter, type] : llvm::zip(names, kernel.getArgumentTypes()))
      params.push_back(llvm::json::Object{
          {"name", cast<StringAttr>(parameter).getValue()},
          {"type", isa<LLVM::LLVMPointerType>(type) ? "ptr" : "i32"}});
    auto grid = readDimensions(
        launch.getGridSizeOperandValues(),
        launch->getAttrOfType<ArrayAttr>(mlir::fd::kLaunchGridSymbolsAttrName));
    auto block = readDimensions(launch.getBlockSizeOperandValues(), {});
    if (!grid || !block) {
      error = llvm::joinErrors(grid.takeError(), block.takeError());
      return WalkResult::interrupt();
    }
    int64_t dynamicShared = 0;
    if (Value size = launch.getDynamicSharedMemorySize())
      dynamicShared = getConstantIntValue(size).value_or(-1);
    llvm::json::Object entry{
        {"name", name},
        {"ptx", name + ".ptx"},
        {"params", std::move(params)},
        {"grid", std::move(*grid)},
        {"block", std::move(*block)},
        {"static_shared_memory_bytes", getStaticSharedMemoryBytes(kernel)},
        {"dynamic_shared_memory_bytes", dynamicShared}};
    // Which units compute it (docs/KernelABI.md), for the people and
    // benchmarks reading the manifest.
    if (auto units = kernel->getAttrOfType<StringAttr>(
            mlir::fd::kKernelMathUnitsAttrName))
      entry["math_units"] = units.getValue();
    // fdrt launches it to overlap the kernel before it (docs/KernelABI.md).
    if (kernel->hasAttr(mlir::fd::kProgrammaticLaunchAttrName))
      entry["programmatic_launch"] = true;
    kernels.push_back(std::move(entry));
    return WalkResult::advance();
  });
  if (error)
    return std::move(error);
  if (kernels.empty())
    return makeError("the lowering launched no kernel");
  return kernels;
}

llvm::Error Compilation::lowerSplitModule(
    llvm::json::Array &kernels,
    std::vector<std::pair<std::string, std::string>> &ptx) {
  if (llvm::Error error = run(Stage::GPU, Stage::GPU))
    return error;
  auto abi = readKernelABI(getModule());
  if (!abi)
    return abi.takeError();
  kernels = std::move(*abi);
  if (llvm::Error error = run(Stage::LLVM, Stage::PTX))
    return error;
  auto texts = extractPTX(getModule());
  if (!texts)
    return texts.takeError();
  ptx = std::move(*texts);
  return llvm::Error::success();
}

/// The manifest's "config": the request's fields, the hints' (how its split
/// count was planned) included.
llvm::json::Object getConfigFields(const KernelRequest &request) {
  llvm::json::Object fields;
  request.config.forEachField(
      [&](const char *name, const KernelConfig::FieldValue &value) {
        if (auto *integer = std::get_if<int64_t>(&value))
          fields[name] = *integer;
        else if (auto *flag = std::get_if<bool>(&value))
          fields[name] = *flag;
        else if (auto *string = std::get_if<std::string>(&value))
          fields[name] = *string;
        else if (auto &number = std::get<std::optional<float>>(value))
          fields[name] = static_cast<double>(*number);
      });
  request.hints.forEachField(
      [&](const char *name, int64_t value) { fields[name] = value; });
  return fields;
}

std::string printManifest(llvm::json::Value manifest) {
  std::string text;
  llvm::raw_string_ostream stream(text);
  stream << llvm::formatv("{0:2}", manifest);
  return text;
}

/// The manifest: everything the runtime needs to allocate and launch.
std::string buildManifest(const KernelRequest &request, int64_t numSplits,
                          std::optional<ScheduleChoice> schedule,
                          llvm::json::Array kernels) {
  const KernelConfig &config = request.config;
  WorkspaceLayout workspace = WorkspaceLayout::get(
      config.queryLength, config.numQueryHeads, config.numKVHeads, numSplits,
      config.getValueHeadDim(), config.fusedMerge);
  int64_t workspacePerSequence = workspace.getBytesPerSequence();

  llvm::json::Object manifest{
      {"compiler_version", getCompilerVersion()},
      {"compiler_source_hash", getCompilerSourceHash()},
      {"config", getConfigFields(request)},
      {"num_splits", numSplits},
      {"workspace",
       llvm::json::Object{
           {"bytes_per_sequence", workspacePerSequence},
           {"formula", "batch * " + std::to_string(workspacePerSequence)},
           {"partial_output_offset", 0},
           {"partial_lse_offset_per_sequence",
            workspace.getPartialLseOffset(1)},
           {"merge_counter_bytes_per_sequence",
            workspace.mergeCounterBytesPerSequence}}},
      {"kernels", std::move(kernels)}};
  // The partial kernel's schedule as the lowering built it: #fd.schedule's
  // fields (docs/KernelABI.md, "Schedules").
  if (schedule) {
    llvm::json::Object fields{
        {"form", std::string(getKernelFormName(schedule->form))}};
    forEachScheduleField(*schedule, [&](const char *name, int64_t value) {
      fields[name] = value;
    });
    manifest["schedule"] = std::move(fields);
  }
  return printManifest(std::move(manifest));
}

} // namespace

std::string recordRequest(llvm::StringRef manifest,
                          const KernelRequest &request) {
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(manifest);
  if (!parsed) // Never: the manifests recorded are buildManifest's.
    llvm::report_fatal_error(llvm::toString(parsed.takeError()).c_str());
  (*parsed->getAsObject())["config"] = getConfigFields(request);
  return printManifest(std::move(*parsed));
}

llvm::Expected<CompiledKernels> compileUncached(const KernelRequest &request) {
  std::string invalid = request.validate();
  if (!invalid.empty())
    return makeError(invalid);
  Compilation compilation(request);
  if (llvm::Error error = compilation.run(Stage::Split, Stage::Split))
    return std::move(error);
  CompiledKernels result;
  std::optional<ScheduleChoice> schedule;
  compilation.getModule().walk([&](mlir::fd::PartialAttentionOp op) {
    result.numSplits = op.getNumSplits();
    schedule = op.getScheduleAttr().getChoice();
  });
  // The JIT caches kernels under resolve(request), planned without the
  // module: fd-split-kv, planning on it, must agree.
  if (int64_t resolved = resolveNumSplits(request);
      result.numSplits != resolved)
    return makeError("fd-split-kv planned " + llvm::Twine(result.numSplits) +
                     " splits where resolve() planned " +
                     llvm::Twine(resolved) +
                     " (a compiler bug: please report "
                     "it with this configuration: " +
                     request.toString() + ")");
  llvm::json::Array kernels;
  if (llvm::Error error = compilation.lowerSplitModule(kernels, result.ptx))
    return std::move(error);
  result.manifest =
      buildManifest(request, result.numSplits, schedule, std::move(kernels));
  result.request = request.toString();
  return result;
}

llvm::Expected<CompiledKernels>
compileMergeStates(const MergeStatesConfig &config, const std::string &arch,
                   int ptxVersion) {
  std::string invalid = config.validate();
  if (invalid.empty())
    invalid = getReasonArchUnsupported(arch);
  if (!invalid.empty())
    return makeError(invalid);
  mlir::fd::FDSplitKVOptions split;
  split.chip = arch;
  Compilation compilation(
      [&](MLIRContext &context) {
        return buildMergeStatesModule(context, config);
      },
      split, ptxVersion);
  CompiledKernels result;
  llvm::json::Array kernels;
  if (llvm::Error error = compilation.run(Stage::Split, Stage::Split))
    return std::move(error);
  if (llvm::Error error = compilation.lowerSplitModule(kernels, result.ptx))
    return std::move(error);
  result.numSplits = 1;
  result.request = config.toString();
  result.manifest = printManifest(
      llvm::json::Object{{"compiler_version", getCompilerVersion()},
                         {"compiler_source_hash", getCompilerSourceHash()},
                         {"merge_states", result.request},
                         {"arch", arch},
                         {"kernels", std::move(kernels)}});
  return result;
}

MergeStatesEntry getMergeStatesEntry(const CompiledKernels &kernels) {
  llvm::Expected<llvm::json::Value> manifest =
      llvm::json::parse(kernels.manifest);
  if (!manifest) // Never: compileMergeStates wrote it.
    llvm::report_fatal_error(llvm::toString(manifest.takeError()).c_str());
  const llvm::json::Object &kernel =
      *(*manifest->getAsObject()->getArray("kernels"))[0].getAsObject();
  return {kernel.getString("name")->str(),
          *(*kernel.getArray("block"))[0].getAsInteger()};
}

llvm::Expected<std::string> emitStage(const KernelRequest &request,
                                      Stage stage) {
  std::string invalid = request.validate();
  if (!invalid.empty())
    return makeError(invalid);
  Compilation compilation(request);
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

} // namespace flashdecode

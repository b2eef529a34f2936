//===- FlashDecodeModule.cpp - The flashdecode Python extension -----------===//
//
// The native half of the `flashdecode` package: the split planner, the JIT
// and the CPU kernels here; the runtime (CUDA plans, launchers, device
// memory) in CudaModule.cpp. Argument checking that names Python arguments
// lives in the flashdecode package; this layer re-checks buffer sizes so a
// wrong call can never read or write out of bounds.
//
//===----------------------------------------------------------------------===//

#include "FlashDecodeModule.h"

#include "fd/Compiler/CPUAttentionKernel.h"
#include "fd/Compiler/Compile.h"
#include "fd/Compiler/SplitKVOptions.h"
#include "fd/Dialect/FD/Utils/AttentionUtils.h"
#include "fd/Planning/Chip.h"
#include "fd/Planning/Limits.h"
#include "fd/Planning/Spellings.h"
#include "fd/Planning/SplitPlanner.h"

#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

namespace py = pybind11;
using namespace flashdecode;

namespace {

/// The canonical spelling of `name`, any spelling of a value of `kind`
/// (fd/Planning/Spellings.h); otherwise a ValueError naming `argument` and
/// every spelling.
std::string_view getCanonicalName(NameKind kind, const std::string &name,
                                  const char *argument) {
  if (const Spellings *value = findSpelling(kind, name))
    return value->canonical;
  throw py::value_error(std::string(argument) + " must be " +
                        describeSpellings(kind, /*pythonFirst=*/true) +
                        ", got '" + name + "'");
}

/// "" (the query's type), or an fp8 format.
KVCacheType parseKVCacheType(const std::string &name) {
  if (name.empty())
    return KVCacheType::SameAsQuery;
  return getCanonicalName(NameKind::Float8Format, name, "kv_dtype") == "e4m3"
             ? KVCacheType::E4M3
             : KVCacheType::E5M2;
}

KVScaleGranularity parseKVScaleGranularity(const std::string &name) {
  return getCanonicalName(NameKind::ScaleGranularity, name, "kv_scale") ==
                 "tensor"
             ? KVScaleGranularity::Tensor
             : KVScaleGranularity::TokenHead;
}

KernelRequest makeRequest(
    int64_t headDim, int64_t numQueryHeads, int64_t numKVHeads,
    int64_t queryLength, const std::string &dtype, const std::string &kvLayout,
    int64_t pageSize, int64_t numSplits, bool splitKV,
    std::optional<float> scale, bool withLse, int64_t batch, int64_t maxLength,
    int64_t smCount, const std::string &arch, int64_t blocksPerSM,
    int64_t minChunkLength, int64_t maxSplits, int64_t windowLeft,
    std::optional<float> logitsSoftCap, bool withSinks, bool withAlibi,
    bool withQueryLens, const std::string &kvDtype, const std::string &kvScale,
    bool fusedMerge, const std::optional<std::string> &schedule,
    int64_t valueHeadDim, bool sharedKV, int64_t kvShardWorld,
    int64_t kvShardInterleave, int64_t topK, bool sharedPrefix) {
  KernelConfig config;
  config.headDim = headDim;
  config.valueHeadDim = valueHeadDim;
  config.sharedKV = sharedKV;
  config.numQueryHeads = numQueryHeads;
  config.numKVHeads = numKVHeads;
  config.queryLength = queryLength;
  config.elementType = python::parseElementType(dtype);
  config.cacheLayout =
      getCanonicalName(NameKind::CacheLayout, kvLayout, "kv_layout") == "NHD"
          ? CacheLayout::NHD
          : CacheLayout::HND;
  config.pageSize = pageSize;
  config.numSplits = numSplits;
  config.splitKV = splitKV;
  config.scale = scale;
  config.withLse = withLse;
  config.arch = arch;
  config.windowLeft = windowLeft;
  config.logitsSoftCap = logitsSoftCap;
  config.withSinks = withSinks;
  config.withAlibi = withAlibi;
  config.withQueryLens = withQueryLens;
  config.kvShardWorld = kvShardWorld;
  config.kvShardInterleave = kvShardInterleave;
  config.topK = topK;
  config.sharedPrefix = sharedPrefix;
  config.kvCacheType = parseKVCacheType(kvDtype);
  config.kvScaleGranularity = parseKVScaleGranularity(kvScale);
  config.fusedMerge = fusedMerge;
  if (schedule) {
    std::string error;
    config.schedule = parseScheduleChoice(*schedule, error);
    if (!config.schedule)
      throw py::value_error("schedule: " + error);
  }
  PlanningHints hints;
  hints.batch = batch;
  hints.maxLength = maxLength;
  hints.planner.smCount = smCount;
  hints.planner.blocksPerSM = blocksPerSM;
  hints.planner.minChunkLength = minChunkLength;
  hints.planner.maxSplits = maxSplits;
  KernelRequest request(std::move(config), hints);
  std::string invalid = request.validate();
  if (!invalid.empty())
    throw py::value_error(invalid);
  return request;
}

#define FD_CONFIG_ARGS                                                         \
  py::arg("head_dim"), py::arg("num_q_heads"), py::arg("num_kv_heads"),        \
      py::arg("query_len"), py::arg("dtype"), py::arg("kv_layout"),            \
      py::arg("page_size"), py::arg("num_splits"), py::arg("split_kv"),        \
      py::arg("scale"), py::arg("with_lse"), py::arg("batch"),                 \
      py::arg("max_len"), py::arg("sm_count"), py::arg("arch"),                \
      py::arg("blocks_per_sm") = SplitPlannerOptions().blocksPerSM,            \
      py::arg("min_chunk_length") = SplitPlannerOptions().minChunkLength,      \
      py::arg("max_splits") = SplitPlannerOptions().maxSplits, py::kw_only(),  \
      py::arg("window_left") = KernelConfig().windowLeft,                      \
      py::arg("logits_soft_cap") = py::none(),                                 \
      py::arg("with_sinks") = KernelConfig().withSinks,                        \
      py::arg("with_alibi") = KernelConfig().withAlibi,                        \
      py::arg("with_query_lens") = KernelConfig().withQueryLens,               \
      py::arg("kv_dtype") = "", py::arg("kv_scale") = "tensor",                \
      py::arg("fused_merge") = KernelConfig().fusedMerge,                      \
      py::arg("schedule") = py::none(),                                        \
      py::arg("v_head_dim") = KernelConfig().valueHeadDim,                     \
      py::arg("shared_kv") = KernelConfig().sharedKV,                          \
      py::arg("kv_shard_world") = KernelConfig().kvShardWorld,                 \
      py::arg("kv_shard_interleave") = KernelConfig().kvShardInterleave,       \
      py::arg("top_k") = KernelConfig().topK,                                  \
      py::arg("shared_prefix") = KernelConfig().sharedPrefix

/// The data of an optional C-contiguous buffer of `count` T (float or
/// int32_t) that the kernel reads exactly when `reads`: required then (the
/// kernel `does` something with it, `count` being `size` elements), None
/// otherwise (the kernel was compiled without `feature`).
template <typename T>
const T *optionalBuffer(const std::optional<py::array> &array, bool reads,
                        size_t count, const std::string &name,
                        const std::string &does, const std::string &feature,
                        const std::string &size) {
  std::string type = std::is_same_v<T, float> ? "float32" : "int32";
  if (reads != array.has_value())
    throw py::value_error(reads ? "this kernel " + does + ": " + name + " (" +
                                      type + " [" + size + "]) required"
                                : "this kernel was compiled without " +
                                      feature + ": " + name + " must be None");
  if (!array)
    return nullptr;
  if (!array->dtype().is(py::dtype::of<T>()))
    throw py::value_error(name + " must be " + type);
  return static_cast<const T *>(
      python::checkedData(*array, count * sizeof(T), name.c_str()));
}

class PyCPUKernel {
public:
  explicit PyCPUKernel(const KernelRequest &request) {
    auto compiled = CPUAttentionKernel::compile(request);
    if (!compiled)
      throw std::runtime_error(llvm::toString(compiled.takeError()));
    kernel = std::move(*compiled);
  }

  /// Dense caches: `maxLength` positions per sequence. Paged caches:
  /// `blockTable` [batch, maxPages] into pools of `numPages` pages. `sinks`
  /// (float32 [num_q_heads]) exactly when the kernel has attention sinks,
  /// `alibiSlopes` (float32 [num_q_heads]) exactly when it applies ALiBi,
  /// `queryLens` (int32 [batch]) exactly when it reads per-sequence query
  /// lengths, `kScale` and `vScale` (float32, [1] or the caches' shape
  /// without the head dim) exactly when it reads fp8 caches (bytes),
  /// `kvShardRank` (int32 [1]) exactly when it reads a sharded cache,
  /// `suffixLens` (int32 [batch]) exactly when it continues a shared
  /// prefix: the caches, `lengths` ([1]) and `blockTable` ([1, maxPages])
  /// then hold the prefix alone.
  void run(const py::array &query, const py::array &keys,
           const std::optional<py::array> &values, const py::array &lengths,
           py::array &output, std::optional<py::array> lse, int64_t batch,
           int64_t maxLength, std::optional<py::array> blockTable,
           int64_t numPages, int64_t maxPages, std::optional<py::array> sinks,
           std::optional<py::array> alibiSlopes,
           std::optional<py::array> queryLens, std::optional<py::array> kScale,
           std::optional<py::array> vScale,
           std::optional<py::array> kvShardRank,
           std::optional<py::array> suffixLens) {
    using python::checkedData;
    const KernelConfig &config = kernel->getConfig();
    size_t element = getElementTypeSize(config.elementType);
    size_t rows = batch * config.queryLength * config.numQueryHeads;
    // A shared prefix is one sequence of the caches.
    size_t sequences = config.sharedPrefix ? 1 : batch;
    size_t cacheRows = config.pageSize
                           ? numPages * config.pageSize * config.numKVHeads
                           : sequences * maxLength * config.numKVHeads;
    size_t cache = cacheRows * config.headDim;
    size_t valueHeadDim = config.getValueHeadDim();
    AttentionBuffers buffers;
    buffers.query = checkedData(query, rows * config.headDim * element, "q");
    size_t cacheElement = config.hasFloat8Cache() ? 1 : element;
    buffers.keyCache = checkedData(keys, cache * cacheElement, "k_cache");
    if (config.sharedKV != !values)
      throw py::value_error(config.sharedKV
                                ? "this kernel reads its values from the key "
                                  "cache: v_cache must be None"
                                : "v_cache required");
    if (values)
      buffers.valueCache = checkedData(
          *values, cacheRows * valueHeadDim * cacheElement, "v_cache");
    buffers.seqLens = static_cast<const int32_t *>(
        checkedData(lengths, sequences * sizeof(int32_t), "seq_lens"));
    buffers.output =
        checkedData(output, rows * valueHeadDim * element, "output");
    if (config.withLse) {
      if (!lse)
        throw py::value_error("this kernel writes an lse: lse required");
      buffers.lse =
          static_cast<float *>(checkedData(*lse, rows * sizeof(float), "lse"));
    }
    if (config.pageSize) {
      if (!blockTable)
        throw py::value_error("this kernel reads paged caches: block_table "
                              "required");
      buffers.blockTable = static_cast<const int32_t *>(checkedData(
          *blockTable, sequences * maxPages * sizeof(int32_t), "block_table"));
      buffers.numPages = numPages;
      buffers.maxPagesPerSequence = maxPages;
    }
    buffers.sinks = optionalBuffer<float>(
        sinks, config.withSinks, config.numQueryHeads, "sinks",
        "reads attention sinks", "attention sinks", "num_q_heads");
    buffers.alibiSlopes = optionalBuffer<float>(
        alibiSlopes, config.withAlibi, config.numQueryHeads, "alibi_slopes",
        "applies ALiBi", "ALiBi", "num_q_heads");
    buffers.queryLens = optionalBuffer<int32_t>(
        queryLens, config.withQueryLens, batch, "query_lens",
        "reads per-sequence query lengths", "per-sequence query lengths",
        "batch");
    bool perToken = config.kvScaleGranularity == KVScaleGranularity::TokenHead;
    size_t scales = perToken ? cache / config.headDim : 1;
    std::string scaleSize = perToken ? "the caches' shape without D" : "1";
    buffers.kScale = optionalBuffer<float>(
        kScale, config.hasFloat8Cache(), scales, "k_scale", "reads fp8 caches",
        "fp8 caches", scaleSize);
    buffers.vScale = optionalBuffer<float>(
        vScale, config.hasFloat8Cache() && !config.sharedKV, scales, "v_scale",
        "reads fp8 value caches", "an fp8 value cache", scaleSize);
    buffers.kvShardRank = optionalBuffer<int32_t>(
        kvShardRank, config.isKVSharded(), 1, "kv_shard_rank",
        "reads a sharded cache", "a sharded cache", "1");
    buffers.suffixLens = optionalBuffer<int32_t>(
        suffixLens, config.sharedPrefix, batch, "suffix_lens",
        "continues a shared prefix", "a shared prefix", "batch");
    buffers.batch = batch;
    buffers.maxLength = maxLength;
    llvm::Error error = llvm::Error::success();
    {
      py::gil_scoped_release release;
      error = kernel->run(buffers);
    }
    if (error)
      throw std::runtime_error(llvm::toString(std::move(error)));
  }

  int64_t numSplits() const { return kernel->getNumSplits(); }

private:
  std::unique_ptr<CPUAttentionKernel> kernel;
};

/// The process's CPU kernels of what `request` resolves to (resolve()), made
/// on first use: requests that plan the same kernels share one, whatever
/// batch and length each planned for.
PyCPUKernel &getCPUKernel(const KernelRequest &request) {
  static auto *kernels =
      new std::map<std::string, std::unique_ptr<PyCPUKernel>>();
  KernelConfig config = resolve(request);
  std::unique_ptr<PyCPUKernel> &kernel = (*kernels)[config.toString()];
  if (!kernel)
    kernel = std::make_unique<PyCPUKernel>(config);
  return *kernel;
}

/// A config's fields under their manifest names (KernelConfig::forEachField).
py::dict getConfigFields(const KernelConfig &config) {
  py::dict fields;
  config.forEachField([&](const char *name,
                          const KernelConfig::FieldValue &value) {
    std::visit([&](const auto &held) { fields[name] = py::cast(held); }, value);
  });
  return fields;
}

/// A request's fields as its manifest's "config" has them: the config's and
/// the hints'.
py::dict getRequestFields(const KernelRequest &request) {
  py::dict fields = getConfigFields(request.config);
  request.hints.forEachField(
      [&](const char *name, int64_t value) { fields[name] = value; });
  return fields;
}

} // namespace

ElementType flashdecode::python::parseElementType(const std::string &name) {
  std::string_view type =
      getCanonicalName(NameKind::ElementType, name, "dtype");
  return type == "f16"    ? ElementType::F16
         : type == "bf16" ? ElementType::BF16
                          : ElementType::F32;
}

void *flashdecode::python::checkedData(const py::array &array, size_t bytes,
                                       const char *name) {
  if (!(array.flags() & py::array::c_style))
    throw py::value_error(std::string(name) + " must be C-contiguous");
  if (static_cast<size_t>(array.nbytes()) != bytes)
    throw py::value_error(std::string(name) + " holds " +
                          std::to_string(array.nbytes()) + " bytes, expected " +
                          std::to_string(bytes));
  return const_cast<void *>(array.data());
}

PYBIND11_MODULE(_flashdecode, module) {
  module.doc() = "Native part of flashdecode; use the flashdecode package.";
  // What every manifest's compiler_version says, e.g. "flashdecode 0.2.23
  // (MLIR 22)": flashdecode.__version__ is its number.
  module.attr("COMPILER_VERSION") = std::string(getCompilerVersion());
  // The chip table's default target (fd/Planning/Chip.h), which every
  // interface compiles for when none is named.
  module.attr("DEFAULT_ARCH") = std::string(kDefaultChipName);
  module.attr("DEFAULT_SM_COUNT") = getDefaultChip().defaultSMCount;
  // The shapes the kernels are built for (fd/Planning/Limits.h): the
  // rules and the words that name them.
  // A head dim is the queries' and keys' (is_supported_head_dim, as before
  // the value dims came apart).
  module.def("is_supported_head_dim", &isSupportedKeyHeadDim,
             py::arg("head_dim"));
  module.def("is_supported_key_head_dim", &isSupportedKeyHeadDim,
             py::arg("head_dim"));
  module.def("is_supported_value_head_dim", &isSupportedValueHeadDim,
             py::arg("head_dim"));
  module.def("is_supported_page_size", &isSupportedPageSize,
             py::arg("page_size"));
  module.attr("SUPPORTED_HEAD_DIMS") = describeSupportedKeyHeadDims();
  module.attr("SUPPORTED_KEY_HEAD_DIMS") = describeSupportedKeyHeadDims();
  module.attr("SUPPORTED_VALUE_HEAD_DIMS") = describeSupportedValueHeadDims();
  module.attr("SUPPORTED_PAGE_SIZES") = describeSupportedPageSizes();
  module.attr("MAX_DECODE_QUERY_LEN") = kMaxDecodeQueryLength;
  // The spelling table (fd/Planning/Spellings.h), by the kinds' Python
  // names: "dtype", "fp8", "kv_scale", "kv_layout".
  auto nameKind = [](const std::string &kind) {
    static const std::map<std::string, NameKind> kinds = {
        {"dtype", NameKind::ElementType},
        {"fp8", NameKind::Float8Format},
        {"kv_scale", NameKind::ScaleGranularity},
        {"kv_layout", NameKind::CacheLayout}};
    auto found = kinds.find(kind);
    if (found == kinds.end())
      throw py::value_error("no spelling table for '" + kind + "'");
    return found->second;
  };
  module.def(
      "python_spelling",
      [nameKind](const std::string &kind,
                 const std::string &text) -> std::optional<std::string> {
        if (const Spellings *value = findSpelling(nameKind(kind), text))
          return std::string(value->python);
        return std::nullopt;
      },
      py::arg("kind"), py::arg("text"));
  module.def(
      "spellings",
      [nameKind](const std::string &kind) {
        std::vector<
            std::tuple<std::string, std::string, std::vector<std::string>>>
            values;
        for (const Spellings &value : getSpellings(nameKind(kind)))
          values.emplace_back(value.canonical, value.python,
                              std::vector<std::string>(value.others.begin(),
                                                       value.others.end()));
        return values;
      },
      py::arg("kind"));
  module.def(
      "describe_spellings",
      [nameKind](const std::string &kind) {
        return describeSpellings(nameKind(kind), /*pythonFirst=*/true);
      },
      py::arg("kind"));

  module.def(
      "attended_length",
      [](int64_t maxLength, int64_t queryLength, int64_t windowLeft,
         int64_t kvShardWorld, int64_t kvShardInterleave) {
        mlir::fd::AttentionRules rules;
        rules.queryLength = queryLength;
        if (windowLeft > 0)
          rules.windowLeft = windowLeft;
        std::string invalid =
            getReasonKVShardFieldsInvalid(kvShardWorld, kvShardInterleave);
        if (!invalid.empty())
          throw py::value_error(invalid);
        if (kvShardWorld != 0)
          rules.kvShard = KVShard{kvShardWorld, kvShardInterleave};
        return mlir::fd::getAttendedLength(maxLength, rules);
      },
      "The most keys one sequence attends to, what automatic splits are "
      "planned for (fd-split-kv's rule): the cache length, or with a window "
      "of W keys at most W + Lq - 1 of them (with a KV shard, what one rank "
      "holds of them).",
      py::arg("max_len"), py::arg("query_len"), py::arg("window_left"),
      py::arg("kv_shard_world") = 0, py::arg("kv_shard_interleave") = 1);

  module.def(
      "plan_splits",
      [](int64_t batch, int64_t numKVHeads, int64_t maxLength, int64_t smCount,
         int64_t blocksPerSM, int64_t minChunkLength, int64_t maxSplits,
         int64_t groupSize, int64_t queryLength, int64_t headDim,
         int64_t kvElementBytes, int64_t queryElementBytes, bool fusedMerge,
         bool paged, bool window, bool softCap, bool alibi, bool queryLens,
         const std::string &arch, int64_t valueHeadDim, bool sharedKV,
         bool bfloat16Queries, bool float8TokenScales) {
        SplitPlannerOptions options;
        options.smCount = smCount;
        options.blocksPerSM = blocksPerSM;
        options.minChunkLength = minChunkLength;
        options.maxSplits = maxSplits;
        std::string invalid = validateSplitPlannerInputs(
            batch, numKVHeads, maxLength, options, /*wordSeparator=*/'_');
        const Chip *chip = findChip(arch);
        if (invalid.empty())
          invalid = getReasonArchUnsupported(arch);
        if (invalid.empty() && headDim > 0)
          invalid =
              getReasonHeadDimsUnsupported(headDim, valueHeadDim, sharedKV);
        SplitWorkload workload;
        if (invalid.empty() && headDim > 0) {
          KernelProblem problem;
          problem.headDim = headDim;
          problem.valueHeadDim = valueHeadDim;
          problem.valuesFromKeys = sharedKV;
          problem.queryElementBytes = queryElementBytes;
          problem.cacheElementBytes = kvElementBytes;
          problem.bfloat16Queries = bfloat16Queries;
          problem.float8TokenScales = float8TokenScales;
          problem.groupSize = groupSize;
          problem.queryLength = queryLength;
          problem.alibi = alibi;
          problem.features = {paged, window, softCap, queryLens};
          workload = getSplitWorkload(problem, planKernel(problem, *chip),
                                      *chip, fusedMerge,
                                      /*plansClusters=*/true);
          invalid = validateSplitWorkload(workload, /*wordSeparator=*/'_');
        }
        if (!invalid.empty())
          throw py::value_error(invalid);
        return planNumSplits(batch, numKVHeads, maxLength, options, workload)
            .numSplits;
      },
      "The split count fd-split-kv plans for the partial kernel of this "
      "problem on `arch` (head_dim 0: the wave model alone).",
      py::arg("batch"), py::arg("num_kv_heads"), py::arg("max_len"),
      py::arg("sm_count") = SplitPlannerOptions().smCount,
      py::arg("blocks_per_sm") = SplitPlannerOptions().blocksPerSM,
      py::arg("min_chunk_length") = SplitPlannerOptions().minChunkLength,
      py::arg("max_splits") = SplitPlannerOptions().maxSplits, py::kw_only(),
      py::arg("group_size") = 1, py::arg("query_len") = 1,
      py::arg("head_dim") = 0,
      py::arg("kv_element_bytes") = SplitWorkload().kvElementBytes,
      py::arg("query_element_bytes") = SplitWorkload().queryElementBytes,
      py::arg("fused_merge") = false, py::arg("paged") = false,
      py::arg("window") = false, py::arg("soft_cap") = false,
      py::arg("alibi") = false, py::arg("query_lens") = false,
      py::arg("arch") = std::string(kDefaultChipName),
      py::arg("v_head_dim") = 0, py::arg("shared_kv") = false,
      py::arg("bfloat16_queries") = false,
      py::arg("float8_token_scales") = false);

  // What a kernel is (the JIT's key): made by resolving a request.
  py::class_<KernelConfig>(module, "KernelConfig")
      .def("__repr__", &KernelConfig::toString)
      .def_property_readonly("fields", &getConfigFields,
                             "Every field under its manifest name.");
  // One request, validated once, serves compile(), the CPU kernels and the
  // GPU plans: a config and the hints its automatic split count is planned
  // with (batch, max_len, sm_count, blocks_per_sm, min_chunk_length,
  // max_splits). A resolved config passes for a request of itself.
  py::class_<KernelRequest>(module, "KernelRequest")
      .def(py::init(&makeRequest), FD_CONFIG_ARGS)
      .def(py::init<KernelConfig>(), py::arg("config"))
      .def("__repr__", &KernelRequest::toString)
      .def_property_readonly("fields", &getRequestFields,
                             "Every field under its manifest name.")
      .def("automatic_max_splits", &getAutomaticMaxSplits,
           "The most splits num_splits=auto makes: max_splits, and with a "
           "fused merge no more than it can merge.")
      .def("resolve", &resolve,
           "The kernel this request asks for: its config with the split "
           "count resolved. Requests that plan the same kernels resolve "
           "alike.")
      .def("resolve_num_splits", &resolveNumSplits,
           "The split count the JIT compiles this request with: num_splits, "
           "or what num_splits=auto plans (fd-split-kv's choice for the "
           "config's module).");
  py::implicitly_convertible<KernelConfig, KernelRequest>();

  module.def(
      "compile",
      [](const KernelRequest &request) {
        std::shared_ptr<const CompiledKernels> kernels;
        {
          py::gil_scoped_release release;
          auto compiled = flashdecode::compile(request);
          if (!compiled) {
            std::string message = llvm::toString(compiled.takeError());
            py::gil_scoped_acquire acquire;
            throw std::runtime_error(message);
          }
          kernels = *compiled;
        }
        py::dict ptx;
        for (const auto &[name, text] : kernels->ptx)
          ptx[py::str(name)] = text;
        return py::make_tuple(ptx, kernels->manifest, kernels->numSplits);
      },
      py::arg("request"));

  py::class_<PyCPUKernel>(module, "CPUKernel")
      .def(py::init<const KernelRequest &>(), py::arg("request"))
      .def("run", &PyCPUKernel::run, py::arg("q"), py::arg("k_cache"),
           py::arg("v_cache"), py::arg("seq_lens"), py::arg("out"),
           py::arg("lse"), py::arg("batch"), py::arg("max_len"),
           py::arg("block_table") = std::nullopt, py::arg("num_pages") = 0,
           py::arg("max_pages") = 0, py::kw_only(),
           py::arg("sinks") = std::nullopt,
           py::arg("alibi_slopes") = std::nullopt,
           py::arg("query_lens") = std::nullopt,
           py::arg("k_scale") = std::nullopt, py::arg("v_scale") = std::nullopt,
           py::arg("kv_shard_rank") = std::nullopt,
           py::arg("suffix_lens") = std::nullopt)
      .def_property_readonly("num_splits", &PyCPUKernel::numSplits);
  module.def("cpu_kernel", &getCPUKernel,
             "The process's CPU kernels of what `request` resolves to (its "
             "split count planned with its hints).",
             py::arg("request"), py::return_value_policy::reference);

  flashdecode::python::defineCudaBindings(module);
  flashdecode::python::defineMergeStatesBindings(module);
}

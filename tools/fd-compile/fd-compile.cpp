//===- fd-compile.cpp - Compile decode attention to PTX + manifest --------===//
//
//   fd-compile --head-dim 128 --num-q-heads 32 --num-kv-heads 8 --dtype f16
//              --num-splits auto --kv-layout NHD --arch sm_90 -o DIR
//
// writes DIR/<kernel>.ptx for every kernel and DIR/manifest.json; --emit
// prints one stage instead. Each flag is declared once, as an llvm::cl option
// whose description is its --help text and whose value lands in the
// KernelConfig or PlanningHints field it sets. Bad flags and unsupported
// configurations are one line on stderr and exit code 2.
//
//===----------------------------------------------------------------------===//

#include "fd/Compiler/Compile.h"
#include "fd/Planning/Chip.h"
#include "fd/Planning/Limits.h"
#include "fd/Planning/Spellings.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <deque>
#include <optional>
#include <string>
#include <vector>

using namespace flashdecode;
namespace cl = llvm::cl;
using llvm::StringRef;

namespace {

constexpr int kUsageError = 2;

constexpr const char *kOverview = R"(Flash-Decoding attention to PTX

usage: fd-compile [options] -o DIR
       fd-compile [options] --emit fd|split|gpu|llvm|ptx

Compiles Flash-Decoding attention for one configuration to PTX, in process,
through the JIT cache. Writes DIR/<kernel>.ptx for every kernel and
DIR/manifest.json (kernel names, parameter order and types, grid, block and
shared memory as functions of (batch, splits), workspace bytes, the config,
the chosen split count, the compiler version).

exit codes: 0 success, 1 compilation failed, 2 bad flag or unsupported
configuration.
)";

/// The first bad flag ends the run (llvm::cl would go on parsing), so a bad
/// command line is one line on stderr.
[[noreturn]] void exitWithUsageError(const llvm::Twine &message) {
  llvm::errs() << "fd-compile: " << message << "\n";
  std::exit(kUsageError);
}

/// How a flag is written: `-o`, `--head-dim`.
std::string getSpelling(const cl::Option &flag) {
  return (flag.ArgStr.size() == 1 ? "-" : "--") + flag.ArgStr.str();
}

// The parsers: each returns false (no error) or exits with fd-compile's own
// message for the flag.

/// Decimal integers only (cl::parser reads "010" as octal). The 64-bit
/// fields are parsed as long long: cl::parser<long>, int64_t's, is final.
template <typename T> struct IntegerParser : cl::parser<T> {
  using cl::parser<T>::parser;
  StringRef getValueName() const override { return "N"; }
  bool parse(cl::Option &flag, StringRef, StringRef text, T &value) {
    if (text.getAsInteger(10, value))
      exitWithUsageError(getSpelling(flag) + " expects an integer, got '" +
                         text + "'");
    return false;
  }
};

/// `auto` (0 in KernelConfig) or a positive count.
struct SplitCountParser : IntegerParser<long long> {
  using IntegerParser::IntegerParser;
  bool parse(cl::Option &flag, StringRef name, StringRef text,
             long long &value) {
    if (text == "auto") {
      value = 0;
      return false;
    }
    IntegerParser::parse(flag, name, text, value);
    if (value <= 0)
      exitWithUsageError(getSpelling(flag) + " '" + text +
                         "' is not supported: expected auto or a positive "
                         "count");
    return false;
  }
};

/// A real number, for the std::optional<float> fields that stay empty unless
/// their flag is given.
struct NumberParser : cl::parser<float> {
  using parser::parser;
  bool parse(cl::Option &flag, StringRef, StringRef text, float &value) {
    double number = 0.0;
    if (text.getAsDouble(number))
      exitWithUsageError(getSpelling(flag) + " expects a number, got '" + text +
                         "'");
    value = static_cast<float>(number);
    return false;
  }
};

/// The spelling table's kind of the enums a choice flag takes that have one
/// (fd/Planning/Spellings.h); none for the others.
template <typename T> std::optional<NameKind> getNameKind() {
  return std::nullopt;
}
template <> std::optional<NameKind> getNameKind<ElementType>() {
  return NameKind::ElementType;
}
template <> std::optional<NameKind> getNameKind<KVCacheType>() {
  return NameKind::Float8Format;
}
template <> std::optional<NameKind> getNameKind<KVScaleGranularity>() {
  return NameKind::ScaleGranularity;
}
template <> std::optional<NameKind> getNameKind<CacheLayout>() {
  return NameKind::CacheLayout;
}

/// One of the flag's cl::values; for an enum of the spelling table, by any
/// spelling of it. A bad one is reported with every accepted name.
template <typename T> struct ChoiceParser : cl::parser<T> {
  using cl::parser<T>::parser;
  bool parse(cl::Option &flag, StringRef, StringRef text, T &value) {
    std::optional<NameKind> kind = getNameKind<T>();
    StringRef name = text;
    if (kind)
      if (const Spellings *spelled = findSpelling(*kind, text.str()))
        name = StringRef(spelled->canonical.data(), spelled->canonical.size());
    for (const auto &choice : this->Values)
      if (choice.Name == name) {
        value = choice.V.getValue();
        return false;
      }
    if (kind)
      exitWithUsageError(getSpelling(flag) + " '" + text +
                         "' is not supported: expected " +
                         describeSpellings(*kind));
    std::string accepted;
    for (auto [index, choice] : llvm::enumerate(this->Values))
      accepted += (index == 0                        ? ""
                   : index + 1 < this->Values.size() ? ", "
                                                     : " or ") +
                  choice.Name.str();
    exitWithUsageError(getSpelling(flag) + " '" + text +
                       "' is not supported: expected " + accepted);
  }
};

cl::OptionCategory flagCategory("fd-compile options");

/// fd-compile's flags, in the order they are declared.
std::vector<cl::Option *> &getFlags() {
  static std::vector<cl::Option *> flags;
  return flags;
}

/// The modifier each flag of the table carries: it files the flag under
/// fd-compile's category, the one --help shows, and in getFlags().
struct FlagModifier {
  void apply(cl::Option &flag) const {
    flag.addCategory(flagCategory);
    getFlags().push_back(&flag);
  }
} const fdCompileFlag;

using IntegerFlag =
    cl::opt<int64_t, /*ExternalStorage=*/true, IntegerParser<long long>>;
using NumberFlag =
    cl::opt<std::optional<float>, /*ExternalStorage=*/true, NumberParser>;
using SwitchFlag = cl::opt<bool, /*ExternalStorage=*/true>;
template <typename T>
using ChoiceFlag = cl::opt<T, /*ExternalStorage=*/true, ChoiceParser<T>>;

// The flag table. Each flag stores straight into its KernelConfig or
// PlanningHints field (cl::location), so that field's initializer is the
// flag's default. The
// descriptions are wrapped to fit 80 columns in --help.
KernelConfig config;
PlanningHints hints;

/// A description built from the limits, the chip table and the config's
/// defaults (so that --help never restates them by hand), kept for as long
/// as llvm::cl holds its text.
const char *describe(std::string text) {
  static std::deque<std::string> texts;
  return texts.emplace_back(std::move(text)).c_str();
}

std::string defaultOf(int64_t value) {
  return "(default " + std::to_string(value) + ")";
}

IntegerFlag headDim("head-dim",
                    cl::desc(describe("head dimension of queries and keys, a " +
                                      describeSupportedKeyHeadDims() + "\n" +
                                      defaultOf(config.headDim))),
                    cl::location(config.headDim), fdCompileFlag);
IntegerFlag
    valueHeadDim("v-head-dim",
                 cl::desc(describe("head dimension of values and outputs, a " +
                                   describeSupportedValueHeadDims() +
                                   "\n(default: the head dim)")),
                 cl::location(config.valueHeadDim), fdCompileFlag);
IntegerFlag numQueryHeads("num-q-heads", cl::desc("query heads (default 32)"),
                          cl::location(config.numQueryHeads), fdCompileFlag);
IntegerFlag numKVHeads("num-kv-heads",
                       cl::desc("KV heads; must divide --num-q-heads (default "
                                "8)"),
                       cl::location(config.numKVHeads), fdCompileFlag);
IntegerFlag
    queryLength("query-len",
                cl::desc(describe("query tokens per sequence, 1 to " +
                                  std::to_string(kMaxDecodeQueryLength) + " " +
                                  defaultOf(config.queryLength))),
                cl::location(config.queryLength), fdCompileFlag);
ChoiceFlag<ElementType>
    elementType("dtype", cl::desc("element type (default f16)"),
                cl::values(clEnumValN(ElementType::F16, "f16", ""),
                           clEnumValN(ElementType::BF16, "bf16", ""),
                           clEnumValN(ElementType::F32, "f32", "")),
                cl::location(config.elementType), fdCompileFlag);
ChoiceFlag<CacheLayout> cacheLayout(
    "kv-layout", cl::desc("KV cache layout (default NHD)"),
    cl::values(clEnumValN(CacheLayout::NHD, "NHD", "[B, L, Hkv, D]"),
               clEnumValN(CacheLayout::HND, "HND", "[B, Hkv, L, D]")),
    cl::location(config.cacheLayout), fdCompileFlag);
ChoiceFlag<KVCacheType> kvCacheType(
    "kv-dtype",
    cl::desc("fp8 KV caches, scaled by k_scale / v_scale (default: the\n"
             "--dtype)"),
    cl::values(clEnumValN(KVCacheType::E4M3, "e4m3", "f8E4M3FN"),
               clEnumValN(KVCacheType::E5M2, "e5m2", "f8E5M2")),
    cl::location(config.kvCacheType), fdCompileFlag);
ChoiceFlag<KVScaleGranularity>
    kvScale("kv-scale", cl::desc("what one fp8 scale covers (default tensor)"),
            cl::values(clEnumValN(KVScaleGranularity::Tensor, "tensor", "[1]"),
                       clEnumValN(KVScaleGranularity::TokenHead, "token-head",
                                  "the cache's shape without D")),
            cl::location(config.kvScaleGranularity), fdCompileFlag);
IntegerFlag
    pageSize("page-size",
             cl::desc(describe("paged caches: pages of N positions\n(a " +
                               describeSupportedPageSizes() +
                               ") read through a block\ntable; 0 for dense " +
                               defaultOf(config.pageSize))),
             cl::location(config.pageSize), fdCompileFlag);
cl::opt<int64_t, /*ExternalStorage=*/true, SplitCountParser>
    numSplits("num-splits",
              cl::desc("auto, planned for --batch, --max-len, --sm-count,\n"
                       "--blocks-per-sm, --min-chunk-length and --max-splits;"
                       "\nor a positive count (default auto)"),
              cl::value_desc("S"), cl::location(config.numSplits),
              fdCompileFlag);
IntegerFlag chunkLength("chunk-length",
                        cl::desc("fixed chunk length in tokens, 0 for none "
                                 "(default 0)"),
                        cl::location(config.chunkLength), fdCompileFlag);
IntegerFlag batch("batch",
                  cl::desc("batch size --num-splits auto plans for (default "
                           "1)"),
                  cl::location(hints.batch), fdCompileFlag);
IntegerFlag maxLength("max-len",
                      cl::desc("cache length --num-splits auto plans for\n"
                               "(default 4096)"),
                      cl::location(hints.maxLength), fdCompileFlag);
IntegerFlag smCount("sm-count",
                    cl::desc(describe("SMs --num-splits auto plans for " +
                                      defaultOf(hints.planner.smCount))),
                    cl::location(hints.planner.smCount), fdCompileFlag);
IntegerFlag
    blocksPerSM("blocks-per-sm",
                cl::desc(describe("blocks per SM in one wave of the "
                                  "--num-splits auto\nplan " +
                                  defaultOf(hints.planner.blocksPerSM))),
                cl::location(hints.planner.blocksPerSM), fdCompileFlag);
IntegerFlag minChunkLength(
    "min-chunk-length",
    cl::desc(describe("shortest chunk the --num-splits auto plan "
                      "makes, in\ntokens " +
                      defaultOf(hints.planner.minChunkLength))),
    cl::location(hints.planner.minChunkLength), fdCompileFlag);
IntegerFlag maxSplits(
    "max-splits",
    cl::desc(describe("most splits the --num-splits auto plan makes\n" +
                      defaultOf(hints.planner.maxSplits))),
    cl::location(hints.planner.maxSplits), fdCompileFlag);
NumberFlag scale("scale", cl::desc("softmax scale (default 1/sqrt(head dim))"),
                 cl::value_desc("X"), cl::location(config.scale),
                 fdCompileFlag);
IntegerFlag windowLeft("window-left",
                       cl::desc("sliding window: a query at position p sees "
                                "keys\np - N < j <= p; 0 for none (default 0)"),
                       cl::location(config.windowLeft), fdCompileFlag);
NumberFlag logitsSoftCap("logits-soft-cap",
                         cl::desc("scores x become C * tanh(x / C) before the "
                                  "softmax\n(default off)"),
                         cl::value_desc("C"),
                         cl::location(config.logitsSoftCap), fdCompileFlag);
SwitchFlag withLse("with-lse",
                   cl::desc("the merge kernel also writes the log-sum-exp"),
                   cl::location(config.withLse), fdCompileFlag);
SwitchFlag withSinks("with-sinks",
                     cl::desc("attention sinks: the merge kernel reads one "
                              "logit per\nquery head (float [num_q_heads], "
                              "param \"sinks\") that\njoins every row's "
                              "softmax denominator"),
                     cl::location(config.withSinks), fdCompileFlag);
SwitchFlag withAlibi("with-alibi",
                     cl::desc("ALiBi: the partial kernel reads one slope per "
                              "query\nhead (float [num_q_heads], param "
                              "\"alibi_slopes\"); a\nscore for key j at "
                              "position p gains slope * (j - p)"),
                     cl::location(config.withAlibi), fdCompileFlag);
SwitchFlag withQueryLens(
    "with-query-lens",
    cl::desc("per-sequence query lengths: both kernels read the\nquery tokens "
             "of each sequence (int32 [batch], each\n<= --query-len, param "
             "\"query_lens\"); the rows of the\nother tokens are padding: "
             "zeros, lse -inf"),
    cl::location(config.withQueryLens), fdCompileFlag);
IntegerFlag kvShardWorld(
    "kv-shard-world",
    cl::desc("a KV cache sharded by token over N ranks (decode\ncontext "
             "parallelism): global token j is on rank\n(j / I) % N, I the "
             "--kv-shard-interleave; the lengths\nare global, and the partial "
             "kernel reads its rank\n(int32 [1], param \"kv_shard_rank\"): "
             "one kernel\nserves every rank; 0 for none (default 0)"),
    cl::location(config.kvShardWorld), fdCompileFlag);
IntegerFlag kvShardInterleave(
    "kv-shard-interleave",
    cl::desc("consecutive tokens on one rank of a sharded cache\n(default 1)"),
    cl::location(config.kvShardInterleave), fdCompileFlag);
IntegerFlag topK(
    "top-k",
    cl::desc("top-k sparse decode: each sequence attends the tokens\nan "
             "int32 [batch, K] list names (param \"block_table\"),\nflat "
             "slots of the caches' first two dimensions\n(-1: none), the "
             "first seq_lens[b] of them; the caches\nare read as pages of one "
             "position (--page-size 1);\n0 for none (default 0)"),
    cl::location(config.topK), fdCompileFlag);
SwitchFlag sharedPrefix(
    "shared-prefix",
    cl::desc("a shared prefix (cascade decode): the caches hold one\nsequence "
             "(seq_lens [1]) that each query sequence\ncontinues by its "
             "suffix (int32 [batch], param\n\"suffix_lens\"); the partial "
             "kernel computes the rows\nof several sequences per block, "
             "reading the prefix\nonce for them"),
    cl::location(config.sharedPrefix), fdCompileFlag);
SwitchFlag fusedMerge(
    "fused-merge",
    cl::desc("merge in the partial kernel: the last block of each\n(sequence, "
             "KV head) to finish merges its rows; no\nmerge kernel. It counts "
             "finished blocks in int32\n[batch, num_kv_heads] (param "
             "\"merge_counters\"),\nzeroed once and left zero by every launch"),
    cl::location(config.fusedMerge), fdCompileFlag);
SwitchFlag sharedKV(
    "shared-kv",
    cl::desc("no value cache: the values are the key cache's\nfirst "
             "--v-head-dim columns (MLA's latent cache),\nscaled by k_scale "
             "(--emit fd and split; the GPU\nkernels take a value cache)"),
    cl::location(config.sharedKV), fdCompileFlag);
/// Parsed into config.schedule once the flags are read (llvm::cl has no
/// parser for a struct).
cl::opt<std::string> schedule(
    "schedule",
    cl::desc("the partial kernel's schedule by hand, as #fd.schedule\nspells "
             "it: \"form = tensor_cores, rows_per_tile = 8,\nrow_tiles = 2, "
             "threads = 128, min_blocks_per_sm = 3,\nheld_query_steps = 2, "
             "stages = 3\" (docs/KernelABI.md,\n\"Schedules\"; default: "
             "the planner's for --arch)"),
    cl::value_desc("S"), fdCompileFlag);
cl::opt<std::string, /*ExternalStorage=*/true> arch(
    "arch",
    cl::desc(describe(getChipNameList() + " (default " + config.arch + ")")),
    cl::value_desc("A"), cl::location(config.arch), fdCompileFlag);
cl::opt<int, /*ExternalStorage=*/true, IntegerParser<int>>
    ptxVersion("ptx-version",
               cl::desc("PTX ISA version times ten, e.g. 80 (default 80)"),
               cl::location(config.ptxVersion), fdCompileFlag);

// The flags that say what to do with the config.
cl::opt<Stage, /*ExternalStorage=*/false, ChoiceParser<Stage>> emit(
    "emit",
    cl::desc("print the IR after a stage, or the PTX, to stdout (to\nthe "
             "file -o names, when given) instead of writing DIR"),
    cl::values(clEnumValN(Stage::Input, "fd", "the fd.attention input"),
               clEnumValN(Stage::Split, "split", "after fd-split-kv"),
               clEnumValN(Stage::GPU, "gpu", "after convert-fd-to-gpu"),
               clEnumValN(Stage::LLVM, "llvm", "the kernels in LLVM + NVVM"),
               clEnumValN(Stage::PTX, "ptx", "the PTX")),
    fdCompileFlag);
cl::opt<bool> noCache("no-cache",
                      cl::desc("compile without the memory and disk caches"),
                      fdCompileFlag);
cl::opt<std::string>
    outputDirectory("o",
                    cl::desc("output directory for the PTX and the manifest;\n"
                             "with --emit, the file for the stage"),
                    cl::value_desc("DIR"), fdCompileFlag);

/// "--arch, ..., -o, --with-lse, ..., --help": the flags that take a value in
/// alphabetical order, then the switches in table order.
std::string getAcceptedFlags() {
  std::vector<std::string> valued, switches;
  for (cl::Option *flag : getFlags())
    (flag->getValueExpectedFlag() == cl::ValueRequired ? valued : switches)
        .push_back(getSpelling(*flag));
  llvm::sort(valued);
  llvm::append_range(valued, switches);
  valued.push_back("--help");
  return llvm::join(valued, ", ");
}

[[noreturn]] void exitWithUnknownFlag(StringRef flag) {
  exitWithUsageError("unknown flag '" + flag +
                     "'; accepted: " + getAcceptedFlags());
}

/// Where llvm::cl puts what is no flag it knows.
cl::list<std::string> unknownFlags(cl::Sink,
                                   cl::callback([](const std::string &flag) {
                                     exitWithUnknownFlag(flag);
                                   }));

/// -h prints the help once parsing is done. Declaring it keeps out llvm::cl's
/// own -h, which prints it at once, also for an unknown `-head-dim`: llvm::cl
/// reads a one-dash word as a group of one-letter flags, `-h -e -a ...`.
cl::opt<bool> shortHelp("h", cl::desc("Alias for --help"));

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  cl::HideUnrelatedOptions(flagCategory);
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "fd-compile: " << getCompilerVersion() << "\n";
  });
  // Long flags take two dashes, as they always have; that also keeps llvm::cl
  // from reading an unknown `--heads` as the one-letter flags `-h -e ...`.
  if (!cl::ParseCommandLineOptions(argc, argv, kOverview, &llvm::errs(),
                                   /*VFS=*/nullptr, /*EnvVar=*/nullptr,
                                   /*LongOptionsUseDoubleDash=*/true))
    return kUsageError;
  if (shortHelp) {
    cl::PrintHelpMessage(/*Hidden=*/false, /*Categorized=*/true);
    return 0;
  }
  // The libraries fd-compile links register flags of their own; --help hides
  // them and fd-compile does not take them either.
  for (cl::Option *option : llvm::make_second_range(cl::getRegisteredOptions()))
    if (option->getNumOccurrences() && !llvm::is_contained(getFlags(), option))
      exitWithUnknownFlag(getSpelling(*option));

  // As compile(kv_scale=) in Python: a scale granularity means nothing
  // without the fp8 cache it scales.
  if (kvScale.getNumOccurrences() && !config.hasFloat8Cache())
    exitWithUsageError("--kv-scale is only for fp8 caches: give --kv-dtype "
                       "e4m3 or e5m2 with it");
  // Top-k lists are pages of one position.
  if (config.topK > 0 && !pageSize.getNumOccurrences())
    config.pageSize = 1;
  if (schedule.getNumOccurrences()) {
    std::string error;
    config.schedule = parseScheduleChoice(schedule, error);
    if (!config.schedule)
      exitWithUsageError("--schedule: " + error);
  }
  KernelRequest request(config, hints);
  std::string invalid = request.validate();
  if (!invalid.empty())
    exitWithUsageError(invalid);
  if (emit.getNumOccurrences()) {
    llvm::Expected<std::string> text = emitStage(request, emit);
    if (!text) {
      llvm::errs() << "fd-compile: " << llvm::toString(text.takeError())
                   << "\n";
      return 1;
    }
    if (outputDirectory.empty()) {
      llvm::outs() << *text;
      return 0;
    }
    // With -o, the stage goes to that file instead of stdout.
    std::error_code error;
    llvm::raw_fd_ostream stream(outputDirectory, error);
    if (!error) {
      stream << *text;
      stream.close();
      error = stream.error();
      stream.clear_error();
    }
    if (error) {
      llvm::errs() << "fd-compile: cannot write '" << outputDirectory
                   << "': " << error.message() << "\n";
      return 1;
    }
    return 0;
  }
  if (outputDirectory.empty())
    exitWithUsageError("-o DIR (or --emit STAGE) is required");

  CompileOptions options;
  options.useMemoryCache = options.useDiskCache = !noCache;
  auto kernels = compile(request, options);
  if (!kernels) {
    llvm::errs() << "fd-compile: " << llvm::toString(kernels.takeError())
                 << "\n";
    return 1;
  }
  if (std::error_code error =
          llvm::sys::fs::create_directories(outputDirectory)) {
    llvm::errs() << "fd-compile: cannot create '" << outputDirectory
                 << "': " << error.message() << "\n";
    return 1;
  }
  auto write = [&](const std::string &name, StringRef contents) {
    std::error_code error;
    llvm::raw_fd_ostream stream(outputDirectory + "/" + name, error);
    if (!error) {
      stream << contents;
      stream.close();
      if (!stream.has_error())
        return true;
      error = stream.error();
      stream.clear_error();
    }
    llvm::errs() << "fd-compile: cannot write '" << outputDirectory << "/"
                 << name << "': " << error.message() << "\n";
    return false;
  };
  for (const auto &[name, ptx] : (*kernels)->ptx)
    if (!write(name + ".ptx", ptx))
      return 1;
  if (!write("manifest.json", (*kernels)->manifest + "\n"))
    return 1;
  llvm::outs() << "fd-compile: " << (*kernels)->ptx.size() << " kernels, "
               << (*kernels)->numSplits << " splits -> " << outputDirectory
               << "\n";
  return 0;
}

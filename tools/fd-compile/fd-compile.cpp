//===- fd-compile.cpp - Compile decode attention to PTX + manifest --------===//
//
//   fd-compile --head-dim 128 --num-q-heads 32 --num-kv-heads 8 --dtype f16
//              --num-splits auto --kv-layout NHD --arch sm_90 -o DIR
//
// writes DIR/<kernel>.ptx for every kernel and DIR/manifest.json; --emit
// prints one stage instead. Bad flags and unsupported configurations are one
// line on stderr and exit code 2.
//
//===----------------------------------------------------------------------===//

#include "fd/Compiler/Compile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <functional>
#include <map>

using namespace fd;

namespace {

constexpr int kUsageError = 2;

const char *kHelp = R"(usage: fd-compile [options] -o DIR
       fd-compile [options] --emit fd|split|gpu|llvm|ptx

Compiles Flash-Decoding attention for one configuration to PTX, in process,
through the JIT cache. Writes DIR/<kernel>.ptx for every kernel and
DIR/manifest.json (kernel names, parameter order and types, grid, block and
shared memory as functions of (batch, splits), workspace bytes, the config,
the chosen split count, the compiler version).

options:
  --head-dim N        head dimension, a multiple of 8 in [32, 256] (128)
  --num-q-heads N     query heads (32)
  --num-kv-heads N    KV heads; must divide --num-q-heads (8)
  --query-len N       query tokens per sequence, 1 to 8 (1)
  --dtype T           f16, bf16 or f32 (f16)
  --kv-layout L       NHD ([B, L, Hkv, D]) or HND ([B, Hkv, L, D]) (NHD)
  --page-size N       paged caches: pages of N positions (a power of two up
                      to 256) read through a block table; 0 for dense (0)
  --num-splits S      auto or a positive count (auto)
  --chunk-length N    fixed chunk length in tokens, 0 for none (0)
  --batch N           batch size --num-splits auto plans for (1)
  --max-len N         cache length --num-splits auto plans for (4096)
  --sm-count N        SMs --num-splits auto plans for (132)
  --blocks-per-sm N   blocks per SM in one wave of that plan (4)
  --min-chunk-length N  shortest chunk that plan makes, in tokens (128)
  --max-splits N      most splits that plan makes (128)
  --scale X           softmax scale (1/sqrt(head dim))
  --window-left N     sliding window: a query at position p sees keys
                      p - N < j <= p; 0 for none (0)
  --logits-soft-cap C scores x become C * tanh(x / C) before the softmax
                      (off)
  --with-lse          the merge kernel also writes the log-sum-exp
  --with-sinks        attention sinks: the merge kernel reads one logit per
                      query head (float [num_q_heads], param "sinks") that
                      joins every row's softmax denominator
  --with-alibi        ALiBi: the partial kernel reads one slope per query
                      head (float [num_q_heads], param "alibi_slopes"); a
                      score for key j at position p gains slope * (j - p)
  --with-query-lens   per-sequence query lengths: both kernels read the
                      query tokens of each sequence (int32 [batch], each
                      <= --query-len, param "query_lens"); the rows of the
                      other tokens are padding: zeros, lse -inf
  --arch A            sm_80, sm_86, sm_89, sm_90 or sm_90a (sm_90)
  --ptx-version N     PTX ISA version times ten, e.g. 80 (80)
  --emit STAGE        print the IR after a stage (fd: the input; split; gpu;
                      llvm) or the PTX (ptx) to stdout instead of writing DIR
  --no-cache          compile without the memory and disk caches
  -o DIR              output directory
  --help              this text

exit codes: 0 success, 1 compilation failed, 2 bad flag or unsupported
configuration.
)";

[[noreturn]] void usageError(const llvm::Twine &message) {
  llvm::errs() << "fd-compile: " << message << "\n";
  std::exit(kUsageError);
}

int64_t parseInteger(llvm::StringRef flag, llvm::StringRef text) {
  int64_t value = 0;
  if (text.getAsInteger(10, value))
    usageError(flag + " expects an integer, got '" + text + "'");
  return value;
}

double parseNumber(llvm::StringRef flag, llvm::StringRef text) {
  double value = 0.0;
  if (text.getAsDouble(value))
    usageError(flag + " expects a number, got '" + text + "'");
  return value;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  KernelConfig config;
  std::string outputDirectory, emit;
  bool useCache = true;

  // Flags that set one integer field.
  const std::pair<const char *, int64_t *> integers[] = {
      {"--head-dim", &config.headDim},
      {"--num-q-heads", &config.numQueryHeads},
      {"--num-kv-heads", &config.numKVHeads},
      {"--query-len", &config.queryLength},
      {"--page-size", &config.pageSize},
      {"--chunk-length", &config.chunkLength},
      {"--window-left", &config.windowLeft},
      {"--batch", &config.batch},
      {"--max-len", &config.maxLength},
      {"--sm-count", &config.smCount},
      {"--blocks-per-sm", &config.blocksPerSM},
      {"--min-chunk-length", &config.minChunkLength},
      {"--max-splits", &config.maxSplits}};
  std::map<std::string, std::function<void(llvm::StringRef)>> valued = {
      {"--dtype",
       [&](llvm::StringRef v) {
         auto type = llvm::StringSwitch<std::optional<ElementType>>(v)
                         .Case("f16", ElementType::F16)
                         .Case("bf16", ElementType::BF16)
                         .Case("f32", ElementType::F32)
                         .Default(std::nullopt);
         if (!type)
           usageError("--dtype '" + v +
                      "' is not supported: expected f16, "
                      "bf16 or f32");
         config.elementType = *type;
       }},
      {"--kv-layout",
       [&](llvm::StringRef v) {
         if (v != "NHD" && v != "HND")
           usageError("--kv-layout '" + v +
                      "' is not supported: expected "
                      "NHD or HND");
         config.cacheLayout = v == "NHD" ? CacheLayout::NHD : CacheLayout::HND;
       }},
      {"--num-splits",
       [&](llvm::StringRef v) {
         config.numSplits = v == "auto" ? 0 : parseInteger("--num-splits", v);
         if (config.numSplits < 0 || (v != "auto" && config.numSplits == 0))
           usageError("--num-splits '" + v +
                      "' is not supported: expected "
                      "auto or a positive count");
       }},
      {"--scale",
       [&](llvm::StringRef v) {
         config.scale = static_cast<float>(parseNumber("--scale", v));
       }},
      {"--logits-soft-cap",
       [&](llvm::StringRef v) {
         config.logitsSoftCap =
             static_cast<float>(parseNumber("--logits-soft-cap", v));
       }},
      {"--arch", [&](llvm::StringRef v) { config.arch = v.str(); }},
      {"--ptx-version",
       [&](llvm::StringRef v) {
         config.ptxVersion = static_cast<int>(parseInteger("--ptx-version", v));
       }},
      {"--emit", [&](llvm::StringRef v) { emit = v.str(); }},
      {"-o", [&](llvm::StringRef v) { outputDirectory = v.str(); }},
  };
  for (auto [name, field] : integers)
    valued[name] = [name = name, field = field](llvm::StringRef v) {
      *field = parseInteger(name, v);
    };

  for (int i = 1; i < argc; ++i) {
    llvm::StringRef flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      llvm::outs() << kHelp;
      return 0;
    }
    if (flag == "--with-lse") {
      config.withLse = true;
      continue;
    }
    if (flag == "--with-sinks") {
      config.withSinks = true;
      continue;
    }
    if (flag == "--with-alibi") {
      config.withAlibi = true;
      continue;
    }
    if (flag == "--with-query-lens") {
      config.withQueryLens = true;
      continue;
    }
    if (flag == "--no-cache") {
      useCache = false;
      continue;
    }
    // --flag=value is accepted too.
    auto [name, inlineValue] = flag.split('=');
    auto handler = valued.find(name.str());
    if (handler == valued.end()) {
      std::string accepted;
      for (const auto &entry : valued)
        accepted += entry.first + ", ";
      usageError("unknown flag '" + flag + "'; accepted: " + accepted +
                 "--with-lse, --with-sinks, --with-alibi, --with-query-lens, "
                 "--no-cache, --help");
    }
    if (flag.contains('=')) {
      handler->second(inlineValue);
      continue;
    }
    if (i + 1 == argc)
      usageError(flag + " needs a value");
    handler->second(argv[++i]);
  }

  std::string invalid = config.validate();
  if (!invalid.empty())
    usageError(invalid);

  if (!emit.empty()) {
    auto stage = llvm::StringSwitch<std::optional<Stage>>(emit)
                     .Case("fd", Stage::Input)
                     .Case("split", Stage::Split)
                     .Case("gpu", Stage::GPU)
                     .Case("llvm", Stage::LLVM)
                     .Case("ptx", Stage::PTX)
                     .Default(std::nullopt);
    if (!stage)
      usageError("--emit '" + emit +
                 "' is not supported: expected fd, split, gpu, llvm or ptx");
    llvm::Expected<std::string> text = emitStage(config, *stage);
    if (!text) {
      llvm::errs() << "fd-compile: " << llvm::toString(text.takeError())
                   << "\n";
      return 1;
    }
    llvm::outs() << *text;
    return 0;
  }
  if (outputDirectory.empty())
    usageError("-o DIR (or --emit STAGE) is required");

  CompileOptions options;
  options.useMemoryCache = options.useDiskCache = useCache;
  auto kernels = compile(config, options);
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
  auto write = [&](const std::string &name, llvm::StringRef contents) {
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

//===- fd-plan.cpp - Print the split planner's choices --------------------===//
//
// Prints the split count the planner chooses, and why, for one problem or for
// the reference table of docs/SplitHeuristic.md (--table), beside what
// FlashAttention-2's num_splits_heuristic picks for the same shapes.
//
//===----------------------------------------------------------------------===//

#include "fd/Planning/Limits.h"
#include "fd/Planning/Spellings.h"
#include "fd/Planning/SplitPlanner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int64_t ceilDiv(int64_t numerator, int64_t denominator) {
  return (numerator + denominator - 1) / denominator;
}

/// FlashAttention-2's published rule (flash_api.cpp), for comparison only:
/// work = B * Hkv (GQA packed); one split when the work fills 80 % of the SMs;
/// else the smallest split count whose wave efficiency is within 85 % of the
/// best, skipping counts that leave ceil(nBlocks / s) unchanged. It sizes by
/// the allocated length, in blocks of `blockN` keys (128 for D = 128).
int64_t flashAttention2Splits(int64_t work, int64_t smCount, int64_t maxLength,
                              int64_t blockN) {
  if (static_cast<double>(work) >= 0.8 * static_cast<double>(smCount))
    return 1;
  int64_t numBlocks = std::max<int64_t>(1, ceilDiv(maxLength, blockN));
  int64_t maxSplits = std::min({int64_t(128), smCount, numBlocks});
  auto eligible = [&](int64_t splits) {
    return splits == 1 ||
           ceilDiv(numBlocks, splits) != ceilDiv(numBlocks, splits - 1);
  };
  std::vector<double> efficiency(maxSplits + 1, 0.0);
  double best = 0.0;
  for (int64_t splits = 1; splits <= maxSplits; ++splits) {
    if (!eligible(splits))
      continue;
    double waves = static_cast<double>(work * splits) / smCount;
    efficiency[splits] = waves / std::ceil(waves);
    best = std::max(best, efficiency[splits]);
  }
  for (int64_t splits = 1; splits <= maxSplits; ++splits)
    if (eligible(splits) && efficiency[splits] >= 0.85 * best)
      return splits;
  return 1;
}

/// The reference table's heads: Hq = 32 over each Hkv (MQA, Llama-3-8B's
/// GQA-4, MHA), D = 128, f16, one query token.
flashdecode::SplitWorkload getTableWorkload(int64_t kvHeads) {
  flashdecode::KernelProblem problem;
  problem.headDim = 128;
  problem.groupSize = 32 / kvHeads;
  const flashdecode::Chip &chip = flashdecode::getDefaultChip();
  return flashdecode::getSplitWorkload(
      problem, flashdecode::planKernel(problem, chip), chip);
}

void printTable(const flashdecode::SplitPlannerOptions &options) {
  std::printf("| B | Hkv | L | splits | blocks | waves | wave eff. | chunk | "
              "FA2 splits | FA2 blocks | FA2 wave eff. | modeled time ours / "
              "FA2 |\n");
  std::printf(
      "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int64_t batch : {1, 4, 16, 64, 128})
    for (int64_t kvHeads : {1, 8, 32})
      for (int64_t length : {512, 4096, 32768, 131072}) {
        flashdecode::SplitWorkload workload = getTableWorkload(kvHeads);
        flashdecode::SplitPlan ours = flashdecode::planNumSplits(
            batch, kvHeads, length, options, workload);
        int64_t theirsSplits = flashAttention2Splits(
            batch * kvHeads, options.smCount, length, /*blockN=*/128);
        flashdecode::SplitPlan theirs = flashdecode::evaluateSplits(
            batch, kvHeads, length, theirsSplits, options, workload);
        std::printf("| %lld | %lld | %lld | %lld | %lld | %lld | %.2f | %lld "
                    "| %lld | %lld | %.2f | %.2f |\n",
                    (long long)batch, (long long)kvHeads, (long long)length,
                    (long long)ours.numSplits, (long long)ours.blocks,
                    (long long)ours.waves, ours.waveEfficiency,
                    (long long)ours.chunkLength, (long long)theirs.numSplits,
                    (long long)theirs.blocks, theirs.waveEfficiency,
                    ours.modeledCost / theirs.modeledCost);
      }
}

void usage() {
  std::puts(
      "usage: fd-plan [--batch N] [--num-kv-heads N] [--max-len N]\n"
      "               [--sm-count N] [--blocks-per-sm N]\n"
      "               [--min-chunk-length N] [--max-splits N]\n"
      "               [--num-q-heads N --head-dim N [--query-len N]\n"
      "                [--v-head-dim N] [--shared-kv]\n"
      "                [--dtype f16|bf16|f32] [--kv-dtype "
      "f16|bf16|f32|e4m3|e5m2]\n"
      "                [--kv-scale tensor|token-head]\n"
      "                [--fused-merge] [--shared-prefix] [--arch TARGET]]\n"
      "       fd-plan --table [--sm-count N] [--blocks-per-sm N]\n"
      "Prints the split count the planner chooses for decode attention over\n"
      "N sequences of up to max-len tokens, and the blocks, waves and wave\n"
      "efficiency it gives; --table prints the reference table of\n"
      "docs/SplitHeuristic.md (Hq = 32, D = 128, f16) beside\n"
      "FlashAttention-2's choices.\n"
      "--num-q-heads and --head-dim (with --query-len, default 1, the\n"
      "caches' --kv-dtype, default f16, and the queries' --dtype, default\n"
      "the caches' or f16 beside fp8, and an fp8 cache's --kv-scale,\n"
      "default tensor) describe the kernel's work, as\n"
      "fd-split-kv sees it: the plan then paces its blocks as the kernel it\n"
      "gets (tensor cores or CUDA cores) and counts the DRAM time of the\n"
      "cache and the partials; without them, the wave model alone. "
      "--fused-merge\n"
      "plans for kernels that merge in their last blocks (fd-compile\n"
      "--fused-merge): a serial tail per split. --v-head-dim (default: the\n"
      "head dim) and --shared-kv (the values are the key cache's first\n"
      "columns, MLA's latent cache) are fd-compile's; so is --shared-prefix\n"
      "(the N sequences continue one prefix of max-len tokens, a block per\n"
      "group of them). --arch (default sm_90) is the target the kernel is\n"
      "planned for, as fd-compile's: sm_90a's wgmma tile paces differently.");
}

bool parseInteger(const char *flag, const char *text, int64_t &value) {
  char *end = nullptr;
  long long parsed = std::strtoll(text, &end, 10);
  if (!*text || *end) {
    std::fprintf(stderr, "fd-plan: %s expects an integer, got '%s'\n", flag,
                 text);
    return false;
  }
  value = parsed;
  return true;
}

} // namespace

int main(int argc, char **argv) {
  flashdecode::SplitPlannerOptions options;
  int64_t batch = 1, kvHeads = 8, maxLength = 32768;
  int64_t queryHeads = 0, headDim = 0, queryLength = 1, valueHeadDim = 0;
  bool sharedKV = false, sharedPrefix = false;
  // 0: the caches' type, or f16 beside an fp8 cache.
  int64_t queryElementBytes = 0;
  // Whether --dtype (or, without it, --kv-dtype) is bf16; --kv-scale given,
  // and per token.
  bool bfloat16Queries = false, bfloat16Cache = false, scaleGiven = false,
       tokenScales = false;
  flashdecode::SplitWorkload workload;
  bool table = false, archGiven = false;
  const flashdecode::Chip *chip = &flashdecode::getDefaultChip();
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      usage();
      return 0;
    }
    if (flag == "--table") {
      table = true;
      continue;
    }
    if (flag == "--fused-merge") {
      workload.fusedMerge = true;
      continue;
    }
    if (flag == "--shared-kv") {
      sharedKV = true;
      continue;
    }
    if (flag == "--shared-prefix") {
      sharedPrefix = true;
      continue;
    }
    if (flag == "--arch") {
      const char *name = i + 1 < argc ? argv[++i] : "";
      chip = flashdecode::findChip(name);
      if (!chip) {
        std::fprintf(stderr, "fd-plan: --arch must be %s, got '%s'\n",
                     flashdecode::getChipNameList().c_str(), name);
        return 2;
      }
      archGiven = true;
      continue;
    }
    if (flag == "--kv-scale") {
      const char *name = i + 1 < argc ? argv[++i] : "";
      const flashdecode::Spellings *granularity = flashdecode::findSpelling(
          flashdecode::NameKind::ScaleGranularity, name);
      if (!granularity) {
        std::fprintf(stderr, "fd-plan: --kv-scale must be %s, got '%s'\n",
                     flashdecode::describeSpellings(
                         flashdecode::NameKind::ScaleGranularity)
                         .c_str(),
                     name);
        return 2;
      }
      scaleGiven = true;
      tokenScales = granularity->canonical == "token-head";
      continue;
    }
    if (flag == "--kv-dtype" || flag == "--dtype") {
      if (i + 1 == argc) {
        std::fprintf(stderr, "fd-plan: %s needs a value\n", flag.c_str());
        return 2;
      }
      std::string name = argv[++i];
      bool cache = flag == "--kv-dtype";
      // Any spelling of an element type (or, for the caches, an fp8 format).
      const flashdecode::Spellings *type =
          flashdecode::findSpelling(flashdecode::NameKind::ElementType, name);
      int64_t bytes = type ? (type->canonical == "f32" ? 4 : 2)
                      : cache && flashdecode::findSpelling(
                                     flashdecode::NameKind::Float8Format, name)
                          ? 1
                          : 0;
      if (!bytes) {
        std::string accepted =
            flashdecode::describeSpellings(flashdecode::NameKind::ElementType);
        if (cache)
          accepted +=
              ", or an fp8 format: " + flashdecode::describeSpellings(
                                           flashdecode::NameKind::Float8Format);
        std::fprintf(stderr, "fd-plan: %s must be %s, got '%s'\n", flag.c_str(),
                     accepted.c_str(), name.c_str());
        return 2;
      }
      (cache ? workload.kvElementBytes : queryElementBytes) = bytes;
      (cache ? bfloat16Cache : bfloat16Queries) =
          type && type->canonical == "bf16";
      continue;
    }
    int64_t *target = flag == "--batch"              ? &batch
                      : flag == "--num-q-heads"      ? &queryHeads
                      : flag == "--head-dim"         ? &headDim
                      : flag == "--v-head-dim"       ? &valueHeadDim
                      : flag == "--query-len"        ? &queryLength
                      : flag == "--num-kv-heads"     ? &kvHeads
                      : flag == "--max-len"          ? &maxLength
                      : flag == "--sm-count"         ? &options.smCount
                      : flag == "--blocks-per-sm"    ? &options.blocksPerSM
                      : flag == "--min-chunk-length" ? &options.minChunkLength
                      : flag == "--max-splits"       ? &options.maxSplits
                                                     : nullptr;
    if (!target) {
      std::fprintf(
          stderr,
          "fd-plan: unknown flag '%s'; accepted: --batch, "
          "--num-kv-heads, --max-len, --sm-count, --blocks-per-sm, "
          "--min-chunk-length, --max-splits, --num-q-heads, "
          "--head-dim, --v-head-dim, --shared-kv, --query-len, --dtype, "
          "--kv-dtype, --kv-scale, --fused-merge, --shared-prefix, "
          "--arch, --table, --help\n",
          argv[i]);
      return 2;
    }
    if (i + 1 == argc) {
      std::fprintf(stderr, "fd-plan: %s needs a value\n", argv[i]);
      return 2;
    }
    if (!parseInteger(argv[i], argv[i + 1], *target))
      return 2;
    ++i;
  }
  std::string invalid = flashdecode::validateSplitPlannerInputs(
      batch, kvHeads, maxLength, options);
  bool withWork = queryHeads || headDim;
  // The blocks along the batch: a block per sequence, or per group of a
  // shared prefix's.
  int64_t blockBatch = batch;
  if (invalid.empty() && withWork) {
    if (queryHeads < 1 || headDim < 1 || queryHeads % kvHeads)
      invalid = "--num-q-heads and --head-dim go together: both >= 1, "
                "num-q-heads a multiple of num-kv-heads; got " +
                std::to_string(queryHeads) + " and " + std::to_string(headDim) +
                " over " + std::to_string(kvHeads) + " KV heads";
    else if (!flashdecode::isSupportedKeyHeadDim(headDim))
      invalid = "--head-dim must be a " +
                flashdecode::describeSupportedKeyHeadDims() + ", got " +
                std::to_string(headDim);
    else if (std::string dims = flashdecode::getReasonHeadDimsUnsupported(
                 headDim, valueHeadDim, sharedKV);
             !dims.empty())
      invalid = dims;
    else if (queryLength < 1 ||
             queryLength > flashdecode::kMaxDecodeQueryLength)
      invalid = "--query-len must be 1 to " +
                std::to_string(flashdecode::kMaxDecodeQueryLength) + ", got " +
                std::to_string(queryLength);
    else if (table)
      invalid = "--table plans its own heads (Hq = 32, D = 128): drop "
                "--num-q-heads and --head-dim";
    // The dense kernel's workload on the default chip, as fd-split-kv
    // plans it.
    flashdecode::KernelProblem problem;
    problem.headDim = headDim;
    problem.valueHeadDim = valueHeadDim;
    problem.valuesFromKeys = sharedKV;
    problem.groupSize = queryHeads / std::max<int64_t>(kvHeads, 1);
    problem.queryLength = queryLength;
    problem.sharedPrefix = sharedPrefix;
    problem.cacheElementBytes = workload.kvElementBytes;
    problem.queryElementBytes =
        queryElementBytes ? queryElementBytes
                          : std::max<int64_t>(2, workload.kvElementBytes);
    problem.bfloat16Queries =
        queryElementBytes ? bfloat16Queries : bfloat16Cache;
    problem.float8TokenScales = workload.kvElementBytes == 1 && tokenScales;
    if (invalid.empty() && scaleGiven && workload.kvElementBytes != 1)
      invalid = "--kv-scale is only for fp8 caches: give --kv-dtype e4m3 or "
                "e5m2 with it";
    if (invalid.empty() && sharedPrefix && workload.fusedMerge)
      invalid = "--shared-prefix with --fused-merge: a shared prefix's "
                "kernels merge with the merge kernel";
    if (invalid.empty()) {
      workload = flashdecode::getSplitWorkload(
          problem, flashdecode::planKernel(problem, *chip), *chip,
          workload.fusedMerge, /*plansClusters=*/true);
      blockBatch = problem.getBlockBatch(batch);
    }
  } else if (invalid.empty() &&
             (queryLength != 1 || workload.kvElementBytes != 2 ||
              queryElementBytes || workload.fusedMerge || sharedPrefix)) {
    invalid = "--query-len, --dtype, --kv-dtype, --fused-merge and "
              "--shared-prefix describe the kernel's work: pass --num-q-heads "
              "and --head-dim with them";
  } else if (invalid.empty() && archGiven) {
    invalid = "--arch chooses the kernel the plan paces: pass --num-q-heads "
              "and --head-dim with it";
  } else if (invalid.empty() && scaleGiven) {
    invalid = "--kv-scale describes the kernel's work: pass --num-q-heads, "
              "--head-dim and an fp8 --kv-dtype with it";
  } else if (invalid.empty() && (valueHeadDim || sharedKV)) {
    invalid = "--v-head-dim and --shared-kv describe the kernel's work: pass "
              "--num-q-heads and --head-dim with them";
  }
  if (invalid.empty())
    invalid = flashdecode::validateSplitWorkload(workload);
  if (!invalid.empty()) {
    std::fprintf(stderr, "fd-plan: %s\n", invalid.c_str());
    return 2;
  }
  if (table) {
    printTable(options);
    return 0;
  }
  flashdecode::SplitPlan plan = flashdecode::planNumSplits(
      blockBatch, kvHeads, maxLength, options, workload);
  std::printf("B=%lld Hkv=%lld L=%lld sm-count=%lld -> %s\n", (long long)batch,
              (long long)kvHeads, (long long)maxLength,
              (long long)options.smCount,
              flashdecode::describeSplitPlan(plan).c_str());
  return 0;
}

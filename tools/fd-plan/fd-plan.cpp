//===- fd-plan.cpp - Print the split planner's choices --------------------===//
//
// Prints the split count the planner chooses, and why, for one problem or for
// the reference table of docs/SplitHeuristic.md (--table), beside what
// FlashAttention-2's num_splits_heuristic picks for the same shapes.
//
//===----------------------------------------------------------------------===//

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

void printTable(const flashdecode::SplitPlannerOptions &options) {
  std::printf("| B | Hkv | L | splits | blocks | waves | wave eff. | chunk | "
              "FA2 splits | FA2 blocks | FA2 wave eff. | modeled time ours / "
              "FA2 |\n");
  std::printf(
      "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int64_t batch : {1, 4, 16, 64, 128})
    for (int64_t kvHeads : {1, 8, 32})
      for (int64_t length : {512, 4096, 32768, 131072}) {
        flashdecode::SplitPlan ours =
            flashdecode::planNumSplits(batch, kvHeads, length, options);
        int64_t theirsSplits = flashAttention2Splits(
            batch * kvHeads, options.smCount, length, /*blockN=*/128);
        flashdecode::SplitPlan theirs = flashdecode::evaluateSplits(
            batch, kvHeads, length, theirsSplits, options);
        std::printf("| %lld | %lld | %lld | %lld | %lld | %lld | %.2f | %lld "
                    "| %lld | %lld | %.2f | %.2f |\n",
                    (long long)batch, (long long)kvHeads, (long long)length,
                    (long long)ours.numSplits, (long long)ours.blocks,
                    (long long)ours.waves, ours.waveEfficiency,
                    (long long)ours.chunkLength, (long long)theirs.numSplits,
                    (long long)theirs.blocks, theirs.waveEfficiency,
                    static_cast<double>(ours.modeledCost) /
                        static_cast<double>(theirs.modeledCost));
      }
}

void usage() {
  std::puts(
      "usage: fd-plan [--batch N] [--num-kv-heads N] [--max-len N]\n"
      "               [--sm-count N] [--blocks-per-sm N]\n"
      "               [--min-chunk-length N] [--max-splits N]\n"
      "       fd-plan --table [--sm-count N] [--blocks-per-sm N]\n"
      "Prints the split count the planner chooses for decode attention over\n"
      "N sequences of up to max-len tokens, and the blocks, waves and wave\n"
      "efficiency it gives; --table prints the reference table of\n"
      "docs/SplitHeuristic.md beside FlashAttention-2's choices.");
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
  bool table = false;
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
    int64_t *target = flag == "--batch"              ? &batch
                      : flag == "--num-kv-heads"     ? &kvHeads
                      : flag == "--max-len"          ? &maxLength
                      : flag == "--sm-count"         ? &options.smCount
                      : flag == "--blocks-per-sm"    ? &options.blocksPerSM
                      : flag == "--min-chunk-length" ? &options.minChunkLength
                      : flag == "--max-splits"       ? &options.maxSplits
                                                     : nullptr;
    if (!target) {
      std::fprintf(stderr,
                   "fd-plan: unknown flag '%s'; accepted: --batch, "
                   "--num-kv-heads, --max-len, --sm-count, --blocks-per-sm, "
                   "--min-chunk-length, "
                   "--max-splits, --table, --help\n",
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
  if (!invalid.empty()) {
    std::fprintf(stderr, "fd-plan: %s\n", invalid.c_str());
    return 2;
  }
  if (table) {
    printTable(options);
    return 0;
  }
  flashdecode::SplitPlan plan =
      flashdecode::planNumSplits(batch, kvHeads, maxLength, options);
  std::printf("B=%lld Hkv=%lld L=%lld sm-count=%lld -> %s\n", (long long)batch,
              (long long)kvHeads, (long long)maxLength,
              (long long)options.smCount,
              flashdecode::describeSplitPlan(plan).c_str());
  return 0;
}

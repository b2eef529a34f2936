//===- InstructionMix.cpp - fd-bench --instruction-mix --------------------===//

#include "InstructionMix.h"

#include "fd/Emulator/Emulator.h"

#include <cstdio>
#include <iterator>
#include <stdexcept>

namespace flashdecode::bench {

void InstructionMixTable::print(const std::string &csvPath) const {
  static const char *const classes[] = {FDEMU_CLASS_NAMES};
  std::printf("\nThe partial kernel's warp instructions per token and KV "
              "head (all its query rows), by fdemu's classes, of the rows "
              "modeled from two lengths (%zu):\n\n"
              "| config | B | L | mode | S | dtype | KV dtype |",
              rows.size());
  for (const char *name : classes)
    std::printf(" %s |", name);
  std::printf(" total |\n|---|---:|---:|---|---:|---|---|");
  for (size_t c = 0; c <= std::size(classes); ++c)
    std::printf("---:|");
  std::printf("\n");
  FILE *csv = csvPath.empty() ? nullptr : std::fopen(csvPath.c_str(), "w");
  if (!csvPath.empty() && !csv)
    throw std::runtime_error("cannot write " + csvPath);
  if (csv) {
    std::fputs("config,batch,max_len,mode,num_splits,dtype,kv_dtype", csv);
    for (const char *name : classes)
      std::fprintf(csv, ",%s", name);
    std::fputs(",total\n", csv);
  }
  for (const InstructionMixRow &row : rows) {
    double total = 0;
    for (double count : row.counts)
      total += count;
    std::printf("| %s | %lld | %lld | %s | %lld | %s | %s |",
                row.config.c_str(), static_cast<long long>(row.batch),
                static_cast<long long>(row.length), row.mode.c_str(),
                static_cast<long long>(row.splits), row.dtype.c_str(),
                row.kvType.c_str());
    for (double count : row.counts)
      std::printf(" %.1f |", count);
    std::printf(" %.1f |\n", total);
    if (!csv)
      continue;
    std::fprintf(csv, "%s,%lld,%lld,%s,%lld,%s,%s", row.config.c_str(),
                 static_cast<long long>(row.batch),
                 static_cast<long long>(row.length), row.mode.c_str(),
                 static_cast<long long>(row.splits), row.dtype.c_str(),
                 row.kvDtype.c_str());
    for (double count : row.counts)
      std::fprintf(csv, ",%.3f", count);
    std::fprintf(csv, ",%.3f\n", total);
  }
  if (csv)
    std::fclose(csv);
}

} // namespace flashdecode::bench

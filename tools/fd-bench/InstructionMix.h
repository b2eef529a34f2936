//===- InstructionMix.h - fd-bench --instruction-mix ------------*- C++ -*-===//
//
// The partial kernel's warp instructions per token and KV head by fdemu's
// classes (Timing::partialInstructionMix), row by row, printed as a table
// and written as CSV once fd-bench has modeled every shape.
//
//===----------------------------------------------------------------------===//

#ifndef FD_BENCH_INSTRUCTIONMIX_H
#define FD_BENCH_INSTRUCTIONMIX_H

#include <cstdint>
#include <string>
#include <vector>

namespace flashdecode::bench {

/// One fd-bench row's mix and what names it.
struct InstructionMixRow {
  std::string config;
  int64_t batch, length;
  std::string mode;
  int64_t splits;
  /// The queries' type, the caches' (kv_dtype) and the table's KV column
  /// (with an fp8 cache's scale granularity).
  std::string dtype, kvDtype, kvType;
  /// FDEMU_NUM_CLASSES counts, in FDEMU_CLASS_NAMES' order.
  std::vector<double> counts;
};

class InstructionMixTable {
public:
  void add(InstructionMixRow row) { rows.push_back(std::move(row)); }

  /// A table on stdout, and CSV to `csvPath` (config, batch, max_len, mode,
  /// num_splits, dtype, kv_dtype, one column per FDEMU_CLASS_NAMES, total)
  /// unless empty. Throws when the file cannot be written.
  void print(const std::string &csvPath) const;

private:
  std::vector<InstructionMixRow> rows;
};

} // namespace flashdecode::bench

#endif // FD_BENCH_INSTRUCTIONMIX_H

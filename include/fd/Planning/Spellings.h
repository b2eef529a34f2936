//===- Spellings.h - The names of enumerated values, once -------*- C++ -*-===//
//
// Every enumerated name an interface takes (element types, fp8 formats,
// scale granularities, cache layouts) with its spellings: the canonical one
// (manifests, fd-compile's help, the IR's words), Python's (numpy's and
// PyTorch's dtype names) and the others every interface also accepts. The
// tools and the Python module read names through this table, so each
// accepts every spelling of a value or refuses a name listing them all.
//
//===----------------------------------------------------------------------===//

#ifndef FD_PLANNING_SPELLINGS_H
#define FD_PLANNING_SPELLINGS_H

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashdecode {

enum class NameKind {
  /// The queries' (and outputs') element type.
  ElementType,
  /// An fp8 KV cache's format.
  Float8Format,
  /// What one fp8 scale covers.
  ScaleGranularity,
  /// The KV caches' layout.
  CacheLayout,
};

/// One value's spellings.
struct Spellings {
  std::string_view canonical;
  std::string_view python;
  std::vector<std::string_view> others;
};

/// The values of `kind`, each with its spellings, in a fixed order.
const std::vector<Spellings> &getSpellings(NameKind kind);

/// The value `text` spells among `kind`'s (any of its spellings, exactly),
/// or nullptr.
const Spellings *findSpelling(NameKind kind, std::string_view text);

/// "f16 (float16, half, fp16), bf16 (bfloat16) or f32 (float32, float,
/// fp32)": every value of `kind` with all its spellings, for messages and
/// help; canonical first, or Python's with `pythonFirst`.
std::string describeSpellings(NameKind kind, bool pythonFirst = false);

} // namespace flashdecode

#endif // FD_PLANNING_SPELLINGS_H

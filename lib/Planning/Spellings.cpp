//===- Spellings.cpp - The names of enumerated values, once ---------------===//

#include "fd/Planning/Spellings.h"

namespace flashdecode {

const std::vector<Spellings> &getSpellings(NameKind kind) {
  static const std::vector<Spellings> elementTypes = {
      {"f16", "float16", {"half", "fp16"}},
      {"bf16", "bfloat16", {}},
      {"f32", "float32", {"float", "fp32"}}};
  // MLIR's type names are the IR's words for the formats.
  static const std::vector<Spellings> float8Formats = {
      {"e4m3", "float8_e4m3fn", {"fp8_e4m3", "f8E4M3FN"}},
      {"e5m2", "float8_e5m2", {"fp8_e5m2", "f8E5M2"}}};
  static const std::vector<Spellings> scaleGranularities = {
      {"tensor", "tensor", {"per-tensor", "per_tensor"}},
      {"token-head", "token_head", {"per-token-head", "per_token_head"}}};
  static const std::vector<Spellings> cacheLayouts = {{"NHD", "NHD", {"nhd"}},
                                                      {"HND", "HND", {"hnd"}}};
  switch (kind) {
  case NameKind::ElementType:
    return elementTypes;
  case NameKind::Float8Format:
    return float8Formats;
  case NameKind::ScaleGranularity:
    return scaleGranularities;
  case NameKind::CacheLayout:
    break;
  }
  return cacheLayouts;
}

const Spellings *findSpelling(NameKind kind, std::string_view text) {
  for (const Spellings &value : getSpellings(kind)) {
    if (text == value.canonical || text == value.python)
      return &value;
    for (std::string_view other : value.others)
      if (text == other)
        return &value;
  }
  return nullptr;
}

std::string describeSpellings(NameKind kind, bool pythonFirst) {
  const std::vector<Spellings> &values = getSpellings(kind);
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) {
    const Spellings &value = values[i];
    std::string_view first = pythonFirst ? value.python : value.canonical;
    std::vector<std::string_view> rest;
    std::string_view second = pythonFirst ? value.canonical : value.python;
    if (second != first)
      rest.push_back(second);
    rest.insert(rest.end(), value.others.begin(), value.others.end());
    text += i == 0 ? "" : i + 1 < values.size() ? ", " : " or ";
    text += first;
    for (size_t j = 0; j < rest.size(); ++j)
      text += (j == 0 ? " (" : ", ") + std::string(rest[j]) +
              (j + 1 == rest.size() ? ")" : "");
  }
  return text;
}

} // namespace flashdecode

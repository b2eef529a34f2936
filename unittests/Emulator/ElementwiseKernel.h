//===- ElementwiseKernel.h - One instruction over arrays --------*- C++ -*-===//
//
// Most instruction tests run one instruction form over many inputs: a
// generated kernel loads %a, %b, %c from global arrays (element i in thread
// i, several CTAs), runs the test's PTX, and stores %d. The host types pick
// the PTX types; `Pred` is a predicate (stored as a 0/1 word).
//
//===----------------------------------------------------------------------===//

#ifndef FD_UNITTESTS_EMULATOR_ELEMENTWISEKERNEL_H
#define FD_UNITTESTS_EMULATOR_ELEMENTWISEKERNEL_H

#include "EmulatorHarness.h"

#include <cstdio>
#include <tuple>
#include <type_traits>

namespace flashdecode::emutest {

/// A value and its bits, for failure messages.
template <typename T> std::string show(T value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  char text[64];
  if constexpr (std::is_floating_point_v<T>)
    std::snprintf(text, sizeof(text), "%.9g (0x%llx)", double(value),
                  static_cast<unsigned long long>(bits));
  else if constexpr (std::is_signed_v<T>)
    std::snprintf(text, sizeof(text), "%lld (0x%llx)",
                  static_cast<long long>(value),
                  static_cast<unsigned long long>(bits));
  else
    std::snprintf(text, sizeof(text), "%llu (0x%llx)",
                  static_cast<unsigned long long>(bits),
                  static_cast<unsigned long long>(bits));
  return text;
}

/// A predicate operand or result, as the 0/1 word it is stored as.
struct Pred {
  uint32_t value = 0;
};

/// A PTX type's name ("u32", "pred") and size in bytes as stored.
struct PtxType {
  const char *name;
  unsigned bytes;
};
template <typename T> PtxType ptxTypeOf();
template <> inline PtxType ptxTypeOf<uint8_t>() { return {"u8", 1}; }
template <> inline PtxType ptxTypeOf<int8_t>() { return {"s8", 1}; }
template <> inline PtxType ptxTypeOf<uint16_t>() { return {"u16", 2}; }
template <> inline PtxType ptxTypeOf<int16_t>() { return {"s16", 2}; }
template <> inline PtxType ptxTypeOf<uint32_t>() { return {"u32", 4}; }
template <> inline PtxType ptxTypeOf<int32_t>() { return {"s32", 4}; }
template <> inline PtxType ptxTypeOf<uint64_t>() { return {"u64", 8}; }
template <> inline PtxType ptxTypeOf<int64_t>() { return {"s64", 8}; }
template <> inline PtxType ptxTypeOf<float>() { return {"f32", 4}; }
template <> inline PtxType ptxTypeOf<double>() { return {"f64", 8}; }
template <> inline PtxType ptxTypeOf<Pred>() { return {"pred", 4}; }

/// The kernel `elementwise(result, a, b, c, count)` running `body` on the
/// registers %a, %b, %c of `sources` into %d of `result`.
std::string buildElementwisePtx(const std::string &body, PtxType result,
                                const std::vector<PtxType> &sources);

class ElementwiseTest : public EmulatorTest {
protected:
  /// `body` over every element of the equally long `sources`.
  template <typename Result, typename... Sources>
  std::vector<Result> run(const std::string &body,
                          const std::vector<Sources> &...sources) {
    static_assert(sizeof...(Sources) >= 1 && sizeof...(Sources) <= 3);
    size_t count = std::get<0>(std::tie(sources...)).size();
    CUfunction kernel =
        getKernel(buildElementwisePtx(body, ptxTypeOf<Result>(),
                                      {ptxTypeOf<Sources>()...}),
                  "elementwise");
    CUdeviceptr pointers[3] = {0, 0, 0};
    size_t next = 0;
    ((pointers[next++] = upload(sources)), ...);
    for (size_t size : {sources.size()...})
      EXPECT_EQ(size, count) << "sources of different lengths";
    CUdeviceptr result = allocate(count * sizeof(Result));
    unsigned blocks = static_cast<unsigned>((count + 127) / 128);
    EXPECT_TRUE(launchSucceeds(kernel, {blocks}, {128},
                               KernelArguments(result, pointers[0], pointers[1],
                                               pointers[2],
                                               static_cast<uint32_t>(count))));
    return download<Result>(result, count);
  }

  /// Runs `body` and compares every element, bit for bit, with
  /// `reference(sources[i]...)`; the failure lists the first mismatches.
  template <typename Result, typename Reference, typename... Sources>
  void check(const std::string &body, Reference reference,
             const std::vector<Sources> &...sources) {
    checkWith<Result>(body, reference, sameBits<Result>, sources...);
  }

  /// As check, with `same(actual, expected)` deciding a match.
  template <typename Result, typename Reference, typename Same,
            typename... Sources>
  void checkWith(const std::string &body, Reference reference, Same same,
                 const std::vector<Sources> &...sources) {
    std::vector<Result> actual = run<Result>(body, sources...);
    size_t mismatches = 0;
    std::string report;
    for (size_t i = 0; i < actual.size(); ++i) {
      Result expected = reference(sources[i]...);
      if (same(actual[i], expected))
        continue;
      if (++mismatches <= 8) {
        report += "\n  inputs";
        ((report += " " + show(sources[i])), ...);
        report += ": expected " + show(expected) + ", got " + show(actual[i]);
      }
    }
    EXPECT_EQ(mismatches, 0u)
        << body << " over " << actual.size() << " elements:" << report;
  }

  template <typename T> static bool sameBits(T actual, T expected) {
    return std::memcmp(&actual, &expected, sizeof(T)) == 0;
  }

  /// `count` values of every bit pattern, then `edges`.
  template <typename T>
  std::vector<T> randomBits(size_t count, std::vector<T> edges = {}) {
    std::vector<T> values = std::move(edges);
    for (size_t i = 0; i < count; ++i) {
      uint64_t bits = random();
      T value;
      std::memcpy(&value, &bits, sizeof(T));
      values.push_back(value);
    }
    return values;
  }
};

} // namespace flashdecode::emutest

#endif // FD_UNITTESTS_EMULATOR_ELEMENTWISEKERNEL_H

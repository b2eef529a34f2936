//===- Limits.h - The shapes the kernels are built for ----------*- C++ -*-===//
//
// The head dims, page sizes and query lengths flashdecode compiles, stated
// once in standard C++: the dialect's verifiers, fd-split-kv, the JIT's
// KernelConfig, the tools and the Python module read them, and their error
// messages name the accepted values through the descriptions below.
//
//===----------------------------------------------------------------------===//

#ifndef FD_PLANNING_LIMITS_H
#define FD_PLANNING_LIMITS_H

#include <cstdint>
#include <string>

namespace flashdecode {

/// Head dims the kernels are built for, keys (and queries) and values
/// apart: multiples of kHeadDimMultiple (16-byte rows of 16-bit elements)
/// from kMinHeadDim to these. MLA's absorbed decode: 576-wide keys (512
/// latent + 64 rope), 512-wide values; Gemma 4's global layers: 512.
inline constexpr int64_t kMinHeadDim = 32;
inline constexpr int64_t kHeadDimMultiple = 8;
inline constexpr int64_t kMaxKeyHeadDim = 576;
inline constexpr int64_t kMaxValueHeadDim = 512;

/// Page sizes of paged caches: powers of two up to this.
inline constexpr int64_t kMaxPageSize = 256;

/// The most query tokens per sequence that are decode-shaped (fd-split-kv
/// rewrites them; the kernels hold that many rows per head).
inline constexpr int64_t kMaxDecodeQueryLength = 8;

/// The most states one fd.merge_states merges (a merge kernel thread holds
/// each state's weight), as many as fd.merge's splits at their default cap.
inline constexpr int64_t kMaxMergedStates = 512;

bool isSupportedKeyHeadDim(int64_t headDim);
/// Why keys (and queries) of `headDim` elements and values of
/// `valueHeadDim` (0: headDim), with `sharedKV` read from the keys' first
/// columns, are not a problem the kernels take: a sentence naming
/// head_dim, v_head_dim or shared_kv and what they accept; "" when they
/// are.
std::string getReasonHeadDimsUnsupported(int64_t headDim, int64_t valueHeadDim,
                                         bool sharedKV);
bool isSupportedValueHeadDim(int64_t headDim);
bool isSupportedPageSize(int64_t pageSize);

/// "multiple of 8 in [32, 576]" and "... [32, 512]", for messages
/// ("expected a ...").
std::string describeSupportedKeyHeadDims();
std::string describeSupportedValueHeadDims();
/// "power of two from 1 to 256", likewise.
std::string describeSupportedPageSizes();

} // namespace flashdecode

#endif // FD_PLANNING_LIMITS_H

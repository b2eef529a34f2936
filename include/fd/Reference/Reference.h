//===- Reference.h - float64 attention and 16-bit float codecs --*- C++ -*-===//
//
// The yardstick every numeric test, the demo and the benchmark measure the
// kernels against: attention in double precision, written as plainly as
// possible, and exact conversions between float and the f16/bf16 bit
// patterns the kernels read and write. Standard C++ only.
//
//===----------------------------------------------------------------------===//

#ifndef FD_REFERENCE_REFERENCE_H
#define FD_REFERENCE_REFERENCE_H

#include <cstdint>
#include <vector>

namespace flashdecode::reference {

/// IEEE half: round to nearest even, overflow to infinity, subnormals kept.
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);
/// bfloat16: round to nearest even; NaN stays NaN.
uint16_t floatToBFloat16(float value);
float bfloat16ToFloat(uint16_t bits);

/// A decode-attention problem over contiguous row-major double arrays in the
/// shapes of fd.attention: q [B, Lq, Hq, D], key cache [B, Lmax, Hkv, D]
/// (NHD) or [B, Hkv, Lmax, D] (HND), value cache the same with D_v for D,
/// lengths [B].
struct AttentionProblem {
  int64_t batch = 0;
  int64_t queryLength = 1;
  int64_t numQueryHeads = 0;
  int64_t numKVHeads = 0;
  int64_t headDim = 0;
  /// D_v, the values' and outputs' head dim; 0: headDim.
  int64_t valueHeadDim = 0;
  int64_t maxLength = 0;
  bool isNHD = true;
  double scale = 0.0;
  /// Sliding window of W keys ending at the query's own position (query t at
  /// p = len - n + t, n = Lq or its queryLengths entry, sees keys
  /// p - W < j <= p); 0 = no window, every key j <= p.
  int64_t windowLeft = 0;
  /// Logit soft-capping: each scaled score x becomes c * tanh(x / c) before
  /// the softmax (and the lse); 0 = off.
  double logitsSoftCap = 0.0;
  /// Attention sinks: a logit per query head, [Hq], that joins each row's
  /// softmax denominator (a key whose value is zero); null = none.
  const double *sinks = nullptr;
  /// ALiBi: a slope per query head, [Hq]; the score of key j for the query
  /// at position p gains slope_h * (j - p) after the soft-cap; null = none.
  const double *alibiSlopes = nullptr;
  /// Per-sequence query lengths, [B]: sequence b has n = queryLengths[b]
  /// (clamped to [0, Lq]) query tokens, its last n tokens: token t < n at
  /// p = len - n + t; rows t >= n are padding (zeros, lse -inf, even with
  /// sinks); null = every sequence has Lq.
  const int32_t *queryLengths = nullptr;
  /// One rank's share of the keys (decode context parallelism): with
  /// shardWorld > 0 only keys j with (j / shardInterleave) % shardWorld ==
  /// shardRank are attended (the caches and lengths are the whole
  /// sequence's); a row none of whose keys are the rank's gets zeros and lse
  /// -inf (the sink with sinks). 0 = every key.
  int64_t shardWorld = 0;
  int64_t shardInterleave = 1;
  int64_t shardRank = 0;
  /// Holes: [B, Lmax], nonzero where position j of sequence b is no key (a
  /// paged cache's hole, a top-k list's -1); its rows skip it. Null: none.
  const uint8_t *holes = nullptr;
  const double *query = nullptr;
  const double *keyCache = nullptr;
  /// Null: the values are the first D_v columns of the key cache's rows
  /// (MLA's latent cache).
  const double *valueCache = nullptr;
  const int32_t *lengths = nullptr;
};

/// softmax(cap(scale * q k^T)) v per row, query t (at position
/// p = len - n + t, n = Lq or the sequence's queryLengths entry) seeing
/// keys j <= p, and with a window W only j > p - W; cap(x) = c * tanh(x / c)
/// with a soft-cap c, else x. Keys outside a row's range are never read. With
/// sinks, exp(sink_h - max) joins each row's denominator. Rows without keys get
/// zeros and lse = -inf (the sink with sinks). `output` gets [B, Lq, Hq, D_v],
/// `lse` [B, Lq, Hq] (natural log).
void attention(const AttentionProblem &problem, std::vector<double> &output,
               std::vector<double> &lse);

} // namespace flashdecode::reference

#endif // FD_REFERENCE_REFERENCE_H

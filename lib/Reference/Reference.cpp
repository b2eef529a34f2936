//===- Reference.cpp - float64 attention and 16-bit float codecs ----------===//

#include "fd/Reference/Reference.h"
#include "Rounding.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace flashdecode::reference {

using detail::shiftRightRoundingToEven;

static uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

static float floatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

uint16_t floatToHalf(float value) {
  uint32_t bits = bitsOf(value);
  uint16_t sign = (bits >> 16) & 0x8000;
  uint32_t magnitude = bits & 0x7fffffff;
  if (magnitude >= 0x7f800000) // infinity or NaN
    return sign | (magnitude > 0x7f800000 ? 0x7e00 : 0x7c00);
  if (magnitude >= 0x477ff000) // rounds to at least 65520: infinity
    return sign | 0x7c00;
  if (magnitude >= 0x38800000) // a normal half: rebias 127 -> 15
    return sign | shiftRightRoundingToEven(magnitude - 0x38000000, 13);
  if (magnitude < 0x33000000) // below half the smallest subnormal
    return sign;
  // A subnormal half counts units of 2^-24.
  uint32_t exponent = magnitude >> 23;
  uint32_t mantissa = (magnitude & 0x7fffff) | 0x800000;
  return sign | shiftRightRoundingToEven(mantissa, 126 - exponent);
}

float halfToFloat(uint16_t bits) {
  float sign = (bits & 0x8000) ? -1.0f : 1.0f;
  uint32_t exponent = (bits >> 10) & 0x1f;
  uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0)
    return sign * std::ldexp(static_cast<float>(mantissa), -24);
  if (exponent == 31)
    return mantissa ? std::numeric_limits<float>::quiet_NaN()
                    : sign * std::numeric_limits<float>::infinity();
  return floatOf((static_cast<uint32_t>(bits & 0x8000) << 16) |
                 ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t floatToBFloat16(float value) {
  uint32_t bits = bitsOf(value);
  if ((bits & 0x7fffffff) > 0x7f800000)
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  return static_cast<uint16_t>(shiftRightRoundingToEven(bits, 16));
}

float bfloat16ToFloat(uint16_t bits) {
  return floatOf(static_cast<uint32_t>(bits) << 16);
}

void attention(const AttentionProblem &problem, std::vector<double> &output,
               std::vector<double> &lse) {
  const int64_t headDim = problem.headDim;
  const int64_t valueHeadDim =
      problem.valueHeadDim ? problem.valueHeadDim : headDim;
  const int64_t group = problem.numQueryHeads / problem.numKVHeads;
  const int64_t rows =
      problem.batch * problem.queryLength * problem.numQueryHeads;
  output.assign(rows * valueHeadDim, 0.0);
  lse.assign(rows, -std::numeric_limits<double>::infinity());
  auto cacheRow = [&](const double *cache, int64_t rowLength, int64_t b,
                      int64_t position, int64_t kvHead) {
    int64_t index =
        problem.isNHD
            ? (b * problem.maxLength + position) * problem.numKVHeads + kvHead
            : (b * problem.numKVHeads + kvHead) * problem.maxLength + position;
    return cache + index * rowLength;
  };
  // The values' rows: their own cache's, or the key cache's first D_v
  // columns.
  const double *values =
      problem.valueCache ? problem.valueCache : problem.keyCache;
  const int64_t valueRowLength = problem.valueCache ? valueHeadDim : headDim;

  std::vector<double> scores;
  std::vector<int64_t> keys;
  for (int64_t b = 0; b < problem.batch; ++b)
    for (int64_t t = 0; t < problem.queryLength; ++t)
      for (int64_t h = 0; h < problem.numQueryHeads; ++h) {
        // Query t of the sequence's n sits at position p < len and sees
        // keys [first, p]: all earlier ones, or the last W with a window.
        int64_t queries = problem.queryLength;
        if (problem.queryLengths)
          queries = std::clamp<int64_t>(problem.queryLengths[b], 0, queries);
        if (t >= queries)
          continue; // padding: zeros, lse -inf
        int64_t position = problem.lengths[b] - queries + t;
        int64_t first = 0;
        if (problem.windowLeft > 0)
          first = std::max<int64_t>(0, position - problem.windowLeft + 1);
        int64_t row = (b * problem.queryLength + t) * problem.numQueryHeads + h;
        const double *sink = problem.sinks ? problem.sinks + h : nullptr;
        // The keys the row attends: [first, p], the rank's alone when the
        // cache is sharded, but holes.
        keys.clear();
        for (int64_t j = first; j <= position; ++j)
          if ((problem.shardWorld == 0 ||
               (j / problem.shardInterleave) % problem.shardWorld ==
                   problem.shardRank) &&
              !(problem.holes && problem.holes[b * problem.maxLength + j]))
            keys.push_back(j);
        if (keys.empty()) {
          // Only the sink: weight exp(sink - sink) = 1 over a zero value
          // (NaN for a NaN sink, which poisons the row).
          if (sink) {
            lse[row] = *sink;
            if (std::isnan(*sink))
              std::fill_n(output.data() + row * valueHeadDim, valueHeadDim,
                          *sink);
          }
          continue;
        }
        const double *query = problem.query + row * headDim;
        scores.assign(keys.size(), 0.0);
        for (size_t i = 0; i < keys.size(); ++i) {
          const double *key =
              cacheRow(problem.keyCache, headDim, b, keys[i], h / group);
          double dot = 0.0;
          for (int64_t d = 0; d < headDim; ++d)
            dot += query[d] * key[d];
          double score = problem.scale * dot;
          if (problem.logitsSoftCap > 0.0)
            score = problem.logitsSoftCap *
                    std::tanh(score / problem.logitsSoftCap);
          if (problem.alibiSlopes)
            score += problem.alibiSlopes[h] *
                     static_cast<double>(keys[i] - position);
          scores[i] = score;
        }
        double max = *std::max_element(scores.begin(), scores.end());
        if (sink)
          max = std::max(max, *sink);
        double sum = sink ? std::exp(*sink - max) : 0.0;
        double *out = output.data() + row * valueHeadDim;
        for (size_t i = 0; i < keys.size(); ++i) {
          double weight = std::exp(scores[i] - max);
          sum += weight;
          const double *value =
              cacheRow(values, valueRowLength, b, keys[i], h / group);
          for (int64_t d = 0; d < valueHeadDim; ++d)
            out[d] += weight * value[d];
        }
        for (int64_t d = 0; d < valueHeadDim; ++d)
          out[d] /= sum;
        lse[row] = max + std::log(sum);
      }
}

} // namespace flashdecode::reference

//===- GPUDecodeInputs.h - A decode's inputs, buffers, reference -*- C++
//-*-===//
//
// What GPUKernelHarness.h builds on: a decode's host inputs over dense or
// paged caches with the per-call inputs of the manifest's features (sinks,
// ALiBi slopes, per-sequence query lengths) in one FeatureInputs, its device
// buffers (DeviceDecode), a stream, and the float64 reference over them
// with the manifest's window and soft-cap.
//
//===----------------------------------------------------------------------===//

#ifndef FD_UNITTESTS_RUNTIME_GPUDECODEINPUTS_H
#define FD_UNITTESTS_RUNTIME_GPUDECODEINPUTS_H

#include "../TestInputs.h"

#include "fd/Planning/KVShard.h"
#include "fd/Reference/Reference.h"
#include "fd/Runtime/Runtime.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace flashdecode::test {

inline Storage getStorage(const std::string &dtype) {
  return dtype == "f32"   ? Storage::F32
         : dtype == "f16" ? Storage::F16
                          : Storage::BF16;
}

/// A non-blocking stream, destroyed with this object.
class Stream {
public:
  explicit Stream(const rt::Device &device) : driver(device.getDriverApi()) {
    rt::check(driver, driver.cuStreamCreate(&stream, rt::kStreamNonBlocking),
              "creating a stream");
  }
  ~Stream() { driver.cuStreamDestroy(stream); }
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;

  operator rt::CUstream() const { return stream; }

  /// Runs `run` (which queues work here) and waits for it.
  void launchAndWait(const std::function<void()> &run) const {
    run();
    rt::check(driver, driver.cuStreamSynchronize(stream),
              "running the kernels");
  }

private:
  const rt::DriverApi &driver;
  rt::CUstream stream = nullptr;
};

/// The inputs the manifest's features read from device memory at every
/// launch, each empty when the kernels lack the feature.
struct FeatureInputs {
  /// Attention sinks, [Hq].
  std::vector<float> sinks = {};
  /// ALiBi slopes, [Hq].
  std::vector<float> alibiSlopes = {};
  /// Per-sequence query lengths, [batch] (the kernels clamp them to
  /// [0, Lq]).
  std::vector<int32_t> queryLens = {};
  /// With a sharded cache: this rank, [1] (the caches are its share, the
  /// lengths global).
  std::vector<int32_t> kvShardRank = {};
};

/// Random inputs of a decode over dense caches of `batch` sequences of
/// `maxLength` positions, in the manifest's dtype and layout: keys of `dim`
/// elements, values of `valueDim` (none, `values` empty, where they are the
/// keys' first columns: Manifest::sharedKV).
struct DenseInputs {
  int64_t batch, maxLength, heads, dim;
  bool isNHD;
  HostTensor query, keys, values;
  FeatureInputs features;
  int64_t valueDim = dim;

  /// Index of element `d` of key `j` of sequence `b`, KV head `h`.
  size_t at(int64_t b, int64_t j, int64_t h, int64_t d) const {
    return row(b, j, h) * dim + d;
  }
  /// Index of element `d` of value `j` of sequence `b`, KV head `h`.
  size_t valueAt(int64_t b, int64_t j, int64_t h, int64_t d) const {
    return row(b, j, h) * valueDim + d;
  }

private:
  size_t row(int64_t b, int64_t j, int64_t h) const {
    return isNHD ? (b * maxLength + j) * heads + h
                 : (b * heads + h) * maxLength + j;
  }
};

/// Random inputs of a decode over paged caches: `batch` sequences of
/// `maxPages` pages of `pageSize` positions, pools of `numPages` pages in
/// the manifest's layout of which only the first `writtenPages` reach the
/// device.
struct PagedInputs {
  int64_t batch, pageSize, maxPages, numPages, writtenPages;
  HostTensor query, keys, values;
  FeatureInputs features;

  int64_t getMaxLength() const { return maxPages * pageSize; }
};

/// A decode's device buffers: the query and caches it reads (no value cache
/// where the values are the keys'), the output, lse and lengths of its
/// `batch` sequences and, with paged caches, the block table; one buffer per
/// feature input the kernels read.
struct DeviceDecode {
  rt::DeviceBuffer query, keys;
  std::optional<rt::DeviceBuffer> values;
  rt::DeviceBuffer output, lse, lengths;
  int64_t batch, maxLength;
  std::optional<rt::DeviceBuffer> table;
  int64_t numPages = 0;
  std::optional<rt::DeviceBuffer> sinks, alibiSlopes, queryLens, kvShardRank;

  rt::DecodeBuffers getBuffers() const {
    rt::DecodeBuffers buffers{query.getAddress(),
                              keys.getAddress(),
                              values ? values->getAddress() : 0,
                              lengths.getAddress(),
                              output.getAddress(),
                              lse.getAddress(),
                              batch,
                              maxLength};
    if (table) {
      buffers.blockTable = table->getAddress();
      buffers.numPages = numPages;
    }
    auto addressOf = [](const std::optional<rt::DeviceBuffer> &buffer) {
      return buffer ? buffer->getAddress() : rt::CUdeviceptr(0);
    };
    buffers.sinks = addressOf(sinks);
    buffers.alibiSlopes = addressOf(alibiSlopes);
    buffers.queryLens = addressOf(queryLens);
    buffers.kvShardRank = addressOf(kvShardRank);
    return buffers;
  }

  /// Allocates a buffer for each feature input `features` holds and
  /// uploads it.
  void allocateFeatures(const rt::Device &device,
                        const FeatureInputs &features) {
    auto allocate = [&](std::optional<rt::DeviceBuffer> &buffer, size_t size,
                        size_t elementSize) {
      if (size)
        buffer.emplace(device, size * elementSize);
    };
    allocate(sinks, features.sinks.size(), sizeof(float));
    allocate(alibiSlopes, features.alibiSlopes.size(), sizeof(float));
    allocate(queryLens, features.queryLens.size(), sizeof(int32_t));
    allocate(kvShardRank, features.kvShardRank.size(), sizeof(int32_t));
    uploadFeatures(features);
  }

  /// Overwrites the feature inputs in device memory. No rebinding: the
  /// kernels read them at every launch, so a captured graph's next replay
  /// sees the new values.
  void uploadFeatures(const FeatureInputs &features) {
    auto write = [](std::optional<rt::DeviceBuffer> &buffer, const auto &data) {
      if (buffer)
        buffer->upload(data.data(), data.size() * sizeof(data[0]));
    };
    write(sinks, features.sinks);
    write(alibiSlopes, features.alibiSlopes);
    write(queryLens, features.queryLens);
    write(kvShardRank, features.kvShardRank);
  }

  void uploadLengths(const std::vector<int32_t> &live) {
    lengths.upload(live.data(), live.size() * sizeof(int32_t));
  }
  /// Fills the output and the lse with NaNs: every element must be written.
  void poisonOutput() {
    for (rt::DeviceBuffer *buffer : {&output, &lse}) {
      std::vector<uint8_t> poison(buffer->getSize(), 0xFF);
      buffer->upload(poison.data(), poison.size());
    }
  }
};

/// With a sharded cache, `caches` ([B, maxLength, H, D] rows of `rowLength`
/// in NHD, else HND) as one rank's share of caches of `globalLength`
/// positions: its slot i at the global token it holds, ((i / interleave) *
/// world + rank) * interleave + i % interleave; the other ranks' tokens
/// zero (the reference reads only the rank's).
inline std::vector<double> expandShard(const std::vector<double> &caches,
                                       int64_t batch, int64_t maxLength,
                                       int64_t heads, int64_t rowLength,
                                       bool isNHD, int64_t globalLength,
                                       const KVShard &shard, int64_t rank) {
  std::vector<double> global(batch * globalLength * heads * rowLength, 0.0);
  auto row = [&](int64_t b, int64_t j, int64_t h, int64_t length) {
    return isNHD ? (b * length + j) * heads + h : (b * heads + h) * length + j;
  };
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < maxLength; ++i) {
      int64_t j =
          ((i / shard.interleave) * shard.world + rank) * shard.interleave +
          i % shard.interleave;
      if (j >= globalLength)
        continue;
      for (int64_t h = 0; h < heads; ++h)
        std::copy_n(&caches[row(b, i, h, maxLength) * rowLength], rowLength,
                    &global[row(b, j, h, globalLength) * rowLength]);
    }
  return global;
}

/// The float64 reference of `manifest`'s kernels (their window and
/// soft-cap) with `features` over caches of `maxLength` positions (NHD when
/// `isNHD`, else HND); `values` is ignored with Manifest::sharedKV (the
/// keys' first D_v columns are the values); `holes` ([B, maxLength], or
/// null) the positions that are no key. With a sharded cache the
/// caches are the rank's share (features.kvShardRank) and the lengths
/// global: the reference attends the rank's keys of the caches they are a
/// share of (expandShard).
inline void referenceAttention(
    const rt::Manifest &manifest, const HostTensor &query,
    const std::vector<double> &keys, const std::vector<double> &values,
    const FeatureInputs &features, const std::vector<int32_t> &lengths,
    int64_t maxLength, bool isNHD, std::vector<double> &expected,
    std::vector<double> &expectedLse, const uint8_t *holes = nullptr) {
  reference::AttentionProblem problem;
  problem.batch = lengths.size();
  problem.queryLength = manifest.queryLength;
  problem.numQueryHeads = manifest.numQueryHeads;
  problem.numKVHeads = manifest.numKVHeads;
  problem.headDim = manifest.headDim;
  problem.valueHeadDim = manifest.valueHeadDim;
  problem.maxLength = maxLength;
  problem.isNHD = isNHD;
  problem.scale = 1.0 / std::sqrt(static_cast<double>(manifest.headDim));
  problem.windowLeft = manifest.windowLeft;
  problem.logitsSoftCap = manifest.logitsSoftCap;
  problem.query = query.values.data();
  problem.keyCache = keys.data();
  problem.valueCache = manifest.sharedKV ? nullptr : values.data();
  problem.lengths = lengths.data();
  problem.holes = holes;
  std::vector<double> globalKeys, globalValues;
  if (manifest.kvShardWorld) {
    const KVShard shard{manifest.kvShardWorld, manifest.kvShardInterleave};
    const int64_t rank = features.kvShardRank.at(0);
    problem.maxLength = shard.round() * (maxLength / shard.interleave) +
                        maxLength % shard.interleave;
    globalKeys =
        expandShard(keys, problem.batch, maxLength, manifest.numKVHeads,
                    manifest.headDim, isNHD, problem.maxLength, shard, rank);
    problem.keyCache = globalKeys.data();
    if (!manifest.sharedKV) {
      globalValues = expandShard(values, problem.batch, maxLength,
                                 manifest.numKVHeads, manifest.valueHeadDim,
                                 isNHD, problem.maxLength, shard, rank);
      problem.valueCache = globalValues.data();
    }
    problem.shardWorld = shard.world;
    problem.shardInterleave = shard.interleave;
    problem.shardRank = rank;
  }
  const std::vector<double> sinks(features.sinks.begin(), features.sinks.end());
  if (!sinks.empty())
    problem.sinks = sinks.data();
  const std::vector<double> slopes(features.alibiSlopes.begin(),
                                   features.alibiSlopes.end());
  if (!slopes.empty())
    problem.alibiSlopes = slopes.data();
  if (!features.queryLens.empty())
    problem.queryLengths = features.queryLens.data();
  reference::attention(problem, expected, expectedLse);
}

/// The logical NHD caches block table `table` makes of `inputs`' pools
/// (`heads` KV heads of `dim` key and `valueDim` value elements, the pools
/// in layout NHD when `isNHD`; no values when `inputs` has none): entries
/// clamp into the pool, as the kernels do (docs/KernelABI.md); pages that
/// were never uploaded hold NaN.
inline void gatherPages(const PagedInputs &inputs,
                        const std::vector<int32_t> &table, int64_t heads,
                        int64_t dim, int64_t valueDim, bool isNHD,
                        std::vector<double> &keys,
                        std::vector<double> &values) {
  const int64_t pageSize = inputs.pageSize, maxPages = inputs.maxPages;
  const int64_t maxLength = inputs.getMaxLength();
  const bool hasValues = !inputs.values.values.empty();
  keys.assign(inputs.batch * maxLength * heads * dim, 0.0);
  values.assign(hasValues ? inputs.batch * maxLength * heads * valueDim : 0,
                0.0);
  for (int64_t b = 0; b < inputs.batch; ++b)
    for (int64_t j = 0; j < maxLength; ++j)
      for (int64_t h = 0; h < heads; ++h) {
        int64_t page = std::clamp<int64_t>(table[b * maxPages + j / pageSize],
                                           0, inputs.numPages - 1);
        int64_t slot = j % pageSize;
        int64_t from = isNHD ? (page * pageSize + slot) * heads + h
                             : (page * heads + h) * pageSize + slot;
        int64_t to = (b * maxLength + j) * heads + h;
        bool written = page < inputs.writtenPages;
        for (int64_t d = 0; d < dim; ++d)
          keys[to * dim + d] =
              written ? inputs.keys.values[from * dim + d] : std::nan("");
        for (int64_t d = 0; hasValues && d < valueDim; ++d)
          values[to * valueDim + d] =
              written ? inputs.values.values[from * valueDim + d]
                      : std::nan("");
      }
}

} // namespace flashdecode::test

#endif // FD_UNITTESTS_RUNTIME_GPUDECODEINPUTS_H

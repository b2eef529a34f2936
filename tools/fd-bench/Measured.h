//===- Measured.h - fd-bench on a GPU: times from CUDA events ---*- C++ -*-===//
//
// What fd-bench measures on a real GPU: one decode call (partial + merge)
// over full caches, the median of many launches timed with CUDA events (KV
// buffers rotated when they fit in L2), a 32-layer step eager and as one
// graph replay, and the device-to-device copy bandwidth it compares with.
// Timing is also what the modeled path (Emulated.h) produces on fdemu.
//
//===----------------------------------------------------------------------===//

#ifndef FD_BENCH_MEASURED_H
#define FD_BENCH_MEASURED_H

#include "fd/Runtime/Runtime.h"

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace flashdecode::bench {

/// Layers of the decode step fd-bench times.
constexpr int kLayers = 32;

/// The seed of every timed run's inputs, measured or modeled: where a
/// kernel's work depends on the data (the tensor-core tiles rescale only in
/// steps that raise a max), runs of the same kernels then time the same
/// work.
constexpr std::mt19937::result_type kInputsSeed = 20261206;

/// A row's time: measured with events on a GPU, or modeled on fdemu.
struct Timing {
  double microseconds = 0;
  /// A kLayers step launched eagerly and as one graph; -1 when not timed.
  double eagerStepMicroseconds = -1, graphStepMicroseconds = -1;
  bool modeled = false;
  /// Modeled: the model's binding term of the longest kernel, and the live
  /// lengths the counters were extrapolated from (equal when the call ran
  /// at its own length).
  std::string bound = "-";
  int64_t shortLength = 0, longLength = 0;
  /// Modeled: the bytes the call's launches load from DRAM (fdemu's load
  /// footprints, a sector a launch reads once); -1 when measured.
  double dramLoadBytes = -1;
  /// Modeled from two lengths: the partial kernel's warp instructions per
  /// token and KV head (all the head's query rows together), by fdemu's
  /// classes (FDEMU_CLASS_NAMES); empty otherwise.
  std::vector<double> partialInstructionMix;
  /// Modeled: each launch of the call, in order, with its modeled time and
  /// binding term (the CSV's kernel_us); empty when measured.
  struct KernelTime {
    std::string name;
    double microseconds;
    std::string bound;
  };
  std::vector<KernelTime> kernelTimes;
};

/// The element types fd-bench fills buffers of q and the caches with.
enum class FillType { F16, BF16, E4M3, E5M2 };

/// The queries' (and outputs') element type of `manifest`: f16 or bf16, the
/// query types fd-bench runs; throws for others (f32).
FillType getQueryFillType(const rt::Manifest &manifest);

/// The caches' element type of `manifest`: its fp8 format, else the
/// queries'.
FillType getCacheFillType(const rt::Manifest &manifest);

/// An element of a 2-byte `type` (F16 or BF16) as a double.
double decodeWideElement(uint16_t bits, FillType type);

/// Fills `buffer` with normal values (of `deviation`) as `type`: a host-made
/// block repeated on the device (fully random when the buffer is at most the
/// block); with `values`, also returns them as doubles for the reference.
/// fp8 values are finite: never NaN (nor infinity in e5m2).
void fillRandom(const rt::DriverApi &driver, rt::CUstream stream,
                rt::DeviceBuffer &buffer, double deviation,
                std::mt19937 &random, std::vector<double> *values = nullptr,
                FillType type = FillType::F16);

/// The elements of the caches of `rows` (token, KV head) rows for
/// `manifest`'s kernels: D a key row, D_v a value row, no value cache where
/// the values are the keys' (Manifest::sharedKV).
struct CacheSizes {
  size_t keys, values;

  static CacheSizes of(const rt::Manifest &manifest, size_t rows) {
    return {rows * manifest.headDim,
            manifest.sharedKV ? 0 : rows * manifest.valueHeadDim};
  }
};

/// The k_scale and v_scale buffers of fp8 caches (both null for caches of
/// the query's type; no v_scale where the values are the keys'): float
/// scales log-uniform in [0.01, 1], as many as Manifest::getScaleElements
/// says for key caches of `cacheElements` elements.
struct CacheScales {
  std::unique_ptr<rt::DeviceBuffer> keys, values;
  /// The scales, with `values` of make(): for the reference.
  std::vector<double> keyValues, valueValues;

  static CacheScales make(const rt::Device &device, rt::CUstream stream,
                          const rt::Manifest &manifest, size_t cacheElements,
                          std::mt19937 &random, bool values = false);
  /// Sets buffers.kScale and vScale (0 without fp8 caches).
  void bind(rt::DecodeBuffers &buffers) const;
  /// Bytes of both buffers.
  size_t getBytes() const;
};

/// Times decode calls (f16 queries; f16 or fp8 caches) on a GPU with CUDA
/// events.
class EventTimer {
public:
  EventTimer(const rt::Device &device, rt::CUstream stream, bool quick);

  /// Device-to-device copy bandwidth (bytes read + written per second).
  double measureCopyBandwidth();

  /// One call of `bundle` over `batch` full sequences of `length` tokens
  /// (through a shuffled block table when the bundle is paged); with
  /// `withStep`, also the kLayers step.
  Timing measure(const rt::KernelBundle &bundle, int64_t batch, int64_t length,
                 bool withStep);

private:
  double timeMedian(int iterations, const std::function<void(int)> &body);

  const rt::Device &device;
  const rt::DriverApi &driver;
  rt::CUstream stream;
  bool quick;
  double l2Bytes = 0;
  std::mt19937 random{kInputsSeed};
};

} // namespace flashdecode::bench

#endif // FD_BENCH_MEASURED_H

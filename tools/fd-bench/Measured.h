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
#include <random>
#include <string>
#include <vector>

namespace flashdecode::bench {

/// Layers of the decode step fd-bench times.
constexpr int kLayers = 32;

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
};

/// Fills `buffer` with normal 16-bit floats: a host-made block repeated on
/// the device (fully random when the buffer is at most the block); with
/// `values`, also returns them as doubles for the reference.
void fillRandom(const rt::DriverApi &driver, rt::CUstream stream,
                rt::DeviceBuffer &buffer, double deviation,
                std::mt19937 &random, std::vector<double> *values = nullptr);

/// Times f16 decode calls on a GPU with CUDA events.
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
  std::mt19937 random{std::random_device{}()};
};

} // namespace flashdecode::bench

#endif // FD_BENCH_MEASURED_H

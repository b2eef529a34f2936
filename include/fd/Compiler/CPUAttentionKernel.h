//===- CPUAttentionKernel.h - Run fd attention on the CPU -------*- C++ -*-===//
//
// Compiles a KernelConfig through the CPU reference path (fd-split-kv, then
// fd-lower-to-cpu) with MLIR's ExecutionEngine and runs it on host buffers.
// Used by the numerics tests, `make demo` and the Python module's CPU backend.
//
//===----------------------------------------------------------------------===//

#ifndef FD_COMPILER_CPUATTENTIONKERNEL_H
#define FD_COMPILER_CPUATTENTIONKERNEL_H

#include "fd/Compiler/KernelConfig.h"

#include "llvm/Support/Error.h"

#include <memory>
#include <string>

namespace mlir {
class ExecutionEngine;
} // namespace mlir

namespace flashdecode {

/// Host buffers of one call, contiguous and row-major in the shapes of
/// fd.attention: q [B, (Lq,) Hq, D], key cache [B, Lmax, Hkv, D] (NHD) or
/// [B, Hkv, Lmax, D] (HND), value cache the same with D_v (null with
/// shared_kv: the values are the key cache's first D_v columns), seq_lens
/// [B], out [B, (Lq,) Hq, D_v], lse [B, (Lq,) Hq].
/// Elements are float for f32, 16-bit patterns for f16/bf16 and bytes for
/// fp8 caches.
struct AttentionBuffers {
  const void *query = nullptr;
  const void *keyCache = nullptr;
  const void *valueCache = nullptr;
  const int32_t *seqLens = nullptr;
  void *output = nullptr;
  /// Required when the kernel was compiled with `withLse`.
  float *lse = nullptr;
  int64_t batch = 0;
  /// Dense caches: Lmax. Paged caches: unused (max_pages * page_size).
  int64_t maxLength = 0;
  /// Paged caches: int32 [batch, maxPagesPerSequence] page indices, and the
  /// number of pages in the pools (the caches' first dimension).
  const int32_t *blockTable = nullptr;
  int64_t maxPagesPerSequence = 0;
  int64_t numPages = 0;
  /// Required when the kernel was compiled with `withSinks`: float [Hq].
  const float *sinks = nullptr;
  /// Required when the kernel was compiled with `withAlibi`: float [Hq].
  const float *alibiSlopes = nullptr;
  /// Required when the kernel was compiled with `withQueryLens`: int32
  /// [batch], each clamped to [0, queryLength] by the kernel.
  const int32_t *queryLens = nullptr;
  /// Required when the kernel reads an fp8 cache (whose elements are then
  /// bytes): float scales of K and V, [1] per tensor or, per token and KV
  /// head, shaped like the caches without the head dim (no vScale with
  /// shared_kv: kScale scales the values too).
  const float *kScale = nullptr;
  const float *vScale = nullptr;
  /// Required when the kernel was compiled for a sharded cache
  /// (`kvShardWorld`): int32 [1], this rank, in [0, kvShardWorld).
  const int32_t *kvShardRank = nullptr;
  /// Required when the kernel was compiled for a shared prefix
  /// (`sharedPrefix`): int32 [batch], each query sequence's tokens after
  /// the prefix. The caches, seqLens ([1]) and blockTable ([1,
  /// maxPagesPerSequence]) then hold the prefix alone.
  const int32_t *suffixLens = nullptr;
};

class CPUAttentionKernel {
public:
  /// Builds, lowers and JIT-compiles the kernel; fails with a message naming
  /// the unsupported field or the failing stage.
  static llvm::Expected<std::unique_ptr<CPUAttentionKernel>>
  compile(const KernelRequest &request);
  ~CPUAttentionKernel();

  /// Runs the kernel. Lengths outside [0, maxLength] are clamped by it.
  llvm::Error run(const AttentionBuffers &buffers) const;

  /// The config compiled: the request's (its split count as requested).
  const KernelConfig &getConfig() const { return config; }
  /// The split count fd-split-kv chose (1 when not split).
  int64_t getNumSplits() const { return numSplits; }
  /// The IR after fd-split-kv, before lowering to loops.
  const std::string &getSplitIR() const { return splitIR; }

private:
  CPUAttentionKernel() = default;

  KernelConfig config;
  int64_t numSplits = 1;
  std::string splitIR;
  std::unique_ptr<mlir::ExecutionEngine> engine;
};

} // namespace flashdecode

#endif // FD_COMPILER_CPUATTENTIONKERNEL_H

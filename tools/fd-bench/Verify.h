//===- Verify.h - fd-bench's check of a decode against float64 -*- C++ -*-===//
//
// One run of a bundle's kernels on random inputs of its configuration
// against the float64 reference: dense caches of `length` positions for
// `batch` sequences of mixed live lengths (one empty when batch > 2), the
// output poisoned first.
//
//===----------------------------------------------------------------------===//

#ifndef FD_BENCH_VERIFY_H
#define FD_BENCH_VERIFY_H

#include "ModelConfigs.h"

#include "fd/Runtime/Runtime.h"

#include <random>

namespace flashdecode::bench {

/// max |out - ref| / max |ref| of the decode of `bundle` (dense kernels of
/// `config`'s heads) on `device`'s `stream`; infinity for any output left
/// unwritten (NaN).
double verifyDecode(rt::Device &device, rt::CUstream stream,
                    const rt::KernelBundle &bundle, const ModelConfig &config,
                    int64_t batch, int64_t length, std::mt19937 &random);

} // namespace flashdecode::bench

#endif // FD_BENCH_VERIFY_H

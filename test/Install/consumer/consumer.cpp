// Compiles Llama-3-8B's decode kernels (the default request), launches them
// through the runtime and checks the result: every value row of the cache is
// 1, so a sequence with keys attends to 1 whatever its scores, and one
// without gives 0. Prints "consumer: ok" and the compiler's version.
#include "fd/Compiler/Compile.h"
#include "fd/Runtime/Runtime.h"

#include <cstdint>
#include <cstdio>
#include <vector>

using namespace flashdecode;

int main() {
  KernelRequest request;
  request.hints.batch = 2;
  request.hints.maxLength = 64;
  auto compiled = compile(request);
  if (!compiled) {
    std::fprintf(stderr, "%s\n", llvm::toString(compiled.takeError()).c_str());
    return 1;
  }
  rt::KernelBundle bundle;
  bundle.manifest = rt::Manifest::parse((*compiled)->manifest);
  for (const auto &[name, ptx] : (*compiled)->ptx)
    bundle.ptx[name] = ptx;

  const KernelConfig &config = request.config;
  const int64_t batch = 2, maxLength = 64, dim = config.headDim;
  const int64_t queries = batch * config.numQueryHeads * dim;
  const int64_t cache = batch * maxLength * config.numKVHeads * dim;
  std::vector<uint16_t> query(queries), keys(cache), values(cache, 0x3C00);
  for (size_t i = 0; i < query.size(); ++i)
    query[i] = 0x3000 + i * 7919 % 1024; // f16 in [0.125, 0.25)
  for (size_t i = 0; i < keys.size(); ++i)
    keys[i] = 0xB000 + i * 104729 % 1024; // f16 in (-0.25, -0.125]
  std::vector<int32_t> lengths = {37, 0};

  rt::Device device;
  rt::DeviceBuffer q(device, queries * 2), k(device, cache * 2),
      v(device, cache * 2), seqLens(device, batch * 4),
      out(device, queries * 2);
  q.upload(query.data(), queries * 2);
  k.upload(keys.data(), cache * 2);
  v.upload(values.data(), cache * 2);
  seqLens.upload(lengths.data(), batch * 4);
  rt::DecodeBuffers buffers;
  buffers.query = q.getAddress();
  buffers.keyCache = k.getAddress();
  buffers.valueCache = v.getAddress();
  buffers.seqLens = seqLens.getAddress();
  buffers.output = out.getAddress();
  buffers.batch = batch;
  buffers.maxLength = maxLength;
  rt::DecodePlan plan(device, bundle, buffers);
  plan.launch(nullptr);
  std::vector<uint16_t> result(queries);
  out.download(result.data(), queries * 2);

  const int64_t half = queries / batch;
  for (int64_t i = 0; i < queries; ++i) {
    uint16_t expected = i < half ? 0x3C00 : 0;
    if (result[i] != expected) {
      std::printf("consumer: output %lld is 0x%04x, expected 0x%04x\n",
                  static_cast<long long>(i), result[i], expected);
      return 1;
    }
  }
  std::printf("consumer: ok, %s, package %s\n", getCompilerVersion(),
              FD_PACKAGE_VERSION);
  return 0;
}

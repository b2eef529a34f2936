// A split-KV decode attention kernel pair in CUDA C++ (partial + merge), of
// the size and structure flashdecode generates: the anchor that
// bench/compile_latency times `nvcc -ptx` on, as nvcc-based JITs would.
// Compiled for timing only; flashdecode's own kernels come from MLIR.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace anchor {

constexpr int kWarps = 4;

template <int D, int G, typename T>
__global__ void partialAttention(const T *__restrict__ q,
                                 const T *__restrict__ k,
                                 const T *__restrict__ v,
                                 const int *__restrict__ seqLens,
                                 float *__restrict__ partialOut,
                                 float *__restrict__ partialLse, int maxLen,
                                 int numKVHeads, float scaleLog2) {
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kLanes = D / kVec < 32 ? D / kVec : 32;
  constexpr int kPerLane = D / kLanes;
  constexpr int kGroups = 32 / kLanes;
  __shared__ float qTile[G][D];
  __shared__ float warpAcc[kWarps][G][D];
  __shared__ float warpMaxSum[kWarps][G][2];
  int split = blockIdx.x, kvHead = blockIdx.y, b = blockIdx.z;
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int group = lane / kLanes, laneInGroup = lane % kLanes;
  int len = min(max(seqLens[b], 0), maxLen);
  int chunk = (len + gridDim.x - 1) / gridDim.x;
  int begin = min(split * chunk, len), end = min(begin + chunk, len);
  for (int i = threadIdx.x; i < G * D; i += blockDim.x) {
    int head = kvHead * G + i / D;
    qTile[i / D][i % D] =
        float(q[(b * numKVHeads * G + head) * D + i % D]) * scaleLog2;
  }
  __syncthreads();
  float m[G], l[G], acc[G][kPerLane];
  for (int r = 0; r < G; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
    for (int i = 0; i < kPerLane; ++i)
      acc[r][i] = 0.f;
  }
  for (int t = begin + warp * kGroups + group; t < end; t += kWarps * kGroups) {
    size_t row = ((size_t(b) * maxLen + t) * numKVHeads + kvHead) * D +
                 laneInGroup * kPerLane;
    T kv[kPerLane], vv[kPerLane];
#pragma unroll
    for (int i = 0; i < kPerLane; i += kVec) {
      *reinterpret_cast<uint4 *>(&kv[i]) =
          *reinterpret_cast<const uint4 *>(&k[row + i]);
      *reinterpret_cast<uint4 *>(&vv[i]) =
          *reinterpret_cast<const uint4 *>(&v[row + i]);
    }
#pragma unroll
    for (int r = 0; r < G; ++r) {
      float s = 0.f;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i)
        s += qTile[r][laneInGroup * kPerLane + i] * float(kv[i]);
#pragma unroll
      for (int o = kLanes / 2; o > 0; o /= 2)
        s += __shfl_xor_sync(0xffffffff, s, o);
      float mNew = fmaxf(m[r], s);
      float alpha = exp2f(m[r] - mNew), p = exp2f(s - mNew);
      l[r] = l[r] * alpha + p;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i)
        acc[r][i] = acc[r][i] * alpha + p * float(vv[i]);
      m[r] = mNew;
    }
  }
#pragma unroll
  for (int o = kLanes; o < 32; o *= 2)
    for (int r = 0; r < G; ++r) {
      float mo = __shfl_xor_sync(0xffffffff, m[r], o);
      float lo = __shfl_xor_sync(0xffffffff, l[r], o);
      float mNew = fmaxf(m[r], mo);
      float a = m[r] == -INFINITY ? 0.f : exp2f(m[r] - mNew);
      float ao = mo == -INFINITY ? 0.f : exp2f(mo - mNew);
      l[r] = l[r] * a + lo * ao;
      for (int i = 0; i < kPerLane; ++i)
        acc[r][i] = acc[r][i] * a +
                    __shfl_xor_sync(0xffffffff, acc[r][i], o) * ao;
      m[r] = mNew;
    }
  if (group == 0)
    for (int r = 0; r < G; ++r) {
      for (int i = 0; i < kPerLane; ++i)
        warpAcc[warp][r][laneInGroup * kPerLane + i] = acc[r][i];
      warpMaxSum[warp][r][0] = m[r];
      warpMaxSum[warp][r][1] = l[r];
    }
  __syncthreads();
  for (int i = threadIdx.x; i < G * D; i += blockDim.x) {
    int r = i / D, d = i % D;
    float mMax = -INFINITY;
    for (int w = 0; w < kWarps; ++w)
      mMax = fmaxf(mMax, warpMaxSum[w][r][0]);
    float sum = 0.f, out = 0.f;
    for (int w = 0; w < kWarps; ++w) {
      float a = warpMaxSum[w][r][0] == -INFINITY
                    ? 0.f
                    : exp2f(warpMaxSum[w][r][0] - mMax);
      sum += a * warpMaxSum[w][r][1];
      out += a * warpAcc[w][r][d];
    }
    size_t rowIndex = (size_t(b) * numKVHeads * G + kvHead * G + r) *
                          gridDim.x + split;
    partialOut[rowIndex * D + d] = sum > 0.f ? out / sum : 0.f;
    if (d == 0)
      partialLse[rowIndex] =
          sum > 0.f ? (mMax + log2f(sum)) * 0.6931471805599453f : -INFINITY;
  }
}

template <int D, typename T>
__global__ void merge(const float *__restrict__ partialOut,
                      const float *__restrict__ partialLse, T *__restrict__ out,
                      int numSplits) {
  int d = threadIdx.x;
  size_t row = (size_t(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x +
               blockIdx.x;
  float mMax = -INFINITY;
  for (int s = 0; s < numSplits; ++s)
    mMax = fmaxf(mMax, partialLse[row * numSplits + s]);
  float shift = mMax == -INFINITY ? 0.f : mMax, sum = 0.f, acc = 0.f;
  for (int s = 0; s < numSplits; ++s) {
    float w = __expf(partialLse[row * numSplits + s] - shift);
    sum += w;
    acc += w * partialOut[(row * numSplits + s) * D + d];
  }
  out[row * D + d] = T(sum > 0.f ? acc / sum : 0.f);
}

// One instantiation per kernel, as a JIT compiling one configuration would.
template __global__ void partialAttention<128, 4, __half>(
    const __half *, const __half *, const __half *, const int *, float *,
    float *, int, int, float);
template __global__ void merge<128, __half>(const float *, const float *,
                                            __half *, int);

} // namespace anchor

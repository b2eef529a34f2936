// driver_api_kernels.cu - CUDA kernels driver_api_program runs on fdemu.
//
// Compiled to PTX by nvcc at build time (-ptx -arch=sm_80), so the
// emulator meets the instruction forms nvcc writes, not only those of the
// project's own compiler. extern "C" keeps the names unmangled for
// cuModuleGetFunction.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

extern "C" __global__ void saxpy(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = a * x[i] + y[i];
}

// One sum per warp, every lane ending with it (butterfly order).
extern "C" __global__ void warpSum(const float *in, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float value = in[i];
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  out[i] = value;
}

// One sum per block of 256 threads, a tree through shared memory.
extern "C" __global__ void blockSum(const int *in, int *out) {
  __shared__ int partial[256];
  partial[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    out[blockIdx.x] = partial[0];
}

extern "C" __global__ void scale4(const float4 *in, float4 *out, float s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float4 v = in[i];
  out[i] = make_float4(v.x * s, v.y * s, v.z * s, v.w * s);
}

extern "C" __global__ void exp2Kernel(const float *in, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = exp2f(in[i]);
}

// f32 -> f16 and bf16 (round to nearest even), and their sum back in f32.
extern "C" __global__ void toHalf(const float *in, __half *half,
                                  __nv_bfloat16 *bfloat, float *back) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  __half h = __float2half(in[i]);
  __nv_bfloat16 b = __float2bfloat16(in[i]);
  half[i] = h;
  bfloat[i] = b;
  back[i] = __half2float(h) + __bfloat162float(b);
}

// bf16 pairs multiplied: nvcc writes __hmul2 as inline asm, an
// fma.rn.bf16x2 with a -0 addend in a register declared without a `%`.
extern "C" __global__ void bfloat16Multiply(const __nv_bfloat162 *a,
                                            const __nv_bfloat162 *b,
                                            __nv_bfloat162 *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = __hmul2(a[i], b[i]);
}

// The planted bug: writes n elements past the end of out.
extern "C" __global__ void storePastEnd(int *out, int n) {
  out[n + threadIdx.x] = 1;
}

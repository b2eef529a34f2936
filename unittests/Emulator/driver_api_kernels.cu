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

// Tensor cores and asynchronous copies as MLIR's nvgpu lowering uses them
// (inline PTX, so the forms are exactly those of the ISA): A (16 x 16) and
// B (16 x 8, k-major rows) go to shared memory, A through ldmatrix.x4, B
// through ldmatrix.x2.trans; C and D (16 x 8 f32, row-major) in the mma
// accumulator layout: lane l holds rows l / 4 and l / 4 + 8, columns
// 2 (l % 4) and 2 (l % 4) + 1. One warp.
template <bool BFloat>
__device__ void matrixMultiplyAdd(const unsigned short *a,
                                  const unsigned short *b, const float *c,
                                  float *d) {
  __shared__ __align__(16) unsigned short tileA[16 * 16], tileB[16 * 8];
  int lane = threadIdx.x;
  for (int i = lane; i < 16 * 16; i += 32)
    tileA[i] = a[i];
  for (int i = lane; i < 16 * 8; i += 32)
    tileB[i] = b[i];
  __syncwarp();
  unsigned a0, a1, a2, a3, b0, b1;
  unsigned rowA = (unsigned)__cvta_generic_to_shared(
      &tileA[(lane % 16) * 16 + (lane / 16) * 8]);
  unsigned rowB = (unsigned)__cvta_generic_to_shared(&tileB[(lane % 16) * 8]);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, "
               "[%4];\n"
               : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3)
               : "r"(rowA));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, "
               "[%2];\n"
               : "=r"(b0), "=r"(b1)
               : "r"(rowB));
  int row = lane / 4, column = 2 * (lane % 4);
  float d0 = c[row * 8 + column], d1 = c[row * 8 + column + 1];
  float d2 = c[(row + 8) * 8 + column], d3 = c[(row + 8) * 8 + column + 1];
  if (BFloat)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  d[row * 8 + column] = d0;
  d[row * 8 + column + 1] = d1;
  d[(row + 8) * 8 + column] = d2;
  d[(row + 8) * 8 + column + 1] = d3;
}

extern "C" __global__ void mmaF16(const unsigned short *a,
                                  const unsigned short *b, const float *c,
                                  float *d) {
  matrixMultiplyAdd<false>(a, b, c, d);
}

extern "C" __global__ void mmaBF16(const unsigned short *a,
                                   const unsigned short *b, const float *c,
                                   float *d) {
  matrixMultiplyAdd<true>(a, b, c, d);
}

// cp.async into shared memory, one warp, out[s * 32 + t] = slot s of
// thread t (16 bytes each) after the waits: slot 0 from in[t] (group 0,
// complete after wait_group 1), slot 1 from in[32 + t] (group 1, after
// wait_group 0), slot 2 the first t % 17 bytes of in[64 + t] and zeros
// (src-size), slot 3 the first 8 bytes of in[96 + t] (.ca) over 0xff bytes.
extern "C" __global__ void asyncCopy(const int4 *in, int4 *out) {
  __shared__ int4 slots[4][32];
  int t = threadIdx.x;
  slots[3][t] = make_int4(-1, -1, -1, -1);
  unsigned slot[4];
  for (int s = 0; s < 4; ++s)
    slot[s] = (unsigned)__cvta_generic_to_shared(&slots[s][t]);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
               "cp.async.commit_group;\n"
               "cp.async.cg.shared.global [%2], [%3], 16;\n"
               "cp.async.commit_group;\n"
               "cp.async.wait_group 1;\n" ::"r"(slot[0]),
               "l"(in + t), "r"(slot[1]), "l"(in + 32 + t)
               : "memory");
  int4 older = slots[0][t];
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  out[t] = older;
  out[32 + t] = slots[1][t];
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               "cp.async.ca.shared.global [%3], [%4], 8;\n"
               "cp.async.wait_all;\n" ::"r"(slot[2]),
               "l"(in + 64 + t), "r"(t % 17), "r"(slot[3]), "l"(in + 96 + t)
               : "memory");
  out[64 + t] = slots[2][t];
  out[96 + t] = slots[3][t];
}

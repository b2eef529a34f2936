/*===- driver_api.h - The driver table and helpers of driver_api_program -===*
 *
 * The CUDA driver API entry points driver_api_program.c loads with dlsym
 * (types and constants as cuda.h has them, declared here so that the
 * program needs no CUDA headers), a checking macro, the mismatch count,
 * f16/bf16 conversions done in C, and upload/allocate/run. For the one
 * translation unit driver_api_program.c: everything is static.
 *
 *===----------------------------------------------------------------------===*/

#ifndef FD_UNITTESTS_EMULATOR_DRIVER_API_H
#define FD_UNITTESTS_EMULATOR_DRIVER_API_H

#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;

enum {
  kSuccess = 0,
  kIllegalAddress = 700,
  kJitErrorLogBuffer = 5,
  kJitErrorLogBufferSizeBytes = 6,
  kComputeCapabilityMajor = 75,
};

static struct {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuCtxCreate_v2)(CUcontext *, unsigned, CUdevice);
  CUresult (*cuCtxDestroy_v2)(CUcontext);
  CUresult (*cuModuleLoadDataEx)(CUmodule *, const void *, unsigned, int *,
                                 void **);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuMemAlloc_v2)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree_v2)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr, const void *, size_t);
  CUresult (*cuMemcpyDtoH_v2)(void *, CUdeviceptr, size_t);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, CUstream, void **,
                             void **);
  CUresult (*cuCtxSynchronize)(void);
  CUresult (*cuGetErrorString)(CUresult, const char **);
} cu;

static int failures = 0;

/* Runs a driver call; a failure is reported and counted. */
#define CHECK(call)                                                            \
  do {                                                                         \
    CUresult result_ = (call);                                                 \
    if (result_ != kSuccess) {                                                 \
      const char *text_ = "?";                                                 \
      cu.cuGetErrorString(result_, &text_);                                    \
      fprintf(stderr, "%s:%d: %s failed with %d: %s\n", __FILE__, __LINE__,    \
              #call, result_, text_);                                          \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static void expect(int condition, const char *what, int index) {
  if (condition)
    return;
  if (++failures <= 20)
    fprintf(stderr, "mismatch: %s at element %d\n", what, index);
}

static float randomFloat(float low, float high) {
  return low + (high - low) * ((float)rand() / (float)RAND_MAX);
}

static uint32_t floatBits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, 4);
  return bits;
}

static float bitsFloat(uint32_t bits) {
  float value;
  memcpy(&value, &bits, 4);
  return value;
}

/* f32 to f16, round to nearest even (NaN: any NaN). */
static uint16_t floatToHalf(float value) {
  uint32_t bits = floatBits(value);
  uint32_t sign = (bits >> 16) & 0x8000u, exponent = (bits >> 23) & 0xFFu;
  uint32_t mantissa = bits & 0x7FFFFFu;
  int e = (int)exponent - 127 + 15;
  uint32_t half, remainder, halfway;
  if (exponent == 0xFF)
    return (uint16_t)(sign | 0x7C00u | (mantissa ? 0x200u : 0));
  if (e >= 31)
    return (uint16_t)(sign | 0x7C00u);
  if (e <= 0) {
    unsigned shift;
    if (e < -10)
      return (uint16_t)sign;
    mantissa |= 0x800000u;
    shift = (unsigned)(14 - e);
    half = mantissa >> shift;
    remainder = mantissa & ((1u << shift) - 1);
    halfway = 1u << (shift - 1);
  } else {
    half = (uint32_t)e << 10 | mantissa >> 13;
    remainder = mantissa & 0x1FFFu;
    halfway = 0x1000u;
  }
  if (remainder > halfway || (remainder == halfway && (half & 1)))
    ++half; /* a carry into the exponent is right, up to infinity */
  return (uint16_t)(sign | half);
}

static float halfToFloat(uint16_t bits) {
  float sign = bits & 0x8000u ? -1.0f : 1.0f;
  int exponent = (bits >> 10) & 0x1F, fraction = bits & 0x3FF;
  if (exponent == 0x1F)
    return fraction ? NAN : sign * INFINITY;
  if (exponent == 0)
    return sign * ldexpf((float)fraction, -24);
  return sign * ldexpf((float)(fraction + 1024), exponent - 25);
}

/* f32 to bf16, round to nearest even. */
static uint16_t floatToBFloat16(float value) {
  uint32_t bits = floatBits(value);
  if (isnan(value))
    return (uint16_t)(bits >> 16 | 0x40u);
  return (uint16_t)((bits + 0x7FFFu + ((bits >> 16) & 1)) >> 16);
}

static float bfloat16ToFloat(uint16_t bits) {
  return bitsFloat((uint32_t)bits << 16);
}

static CUdeviceptr upload(const void *data, size_t bytes) {
  CUdeviceptr pointer;
  CHECK(cu.cuMemAlloc_v2(&pointer, bytes));
  CHECK(cu.cuMemcpyHtoD_v2(pointer, data, bytes));
  return pointer;
}

static CUdeviceptr allocate(size_t bytes) {
  CUdeviceptr pointer;
  CHECK(cu.cuMemAlloc_v2(&pointer, bytes));
  return pointer;
}

static void run(CUmodule module, const char *name, unsigned blocks,
                unsigned threads, void **parameters) {
  CUfunction function;
  CHECK(cu.cuModuleGetFunction(&function, module, name));
  CHECK(cu.cuLaunchKernel(function, blocks, 1, 1, threads, 1, 1, 0, NULL,
                          parameters, NULL));
  CHECK(cu.cuCtxSynchronize());
}

#endif /* FD_UNITTESTS_EMULATOR_DRIVER_API_H */

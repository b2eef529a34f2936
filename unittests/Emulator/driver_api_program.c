/*===- driver_api_program.c - A C program on fdemu's driver API ----------===*
 *
 * What a CUDA application does, in C: dlopen the driver, cuInit,
 * cuDeviceGet, cuCtxCreate_v2, cuModuleLoadDataEx of nvcc's PTX, then for
 * each kernel cuMemAlloc_v2, cuMemcpyHtoD_v2, cuLaunchKernel,
 * cuCtxSynchronize, cuMemcpyDtoH_v2 and a comparison with the same
 * computation in C; last, an out-of-bounds store that must give
 * CUDA_ERROR_ILLEGAL_ADDRESS with a cuGetErrorString naming the kernel.
 *
 *   driver_api_program LIBFDEMU [KERNELS.ptx]
 *
 * Exit status 0 when everything matches, 1 on a mismatch or a failed call,
 * 77 (a skip for ctest) without the PTX (no nvcc at build time).
 *
 *===----------------------------------------------------------------------===*/

#include <dlfcn.h>
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
};

static struct {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice *, int);
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

static void testSaxpy(CUmodule module) {
  enum { n = 1000 };
  static float x[n], y[n], result[n];
  float a = randomFloat(-2, 2);
  int count = n, i;
  CUdeviceptr dx, dy;
  void *parameters[4];
  for (i = 0; i < n; ++i) {
    x[i] = randomFloat(-100, 100);
    y[i] = randomFloat(-100, 100);
  }
  dx = upload(x, sizeof(x));
  dy = upload(y, sizeof(y));
  parameters[0] = &count;
  parameters[1] = &a;
  parameters[2] = &dx;
  parameters[3] = &dy;
  run(module, "saxpy", (n + 127) / 128, 128, parameters);
  CHECK(cu.cuMemcpyDtoH_v2(result, dy, sizeof(result)));
  /* nvcc contracts a * x + y into one fma.rn.f32. */
  for (i = 0; i < n; ++i)
    expect(result[i] == fmaf(a, x[i], y[i]), "saxpy", i);
  CHECK(cu.cuMemFree_v2(dx));
  CHECK(cu.cuMemFree_v2(dy));
}

static void testWarpSum(CUmodule module) {
  enum { n = 128 };
  static float in[n], out[n], lanes[32];
  int i, warp, offset, lane;
  CUdeviceptr din, dout;
  void *parameters[2];
  for (i = 0; i < n; ++i)
    in[i] = randomFloat(-1, 1);
  din = upload(in, sizeof(in));
  dout = allocate(sizeof(out));
  parameters[0] = &din;
  parameters[1] = &dout;
  run(module, "warpSum", 2, 64, parameters);
  CHECK(cu.cuMemcpyDtoH_v2(out, dout, sizeof(out)));
  /* The butterfly in the kernel's order, so the f32 sums match exactly. */
  for (warp = 0; warp < n / 32; ++warp) {
    float next[32];
    memcpy(lanes, in + 32 * warp, sizeof(lanes));
    for (offset = 16; offset > 0; offset /= 2) {
      for (lane = 0; lane < 32; ++lane)
        next[lane] = lanes[lane] + lanes[lane ^ offset];
      memcpy(lanes, next, sizeof(lanes));
    }
    for (lane = 0; lane < 32; ++lane)
      expect(out[32 * warp + lane] == lanes[lane], "warpSum", 32 * warp + lane);
  }
  CHECK(cu.cuMemFree_v2(din));
  CHECK(cu.cuMemFree_v2(dout));
}

static void testBlockSum(CUmodule module) {
  enum { blocks = 3, threads = 256 };
  static int in[blocks * threads], out[blocks];
  int i, b;
  CUdeviceptr din, dout;
  void *parameters[2];
  for (i = 0; i < blocks * threads; ++i)
    in[i] = rand() % 2001 - 1000;
  din = upload(in, sizeof(in));
  dout = allocate(sizeof(out));
  parameters[0] = &din;
  parameters[1] = &dout;
  run(module, "blockSum", blocks, threads, parameters);
  CHECK(cu.cuMemcpyDtoH_v2(out, dout, sizeof(out)));
  for (b = 0; b < blocks; ++b) {
    int sum = 0;
    for (i = 0; i < threads; ++i)
      sum += in[b * threads + i];
    expect(out[b] == sum, "blockSum", b);
  }
  CHECK(cu.cuMemFree_v2(din));
  CHECK(cu.cuMemFree_v2(dout));
}

static void testScale4(CUmodule module) {
  enum { n = 64 * 4 };
  static float in[n], out[n];
  float s = randomFloat(-3, 3);
  int i;
  CUdeviceptr din, dout;
  void *parameters[3];
  for (i = 0; i < n; ++i)
    in[i] = randomFloat(-1000, 1000);
  din = upload(in, sizeof(in));
  dout = allocate(sizeof(out));
  parameters[0] = &din;
  parameters[1] = &dout;
  parameters[2] = &s;
  run(module, "scale4", 2, 32, parameters);
  CHECK(cu.cuMemcpyDtoH_v2(out, dout, sizeof(out)));
  for (i = 0; i < n; ++i)
    expect(out[i] == in[i] * s, "scale4", i);
  CHECK(cu.cuMemFree_v2(din));
  CHECK(cu.cuMemFree_v2(dout));
}

static void testExp2(CUmodule module) {
  enum { n = 256 };
  static float in[n], out[n];
  int i;
  CUdeviceptr din, dout;
  void *parameters[2];
  for (i = 0; i < n; ++i)
    in[i] = randomFloat(-120, 120);
  in[0] = 0;
  in[1] = -INFINITY;
  in[2] = INFINITY;
  din = upload(in, sizeof(in));
  dout = allocate(sizeof(out));
  parameters[0] = &din;
  parameters[1] = &dout;
  run(module, "exp2Kernel", 2, 128, parameters);
  CHECK(cu.cuMemcpyDtoH_v2(out, dout, sizeof(out)));
  /* ex2.approx.f32: within 2 ulp (the PTX ISA's bound); exact at 0/inf. */
  for (i = 0; i < n; ++i) {
    double exact = exp2((double)in[i]);
    if (isinf(exact) || exact == 0 || exact == 1)
      expect(out[i] == (float)exact, "exp2f special value", i);
    else
      expect(fabs(out[i] - exact) <= 2 * ldexp(1.0, ilogb(exact) - 23 > -149
                                                        ? ilogb(exact) - 23
                                                        : -149),
             "exp2f", i);
  }
  CHECK(cu.cuMemFree_v2(din));
  CHECK(cu.cuMemFree_v2(dout));
}

static void testHalfConversions(CUmodule module) {
  enum { n = 512 };
  static float in[n], back[n];
  static uint16_t half[n], bfloat[n];
  int i;
  CUdeviceptr din, dhalf, dbfloat, dback;
  void *parameters[4];
  for (i = 0; i < n; ++i) {
    /* Every magnitude f16 covers, and beyond (overflow, subnormals). */
    in[i] = ldexpf(randomFloat(-1, 1), rand() % 50 - 30);
  }
  in[0] = 65504.0f;
  in[1] = 65520.0f; /* halfway to the next power: rounds to infinity */
  in[2] = 5.9604645e-8f;
  in[3] = 2.9802322e-8f; /* half the smallest subnormal: to zero (even) */
  in[4] = 1.0009765625f + 0.00048828125f; /* halfway between two f16 */
  in[5] = -0.0f;
  din = upload(in, sizeof(in));
  dhalf = allocate(sizeof(half));
  dbfloat = allocate(sizeof(bfloat));
  dback = allocate(sizeof(back));
  parameters[0] = &din;
  parameters[1] = &dhalf;
  parameters[2] = &dbfloat;
  parameters[3] = &dback;
  run(module, "toHalf", 4, 128, parameters);
  CHECK(cu.cuMemcpyDtoH_v2(half, dhalf, sizeof(half)));
  CHECK(cu.cuMemcpyDtoH_v2(bfloat, dbfloat, sizeof(bfloat)));
  CHECK(cu.cuMemcpyDtoH_v2(back, dback, sizeof(back)));
  for (i = 0; i < n; ++i) {
    uint16_t h = floatToHalf(in[i]), b = floatToBFloat16(in[i]);
    float sum = halfToFloat(h) + bfloat16ToFloat(b);
    expect(half[i] == h, "__float2half", i);
    expect(bfloat[i] == b, "__float2bfloat16", i);
    expect(floatBits(back[i]) == floatBits(sum),
           "__half2float + __bfloat162float", i);
  }
  CHECK(cu.cuMemFree_v2(din));
  CHECK(cu.cuMemFree_v2(dhalf));
  CHECK(cu.cuMemFree_v2(dbfloat));
  CHECK(cu.cuMemFree_v2(dback));
}

static void testBFloat16Multiply(CUmodule module) {
  enum { n = 512 };
  static uint16_t a[n], b[n], out[n];
  int i;
  CUdeviceptr da, db, dout;
  void *parameters[3];
  for (i = 0; i < n; ++i) {
    a[i] = floatToBFloat16(ldexpf(randomFloat(-1, 1), rand() % 60 - 30));
    b[i] = floatToBFloat16(ldexpf(randomFloat(-1, 1), rand() % 60 - 30));
  }
  da = upload(a, sizeof(a));
  db = upload(b, sizeof(b));
  dout = allocate(sizeof(out));
  parameters[0] = &da;
  parameters[1] = &db;
  parameters[2] = &dout;
  run(module, "bfloat16Multiply", 2, 128, parameters);
  CHECK(cu.cuMemcpyDtoH_v2(out, dout, sizeof(out)));
  /* The product of two bf16 is exact in f32: one rounding to bf16. */
  for (i = 0; i < n; ++i)
    expect(out[i] ==
               floatToBFloat16(bfloat16ToFloat(a[i]) * bfloat16ToFloat(b[i])),
           "__hmul2 of bf16 pairs", i);
  CHECK(cu.cuMemFree_v2(da));
  CHECK(cu.cuMemFree_v2(db));
  CHECK(cu.cuMemFree_v2(dout));
}

/* The planted bug: the fault shows at cuCtxSynchronize, named. */
static void testOutOfBounds(CUmodule module) {
  int n = 32;
  CUdeviceptr out = allocate(32 * sizeof(int));
  CUfunction function;
  void *parameters[2];
  CUresult result;
  const char *report = NULL;
  parameters[0] = &out;
  parameters[1] = &n;
  CHECK(cu.cuModuleGetFunction(&function, module, "storePastEnd"));
  CHECK(cu.cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, NULL, parameters,
                          NULL));
  result = cu.cuCtxSynchronize();
  expect(result == kIllegalAddress,
         "CUDA_ERROR_ILLEGAL_ADDRESS from the "
         "out-of-bounds store",
         result);
  cu.cuGetErrorString(kIllegalAddress, &report);
  expect(report && strstr(report, "storePastEnd") != NULL,
         "cuGetErrorString naming the kernel", 0);
  expect(report && strstr(report, "st.global") != NULL,
         "cuGetErrorString naming the instruction", 0);
}

static char *readFile(const char *path) {
  FILE *file = fopen(path, "rb");
  long size;
  char *text;
  if (!file) {
    perror(path);
    exit(1);
  }
  fseek(file, 0, SEEK_END);
  size = ftell(file);
  fseek(file, 0, SEEK_SET);
  text = malloc((size_t)size + 1);
  if (!text || fread(text, 1, (size_t)size, file) != (size_t)size) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(1);
  }
  text[size] = '\0';
  fclose(file);
  return text;
}

int main(int argc, char **argv) {
  void *library;
  char *ptx, log[4096] = "";
  int options[2] = {kJitErrorLogBuffer, kJitErrorLogBufferSizeBytes};
  void *values[2];
  CUdevice device;
  CUcontext context;
  CUmodule module;
  unsigned seed = (unsigned)time(NULL);
  if (argc < 2) {
    fprintf(stderr, "usage: %s LIBFDEMU [KERNELS.ptx]\n", argv[0]);
    return 1;
  }
  if (argc < 3 || !*argv[2]) {
    printf("skipped: no PTX (nvcc was not found at build time)\n");
    return 77;
  }
  library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
#define LOAD(name)                                                             \
  *(void **)&cu.name = dlsym(library, #name);                                  \
  if (!cu.name) {                                                              \
    fprintf(stderr, "%s lacks %s\n", argv[1], #name);                          \
    return 1;                                                                  \
  }
  LOAD(cuInit)
  LOAD(cuDeviceGet)
  LOAD(cuCtxCreate_v2)
  LOAD(cuCtxDestroy_v2)
  LOAD(cuModuleLoadDataEx)
  LOAD(cuModuleGetFunction)
  LOAD(cuMemAlloc_v2)
  LOAD(cuMemFree_v2)
  LOAD(cuMemcpyHtoD_v2)
  LOAD(cuMemcpyDtoH_v2)
  LOAD(cuLaunchKernel)
  LOAD(cuCtxSynchronize)
  LOAD(cuGetErrorString)
#undef LOAD
  if (getenv("FD_TEST_SEED"))
    seed = (unsigned)strtoul(getenv("FD_TEST_SEED"), NULL, 10);
  srand(seed);
  printf("random seed %u (FD_TEST_SEED repeats it)\n", seed);

  CHECK(cu.cuInit(0));
  CHECK(cu.cuDeviceGet(&device, 0));
  CHECK(cu.cuCtxCreate_v2(&context, 0, device));
  ptx = readFile(argv[2]);
  values[0] = log;
  values[1] = (void *)(uintptr_t)sizeof(log);
  if (cu.cuModuleLoadDataEx(&module, ptx, 2, options, values) != kSuccess) {
    fprintf(stderr, "nvcc's PTX does not load on fdemu:\n%s\n", log);
    return 1;
  }
  testSaxpy(module);
  testWarpSum(module);
  testBlockSum(module);
  testScale4(module);
  testExp2(module);
  testHalfConversions(module);
  testBFloat16Multiply(module);
  testOutOfBounds(module);
  CHECK(cu.cuCtxDestroy_v2(context));
  free(ptx);
  if (failures) {
    fprintf(stderr, "%d mismatches\n", failures);
    return 1;
  }
  printf("all kernels match their C computations\n");
  return 0;
}

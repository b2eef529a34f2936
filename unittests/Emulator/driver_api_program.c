/*===- driver_api_program.c - A C program on fdemu's driver API ----------===*
 *
 * What a CUDA application does, in C: dlopen the driver, cuInit,
 * cuDeviceGet, cuCtxCreate_v2, cuModuleLoadDataEx of nvcc's PTX, then for
 * each kernel cuMemAlloc_v2, cuMemcpyHtoD_v2, cuLaunchKernel,
 * cuCtxSynchronize, cuMemcpyDtoH_v2 and a comparison with the same
 * computation in C (tensor-core kernels included: ldmatrix, mma.sync and
 * cp.async in inline PTX, so that a run on a GPU checks fdemu's fragment
 * layouts and copy groups against hardware); last, an out-of-bounds store
 * that must give CUDA_ERROR_ILLEGAL_ADDRESS with a cuGetErrorString naming
 * the kernel.
 *
 *   driver_api_program LIBFDEMU [KERNELS.ptx]
 *
 * Exit status 0 when everything matches, 1 on a mismatch or a failed call,
 * 77 (a skip for ctest) without the PTX (no nvcc at build time).
 *
 *===----------------------------------------------------------------------===*/

#include "driver_api.h"

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

/* One element of an mma as an H200 sums it (docs/Emulator.md): c and the
 * products x_i y_i, each cut toward zero to a multiple of 2^(E - 25), E the
 * largest of c's exponent and the products' exponent sums (subnormals at
 * the format's smallest), added exactly, then truncated to f32. */
static float tensorCoreSum(float c, const double *x, const double *y,
                           int bfloat) {
  int i, largest = c != 0 ? ilogb(c) : INT_MIN, smallest = bfloat ? -126 : -14;
  long long units;
  double sum;
  float result;
  for (i = 0; i < 16; ++i)
    if (x[i] != 0 && y[i] != 0) {
      int e = (ilogb(x[i]) > smallest ? ilogb(x[i]) : smallest) +
              (ilogb(y[i]) > smallest ? ilogb(y[i]) : smallest);
      largest = e > largest ? e : largest;
    }
  if (largest == INT_MIN)
    return 0.0f;
  units = (long long)trunc(ldexp(c, 25 - largest));
  for (i = 0; i < 16; ++i)
    units += (long long)trunc(ldexp(x[i] * y[i], 25 - largest));
  sum = ldexp((double)units, largest - 25);
  result = (float)sum;
  return fabs(result) > fabs(sum) ? nextafterf(result, 0) : result;
}

/* D = A B + C on the tensor cores (A 16 x 16, B 16 x 8, f16 or bf16;
 * f32 accumulation): each element within 2^-17 of the sum of its terms'
 * magnitudes of the exact result, far tighter than a misplaced fragment
 * element allows; on compute capability 9 (fdemu's default, the H200) also
 * bit for bit the H200's sum. */
static void testMma(CUmodule module, const char *name, int bfloat, int hopper) {
  static uint16_t a[16 * 16], b[16 * 8];
  static float c[16 * 8], d[16 * 8];
  int i, row, column, k;
  CUdeviceptr da, db, dc, dd;
  void *parameters[4];
  for (i = 0; i < 16 * 16; ++i) {
    float value = randomFloat(-4, 4);
    a[i] = bfloat ? floatToBFloat16(value) : floatToHalf(value);
  }
  for (i = 0; i < 16 * 8; ++i) {
    float value = randomFloat(-4, 4);
    b[i] = bfloat ? floatToBFloat16(value) : floatToHalf(value);
    c[i] = randomFloat(-16, 16);
  }
  da = upload(a, sizeof(a));
  db = upload(b, sizeof(b));
  dc = upload(c, sizeof(c));
  dd = allocate(sizeof(d));
  parameters[0] = &da;
  parameters[1] = &db;
  parameters[2] = &dc;
  parameters[3] = &dd;
  run(module, name, 1, 32, parameters);
  CHECK(cu.cuMemcpyDtoH_v2(d, dd, sizeof(d)));
  for (row = 0; row < 16; ++row)
    for (column = 0; column < 8; ++column) {
      double exact = c[row * 8 + column], magnitude = fabs(exact), x[16], y[16];
      for (k = 0; k < 16; ++k) {
        uint16_t p = a[row * 16 + k], q = b[k * 8 + column];
        x[k] = bfloat ? bfloat16ToFloat(p) : halfToFloat(p);
        y[k] = bfloat ? bfloat16ToFloat(q) : halfToFloat(q);
        exact += x[k] * y[k];
        magnitude += fabs(x[k] * y[k]);
      }
      expect(fabs(d[row * 8 + column] - exact) <= ldexp(magnitude, -17), name,
             row * 8 + column);
      if (hopper)
        expect(floatBits(d[row * 8 + column]) ==
                   floatBits(tensorCoreSum(c[row * 8 + column], x, y, bfloat)),
               "mma rounding as an H200's", row * 8 + column);
    }
  CHECK(cu.cuMemFree_v2(da));
  CHECK(cu.cuMemFree_v2(db));
  CHECK(cu.cuMemFree_v2(dc));
  CHECK(cu.cuMemFree_v2(dd));
}

/* cp.async: two groups, src-size zero fill, an 8-byte .ca copy. */
static void testAsyncCopy(CUmodule module) {
  enum { threads = 32, bytes = 4 * threads * 16 };
  static uint8_t in[bytes], out[bytes];
  int t, i;
  CUdeviceptr din, dout;
  void *parameters[2];
  for (i = 0; i < bytes; ++i)
    in[i] = (uint8_t)rand();
  din = upload(in, sizeof(in));
  dout = allocate(sizeof(out));
  parameters[0] = &din;
  parameters[1] = &dout;
  run(module, "asyncCopy", 1, threads, parameters);
  CHECK(cu.cuMemcpyDtoH_v2(out, dout, sizeof(out)));
  for (t = 0; t < threads; ++t)
    for (i = 0; i < 16; ++i) {
      int at = 16 * t + i;
      expect(out[at] == in[at], "cp.async group 0 after wait_group 1", at);
      at += 16 * threads;
      expect(out[at] == in[at], "cp.async group 1 after wait_group 0", at);
      at += 16 * threads;
      expect(out[at] == (i < t % 17 ? in[at] : 0), "cp.async src-size", at);
      at += 16 * threads;
      expect(out[at] == (i < 8 ? in[at] : 0xff), "cp.async.ca 8 bytes", at);
    }
  CHECK(cu.cuMemFree_v2(din));
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
  int major;
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
  LOAD(cuDeviceGetAttribute)
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
  CHECK(cu.cuDeviceGetAttribute(&major, kComputeCapabilityMajor, device));
  testMma(module, "mmaF16", 0, major == 9);
  testMma(module, "mmaBF16", 1, major == 9);
  testAsyncCopy(module);
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

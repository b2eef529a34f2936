"""libfdemu.so as a plain CUDA driver through ctypes (no flashdecode module):
a hand-written PTX saxpy against numpy, and a kernel fault that is sticky in
its context and named by cuGetErrorString.

Each case runs in a child process (this file with the case's name), so the
driver state it leaves, a faulted context above all, cannot reach other
tests; the child reads its inputs and writes its results as JSON, and the
checks are here.
"""
import ctypes
import json
import os
import subprocess
import sys

import numpy as np
import pytest

SAXPY_PTX = r"""
.version 8.0
.target sm_90
.address_size 64

// y[i] = a * x[i] + y[i] for i < n
.visible .entry saxpy(
    .param .u64 saxpy_x,
    .param .u64 saxpy_y,
    .param .f32 saxpy_a,
    .param .u32 saxpy_n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [saxpy_x];
    ld.param.u64 %rd2, [saxpy_y];
    ld.param.f32 %f1, [saxpy_a];
    ld.param.u32 %r1, [saxpy_n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd3, %rd5;
    add.s64 %rd7, %rd4, %rd5;
    ld.global.f32 %f2, [%rd6];
    ld.global.f32 %f3, [%rd7];
    fma.rn.f32 %f4, %f1, %f2, %f3;
    st.global.f32 [%rd7], %f4;
DONE:
    ret;
}
"""

# Thread i stores p[n + i]: past the end of an n-float allocation.
OUT_OF_BOUNDS_PTX = r"""
.version 8.0
.target sm_90
.address_size 64

.visible .entry store_past_end(
    .param .u64 store_past_end_p,
    .param .u32 store_past_end_n
)
{
    .reg .b32 %r<4>;
    .reg .f32 %f<2>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [store_past_end_p];
    ld.param.u32 %r1, [store_past_end_n];
    mov.u32 %r2, %tid.x;
    add.s32 %r3, %r1, %r2;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r3, 4;
    add.s64 %rd4, %rd2, %rd3;
    mov.f32 %f1, 0f3F800000;
    st.global.f32 [%rd4], %f1;
    ret;
}
"""

CUDA_ERROR_ILLEGAL_ADDRESS = 700


def _library_path():
    build = os.environ.get("FD_BUILD_DIR")
    if not build:
        pytest.skip("FD_BUILD_DIR is not set (ctest sets it to the build "
                    "directory)")
    return os.path.join(build, "lib", "libfdemu.so")


def _run_child(case, request=None):
    """Runs `case` in a fresh interpreter on `request`; returns its JSON
    result and its stderr."""
    path = _library_path()
    assert os.path.exists(path), f"{path} is missing: build target fdemu"
    child = subprocess.run(
        [sys.executable, __file__, case, path], input=json.dumps(request),
        capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, \
        f"child {case} exited {child.returncode}:\n{child.stderr}"
    return json.loads(child.stdout.splitlines()[-1]), child.stderr


# The children: driver calls only, results printed as one JSON line.

def _open_driver(path):
    driver = ctypes.CDLL(path)
    driver.cuDevicePrimaryCtxRetain.argtypes = [
        ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
    driver.cuCtxCreate_v2.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                      ctypes.c_uint, ctypes.c_int]
    driver.cuCtxSetCurrent.argtypes = [ctypes.c_void_p]
    driver.cuCtxDestroy_v2.argtypes = [ctypes.c_void_p]
    driver.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                        ctypes.c_char_p]
    driver.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                           ctypes.c_void_p, ctypes.c_char_p]
    driver.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64),
                                     ctypes.c_size_t]
    driver.cuMemFree_v2.argtypes = [ctypes.c_uint64]
    driver.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p,
                                       ctypes.c_size_t]
    driver.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64,
                                       ctypes.c_size_t]
    driver.cuLaunchKernel.argtypes = [
        ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
        ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
        ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
    driver.cuGetErrorString.argtypes = [ctypes.c_int,
                                        ctypes.POINTER(ctypes.c_char_p)]
    driver.cuFuncGetAttribute.argtypes = [ctypes.POINTER(ctypes.c_int),
                                          ctypes.c_int, ctypes.c_void_p]
    driver.cuOccupancyMaxActiveBlocksPerMultiprocessor.argtypes = [
        ctypes.POINTER(ctypes.c_int), ctypes.c_void_p, ctypes.c_int,
        ctypes.c_size_t]
    return driver


def _check(result, what):
    if result != 0:
        raise RuntimeError(f"{what} returned CUresult {result}")


def _use_primary_context(driver):
    context = ctypes.c_void_p()
    _check(driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), 0),
           "cuDevicePrimaryCtxRetain")
    _check(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")


def _load_kernel(driver, ptx, name):
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    _check(driver.cuModuleLoadData(ctypes.byref(module), ptx.encode()),
           "cuModuleLoadData")
    _check(driver.cuModuleGetFunction(ctypes.byref(function), module,
                                      name.encode()), "cuModuleGetFunction")
    return function


def _arguments(*values):
    """The kernelParams array: one pointer to each argument's storage."""
    array = (ctypes.c_void_p * len(values))(
        *[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in values])
    return array, values  # the values must outlive the launch


def _child_saxpy(path, request):
    x = np.array(request["x"], np.float32)
    y = np.array(request["y"], np.float32)
    a = request["a"]
    driver = _open_driver(path)
    _check(driver.cuInit(0), "cuInit")
    _use_primary_context(driver)
    function = _load_kernel(driver, SAXPY_PTX, "saxpy")
    x_device, y_device = ctypes.c_uint64(), ctypes.c_uint64()
    for pointer, host in ((x_device, x), (y_device, y)):
        _check(driver.cuMemAlloc_v2(ctypes.byref(pointer), host.nbytes),
               "cuMemAlloc_v2")
        _check(driver.cuMemcpyHtoD_v2(pointer, host.ctypes.data, host.nbytes),
               "cuMemcpyHtoD_v2")
    block = 128
    params, keep = _arguments(x_device, y_device, ctypes.c_float(a),
                              ctypes.c_uint32(x.size))
    _check(driver.cuLaunchKernel(function, (x.size + block - 1) // block, 1, 1,
                                 block, 1, 1, 0, None, params, None),
           "cuLaunchKernel")
    _check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
    result = np.empty_like(y)
    _check(driver.cuMemcpyDtoH_v2(result.ctypes.data, y_device, result.nbytes),
           "cuMemcpyDtoH_v2")
    for pointer in (x_device, y_device):
        _check(driver.cuMemFree_v2(pointer), "cuMemFree_v2")
    return {"y": result.tolist()}


def _child_fault(path, request):
    driver = _open_driver(path)
    _check(driver.cuInit(0), "cuInit")
    context = ctypes.c_void_p()
    _check(driver.cuCtxCreate_v2(ctypes.byref(context), 0, 0),
           "cuCtxCreate_v2")
    function = _load_kernel(driver, OUT_OF_BOUNDS_PTX, "store_past_end")
    n = 64
    pointer = ctypes.c_uint64()
    _check(driver.cuMemAlloc_v2(ctypes.byref(pointer), n * 4), "cuMemAlloc_v2")
    params, keep = _arguments(pointer, ctypes.c_uint32(n))
    text = ctypes.c_char_p()
    results = {
        "launch": driver.cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, None,
                                        params, None),
        "synchronize": driver.cuCtxSynchronize(),
        # Sticky: later calls in the context fail the same way.
        "alloc_after": driver.cuMemAlloc_v2(ctypes.byref(ctypes.c_uint64()),
                                            16),
        "error_string_result": driver.cuGetErrorString(
            CUDA_ERROR_ILLEGAL_ADDRESS, ctypes.byref(text)),
    }
    results["error_string"] = text.value.decode() if text.value else None
    results["destroy"] = driver.cuCtxDestroy_v2(context)
    # The fault stays with the destroyed context: the primary one works.
    _use_primary_context(driver)
    results["primary_synchronize"] = driver.cuCtxSynchronize()
    return results


def _child_occupancy(path, request):
    driver = _open_driver(path)
    _check(driver.cuInit(0), "cuInit")
    _use_primary_context(driver)
    function = _load_kernel(driver, SAXPY_PTX, "saxpy")
    registers = ctypes.c_int()
    _check(driver.cuFuncGetAttribute(ctypes.byref(registers), 4, function),
           "cuFuncGetAttribute(NUM_REGS)")
    results = {"registers": registers.value, "blocks": []}
    for block, shared in request["cases"]:
        count = ctypes.c_int(-1)
        status = driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            ctypes.byref(count), function, block, shared)
        results["blocks"].append([status, count.value])
    return results


# The tests

def test_saxpy_matches_numpy():
    rng = np.random.default_rng()
    # Not a multiple of the block: the last block's extra threads must stay
    # in bounds (a stray load or store would fault).
    n = int(rng.integers(2, 8)) * 128 + int(rng.integers(1, 128))
    x = rng.normal(size=n).astype(np.float32)
    y = rng.normal(size=n).astype(np.float32)
    a = np.float32(rng.uniform(0.5, 3.0))
    # float32 values survive JSON exactly (as float64 text).
    results, _ = _run_child("saxpy", {"x": x.tolist(), "y": y.tolist(),
                                      "a": float(a)})
    result = np.array(results["y"], np.float32)
    # fma.rn rounds once: the float64 product-sum rounded to float32.
    expected = (np.float64(a) * x.astype(np.float64) + y).astype(np.float32)
    np.testing.assert_array_equal(result, expected)


def test_occupancy_follows_registers_threads_and_shared_memory():
    # The emulated H200: 32 CTAs, 2048 threads, 64 Ki registers (per warp,
    # in units of 8 per thread) and 228 KiB of shared memory (1 KiB reserved
    # per CTA) per SM.
    cases = [[64, 0], [128, 0], [1024, 0], [256, 100 * 1024], [0, 0]]
    results, _ = _run_child("occupancy", {"cases": cases})
    registers = results["registers"]
    assert 1 <= registers <= 255
    for (block, shared), (status, count) in zip(cases, results["blocks"]):
        if block == 0:
            assert status == 1  # CUDA_ERROR_INVALID_VALUE
            continue
        warps = -(-block // 32)
        per_cta_registers = warps * 32 * (-(-registers // 8) * 8)
        expected = min(32, 2048 // block, 65536 // per_cta_registers,
                       (228 * 1024) // (shared + 1024))
        assert (status, count) == (0, expected), (block, shared, registers)


def test_out_of_bounds_store_is_sticky_and_named():
    results, stderr = _run_child("fault")
    assert results["launch"] == 0  # reported at the next synchronization
    assert results["synchronize"] == CUDA_ERROR_ILLEGAL_ADDRESS
    assert results["alloc_after"] == CUDA_ERROR_ILLEGAL_ADDRESS
    assert results["error_string_result"] == 0
    assert "store_past_end" in results["error_string"], results
    assert results["destroy"] == 0
    assert results["primary_synchronize"] == 0
    assert "store_past_end" in stderr


if __name__ == "__main__":
    case, library = sys.argv[1:]
    run = {"saxpy": _child_saxpy, "fault": _child_fault,
           "occupancy": _child_occupancy}[case]
    print(json.dumps(run(library, json.load(sys.stdin))))

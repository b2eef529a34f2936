"""flashdecode.DeviceArray: round trips for every dtype, the CUDA array
interface, in-place copies and bad input (on fdemu in make test)."""
import os

import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray

pytestmark = pytest.mark.usefixtures("cuda_driver")


# The dtypes given as bit patterns, and the numpy dtype of those.
BIT_PATTERNS = {"bfloat16": np.uint16, "float8_e4m3fn": np.uint8,
                "float8_e5m2": np.uint8}


def random_array(rng, dtype, shape):
    """Fresh values of every dtype; bfloat16 and fp8 as arbitrary 16-bit
    and 8-bit patterns."""
    if dtype in BIT_PATTERNS or dtype == "uint8":
        bits = np.dtype(BIT_PATTERNS.get(dtype, np.uint8))
        return rng.integers(0, 1 << (8 * bits.itemsize), shape, dtype=bits)
    if dtype == "int32":
        return rng.integers(-2**31, 2**31, shape, dtype=np.int32)
    return rng.normal(0.0, 10.0, shape).astype(dtype)


def patterns(dtype):
    """from_numpy's dtype= for `dtype`: named for bit patterns."""
    return dtype if dtype in BIT_PATTERNS else None


DTYPES = ["float32", "float16", "bfloat16", "int32", "uint8",
          "float8_e4m3fn", "float8_e5m2"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7,), (3, 5, 33), (2, 1, 4, 8), (0, 4)])
def test_round_trip_is_bit_exact(dtype, shape):
    rng = np.random.default_rng()
    host = random_array(rng, dtype, shape)
    device = DeviceArray.from_numpy(host, dtype=patterns(dtype))
    assert device.shape == shape and device.dtype == dtype
    assert device.nbytes == host.nbytes
    back = device.numpy()
    assert back.dtype == host.dtype and back.shape == shape
    assert back.tobytes() == host.tobytes()


@pytest.mark.parametrize("dtype", DTYPES)
def test_copy_from_numpy_overwrites_in_place(dtype):
    rng = np.random.default_rng()
    device = DeviceArray.from_numpy(random_array(rng, dtype, (4, 9)),
                                    patterns(dtype))
    address = device.__cuda_array_interface__["data"][0]
    update = random_array(rng, dtype, (4, 9))
    device.copy_from_numpy(update)
    assert device.__cuda_array_interface__["data"][0] == address
    assert device.numpy().tobytes() == update.tobytes()


def test_arrays_are_independent():
    rng = np.random.default_rng()
    first, second = (random_array(rng, "float32", (64,)) for _ in range(2))
    a, b = DeviceArray.from_numpy(first), DeviceArray.from_numpy(second)
    b.copy_from_numpy(first * 2)
    np.testing.assert_array_equal(a.numpy(), first)
    np.testing.assert_array_equal(b.numpy(), first * 2)


def test_non_contiguous_input_is_copied_in_order():
    host = np.random.default_rng().normal(size=(6, 10)).astype(np.float32)
    view = host[::2, 1::3]
    np.testing.assert_array_equal(DeviceArray.from_numpy(view).numpy(), view)


@pytest.mark.parametrize("dtype,typestr", [
    ("float32", "<f4"), ("float16", "<f2"), ("bfloat16", "<V2"),
    ("int32", "<i4"), ("uint8", "|u1"), ("float8_e4m3fn", "|u1"),
    ("float8_e5m2", "|u1")])
def test_cuda_array_interface(dtype, typestr):
    array = DeviceArray.empty((3, 4), dtype)
    interface = array.__cuda_array_interface__
    assert interface["version"] == 3
    assert interface["typestr"] == typestr
    assert interface["shape"] == (3, 4)
    assert interface["strides"] is None
    pointer, read_only = interface["data"]
    assert isinstance(pointer, int) and pointer != 0 and read_only is False


def test_empty_has_shape_and_dtype():
    assert DeviceArray.empty(5, "int32").shape == (5,)
    array = DeviceArray.empty([2, np.int64(3)], "bfloat16")
    assert array.shape == (2, 3) and array.dtype == "bfloat16"
    assert array.numpy().dtype == np.uint16 and array.nbytes == 12
    assert repr(array) == "DeviceArray(shape=(2, 3), dtype='bfloat16')"


@pytest.mark.parametrize("dtype", BIT_PATTERNS)
def test_ml_dtypes_arrays_come_back_as_ml_dtypes(dtype):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    host = np.random.default_rng().normal(size=(5, 3)).astype(
        getattr(ml_dtypes, dtype))
    device = DeviceArray.from_numpy(host)
    assert device.dtype == dtype
    back = device.numpy()
    assert back.dtype == host.dtype and back.tobytes() == host.tobytes()


def test_device_is_the_emulator_under_fdemu():
    if not os.environ.get("FD_CUDA_DRIVER", "").endswith("libfdemu.so"):
        pytest.skip("FD_CUDA_DRIVER is not libfdemu.so")
    assert flashdecode._flashdecode.cuda_device_name() == \
        "fdemu (emulated H200)"
    assert flashdecode._flashdecode.cuda_sm_count() == 132


@pytest.mark.parametrize("call,error,words", [
    (lambda: DeviceArray.from_numpy([1.0, 2.0]), TypeError,
     "a must be a numpy array, got list"),
    (lambda: DeviceArray.from_numpy(np.zeros(3, np.float64)), TypeError,
     "a dtype float64 is not supported"),
    (lambda: DeviceArray.from_numpy(np.zeros(3, np.int64)), TypeError,
     "a dtype int64 is not supported"),
    (lambda: DeviceArray.from_numpy(np.zeros(3, np.int8)), TypeError,
     "a dtype int8 is not supported: expected float32, float16, int32, "
     "uint8, or bfloat16 (fp8) as uint16 (uint8) bit patterns"),
    (lambda: DeviceArray.from_numpy(np.zeros(3, np.float16),
                                    "float8_e4m3fn"), TypeError,
     "a is float16 but dtype='float8_e4m3fn' was given"),
    (lambda: DeviceArray.from_numpy(np.zeros(3, np.uint8), "bfloat16"),
     TypeError, "a is uint8 but dtype='bfloat16' was given"),
    (lambda: DeviceArray.empty((2,), "uint8").copy_from_numpy(
        np.zeros(2, np.int32)), TypeError, "a is int32 but this array is "
     "uint8 (2,)"),
    (lambda: DeviceArray.empty((3,), "int32").copy_from_numpy(
        np.arange(3)), TypeError, "a dtype int64 is not supported: expected "
     "float32, float16, int32, uint8, or bfloat16 (fp8) as uint16 (uint8) "
     "bit patterns; this array is int32 (3,)"),
    (lambda: DeviceArray.empty((2,), "float8_e5m2").copy_from_numpy(
        np.zeros(2, np.float32)), TypeError, "a is float32"),
    (lambda: DeviceArray.from_numpy(np.zeros(3, np.uint16)), TypeError,
     "pass dtype='bfloat16'"),
    (lambda: DeviceArray.from_numpy(np.zeros(3, np.float32), "float64"),
     ValueError, "dtype must be one of"),
    (lambda: DeviceArray.from_numpy(np.zeros(3, np.float32), "bfloat16"),
     TypeError, "a is float32 but dtype='bfloat16'"),
    (lambda: DeviceArray.from_numpy(np.zeros(3, np.float16), "float32"),
     TypeError, "a is float16 but dtype='float32'"),
    (lambda: DeviceArray.empty((2, -1), "float32"), ValueError,
     "shape must not be negative"),
    (lambda: DeviceArray.empty("2x3", "float32"), TypeError,
     "shape must be a tuple of ints"),
    (lambda: DeviceArray.empty((2, 3.0), "float32"), TypeError,
     "shape must be a tuple of ints"),
    (lambda: DeviceArray.empty((2, 3), "f64"), ValueError,
     "dtype must be one of int32, uint8, float16 (f16, half, fp16), "),
    (lambda: DeviceArray.empty((2,), "int32").copy_from_numpy(
        np.zeros(3, np.int32)), ValueError, "a has shape (3,)"),
    (lambda: DeviceArray.empty((2,), "int32").copy_from_numpy(
        np.zeros(2, np.float32)), TypeError, "a is float32 but this array "
     "is int32"),
    (lambda: DeviceArray.empty((2,), "bfloat16").copy_from_numpy(
        np.zeros(2, np.float16)), TypeError, "a is float16"),
    (lambda: DeviceArray.empty((2,), "int32").copy_from_numpy((1, 2)),
     TypeError, "a must be a numpy array, got tuple"),
])
def test_bad_input_names_the_argument(call, error, words):
    with pytest.raises(error) as raised:
        call()
    assert words in str(raised.value)


def test_any_spelling_of_a_dtype():
    """docs/Compiling.md's names: the array keeps Python's spelling."""
    for spelling, expected in (("half", "float16"), ("f32", "float32"),
                               ("bf16", "bfloat16"), ("e4m3", "float8_e4m3fn")):
        assert DeviceArray.empty((3,), spelling).dtype == expected

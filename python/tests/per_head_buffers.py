"""Shared by the tests of the two per-query-head float32 buffers, sinks=
(one logit per query head) and alibi_slopes= (one slope per query head),
test_per_head*.py (per_head_checks.py: the runner): the device helpers of
the *_cuda_emulated tests and the bad-buffer suites, parametrized over the
argument's name. A bad buffer is a ValueError naming the argument, before
anything runs (on the CPU backend) or reaches the device (backend="cuda",
Decoder).

The test files call these with the argument: `words` are formatted with
{name} (the argument) and {what} (its element: "logit" or "slope").
query_lens_checks.py runs its own tables (query_lens=, an int32 [B]
buffer) through the same checks.
"""
import re

import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray

from reference import Inputs, attention, check_with_sinks

WHAT = {"sinks": "logit", "alibi_slopes": "slope",
        "query_lens": "query length"}

# backend="cuda", as test_cuda_emulated.py: the output's largest error
# relative to its largest magnitude (also per row: reference.check_rows),
# 1e-3 on the lse (the GPU's exp2/log2).
TOLERANCE = {"float16": 1e-2, "bfloat16": 1e-2, "float32": 1e-5}
LSE_TOLERANCE = 1e-3


def bf16(dtype):
    return "bfloat16" if dtype == "bfloat16" else None


def to_device(*arrays, dtype=None):
    return [DeviceArray.from_numpy(a, dtype=dtype if a.dtype == np.uint16
                                   else None) for a in arrays]


def check_device(out, lse, expected, expected_lse, dtype, lens, context,
                 query_lens=None):
    """Device out/lse (DeviceArrays) against the float64 reference: overall
    and row by row, rows without keys zeros (with lse = the sink, if any;
    with query_lens, padding rows zeros with lse -inf)."""
    assert isinstance(out, DeviceArray) and out.dtype == dtype
    host_lse = None
    if lse is not None:
        assert isinstance(lse, DeviceArray) and lse.dtype == "float32"
        host_lse = lse.numpy()
    check_with_sinks(out.numpy(), host_lse, expected, expected_lse, lens,
                     dtype, TOLERANCE[dtype], LSE_TOLERANCE, context,
                     query_lens=query_lens)


def table_cases(name, table):
    """pytest params (make, words) of `table` for argument `name`; a row's
    optional third entry names the only argument it applies to."""
    return [pytest.param(make, words.format(name=name, what=WHAT[name]),
                         id=f"{index}")
            for index, (make, words, *only) in enumerate(table)
            if not only or only[0] == name]


# backend="cpu": numpy float32 of shape (Hq,), C-contiguous. `words` are
# regular expressions.

class DeviceLike:
    """Looks like a device array (for backend='cpu': the wrong kind)."""
    __cuda_array_interface__ = {"version": 3, "shape": (8,),
                                "typestr": "<f4", "data": (1 << 20, False),
                                "strides": None}


HOST_BAD = [
    (lambda: [0.5] * 8, r"{name} must be a numpy float32 array of shape "
     r"\(8,\) for backend='cpu', got builtins.list"),
    (lambda: DeviceLike(), "{name} must be a numpy float32 array .*got "
     ".*DeviceLike"),
    (lambda: np.float32(1.0), "{name} must be a numpy float32 array .*got "
     "numpy.float32"),
    (lambda: np.zeros(8, np.float64), "{name} must be float32, got float64"),
    (lambda: np.zeros(8, np.float16), "{name} must be float32, got float16"),
    (lambda: np.zeros(8, np.int32), "{name} must be float32, got int32"),
    (lambda: np.zeros(9, np.float32), r"{name} must have shape \(8,\) \(one "
     r"{what} per query head\), got \(9,\)"),
    (lambda: np.zeros(2, np.float32), r"{name} must have shape \(8,\).*got "
     r"\(2,\)"),
    (lambda: np.zeros((1, 8), np.float32), r"{name} must have shape \(8,\)"
     r".*got \(1, 8\)"),
    (lambda: np.zeros((8, 1), np.float32), r"{name} must have shape \(8,\)",
     "sinks"),
    (lambda: np.zeros((), np.float32), r"{name} must have shape \(8,\).*got "
     r"\(\)"),
    (lambda: np.zeros(16, np.float32)[::2], "{name} must be C-contiguous"),
]


def host_cases(name):
    return table_cases(name, HOST_BAD)


def check_bad_host_buffer(name, make, words):
    inputs = Inputs("float32", (2, 8, 64), (2, 16, 2, 64))
    q, k, v = inputs.stored
    with pytest.raises(ValueError, match=words):
        flashdecode.decode_attention(q, k, v, inputs.lengths(16, 3),
                                     **{name: make()})


# backend="cuda": a float32 device buffer of shape (Hq,), contiguous and
# 4-byte aligned. `words` are substrings.

def good_arrays():
    """Valid f16 inputs on the device: q [2, 8, 64], caches [2, 16, 2, 64]."""
    inputs = Inputs("float16", (2, 8, 64), (2, 16, 2, 64))
    return dict(zip(("q", "k_cache", "v_cache", "seq_lens"),
                    to_device(*inputs.stored, inputs.lengths(3, 16))))


class Foreign:
    """A __cuda_array_interface__ over a DeviceArray's memory, with another
    pointer, shape, type or strides."""

    def __init__(self, array, offset=0, shape=None, typestr="<f4",
                 strides=None):
        self._array = array
        self.__cuda_array_interface__ = {
            "version": 3, "shape": shape or array.shape, "typestr": typestr,
            "data": (array._address + offset, False), "strides": strides}


def host_pointer(count=8, dtype="float32"):
    """A __cuda_array_interface__ of `count` `dtype` at a host address the
    driver does not know."""
    host = np.zeros(count, dtype)
    foreign = Foreign(DeviceArray.empty(count, dtype),
                      typestr=host.dtype.str)
    foreign.host = host
    foreign.__cuda_array_interface__["data"] = (host.ctypes.data, False)
    return foreign


DEVICE_BAD = [
    (lambda: np.zeros(8, np.float32), "{name} must be a CUDA tensor for "
     "backend='cuda'"),
    (lambda: [0.0] * 8, "{name} must be a CUDA tensor"),
    (lambda: DeviceArray.empty(8, "float16"),
     "{name} must be float32, got float16"),
    (lambda: DeviceArray.empty(8, "bfloat16"),
     "{name} must be float32, got bfloat16"),
    (lambda: DeviceArray.empty(8, "int32"),
     "{name} must be float32, got int32"),
    (lambda: Foreign(DeviceArray.empty(8, "float32"), typestr="<f8"),
     "{name} dtype is not supported: expected float32"),
    (lambda: DeviceArray.empty(9, "float32"),
     "{name} must have shape (8,) (one {what} per query head), got (9,)"),
    (lambda: DeviceArray.empty((1, 8), "float32"),
     "{name} must have shape (8,) (one {what} per query head), got (1, 8)"),
    (lambda: DeviceArray.empty(2, "float32"), "{name} must have shape (8,)"),
    (lambda: Foreign(DeviceArray.empty(16, "float32"), shape=(8,),
                     strides=(8,)), "{name} must be contiguous"),
    (lambda: Foreign(DeviceArray.empty(9, "float32"), offset=2, shape=(8,)),
     "{name} data pointer"),
    (host_pointer, "{name} (data pointer"),
]


def device_cases(name):
    return table_cases(name, DEVICE_BAD)


def check_bad_device_buffer(name, make, words):
    """decode_attention(backend="cuda") and Decoder both refuse it."""
    arrays = good_arrays()
    with pytest.raises(ValueError) as raised:
        flashdecode.decode_attention(**arrays, backend="cuda",
                                     **{name: make()})
    assert words in str(raised.value)
    out = DeviceArray.empty((2, 8, 64), "float16")
    with pytest.raises(ValueError) as raised:
        flashdecode.Decoder(*arrays.values(), out, **{name: make()})
    assert words.replace("backend='cuda'", "a Decoder") in str(raised.value)


def check_misaligned_device_buffer(name, count=8, dtype="float32"):
    """A buffer of `count` `dtype` 2 bytes into an allocation."""
    arrays = good_arrays()
    buffer = Foreign(DeviceArray.empty(count + 1, dtype), offset=2,
                     shape=(count,), typestr=np.dtype(dtype).str)
    with pytest.raises(ValueError, match=re.escape(name) + " data pointer "
                       "0x[0-9a-f]+ is not 4-byte aligned"):
        flashdecode.decode_attention(**arrays, backend="cuda",
                                     **{name: buffer})


def check_the_device_works_after_bad_buffers(name, values, table=DEVICE_BAD):
    """Rejected calls never reach the device: no sticky error follows; then
    `values` (numpy: 8 per-head values, or 2 per-sequence ones) give the
    reference's attention. `table`: the bad buffers (DEVICE_BAD's form)."""
    arrays = good_arrays()
    for make, *_ in table:
        with pytest.raises(ValueError):
            flashdecode.decode_attention(**arrays, backend="cuda",
                                         **{name: make()})
    out = flashdecode.decode_attention(
        **arrays, backend="cuda", **{name: DeviceArray.from_numpy(values)})
    host = [a.numpy() for a in arrays.values()]
    expected, expected_lse = attention(
        *(a.astype(np.float64) for a in host[:3]), host[3], **{name: values})
    check_device(out, None, expected, expected_lse, "float16", host[3],
                 f"after bad {name}")

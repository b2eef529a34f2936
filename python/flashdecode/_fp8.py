"""FP8 KV caches: the two formats' codecs in numpy, quantize_kv, and the
checks both backends share that turn a call's kv_dtype, caches and
k_scale / v_scale into the kernel's options.

A cache is bytes: uint8 bit patterns with ``kv_dtype="float8_e4m3fn"`` or
``"float8_e5m2"``, or an ``ml_dtypes`` float8_e4m3fn / float8_e5m2 array
(recognized by its dtype name, so ml_dtypes is not needed here): numpy
arrays for backend="cpu", device arrays of those dtypes (DeviceArray,
PyTorch uint8 / float8 tensors, __cuda_array_interface__ "|u1") for
backend="cuda". Element (..., d) of a cache stands for decode(byte) *
scale, with the scale of the tensor ([1]) or of its (token, KV head) (the
cache's shape without D)."""

import numbers

import numpy as np

from ._spellings import accepted, spelled

# kv_dtype -> (the config's name, the largest finite value).
_FORMATS = {"float8_e4m3fn": ("e4m3", 448.0), "float8_e5m2": ("e5m2", 57344.0)}
_GRANULARITIES = ("tensor", "token_head")
# The caches' dtypes (q's) that are not fp8, by name.
_QUERY_DTYPES = frozenset(("float32", "float16", "bfloat16"))


def _decode_table(kv_dtype):
    """float64 [256]: the value of each bit pattern (NaN for the NaNs)."""
    bits = np.arange(256, dtype=np.int64)
    if kv_dtype == "float8_e4m3fn":
        exponent_bits, bias = 4, 7
    else:
        exponent_bits, bias = 5, 15
    mantissa_bits = 7 - exponent_bits
    sign = np.where(bits & 0x80, -1.0, 1.0)
    exponent = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1)
    mantissa = (bits & ((1 << mantissa_bits) - 1)).astype(np.float64)
    fraction = mantissa / (1 << mantissa_bits)
    values = np.where(exponent == 0,
                      fraction * 2.0 ** (1 - bias),
                      (1.0 + fraction) * 2.0 ** (exponent - bias))
    top = (1 << exponent_bits) - 1
    if kv_dtype == "float8_e4m3fn":
        # No infinities; S.1111.111 is NaN.
        values = np.where((exponent == top) & (mantissa == 7), np.nan, values)
    else:
        # IEEE-like: S.11111.00 is infinity, the other top patterns NaN.
        values = np.where(exponent == top,
                          np.where(mantissa == 0, np.inf, np.nan), values)
    return sign * values


_TABLES = {name: _decode_table(name) for name in _FORMATS}


def decode_fp8(bits, kv_dtype):
    """uint8 bit patterns -> their float64 values."""
    return _TABLES[_check_kv_dtype(kv_dtype)][np.asarray(bits, np.uint8)]


def encode_fp8(values, kv_dtype):
    """float values -> uint8 bit patterns, rounded to the nearest value,
    ties to the even pattern (round-to-nearest-even on the fp8 grid,
    subnormals included). Saturating: a value beyond the largest finite one
    (448 for e4m3, 57344 for e5m2; infinities too) becomes that value with
    its sign, not NaN (E4M3FN's overflow) or infinity (E5M2's), and NaN
    becomes the NaN pattern 0x7F (with its sign bit)."""
    kv_dtype = _check_kv_dtype(kv_dtype)
    top = _FORMATS[kv_dtype][1]
    values = np.asarray(values, np.float64)
    table = _TABLES[kv_dtype]
    # The non-negative finite values, ascending with their patterns 0..n-1.
    count = int(np.searchsorted(table[:128], top, side="right"))
    grid = table[:count]
    magnitude = np.minimum(np.abs(values), top)
    magnitude = np.where(np.isnan(magnitude), 0.0, magnitude)
    upper = np.clip(np.searchsorted(grid, magnitude, side="left"), 1,
                    count - 1)
    lower = upper - 1
    # The midpoint of two fp8 values is exact in float64.
    middle = (grid[lower] + grid[upper]) / 2
    code = np.where(magnitude < middle, lower,
                    np.where(magnitude > middle, upper,
                             np.where(lower % 2 == 0, lower, upper)))
    code = np.where(magnitude == 0, 0, code)
    code = np.where(np.isnan(values), 0x7F, code)
    code = code | np.where(np.signbit(values), 0x80, 0)
    return code.astype(np.uint8)


def _check_kv_dtype(kv_dtype):
    """A kv_dtype name (or a numpy / ml_dtypes fp8 dtype) -> its name."""
    name = spelled("kv_dtype", kv_dtype)
    if not isinstance(kv_dtype, str):
        try:
            name = np.dtype(kv_dtype).name
        except TypeError:
            name = None
    if name not in _FORMATS:
        raise ValueError(f"kv_dtype must be one of {accepted('fp8')} (or "
                         f"None for caches of q's dtype), got {kv_dtype!r}")
    return name


def quantize_kv(k, v, dtype, granularity="tensor"):
    """(k_bytes, v_bytes, k_scale, v_scale): k and v (float numpy arrays,
    any layout: NHD, HND or page pools, D last) as fp8 caches for
    decode_attention(kv_dtype=dtype, k_scale=k_scale, v_scale=v_scale).

    dtype: "float8_e4m3fn" or "float8_e5m2". granularity: "tensor" (float32
    scales of shape [1]) or "token_head" (one per (token, KV head): float32
    of the cache's shape without D). A scale is amax / 448 (e4m3) or
    amax / 57344 (e5m2) over what it covers (1 where that is all zeros);
    the bytes are encode_fp8(value / scale) with the float32 scale,
    saturating to the finite range (which only rounding can leave)."""
    dtype = _check_kv_dtype(dtype)
    granularity = spelled("granularity", granularity)
    if granularity not in _GRANULARITIES:
        raise ValueError(f"granularity must be one of {accepted('kv_scale')}"
                         f", got {granularity!r}")
    results = []
    for name, array in (("k", k), ("v", v)):
        if not isinstance(array, np.ndarray) or array.dtype.kind != "f" or \
                array.ndim < 1:
            found = getattr(array, "dtype", type(array).__name__)
            raise ValueError(f"{name} must be a float numpy array (float16, "
                             f"float32 or float64), got {found}")
        values = array.astype(np.float64)
        if not np.isfinite(values).all():
            raise ValueError(f"{name} must be finite to be quantized")
        if granularity == "tensor":
            amax = np.abs(values).max(initial=0.0).reshape(1)
        else:
            amax = np.abs(values).max(axis=-1, initial=0.0)
        scale = np.where(amax > 0, amax / _FORMATS[dtype][1], 1.0)
        scale = np.ascontiguousarray(scale, np.float32)
        divisor = scale[..., None] if granularity == "token_head" else scale
        results.append((encode_fp8(values / divisor.astype(np.float64),
                                   dtype), scale))
    (k_bytes, k_scale), (v_bytes, v_scale) = results
    return k_bytes, v_bytes, k_scale, v_scale


def _cache_format(name, dtype_name, kv_dtype):
    """The fp8 format (a kv_dtype name) of cache ``name`` whose numpy dtype
    is named ``dtype_name``, or None for a cache of q's dtype."""
    if dtype_name in _FORMATS:
        if kv_dtype is not None and kv_dtype != dtype_name:
            raise ValueError(f"{name} is {dtype_name} but kv_dtype="
                             f"{kv_dtype!r} was given")
        return dtype_name
    if dtype_name == "uint8":
        if kv_dtype is None:
            raise ValueError(f"{name} holds bytes (uint8): pass kv_dtype="
                             "'float8_e4m3fn' or 'float8_e5m2' for an fp8 "
                             "cache")
        return kv_dtype
    if kv_dtype is not None:
        raise ValueError(f"kv_dtype={kv_dtype!r} needs fp8 caches (uint8 bit "
                         f"patterns or ml_dtypes fp8 arrays), but {name} is "
                         f"{dtype_name}")
    return None


def shared_value_scale(k_scale, v_scale):
    """The values' scale where they are the key cache's columns (v_cache
    None): k_scale's; a v_scale given is a ValueError."""
    if v_scale is not None:
        raise ValueError("v_scale must be None with v_cache None: the values "
                         "are k_cache's columns, scaled by k_scale")
    return k_scale


def kv_format(k_dtype_name, v_dtype_name, kv_dtype):
    """The caches' fp8 format (a kv_dtype name), or None when they hold q's
    dtype; ValueError naming the argument for a mix."""
    if kv_dtype is None and k_dtype_name in _QUERY_DTYPES and \
            v_dtype_name in _QUERY_DTYPES:
        return None  # the per-call path without fp8
    if kv_dtype is not None:
        kv_dtype = _check_kv_dtype(kv_dtype)
    k_format = _cache_format("k_cache", k_dtype_name, kv_dtype)
    v_format = _cache_format("v_cache", v_dtype_name, kv_dtype)
    if k_format != v_format:
        raise ValueError(f"k_cache and v_cache must be the same fp8 format "
                         f"(or neither fp8), got {k_format or k_dtype_name} "
                         f"and {v_format or v_dtype_name}")
    return k_format


def is_fp8_dtype_name(dtype_name):
    return dtype_name in _FORMATS or dtype_name.startswith("float8")


def check_query_dtype(dtype_name):
    """q's dtype (named ``dtype_name``) must not be bytes or fp8: fp8 is for
    the caches."""
    if dtype_name == "uint8" or is_fp8_dtype_name(dtype_name):
        raise ValueError(f"q must be float16, bfloat16 or float32, got "
                         f"{dtype_name}: fp8 is for the caches only "
                         "(kv_dtype)")


def config_name(kv_format):
    """The native config's kv_dtype: "" (q's dtype), "e4m3" or "e5m2"."""
    return "" if kv_format is None else _FORMATS[kv_format][0]


def config_options(kv_format, granularity):
    """The native KernelRequest's kv_dtype and kv_scale keywords."""
    return {"kv_dtype": config_name(kv_format), "kv_scale": granularity}


def check_compile_options(kv_dtype, kv_scale):
    """compile()'s kv_dtype (None or a kv_dtype name) and kv_scale (None,
    "tensor" or "token_head") -> config_options()."""
    kv_format = None if kv_dtype is None else _check_kv_dtype(kv_dtype)
    if kv_scale is None:
        return config_options(kv_format, "tensor")
    if kv_format is None:
        raise ValueError("kv_scale is only for fp8 caches (with kv_dtype), "
                         f"got kv_scale={kv_scale!r}")
    kv_scale = spelled("kv_scale", kv_scale)
    if kv_scale not in _GRANULARITIES:
        raise ValueError(f"kv_scale must be one of {accepted('kv_scale')}, "
                         f"got {kv_scale!r}")
    return config_options(kv_format, kv_scale)


def _check_scale(scale, name, scale_shape, as_array):
    """One k_scale / v_scale -> (a float or the backend's array, the
    granularity it has: "tensor" or "token_head"). A Python or numpy float
    is per tensor; anything else goes through ``as_array(scale, name)``,
    which returns the backend's array (with ``shape`` and ``dtype``) or
    raises the backend's ValueError for what is not its kind of array; the
    array must be float32 of shape () or (1,) (per tensor) or
    ``scale_shape`` (per token and KV head)."""
    if isinstance(scale, numbers.Real) and not isinstance(scale, bool):
        with np.errstate(over="ignore"):  # beyond float32: inf, refused
            value = np.array([scale], np.float32)
        if not np.isfinite(value).all():
            raise ValueError(f"{name} must be finite")
        return float(value[0]), "tensor"
    array = as_array(scale, name)
    if str(array.dtype) != "float32":
        raise ValueError(f"{name} must be float32, got {array.dtype}")
    shape = tuple(array.shape)
    if shape in ((), (1,)):
        return array, "tensor"
    if shape == scale_shape:
        return array, "token_head"
    raise ValueError(f"{name} must be a float, shape (1,) (per tensor) "
                     f"or {scale_shape} (per token and KV head: the "
                     f"caches' shape without D), got {shape}")


def check_scales(kv_format, k_scale, v_scale, cache_shape, as_array):
    """The rules both backends share: ([(k_scale, its granularity),
    (v_scale, its granularity)], the kernel's granularity), each scale a
    float or the backend's array as given (see _check_scale). The kernel's
    is "token_head" when either scale is: the backend then broadcasts the
    per-tensor one to the caches' shape without D. Without fp8 ([], "tensor"),
    and a scale given is a ValueError."""
    if kv_format is None:
        for name, scale in (("k_scale", k_scale), ("v_scale", v_scale)):
            if scale is not None:
                raise ValueError(f"{name} is only for fp8 caches (uint8 with "
                                 "kv_dtype, or ml_dtypes fp8 arrays)")
        return [], "tensor"
    scale_shape = tuple(cache_shape[:-1])
    scales = []
    for name, scale in (("k_scale", k_scale), ("v_scale", v_scale)):
        if scale is None:
            raise ValueError(f"{name} is required with an fp8 cache "
                             f"({kv_format}): a float, or float32 (1,) or "
                             f"{scale_shape}")
        scales.append(_check_scale(scale, name, scale_shape, as_array))
    granularity = "token_head" if any(
        kind == "token_head" for _, kind in scales) else "tensor"
    return scales, granularity


def host_scale(scale, name, kind, granularity, scale_shape):
    """A checked scale (check_scales: a float or a numpy array of its
    ``kind``) as the float32 C-contiguous numpy array the kernel reads: [1]
    with the tensor granularity, else ``scale_shape`` (a per-tensor scale
    broadcast). Its values must be finite."""
    array = np.array([scale], np.float32) if isinstance(scale, float) \
        else np.ascontiguousarray(scale).reshape(-1 if kind == "tensor"
                                                 else scale_shape)
    if not np.isfinite(array).all():
        raise ValueError(f"{name} must be finite")
    if kind == "tensor" and granularity == "token_head":
        array = np.full(scale_shape, array[0], np.float32)
    return array

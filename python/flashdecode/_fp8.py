"""FP8 KV caches (backend="cpu"): the two formats' codecs in numpy,
quantize_kv, and the checks that turn a call's kv_dtype, caches and
k_scale / v_scale into the kernel's options.

A cache is bytes: uint8 bit patterns with ``kv_dtype="float8_e4m3fn"`` or
``"float8_e5m2"``, or an ``ml_dtypes`` float8_e4m3fn / float8_e5m2 array
(recognized by its dtype name, so ml_dtypes is not needed here). Element
(..., d) of a cache stands for decode(byte) * scale, with the scale of the
tensor ([1]) or of its (token, KV head) (the cache's shape without D)."""

import numbers

import numpy as np

# kv_dtype -> (the config's name, the largest finite value).
_FORMATS = {"float8_e4m3fn": ("e4m3", 448.0), "float8_e5m2": ("e5m2", 57344.0)}
_GRANULARITIES = ("tensor", "token_head")


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
    name = kv_dtype
    if not isinstance(kv_dtype, str):
        try:
            name = np.dtype(kv_dtype).name
        except TypeError:
            name = None
    if name not in _FORMATS:
        raise ValueError(f"kv_dtype must be one of {sorted(_FORMATS)} (or "
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
    if granularity not in _GRANULARITIES:
        raise ValueError(f"granularity must be one of {list(_GRANULARITIES)}"
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


def kv_format(k_dtype_name, v_dtype_name, kv_dtype):
    """The caches' fp8 format (a kv_dtype name), or None when they hold q's
    dtype; ValueError naming the argument for a mix."""
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


def config_name(kv_format):
    """The native config's kv_dtype: "" (q's dtype), "e4m3" or "e5m2"."""
    return "" if kv_format is None else _FORMATS[kv_format][0]


def _scale_array(scale, name, scale_shape):
    """A k_scale / v_scale -> (float32 C-contiguous array, granularity)."""
    if isinstance(scale, numbers.Real) and not isinstance(scale, bool):
        scale = np.array([scale], np.float32)
    elif not isinstance(scale, np.ndarray):
        raise ValueError(f"{name} must be a float or a float32 numpy array, "
                         f"got {type(scale).__name__}")
    if scale.dtype != np.float32:
        raise ValueError(f"{name} must be float32, got {scale.dtype}")
    if scale.shape in ((), (1,)):
        array, granularity = scale.reshape(1), "tensor"
    elif scale.shape == scale_shape:
        array, granularity = scale, "token_head"
    else:
        raise ValueError(f"{name} must be a float, shape (1,) (per tensor) "
                         f"or {scale_shape} (per token and KV head: the "
                         f"caches' shape without D), got {scale.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} must be finite")
    return np.ascontiguousarray(array), granularity


def check_scales(kv_format, k_scale, v_scale, cache_shape):
    """(k_scale, v_scale, granularity) for the kernel: float32 arrays both
    [1] or both the caches' shape without D (a per-tensor scale beside a
    per-token one is broadcast), or (None, None, "tensor") without fp8."""
    if kv_format is None:
        for name, scale in (("k_scale", k_scale), ("v_scale", v_scale)):
            if scale is not None:
                raise ValueError(f"{name} is only for fp8 caches (uint8 with "
                                 "kv_dtype, or ml_dtypes fp8 arrays)")
        return None, None, "tensor"
    scale_shape = tuple(cache_shape[:-1])
    scales = []
    for name, scale in (("k_scale", k_scale), ("v_scale", v_scale)):
        if scale is None:
            raise ValueError(f"{name} is required with an fp8 cache "
                             f"({kv_format}): a float, or float32 (1,) or "
                             f"{scale_shape}")
        scales.append(_scale_array(scale, name, scale_shape))
    (k_array, k_kind), (v_array, v_kind) = scales
    if k_kind == v_kind:
        return k_array, v_array, k_kind
    if k_kind == "tensor":
        k_array = np.full(scale_shape, k_array[0], np.float32)
    else:
        v_array = np.full(scale_shape, v_array[0], np.float32)
    return k_array, v_array, "token_head"


def check_not_fp8(kv_dtype, k_scale, v_scale):
    """backend="cuda": fp8 caches are not lowered to GPU kernels yet."""
    if kv_dtype is not None or k_scale is not None or v_scale is not None:
        raise NotImplementedError(
            "fp8 caches (kv_dtype, k_scale, v_scale) are CPU-only for now: "
            "use backend='cpu'")

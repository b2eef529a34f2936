"""FP8 KV caches on the CPU backend: the numpy codecs against the formats'
definitions, quantize_kv, decode_attention against the float64 reference
on the dequantized caches, and every bad input."""
import numpy as np
import pytest

import flashdecode
from flashdecode._fp8 import decode_fp8, encode_fp8, kv_format
from reference import (attention, check_against_reference, decode,
                       page_pool, random_inputs)

FORMATS = ("float8_e4m3fn", "float8_e5m2")
# (exponent bits, bias, largest finite value) of each format.
DEFINITION = {"float8_e4m3fn": (4, 7, 448.0), "float8_e5m2": (5, 15, 57344.0)}
TOLERANCE = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}
LSE_TOLERANCE = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 1e-3}


def defined_value(bits, kv_dtype):
    """One pattern's value, straight from the format's definition."""
    exponent_bits, bias, _ = DEFINITION[kv_dtype]
    mantissa_bits = 7 - exponent_bits
    sign = -1.0 if bits & 0x80 else 1.0
    exponent = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1)
    mantissa = bits & ((1 << mantissa_bits) - 1)
    top = (1 << exponent_bits) - 1
    if kv_dtype == "float8_e4m3fn" and exponent == top and mantissa == 7:
        return float("nan")
    if kv_dtype == "float8_e5m2" and exponent == top:
        return sign * float("inf") if mantissa == 0 else float("nan")
    if exponent == 0:
        return sign * mantissa * 2.0 ** (1 - bias - mantissa_bits)
    fraction = 1 + mantissa / 2 ** mantissa_bits
    return sign * fraction * 2.0 ** (exponent - bias)


@pytest.mark.parametrize("kv_dtype", FORMATS)
def test_decoder_matches_the_definition_on_every_pattern(kv_dtype):
    table = decode_fp8(np.arange(256, dtype=np.uint8), kv_dtype)
    expected = np.array([defined_value(bits, kv_dtype) for bits in range(256)])
    np.testing.assert_array_equal(table, expected)
    np.testing.assert_array_equal(np.signbit(table[~np.isnan(table)]),
                                  np.signbit(expected[~np.isnan(expected)]))
    assert np.nanmax(table[np.isfinite(table)]) == DEFINITION[kv_dtype][2]
    # Known anchors: 1.0, the largest value, the smallest subnormal.
    if kv_dtype == "float8_e4m3fn":
        assert table[0x38] == 1.0 and table[0x7E] == 448.0
        assert table[0x01] == 2.0 ** -9 and np.isnan(table[0x7F])
    else:
        assert table[0x3C] == 1.0 and table[0x7B] == 57344.0
        assert table[0x01] == 2.0 ** -16 and table[0x7C] == np.inf


@pytest.mark.parametrize("kv_dtype", FORMATS)
def test_encoder_rounds_to_nearest_even(kv_dtype):
    patterns = np.arange(256, dtype=np.uint8)
    table = decode_fp8(patterns, kv_dtype)
    finite = np.isfinite(table)
    # Every finite pattern is its own encoding (-0 included).
    np.testing.assert_array_equal(encode_fp8(table[finite], kv_dtype),
                                  patterns[finite])
    # Midpoints of neighbours go to the even pattern; just off them, to
    # the nearer one.
    positive = table[:128][np.isfinite(table[:128])]
    lower, upper = positive[:-1], positive[1:]
    middle = (lower + upper) / 2
    codes = np.arange(len(lower))
    even = np.where(codes % 2 == 0, codes, codes + 1)
    np.testing.assert_array_equal(encode_fp8(middle, kv_dtype), even)
    np.testing.assert_array_equal(encode_fp8(-middle, kv_dtype), even | 0x80)
    step = (upper - lower) / 4
    np.testing.assert_array_equal(encode_fp8(middle - step, kv_dtype), codes)
    np.testing.assert_array_equal(encode_fp8(middle + step, kv_dtype),
                                  codes + 1)
    # Against a brute-force nearest search on random values.
    values = np.random.default_rng().normal(0, 1, 2000) * \
        DEFINITION[kv_dtype][2] / 8
    nearest = np.abs(np.abs(values)[:, None] - positive).argmin(axis=1)
    ours = encode_fp8(values, kv_dtype)
    np.testing.assert_array_equal(ours & 0x7F, nearest)
    np.testing.assert_array_equal(ours >> 7, values < 0)
    # Saturating beyond the finite range; NaN stays NaN.
    top = DEFINITION[kv_dtype][2]
    big = encode_fp8([top * 2, -np.inf, np.nan], kv_dtype)
    assert decode_fp8(big[:2], kv_dtype).tolist() == [top, -top]
    assert np.isnan(decode_fp8(big[2:], kv_dtype)).all()


def dequantized(bits, scale, kv_dtype):
    values = decode_fp8(bits, kv_dtype)
    return values * (scale.astype(np.float64)[..., None] if scale.size > 1
                     else float(scale[0]))


@pytest.mark.parametrize("granularity", ["tensor", "token_head"])
@pytest.mark.parametrize("kv_dtype", FORMATS)
def test_quantize_kv_round_trip(kv_dtype, granularity):
    rng = np.random.default_rng()
    k = rng.normal(0, 1, (2, 40, 3, 64)).astype(np.float32)
    v = rng.normal(0, 3, (2, 40, 3, 64)).astype(np.float16)
    k[0, 5, 1] = 0  # an all-zero row keeps a usable scale
    k_bytes, v_bytes, k_scale, v_scale = flashdecode.quantize_kv(
        k, v, kv_dtype, granularity)
    scale_shape = (1,) if granularity == "tensor" else (2, 40, 3)
    for bits, scale, original in ((k_bytes, k_scale, k),
                                  (v_bytes, v_scale, v)):
        assert bits.dtype == np.uint8 and bits.shape == original.shape
        assert scale.dtype == np.float32 and scale.shape == scale_shape
        assert (scale > 0).all()
        back = dequantized(bits, scale, kv_dtype)
        assert np.isfinite(back).all()
        # Half an ulp at 3 (e4m3) or 2 (e5m2) mantissa bits, relative to
        # the row's largest value (subnormals included).
        bound = 2.0 ** -4 if kv_dtype == "float8_e4m3fn" else 2.0 ** -3
        amax = np.abs(original).max(axis=-1, keepdims=True) \
            if granularity == "token_head" else np.abs(original).max()
        error = np.abs(back - original.astype(np.float64))
        assert (error <= bound * np.abs(original)
                + amax * 2.0 ** -9 + 1e-30).all()
    assert (k_bytes[0, 5, 1] & 0x7F == 0).all()


def fp8_case(rng, dtype, kv_dtype, granularity, layout, heads, lengths,
             max_len, query_len=None, splits=(None, 3), paged=0):
    """decode_attention on quantized caches against the reference on the
    caches they stand for, for each split count."""
    num_q, num_kv = heads
    batch = len(lengths)
    q_shape = (batch, num_q, 64) if query_len is None else \
        (batch, query_len, num_q, 64)
    cache_shape = (batch, max_len, num_kv, 64) if layout == "NHD" else \
        (batch, num_kv, max_len, 64)
    (q, k, v), (qx, _, _) = random_inputs(rng, dtype, q_shape, cache_shape)
    k, v = (decode(array, dtype) for array in (k, v))
    lens = np.array(lengths, np.int32)
    table = None
    if paged:
        k, v, table = page_pool(rng, k, v, paged, layout)
    k_bytes, v_bytes, k_scale, v_scale = flashdecode.quantize_kv(
        k, v, kv_dtype, granularity)
    kx = dequantized(k_bytes, k_scale, kv_dtype)
    vx = dequantized(v_bytes, v_scale, kv_dtype)
    if paged:
        kx, vx = (gather(pool, table, layout) for pool in (kx, vx))
    expected, expected_lse = attention(qx, kx, vx, lens, layout)
    for num_splits in splits:
        out, lse = flashdecode.decode_attention(
            q, k_bytes, v_bytes, lens, kv_layout=layout, return_lse=True,
            num_splits=num_splits, block_table=table, kv_dtype=kv_dtype,
            k_scale=k_scale, v_scale=v_scale,
            dtype=dtype if dtype == "bfloat16" else None)
        assert out.shape == q.shape and out.dtype == q.dtype
        check_against_reference(
            out, lse, expected, expected_lse, dtype, TOLERANCE[dtype],
            LSE_TOLERANCE[dtype],
            f"{dtype} {kv_dtype} {granularity} {layout} splits={num_splits}")


def gather(pool, table, layout):
    """A page pool back to dense caches through the block table."""
    if layout == "HND":
        pool = pool.transpose(0, 2, 1, 3)
    dense = pool[table].reshape((table.shape[0], -1) + pool.shape[2:])
    return dense if layout == "NHD" else dense.transpose(0, 2, 1, 3)


@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("granularity", ["tensor", "token_head"])
@pytest.mark.parametrize("kv_dtype", FORMATS)
def test_matches_reference_on_dequantized_caches(kv_dtype, granularity,
                                                 layout):
    rng = np.random.default_rng()
    fp8_case(rng, "float32", kv_dtype, granularity, layout, (8, 2),
             [0, 1, 37, 90], 90)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_queries_and_mqa(dtype):
    rng = np.random.default_rng()
    fp8_case(rng, dtype, "float8_e4m3fn", "token_head", "NHD", (4, 1),
             [5, 64], 64, splits=(2,))


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_paged_caches(layout):
    rng = np.random.default_rng()
    fp8_case(rng, "float32", "float8_e5m2", "token_head", layout, (8, 2),
             [3, 70], 70, splits=(1, 4), paged=16)


def test_query_tokens():
    rng = np.random.default_rng()
    fp8_case(rng, "float32", "float8_e4m3fn", "tensor", "NHD", (8, 2),
             [1, 2, 50], 50, query_len=3, splits=(1, 5))


def test_scales_as_floats_and_mixed_granularity():
    rng = np.random.default_rng()
    k = rng.normal(0, 1, (1, 20, 2, 64))
    v = rng.normal(0, 1, (1, 20, 2, 64))
    q = rng.normal(0, 1, (1, 4, 64)).astype(np.float32)
    lens = np.array([20], np.int32)
    kb, _, ks, _ = flashdecode.quantize_kv(k, v, "float8_e4m3fn")
    _, vb, _, vs = flashdecode.quantize_kv(k, v, "float8_e4m3fn",
                                           "token_head")
    expected, _ = attention(q.astype(np.float64),
                            dequantized(kb, ks, "float8_e4m3fn"),
                            dequantized(vb, vs, "float8_e4m3fn"), lens)
    for k_scale in (float(ks[0]), ks, ks.reshape(())):
        out = flashdecode.decode_attention(
            q, kb, vb, lens, kv_dtype="float8_e4m3fn", k_scale=k_scale,
            v_scale=vs)
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_ml_dtypes_arrays():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng()
    k = rng.normal(0, 1, (1, 20, 2, 64))
    q = rng.normal(0, 1, (1, 4, 64)).astype(np.float32)
    lens = np.array([20], np.int32)
    kb, vb, ks, vs = flashdecode.quantize_kv(k, k, "float8_e5m2")
    typed = [bits.view(ml_dtypes.float8_e5m2) for bits in (kb, vb)]
    out = flashdecode.decode_attention(q, *typed, lens, k_scale=ks,
                                       v_scale=vs)
    np.testing.assert_array_equal(out, flashdecode.decode_attention(
        q, kb, vb, lens, kv_dtype="float8_e5m2", k_scale=ks, v_scale=vs))
    with pytest.raises(ValueError, match="k_cache and v_cache must be the "
                       "same fp8 format"):
        flashdecode.decode_attention(
            q, typed[0], vb.view(ml_dtypes.float8_e4m3fn), lens, k_scale=ks,
            v_scale=vs)


def fp8_inputs():
    q = np.ones((2, 8, 64), np.float32)
    k = np.full((2, 16, 2, 64), 0x38, np.uint8)
    return q, k, k.copy(), np.full(2, 16, np.int32)


def test_errors():
    q, k, v, lens = fp8_inputs()
    call = flashdecode.decode_attention
    fp8 = {"kv_dtype": "float8_e4m3fn"}
    with pytest.raises(ValueError, match="k_scale is required"):
        call(q, k, v, lens, **fp8, v_scale=1.0)
    with pytest.raises(ValueError, match="v_scale is required"):
        call(q, k, v, lens, **fp8, k_scale=1.0)
    dense = np.ones((2, 16, 2, 64), np.float32)
    with pytest.raises(ValueError, match="k_scale is only for fp8 caches"):
        call(q, dense, dense, lens, k_scale=1.0)
    with pytest.raises(ValueError, match="v_scale is only for fp8 caches"):
        call(q, dense, dense, lens, v_scale=np.ones(1, np.float32))
    with pytest.raises(ValueError, match=r"k_scale must be a float, shape "
                       r"\(1,\) .* or \(2, 16, 2\)"):
        call(q, k, v, lens, **fp8, k_scale=np.ones((2, 16), np.float32),
             v_scale=1.0)
    with pytest.raises(ValueError, match="v_scale must be float32"):
        call(q, k, v, lens, **fp8, k_scale=1.0, v_scale=np.ones(1))
    with pytest.raises(ValueError, match="k_scale must be a float or"):
        call(q, k, v, lens, **fp8, k_scale="1", v_scale=1.0)
    with pytest.raises(ValueError, match="k_scale must be finite"):
        call(q, k, v, lens, **fp8, k_scale=float("nan"), v_scale=1.0)
    with pytest.raises(ValueError, match="kv_dtype must be one of"):
        call(q, k, v, lens, kv_dtype="float8", k_scale=1.0, v_scale=1.0)
    with pytest.raises(ValueError, match="kv_dtype='float8_e5m2' needs fp8 "
                       "caches .* k_cache is float32"):
        call(q, dense, dense, lens, kv_dtype="float8_e5m2")
    with pytest.raises(ValueError, match=r"k_cache holds bytes \(uint8\): "
                       "pass kv_dtype"):
        call(q, k, v, lens, k_scale=1.0, v_scale=1.0)
    with pytest.raises(ValueError, match="q must be float16, bfloat16 or "
                       "float32, got uint8: fp8 is for the caches only"):
        call(np.ones(q.shape, np.uint8), k, v, lens, **fp8, k_scale=1.0,
             v_scale=1.0)
    with pytest.raises(ValueError, match="needs fp8 caches .* v_cache is "
                       "float32"):
        call(q, k, dense, lens, **fp8, k_scale=1.0, v_scale=1.0)
    with pytest.raises(ValueError, match="k_cache must be C-contiguous"):
        call(q, np.asfortranarray(k), v, lens, **fp8, k_scale=1.0,
             v_scale=1.0)
    with pytest.raises(NotImplementedError, match="fp8 caches .* are "
                       "CPU-only for now"):
        call(q, k, v, lens, **fp8, k_scale=1.0, v_scale=1.0, backend="cuda")


def test_mixed_formats_by_dtype_name():
    """k and v of different fp8 formats (ml_dtypes arrays), checked on the
    dtype names so that no ml_dtypes is needed."""
    with pytest.raises(ValueError, match="k_cache and v_cache must be the "
                       "same fp8 format .* float8_e4m3fn and float8_e5m2"):
        kv_format("float8_e4m3fn", "float8_e5m2", None)
    with pytest.raises(ValueError, match="v_cache is float8_e5m2 but "
                       "kv_dtype='float8_e4m3fn'"):
        kv_format("uint8", "float8_e5m2", "float8_e4m3fn")
    assert kv_format("float8_e5m2", "uint8", "float8_e5m2") == "float8_e5m2"
    assert kv_format("float16", "float16", None) is None


def test_quantize_kv_errors():
    k = np.ones((1, 4, 1, 64), np.float32)
    with pytest.raises(ValueError, match="kv_dtype must be one of"):
        flashdecode.quantize_kv(k, k, "int8")
    with pytest.raises(ValueError, match="granularity must be one of"):
        flashdecode.quantize_kv(k, k, "float8_e5m2", "token")
    with pytest.raises(ValueError, match="v must be a float numpy array"):
        flashdecode.quantize_kv(k, k.astype(np.uint16), "float8_e5m2")
    with pytest.raises(ValueError, match="k must be finite"):
        flashdecode.quantize_kv(k * np.inf, k, "float8_e5m2")

"""FP8 KV caches on the CPU backend: the numpy codecs against the formats'
definitions, quantize_kv, compile(kv_dtype=, kv_scale=), decode_attention
against the float64 reference on the dequantized caches, and every bad
input. The runner and the bad-input table are fp8_checks.py's, shared with
test_fp8_cuda_emulated.py (backend="cuda")."""
import numpy as np
import pytest

import flashdecode
from flashdecode._fp8 import decode_fp8, encode_fp8, kv_format
from fp8_checks import (FORMATS, bad_inputs, check_bad_input,
                        check_every_other_feature, dequantized, run_case)
from reference import attention

BACKEND = "cpu"
# (exponent bits, bias, largest finite value) of each format.
DEFINITION = {"float8_e4m3fn": (4, 7, 448.0), "float8_e5m2": (5, 15, 57344.0)}


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


@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("granularity", ["tensor", "token_head"])
@pytest.mark.parametrize("kv_dtype", FORMATS)
def test_matches_reference_on_dequantized_caches(kv_dtype, granularity,
                                                 layout):
    run_case(BACKEND, "float32", kv_dtype, granularity, layout, (8, 2),
             [0, 1, 37, 90], 90)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_queries_and_mqa(dtype):
    run_case(BACKEND, dtype, "float8_e4m3fn", "token_head", "NHD", (4, 1),
             [5, 64], 64, splits=(2,))


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_paged_caches(layout):
    run_case(BACKEND, "float32", "float8_e5m2", "token_head", layout, (8, 2),
             [3, 70], 70, splits=(1, 4), paged=16)


def test_query_tokens():
    run_case(BACKEND, "float32", "float8_e4m3fn", "tensor", "NHD", (8, 2),
             [1, 2, 50], 50, query_len=3, splits=(1, 5))


def test_with_every_other_feature():
    check_every_other_feature(BACKEND)


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


@pytest.mark.parametrize("arguments,words", bad_inputs(BACKEND))
def test_bad_input_names_the_argument(arguments, words):
    """The table both backends share (fp8_checks.BAD_INPUTS)."""
    check_bad_input(BACKEND, arguments, words)


def test_errors_of_host_arrays():
    """What only numpy arrays have: values the host can read, strides."""
    q = np.ones((2, 8, 64), np.float32)
    k = np.full((2, 16, 2, 64), 0x38, np.uint8)
    lens = np.full(2, 16, np.int32)
    call = flashdecode.decode_attention
    fp8 = {"kv_dtype": "float8_e4m3fn"}
    with pytest.raises(ValueError, match="k_scale must be finite"):
        call(q, k, k, lens, **fp8, k_scale=np.array([np.nan], np.float32),
             v_scale=1.0)
    per_token = np.ones((2, 16, 2), np.float32)
    per_token[1, 3, 0] = np.inf
    with pytest.raises(ValueError, match="v_scale must be finite"):
        call(q, k, k, lens, **fp8, k_scale=1.0, v_scale=per_token)
    with pytest.raises(ValueError, match="k_cache must be C-contiguous"):
        call(q, np.asfortranarray(k), k, lens, **fp8, k_scale=1.0,
             v_scale=1.0)
    device_like = type("DeviceLike", (), {"__cuda_array_interface__": {}})
    with pytest.raises(ValueError, match="k_scale must be a float or a "
                       "float32 numpy array, got DeviceLike"):
        call(q, k, k, lens, **fp8, k_scale=device_like(), v_scale=1.0)


def test_compile_for_fp8_caches():
    """compile(kv_dtype=, kv_scale=): the partial kernel takes k_scale and
    v_scale last, the manifest says the format and granularity."""
    plain = flashdecode.compile(64, 8, 2, num_splits=2)
    assert plain.manifest["config"]["kv_dtype"] == "f16"
    assert plain.manifest["config"]["kv_scale"] == "none"
    for kv_dtype, name in (("float8_e4m3fn", "e4m3"),
                           ("float8_e5m2", "e5m2")):
        for kv_scale, manifest_name in ((None, "tensor"),
                                        ("tensor", "tensor"),
                                        ("token_head", "token-head")):
            kernel = flashdecode.compile(64, 8, 2, num_splits=2,
                                         kv_dtype=kv_dtype, kv_scale=kv_scale)
            config = kernel.manifest["config"]
            assert (config["kv_dtype"], config["kv_scale"]) == \
                (name, manifest_name)
            partial = kernel.manifest["kernels"][0]
            assert partial["name"] == "fd_partial_attention"
            assert [p["name"] for p in partial["params"][-2:]] == \
                ["k_scale", "v_scale"]
            assert f"kv_dtype={name}" in repr(kernel)
    with pytest.raises(ValueError, match="kv_dtype must be one of "
                       r"float8_e4m3fn \(e4m3, fp8_e4m3, f8E4M3FN\) or "
                       r"float8_e5m2 \(e5m2, fp8_e5m2, f8E5M2\) \(or None"):
        flashdecode.compile(64, 8, 2, kv_dtype="e4m3fn")
    with pytest.raises(ValueError, match="kv_scale is only for fp8 caches "
                       r"\(with kv_dtype\), got kv_scale='tensor'"):
        flashdecode.compile(64, 8, 2, kv_scale="tensor")
    with pytest.raises(ValueError, match=r"kv_scale must be one of tensor "
                       r"\(per-tensor, per_tensor\) or token_head \(token-head, "
                       r"per-token-head, per_token_head\), got 'token'"):
        flashdecode.compile(64, 8, 2, kv_dtype="float8_e5m2",
                            kv_scale="token")


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

"""Sliding window (window_left) and logit soft-capping (logits_soft_cap) on
the CPU backend, against the float64 reference of reference.py.

Inputs are fresh random numbers on every run; a failure names its seed.
"""
import numpy as np
import pytest

import flashdecode
from reference import (Inputs, attention, check_against_reference, decode,
                       page_pool)

# As test_numerics.py: the output's largest error relative to its largest
# magnitude, and the lse's absolute/relative error.
TOLERANCE = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}
LSE_TOLERANCE = 1e-5
HEADS = {"GQA": (8, 2), "MQA": (4, 1), "MHA": (4, 4)}


def check(out, lse, expected, expected_lse, dtype, context):
    """out (in `dtype` storage) and lse against the float64 reference."""
    check_against_reference(out, lse, expected, expected_lse, dtype,
                            TOLERANCE[dtype], LSE_TOLERANCE, context)


def compute(inputs, lens, *, kv_layout="NHD", num_splits=None, scale=None,
            window=None, cap=None):
    """decode_attention(backend="cpu") and the reference: (out, lse,
    expected, expected_lse, context)."""
    q, k, v = inputs.stored
    dtype = inputs.dtype
    out, lse = flashdecode.decode_attention(
        q, k, v, lens, kv_layout=kv_layout, num_splits=num_splits,
        scale=scale, window_left=window, logits_soft_cap=cap,
        return_lse=True, dtype="bfloat16" if dtype == "bfloat16" else None)
    assert out.shape == q.shape and out.dtype == q.dtype
    expected, expected_lse = attention(
        *inputs.exact, lens, kv_layout=kv_layout, scale=scale,
        window_left=window, logits_soft_cap=cap)
    context = (f"seed={inputs.seed} dtype={dtype} layout={kv_layout} "
               f"lens={lens.tolist()} window={window} cap={cap} "
               f"splits={num_splits} scale={scale}")
    return out, lse, expected, expected_lse, context


def run(inputs, lens, **options):
    """decode_attention(backend="cpu") against the reference."""
    out, lse, expected, expected_lse, context = compute(inputs, lens,
                                                        **options)
    check(out, lse, expected, expected_lse, inputs.dtype, context)
    return out


def cache_shape(layout, batch, max_len, num_kv_heads, head_dim):
    return (batch, max_len, num_kv_heads, head_dim) if layout == "NHD" \
        else (batch, num_kv_heads, max_len, head_dim)


@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("dtype", TOLERANCE)
def test_windows_shorter_equal_and_longer_than_the_length(dtype, layout,
                                                         heads):
    """Windows of 1 key, of a few keys (not a multiple of any chunk), equal
    to one sequence's length, and longer than every length; splits from 1
    to more than the window holds keys (empty splits)."""
    num_q_heads, num_kv_heads = HEADS[heads]
    inputs = Inputs(dtype, (6, num_q_heads, 64),
                    cache_shape(layout, 6, 200, num_kv_heads, 64))
    lens = inputs.lengths(0, 1, 2, 37, 129, 200)
    for window in (1, 7, 37, 200, 500):
        for num_splits in (None, 1, 3, 16):
            run(inputs, lens, kv_layout=layout, num_splits=num_splits,
                window=window)


@pytest.mark.parametrize("query_len", [2, 4, 8])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_windows_with_several_query_tokens(query_len, dtype):
    """Lq > 1: each token has its own window, so windows shorter than Lq
    (token 0's keys are gone by the last token's) and lengths shorter than
    Lq (early tokens see nothing)."""
    inputs = Inputs(dtype, (8, query_len, 8, 64), (8, 120, 2, 64))
    lens = inputs.lengths(0, 1, 2, query_len - 1, query_len, query_len + 1,
                          97, 120)
    for window in sorted({1, 2, max(1, query_len - 1), query_len,
                          query_len + 3, 50, 200}):
        for num_splits in (1, 5, 16):
            run(inputs, lens, num_splits=num_splits, window=window)


@pytest.mark.parametrize("num_splits", [1, 2, 3, 7, 64])
def test_more_splits_than_windowed_keys(num_splits):
    """A 3-key window over long sequences: at most 3 (Lq = 1) keys to split,
    so most splits are empty, and the split boundaries never align with the
    window."""
    inputs = Inputs("float32", (4, 8, 128), (4, 300, 2, 128))
    lens = inputs.lengths(300, 299, 150, 4)
    run(inputs, lens, num_splits=num_splits, window=3)
    inputs = Inputs("float16", (4, 4, 8, 128), (4, 300, 2, 128))
    run(inputs, lens, num_splits=num_splits, window=3)


@pytest.mark.parametrize("dtype", TOLERANCE)
@pytest.mark.parametrize("cap", [1.0, 5.0, 30.0])
def test_soft_cap_of_scores_far_beyond_it(dtype, cap):
    """q scaled up so that |scores| >> cap: the capped scores crowd at +-cap,
    which uncapped attention would never give. The scores are dot products
    of terms ~200 that cancel to ~cap: their float32 rounding, not the
    path, sets the error where a score sits on the cap's slope, so the
    tolerance adds the bound soft_cap_rounding_bound derives."""
    inputs = Inputs(dtype, (3, 8, 64), (3, 150, 2, 64), q_magnitude=200.0)
    lens = inputs.lengths(1, 77, 150)
    q, k, v = inputs.exact
    scores = np.einsum("bhd,bnhd->bhn", q[:, ::4], k) / 8.0
    assert np.abs(scores).max() > 10 * cap  # far beyond the cap
    bound = soft_cap_rounding_bound(q, k, lens, cap)
    for num_splits in (1, 4):
        out, lse, expected, expected_lse, context = compute(
            inputs, lens, num_splits=num_splits, cap=cap)
        # Per row: the output within TOLERANCE of its largest magnitude plus
        # twice the bound times the largest |v| (each probability moves by
        # at most its own score's error and the row's mean one), the lse
        # within LSE_TOLERANCE plus the bound.
        actual = decode(out, dtype)
        assert np.isfinite(actual).all(), context
        rows = np.abs(actual - expected).max(-1)
        allowed = (TOLERANCE[dtype] * np.abs(expected).max()
                   + 2 * bound * np.abs(v).max())
        assert (rows <= allowed).all(), (
            f"row errors {rows[rows > allowed]} over {allowed[rows > allowed]}"
            f": {context}")
        lse_error = np.abs(lse - expected_lse)
        lse_allowed = LSE_TOLERANCE * (1 + np.abs(expected_lse)) + bound
        assert (lse_error <= lse_allowed).all(), (
            f"lse errors {lse_error[lse_error > lse_allowed]} over "
            f"{lse_allowed[lse_error > lse_allowed]}: {context}")


def soft_cap_rounding_bound(q, k, lens, cap):
    """[B, Hq]: how far float32 scores can move each row's capped lse, to
    first order. A dot product of D terms rounds by at most gamma_D =
    D u / (1 - D u) times the sum of the terms' magnitudes (Higham,
    "Accuracy and Stability of Numerical Algorithms", 3.1; u = 2^-24), the
    scale by u |s|; capping multiplies an error by its slope, sech^2(s /
    cap) <= 1, and tanh adds a few ulp of cap (8 u cap here); the lse moves
    by the scores' errors weighted by their probabilities (d lse / d c_n =
    p_n). Scores at the cap have no slope: their errors vanish."""
    unit = 2.0 ** -24
    head_dim = q.shape[-1]
    gamma = head_dim * unit / (1 - head_dim * unit)
    group = q.shape[1] // k.shape[2]
    keys = np.repeat(k, group, axis=2)
    scale = 1 / np.sqrt(head_dim)
    scores = np.einsum("bhd,bnhd->bhn", q, keys) * scale
    magnitudes = np.einsum("bhd,bnhd->bhn", np.abs(q), np.abs(keys)) * scale
    slope = 1 - np.tanh(scores / cap) ** 2
    errors = (slope * (gamma * magnitudes + unit * np.abs(scores))
              + 8 * unit * cap)
    capped = cap * np.tanh(scores / cap)
    bound = np.zeros(q.shape[:2])
    for b, length in enumerate(lens):
        if length:
            row = capped[b, :, :length]
            p = np.exp(row - row.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            bound[b] = (p * errors[b, :, :length]).sum(-1)
    return bound


def test_soft_cap_with_a_scale_and_small_scores():
    """An explicit scale is applied before the cap; with scores well below
    the cap, capping changes them only slightly (still checked exactly)."""
    inputs = Inputs("float32", (2, 4, 64), (2, 90, 4, 64))
    lens = inputs.lengths(90, 13)
    run(inputs, lens, num_splits=3, scale=0.3, cap=2.0)
    run(inputs, lens, num_splits=3, scale=0.05, cap=50.0)


@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("query_len", [1, 4])
@pytest.mark.parametrize("dtype", TOLERANCE)
def test_window_and_soft_cap_together(dtype, query_len, heads):
    num_q_heads, num_kv_heads = HEADS[heads]
    inputs = Inputs(dtype, (5, query_len, num_q_heads, 64),
                    (5, 160, num_kv_heads, 64), q_magnitude=10.0)
    lens = inputs.lengths(0, 1, 3, 101, 160)
    for window, num_splits in ((1, 4), (3, 16), (19, 3), (64, None),
                               (400, 2)):
        run(inputs, lens, num_splits=num_splits, window=window, cap=4.0)


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_paged_caches_with_a_window(page_size, layout):
    """Windows that start and end mid-page, read through a block table."""
    inputs = Inputs("float16", (4, 2, 8, 64),
                    cache_shape(layout, 4, 96, 2, 64))
    q, k, v = inputs.stored
    pool_k, pool_v, table = page_pool(inputs.rng, k, v, page_size, layout)
    lens = inputs.lengths(96, 90, 1, 37)
    expected, expected_lse = attention(
        *inputs.exact, lens, kv_layout=layout, window_left=21,
        logits_soft_cap=3.0)
    for num_splits in (1, 3, 16):
        out, lse = flashdecode.decode_attention(
            q, pool_k, pool_v, lens, kv_layout=layout, block_table=table,
            num_splits=num_splits, window_left=21, logits_soft_cap=3.0,
            return_lse=True)
        check(out, lse, expected, expected_lse, "float16",
              f"seed={inputs.seed} page_size={page_size} layout={layout} "
              f"splits={num_splits}")


def test_automatic_splits_with_a_window():
    """num_splits=None plans for the keys a window leaves (not the whole
    cache), and the result is still the windowed attention."""
    inputs = Inputs("float32", (2, 2, 8, 64), (2, 2048, 2, 64))
    lens = inputs.lengths(2048, 1500)
    for window in (5, 100, 3000):
        run(inputs, lens, window=window)
        run(inputs, lens, window=window, cap=7.5)
    kernel = flashdecode.compile(64, 8, 2, query_len=2, max_len=32768,
                                 window_left=100, logits_soft_cap=7.5)
    assert kernel.num_splits == flashdecode.plan_splits(
        1, 2, 101, num_q_heads=8, head_dim=64, query_len=2)
    assert kernel.manifest["config"]["window_left"] == 100
    assert kernel.manifest["config"]["logits_soft_cap"] == 7.5
    plain = flashdecode.compile(64, 8, 2, max_len=32768)
    assert plain.num_splits == flashdecode.plan_splits(
        1, 2, 32768, num_q_heads=8, head_dim=64)
    assert plain.manifest["config"]["window_left"] == 0
    assert "logits_soft_cap" not in plain.manifest["config"]


def test_off_means_no_window_and_no_cap():
    """window_left=None and logits_soft_cap=None are plain attention, the
    same kernel as leaving them out."""
    inputs = Inputs("float32", (2, 4, 64), (2, 50, 4, 64))
    lens = inputs.lengths(50, 20)
    q, k, v = inputs.stored
    plain = flashdecode.decode_attention(q, k, v, lens, num_splits=3)
    off = flashdecode.decode_attention(q, k, v, lens, num_splits=3,
                                       window_left=None, logits_soft_cap=None)
    assert np.array_equal(plain, off)
    run(inputs, lens, num_splits=3)


BAD_WINDOWS = [(0, ValueError, r"window_left must be >= 1 \(or None for no "
                r"window\), got 0"),
               (-3, ValueError, "window_left must be >= 1 .*got -3"),
               (2.0, ValueError, "window_left must be an int >= 1 .*got 2.0"),
               ("8", ValueError, "window_left must be an int >= 1 .*got '8'"),
               (True, ValueError, "window_left must be an int >= 1")]
BAD_CAPS = [(0, ValueError, r"logits_soft_cap must be a positive finite "
             r"number \(or None for off\), got 0"),
            (-1.5, ValueError, "logits_soft_cap must be .*got -1.5"),
            (float("inf"), ValueError, "logits_soft_cap must be .*got inf"),
            (float("nan"), ValueError, "logits_soft_cap must be .*got nan"),
            ("5", ValueError, "logits_soft_cap must be a positive finite"),
            (True, ValueError, "logits_soft_cap must be a positive finite")]
BAD = [({"window_left": value}, error, words)
       for value, error, words in BAD_WINDOWS] + \
    [({"logits_soft_cap": value}, error, words)
     for value, error, words in BAD_CAPS]


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
@pytest.mark.parametrize("options,error,words", BAD)
def test_bad_values_name_the_argument(options, error, words, backend):
    """Checked before anything else (no GPU needed for backend="cuda")."""
    inputs = Inputs("float32", (2, 4, 64), (2, 16, 4, 64))
    q, k, v = inputs.stored
    with pytest.raises(error, match=words):
        flashdecode.decode_attention(q, k, v, inputs.lengths(16, 3),
                                     backend=backend, **options)


@pytest.mark.parametrize("options,error,words", BAD)
def test_bad_values_of_compile_and_decoder_name_the_argument(options, error,
                                                             words):
    with pytest.raises(error, match=words):
        flashdecode.compile(64, 8, 2, **options)
    with pytest.raises(error, match=words):
        flashdecode.Decoder(None, None, None, None, None, **options)


def test_numpy_integers_and_floats_are_accepted():
    inputs = Inputs("float32", (2, 4, 64), (2, 40, 4, 64))
    lens = inputs.lengths(40, 9)
    q, k, v = inputs.stored
    out, lse = flashdecode.decode_attention(
        q, k, v, lens, num_splits=2, window_left=np.int64(6),
        logits_soft_cap=np.float32(3.0), return_lse=True)
    expected, expected_lse = attention(*inputs.exact, lens, window_left=6,
                                       logits_soft_cap=3.0)
    check(out, lse, expected, expected_lse, "float32", f"seed={inputs.seed}")


def test_the_native_config_takes_them_as_keywords():
    """_flashdecode.KernelRequest: keyword-only, range-checked by
    KernelConfig::validate, in the JIT cache key (its repr)."""
    native = flashdecode._flashdecode
    positional = (64, 8, 2, 1, "f16", "NHD", 0, 4, True, None, False, 1,
                  4096, 132, "sm_90")
    config = native.KernelRequest(*positional, window_left=64,
                                  logits_soft_cap=30.0)
    assert "window_left=64" in repr(config)
    assert "logits_soft_cap=0x1.ep+4" in repr(config)
    assert "window_left=0" in repr(native.KernelRequest(*positional))
    with pytest.raises(ValueError, match="window_left must be >= 0"):
        native.KernelRequest(*positional, window_left=-1)
    with pytest.raises(ValueError, match="logits_soft_cap must be a positive"):
        native.KernelRequest(*positional, logits_soft_cap=0.0)
    with pytest.raises(TypeError):
        native.KernelRequest(*positional, 4, 128, 128, 64)

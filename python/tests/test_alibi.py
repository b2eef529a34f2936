"""ALiBi (alibi_slopes=, BLOOM/MPT) on the CPU backend, against the float64
reference of reference.py: the score of query head h at position p for key
j gains slope_h * (j - p), after the scale and the soft-cap, before the
softmax; the split count changes nothing beyond rounding (each split knows
its keys' absolute positions).

Inputs (and slopes) are fresh random numbers on every run; a failure names
its seed.
"""
import numpy as np
import pytest

import flashdecode
from per_head_buffers import check_bad_host_buffer, host_cases
from reference import (Inputs, attention, bloom_slopes,
                       check_split_counts_agree, check_with_sinks, page_pool,
                       random_alibi_slopes, random_sinks)

# As test_sinks.py: the output's largest error relative to its largest
# magnitude (also per row: reference.check_rows), and the lse's
# absolute/relative error.
TOLERANCE = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}
LSE_TOLERANCE = 1e-5
HEADS = {"GQA": (8, 2), "MQA": (4, 1), "MHA": (4, 4)}
SPLITS = (1, 3, None, 16)


def check(out, lse, expected, expected_lse, dtype, lens, context):
    """out (in `dtype` storage) and lse against the float64 reference:
    overall and row by row, rows without keys zeros."""
    check_with_sinks(out, lse, expected, expected_lse, lens, dtype,
                     TOLERANCE[dtype], LSE_TOLERANCE, context)


def run(inputs, lens, slopes, *, kv_layout="NHD", num_splits=None,
        scale=None, window=None, cap=None, sinks=None, block_table=None,
        caches=None):
    """decode_attention(backend="cpu", alibi_slopes=...) against the
    reference; returns (out, lse)."""
    q, k, v = inputs.stored
    if caches is not None:
        k, v = caches
    dtype = inputs.dtype
    out, lse = flashdecode.decode_attention(
        q, k, v, lens, kv_layout=kv_layout, num_splits=num_splits,
        scale=scale, window_left=window, logits_soft_cap=cap, sinks=sinks,
        alibi_slopes=slopes, block_table=block_table, return_lse=True,
        dtype="bfloat16" if dtype == "bfloat16" else None)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert lse.shape == q.shape[:-1] and lse.dtype == np.float32
    expected, expected_lse = attention(
        *inputs.exact, lens, kv_layout=kv_layout, scale=scale,
        window_left=window, logits_soft_cap=cap, sinks=sinks,
        alibi_slopes=slopes)
    check(out, lse, expected, expected_lse, dtype, lens,
          f"seed={inputs.seed} dtype={dtype} layout={kv_layout} "
          f"q={q.shape} lens={lens.tolist()} slopes={slopes.tolist()} "
          f"window={window} cap={cap} sinks={sinks is not None} "
          f"splits={num_splits} scale={scale} paged={block_table is not None}")
    return out, lse


def run_splits(inputs, lens, slopes, splits=SPLITS, **options):
    """run() for each split count; the results must also agree with each
    other."""
    results = [(num_splits,) + run(inputs, lens, slopes,
                                   num_splits=num_splits, **options)
               for num_splits in splits]
    check_split_counts_agree(results, inputs.dtype, TOLERANCE[inputs.dtype],
                             LSE_TOLERANCE, f"seed={inputs.seed}")


def cache_shape(layout, batch, max_len, num_kv_heads, head_dim):
    return (batch, max_len, num_kv_heads, head_dim) if layout == "NHD" \
        else (batch, num_kv_heads, max_len, head_dim)


@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("dtype", TOLERANCE)
def test_alibi_matches_float64_for_every_split(dtype, heads):
    """Lengths 0 (zeros, lse -inf), 1, 2, odd, not a multiple of any
    chunk, full; splits 1, 3, automatic and 16 (more than the short
    sequences have keys); slopes random with a 0 and a 1.0."""
    num_q_heads, num_kv_heads = HEADS[heads]
    layout = "HND" if heads == "MQA" else "NHD"
    inputs = Inputs(dtype, (6, num_q_heads, 64),
                    cache_shape(layout, 6, 200, num_kv_heads, 64))
    slopes = random_alibi_slopes(inputs.rng, num_q_heads)
    run_splits(inputs, inputs.lengths(0, 1, 2, 37, 129, 200), slopes,
               kv_layout=layout)


@pytest.mark.parametrize("num_q_heads,num_kv_heads", [(8, 2), (16, 16)])
def test_bloom_slopes(num_q_heads, num_kv_heads):
    """BLOOM's geometric slopes 2^(-8i/H), HND caches, head dim 128."""
    inputs = Inputs("float32", (3, num_q_heads, 128),
                    (3, num_kv_heads, 180, 128))
    run_splits(inputs, inputs.lengths(180, 0, 91), bloom_slopes(num_q_heads),
               splits=(1, 3, None), kv_layout="HND")


@pytest.mark.parametrize("query_len", [2, 5])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_several_query_tokens(query_len, dtype):
    """Lq > 1: each token has its own position, so its own distances to
    the keys; tokens before the first key are zeros with lse -inf."""
    inputs = Inputs(dtype, (6, query_len, 8, 64), (6, 120, 2, 64))
    slopes = random_alibi_slopes(inputs.rng, 8)
    lens = inputs.lengths(0, 1, query_len - 1, query_len + 1, 97, 120)
    run_splits(inputs, lens, slopes, splits=(1, 5, None, 16))


@pytest.mark.parametrize("heads", ["GQA", "MHA"])
@pytest.mark.parametrize("query_len", [1, 4])
@pytest.mark.parametrize("dtype", TOLERANCE)
def test_alibi_with_a_window_a_soft_cap_and_sinks(dtype, query_len, heads):
    """The bias comes after the cap (a capped score plus the bias can go
    below -cap), is windowed like the scores, and the sink gains none."""
    num_q_heads, num_kv_heads = HEADS[heads]
    inputs = Inputs(dtype, (5, query_len, num_q_heads, 64),
                    (5, 160, num_kv_heads, 64), q_magnitude=10.0)
    slopes = random_alibi_slopes(inputs.rng, num_q_heads)
    sinks = random_sinks(inputs.rng, num_q_heads)
    lens = inputs.lengths(0, 1, 3, 101, 160)
    for window, cap, with_sinks in ((1, 4.0, False), (19, 4.0, True),
                                    (64, None, True), (None, 2.0, False),
                                    (None, None, True)):
        run_splits(inputs, lens, slopes, splits=(1, 3), window=window,
                   cap=cap, sinks=sinks if with_sinks else None)


def test_alibi_with_a_scale():
    """An explicit scale scales the scores, not the bias."""
    inputs = Inputs("float32", (2, 4, 64), (2, 90, 4, 64))
    slopes = random_alibi_slopes(inputs.rng, 4)
    lens = inputs.lengths(90, 13)
    for scale in (0.05, 2.0):
        run_splits(inputs, lens, slopes, splits=(1, 3), scale=scale)


@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_paged_caches(dtype, layout):
    """A key's distance is its position in the sequence, not in the pool."""
    inputs = Inputs(dtype, (4, 2, 8, 64), cache_shape(layout, 4, 96, 2, 64))
    q, k, v = inputs.stored
    pool_k, pool_v, table = page_pool(inputs.rng, k, v, 16, layout)
    slopes = random_alibi_slopes(inputs.rng, 8)
    lens = inputs.lengths(96, 0, 1, 37)
    run_splits(inputs, lens, slopes, splits=(1, 3, None), kv_layout=layout,
               block_table=table, caches=(pool_k, pool_v))
    run(inputs, lens, slopes, num_splits=3, kv_layout=layout,
        block_table=table, caches=(pool_k, pool_v), window=21, cap=3.0,
        sinks=random_sinks(inputs.rng, 8))


def test_the_bias_favours_the_nearest_keys():
    """Hand-computable: with q = 0 every score is the bias alone, so a
    slope of 1000 puts all the weight on the query's own key (out = v[p],
    lse = 0), a slope of ln 2 weighs key j by 2^(j - p), and slope 0 is
    the mean of the visible values."""
    rng = np.random.default_rng()
    v = rng.normal(size=(2, 40, 1, 64)).astype(np.float32)
    q = np.zeros((2, 3, 3, 64), np.float32)
    lens = np.array([40, 7], np.int32)
    slopes = np.array([1000.0, np.log(2.0), 0.0], np.float32)
    for num_splits in (1, 4):
        out, lse = flashdecode.decode_attention(
            q, v, v, lens, alibi_slopes=slopes, return_lse=True,
            num_splits=num_splits)
        for b, length in enumerate(lens):
            for t in range(3):
                p = length - 3 + t
                context = f"splits={num_splits} b={b} t={t}"
                np.testing.assert_allclose(out[b, t, 0], v[b, p, 0],
                                           rtol=1e-6, err_msg=context)
                assert abs(lse[b, t, 0]) < 1e-6, context
                weights = 2.0 ** (np.arange(p + 1) - p)
                np.testing.assert_allclose(
                    out[b, t, 1], weights @ v[b, :p + 1, 0] / weights.sum(),
                    rtol=1e-5, atol=1e-6, err_msg=context)
                np.testing.assert_allclose(
                    lse[b, t, 1], np.log(weights.sum()), rtol=1e-5,
                    err_msg=context)
                np.testing.assert_allclose(
                    out[b, t, 2], v[b, :p + 1, 0].mean(axis=0), rtol=1e-5,
                    atol=1e-6, err_msg=context)


def test_zero_slopes_are_plain_attention():
    inputs = Inputs("bfloat16", (4, 8, 64), (4, 80, 2, 64))
    q, k, v = inputs.stored
    lens = inputs.lengths(0, 1, 33, 80)
    slopes = np.zeros(8, np.float32)
    for num_splits in (1, 5):
        out, lse = run(inputs, lens, slopes, num_splits=num_splits)
        plain, plain_lse = flashdecode.decode_attention(
            q, k, v, lens, return_lse=True, num_splits=num_splits,
            dtype="bfloat16")
        np.testing.assert_array_equal(out, plain,
                                      err_msg=f"seed={inputs.seed}")
        np.testing.assert_allclose(lse, plain_lse, rtol=1e-6,
                                   err_msg=f"seed={inputs.seed}")


def test_the_kernel_cache_keys_on_alibi():
    """The same shapes with and without ALiBi are two kernels; new slopes
    reuse the kernel and give the new attention."""
    inputs = Inputs("float16", (3, 8, 64), (3, 70, 2, 64))
    q, k, v = inputs.stored
    lens = inputs.lengths(70, 0, 21)
    first = random_alibi_slopes(inputs.rng, 8)
    run(inputs, lens, first, num_splits=3)
    out, lse = flashdecode.decode_attention(q, k, v, lens, num_splits=3,
                                            return_lse=True)
    expected, expected_lse = attention(*inputs.exact, lens)
    check(out, lse, expected, expected_lse, "float16", lens,
          f"seed={inputs.seed} without ALiBi")
    run(inputs, lens, bloom_slopes(8), num_splits=3)
    run(inputs, lens, first, num_splits=3)


def test_without_lse():
    inputs = Inputs("float32", (2, 8, 64), (2, 50, 2, 64))
    q, k, v = inputs.stored
    lens = inputs.lengths(50, 0)
    slopes = random_alibi_slopes(inputs.rng, 8)
    out = flashdecode.decode_attention(q, k, v, lens, alibi_slopes=slopes,
                                       num_splits=2)
    expected, expected_lse = attention(*inputs.exact, lens,
                                       alibi_slopes=slopes)
    check(out, None, expected, expected_lse, "float32", lens,
          f"seed={inputs.seed}")


def test_compile_with_alibi():
    """The partial kernel takes the slopes (its last parameter); the merge
    does not; the manifest says with_alibi; another kernel."""
    kernel = flashdecode.compile(64, 8, 2, num_splits=4, with_alibi=True,
                                 return_lse=True)
    assert kernel.manifest["config"]["with_alibi"] is True
    params = {spec["name"]: [p["name"] for p in spec["params"]]
              for spec in kernel.manifest["kernels"]}
    assert params["fd_partial_attention"][-1] == "alibi_slopes"
    assert "alibi_slopes" not in params["fd_merge"]
    plain = flashdecode.compile(64, 8, 2, num_splits=4, return_lse=True)
    assert plain.manifest["config"]["with_alibi"] is False
    assert "alibi_slopes" not in [p["name"] for spec in
                                  plain.manifest["kernels"]
                                  for p in spec["params"]]
    assert plain.ptx["fd_partial_attention"] != \
        kernel.ptx["fd_partial_attention"]
    both = flashdecode.compile(64, 8, 2, num_splits=4, with_alibi=True,
                               with_sinks=True)
    params = {spec["name"]: [p["name"] for p in spec["params"]]
              for spec in both.manifest["kernels"]}
    assert params["fd_partial_attention"][-1] == "alibi_slopes"
    assert params["fd_merge"][-1] == "sinks"
    assert flashdecode.compile(64, 8, 2, num_splits=4,
                               with_alibi=False).manifest["config"][
        "with_alibi"] is False


@pytest.mark.parametrize("value", [1, 0, "yes", None, np.bool_(True)])
def test_compile_with_alibi_must_be_a_bool(value):
    with pytest.raises(ValueError, match="with_alibi must be True or False"):
        flashdecode.compile(64, 8, 2, with_alibi=value)


def test_the_native_layer_checks_the_slopes():
    """_flashdecode: KernelConfig's keyword-only with_alibi (in the cache
    key, its repr); CPUKernel.run requires alibi_slopes exactly when
    compiled with them, float32 of Hq elements, C-contiguous."""
    native = flashdecode._flashdecode
    positional = (64, 8, 2, 1, "f32", "NHD", 0, 2, True, None, False, 1,
                  4096, 132, "sm_90")
    assert "with_alibi=1" in repr(native.KernelConfig(*positional,
                                                      with_alibi=True))
    assert "with_alibi=0" in repr(native.KernelConfig(*positional))
    with pytest.raises(TypeError):
        native.KernelConfig(*positional, 4, 128, 128, 0, None, False, True)
    inputs = Inputs("float32", (1, 8, 64), (1, 16, 2, 64))
    q, k, v = inputs.stored
    lens = inputs.lengths(9)
    out = np.empty_like(q)
    slopes = random_alibi_slopes(inputs.rng, 8)
    with_alibi = native.CPUKernel(native.KernelConfig(*positional,
                                                      with_alibi=True))
    without = native.CPUKernel(native.KernelConfig(*positional))
    with pytest.raises(ValueError, match="applies ALiBi: alibi_slopes"):
        with_alibi.run(q, k, v, lens, out, None, 1, 16)
    with pytest.raises(ValueError, match="without ALiBi: alibi_slopes "
                       "must be None"):
        without.run(q, k, v, lens, out, None, 1, 16, alibi_slopes=slopes)
    with pytest.raises(ValueError, match="alibi_slopes holds 28 bytes, "
                       "expected 32"):
        with_alibi.run(q, k, v, lens, out, None, 1, 16,
                       alibi_slopes=slopes[:7])
    with pytest.raises(ValueError, match="alibi_slopes must be float32"):
        with_alibi.run(q, k, v, lens, out, None, 1, 16,
                       alibi_slopes=slopes.astype(np.float64))
    with pytest.raises(ValueError, match="alibi_slopes must be C-contiguous"):
        with_alibi.run(q, k, v, lens, out, None, 1, 16,
                       alibi_slopes=np.repeat(slopes, 2)[::2])
    with pytest.raises(ValueError, match="reads attention sinks"):
        native.CPUKernel(native.KernelConfig(
            *positional, with_sinks=True, with_alibi=True)).run(
                q, k, v, lens, out, None, 1, 16, alibi_slopes=slopes)
    with_alibi.run(q, k, v, lens, out, None, 1, 16, alibi_slopes=slopes)
    expected, expected_lse = attention(*inputs.exact, lens,
                                       alibi_slopes=slopes)
    check(out, None, expected, expected_lse, "float32", lens,
          f"seed={inputs.seed}")


# Bad alibi_slopes: per_head_buffers.py's suite, shared with test_sinks.py.

@pytest.mark.parametrize("make,words", host_cases("alibi_slopes"))
def test_bad_slopes_name_the_argument(make, words):
    check_bad_host_buffer("alibi_slopes", make, words)

"""Per-sequence query lengths (query_lens=, speculative decoding) on the CPU
backend, against the float64 reference of reference.py: sequence b has
n = clamp(query_lens[b], 0, Lq) query tokens, its last n, in rows t < n
(token t at position seq_lens[b] - n + t, which the causal rule, the window
and ALiBi use); rows t >= n are padding, zeros with lse -inf (sinks or not).
The runner and checks are query_lens_checks.py's, shared with
test_query_lens_cuda_emulated.py.

Inputs (and query lengths) are fresh random numbers on every run; a failure
names its seed.
"""
import numpy as np
import pytest

import flashdecode
from per_head_buffers import TOLERANCE, check_bad_host_buffer
from query_lens_checks import (attend, check_against_calls_with_n_tokens,
                               host_cases, random_lengths, random_query_lens,
                               run, run_splits)
from reference import (Inputs, attention, check_with_sinks, page_pool,
                       random_alibi_slopes, random_sinks)

BACKEND = "cpu"
HEADS = {"GQA": (8, 2), "MQA": (4, 1), "MHA": (4, 4)}


def cache_shape(layout, batch, max_len, num_kv_heads, head_dim):
    return (batch, max_len, num_kv_heads, head_dim) if layout == "NHD" \
        else (batch, num_kv_heads, max_len, head_dim)


@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("dtype", TOLERANCE)
def test_query_lens_match_float64_for_every_split(dtype, heads):
    """Lq = 4, every n in [0, 4] with two sequences more; lengths 0, 1, 3
    (shorter than some drafts: tokens before the first key), full and
    random; splits 1, 3, automatic and 16 (more than the short sequences
    have keys)."""
    num_q_heads, num_kv_heads = HEADS[heads]
    layout = "HND" if heads == "MQA" else "NHD"
    inputs = Inputs(dtype, (7, 4, num_q_heads, 64),
                    cache_shape(layout, 7, 200, num_kv_heads, 64))
    run_splits(BACKEND, inputs, random_lengths(inputs.rng, 7, 200, 4),
               random_query_lens(inputs.rng, 7, 4), (1, 3, None, 16),
               kv_layout=layout)


@pytest.mark.parametrize("query_len", range(1, 9))
def test_every_query_len(query_len):
    """Lq from 1 to 8 (each dtype in turn), each n in [0, Lq] in one batch,
    GQA with 4 query heads per KV head."""
    dtype = list(TOLERANCE)[query_len % 3]
    batch = query_len + 2
    inputs = Inputs(dtype, (batch, query_len, 8, 64), (batch, 150, 2, 64))
    run_splits(BACKEND, inputs,
               random_lengths(inputs.rng, batch, 150, query_len),
               random_query_lens(inputs.rng, batch, query_len), (1, 3, None))


def test_q_without_a_query_axis():
    """q [B, Hq, D] (Lq = 1): n is 0 (zeros, lse -inf) or 1 (plain
    decoding)."""
    inputs = Inputs("float16", (4, 8, 64), (4, 90, 2, 64))
    lens = inputs.lengths(90, 0, 17, 90)
    for query_lens in ([1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 1, 1]):
        run_splits(BACKEND, inputs, lens, np.array(query_lens, np.int32),
                   (1, 3))


# The scale that gives q of magnitude 10 (D = 64) unit scores.
UNCAPPED_SCALE = 1.0 / (10.0 * 8.0)


@pytest.mark.parametrize("query_len", [3, 8])
@pytest.mark.parametrize("dtype", TOLERANCE)
def test_with_a_window_a_soft_cap_sinks_and_alibi(dtype, query_len):
    """The window and the ALiBi distances follow each token's position
    len - n + t; the padding rows keep lse -inf beside sinks (a real token
    before the first key gets the sink)."""
    inputs = Inputs(dtype, (6, query_len, 8, 64), (6, 160, 2, 64),
                    q_magnitude=10.0)
    lens = random_lengths(inputs.rng, 6, 160, query_len)
    query_lens = random_query_lens(inputs.rng, 6, query_len)
    sinks = random_sinks(inputs.rng, 8)
    slopes = random_alibi_slopes(inputs.rng, 8)
    for window, cap, with_sinks, with_alibi in (
            (1, 4.0, True, False), (5, None, True, True),
            (40, 2.0, False, True), (None, None, True, True)):
        # Uncapped, q of 10 would put scores ~10 apart, where f32
        # arithmetic alone errs by about the 1e-5 tolerance: scale back.
        run_splits(BACKEND, inputs, lens, query_lens, (1, 3),
                   scale=None if cap else UNCAPPED_SCALE,
                   window_left=window, logits_soft_cap=cap,
                   sinks=sinks if with_sinks else None,
                   alibi_slopes=slopes if with_alibi else None)


def test_padding_rows_are_not_rows_without_keys():
    """By hand, Lq = 4 with sinks: n = 4 over 2 keys puts tokens 0 and 1
    before the first key (lse = the sink); n = 2 over 0 keys has two such
    tokens, then two padding rows (lse -inf); n = 0 is all padding."""
    inputs = Inputs("float32", (3, 4, 4, 64), (3, 10, 1, 64))
    sinks = np.array([3.0, -1.0, 0.5, 8.0], np.float32)
    lens = inputs.lengths(2, 0, 10)
    query_lens = np.array([4, 2, 0], np.int32)
    for num_splits in (1, 3):
        out, lse = run(BACKEND, inputs, lens, query_lens, sinks=sinks,
                       num_splits=num_splits)
        for b, t in ((0, 0), (0, 1), (1, 0), (1, 1)):
            np.testing.assert_array_equal(lse[b, t], sinks)
            assert (out[b, t] == 0).all()
        assert np.isfinite(lse[0, 2:]).all() and (out[0, 2:] != 0).any()
        assert np.isneginf(lse[1, 2:]).all() and np.isneginf(lse[2]).all()
        assert (out[1, 2:] == 0).all() and (out[2] == 0).all()


@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_paged_caches(dtype, layout):
    """Positions are the sequence's, not the pool's."""
    inputs = Inputs(dtype, (5, 5, 8, 64), cache_shape(layout, 5, 96, 2, 64))
    q, k, v = inputs.stored
    pool_k, pool_v, table = page_pool(inputs.rng, k, v, 16, layout)
    paged = {"kv_layout": layout, "block_table": table,
             "caches": (pool_k, pool_v)}
    lens = random_lengths(inputs.rng, 5, 96, 5)
    query_lens = random_query_lens(inputs.rng, 5, 5)
    run_splits(BACKEND, inputs, lens, query_lens, (1, 3, None), **paged)
    run(BACKEND, inputs, lens, query_lens, num_splits=3, window_left=21,
        logits_soft_cap=3.0, sinks=random_sinks(inputs.rng, 8),
        alibi_slopes=random_alibi_slopes(inputs.rng, 8), **paged)


@pytest.mark.parametrize("bad", [-1, 4, 100, np.iinfo(np.int32).min,
                                 np.iinfo(np.int32).max])
def test_values_out_of_range_are_errors(bad):
    """Host memory is checked (as seq_lens is): a value outside [0, Lq] is
    a ValueError naming query_lens and the accepted range. (On the GPU the
    kernels clamp: test_query_lens_cuda_emulated.)"""
    inputs = Inputs("float32", (3, 3, 8, 64), (3, 50, 2, 64))
    lens = inputs.lengths(50, 1, 33)
    query_lens = np.array([2, bad, 3], np.int32)
    with pytest.raises(ValueError, match=r"query_lens must be in \[0, 3\]"):
        run(BACKEND, inputs, lens, query_lens, num_splits=1)


@pytest.mark.parametrize("dtype", TOLERANCE)
def test_rows_equal_calls_with_n_query_tokens(dtype):
    """Independent of the reference: sequence b's rows are those of a call
    on q[b:b+1, :n] alone, dense and paged, with a window, sinks and
    ALiBi."""
    inputs = Inputs(dtype, (7, 6, 8, 64), (7, 80, 2, 64))
    lens = random_lengths(inputs.rng, 7, 80, 6)
    query_lens = random_query_lens(inputs.rng, 7, 6)
    assert check_against_calls_with_n_tokens(
        BACKEND, inputs, lens, query_lens, num_splits=3) == 6
    q, k, v = inputs.stored
    pool_k, pool_v, table = page_pool(inputs.rng, k, v, 8, "NHD")
    check_against_calls_with_n_tokens(
        BACKEND, inputs, lens, query_lens, caches=(pool_k, pool_v),
        block_table=table, window_left=9, sinks=random_sinks(inputs.rng, 8),
        alibi_slopes=random_alibi_slopes(inputs.rng, 8))


def test_full_query_lens_are_plain_attention():
    """query_lens all Lq: what the call without them gives."""
    inputs = Inputs("bfloat16", (4, 4, 8, 64), (4, 70, 2, 64))
    lens = inputs.lengths(0, 2, 41, 70)
    full = np.full(4, 4, np.int32)
    for num_splits in (1, 3):
        out, lse = run(BACKEND, inputs, lens, full, num_splits=num_splits)
        plain, plain_lse = attend(BACKEND, inputs, lens, None,
                                  num_splits=num_splits)
        np.testing.assert_array_equal(out, plain,
                                      err_msg=f"seed={inputs.seed}")
        np.testing.assert_allclose(lse, plain_lse, rtol=1e-6,
                                   err_msg=f"seed={inputs.seed}")


def test_the_kernel_cache_keys_on_query_lens():
    """The same shapes with and without query_lens are two kernels; new
    values reuse the kernel and give the new attention."""
    inputs = Inputs("float16", (4, 3, 8, 64), (4, 70, 2, 64))
    lens = inputs.lengths(70, 0, 21, 2)
    first = random_query_lens(inputs.rng, 4, 3)
    run(BACKEND, inputs, lens, first, num_splits=3)
    out, lse = attend(BACKEND, inputs, lens, None, num_splits=3)
    expected, expected_lse = attention(*inputs.exact, lens)
    check_with_sinks(out, lse, expected, expected_lse, lens, "float16",
                     TOLERANCE["float16"], 1e-5,
                     f"seed={inputs.seed} without query_lens")
    run(BACKEND, inputs, lens, random_query_lens(inputs.rng, 4, 3),
        num_splits=3)
    run(BACKEND, inputs, lens, first, num_splits=3)


def test_without_lse():
    inputs = Inputs("float32", (3, 2, 8, 64), (3, 50, 2, 64))
    q, k, v = inputs.stored
    lens = inputs.lengths(50, 0, 7)
    query_lens = np.array([1, 2, 0], np.int32)
    out = flashdecode.decode_attention(q, k, v, lens, query_lens=query_lens,
                                       num_splits=2)
    with_lse, _ = run(BACKEND, inputs, lens, query_lens, num_splits=2)
    np.testing.assert_array_equal(out, with_lse)


def test_compile_with_query_lens():
    """Both kernels take the query lengths (their last parameter, after
    the slopes and the sinks); the manifest says with_query_lens; other
    kernels."""
    kernel = flashdecode.compile(64, 8, 2, num_splits=4, query_len=4,
                                 with_query_lens=True, return_lse=True)
    assert kernel.manifest["config"]["with_query_lens"] is True
    params = {spec["name"]: [p["name"] for p in spec["params"]]
              for spec in kernel.manifest["kernels"]}
    assert params["fd_partial_attention"][-1] == "query_lens"
    assert params["fd_merge"][-1] == "query_lens"
    plain = flashdecode.compile(64, 8, 2, num_splits=4, query_len=4,
                                return_lse=True)
    assert plain.manifest["config"]["with_query_lens"] is False
    assert "query_lens" not in [p["name"] for spec in
                                plain.manifest["kernels"]
                                for p in spec["params"]]
    for name in ("fd_partial_attention", "fd_merge"):
        assert plain.ptx[name] != kernel.ptx[name]
    every = flashdecode.compile(64, 8, 2, num_splits=4, query_len=4,
                                with_query_lens=True, with_alibi=True,
                                with_sinks=True)
    params = {spec["name"]: [p["name"] for p in spec["params"]]
              for spec in every.manifest["kernels"]}
    assert params["fd_partial_attention"][-2:] == ["alibi_slopes",
                                                   "query_lens"]
    assert params["fd_merge"][-2:] == ["sinks", "query_lens"]
    # Lq = 1 is allowed: n is 0 or 1.
    assert flashdecode.compile(64, 8, 2, with_query_lens=True).manifest[
        "config"]["with_query_lens"] is True


@pytest.mark.parametrize("value", [1, 0, "yes", None, np.bool_(True)])
def test_compile_with_query_lens_must_be_a_bool(value):
    with pytest.raises(ValueError,
                       match="with_query_lens must be True or False"):
        flashdecode.compile(64, 8, 2, with_query_lens=value)


def test_the_native_layer_checks_query_lens():
    """_flashdecode: KernelRequest's keyword-only with_query_lens (in the
    cache key, its repr); CPUKernel.run requires query_lens exactly when
    compiled with them, int32 of B elements, C-contiguous."""
    native = flashdecode._flashdecode
    positional = (64, 8, 2, 2, "f32", "NHD", 0, 2, True, None, False, 1,
                  4096, 132, "sm_90")
    assert "with_query_lens=1" in repr(native.KernelRequest(
        *positional, with_query_lens=True))
    assert "with_query_lens=0" in repr(native.KernelRequest(*positional))
    with pytest.raises(TypeError):
        native.KernelRequest(*positional, 4, 128, 128, 0, None, False, False,
                            True)
    inputs = Inputs("float32", (2, 2, 8, 64), (2, 16, 2, 64))
    q, k, v = inputs.stored
    lens = inputs.lengths(9, 16)
    out = np.empty_like(q)
    query_lens = np.array([1, 2], np.int32)
    with_lens = native.CPUKernel(native.KernelRequest(
        *positional, with_query_lens=True))
    without = native.CPUKernel(native.KernelRequest(*positional))
    with pytest.raises(ValueError, match=r"reads per-sequence query "
                       r"lengths: query_lens \(int32 \[batch\]\) required"):
        with_lens.run(q, k, v, lens, out, None, 2, 16)
    with pytest.raises(ValueError, match="without per-sequence query "
                       "lengths: query_lens must be None"):
        without.run(q, k, v, lens, out, None, 2, 16, query_lens=query_lens)
    with pytest.raises(ValueError, match="query_lens holds 4 bytes, "
                       "expected 8"):
        with_lens.run(q, k, v, lens, out, None, 2, 16,
                      query_lens=query_lens[:1])
    with pytest.raises(ValueError, match="query_lens must be int32"):
        with_lens.run(q, k, v, lens, out, None, 2, 16,
                      query_lens=query_lens.astype(np.int64))
    with pytest.raises(ValueError, match="query_lens must be C-contiguous"):
        with_lens.run(q, k, v, lens, out, None, 2, 16,
                      query_lens=np.repeat(query_lens, 2)[::2])
    with_lens.run(q, k, v, lens, out, None, 2, 16, query_lens=query_lens)
    expected, expected_lse = attention(*inputs.exact, lens,
                                       query_lens=query_lens)
    check_with_sinks(out, None, expected, expected_lse, lens, "float32",
                     TOLERANCE["float32"], 1e-5, f"seed={inputs.seed}",
                     query_lens=query_lens)


# Bad query_lens: query_lens_checks.py's table through per_head_buffers.py's
# check (q [2, 8, 64]: B = 2).

@pytest.mark.parametrize("make,words", host_cases())
def test_bad_query_lens_name_the_argument(make, words):
    check_bad_host_buffer("query_lens", make, words)

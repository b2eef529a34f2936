"""Attention sinks (sinks=, gpt-oss) on the CPU backend, against the float64
reference of reference.py: one logit per query head joins every row's
softmax denominator, the lse includes it, a row without keys is zeros with
lse = the sink, and the split count changes nothing beyond rounding.

Inputs (and sinks) are fresh random numbers on every run; a failure names
its seed.
"""
import numpy as np
import pytest

import flashdecode
from per_head_buffers import check_bad_host_buffer, host_cases
from reference import (Inputs, attention, check_split_counts_agree,
                       check_with_sinks, page_pool, random_sinks)

# As test_numerics.py: the output's largest error relative to its largest
# magnitude (here also per row: reference.check_rows), and the lse's
# absolute/relative error.
TOLERANCE = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}
LSE_TOLERANCE = 1e-5
HEADS = {"GQA": (8, 2), "MQA": (4, 1), "MHA": (4, 4)}
SPLITS = (1, 3, None, 16)


def check(out, lse, expected, expected_lse, dtype, lens, context):
    """out (in `dtype` storage) and lse against the float64 reference:
    overall and row by row, rows without keys zeros with lse = the sink."""
    check_with_sinks(out, lse, expected, expected_lse, lens, dtype,
                     TOLERANCE[dtype], LSE_TOLERANCE, context)


def run(inputs, lens, sinks, *, kv_layout="NHD", num_splits=None,
        scale=None, window=None, cap=None, block_table=None, caches=None):
    """decode_attention(backend="cpu", sinks=...) against the reference;
    returns (out, lse)."""
    q, k, v = inputs.stored
    if caches is not None:
        k, v = caches
    dtype = inputs.dtype
    out, lse = flashdecode.decode_attention(
        q, k, v, lens, kv_layout=kv_layout, num_splits=num_splits,
        scale=scale, window_left=window, logits_soft_cap=cap, sinks=sinks,
        block_table=block_table, return_lse=True,
        dtype="bfloat16" if dtype == "bfloat16" else None)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert lse.shape == q.shape[:-1] and lse.dtype == np.float32
    expected, expected_lse = attention(
        *inputs.exact, lens, kv_layout=kv_layout, scale=scale,
        window_left=window, logits_soft_cap=cap, sinks=sinks)
    check(out, lse, expected, expected_lse, dtype, lens,
          f"seed={inputs.seed} dtype={dtype} layout={kv_layout} "
          f"lens={lens.tolist()} sinks={sinks.tolist()} window={window} "
          f"cap={cap} splits={num_splits} scale={scale}")
    return out, lse


def run_splits(inputs, lens, sinks, splits=SPLITS, **options):
    """run() for each split count; the results must also agree with each
    other (the sinks count once, in the merge, whatever the split)."""
    results = [(num_splits,) + run(inputs, lens, sinks,
                                   num_splits=num_splits, **options)
               for num_splits in splits]
    check_split_counts_agree(results, inputs.dtype, TOLERANCE[inputs.dtype],
                             LSE_TOLERANCE, f"seed={inputs.seed}")


def cache_shape(layout, batch, max_len, num_kv_heads, head_dim):
    return (batch, max_len, num_kv_heads, head_dim) if layout == "NHD" \
        else (batch, num_kv_heads, max_len, head_dim)


@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("dtype", TOLERANCE)
def test_sinks_match_float64_for_every_split(dtype, layout, heads):
    """Lengths 0 (zeros, lse = sink), 1, 2, odd, not a multiple of any
    chunk, full; splits 1, 3, automatic and 16 (more than the short
    sequences have keys)."""
    num_q_heads, num_kv_heads = HEADS[heads]
    inputs = Inputs(dtype, (6, num_q_heads, 64),
                    cache_shape(layout, 6, 200, num_kv_heads, 64))
    sinks = random_sinks(inputs.rng, num_q_heads)
    lens = inputs.lengths(0, 1, 2, 37, 129, 200)
    run_splits(inputs, lens, sinks, kv_layout=layout)


@pytest.mark.parametrize("head_dim", [128, 256])
def test_larger_head_dims(head_dim):
    inputs = Inputs("float16", (3, 8, head_dim), (3, 150, 2, head_dim))
    sinks = random_sinks(inputs.rng, 8)
    run_splits(inputs, inputs.lengths(0, 77, 150), sinks, splits=(1, 64))


@pytest.mark.parametrize("query_len", [2, 4, 8])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_several_query_tokens(query_len, dtype):
    """Lq > 1: a token before the first key (lengths shorter than Lq) is
    zeros with lse = its head's sink; the others count the sink once."""
    inputs = Inputs(dtype, (6, query_len, 8, 64), (6, 120, 2, 64))
    sinks = random_sinks(inputs.rng, 8)
    lens = inputs.lengths(0, 1, query_len - 1, query_len + 1, 97, 120)
    run_splits(inputs, lens, sinks, splits=(1, 5, None, 16))
    _, lse = run(inputs, lens, sinks, num_splits=3)
    np.testing.assert_array_equal(lse[0], np.broadcast_to(sinks, lse[0].shape))


@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("query_len", [1, 4])
@pytest.mark.parametrize("dtype", TOLERANCE)
def test_sinks_with_a_window_and_a_soft_cap(dtype, query_len, heads):
    """The sink is neither windowed nor capped: a score capped at 4 never
    reaches a sink of 15, however large q is."""
    num_q_heads, num_kv_heads = HEADS[heads]
    inputs = Inputs(dtype, (5, query_len, num_q_heads, 64),
                    (5, 160, num_kv_heads, 64), q_magnitude=10.0)
    sinks = random_sinks(inputs.rng, num_q_heads)
    lens = inputs.lengths(0, 1, 3, 101, 160)
    for window, cap in ((1, 4.0), (19, 4.0), (64, None), (None, 2.0),
                        (400, 30.0)):
        run_splits(inputs, lens, sinks, window=window, cap=cap)


def test_sinks_with_a_scale():
    """An explicit scale scales the scores, not the sinks."""
    inputs = Inputs("float32", (2, 4, 64), (2, 90, 4, 64))
    sinks = random_sinks(inputs.rng, 4)
    lens = inputs.lengths(90, 13)
    for scale in (0.05, 0.3, 2.0):
        run_splits(inputs, lens, sinks, splits=(1, 3), scale=scale)


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_paged_caches(dtype, layout, page_size):
    inputs = Inputs(dtype, (4, 2, 8, 64), cache_shape(layout, 4, 96, 2, 64))
    q, k, v = inputs.stored
    pool_k, pool_v, table = page_pool(inputs.rng, k, v, page_size, layout)
    sinks = random_sinks(inputs.rng, 8)
    lens = inputs.lengths(96, 0, 1, 37)
    run_splits(inputs, lens, sinks, kv_layout=layout, block_table=table,
               caches=(pool_k, pool_v))
    run_splits(inputs, lens, sinks, splits=(3,), kv_layout=layout,
               block_table=table, caches=(pool_k, pool_v), window=21,
               cap=3.0)


@pytest.mark.parametrize("num_splits", SPLITS)
def test_rows_without_keys_are_zeros_with_the_sink_as_lse(num_splits):
    """Every sequence empty: zeros everywhere and lse = sinks (-inf for a
    -inf sink: no sink and no key is the old empty row)."""
    inputs = Inputs("float32", (3, 2, 8, 64), (3, 40, 2, 64))
    q, k, v = inputs.stored
    sinks = random_sinks(inputs.rng, 8)
    out, lse = flashdecode.decode_attention(
        q, k, v, inputs.lengths(0, 0, 0), sinks=sinks, return_lse=True,
        num_splits=num_splits)
    assert not out.any(), f"seed={inputs.seed}"
    np.testing.assert_allclose(lse, np.broadcast_to(sinks, lse.shape),
                               rtol=1e-7, err_msg=f"seed={inputs.seed}")
    assert np.isneginf(lse[..., np.isneginf(sinks)]).all()


def test_extreme_sinks():
    """A sink of 1e4 takes the whole softmax (out 0 in float, lse = 1e4);
    -1e4 and -inf none of it (plain attention)."""
    inputs = Inputs("float32", (2, 4, 64), (2, 60, 1, 64))
    q, k, v = inputs.stored
    lens = inputs.lengths(60, 7)
    sinks = np.array([1e4, -1e4, -np.inf, 0.5], np.float32)
    plain, plain_lse = flashdecode.decode_attention(
        q, k, v, lens, return_lse=True, num_splits=4)
    for num_splits in (1, 4, 16):
        out, lse = run(inputs, lens, sinks, num_splits=num_splits)
        context = f"seed={inputs.seed} splits={num_splits}"
        assert not out[:, 0].any(), context
        np.testing.assert_array_equal(lse[:, 0], [1e4, 1e4], err_msg=context)
        np.testing.assert_allclose(out[:, 1:3], plain[:, 1:3], rtol=1e-5,
                                   atol=1e-6, err_msg=context)
        np.testing.assert_allclose(lse[:, 1:3], plain_lse[:, 1:3],
                                   rtol=1e-6, err_msg=context)


def test_all_sinks_minus_infinity_is_plain_attention():
    inputs = Inputs("bfloat16", (4, 8, 64), (4, 80, 2, 64))
    q, k, v = inputs.stored
    lens = inputs.lengths(0, 1, 33, 80)
    sinks = np.full(8, -np.inf, np.float32)
    for num_splits in (1, 5):
        out, lse = run(inputs, lens, sinks, num_splits=num_splits)
        plain, plain_lse = flashdecode.decode_attention(
            q, k, v, lens, return_lse=True, num_splits=num_splits,
            dtype="bfloat16")
        np.testing.assert_array_equal(out, plain,
                                      err_msg=f"seed={inputs.seed}")
        np.testing.assert_allclose(lse, plain_lse, rtol=1e-6,
                                   err_msg=f"seed={inputs.seed}")


def test_the_kernel_cache_keys_on_sinks():
    """The same shapes with and without sinks are two kernels; new sink
    values reuse the kernel and give the new attention."""
    inputs = Inputs("float16", (3, 8, 64), (3, 70, 2, 64))
    q, k, v = inputs.stored
    lens = inputs.lengths(70, 0, 21)
    first = random_sinks(inputs.rng, 8)
    run(inputs, lens, first, num_splits=3)
    out, lse = flashdecode.decode_attention(q, k, v, lens, num_splits=3,
                                            return_lse=True)
    expected, expected_lse = attention(*inputs.exact, lens)
    check(out, lse, expected, expected_lse, "float16", lens,
          f"seed={inputs.seed} without sinks")
    run(inputs, lens, random_sinks(inputs.rng, 8), num_splits=3)
    run(inputs, lens, first, num_splits=3)


def test_without_lse():
    inputs = Inputs("float32", (2, 8, 64), (2, 50, 2, 64))
    q, k, v = inputs.stored
    lens = inputs.lengths(50, 0)
    sinks = random_sinks(inputs.rng, 8)
    out = flashdecode.decode_attention(q, k, v, lens, sinks=sinks,
                                       num_splits=2)
    expected, expected_lse = attention(*inputs.exact, lens, sinks=sinks)
    check(out, None, expected, expected_lse, "float32", lens,
          f"seed={inputs.seed}")


def test_compile_with_sinks():
    """The merge kernel takes the sinks; the partial kernel does not (the
    sinks count once); the manifest says with_sinks; another kernel."""
    kernel = flashdecode.compile(64, 8, 2, num_splits=4, with_sinks=True,
                                 return_lse=True)
    assert kernel.manifest["config"]["with_sinks"] is True
    params = {spec["name"]: [p["name"] for p in spec["params"]]
              for spec in kernel.manifest["kernels"]}
    assert params["fd_merge"] == ["partial_output", "partial_lse", "output",
                                  "lse", "sinks"]
    assert "sinks" not in params["fd_partial_attention"]
    plain = flashdecode.compile(64, 8, 2, num_splits=4, return_lse=True)
    assert plain.manifest["config"]["with_sinks"] is False
    assert "sinks" not in [p["name"] for spec in plain.manifest["kernels"]
                           for p in spec["params"]]
    assert plain.ptx["fd_merge"] != kernel.ptx["fd_merge"]
    assert flashdecode.compile(64, 8, 2, num_splits=4,
                               with_sinks=False).manifest["config"][
        "with_sinks"] is False


@pytest.mark.parametrize("value", [1, 0, "yes", None, np.bool_(True)])
def test_compile_with_sinks_must_be_a_bool(value):
    with pytest.raises(ValueError, match="with_sinks must be True or False"):
        flashdecode.compile(64, 8, 2, with_sinks=value)


def test_the_native_layer_checks_the_sinks():
    """_flashdecode: KernelConfig's keyword-only with_sinks (in the cache
    key, its repr); CPUKernel.run requires sinks exactly when compiled with
    them, float32 of Hq elements, C-contiguous."""
    native = flashdecode._flashdecode
    positional = (64, 8, 2, 1, "f32", "NHD", 0, 2, True, None, False, 1,
                  4096, 132, "sm_90")
    assert "with_sinks=1" in repr(native.KernelConfig(*positional,
                                                      with_sinks=True))
    assert "with_sinks=0" in repr(native.KernelConfig(*positional))
    with pytest.raises(TypeError):
        native.KernelConfig(*positional, 4, 128, 128, 0, None, True)
    inputs = Inputs("float32", (1, 8, 64), (1, 16, 2, 64))
    q, k, v = inputs.stored
    lens = inputs.lengths(9)
    out = np.empty_like(q)
    sinks = random_sinks(inputs.rng, 8)
    with_sinks = native.CPUKernel(native.KernelConfig(*positional,
                                                      with_sinks=True))
    without = native.CPUKernel(native.KernelConfig(*positional))
    with pytest.raises(ValueError, match="reads attention sinks: sinks"):
        with_sinks.run(q, k, v, lens, out, None, 1, 16)
    with pytest.raises(ValueError, match="without attention sinks: sinks "
                       "must be None"):
        without.run(q, k, v, lens, out, None, 1, 16, sinks=sinks)
    with pytest.raises(ValueError, match="sinks holds 28 bytes, expected 32"):
        with_sinks.run(q, k, v, lens, out, None, 1, 16, sinks=sinks[:7])
    with pytest.raises(ValueError, match="sinks must be float32"):
        with_sinks.run(q, k, v, lens, out, None, 1, 16,
                       sinks=sinks.astype(np.float64))
    with pytest.raises(ValueError, match="sinks must be C-contiguous"):
        with_sinks.run(q, k, v, lens, out, None, 1, 16,
                       sinks=np.repeat(sinks, 2)[::2])
    with_sinks.run(q, k, v, lens, out, None, 1, 16, sinks=sinks)
    expected, expected_lse = attention(*inputs.exact, lens, sinks=sinks)
    check(out, None, expected, expected_lse, "float32", lens,
          f"seed={inputs.seed}")


# Bad sinks: per_head_buffers.py's suite, shared with test_alibi.py.

@pytest.mark.parametrize("make,words", host_cases("sinks"))
def test_bad_sinks_name_the_argument(make, words):
    check_bad_host_buffer("sinks", make, words)

"""decode_attention(backend='cpu') against a float64 reference."""
import itertools

import numpy as np
import pytest

import flashdecode
from reference import attention, decode, random_inputs, relative_error

TOLERANCE = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}
HEADS = {"MHA": (4, 4), "GQA": (8, 2), "MQA": (4, 1)}


def run_case(rng, dtype, layout, heads, head_dim, lengths, max_len,
             query_len=None, num_splits=None):
    num_q, num_kv = heads
    batch = len(lengths)
    q_shape = (batch, num_q, head_dim) if query_len is None else \
        (batch, query_len, num_q, head_dim)
    cache_shape = (batch, max_len, num_kv, head_dim) if layout == "NHD" else \
        (batch, num_kv, max_len, head_dim)
    (q, k, v), (qx, kx, vx) = random_inputs(rng, dtype, q_shape, cache_shape)
    lens = np.array(lengths, np.int32)
    out, lse = flashdecode.decode_attention(
        q, k, v, lens, kv_layout=layout, num_splits=num_splits,
        return_lse=True, dtype=dtype if dtype == "bfloat16" else None)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert lse.shape == q_shape[:-1] and lse.dtype == np.float32
    expected, expected_lse = attention(qx, kx, vx, lens, layout)
    actual = decode(out, dtype)
    assert np.isfinite(actual).all()
    assert relative_error(actual, expected) <= TOLERANCE[dtype]
    empty = np.isinf(expected_lse)
    assert (actual[empty] == 0).all()
    assert np.isneginf(lse[empty]).all()
    np.testing.assert_allclose(lse[~empty], expected_lse[~empty], rtol=1e-5,
                               atol=1e-5)
    return out


@pytest.mark.parametrize("dtype,layout,heads,head_dim", list(itertools.product(
    TOLERANCE, ("NHD", "HND"), HEADS, (64, 128, 256))))
def test_matches_reference(dtype, layout, heads, head_dim):
    rng = np.random.default_rng()
    # Lengths 0, 1, odd, not a multiple of any chunk, full; splits from 1 to
    # more than the short sequences have tokens.
    for num_splits in (None, 1, 7, 64):
        run_case(rng, dtype, layout, HEADS[heads], head_dim,
                 [0, 1, 37, 129, 200], 200, num_splits=num_splits)


@pytest.mark.parametrize("query_len", [1, 2, 4])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_query_tokens_follow_the_causal_rule(query_len, dtype):
    rng = np.random.default_rng()
    for num_splits in (1, 5):
        run_case(rng, dtype, "NHD", (8, 2), 64, [0, 1, 3, 50, 120], 120,
                 query_len=query_len, num_splits=num_splits)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_split_equals_unsplit(dtype):
    rng = np.random.default_rng()
    shape, cache = (3, 8, 128), (3, 500, 2, 128)
    (q, k, v), _ = random_inputs(rng, dtype, shape, cache)
    lens = np.array([500, 321, 7], np.int32)
    unsplit = flashdecode.decode_attention(q, k, v, lens, num_splits=1)
    for splits in (2, 9, 33, 200):
        split = flashdecode.decode_attention(q, k, v, lens, num_splits=splits)
        np.testing.assert_allclose(split.astype(np.float64),
                                   unsplit.astype(np.float64),
                                   rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


def test_scale_is_applied():
    rng = np.random.default_rng()
    (q, k, v), (qx, kx, vx) = random_inputs(rng, "float32", (2, 4, 64),
                                            (2, 30, 4, 64))
    lens = np.array([30, 11], np.int32)
    out = flashdecode.decode_attention(q, k, v, lens, scale=0.3)
    expected, _ = attention(qx, kx, vx, lens, scale=0.3)
    assert relative_error(out, expected) <= 1e-5


def test_q_with_one_query_token_keeps_its_shape():
    rng = np.random.default_rng()
    (q, k, v), (qx, kx, vx) = random_inputs(rng, "float16", (2, 1, 8, 64),
                                            (2, 40, 2, 64))
    lens = np.array([40, 3], np.int32)
    out, lse = flashdecode.decode_attention(q, k, v, lens, return_lse=True)
    assert out.shape == (2, 1, 8, 64) and lse.shape == (2, 1, 8)
    expected, _ = attention(qx, kx, vx, lens)
    assert relative_error(out.astype(np.float64), expected) <= 1e-2

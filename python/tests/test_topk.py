"""Top-k sparse decode on backend="cpu": decode_attention(indices=,
topk_length=) and mla_decode against dense attention over each query
token's gathered tokens in float64 (topk_checks.py), on fresh random inputs
(FD_TEST_SEED reruns a failure): lists with holes (-1), duplicates, a list
of holes only (zeros and lse -inf; with sinks the sink), topk_length 0,
shorter than K and per query token; Lq 1 and 2; GQA and MLA at 64 and 128
heads in bf16 and over e4m3 latent caches; dense caches and page pools;
splits planned over K; compile(top_k=); every argument the lists exclude
named in a ValueError."""
import numpy as np
import pytest

import flashdecode
from fp8_checks import dequantized
from reference import Inputs, page_pool
from topk_checks import (check, poison_unlisted, random_lists,
                         sparse_reference)

TOLERANCE = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 2e-2}


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("query_len", [1, 2])
@pytest.mark.parametrize("num_splits", [1, 3, None])
def test_gqa_lists_match_the_gathered_tokens(dtype, query_len, num_splits):
    batch, top_k = 4, 24
    q_shape = (batch, 8, 64) if query_len == 1 else (batch, query_len, 8, 64)
    inputs = Inputs(dtype, q_shape, (batch, 40, 2, 64))
    lists = random_lists(inputs.rng, batch, query_len, top_k, batch * 40)
    if query_len == 1:
        lists = lists[:, 0]
    lengths = np.array([24, 7, 0, 24], np.int32)
    q, k, v = inputs.stored
    k, v = (poison_unlisted(cache, lists, dtype) for cache in (k, v))
    extra = {"dtype": "bfloat16"} if dtype == "bfloat16" else {}
    out, lse = flashdecode.decode_attention(
        q, k, v, None, indices=lists, topk_length=lengths, return_lse=True,
        num_splits=num_splits, **extra)
    expected, expected_lse = sparse_reference(*inputs.exact, lists, lengths)
    check(out, lse, expected, expected_lse, dtype, TOLERANCE[dtype],
          f"seed {inputs.seed}")


def test_sinks_soft_cap_and_lengths_per_token():
    """A list of holes only gets the sink; topk_length per query token."""
    inputs = Inputs("float32", (3, 2, 8, 64), (3, 30, 2, 64))
    lists = random_lists(inputs.rng, 3, 2, 16, 90)
    lengths = np.array([[16, 3], [0, 16], [9, 1]], np.int32)
    sinks = inputs.rng.normal(0.0, 1.0, 8).astype(np.float32)
    out, lse = flashdecode.decode_attention(
        *inputs.stored, None, indices=lists, topk_length=lengths,
        sinks=sinks, logits_soft_cap=5.0, return_lse=True, num_splits=2)
    expected, expected_lse = sparse_reference(
        *inputs.exact, lists, lengths, sinks=sinks.astype(np.float64),
        logits_soft_cap=5.0)
    # Rows without keys are zeros with the sink as lse.
    assert (out[-1, 0] == 0).all()
    np.testing.assert_allclose(lse[-1, 0], sinks, rtol=1e-6)
    np.testing.assert_allclose(out, expected, atol=1e-5)
    # An lse's error is absolute (its exp is the sum's relative error): a
    # relative bound alone fails on an lse near 0 by chance (seed
    # 5036193051077450836: 4e-7 off an lse of 0.007).
    np.testing.assert_allclose(lse, expected_lse, rtol=2e-5, atol=2e-5,
                               err_msg=f"seed {inputs.seed}")


@pytest.mark.parametrize("heads", [64, 128])
def test_mla_decode_over_lists_of_latent_slots(heads):
    """DeepSeek V3.2's sparse decode: a latent cache of one KV head, 576
    wide, values its first 512 columns; Lq = 2 (multi-token prediction)."""
    inputs = Inputs("bfloat16", (2, 2, heads, 576), (2, 48, 1, 576))
    lists = random_lists(inputs.rng, 2, 2, 32, 96)
    q, latent = inputs.stored[0], poison_unlisted(inputs.stored[1], lists,
                                                  "bfloat16")
    scale = 1.0 / np.sqrt(192.0)
    out, lse = flashdecode.mla_decode(q, latent, None, indices=lists,
                                      scale=scale, return_lse=True,
                                      dtype="bfloat16", num_splits=2)
    exact = inputs.exact[1]
    expected, expected_lse = sparse_reference(
        inputs.exact[0], exact, exact[..., :512], lists, np.full(2, 32),
        scale=scale)
    check(out, lse, expected, expected_lse, "bfloat16", 2e-2,
          f"seed {inputs.seed}")


def test_fp8_latent_lists():
    inputs = Inputs("float32", (2, 64, 576), (2, 40, 1, 576))
    latent = inputs.stored[1]
    quantized, _, scale, _ = flashdecode.quantize_kv(
        latent, latent, "float8_e4m3fn", "token_head")
    lists = random_lists(inputs.rng, 2, 1, 20, 80)[:, 0]
    out, lse = flashdecode.mla_decode(
        inputs.stored[0].astype(np.float16), quantized, None, indices=lists,
        kv_dtype="float8_e4m3fn", k_scale=scale, return_lse=True)
    exact = dequantized(quantized, scale, "float8_e4m3fn")
    q = inputs.stored[0].astype(np.float16).astype(np.float64)
    expected, expected_lse = sparse_reference(q, exact, exact[..., :512],
                                              lists, np.full(2, 20))
    check(out, lse, expected, expected_lse, "float16", 1e-2,
          f"seed {inputs.seed}")


def test_lists_of_one_query_token_take_either_shape():
    """Lq = 1: indices [B, K] or [B, 1, K], q [B, Hq, D] or [B, 1, Hq, D],
    all the same results."""
    inputs = Inputs("float32", (2, 8, 64), (2, 16, 2, 64))
    q, k, v = inputs.stored
    lists = random_lists(inputs.rng, 2, 1, 8, 32)
    expected = flashdecode.decode_attention(q, k, v, None, indices=lists[:, 0])
    for query, shaped in ((q, lists), (q[:, None], lists[:, 0]),
                          (q[:, None], lists)):
        out = flashdecode.decode_attention(query, k, v, None, indices=shaped)
        np.testing.assert_array_equal(out.reshape(expected.shape), expected)


def test_page_pools_are_slots_too():
    """A pool [num_pages, page_size, Hkv, D]: slot = page * page_size +
    offset, the same tokens as the dense cache's slots they came from."""
    inputs = Inputs("float16", (3, 8, 64), (3, 64, 2, 64))
    q, k, v = inputs.stored
    pool_k, pool_v, table = page_pool(inputs.rng, k, v, 16, "NHD")
    dense_lists = random_lists(inputs.rng, 3, 1, 20, 3 * 64)[:, 0]
    # The same tokens, named by their slots in the pool.
    page, offset = np.divmod(dense_lists, 64)
    pool_lists = np.where(
        dense_lists < 0, -1,
        table[page, offset // 16] * 16 + offset % 16).astype(np.int32)
    dense = flashdecode.decode_attention(q, k, v, None, indices=dense_lists,
                                         return_lse=True)
    pooled = flashdecode.decode_attention(q, pool_k, pool_v, None,
                                          indices=pool_lists, return_lse=True)
    np.testing.assert_array_equal(pooled[0], dense[0])
    np.testing.assert_array_equal(pooled[1], dense[1])


def test_splits_are_planned_over_k():
    """compile(top_k=K): the manifest says so, the block table is [B, K],
    and an automatic count plans for K keys, not the cache."""
    kernel = flashdecode.compile(576, 128, 1, dtype="bfloat16", top_k=2048,
                                 v_head_dim=512, shared_kv=True, batch=64,
                                 max_len=32768)
    config = kernel.manifest["config"]
    assert (config["top_k"], config["page_size"]) == (2048, 1)
    same = flashdecode.compile(576, 128, 1, dtype="bfloat16", top_k=2048,
                               v_head_dim=512, shared_kv=True, batch=64,
                               max_len=4096)
    assert same.num_splits == kernel.num_splits
    with pytest.raises(ValueError, match="top_k 64: page_size must be 1"):
        flashdecode.compile(64, 8, 2, top_k=64, page_size=16)
    with pytest.raises(ValueError, match="top_k 64: query_len must be 1"):
        flashdecode.compile(64, 8, 2, top_k=64, query_len=2)


def test_lists_exclude_what_positions_need():
    inputs = Inputs("float32", (2, 8, 64), (2, 16, 2, 64))
    q, k, v = inputs.stored
    lists = np.zeros((2, 4), np.int32)
    lengths = np.full(2, 16, np.int32)
    for name, value, message in (
            ("window_left", 4, "window_left with indices: a list's tokens "
                               "have no positions"),
            ("alibi_slopes", np.ones(8, np.float32),
             "alibi_slopes with indices"),
            ("query_lens", np.ones(2, np.int32), "query_lens with indices"),
            ("block_table", np.zeros((2, 1), np.int32),
             "block_table with indices: the indices are flat slots"),
            ("kv_shard", (0, 2, 1), "kv_shard with indices")):
        with pytest.raises(ValueError, match=message):
            flashdecode.decode_attention(q, k, v, None, indices=lists,
                                         **{name: value})
    with pytest.raises(ValueError, match="seq_lens with indices: pass None"):
        flashdecode.decode_attention(q, k, v, lengths, indices=lists)
    with pytest.raises(ValueError, match=r"indices must be \[2, 1, K\] or "
                                         r"\[2, K\] for q \(2, 8, 64\), got "
                                         r"shape \(3, 4\)"):
        flashdecode.decode_attention(q, k, v, None,
                                     indices=np.zeros((3, 4), np.int32))
    with pytest.raises(ValueError, match=r"indices must be \[2, 3, K\] for "
                                         r"q \(2, 3, 8, 64\)"):
        flashdecode.decode_attention(np.repeat(q[:, None], 3, 1), k, v, None,
                                     indices=lists)
    with pytest.raises(ValueError, match="topk_length bounds the lists of "
                                         "indices"):
        flashdecode.decode_attention(q, k, v, lengths, topk_length=lengths)
    with pytest.raises(ValueError, match=r"indices must be slots in \[0, 32\)"):
        flashdecode.decode_attention(q, k, v, None,
                                     indices=np.full((2, 4), 32, np.int32))
    with pytest.raises(ValueError, match="indices need kv_layout='NHD'"):
        flashdecode.decode_attention(q, k.transpose(0, 2, 1, 3).copy(),
                                     v.transpose(0, 2, 1, 3).copy(), None,
                                     indices=lists, kv_layout="HND")

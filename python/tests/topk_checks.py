"""What the top-k sparse decode tests (test_topk.py on the CPU,
test_topk_cuda_emulated.py on fdemu) share: random lists of slots with
holes (-1), duplicates and rows that name no token, caches whose slots no
list names hold NaN (a kernel that reads one shows it), and the float64
reference: dense attention over each query token's gathered tokens
(reference.py)."""
import numpy as np

from reference import (attention, decode, from_bfloat16_bits,
                       to_bfloat16_bits)


def random_lists(rng, batch, query_len, top_k, slots):
    """int32 [B, Lq, K] of slots in [0, slots) with about a quarter holes
    (-1), a duplicate in every list and, in the last sequence's first token,
    nothing but holes."""
    lists = rng.integers(0, slots, (batch, query_len, top_k)).astype(np.int32)
    lists[rng.random(lists.shape) < 0.25] = -1
    if top_k > 1:
        lists[..., 1] = lists[..., 0]
    lists[-1, 0] = -1
    return lists


def poison_unlisted(cache, lists, dtype):
    """`cache` ([N0, N1, Hkv, D] in `dtype` storage) with NaN in every slot
    no list names."""
    flat = cache.reshape(-1, *cache.shape[2:]).copy()
    unlisted = np.setdiff1d(np.arange(flat.shape[0]), lists[lists >= 0])
    nan = to_bfloat16_bits(np.float32(np.nan)) if dtype == "bfloat16" \
        else np.nan
    flat[unlisted] = nan
    return flat.reshape(cache.shape)


def sparse_reference(q, k, v, lists, lengths, *, scale=None, sinks=None,
                     logits_soft_cap=None):
    """float64 (out, lse) of q [B, (Lq,) Hq, D] over each token's listed
    slots of k, v ([N0, N1, Hkv, D] float64): its first lengths[b] (or
    lengths[b, t]) entries, holes skipped, duplicates counted."""
    squeeze = q.ndim == 3
    if squeeze:
        q, lists = q[:, None], lists[:, None]
    flat_k = k.reshape(-1, *k.shape[2:])
    flat_v = v.reshape(-1, *v.shape[2:])
    batch, query_len = q.shape[:2]
    out = np.zeros(q.shape[:3] + (v.shape[-1],))
    lse = np.full(q.shape[:3], -np.inf)
    for b in range(batch):
        for t in range(query_len):
            count = lengths[b] if np.ndim(lengths) == 1 else lengths[b, t]
            listed = [s for s in lists[b, t, :count] if s >= 0]
            if not listed:
                if sinks is not None:
                    lse[b, t] = sinks
                continue
            o, l = attention(q[b:b + 1, t], flat_k[listed][None],
                             flat_v[listed][None], np.array([len(listed)]),
                             scale=scale, sinks=sinks,
                             logits_soft_cap=logits_soft_cap)
            out[b, t], lse[b, t] = o[0], l[0]
    if squeeze:
        return out[:, 0], lse[:, 0]
    return out, lse


def check(out, lse, expected, expected_lse, dtype, tolerance, context):
    """`out` (in `dtype` storage) and `lse` (numpy) against the reference:
    rows without keys exactly zero with lse -inf (the sink with sinks)."""
    actual = decode(out, dtype) if dtype != "bfloat16" else \
        from_bfloat16_bits(out).astype(np.float64)
    assert np.isfinite(actual).all(), f"NaN or inf: {context}"
    empty = np.isneginf(expected_lse)
    assert (actual[empty] == 0).all(), f"rows without keys: {context}"
    np.testing.assert_array_equal(np.isneginf(lse), empty,
                                  err_msg=f"rows without keys: {context}")
    error = np.abs(actual - expected).max() / max(np.abs(expected).max(),
                                                  1e-30)
    assert error <= tolerance, f"relative error {error:.3g}: {context}"
    finite = ~empty
    np.testing.assert_allclose(lse[finite], expected_lse[finite], rtol=2e-5,
                               atol=2e-5, err_msg=context)

"""The float64 reference for sliding-window and soft-capped attention, and
the inputs of test_window_softcap.py and test_window_softcap_cuda.py.

The rules: query token t of Lq sits at position p = len - Lq + t and sees
the keys j with max(0, p - W + 1) <= j <= p (every j <= p without a window);
a score is scale * q.k (scale 1/sqrt(D) unless given), soft-capped to
c * tanh(score / c); the softmax runs over the visible keys; a row that sees
no key is zeros with lse -inf. Written apart from flashdecode (and from
reference.py's unwindowed attention).
"""
import math

import numpy as np

from reference import from_bfloat16_bits, to_bfloat16_bits


def windowed_attention(q, k, v, lens, *, kv_layout="NHD", scale=None,
                       window=None, cap=None):
    """(out, lse) in float64 for q [B, Hq, D] or [B, Lq, Hq, D] over dense
    caches, one query row at a time."""
    squeeze = q.ndim == 3
    if squeeze:
        q = q[:, None]
    if kv_layout == "HND":
        k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
    batch, query_len, num_q_heads, head_dim = q.shape
    group = num_q_heads // k.shape[2]
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    out = np.zeros(q.shape)
    lse = np.full(q.shape[:3], -np.inf)
    for b in range(batch):
        for t in range(query_len):
            position = int(lens[b]) - query_len + t
            first = 0 if window is None else max(0, position - window + 1)
            if position < first:
                continue  # sees no key
            for h in range(num_q_heads):
                keys = k[b, first:position + 1, h // group]
                values = v[b, first:position + 1, h // group]
                scores = scale * (keys @ q[b, t, h])
                if cap is not None:
                    scores = cap * np.tanh(scores / cap)
                peak = scores.max()
                weights = np.exp(scores - peak)
                total = weights.sum()
                out[b, t, h] = weights @ values / total
                lse[b, t, h] = peak + math.log(total)
    if squeeze:
        return out[:, 0], lse[:, 0]
    return out, lse


class Inputs:
    """q and the caches in `dtype` storage and the float64 values they
    hold, drawn from a fresh seed (kept for the failure message)."""

    def __init__(self, dtype, q_shape, cache_shape, q_magnitude=1.0):
        self.seed = np.random.SeedSequence().entropy
        rng = np.random.default_rng(self.seed)
        self.rng = rng
        self.dtype = dtype
        drawn = [q_magnitude * rng.normal(0.0, 1.0, q_shape),
                 rng.normal(0.0, 1.0, cache_shape),
                 rng.normal(0.0, 1.0, cache_shape)]
        self.stored, self.exact = [], []
        for array in drawn:
            stored = to_bfloat16_bits(array) if dtype == "bfloat16" else \
                array.astype(dtype)
            self.stored.append(stored)
            self.exact.append(as_float64(stored, dtype))

    def lengths(self, *lengths):
        return np.array(lengths, np.int32)


def as_float64(values, dtype):
    if dtype == "bfloat16":
        return from_bfloat16_bits(values).astype(np.float64)
    return values.astype(np.float64)


def page_pool(rng, k, v, page_size, layout):
    """Dense NHD/HND caches -> shuffled page pools (spare pages filled with
    other random numbers) and the block table that reads them back."""
    if layout == "HND":
        k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
    batch, max_len = k.shape[:2]
    pages = -(-max_len // page_size)
    num_pages = batch * pages + 3
    table = rng.permutation(num_pages)[:batch * pages].astype(np.int32)
    table = table.reshape(batch, pages)
    pool_shape = (num_pages, page_size) + k.shape[2:]
    pool_k, pool_v = [
        to_bfloat16_bits(spare) if k.dtype == np.uint16 else
        spare.astype(k.dtype)
        for spare in (rng.normal(0.0, 1.0, pool_shape),
                      rng.normal(0.0, 1.0, pool_shape))]
    for b in range(batch):
        for j in range(max_len):
            page, slot = table[b, j // page_size], j % page_size
            pool_k[page, slot], pool_v[page, slot] = k[b, j], v[b, j]
    if layout == "HND":
        pool_k = np.ascontiguousarray(pool_k.transpose(0, 2, 1, 3))
        pool_v = np.ascontiguousarray(pool_v.transpose(0, 2, 1, 3))
    return pool_k, pool_v, table

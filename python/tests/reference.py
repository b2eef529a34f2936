"""float64 attention, random inputs and bfloat16 bit-pattern helpers for the
tests, written apart from flashdecode.

The attention rules: query token t of Lq sits at position p = len - Lq + t
and sees the keys j with max(0, p - W + 1) <= j <= p with a sliding window
of W keys (window_left), every j <= p without; a score is scale * q.k
(scale 1/sqrt(D) unless given), soft-capped to c * tanh(score / c) with
logits_soft_cap c; the softmax runs over the visible keys; a row that sees
no key is zeros with lse -inf. With attention sinks (one logit s_h per query
head, neither scaled nor capped) the softmax's denominator gains exp(s_h):
out = sum_j exp(x_j) v_j / (exp(s_h) + sum_j exp(x_j)), lse = log(exp(s_h) +
sum_j exp(x_j)); a row that sees no key is zeros with lse = s_h. With
ALiBi (one slope m_h per query head) the score of key j becomes
x_j + m_h * (j - p), after the scale and the soft-cap, before the softmax
(and the sinks, which gain no bias). With per-sequence query lengths
(query_lens [B]) sequence b has n = clamp(query_lens[b], 0, Lq) queries,
its last n tokens: token t < n sits at p = len - n + t; rows t >= n are
padding, zeros with lse -inf (sinks or not).
"""
import numpy as np


def to_bfloat16_bits(values):
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + np.uint32(0x7FFF)
    return ((bits + rounding) >> 16).astype(np.uint16)


def from_bfloat16_bits(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def random_inputs(rng, dtype, q_shape, cache_shape, q_deviation=2.0):
    """q, k, v in `dtype` storage and the float64 values they hold."""
    arrays = [rng.normal(0.0, q_deviation, q_shape),
              rng.normal(0.0, 1.0, cache_shape),
              rng.normal(0.0, 1.0, cache_shape)]
    stored, exact = [], []
    for array in arrays:
        if dtype == "bfloat16":
            bits = to_bfloat16_bits(array)
            stored.append(bits)
            exact.append(from_bfloat16_bits(bits).astype(np.float64))
        else:
            typed = array.astype(dtype)
            stored.append(typed)
            exact.append(typed.astype(np.float64))
    return stored, exact


def decode(values, dtype):
    if dtype == "bfloat16":
        return from_bfloat16_bits(values).astype(np.float64)
    return values.astype(np.float64)


class Inputs:
    """q and the caches in `dtype` storage and the float64 values they
    hold, drawn from a seed of the test's stream (conftest.py), kept for
    the failure message."""

    def __init__(self, dtype, q_shape, cache_shape, q_magnitude=1.0):
        self.seed = int(np.random.default_rng().integers(2**63))
        self.rng = np.random.default_rng(self.seed)
        self.dtype = dtype
        self.stored, self.exact = random_inputs(
            self.rng, dtype, q_shape, cache_shape, q_deviation=q_magnitude)

    def lengths(self, *lengths):
        return np.array(lengths, np.int32)


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


def attention(q, k, v, lens, kv_layout="NHD", scale=None, *,
              window_left=None, logits_soft_cap=None, sinks=None,
              alibi_slopes=None, query_lens=None, kv_shard=None):
    """(out, lse) in float64 for q [B, Hq, D] or [B, Lq, Hq, D] over dense
    caches (v's head dim D_v may differ from D: out [.., D_v]); window_left W, logits_soft_cap c, sinks [Hq], alibi_slopes
    [Hq] and query_lens [B] as in the module's rules (None: no window, no
    cap, no sinks, no ALiBi, Lq query tokens in every sequence). With
    query_lens, sequence b's n = query_lens[b] (clamped to [0, Lq]) queries
    are its last n tokens; rows t >= n are padding: zeros, lse -inf. With
    kv_shard (rank, world, interleave) only the keys j with (j //
    interleave) % world == rank are attended (the caches are the whole
    sequences'): one rank's share; a row none of whose keys are the rank's
    is zeros with lse -inf (the sink with sinks)."""
    squeeze = q.ndim == 3
    if squeeze:
        q = q[:, None]
    if kv_layout == "HND":
        k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
    batch, query_len, heads, dim = q.shape
    group = heads // k.shape[2]
    scale = 1.0 / np.sqrt(dim) if scale is None else scale
    kv_head = np.arange(heads) // group
    sink = None if sinks is None else \
        np.asarray(sinks, np.float64).reshape(heads, 1)
    slope = None if alibi_slopes is None else \
        np.asarray(alibi_slopes, np.float64).reshape(heads, 1)
    # The values may be narrower than the keys (D_v: MLA, values apart).
    out = np.zeros(q.shape[:3] + (v.shape[-1],))
    lse = np.full(q.shape[:3], -np.inf)
    for b in range(batch):
        queries = query_len if query_lens is None else \
            min(max(int(query_lens[b]), 0), query_len)
        for t in range(queries):
            position = int(lens[b]) - queries + t
            first = 0 if window_left is None else \
                max(0, position - window_left + 1)
            visible = np.arange(first, position + 1)
            if kv_shard is not None:
                rank, world, interleave = kv_shard
                visible = visible[(visible // interleave) % world == rank]
            if visible.size == 0:
                if sink is not None:
                    lse[b, t] = sink[:, 0]
                continue  # sees no key: zeros
            keys = k[b, visible][:, kv_head]      # [n, Hq, D]
            values = v[b, visible][:, kv_head]
            scores = np.einsum("hd,nhd->hn", q[b, t], keys) * scale
            if logits_soft_cap is not None:
                scores = logits_soft_cap * np.tanh(scores / logits_soft_cap)
            if slope is not None:
                # Distance j - p <= 0 of each visible key to the query.
                distance = visible - position
                scores = scores + slope * distance[None, :]
            peak = scores.max(axis=1, keepdims=True)
            if sink is not None:
                # A key of value zero whose score is the sink (exp(-inf) = 0).
                peak = np.maximum(peak, sink)
            weights = np.exp(scores - peak)
            total = weights.sum(axis=1, keepdims=True)
            if sink is not None:
                total = total + np.exp(sink - peak)
            out[b, t] = np.einsum("hn,nhd->hd", weights, values) / total
            lse[b, t] = peak[:, 0] + np.log(total[:, 0])
    if squeeze:
        return out[:, 0], lse[:, 0]
    return out, lse


def rows_without_keys(lens, query_len, query_lens=None):
    """[B, Lq] booleans: the rows that see no key, query token t at position
    len - n + t < 0 (a window always holds the token's own position), n = Lq
    or with query_lens [B] its entry clamped to [0, Lq]; and the padding
    rows t >= n."""
    queries = np.full(len(lens), query_len) if query_lens is None else \
        np.clip(np.asarray(query_lens, np.int64), 0, query_len)
    token = np.arange(query_len)[None, :]
    position = np.asarray(lens, np.int64)[:, None] - queries[:, None] + token
    return (position < 0) | (token >= queries[:, None])


def relative_error(actual, expected):
    return np.abs(actual - expected).max() / max(np.abs(expected).max(), 1e-30)


def check_against_reference(out, lse, expected, expected_lse, dtype,
                            tolerance, lse_tolerance, context, *,
                            without_keys=None):
    """out (numpy, in `dtype` storage) and lse (numpy, or None: unchecked)
    against the float64 reference: every element finite, the relative error
    within `tolerance`, rows with lse -inf (and the rows of the boolean mask
    `without_keys`, [B, (Lq,) Hq] or broadcastable, with sinks) zeros with
    lse -inf, the other lse within `lse_tolerance` (absolute and
    relative)."""
    actual = decode(out, dtype)
    assert np.isfinite(actual).all(), context
    error = relative_error(actual, expected)
    assert error <= tolerance, f"relative error {error:.3g}: {context}"
    empty = np.isneginf(expected_lse)
    assert (actual[empty] == 0).all(), f"rows without keys: {context}"
    if without_keys is not None:
        mask = np.broadcast_to(without_keys, expected_lse.shape)
        assert (actual[mask] == 0).all(), f"rows without keys: {context}"
    if lse is None:
        return
    np.testing.assert_array_equal(np.isneginf(lse), empty,
                                  err_msg=f"rows without keys: {context}")
    np.testing.assert_allclose(lse[~empty], expected_lse[~empty],
                               rtol=lse_tolerance, atol=lse_tolerance,
                               err_msg=context)


def random_sinks(rng, num_q_heads):
    """Attention sinks, float32 [Hq] in a random head order: one large
    positive sink that dominates every row (e^15 and more against a few
    hundred keys of scores around 1), one very negative (no visible effect),
    one -inf (no sink at all), one near the rows' lse (an equal partner),
    the others spread around it."""
    special = [rng.uniform(15.0, 25.0), rng.uniform(-300.0, -60.0), -np.inf,
               rng.normal(4.0, 1.0)]
    rest = rng.normal(2.0, 3.0, max(0, num_q_heads - len(special)))
    sinks = np.concatenate([special, rest])[:num_q_heads]
    return rng.permutation(sinks).astype(np.float32)


def bloom_slopes(num_q_heads):
    """BLOOM's ALiBi slopes for a power-of-two head count: 2^(-8 i / H)
    for head i - 1, i = 1..H (float32 [Hq])."""
    heads = np.arange(1, num_q_heads + 1, dtype=np.float64)
    return (2.0 ** (-8.0 * heads / num_q_heads)).astype(np.float32)


def random_alibi_slopes(rng, num_q_heads):
    """ALiBi slopes, float32 [Hq] in a random head order: one 0 (no bias),
    one 1.0 (a steep one: a key 20 positions back weighs e^-20 less), one
    tiny, the others uniform in [0, 0.5)."""
    special = [0.0, 1.0, rng.uniform(1e-4, 1e-3)]
    rest = rng.uniform(0.0, 0.5, max(0, num_q_heads - len(special)))
    slopes = np.concatenate([special, rest])[:num_q_heads]
    return rng.permutation(slopes).astype(np.float32)


# A row's error is measured against its own largest magnitude, or this
# fraction of the output's when smaller: a dominant sink shrinks its rows
# by e^-10 and more, down to where f16 has no normal numbers.
ROW_FLOOR = {"float32": 1e-6, "float16": 1e-3, "bfloat16": 1e-3}


def check_rows(actual, expected, dtype, tolerance, context):
    """Each row's largest error (float arrays [..., D]) against its own
    largest magnitude (floored, ROW_FLOOR)."""
    dim = expected.shape[-1]
    actual, expected = actual.reshape(-1, dim), expected.reshape(-1, dim)
    floor = ROW_FLOOR[dtype] * max(np.abs(expected).max(), 1e-30)
    scale = np.maximum(np.abs(expected).max(axis=1), floor)
    error = np.abs(actual - expected).max(axis=1) / scale
    worst = int(error.argmax())
    assert error[worst] <= tolerance, \
        f"row {worst}: relative error {error[worst]:.3g}: {context}"


def check_with_sinks(out, lse, expected, expected_lse, lens, dtype,
                     tolerance, lse_tolerance, context, query_lens=None):
    """check_against_reference for attention with sinks: also row by row
    (check_rows), and the rows without keys zeros whatever their lse (the
    sink's; with query_lens [B], the padding rows' is -inf)."""
    query_len = 1 if out.ndim == 3 else out.shape[1]
    without = rows_without_keys(lens, query_len, query_lens)
    without = without[:, 0, None] if out.ndim == 3 else without[..., None]
    check_against_reference(out, lse, expected, expected_lse, dtype,
                            tolerance, lse_tolerance, context,
                            without_keys=without)
    check_rows(decode(out, dtype), expected, dtype, tolerance, context)


def check_split_counts_agree(results, dtype, tolerance, lse_tolerance,
                             context):
    """results: [(num_splits, out, lse)] of one problem (numpy, out in
    `dtype` storage); each must equal the first's to the tolerances, row
    by row, with -inf lse in the same places."""
    first_splits, first, first_lse = results[0]
    finite = np.isfinite(first_lse)
    for num_splits, out, lse in results[1:]:
        where = f"{context} splits {first_splits} vs {num_splits}"
        check_rows(decode(out, dtype), decode(first, dtype), dtype,
                   tolerance, where)
        np.testing.assert_array_equal(np.isneginf(lse),
                                      np.isneginf(first_lse), err_msg=where)
        np.testing.assert_allclose(lse[finite], first_lse[finite],
                                   rtol=lse_tolerance, atol=lse_tolerance,
                                   err_msg=where)

"""float64 attention and bfloat16 bit-pattern helpers for the tests."""
import numpy as np


def to_bfloat16_bits(values):
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + np.uint32(0x7FFF)
    return ((bits + rounding) >> 16).astype(np.uint16)


def from_bfloat16_bits(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def random_inputs(rng, dtype, q_shape, cache_shape):
    """q, k, v in `dtype` storage and the float64 values they hold."""
    arrays = [rng.normal(0.0, 2.0, q_shape), rng.normal(0.0, 1.0, cache_shape),
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


def attention(q, k, v, lens, kv_layout="NHD", scale=None):
    """Reference for q [B, Hq, D] or [B, Lq, Hq, D] (float64)."""
    squeeze = q.ndim == 3
    if squeeze:
        q = q[:, None]
    if kv_layout == "HND":
        k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
    batch, query_len, heads, dim = q.shape
    group = heads // k.shape[2]
    scale = 1.0 / np.sqrt(dim) if scale is None else scale
    kv_head = np.arange(heads) // group
    out = np.zeros(q.shape)
    lse = np.full(q.shape[:3], -np.inf)
    for b in range(batch):
        for t in range(query_len):
            visible = int(np.clip(lens[b] - query_len + t + 1, 0, lens[b]))
            if visible == 0:
                continue
            keys = k[b, :visible][:, kv_head]      # [n, Hq, D]
            values = v[b, :visible][:, kv_head]
            scores = np.einsum("hd,nhd->hn", q[b, t], keys) * scale
            peak = scores.max(axis=1, keepdims=True)
            weights = np.exp(scores - peak)
            total = weights.sum(axis=1, keepdims=True)
            out[b, t] = np.einsum("hn,nhd->hd", weights, values) / total
            lse[b, t] = peak[:, 0] + np.log(total[:, 0])
    if squeeze:
        return out[:, 0], lse[:, 0]
    return out, lse


def relative_error(actual, expected):
    return np.abs(actual - expected).max() / max(np.abs(expected).max(), 1e-30)

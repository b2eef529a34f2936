"""Shared by test_cascade.py (backend="cpu") and
test_cascade_cuda_emulated.py (fdemu): R requests continuing one prefix, the
float64 reference over their concatenated caches (reference.py), and the
runner that checks cascade_decode against it.

The prefix and the suffixes are fresh random numbers; the prefix's capacity
past prefix_len and each suffix past its length hold NaN, so a pass that
reads a key it must not (or attends it) turns its rows NaN."""
import numpy as np

import flashdecode
from reference import (attention, check_against_reference,
                       decode, page_pool, random_alibi_slopes, random_inputs,
                       random_sinks)

TOLERANCE = {"float32": 2e-5, "float16": 3e-3, "bfloat16": 2e-2}
LSE_TOLERANCE = 2e-5
# The GPU's exp2 and log2 are approximate.
CUDA_TOLERANCE = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 2e-2}
CUDA_LSE_TOLERANCE = 1e-3
NAN = {"float32": np.float32(np.nan), "float16": np.float16(np.nan),
       "bfloat16": np.uint16(0x7FC0)}


class Cascade:
    """q [R, (Lq,) Hq, D], a prefix of `prefix_len` tokens in a cache of
    `prefix_len + spare` ([P, Hkv, D]), suffix caches [R, Ls, Hkv, D] with
    `suffix_lens`; `exact` holds the float64 concatenation [R, P + Ls, Hkv,
    D] and its lengths."""

    def __init__(self, dtype, requests, query_len, heads, kv_heads, head_dim,
                 prefix_len, suffix_lens, spare=5):
        self.seed = int(np.random.default_rng().integers(2**63))
        self.rng = np.random.default_rng(self.seed)
        self.dtype = dtype
        self.prefix_len = prefix_len
        self.suffix_lens = np.array(suffix_lens, np.int32)
        suffix_capacity = max(1, int(self.suffix_lens.max()))
        q_shape = (requests, heads, head_dim) if query_len == 1 else \
            (requests, query_len, heads, head_dim)
        (q, pk, pv), (eq, epk, epv) = random_inputs(
            self.rng, dtype, q_shape, (1, prefix_len + spare, kv_heads,
                                       head_dim))
        (_, sk, sv), (_, ek, ev) = random_inputs(
            self.rng, dtype, q_shape, (requests, suffix_capacity, kv_heads,
                                       head_dim))
        nan = NAN[dtype]
        pk[:, prefix_len:], pv[:, prefix_len:] = nan, nan
        for r, length in enumerate(self.suffix_lens):
            sk[r, length:], sv[r, length:] = nan, nan
        self.q, self.prefix_k, self.prefix_v = q, pk[0], pv[0]
        self.k_cache, self.v_cache = sk, sv
        total = prefix_len + suffix_capacity
        full_k = np.zeros((requests, total, kv_heads, head_dim))
        full_v = np.zeros_like(full_k)
        for r, length in enumerate(self.suffix_lens):
            full_k[r, :prefix_len], full_v[r, :prefix_len] = \
                epk[0, :prefix_len], epv[0, :prefix_len]
            full_k[r, prefix_len:prefix_len + length] = ek[r, :length]
            full_v[r, prefix_len:prefix_len + length] = ev[r, :length]
        self.exact = eq, full_k, full_v
        self.lengths = (prefix_len + self.suffix_lens).astype(np.int32)

    def features(self, sinks=False, alibi=False, **rules):
        """cascade_decode's keywords for the rules asked, random sinks and
        ALiBi slopes as numpy arrays."""
        heads = self.q.shape[-2]
        if sinks:
            rules["sinks"] = random_sinks(self.rng, heads)
        if alibi:
            rules["alibi_slopes"] = random_alibi_slopes(self.rng, heads)
        return rules

    def expected(self, **features):
        rules = {name: value for name, value in features.items()
                 if name not in ("num_splits",)}
        return attention(*self.exact, self.lengths, **rules)

    def paged_prefix(self, page_size, kv_layout="NHD"):
        """The prefix in a shuffled pool of pages of `page_size` (spare pages
        random, the last page's tail NaN) and its block table
        [num_prefix_pages]."""
        pool_k, pool_v, table = page_pool(
            self.rng, to_layout(self.prefix_k[None], kv_layout, True),
            to_layout(self.prefix_v[None], kv_layout, True), page_size,
            kv_layout)
        return pool_k, pool_v, np.ascontiguousarray(table[0])

    def paged_suffixes(self, page_size, kv_layout="NHD"):
        return page_pool(self.rng, to_layout(self.k_cache, kv_layout, True),
                         to_layout(self.v_cache, kv_layout, True), page_size,
                         kv_layout)


def to_layout(array, kv_layout, batched):
    """A dense NHD cache ([B, L, Hkv, D], or one sequence [L, Hkv, D]) in
    `kv_layout`."""
    if kv_layout == "NHD":
        return array
    axes = (0, 2, 1, 3) if batched else (1, 0, 2)
    return np.ascontiguousarray(array.transpose(axes))


def check_cascade(case, backend="cpu", to_backend=lambda array: array,
                  prefix_len=None, kv_layout="NHD", prefix_page_size=None,
                  suffix_page_size=None, **features):
    """cascade_decode of `case` (a Cascade) against the float64 reference
    over its concatenation; `to_backend` moves numpy arrays to the device;
    prefix_len defaults to the case's as an int."""
    dtype = {"dtype": "bfloat16"} if case.dtype == "bfloat16" else {}
    prefix_k = to_layout(case.prefix_k, kv_layout, False)
    prefix_v = to_layout(case.prefix_v, kv_layout, False)
    prefix_table = None
    if prefix_page_size:
        prefix_k, prefix_v, prefix_table = case.paged_prefix(
            prefix_page_size, kv_layout)
    k_cache = to_layout(case.k_cache, kv_layout, True)
    v_cache = to_layout(case.v_cache, kv_layout, True)
    table = None
    if suffix_page_size:
        k_cache, v_cache, table = case.paged_suffixes(suffix_page_size,
                                                      kv_layout)
    device = {name: to_backend(value) if isinstance(value, np.ndarray)
              else value for name, value in features.items()}
    moved = [None if array is None else to_backend(array) for array in (
        case.q, prefix_k, prefix_v, k_cache, v_cache, case.suffix_lens,
        table, prefix_table)]
    out, lse = flashdecode.cascade_decode(
        moved[0], moved[1], moved[2],
        case.prefix_len if prefix_len is None else prefix_len,
        moved[3], moved[4], moved[5], block_table=moved[6],
        prefix_block_table=moved[7], return_lse=True, backend=backend,
        kv_layout=kv_layout, **device, **dtype)
    out = out if isinstance(out, np.ndarray) else out.numpy()
    lse = lse if isinstance(lse, np.ndarray) else lse.numpy()
    expected, expected_lse = case.expected(**features)
    cuda = backend == "cuda"
    context = (f"R {case.q.shape[0]}, prefix {case.prefix_len}, suffixes "
               f"{case.suffix_lens.tolist()}, {features}, seed {case.seed}")
    check_against_reference(
        out, lse, expected, expected_lse, case.dtype,
        (CUDA_TOLERANCE if cuda else TOLERANCE)[case.dtype],
        CUDA_LSE_TOLERANCE if cuda else LSE_TOLERANCE, context)
    return decode(out, case.dtype), lse

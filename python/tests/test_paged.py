"""Paged caches (block_table) on the CPU backend equal the dense result."""
import numpy as np
import pytest

import flashdecode
from reference import attention, random_inputs, relative_error


def page_pool(rng, k, v, page_size, layout, shared_pages):
    """Dense caches -> shuffled page pools + block table; sequence 1 shares
    its first `shared_pages` pages with sequence 0 (given equal contents)."""
    if layout == "HND":
        k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
    k, v = k.copy(), v.copy()
    batch, max_len = k.shape[:2]
    shared = min(shared_pages * page_size, max_len)
    k[1, :shared], v[1, :shared] = k[0, :shared], v[0, :shared]
    pages_per_seq = -(-max_len // page_size)
    num_pages = batch * pages_per_seq - shared_pages + 3  # spare pages
    ids = rng.permutation(num_pages).astype(np.int32)
    table = np.zeros((batch, pages_per_seq), np.int32)
    next_id = 0
    for b in range(batch):
        for block in range(pages_per_seq):
            if b == 1 and block < shared_pages:
                table[b, block] = table[0, block]
            else:
                table[b, block] = ids[next_id]
                next_id += 1
    pool_k = np.full((num_pages, page_size) + k.shape[2:], 7, k.dtype)
    pool_v = np.full_like(pool_k, 7)
    for b in range(batch):
        for j in range(max_len):
            page, slot = table[b, j // page_size], j % page_size
            pool_k[page, slot], pool_v[page, slot] = k[b, j], v[b, j]
    dense = (k, v) if layout == "NHD" else \
        (k.transpose(0, 2, 1, 3).copy(), v.transpose(0, 2, 1, 3).copy())
    if layout == "HND":
        pool_k = pool_k.transpose(0, 2, 1, 3).copy()
        pool_v = pool_v.transpose(0, 2, 1, 3).copy()
    return dense, pool_k, pool_v, table


@pytest.mark.parametrize("page_size", [1, 16, 64, 256])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_paged_equals_dense(page_size, layout, dtype):
    rng = np.random.default_rng()
    cache_shape = (4, 300, 2, 64) if layout == "NHD" else (4, 2, 300, 64)
    (q, k, v), _ = random_inputs(rng, dtype, (4, 8, 64), cache_shape)
    (dense_k, dense_v), pool_k, pool_v, table = page_pool(
        rng, k, v, page_size, layout, shared_pages=max(1, 100 // page_size))
    lens = np.array([300, 290, 1, 157], np.int32)  # ending mid-page
    for num_splits in (1, 3):  # chunk edges that do not align with pages
        dense = flashdecode.decode_attention(
            q, dense_k, dense_v, lens, kv_layout=layout, num_splits=num_splits)
        paged = flashdecode.decode_attention(
            q, pool_k, pool_v, lens, kv_layout=layout, num_splits=num_splits,
            block_table=table)
        assert np.array_equal(paged, dense)
    expected, _ = attention(q.astype(np.float64), dense_k.astype(np.float64),
                            dense_v.astype(np.float64), lens, layout)
    assert relative_error(paged.astype(np.float64), expected) <= \
        (1e-5 if dtype == "float32" else 1e-2)


@pytest.mark.parametrize("query_len", [2, 8])
def test_paged_speculative_decoding(query_len):
    rng = np.random.default_rng()
    (q, k, v), (qx, _, _) = random_inputs(rng, "float32", (3, query_len, 4, 64),
                                          (3, 200, 1, 64))
    (dense_k, dense_v), pool_k, pool_v, table = page_pool(
        rng, k, v, 16, "NHD", shared_pages=2)
    lens = np.array([200, 37, 5], np.int32)
    out, lse = flashdecode.decode_attention(
        q, pool_k, pool_v, lens, block_table=table, num_splits=4,
        return_lse=True)
    expected, expected_lse = attention(qx, dense_k.astype(np.float64),
                                       dense_v.astype(np.float64), lens)
    assert relative_error(out.astype(np.float64), expected) <= 1e-5
    finite = np.isfinite(expected_lse)
    np.testing.assert_allclose(lse[finite], expected_lse[finite], rtol=1e-5,
                               atol=1e-5)


def test_block_table_errors():
    q = np.ones((2, 8, 64), np.float32)
    pool = np.ones((5, 16, 2, 64), np.float32)
    lens = np.array([16, 20], np.int32)
    table = np.array([[0, 1], [2, 3]], np.int32)
    with pytest.raises(ValueError, match=r"block_table entries must be page "
                                         r"indices in \[0, 5\)"):
        flashdecode.decode_attention(q, pool, pool, lens,
                                     block_table=np.array([[0, 5], [2, 3]], np.int32))
    with pytest.raises(ValueError, match=r"block_table entries must be page indices"):
        flashdecode.decode_attention(q, pool, pool, lens,
                                     block_table=np.array([[0, -1], [2, 3]], np.int32))
    with pytest.raises(ValueError, match=r"block_table must be \[B, max_pages\]"):
        flashdecode.decode_attention(q, pool, pool, lens, block_table=table[:1])
    with pytest.raises(TypeError, match="block_table must be a numpy int32 array"):
        flashdecode.decode_attention(q, pool, pool, lens,
                                     block_table=table.astype(np.int64))
    with pytest.raises(ValueError, match="page size 12 .* is not supported"):
        flashdecode.decode_attention(q, pool[:, :12].copy(), pool[:, :12].copy(),
                                     lens, block_table=table)
    with pytest.raises(ValueError, match=r"seq_lens must be in \[0, 32\]"):
        flashdecode.decode_attention(q, pool, pool, np.array([33, 1], np.int32),
                                     block_table=table)

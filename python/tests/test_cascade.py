"""cascade_decode on backend="cpu": R requests continuing one prefix equal
decode attention over their concatenated caches, against the float64
reference (cascade_checks.py) on fresh random inputs whose unused cache
positions hold NaN (FD_TEST_SEED reruns a failure): R = 1, 3, 64; prefixes
of 0, 1 and lengths not a multiple of the page or the chunk; suffixes of
different lengths, 0 among them; Lq = 4 causal; a window across the
prefix's end, ALiBi's distances from the prefix's start, soft-cap, sinks
counted once; more splits than prefix tokens; paged prefixes and suffixes,
HND; prefix_len as an array; the errors that name the argument."""
import numpy as np
import pytest

import flashdecode
from cascade_checks import Cascade, check_cascade


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("requests,prefix_len,suffix_lens", [
    (1, 1, [3]),
    (3, 0, [0, 7, 2]),
    (3, 37, [5, 0, 16]),
    (64, 150, None),
])
def test_equals_decode_over_the_concatenation(dtype, requests, prefix_len,
                                              suffix_lens):
    """GQA 8/2, one query token; R = 64 with suffixes 0 to 20."""
    if suffix_lens is None:
        suffix_lens = np.random.default_rng().integers(0, 21, requests)
    case = Cascade(dtype, requests, 1, 8, 2, 64, prefix_len, suffix_lens)
    check_cascade(case)


@pytest.mark.parametrize("num_splits", [None, 1, 50])
def test_every_rule_at_positions_from_the_prefix(num_splits):
    """Lq = 4 causal, suffixes 4, 2 (a query inside the prefix's last
    tokens' reach), 0 (queries among the prefix's last tokens) and 9; a
    window of 7 that ends inside the prefix for some rows; ALiBi,
    soft-cap, sinks; 50 splits: more than the prefix's 45 tokens."""
    case = Cascade("float32", 4, 4, 8, 2, 64, 45, [4, 2, 0, 9])
    for rules in ({}, {"window_left": 7}, {"window_left": 60},
                  {"alibi": True, "logits_soft_cap": 20.0, "sinks": True,
                   "window_left": 12}):
        check_cascade(case, num_splits=num_splits, **case.features(**rules))


@pytest.mark.parametrize("kv_layout", ["NHD", "HND"])
def test_paged_prefix_and_suffixes(kv_layout):
    """A prefix of 37 in pages of 16 (the last page part NaN), suffixes in
    pages of 8; equal to the dense run bit for bit."""
    case = Cascade("float16", 3, 2, 16, 4, 64, 37, [2, 11, 5])
    dense = check_cascade(case, kv_layout=kv_layout)
    paged = check_cascade(case, kv_layout=kv_layout, prefix_page_size=16,
                          suffix_page_size=8)
    np.testing.assert_array_equal(paged[0], dense[0])


def test_prefix_len_as_an_array():
    case = Cascade("float32", 3, 1, 8, 1, 128, 20, [1, 4, 0])
    check_cascade(case, prefix_len=np.array([20], np.int32))


def test_mha_and_mqa():
    for heads, kv_heads in ((4, 4), (16, 1)):
        case = Cascade("float16", 5, 2, heads, kv_heads, 32, 29,
                       [2, 3, 8, 2, 5])
        check_cascade(case, window_left=10)


def arguments(requests=2, prefix=8):
    rng = np.random.default_rng()
    q = rng.standard_normal((requests, 4, 32)).astype(np.float32)
    pk = rng.standard_normal((prefix, 2, 32)).astype(np.float32)
    k = rng.standard_normal((requests, 5, 2, 32)).astype(np.float32)
    return q, pk, pk.copy(), prefix, k, k.copy(), \
        np.full(requests, 3, np.int32)


@pytest.mark.parametrize("change,error,match", [
    (lambda a: a.__setitem__(1, a[1][None]), ValueError,
     r"prefix_k must be \[P, Hkv, D\]"),
    (lambda a: a.__setitem__(3, -1), ValueError,
     r"prefix_len must be in \[0, 8\] \(what the prefix's cache holds\)"),
    (lambda a: a.__setitem__(3, np.array([9], np.int32)), ValueError,
     r"prefix_len must be in \[0, 8\]"),
    (lambda a: a.__setitem__(3, np.array([1, 2], np.int32)), ValueError,
     "prefix_len must be an int or a 1-element int32 array"),
    (lambda a: a.__setitem__(6, np.full(3, 1, np.int32)), ValueError,
     r"seq_lens must have shape \(2,\)"),
    (lambda a: a.__setitem__(6, np.full(2, 6, np.int32)), ValueError,
     r"seq_lens must be in \[0, 5\]"),
])
def test_bad_arguments(change, error, match):
    given = list(arguments())
    change(given)
    with pytest.raises(error, match=match):
        flashdecode.cascade_decode(*given)


def test_bad_options():
    given = arguments()
    with pytest.raises(ValueError, match="backend must be 'cpu' or 'cuda'"):
        flashdecode.cascade_decode(*given, backend="tpu")
    with pytest.raises(ValueError, match="stream is for backend='cuda'"):
        flashdecode.cascade_decode(*given, stream=1)
    with pytest.raises(ValueError, match=r"prefix_block_table must be "
                       r"\[num_prefix_pages\]"):
        flashdecode.cascade_decode(*given, prefix_block_table=np.zeros(
            (1, 1), np.int32))
    with pytest.raises(TypeError):
        flashdecode.cascade_decode(*given, query_lens=np.ones(2, np.int32))

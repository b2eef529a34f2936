"""ALiBi (alibi_slopes=, BLOOM/MPT) on the CPU backend: what only ALiBi has,
against the float64 reference of reference.py (BLOOM's slopes) and by hand
(the bias alone). What it shares with attention sinks is test_per_head.py's
(per_head_checks.py: the runner).

Inputs are fresh random numbers on every run; a failure names its seed.
"""
import numpy as np
import pytest

import flashdecode
from per_head_checks import run_splits
from reference import Inputs, bloom_slopes

BACKEND = "cpu"


@pytest.mark.parametrize("num_q_heads,num_kv_heads", [(8, 2), (16, 16)])
def test_bloom_slopes(num_q_heads, num_kv_heads):
    """BLOOM's geometric slopes 2^(-8i/H), HND caches, head dim 128."""
    inputs = Inputs("float32", (3, num_q_heads, 128),
                    (3, num_kv_heads, 180, 128))
    run_splits(BACKEND, inputs, inputs.lengths(180, 0, 91),
               {"alibi_slopes": bloom_slopes(num_q_heads)},
               splits=(1, 3, None), kv_layout="HND")


def test_the_bias_favours_the_nearest_keys():
    """Hand-computable: with q = 0 every score is the bias alone, so a
    slope of 1000 puts all the weight on the query's own key (out = v[p],
    lse = 0), a slope of ln 2 weighs key j by 2^(j - p), and slope 0 is
    the mean of the visible values."""
    rng = np.random.default_rng()
    v = rng.normal(size=(2, 40, 1, 64)).astype(np.float32)
    q = np.zeros((2, 3, 3, 64), np.float32)
    lens = np.array([40, 7], np.int32)
    slopes = np.array([1000.0, np.log(2.0), 0.0], np.float32)
    for num_splits in (1, 4):
        out, lse = flashdecode.decode_attention(
            q, v, v, lens, alibi_slopes=slopes, return_lse=True,
            num_splits=num_splits)
        for b, length in enumerate(lens):
            for t in range(3):
                p = length - 3 + t
                context = f"splits={num_splits} b={b} t={t}"
                np.testing.assert_allclose(out[b, t, 0], v[b, p, 0],
                                           rtol=1e-6, err_msg=context)
                assert abs(lse[b, t, 0]) < 1e-6, context
                weights = 2.0 ** (np.arange(p + 1) - p)
                np.testing.assert_allclose(
                    out[b, t, 1], weights @ v[b, :p + 1, 0] / weights.sum(),
                    rtol=1e-5, atol=1e-6, err_msg=context)
                np.testing.assert_allclose(
                    lse[b, t, 1], np.log(weights.sum()), rtol=1e-5,
                    err_msg=context)
                np.testing.assert_allclose(
                    out[b, t, 2], v[b, :p + 1, 0].mean(axis=0), rtol=1e-5,
                    atol=1e-6, err_msg=context)

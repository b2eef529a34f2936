"""Attention sinks (sinks=, gpt-oss) on the CPU backend: what only the sinks
have, against the float64 reference of reference.py (head dims 128 and 256,
sinks that take the whole softmax or none of it). What they share with ALiBi
is test_per_head.py's (per_head_checks.py: the runner).

Inputs (and sinks) are fresh random numbers on every run; a failure names
its seed.
"""
import numpy as np
import pytest

import flashdecode
from per_head_checks import run, run_splits
from reference import Inputs, random_sinks

BACKEND = "cpu"


@pytest.mark.parametrize("head_dim", [128, 256])
def test_larger_head_dims(head_dim):
    inputs = Inputs("float16", (3, 8, head_dim), (3, 150, 2, head_dim))
    sinks = random_sinks(inputs.rng, 8)
    run_splits(BACKEND, inputs, inputs.lengths(0, 77, 150), {"sinks": sinks},
               splits=(1, 64))


def test_extreme_sinks():
    """A sink of 1e4 takes the whole softmax (out 0 in float, lse = 1e4);
    -1e4 and -inf none of it (plain attention)."""
    inputs = Inputs("float32", (2, 4, 64), (2, 60, 1, 64))
    q, k, v = inputs.stored
    lens = inputs.lengths(60, 7)
    sinks = np.array([1e4, -1e4, -np.inf, 0.5], np.float32)
    plain, plain_lse = flashdecode.decode_attention(
        q, k, v, lens, return_lse=True, num_splits=4)
    for num_splits in (1, 4, 16):
        out, lse = run(BACKEND, inputs, lens, {"sinks": sinks},
                       num_splits=num_splits)
        context = f"seed={inputs.seed} splits={num_splits}"
        assert not out[:, 0].any(), context
        np.testing.assert_array_equal(lse[:, 0], [1e4, 1e4], err_msg=context)
        np.testing.assert_allclose(out[:, 1:3], plain[:, 1:3], rtol=1e-5,
                                   atol=1e-6, err_msg=context)
        # Other split counts than plain's round otherwise: an lse's error
        # is absolute (a relative bound alone fails on an lse near 0).
        np.testing.assert_allclose(lse[:, 1:3], plain_lse[:, 1:3],
                                   rtol=1e-6, atol=1e-6, err_msg=context)

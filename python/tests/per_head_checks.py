"""Shared by the tests of the two per-query-head float32 buffers, attention
sinks (sinks=, gpt-oss: one logit per query head joins every row's softmax
denominator) and ALiBi (alibi_slopes=, BLOOM/MPT: the score of query head h
at position p for key j gains slope_h * (j - p)): what sets them apart
(FEATURES) and one runner for both backends checked against the float64
reference of reference.py. test_per_head.py (backend="cpu") and
test_per_head_cuda_emulated.py (backend="cuda" over DeviceArrays) run each
of their tests on both; test_sinks.py and test_alibi.py keep what only one
of them has. The bad-buffer suites are per_head_buffers.py's.
"""
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray

from per_head_buffers import TOLERANCE, bf16, check_device, to_device
from reference import (attention, bloom_slopes, check_split_counts_agree,
                       check_with_sinks, random_alibi_slopes, random_sinks)

# TOLERANCE (the output's, per_head_buffers.py) is both backends'; the lse's
# is tighter on the CPU than on the GPU (exp2/log2).
LSE_TOLERANCE = {"cpu": 1e-5, "cuda": 1e-3}
DTYPES = ("float32", "float16", "bfloat16")
HEADS = {"GQA": (8, 2), "MQA": (4, 1), "MHA": (4, 4)}
SPLITS = (1, 3, None, 16)


@dataclass(frozen=True)
class Feature:
    """A per-query-head float32 buffer: its argument `name`, the compile
    flag, the kernel that reads it (the parameter list that kernel has
    with it and nothing else), its values, and the runtime's words."""
    name: str
    flag: str
    kernel: str
    params: tuple
    # random(rng, num_q_heads) -> float32 [Hq]; alternative: other values
    # (BLOOM's slopes; for sinks fresh random ones).
    random: Callable
    alternative: Callable
    # The value of plain attention (no sink, no bias).
    neutral: float
    # empty_lse(values): the lse of a row without keys (the sink; -inf
    # with ALiBi: no key to bias).
    empty_lse: Callable
    # The other per-head buffer (to run beside this one).
    other: str
    # How many positional False come before this flag's slot in
    # KernelRequest (they are keyword-only: one more positional fails).
    flag_slot: int
    # CPUKernel.run's ValueError (regular expressions).
    cpu_required: str
    cpu_forbidden: str
    # fdrt's DecodePlan (through _flashdecode.CudaPlan): its name for the
    # buffer and its words without it.
    plan_field: str
    plan_forbidden: str


FEATURES = {
    "sinks": Feature(
        name="sinks", flag="with_sinks", kernel="fd_merge",
        params=("partial_output", "partial_lse", "output", "lse", "sinks"),
        random=random_sinks, alternative=random_sinks, neutral=-np.inf,
        empty_lse=lambda sinks: sinks, other="alibi_slopes", flag_slot=0,
        cpu_required="reads attention sinks: sinks",
        cpu_forbidden="without attention sinks: sinks must be None",
        plan_field="sinks", plan_forbidden="without attention sinks"),
    "alibi_slopes": Feature(
        name="alibi_slopes", flag="with_alibi", kernel="fd_partial_attention",
        params=("query", "key_cache", "value_cache", "seq_lens",
                "partial_output", "partial_lse", "max_len", "alibi_slopes"),
        random=random_alibi_slopes,
        alternative=lambda rng, heads: bloom_slopes(heads), neutral=0.0,
        empty_lse=lambda slopes: np.full_like(slopes, -np.inf),
        other="sinks", flag_slot=1,
        cpu_required="applies ALiBi: alibi_slopes",
        cpu_forbidden="without ALiBi: alibi_slopes must be None",
        plan_field="alibiSlopes", plan_forbidden="without ALiBi"),
}

# @each_feature: a test's `name` argument runs over FEATURES.
each_feature = pytest.mark.parametrize("name", FEATURES)


def feature_cases(cases):
    """pytest params (name, *values) of cases(name) -> [pytest.param] for
    every feature, their ids prefixed with the name."""
    return [pytest.param(name, *case.values, id=f"{name}-{case.id}")
            for name in FEATURES for case in cases(name)]


def beside(name, values, other=None):
    """The buffers of a call: `values` for `name`, and `other` (None: not
    given) for the other per-head buffer."""
    return {name: values, FEATURES[name].other: other}


def cache_shape(layout, batch, max_len, num_kv_heads, head_dim):
    return (batch, max_len, num_kv_heads, head_dim) if layout == "NHD" \
        else (batch, num_kv_heads, max_len, head_dim)


def describe(values):
    return None if values is None else values.tolist()


def run(backend, inputs, lens, buffers, *, num_splits=None, kv_layout="NHD",
        scale=None, window=None, cap=None, block_table=None, caches=None):
    """decode_attention(return_lse=True) on `backend` with `buffers`
    ({"sinks": ..., "alibi_slopes": ...}: numpy float32 [Hq], None for
    none; DeviceArrays on backend="cuda") against the float64 reference;
    returns the host (out, lse)."""
    buffers = {name: values for name, values in buffers.items()
               if values is not None}
    q, k, v = inputs.stored
    if caches is not None:
        k, v = caches
    dtype = inputs.dtype
    rules = {"kv_layout": kv_layout, "scale": scale, "window_left": window,
             "logits_soft_cap": cap}
    if backend == "cpu":
        out, lse = flashdecode.decode_attention(
            q, k, v, lens, num_splits=num_splits, block_table=block_table,
            return_lse=True, dtype=bf16(dtype), **rules, **buffers)
        assert out.dtype == q.dtype and lse.dtype == np.float32
    else:
        paged = {} if block_table is None else \
            {"block_table": DeviceArray.from_numpy(block_table)}
        out, lse = flashdecode.decode_attention(
            *to_device(q, k, v, dtype=bf16(dtype)),
            DeviceArray.from_numpy(lens), backend="cuda", return_lse=True,
            num_splits=num_splits, **rules, **paged,
            **{name: DeviceArray.from_numpy(values)
               for name, values in buffers.items()})
    assert out.shape == q.shape and lse.shape == q.shape[:-1]
    expected, expected_lse = attention(*inputs.exact, lens, **rules,
                                       **buffers)
    context = (f"{backend} seed={inputs.seed} dtype={dtype} q={q.shape} "
               f"layout={kv_layout} lens={lens.tolist()} "
               f"sinks={describe(buffers.get('sinks'))} "
               f"slopes={describe(buffers.get('alibi_slopes'))} "
               f"window={window} cap={cap} splits={num_splits} "
               f"scale={scale} paged={block_table is not None}")
    if backend == "cpu":
        check_with_sinks(out, lse, expected, expected_lse, lens, dtype,
                         TOLERANCE[dtype], LSE_TOLERANCE[backend], context)
        return out, lse
    check_device(out, lse, expected, expected_lse, dtype, lens, context)
    return out.numpy(), lse.numpy()


def run_splits(backend, inputs, lens, buffers, splits=SPLITS, **options):
    """run() for each split count; the results must also agree with each
    other (the sinks count once, in the merge; each split knows its keys'
    absolute positions)."""
    results = [(num_splits,) + run(backend, inputs, lens, buffers,
                                   num_splits=num_splits, **options)
               for num_splits in splits]
    check_split_counts_agree(results, inputs.dtype, TOLERANCE[inputs.dtype],
                             LSE_TOLERANCE[backend], f"seed={inputs.seed}")

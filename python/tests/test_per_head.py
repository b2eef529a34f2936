"""Attention sinks (sinks=) and ALiBi (alibi_slopes=) on the CPU backend,
against the float64 reference of reference.py: each test runs on both
per-query-head buffers (per_head_checks.FEATURES). A sink joins every row's
softmax denominator once (the lse includes it, a row without keys is zeros
with lse = the sink); the ALiBi bias comes after the scale and the
soft-cap, before the softmax (a row without keys: zeros, lse -inf); the
split count changes nothing beyond rounding. What only one of them has is
test_sinks.py's and test_alibi.py's.

Inputs (and sinks, slopes) are fresh random numbers on every run; a failure
names its seed.
"""
import numpy as np
import pytest

import flashdecode
from per_head_buffers import TOLERANCE, check_bad_host_buffer, host_cases
from per_head_checks import (DTYPES, FEATURES, HEADS, LSE_TOLERANCE, SPLITS,
                             beside, cache_shape, each_feature,
                             feature_cases, run, run_splits)
from reference import Inputs, attention, check_with_sinks, page_pool

BACKEND = "cpu"


def check(out, lse, expected, expected_lse, dtype, lens, context):
    """out (in `dtype` storage) and lse against the float64 reference:
    overall and row by row, rows without keys zeros."""
    check_with_sinks(out, lse, expected, expected_lse, lens, dtype,
                     TOLERANCE[dtype], LSE_TOLERANCE[BACKEND], context)


@each_feature
@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_float64_for_every_split(dtype, layout, heads, name):
    """Lengths 0 (zeros; lse the sink, -inf with ALiBi), 1, 2, odd, not a
    multiple of any chunk, full; splits 1, 3, automatic and 16 (more than
    the short sequences have keys); slopes random with a 0 and a 1.0."""
    num_q_heads, num_kv_heads = HEADS[heads]
    inputs = Inputs(dtype, (6, num_q_heads, 64),
                    cache_shape(layout, 6, 200, num_kv_heads, 64))
    values = FEATURES[name].random(inputs.rng, num_q_heads)
    lens = inputs.lengths(0, 1, 2, 37, 129, 200)
    run_splits(BACKEND, inputs, lens, {name: values}, kv_layout=layout)


@each_feature
@pytest.mark.parametrize("query_len", [2, 4, 5, 8])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_several_query_tokens(query_len, dtype, name):
    """Lq > 1: each token has its own position (with ALiBi its own
    distances to the keys); a token before the first key (lengths shorter
    than Lq) is zeros with lse = its head's sink (-inf with ALiBi); the
    others count the sink once."""
    feature = FEATURES[name]
    inputs = Inputs(dtype, (6, query_len, 8, 64), (6, 120, 2, 64))
    values = feature.random(inputs.rng, 8)
    lens = inputs.lengths(0, 1, query_len - 1, query_len + 1, 97, 120)
    run_splits(BACKEND, inputs, lens, {name: values},
               splits=(1, 5, None, 16))
    _, lse = run(BACKEND, inputs, lens, {name: values}, num_splits=3)
    np.testing.assert_array_equal(
        lse[0], np.broadcast_to(feature.empty_lse(values), lse[0].shape))


# Per feature: the head layouts, the split counts and the (window, cap,
# with the other per-head buffer beside) of each run.
# The scale that gives q of magnitude 10 (D = 64) unit scores.
UNCAPPED_SCALE = 1.0 / (10.0 * 8.0)

WINDOW_CAP = {
    "sinks": (tuple(HEADS), SPLITS,
              ((1, 4.0, False), (19, 4.0, False), (64, None, False),
               (None, 2.0, False), (400, 30.0, False))),
    "alibi_slopes": (("GQA", "MHA"), (1, 3),
                     ((1, 4.0, False), (19, 4.0, True), (64, None, True),
                      (None, 2.0, False), (None, None, True))),
}


@pytest.mark.parametrize("name,heads", [
    pytest.param(name, heads, id=f"{name}-{heads}")
    for name, (layouts, _, _) in WINDOW_CAP.items() for heads in layouts])
@pytest.mark.parametrize("query_len", [1, 4])
@pytest.mark.parametrize("dtype", DTYPES)
def test_with_a_window_and_a_soft_cap(dtype, query_len, name, heads):
    """The sink is neither windowed nor capped: a score capped at 4 never
    reaches a sink of 15, however large q is. The ALiBi bias comes after
    the cap (a capped score plus the bias can go below -cap), is windowed
    like the scores, and a sink beside it gains none."""
    feature = FEATURES[name]
    _, splits, runs = WINDOW_CAP[name]
    num_q_heads, num_kv_heads = HEADS[heads]
    inputs = Inputs(dtype, (5, query_len, num_q_heads, 64),
                    (5, 160, num_kv_heads, 64), q_magnitude=10.0)
    values = feature.random(inputs.rng, num_q_heads)
    other = FEATURES[feature.other].random(inputs.rng, num_q_heads)
    lens = inputs.lengths(0, 1, 3, 101, 160)
    for window, cap, with_other in runs:
        # Uncapped, q of 10 would put scores ~10 apart, where f32
        # arithmetic alone errs by about the 1e-5 tolerance: scale back.
        run_splits(BACKEND, inputs, lens,
                   beside(name, values, other if with_other else None),
                   splits=splits, window=window, cap=cap,
                   scale=None if cap else UNCAPPED_SCALE)


@each_feature
def test_with_a_scale(name):
    """An explicit scale scales the scores, not the sinks nor the bias.
    Queries of 0.25: at scale 2 unit queries put scores ~16 apart, where
    f32 arithmetic alone (any kernel) errs by about 1e-5, the tolerance."""
    inputs = Inputs("float32", (2, 4, 64), (2, 90, 4, 64), q_magnitude=0.25)
    values = FEATURES[name].random(inputs.rng, 4)
    lens = inputs.lengths(90, 13)
    for scale in (0.05, 0.3, 2.0):
        run_splits(BACKEND, inputs, lens, {name: values}, splits=(1, 3),
                   scale=scale)


@each_feature
@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_paged_caches(dtype, layout, page_size, name):
    """A key's distance (ALiBi) is its position in the sequence, not in
    the pool; then a window and a cap, alone and with the other per-head
    buffer beside."""
    feature = FEATURES[name]
    inputs = Inputs(dtype, (4, 2, 8, 64), cache_shape(layout, 4, 96, 2, 64))
    q, k, v = inputs.stored
    pool_k, pool_v, table = page_pool(inputs.rng, k, v, page_size, layout)
    values = feature.random(inputs.rng, 8)
    lens = inputs.lengths(96, 0, 1, 37)
    paged = {"kv_layout": layout, "block_table": table,
             "caches": (pool_k, pool_v)}
    run_splits(BACKEND, inputs, lens, {name: values}, **paged)
    other = FEATURES[feature.other].random(inputs.rng, 8)
    for with_other in (False, True):
        run_splits(BACKEND, inputs, lens,
                   beside(name, values, other if with_other else None),
                   splits=(3,), window=21, cap=3.0, **paged)


@each_feature
@pytest.mark.parametrize("num_splits", SPLITS)
def test_rows_without_keys_are_zeros(num_splits, name):
    """Every sequence empty: zeros everywhere and lse = sinks (-inf for a
    -inf sink: no sink and no key is the old empty row); -inf with ALiBi."""
    feature = FEATURES[name]
    inputs = Inputs("float32", (3, 2, 8, 64), (3, 40, 2, 64))
    q, k, v = inputs.stored
    values = feature.random(inputs.rng, 8)
    empty = feature.empty_lse(values)
    out, lse = flashdecode.decode_attention(
        q, k, v, inputs.lengths(0, 0, 0), return_lse=True,
        num_splits=num_splits, **{name: values})
    assert not out.any(), f"seed={inputs.seed}"
    np.testing.assert_allclose(lse, np.broadcast_to(empty, lse.shape),
                               rtol=1e-7, err_msg=f"seed={inputs.seed}")
    assert np.isneginf(lse[..., np.isneginf(empty)]).all()


@each_feature
def test_neutral_values_are_plain_attention(name):
    """Every sink -inf, every slope 0: the attention without them, bit for
    bit."""
    inputs = Inputs("bfloat16", (4, 8, 64), (4, 80, 2, 64))
    q, k, v = inputs.stored
    lens = inputs.lengths(0, 1, 33, 80)
    values = np.full(8, FEATURES[name].neutral, np.float32)
    for num_splits in (1, 5):
        out, lse = run(BACKEND, inputs, lens, {name: values},
                       num_splits=num_splits)
        plain, plain_lse = flashdecode.decode_attention(
            q, k, v, lens, return_lse=True, num_splits=num_splits,
            dtype="bfloat16")
        np.testing.assert_array_equal(out, plain,
                                      err_msg=f"seed={inputs.seed}")
        np.testing.assert_allclose(lse, plain_lse, rtol=1e-6,
                                   err_msg=f"seed={inputs.seed}")


@each_feature
def test_the_kernel_cache_keys_on_the_buffer(name):
    """The same shapes with and without the buffer are two kernels; new
    values reuse the kernel and give the new attention."""
    feature = FEATURES[name]
    inputs = Inputs("float16", (3, 8, 64), (3, 70, 2, 64))
    q, k, v = inputs.stored
    lens = inputs.lengths(70, 0, 21)
    first = feature.random(inputs.rng, 8)
    run(BACKEND, inputs, lens, {name: first}, num_splits=3)
    out, lse = flashdecode.decode_attention(q, k, v, lens, num_splits=3,
                                            return_lse=True)
    expected, expected_lse = attention(*inputs.exact, lens)
    check(out, lse, expected, expected_lse, "float16", lens,
          f"seed={inputs.seed} without {name}")
    run(BACKEND, inputs, lens, {name: feature.alternative(inputs.rng, 8)},
        num_splits=3)
    run(BACKEND, inputs, lens, {name: first}, num_splits=3)


@each_feature
def test_without_lse(name):
    inputs = Inputs("float32", (2, 8, 64), (2, 50, 2, 64))
    q, k, v = inputs.stored
    lens = inputs.lengths(50, 0)
    values = FEATURES[name].random(inputs.rng, 8)
    out = flashdecode.decode_attention(q, k, v, lens, num_splits=2,
                                       **{name: values})
    expected, expected_lse = attention(*inputs.exact, lens,
                                       **{name: values})
    check(out, None, expected, expected_lse, "float32", lens,
          f"seed={inputs.seed}")


def kernel_params(kernel):
    return {spec["name"]: [p["name"] for p in spec["params"]]
            for spec in kernel.manifest["kernels"]}


@each_feature
def test_compile_with_the_buffer(name):
    """One kernel takes the buffer, last: the merge the sinks (they count
    once), the partial kernel the slopes; the other does not; the manifest
    says with_sinks/with_alibi; another kernel."""
    feature = FEATURES[name]
    kernel = flashdecode.compile(64, 8, 2, num_splits=4, return_lse=True,
                                 **{feature.flag: True})
    assert kernel.manifest["config"][feature.flag] is True
    params = kernel_params(kernel)
    assert params[feature.kernel] == list(feature.params)
    assert sorted(params) == ["fd_merge", "fd_partial_attention"]
    for other in params:
        if other != feature.kernel:
            assert name not in params[other]
    plain = flashdecode.compile(64, 8, 2, num_splits=4, return_lse=True)
    assert plain.manifest["config"][feature.flag] is False
    assert name not in [p for names in kernel_params(plain).values()
                        for p in names]
    assert plain.ptx[feature.kernel] != kernel.ptx[feature.kernel]
    assert flashdecode.compile(64, 8, 2, num_splits=4, **{
        feature.flag: False}).manifest["config"][feature.flag] is False


def test_compile_with_sinks_and_alibi():
    """Both: each buffer last in its kernel."""
    both = flashdecode.compile(64, 8, 2, num_splits=4, with_alibi=True,
                               with_sinks=True)
    params = kernel_params(both)
    assert params["fd_partial_attention"][-1] == "alibi_slopes"
    assert params["fd_merge"][-1] == "sinks"


@each_feature
@pytest.mark.parametrize("value", [1, 0, "yes", None, np.bool_(True)])
def test_compile_flag_must_be_a_bool(value, name):
    flag = FEATURES[name].flag
    with pytest.raises(ValueError, match=f"{flag} must be True or False"):
        flashdecode.compile(64, 8, 2, **{flag: value})


@each_feature
def test_the_native_layer_checks_the_buffer(name):
    """_flashdecode: KernelRequest's keyword-only with_sinks/with_alibi (in
    the cache key, its repr); CPUKernel.run requires the buffer exactly
    when compiled with it, float32 of Hq elements, C-contiguous, and with
    both compiled in the other one too."""
    feature = FEATURES[name]
    native = flashdecode._flashdecode
    positional = (64, 8, 2, 1, "f32", "NHD", 0, 2, True, None, False, 1,
                  4096, 132, "sm_90")
    assert f"{feature.flag}=1" in repr(native.KernelRequest(
        *positional, **{feature.flag: True}))
    assert f"{feature.flag}=0" in repr(native.KernelRequest(*positional))
    with pytest.raises(TypeError):
        native.KernelRequest(*positional, 4, 128, 128, 0, None,
                            *(False,) * feature.flag_slot, True)
    inputs = Inputs("float32", (1, 8, 64), (1, 16, 2, 64))
    q, k, v = inputs.stored
    lens = inputs.lengths(9)
    out = np.empty_like(q)
    values = feature.random(inputs.rng, 8)
    with_it = native.CPUKernel(native.KernelRequest(
        *positional, **{feature.flag: True}))
    without = native.CPUKernel(native.KernelRequest(*positional))
    with pytest.raises(ValueError, match=feature.cpu_required):
        with_it.run(q, k, v, lens, out, None, 1, 16)
    with pytest.raises(ValueError, match=feature.cpu_forbidden):
        without.run(q, k, v, lens, out, None, 1, 16, **{name: values})
    with pytest.raises(ValueError, match=f"{name} holds 28 bytes, "
                       "expected 32"):
        with_it.run(q, k, v, lens, out, None, 1, 16, **{name: values[:7]})
    with pytest.raises(ValueError, match=f"{name} must be float32"):
        with_it.run(q, k, v, lens, out, None, 1, 16,
                    **{name: values.astype(np.float64)})
    with pytest.raises(ValueError, match=f"{name} must be C-contiguous"):
        with_it.run(q, k, v, lens, out, None, 1, 16,
                    **{name: np.repeat(values, 2)[::2]})
    with pytest.raises(ValueError,
                       match=FEATURES[feature.other].cpu_required):
        native.CPUKernel(native.KernelRequest(
            *positional, with_sinks=True, with_alibi=True)).run(
                q, k, v, lens, out, None, 1, 16, **{name: values})
    with_it.run(q, k, v, lens, out, None, 1, 16, **{name: values})
    expected, expected_lse = attention(*inputs.exact, lens,
                                       **{name: values})
    check(out, None, expected, expected_lse, "float32", lens,
          f"seed={inputs.seed}")


# Bad buffers: per_head_buffers.py's suite.

@pytest.mark.parametrize("name,make,words", feature_cases(host_cases))
def test_bad_buffers_name_the_argument(name, make, words):
    check_bad_host_buffer(name, make, words)

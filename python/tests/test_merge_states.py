"""merge_states, merge_state and merge_state_in_place on the CPU against a
float64 merge: every dtype, state counts 1 to 512, head dims 32 to 512, no
rows, empty (-inf and +inf), NaN and masked rows, base 2 against base e,
associativity, in-place aliasing, torch CPU tensors, and decode attention
over a split cache merged back to the whole."""
import numpy as np
import pytest

import flashdecode
from reference import (attention, decode, from_bfloat16_bits,
                       to_bfloat16_bits)

# The output is rounded once from float32; the lse is float32.
OUT_TOLERANCE = {"float32": 2e-6, "float16": 1e-3, "bfloat16": 8e-3}
LSE_TOLERANCE = 2e-6


def reference_merge(v, s, base2=False):
    """float64 merge of v [T, N, H, D] (exact float64 values) with lses
    s [T, N, H]: (out [T, H, D], lse [T, H])."""
    s = np.asarray(s, np.float64)
    empty = np.isinf(s)
    lse = np.where(empty, -np.inf, s)
    top = np.max(lse, axis=1)
    shift = np.where(np.isneginf(top), 0.0, top)
    power = np.exp2 if base2 else np.exp
    with np.errstate(invalid="ignore"):
        weights = power(lse - shift[:, None, :])
    weights = np.where(empty, 0.0, weights)
    total = weights.sum(axis=1)
    values = np.where(empty[..., None], 0.0, v)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (weights[..., None] * values).sum(axis=1) / \
            np.where(total == 0, 1.0, total)[..., None]
        log = np.log2 if base2 else np.log
        merged = np.where(np.isneginf(top), -np.inf, top + log(total))
    out = np.where(np.isneginf(top)[..., None], 0.0, out)
    return out, merged


def random_states(rng, dtype, shape):
    """(array in dtype's storage, its exact float64 values)."""
    values = rng.standard_normal(shape).astype(np.float32)
    if dtype == "bfloat16":
        bits = to_bfloat16_bits(values)
        return bits, from_bfloat16_bits(bits).astype(np.float64)
    array = values.astype(dtype)
    return array, array.astype(np.float64)


def random_lses(rng, shape):
    """lses spread over a few units, as attention's are."""
    return (3.0 * rng.standard_normal(shape)).astype(np.float32)


def check(out, lse, expected, expected_lse, dtype, context=""):
    actual = decode(out, dtype)
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    np.testing.assert_allclose(actual, expected, rtol=0,
                               atol=OUT_TOLERANCE[dtype] * scale,
                               err_msg=context)
    np.testing.assert_allclose(lse, expected_lse, rtol=0,
                               atol=LSE_TOLERANCE * max(
                                   1.0, float(np.max(np.abs(expected_lse[
                                       np.isfinite(expected_lse)]),
                                       initial=0.0))),
                               err_msg=context)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("rows,count,heads,head_dim", [
    (7, 2, 8, 128), (1, 1, 1, 32), (3, 8, 4, 64), (5, 3, 2, 512),
    (2, 512, 1, 32), (4, 17, 3, 264)])
def test_merge_states_matches_a_float64_merge(dtype, rows, count, heads,
                                              head_dim):
    rng = np.random.default_rng()
    v, exact = random_states(rng, dtype, (rows, count, heads, head_dim))
    s = random_lses(rng, (rows, count, heads))
    out, lse = flashdecode.merge_states(v, s)
    assert out.dtype == v.dtype and out.shape == (rows, heads, head_dim)
    assert lse.dtype == np.float32 and lse.shape == (rows, heads)
    check(out, lse, *reference_merge(exact, s), dtype)


def test_no_rows():
    v = np.zeros((0, 2, 4, 64), np.float16)
    out, lse = flashdecode.merge_states(v, np.zeros((0, 2, 4), np.float32))
    assert out.shape == (0, 4, 64) and lse.shape == (0, 4)


def test_empty_and_nan_states():
    """Per (row, head): -inf and +inf lses are empty and never read (their
    rows hold NaN); all empty gives zeros and -inf; a NaN lse gives a NaN
    row; a NaN element of a live state that element alone."""
    rng = np.random.default_rng()
    v, exact = random_states(rng, "float32", (6, 3, 2, 32))
    s = random_lses(rng, (6, 3, 2))
    s[0, 0, :] = -np.inf
    s[1, 2, :] = np.inf
    s[2, :, 0] = -np.inf
    s[2, :, 1] = [np.inf, -np.inf, np.inf]
    v[[0, 1, 2], [0, 2, 0]] = np.nan
    v[2, 1:] = np.nan
    s[3, 1, 0] = np.nan
    v[4, 1, 1, 5] = np.nan
    exact = v.astype(np.float64)
    out, lse = flashdecode.merge_states(v, s)
    expected, expected_lse = reference_merge(exact, s)
    # Rows 0 and 1: the live states only.
    live = [i for i in range(3) if i != 0]
    check(out[0], lse[0], *(x[0] for x in reference_merge(
        exact[0:1, live], s[0:1, live])), "float32")
    check(out[1], lse[1], *(x[0] for x in reference_merge(
        exact[1:2, :2], s[1:2, :2])), "float32")
    assert np.all(out[2] == 0) and np.all(np.isneginf(lse[2]))
    assert np.all(np.isnan(out[3, 0])) and np.isnan(lse[3, 0])
    assert not np.any(np.isnan(out[3, 1])) and np.isfinite(lse[3, 1])
    assert np.isnan(out[4, 1, 5])
    assert np.sum(np.isnan(out[4])) == 1 and np.all(np.isfinite(lse[4]))
    check(out[5], lse[5], expected[5], expected_lse[5], "float32")


def test_base_2_is_base_e_scaled():
    """lse_base="2" reads and writes base-2 lses: the same merge as base e
    on lses times log2(e)."""
    rng = np.random.default_rng()
    v, exact = random_states(rng, "float16", (9, 4, 3, 96))
    s = random_lses(rng, (9, 4, 3))
    s[0, 1, 2] = -np.inf
    out_e, lse_e = flashdecode.merge_states(v, s)
    out_2, lse_2 = flashdecode.merge_states(
        v, (s * np.log2(np.e)).astype(np.float32), lse_base="2")
    check(out_2, lse_2, *reference_merge(
        exact, s.astype(np.float64) * np.log2(np.e), base2=True), "float16")
    np.testing.assert_allclose(decode(out_2, "float16"),
                               decode(out_e, "float16"), atol=2e-3)
    np.testing.assert_allclose(lse_2, lse_e * np.log2(np.e), rtol=1e-5,
                               atol=1e-5)
    # The base matters: base-e lses read as base 2 merge differently.
    assert not np.allclose(flashdecode.merge_states(v, s, lse_base="2")[1],
                           lse_e, atol=1e-3)


def test_merging_is_associative():
    """merge(merge(a, b), c) = merge(a, b, c) = merge(a, merge(b, c))."""
    rng = np.random.default_rng()
    v, _ = random_states(rng, "float32", (5, 3, 4, 128))
    s = random_lses(rng, (5, 3, 4))
    s[1, 0, :] = -np.inf
    whole = flashdecode.merge_states(v, s)
    a, b, c = (np.ascontiguousarray(v[:, n]) for n in range(3))
    s_a, s_b, s_c = (np.ascontiguousarray(s[:, n]) for n in range(3))
    left = flashdecode.merge_state(*flashdecode.merge_state(a, s_a, b, s_b),
                                   c, s_c)
    right = flashdecode.merge_state(a, s_a,
                                    *flashdecode.merge_state(b, s_b, c, s_c))
    for out, lse in (left, right):
        np.testing.assert_allclose(out, whole[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(lse, whole[1], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_merge_state_is_merge_states_of_two(dtype):
    rng = np.random.default_rng()
    a, exact_a = random_states(rng, dtype, (6, 8, 64))
    b, exact_b = random_states(rng, dtype, (6, 8, 64))
    s_a, s_b = random_lses(rng, (6, 8)), random_lses(rng, (6, 8))
    out, lse = flashdecode.merge_state(a, s_a, b, s_b)
    check(out, lse, *reference_merge(np.stack([exact_a, exact_b], 1),
                                     np.stack([s_a, s_b], 1)), dtype)


@pytest.mark.parametrize("mask_dtype", [np.bool_, np.uint8])
def test_in_place_merges_the_masked_rows_only(mask_dtype):
    rng = np.random.default_rng()
    v, exact = random_states(rng, "float16", (8, 4, 256))
    other, exact_other = random_states(rng, "float16", (8, 4, 256))
    s, s_other = random_lses(rng, (8, 4)), random_lses(rng, (8, 4))
    s_other[3] = -np.inf
    mask = np.array([1, 0, 1, 1, 0, 0, 1, 1], mask_dtype)
    before, before_lse = v.copy(), s.copy()
    flashdecode.merge_state_in_place(v, s, other, s_other, mask)
    expected, expected_lse = reference_merge(
        np.stack([exact, exact_other], 1), np.stack([before_lse, s_other], 1))
    rows = mask.astype(bool)
    check(v[rows], s[rows], expected[rows], expected_lse[rows], "float16")
    # Unmasked rows keep their bits.
    assert np.array_equal(v[~rows].view(np.uint16),
                          before[~rows].view(np.uint16))
    assert np.array_equal(s[~rows], before_lse[~rows])
    # Row 3 merged an empty state: itself.
    assert np.array_equal(v[3], before[3])
    # Without a mask every row merges, as merge_state does.
    again, again_lse = before.copy(), before_lse.copy()
    flashdecode.merge_state_in_place(again, again_lse, other, s_other)
    out, lse = flashdecode.merge_state(before, before_lse, other, s_other)
    assert np.array_equal(again, out) and np.array_equal(again_lse, lse)


def test_split_decode_merges_to_the_whole():
    """Decode attention over two halves of a cache (return_lse=True),
    merged, is decode attention over the whole cache: the merge's reason to
    be."""
    rng = np.random.default_rng()
    batch, heads, kv_heads, head_dim, length = 3, 8, 2, 64, 96
    q = rng.standard_normal((batch, heads, head_dim)).astype(np.float32)
    k = rng.standard_normal((batch, length, kv_heads, head_dim)).astype(
        np.float32)
    v = rng.standard_normal((batch, length, kv_heads, head_dim)).astype(
        np.float32)
    lens = np.array([96, 50, 1], np.int32)
    half = length // 2
    parts = []
    for start in (0, half):
        part_lens = np.clip(lens - start, 0, half).astype(np.int32)
        parts.append(flashdecode.decode_attention(
            q, np.ascontiguousarray(k[:, start:start + half]),
            np.ascontiguousarray(v[:, start:start + half]), part_lens,
            return_lse=True))
    out, lse = flashdecode.merge_state(parts[0][0], parts[0][1],
                                       parts[1][0], parts[1][1])
    expected, expected_lse = attention(q, k, v, lens)
    np.testing.assert_allclose(out, expected, rtol=0, atol=2e-5)
    np.testing.assert_allclose(lse, expected_lse, rtol=0, atol=2e-5)


def test_torch_cpu_tensors():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng()
    v, exact = random_states(rng, "bfloat16", (4, 2, 2, 32))
    s = random_lses(rng, (4, 2, 2))
    tv = torch.from_numpy(v.view(np.int16)).view(torch.bfloat16)
    out, lse = flashdecode.merge_states(tv, torch.from_numpy(s))
    assert out.dtype == torch.bfloat16 and lse.dtype == torch.float32
    bits = out.view(torch.int16).numpy().view(np.uint16)
    check(bits, lse.numpy(), *reference_merge(exact, s), "bfloat16")
    # In place on tensors: the tensors' memory changes.
    a = torch.from_numpy(rng.standard_normal((3, 1, 32)).astype(np.float32))
    b = torch.from_numpy(rng.standard_normal((3, 1, 32)).astype(np.float32))
    s_a = torch.zeros(3, 1)
    s_b = torch.zeros(3, 1)
    expected = (a + b) / 2
    flashdecode.merge_state_in_place(a, s_a, b, s_b)
    assert torch.allclose(a, expected, atol=1e-6)
    assert torch.allclose(s_a, torch.full((3, 1), float(np.log(2.0))))


def test_bad_arguments_name_what_is_wrong():
    v = np.zeros((2, 3, 4, 64), np.float32)
    s = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(ValueError, match=r"lse_base must be 'e'.*or '2'"):
        flashdecode.merge_states(v, s, lse_base="10")
    with pytest.raises(ValueError, match=r"v must be \[T, N, H, D\]"):
        flashdecode.merge_states(v[0], s)
    with pytest.raises(ValueError, match=r"s must be float32 \(2, 3, 4\)"):
        flashdecode.merge_states(v, s[:, :2])
    with pytest.raises(TypeError, match="s must be a float32 array"):
        flashdecode.merge_states(v, s.astype(np.float64))
    with pytest.raises(TypeError, match="v dtype float64 is not supported"):
        flashdecode.merge_states(v.astype(np.float64), s)
    with pytest.raises(ValueError, match="head dim 20 is not supported"):
        flashdecode.merge_states(np.zeros((2, 3, 4, 20), np.float32), s)
    with pytest.raises(ValueError, match="1 to 512 states a row"):
        flashdecode.merge_states(np.zeros((1, 513, 1, 32), np.float32),
                                 np.zeros((1, 513, 1), np.float32))
    with pytest.raises(ValueError, match="v must be C-contiguous"):
        flashdecode.merge_states(np.zeros((2, 3, 4, 128), np.float32)
                                 [..., ::2], s)
    a = np.zeros((2, 4, 64), np.float16)
    s_a = np.zeros((2, 4), np.float32)
    with pytest.raises(ValueError,
                       match="v_b must have v_a's shape and dtype"):
        flashdecode.merge_state(a, s_a, a.astype(np.float32), s_a)
    with pytest.raises(ValueError, match=r"mask must have one flag per row, "
                       r"shape \(2,\)"):
        flashdecode.merge_state_in_place(a, s_a, a.copy(), s_a.copy(),
                                         np.ones(3, np.bool_))
    with pytest.raises(TypeError, match="mask must be a bool or uint8"):
        flashdecode.merge_state_in_place(a, s_a, a.copy(), s_a.copy(),
                                         np.ones(2, np.float32))
    with pytest.raises(TypeError, match="v must be a numpy array"):
        flashdecode.merge_states([[1.0]], s)

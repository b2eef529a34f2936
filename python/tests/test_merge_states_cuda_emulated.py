"""merge_states, merge_state and merge_state_in_place on device arrays: the
fd.merge_states GPU kernel, on fdemu (the emulator as CUDA driver, its
memory, init and race checks on) in make test, on a GPU with libcuda.
Against the float64 merge of test_merge_states.py and the CPU kernel, every
dtype, one and two elements a thread (head dims to 512), several operands,
empty states whose memory was never written (initcheck: they are not read),
NaN rows, masks, in place, no rows. Sizes are small: the emulator
interprets every thread."""
import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray

from reference import decode
from test_merge_states import (check, random_lses, random_states,
                               reference_merge)

pytestmark = pytest.mark.usefixtures("cuda_driver")


def to_device(array, dtype=None):
    return DeviceArray.from_numpy(
        array, dtype="bfloat16" if array.dtype == np.uint16 else dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("rows,count,heads,head_dim", [
    (3, 2, 2, 128), (1, 1, 1, 32), (2, 5, 1, 512), (2, 3, 2, 264)])
def test_merge_states_matches_a_float64_merge(dtype, rows, count, heads,
                                              head_dim):
    rng = np.random.default_rng()
    v, exact = random_states(rng, dtype, (rows, count, heads, head_dim))
    s = random_lses(rng, (rows, count, heads))
    s[0, 0, 0] = -np.inf
    out, lse = flashdecode.merge_states(to_device(v), to_device(s))
    assert isinstance(out, DeviceArray) and out.dtype == dtype
    assert out.shape == (rows, heads, head_dim) and lse.shape == (rows, heads)
    check(out.numpy(), lse.numpy(), *reference_merge(exact, s), dtype)
    # The CPU kernel merges alike (ex2.approx against exp: a few ulps).
    cpu_out, cpu_lse = flashdecode.merge_states(v, s)
    np.testing.assert_allclose(decode(out.numpy(), dtype),
                               decode(cpu_out, dtype), rtol=0,
                               atol=4 * {"float32": 1e-6, "float16": 1e-3,
                                         "bfloat16": 8e-3}[dtype])
    np.testing.assert_allclose(lse.numpy(), cpu_lse, rtol=0, atol=1e-5)


@pytest.mark.parametrize("lse_base", ["e", "2"])
def test_two_states_and_empty_rows(lse_base):
    """merge_state; an empty state's memory is never written (fdemu's
    initcheck fails a kernel that reads it); all-empty rows give zeros and
    -inf; a NaN lse a NaN row."""
    rng = np.random.default_rng()
    a, exact_a = random_states(rng, "float16", (4, 2, 64))
    s_a, s_b = random_lses(rng, (4, 2)), random_lses(rng, (4, 2))
    s_b[:, :] = -np.inf
    s_b[1, 0] = np.inf
    s_a[2, :] = np.inf
    s_a[3, 1] = np.nan
    b = DeviceArray.empty((4, 2, 64), "float16")
    out, lse = flashdecode.merge_state(to_device(a), to_device(s_a), b,
                                       to_device(s_b), lse_base=lse_base)
    out, lse = decode(out.numpy(), "float16"), lse.numpy()
    expected, expected_lse = reference_merge(
        exact_a[:, None], s_a[:, None], base2=lse_base == "2")
    check(out[:2], lse[:2], expected[:2], expected_lse[:2], "float16")
    assert np.all(out[2] == 0) and np.all(np.isneginf(lse[2]))
    assert np.all(np.isnan(out[3, 1])) and np.isnan(lse[3, 1])
    check(out[3, 0], lse[3, 0], expected[3, 0], expected_lse[3, 0], "float16")


def test_in_place_with_a_mask():
    rng = np.random.default_rng()
    v, exact = random_states(rng, "bfloat16", (5, 2, 32))
    other, exact_other = random_states(rng, "bfloat16", (5, 2, 32))
    s, s_other = random_lses(rng, (5, 2)), random_lses(rng, (5, 2))
    mask = np.array([1, 0, 0, 1, 1], np.uint8)
    dv, ds = to_device(v), to_device(s)
    flashdecode.merge_state_in_place(dv, ds, to_device(other),
                                     to_device(s_other), to_device(mask))
    merged, merged_lse = dv.numpy(), ds.numpy()
    expected, expected_lse = reference_merge(
        np.stack([exact, exact_other], 1), np.stack([s, s_other], 1))
    rows = mask.astype(bool)
    check(merged[rows], merged_lse[rows], expected[rows], expected_lse[rows],
          "bfloat16")
    assert np.array_equal(merged[~rows], v[~rows])
    assert np.array_equal(merged_lse[~rows], s[~rows])
    # The mask is read at every launch: new flags, new rows.
    mask_device = to_device(np.array([0, 1, 0, 0, 0], np.uint8))
    again = to_device(v)
    again_lse = to_device(s)
    flashdecode.merge_state_in_place(again, again_lse, to_device(other),
                                     to_device(s_other), mask_device)
    assert np.array_equal(again.numpy()[[0, 2, 3, 4]], v[[0, 2, 3, 4]])
    check(again.numpy()[1], again_lse.numpy()[1], expected[1],
          expected_lse[1], "bfloat16")


@pytest.mark.parametrize("dtype,head_dim", [("float32", 512),
                                            ("float32", 264),
                                            ("bfloat16", 512)])
def test_empty_states_at_the_buffers_end(dtype, head_dim):
    """An empty state whose lse is the buffer's last, at an odd index: the
    loads it makes instead of its row's stay aligned and in bounds (two
    elements a thread over D 256)."""
    rng = np.random.default_rng()
    v, exact = random_states(rng, dtype, (1, 3, 1, head_dim))
    s = random_lses(rng, (1, 3, 1))
    s[0, 2, 0] = -np.inf
    s[0, 1, 0] = np.inf
    out, lse = flashdecode.merge_states(to_device(v), to_device(s))
    check(out.numpy(), lse.numpy(), *reference_merge(exact, s), dtype)


def test_no_rows():
    out, lse = flashdecode.merge_states(
        DeviceArray.empty((0, 2, 1, 32), "float32"),
        DeviceArray.empty((0, 2, 1), "float32"))
    assert out.shape == (0, 1, 32) and lse.shape == (0, 1)
    a, s = DeviceArray.empty((0, 1, 32), "float16"), \
        DeviceArray.empty((0, 1), "float32")
    out, lse = flashdecode.merge_state(a, s, a, s)
    assert out.shape == (0, 1, 32) and lse.shape == (0, 1)
    assert flashdecode.merge_state_in_place(a, s, a, s) is None


def test_bad_device_arguments():
    v = DeviceArray.empty((2, 2, 1, 32), "float32")
    with pytest.raises(TypeError, match="s must be a CUDA tensor"):
        flashdecode.merge_states(v, np.zeros((2, 2, 1), np.float32))
    with pytest.raises(ValueError, match=r"s must be float32 \(2, 2, 1\)"):
        flashdecode.merge_states(v, DeviceArray.empty((2, 3, 1), "float32"))
    with pytest.raises(ValueError, match="mask must have one flag per row"):
        a = DeviceArray.empty((2, 1, 32), "float32")
        s = DeviceArray.from_numpy(np.zeros((2, 1), np.float32))
        flashdecode.merge_state_in_place(
            a, s, a, s, DeviceArray.empty((3,), "uint8"))

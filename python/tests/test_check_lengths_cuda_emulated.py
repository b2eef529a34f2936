"""check_lengths=True on the GPU path (fdemu in make test): decode_attention
and Decoder read seq_lens and query_lens back before launching and name the
first entry outside its range, launching nothing; without it the kernels
clamp, as documented."""
import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray

from reference import random_inputs

pytestmark = pytest.mark.usefixtures("cuda_driver")


def device_inputs(rng, q_shape=(2, 8, 64), cache=(2, 64, 2, 64)):
    (q, k, v), _ = random_inputs(rng, "float16", q_shape, cache)
    return (q, k, v), [DeviceArray.from_numpy(a) for a in (q, k, v)]


def test_good_lengths_give_the_unchecked_result():
    rng = np.random.default_rng()
    (q, k, v), device = device_inputs(rng)
    lens = DeviceArray.from_numpy(
        np.array([64, int(rng.integers(1, 64))], np.int32))
    checked = flashdecode.decode_attention(*device, lens, backend="cuda",
                                           num_splits=3, check_lengths=True)
    unchecked = flashdecode.decode_attention(*device, lens, backend="cuda",
                                             num_splits=3)
    np.testing.assert_array_equal(checked.numpy(), unchecked.numpy())


@pytest.mark.parametrize("lengths,words", [
    ([1000, -5], r"seq_lens\[0\] = 1000 is outside \[0, 64\]"),
    ([5, -5], r"seq_lens\[1\] = -5 is outside \[0, 64\]"),
    ([65, 0], r"seq_lens\[0\] = 65 is outside \[0, 64\]"),
])
def test_a_bad_length_is_named_and_nothing_runs(lengths, words):
    rng = np.random.default_rng()
    (q, _, _), device = device_inputs(rng)
    sentinel = np.full(q.shape, 3.0, np.float16)
    out = DeviceArray.from_numpy(sentinel)
    lens = DeviceArray.from_numpy(np.array(lengths, np.int32))
    with pytest.raises(ValueError, match=words):
        flashdecode.decode_attention(*device, lens, backend="cuda", out=out,
                                     num_splits=2, check_lengths=True)
    np.testing.assert_array_equal(out.numpy(), sentinel)


def test_without_the_check_the_kernels_clamp():
    """The documented default: [1000, -5] reads the whole cache and none."""
    rng = np.random.default_rng()
    (q, k, v), device = device_inputs(rng)
    out = flashdecode.decode_attention(
        *device, DeviceArray.from_numpy(np.array([1000, -5], np.int32)),
        backend="cuda", num_splits=2)
    expected = flashdecode.decode_attention(q, k, v,
                                            np.array([64, 0], np.int32))
    np.testing.assert_allclose(out.numpy().astype(np.float32),
                               expected.astype(np.float32), atol=1e-2)


def test_paged_lengths_are_checked_against_the_block_table():
    """max_len of a paged cache is max_pages * page_size: 3 pages of 16."""
    rng = np.random.default_rng()
    (_, _, _), device = device_inputs(rng, cache=(8, 16, 2, 64))
    table = DeviceArray.from_numpy(
        rng.permutation(8)[:6].astype(np.int32).reshape(2, 3))
    good = DeviceArray.from_numpy(np.array([48, 0], np.int32))
    flashdecode.decode_attention(*device, good, backend="cuda",
                                 block_table=table, check_lengths=True)
    bad = DeviceArray.from_numpy(np.array([48, 49], np.int32))
    with pytest.raises(ValueError,
                       match=r"seq_lens\[1\] = 49 is outside \[0, 48\]"):
        flashdecode.decode_attention(*device, bad, backend="cuda",
                                     block_table=table, check_lengths=True)


def test_query_lens_are_checked_against_the_query_tokens():
    rng = np.random.default_rng()
    (_, _, _), device = device_inputs(rng, q_shape=(2, 4, 8, 64))
    lens = DeviceArray.from_numpy(np.array([40, 64], np.int32))
    query_lens = DeviceArray.from_numpy(np.array([2, 5], np.int32))
    with pytest.raises(ValueError,
                       match=r"query_lens\[1\] = 5 is outside \[0, 4\]"):
        flashdecode.decode_attention(*device, lens, backend="cuda",
                                     query_lens=query_lens,
                                     check_lengths=True)


def test_decoder_checks_every_run_and_replay():
    rng = np.random.default_rng()
    (q, k, v), device = device_inputs(rng)
    lens = np.array([10, 64], np.int32)
    device_lens = DeviceArray.from_numpy(lens)
    out = DeviceArray.empty(q.shape, "float16")
    decoder = flashdecode.Decoder(*device, device_lens, out, num_splits=2,
                                  check_lengths=True)
    decoder.run()
    expected = flashdecode.decode_attention(q, k, v, lens)
    np.testing.assert_allclose(out.numpy().astype(np.float32),
                               expected.astype(np.float32), atol=1e-2)
    device_lens.copy_from_numpy(np.array([10, 70], np.int32))
    with pytest.raises(ValueError, match=r"seq_lens\[1\] = 70 is outside"):
        decoder.run()
    # A capture records and reads nothing; the replay checks.
    decoder.capture()
    with pytest.raises(ValueError, match=r"seq_lens\[1\] = 70 is outside"):
        decoder.replay()
    grown = np.array([33, 64], np.int32)
    device_lens.copy_from_numpy(grown)
    decoder.replay()
    expected = flashdecode.decode_attention(q, k, v, grown)
    np.testing.assert_allclose(out.numpy().astype(np.float32),
                               expected.astype(np.float32), atol=1e-2)


def test_check_lengths_is_a_flag():
    rng = np.random.default_rng()
    (q, k, v), device = device_inputs(rng)
    lens = np.array([10, 64], np.int32)
    with pytest.raises(ValueError,
                       match="check_lengths must be True or False, got 1"):
        flashdecode.decode_attention(*device, DeviceArray.from_numpy(lens),
                                     backend="cuda", check_lengths=1)
    with pytest.raises(ValueError,
                       match="check_lengths must be True or False, got 'y'"):
        flashdecode.Decoder(*device, DeviceArray.from_numpy(lens),
                            DeviceArray.empty(q.shape, "float16"),
                            check_lengths="y")
    # The CPU backend always checks; the flag is accepted there too.
    flashdecode.decode_attention(q, k, v, lens, check_lengths=True)
    with pytest.raises(ValueError, match=r"seq_lens must be in \[0, 64\]"):
        flashdecode.decode_attention(q, k, v, np.array([65, 0], np.int32),
                                     check_lengths=True)

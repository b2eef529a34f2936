"""cascade_decode on backend="cuda" (in `make test`: fdemu, whose every
launch is checked for out-of-bounds, uninitialized and racy accesses)
against the float64 reference over the concatenated caches
(cascade_checks.py; unused cache positions hold NaN) on fresh random inputs
(FD_TEST_SEED reruns a failure): the tensor-core prefix kernel (f16, bf16:
the rows of four requests in one 16-row tile) and the CUDA-core one (f32);
R = 1, 3, 64 (a last block of requests part empty); prefixes of 0, 1 and
not a multiple of the page or chunk; suffixes of 0; Lq = 4 with a window,
ALiBi, soft-cap and sinks; paged prefixes; prefix_len staged from an int or
read from device memory; a CascadeDecoder replaying a captured graph as the
lengths change in device memory."""
import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray
from cascade_checks import (CUDA_LSE_TOLERANCE, CUDA_TOLERANCE, Cascade,
                            check_cascade)
from reference import check_against_reference, decode

pytestmark = pytest.mark.usefixtures("cuda_driver")


def device(array):
    """A numpy array on the device (uint16 patterns as bfloat16)."""
    return DeviceArray.from_numpy(
        np.ascontiguousarray(array),
        dtype="bfloat16" if array.dtype == np.uint16 else None)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("requests,prefix_len,suffix_lens", [
    (1, 1, [3]),
    (3, 0, [0, 7, 2]),
    (3, 37, [5, 0, 16]),
    (63, 150, None),
])
def test_equals_decode_over_the_concatenation(dtype, requests, prefix_len,
                                              suffix_lens):
    """GQA 8/2 at D = 128; 63 requests fill 15 blocks of 4 and 3 of a
    sixteenth."""
    if suffix_lens is None:
        suffix_lens = np.random.default_rng().integers(0, 21, requests)
    case = Cascade(dtype, requests, 1, 8, 2, 128, prefix_len, suffix_lens)
    check_cascade(case, backend="cuda", to_backend=device)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("num_splits", [1, 50])
def test_every_rule_at_positions_from_the_prefix(dtype, num_splits):
    """Lq = 4 (a 16-row tile of two requests at group 2), suffixes 4, 2, 0
    and 9, a window ending inside the prefix for some rows, ALiBi,
    soft-cap and sinks; 50 splits: more than the prefix's 45 tokens."""
    case = Cascade(dtype, 4, 4, 4, 2, 64, 45, [4, 2, 0, 9])
    for rules in ({"window_left": 7},
                  {"alibi": True, "logits_soft_cap": 20.0, "sinks": True,
                   "window_left": 12}):
        check_cascade(case, backend="cuda", to_backend=device,
                      num_splits=num_splits, **case.features(**rules))


def test_paged_prefix_read_from_device_memory():
    """A prefix of 37 in pages of 16, its length an int32 [1] device array
    (what a graph replays), suffixes in pages of 8."""
    case = Cascade("float16", 5, 1, 32, 8, 128, 37, [2, 11, 5, 0, 1])
    check_cascade(case, backend="cuda", to_backend=device,
                  prefix_len=device(np.array([37], np.int32)),
                  prefix_page_size=16, suffix_page_size=8)


def test_mqa_rows_of_one_request_per_block():
    """MQA 16/1: a request's 16 rows fill a tile, one request a block."""
    case = Cascade("float16", 3, 1, 16, 1, 64, 70, [3, 0, 12])
    check_cascade(case, backend="cuda", to_backend=device, window_left=30)


def test_cascade_decoder_replays_new_lengths():
    """A CascadeDecoder captures its three launches once; replays read new
    suffix lengths and a new prefix length from device memory (the
    prefix's capacity holds 45 real tokens, then NaN: a replay at 45 reads
    every one, at 30 none past it)."""
    case = Cascade("float16", 6, 1, 8, 2, 128, 45, [20] * 6)
    q, pk, pv, k, v = (device(array) for array in (
        case.q, case.prefix_k, case.prefix_v, case.k_cache, case.v_cache))
    lengths = device(case.suffix_lens)
    prefix_len = device(np.array([45], np.int32))
    out = DeviceArray.empty(case.q.shape, "float16")
    lse = DeviceArray.empty(case.q.shape[:-1], "float32")
    decoder = flashdecode.CascadeDecoder(q, pk, pv, prefix_len, k, v, lengths,
                                         out, lse, window_left=40)
    decoder.capture()
    rng = np.random.default_rng()
    for prefix in (45, 30, 0):
        suffixes = rng.integers(0, 21, 6).astype(np.int32)
        lengths.copy_from_numpy(suffixes)
        prefix_len.copy_from_numpy(np.array([prefix], np.int32))
        decoder.replay()
        case.prefix_len = prefix
        case.lengths = (prefix + suffixes).astype(np.int32)
        case.exact[1][:, prefix:], case.exact[2][:, prefix:] = 0, 0
        for r, length in enumerate(suffixes):
            case.exact[1][r, prefix:prefix + length] = decode(
                case.k_cache[r, :length], "float16")
            case.exact[2][r, prefix:prefix + length] = decode(
                case.v_cache[r, :length], "float16")
        expected, expected_lse = case.expected(window_left=40)
        check_against_reference(out.numpy(), lse.numpy(), expected,
                                expected_lse, "float16",
                                CUDA_TOLERANCE["float16"], CUDA_LSE_TOLERANCE,
                                f"prefix {prefix}, suffixes {suffixes}, seed "
                                f"{case.seed}")


def test_cascade_decoder_errors():
    case = Cascade("float16", 2, 1, 8, 2, 64, 5, [1, 2])
    arrays = [device(array) for array in (
        case.q, case.prefix_k, case.prefix_v, case.k_cache, case.v_cache,
        case.suffix_lens)]
    out = DeviceArray.empty(case.q.shape, "float16")
    with pytest.raises(ValueError, match="prefix_len must be an int32 \\[1\\] "
                       "device array"):
        flashdecode.CascadeDecoder(*arrays[:3], 5, *arrays[3:], out)
    decoder = flashdecode.CascadeDecoder(
        *arrays[:3], device(np.array([5], np.int32)), *arrays[3:], out)
    with pytest.raises(RuntimeError, match="replay\\(\\) before capture\\(\\)"):
        decoder.replay()


def test_host_arrays_are_named_as_given():
    """A host prefix is named prefix_k (not the prefix pass's k_cache), and
    the CascadeDecoder is what needs device memory."""
    case = Cascade("float16", 2, 1, 8, 2, 64, 5, [1, 2])
    arrays = [device(array) for array in (
        case.q, case.prefix_k, case.prefix_v, case.k_cache, case.v_cache,
        case.suffix_lens)]
    out = DeviceArray.empty(case.q.shape, "float16")
    length = device(np.array([5], np.int32))
    with pytest.raises(flashdecode.NotOnDeviceError,
                       match="prefix_k must be a CUDA tensor for a "
                             "CascadeDecoder"):
        flashdecode.CascadeDecoder(arrays[0], case.prefix_k, *arrays[2:3],
                                   length, *arrays[3:], out)
    with pytest.raises(flashdecode.NotOnDeviceError,
                       match="prefix_v must be a CUDA tensor for "
                             "backend='cuda'"):
        flashdecode.cascade_decode(arrays[0], arrays[1], case.prefix_v, 5,
                                   *arrays[3:], backend="cuda")

"""bf16 queries over an fp8 cache with one scale multiply in f16 on the
per-warp tensor-core tile too (docs/KernelABI.md, "FP8 caches in the
kernels"): q becomes f16 times a power of two the tile's warps agree on,
each fp8 pair one conversion. On backend="cuda" (in `make test`: fdemu,
every launch checked for out-of-bounds, uninitialized and racy accesses)
against the float64 reference on the dequantized caches, on fresh random
inputs (the run's seed is in each message; FD_TEST_SEED reruns it):
queries far outside f16's range with the softmax scale divided by as much,
both fp8 formats and head dims 64 and 128, and a NaN in one head's q,
which poisons that row only."""
import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray
from fp8_checks import dequantized
from per_head_buffers import LSE_TOLERANCE, TOLERANCE
from reference import (Inputs, attention, check_against_reference, decode,
                       to_bfloat16_bits)

pytestmark = pytest.mark.usefixtures("cuda_driver")

# Llama-style groups: 8 query heads over 2 KV heads, 4 rows a tile.
HEADS, KV_HEADS = 8, 2
LENGTHS = (0, 1, 37, 101)


def decode_over_fp8(inputs, q, kv_dtype, scale):
    """decode_attention of `q` (float64 values, held as bf16) over inputs'
    caches quantized to `kv_dtype` with one scale each, on the device: out,
    lse, the caches as held (dequantized) and the lengths."""
    k8, v8, k_scale, v_scale = flashdecode.quantize_kv(
        inputs.exact[1], inputs.exact[2], kv_dtype, granularity="tensor")
    lens = inputs.lengths(*LENGTHS)
    out, lse = flashdecode.decode_attention(
        DeviceArray.from_numpy(to_bfloat16_bits(q), dtype="bfloat16"),
        DeviceArray.from_numpy(k8.view(np.uint8)),
        DeviceArray.from_numpy(v8.view(np.uint8)),
        DeviceArray.from_numpy(lens), scale=scale, kv_dtype=kv_dtype,
        k_scale=float(k_scale), v_scale=float(v_scale), return_lse=True,
        num_splits=3, backend="cuda")
    return (out.numpy(), lse.numpy(), dequantized(k8, k_scale, kv_dtype),
            dequantized(v8, v_scale, kv_dtype), lens)


def gqa_inputs(head_dim):
    return Inputs("bfloat16", (len(LENGTHS), HEADS, head_dim),
                  (len(LENGTHS), max(LENGTHS), KV_HEADS, head_dim))


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("kv_dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("power", [0, 24, -30])
def test_queries_in_and_outside_half_range(head_dim, kv_dtype, power):
    """Queries 2^24 times the usual (past f16's 65504) or 2^-30 (below its
    subnormals), the softmax scale divided by as much, give the usual
    attention; lengths 0, 1, odd and full, over 3 splits."""
    inputs = gqa_inputs(head_dim)
    q = inputs.exact[0] * 2.0 ** power
    scale = 2.0 ** -power / np.sqrt(head_dim)
    out, lse, keys, values, lens = decode_over_fp8(inputs, q, kv_dtype,
                                                   scale)
    expected, expected_lse = attention(q, keys, values, lens, scale=scale)
    check_against_reference(out, lse, expected, expected_lse, "bfloat16",
                            TOLERANCE["bfloat16"], LSE_TOLERANCE,
                            f"seed={inputs.seed} {kv_dtype} 2^{power}")


def test_nan_query_poisons_only_its_row():
    """A NaN in one head's q makes that row NaN (output and lse); the
    tile's other rows keep their q (the power of two counts finite values
    only) and match the reference."""
    inputs = gqa_inputs(128)
    q = inputs.exact[0].copy()
    q[2, 1, 100] = np.nan
    scale = 1.0 / np.sqrt(128)
    out, lse, keys, values, lens = decode_over_fp8(inputs, q,
                                                   "float8_e4m3fn", scale)
    actual = decode(out, "bfloat16")
    assert np.isnan(actual[2, 1]).all() and np.isnan(lse[2, 1]), \
        f"seed={inputs.seed}"
    clean = q.copy()
    clean[2, 1] = 0.0
    expected, expected_lse = attention(clean, keys, values, lens, scale=scale)
    actual[2, 1], lse[2, 1] = 0.0, expected_lse[2, 1]
    expected[2, 1] = 0.0
    check_against_reference(to_bfloat16_bits(actual), lse, expected,
                            expected_lse, "bfloat16", TOLERANCE["bfloat16"],
                            LSE_TOLERANCE, f"seed={inputs.seed}")

"""The tensor-core tiles' online softmax takes its weights against a max
that lags the row's by up to 2^8 (docs/KernelABI.md): scores that rise
slowly (the max stays, the weights grow), rise fast (a new max every step),
jump and fall must still give the float64 reference (reference.py), on
backend="cuda" (fdemu in make test, with its memory, race and init checks).
Each row rises at its own rate, so a warp's rows move their max in
different steps. Fresh random noise on every run; the seed is in each
message (FD_TEST_SEED reruns it)."""
import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray
from fp8_checks import dequantized
from per_head_buffers import LSE_TOLERANCE, TOLERANCE, to_device
from reference import (Inputs, attention, check_against_reference, decode,
                       to_bfloat16_bits)

pytestmark = pytest.mark.usefixtures("cuda_driver")

SCALE = 1.0 / np.sqrt(192.0)


def rising_scores(length):
    """Each key's base-2 score for a row of rate 1: up 0.5 a key (a new
    max every 16 keys), a jump of 40 at key 60, then a fall and a rise of
    0.3 a key."""
    t = np.arange(length, dtype=np.float64)
    scores = np.where(t < 60, 0.5 * t, 40.0 + 0.3 * (t - 60))
    scores[t == 60] = 70.0
    return scores


def rising_inputs(dtype, batch, length, heads, kv_heads, head_dim):
    """q [B, Hq, D] and keys [B, L, Hkv, D] whose scores (times SCALE,
    base 2) follow rising_scores at rates 0.2 .. 1.5 per head, plus random
    noise; values random. Stored in `dtype` and exact (float64)."""
    inputs = Inputs(dtype, (batch, heads, head_dim),
                    (batch, length, kv_heads, head_dim))
    rng = inputs.rng
    direction = np.full(head_dim, 1.0 / np.sqrt(head_dim))
    rates = np.linspace(0.2, 1.5, heads)
    q = rates[None, :, None] * direction + rng.normal(0.0, 0.05,
                                                      (batch, heads, head_dim))
    along = rising_scores(length) / (SCALE * np.log2(np.e))
    k = along[None, :, None, None] * direction + rng.normal(
        0.0, 0.5, (batch, length, kv_heads, head_dim))
    stored = []
    for array in (q, k):
        if dtype == "bfloat16":
            stored.append(to_bfloat16_bits(array.astype(np.float32)))
        else:
            stored.append(array.astype(dtype))
    inputs.stored[:2] = stored
    inputs.exact[:2] = [decode(array, dtype) for array in stored]
    return inputs


@pytest.mark.parametrize("num_splits", [1, 3])
def test_latent_tile_follows_a_rising_max(num_splits):
    """MLA's split-value tile (576 / 512, one latent head), bf16; lengths
    130 and 77 (not a multiple of the step)."""
    inputs = rising_inputs("bfloat16", 2, 130, 16, 1, 576)
    q, latent = inputs.stored[:2]
    lens = inputs.lengths(130, 77)
    out, lse = flashdecode.mla_decode(
        *to_device(q, latent, dtype="bfloat16"), DeviceArray.from_numpy(lens),
        scale=SCALE, return_lse=True, num_splits=num_splits, backend="cuda")
    q64, latent64 = inputs.exact[:2]
    expected, expected_lse = attention(q64, latent64, latent64[..., :512],
                                       lens, scale=SCALE)
    check_against_reference(out.numpy(), lse.numpy(), expected, expected_lse,
                            "bfloat16", TOLERANCE["bfloat16"], LSE_TOLERANCE,
                            f"seed={inputs.seed} splits={num_splits}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_per_warp_tile_follows_a_rising_max(dtype):
    """The per-warp tile at 32 rows (MQA, D = 128): f16's weights must stay
    finite while the max lags."""
    inputs = rising_inputs(dtype, 2, 130, 32, 1, 128)
    q, k, v = inputs.stored
    lens = inputs.lengths(130, 77)
    out, lse = flashdecode.decode_attention(
        *to_device(q, k, v, lens, dtype=dtype if dtype == "bfloat16"
                   else None),
        scale=SCALE, return_lse=True, num_splits=2, backend="cuda")
    expected, expected_lse = attention(*inputs.exact, lens, scale=SCALE)
    check_against_reference(out.numpy(), lse.numpy(), expected, expected_lse,
                            dtype, TOLERANCE[dtype], LSE_TOLERANCE,
                            f"seed={inputs.seed} {dtype}")


def test_half_weights_with_token_scales_keep_their_range():
    """f16 queries over an e4m3 cache with per-token scales: P carries each
    value's scale times 2^8, so there the max does not lag (weights up to
    2^8 would put P past f16's 65504 for values past ~450); values up to
    ~2000 still give the reference."""
    inputs = rising_inputs("float16", 2, 130, 32, 1, 128)
    q = inputs.stored[0]
    keys = inputs.exact[1]
    values = inputs.rng.normal(0.0, 500.0, keys.shape)
    values[:, ::7] *= 4.0
    k8, v8, k_scale, v_scale = flashdecode.quantize_kv(
        keys, values, "float8_e4m3fn", granularity="token_head")
    lens = inputs.lengths(130, 77)
    out, lse = flashdecode.decode_attention(
        DeviceArray.from_numpy(q), DeviceArray.from_numpy(k8.view(np.uint8)),
        DeviceArray.from_numpy(v8.view(np.uint8)),
        DeviceArray.from_numpy(lens), kv_dtype="float8_e4m3fn",
        k_scale=DeviceArray.from_numpy(k_scale),
        v_scale=DeviceArray.from_numpy(v_scale), scale=SCALE,
        return_lse=True, num_splits=2, backend="cuda")
    expected, expected_lse = attention(
        inputs.exact[0], dequantized(k8, k_scale, "float8_e4m3fn"),
        dequantized(v8, v_scale, "float8_e4m3fn"), lens, scale=SCALE)
    check_against_reference(out.numpy(), lse.numpy(), expected, expected_lse,
                            "float16", TOLERANCE["float16"], LSE_TOLERANCE,
                            f"seed={inputs.seed}")

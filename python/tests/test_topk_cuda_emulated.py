"""Top-k sparse decode on backend="cuda" and the Decoder (in `make test`:
fdemu, whose every launch is checked for out-of-bounds, uninitialized and
racy accesses) against dense attention over each query token's gathered
tokens in float64 (topk_checks.py), on fresh random inputs (FD_TEST_SEED
reruns a failure). Every slot no list names holds NaN: a kernel that reads
one (a hole's row, a token past topk_length) shows it. The tensor-core
kernel (f16 GQA, bf16 MQA's 32 rows), the CUDA-core one (f32, MLA's latent
cache at 64 and 128 heads in bf16 and over e4m3; sm_90a's wgmma tile at
128 heads), Lq = 2, lengths per token, and a Decoder replaying a captured
graph over new lists."""
import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray
from fp8_checks import dequantized
from per_head_buffers import to_device
from reference import Inputs
from topk_checks import (check, poison_unlisted, random_lists,
                         sparse_reference)

pytestmark = pytest.mark.usefixtures("cuda_driver")

TOLERANCE = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 2e-2}


@pytest.mark.parametrize("dtype,heads,kv_heads", [("float16", 8, 2),
                                                  ("bfloat16", 32, 1),
                                                  ("float32", 8, 2)])
@pytest.mark.parametrize("num_splits", [1, 3])
def test_lists_match_the_gathered_tokens(dtype, heads, kv_heads, num_splits):
    batch, top_k = 3, 40
    inputs = Inputs(dtype, (batch, 2, heads, 64), (batch, 30, kv_heads, 64))
    lists = random_lists(inputs.rng, batch, 2, top_k, batch * 30)
    lengths = np.array([[40, 40], [13, 2], [0, 40]], np.int32)
    q, k, v = inputs.stored
    k, v = (poison_unlisted(cache, lists, dtype) for cache in (k, v))
    out, lse = flashdecode.decode_attention(
        *to_device(q, k, v, dtype=dtype), None,
        indices=DeviceArray.from_numpy(lists),
        topk_length=DeviceArray.from_numpy(lengths), return_lse=True,
        num_splits=num_splits, backend="cuda")
    expected, expected_lse = sparse_reference(*inputs.exact, lists, lengths)
    check(out.numpy(), lse.numpy(), expected, expected_lse, dtype,
          TOLERANCE[dtype], f"seed {inputs.seed}")


@pytest.mark.parametrize("heads,kv_dtype", [(64, None), (128, None),
                                            (64, "float8_e4m3fn")])
def test_mla_decode_over_lists_of_latent_slots(heads, kv_dtype):
    inputs = Inputs("bfloat16" if kv_dtype is None else "float16",
                    (2, heads, 576), (2, 40, 1, 576))
    lists = random_lists(inputs.rng, 2, 1, 24, 80)[:, 0]
    q, latent = inputs.stored[0], inputs.stored[1]
    exact = inputs.exact[1]
    options = {}
    if kv_dtype is not None:
        latent, _, scale, _ = flashdecode.quantize_kv(
            exact.astype(np.float32), exact.astype(np.float32), kv_dtype,
            "token_head")
        exact = dequantized(latent, scale, kv_dtype)
        options = {"kv_dtype": kv_dtype,
                   "k_scale": DeviceArray.from_numpy(scale)}
    scale_qk = 1.0 / np.sqrt(192.0)
    dtype = "bfloat16" if kv_dtype is None else "float16"
    latent = poison_unlisted(latent, lists, dtype) if kv_dtype is None else \
        latent
    out, lse = flashdecode.mla_decode(
        to_device(q, dtype=dtype)[0],
        DeviceArray.from_numpy(latent, dtype="bfloat16" if kv_dtype is None
                               else kv_dtype), None,
        indices=DeviceArray.from_numpy(lists), scale=scale_qk,
        return_lse=True, backend="cuda", num_splits=2, **options)
    expected, expected_lse = sparse_reference(
        inputs.exact[0], exact, exact[..., :512], lists, np.full(2, 24),
        scale=scale_qk)
    check(out.numpy(), lse.numpy(), expected, expected_lse, dtype,
          TOLERANCE[dtype], f"seed {inputs.seed}")


def test_warpgroup_tile_over_lists_of_latent_slots():
    """sm_90a's wgmma tile at 128 heads over lists with holes: a hole's
    slot and every slot no list names hold NaN."""
    inputs = Inputs("bfloat16", (2, 128, 576), (2, 40, 1, 576))
    lists = random_lists(inputs.rng, 2, 1, 24, 80)[:, 0]
    lists[1, 5] = -1
    q, latent = inputs.stored[0], inputs.stored[1]
    exact = inputs.exact[1]
    latent = poison_unlisted(latent, lists, "bfloat16")
    scale_qk = 1.0 / np.sqrt(192.0)
    out, lse = flashdecode.decode_attention(
        to_device(q, dtype="bfloat16")[0],
        DeviceArray.from_numpy(latent, dtype="bfloat16"), None, None,
        indices=DeviceArray.from_numpy(lists), scale=scale_qk,
        v_head_dim=512, return_lse=True, backend="cuda", num_splits=2,
        arch="sm_90a")
    expected, expected_lse = sparse_reference(
        inputs.exact[0], exact, exact[..., :512], lists, np.full(2, 24),
        scale=scale_qk)
    check(out.numpy(), lse.numpy(), expected, expected_lse, "bfloat16",
          TOLERANCE["bfloat16"], f"seed {inputs.seed}")


def test_decoder_replays_new_lists():
    """One capture; each replay reads the lists and their lengths as they
    are then."""
    inputs = Inputs("float16", (2, 8, 64), (2, 32, 2, 64))
    q, k, v = inputs.stored
    dq, dk, dv = to_device(q, k, v, dtype="float16")
    lists = DeviceArray.from_numpy(np.zeros((2, 16), np.int32))
    lengths = DeviceArray.from_numpy(np.zeros(2, np.int32))
    out = DeviceArray.empty((2, 8, 64), "float16")
    lse = DeviceArray.empty((2, 8), "float32")
    decoder = flashdecode.Decoder(dq, dk, dv, None, out, lse, indices=lists,
                                  topk_length=lengths, num_splits=2)
    decoder.capture()
    for step in range(3):
        now = random_lists(inputs.rng, 2, 1, 16, 64)[:, 0]
        counts = np.array([16, 5 * step], np.int32)
        lists.copy_from_numpy(now)
        lengths.copy_from_numpy(counts)
        decoder.replay()
        expected, expected_lse = sparse_reference(*inputs.exact, now, counts)
        check(out.numpy(), lse.numpy(), expected, expected_lse, "float16",
              TOLERANCE["float16"], f"replay {step} seed {inputs.seed}")

"""MLA's absorbed decode and values apart from keys on backend="cuda" and
the Decoder (in `make test`: fdemu, whose every launch is checked for
out-of-bounds, uninitialized and racy accesses), against the float64
reference (reference.py) on fresh random inputs (the run's seed is in each
message; FD_TEST_SEED reruns it): mla_decode at DeepSeek's 16 and 128 heads
per GPU (and at 128 and Kimi K2's 64 x Lq 2 on sm_90a's wgmma tile) with
lengths 0, 1 and not a multiple of the page or chunk, more
splits than tokens, pages of 1, 16 and 64 whose unused slots hold NaN,
Lq = 2 with per-sequence query lengths, e4m3 latent caches per tensor and
per token, graph replays with growing lengths and moved pages, Gemma 4's
512-wide heads with its soft-cap and a window, a value cache narrower than
the keys, and the errors that name the argument."""
import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray
from fp8_checks import dequantized
from per_head_buffers import LSE_TOLERANCE, TOLERANCE, to_device
from reference import (Inputs, attention, check_against_reference, decode,
                       to_bfloat16_bits)

on_the_device = pytest.mark.usefixtures("cuda_driver")

DEEPSEEK_SCALE = 1.0 / np.sqrt(192.0)


def latent_inputs(dtype, heads, batch, max_len, query_len=1):
    q_shape = (batch, heads, 576) if query_len == 1 else \
        (batch, query_len, heads, 576)
    return Inputs(dtype, q_shape, (batch, max_len, 1, 576))


def expected_mla(q, latent, lens, **options):
    return attention(q, latent, latent[..., :512], lens,
                     scale=DEEPSEEK_SCALE, **options)


def check(out, lse, expected, expected_lse, dtype, context):
    """Device out (and lse) against the reference."""
    assert isinstance(out, DeviceArray)
    check_against_reference(out.numpy(), None if lse is None else lse.numpy(),
                            expected, expected_lse, dtype, TOLERANCE[dtype],
                            LSE_TOLERANCE, context)


def nan_pool(rng, latent, page_size, dtype):
    """A shuffled page pool of `latent` ([B, L, 1, D]) whose slots past each
    sequence's cache and spare pages hold NaN (bfloat16: its bit pattern):
    the kernels must never read them. Returns (pool, table)."""
    batch, max_len = latent.shape[:2]
    pages = -(-max_len // page_size)
    num_pages = batch * pages + 3
    table = rng.permutation(num_pages)[:batch * pages].astype(np.int32)
    table = table.reshape(batch, pages)
    nan = to_bfloat16_bits(np.float32(np.nan)) if dtype == "bfloat16" \
        else np.nan
    pool = np.full((num_pages, page_size) + latent.shape[2:], nan,
                   latent.dtype)
    for b in range(batch):
        for j in range(max_len):
            pool[table[b, j // page_size], j % page_size] = latent[b, j]
    return pool, table


@on_the_device
@pytest.mark.parametrize("heads", [16, 128])
@pytest.mark.parametrize("num_splits", [None, 1, 7])
def test_mla_decode_matches_float64(heads, num_splits):
    """Lengths 0 (zeros, lse -inf), 1 (fewer keys than 7 splits) and 129
    (not a multiple of any chunk); bf16."""
    inputs = latent_inputs("bfloat16", heads, 3, 130)
    q, latent, _ = inputs.stored
    lens = inputs.lengths(0, 1, 129)
    out, lse = flashdecode.mla_decode(
        *to_device(q, latent, dtype="bfloat16"), DeviceArray.from_numpy(lens),
        scale=DEEPSEEK_SCALE, return_lse=True, num_splits=num_splits,
        backend="cuda")
    assert out.shape == (3, heads, 512) and lse.shape == (3, heads)
    expected, expected_lse = expected_mla(*inputs.exact[:2], lens)
    check(out, lse, expected, expected_lse, "bfloat16",
          f"seed={inputs.seed} heads={heads} splits={num_splits}")


@on_the_device
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_mla_decode_in_every_dtype_equals_the_cpu(dtype):
    inputs = latent_inputs(dtype, 16, 2, 70)
    q, latent, _ = inputs.stored
    lens = inputs.lengths(70, 33)
    out = flashdecode.mla_decode(*to_device(q, latent),
                                 DeviceArray.from_numpy(lens),
                                 scale=DEEPSEEK_SCALE, num_splits=3,
                                 backend="cuda")
    expected, expected_lse = expected_mla(*inputs.exact[:2], lens)
    check(out, None, expected, expected_lse, dtype, f"seed={inputs.seed}")
    cpu = flashdecode.mla_decode(q, latent, lens, scale=DEEPSEEK_SCALE,
                                 num_splits=3)
    np.testing.assert_allclose(decode(out.numpy(), dtype), decode(cpu, dtype),
                               rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


@on_the_device
@pytest.mark.parametrize("page_size", [1, 16, 64])
def test_paged_mla_decode_never_reads_past_the_cache(page_size):
    inputs = latent_inputs("bfloat16", 16, 2, 100)
    q, latent, _ = inputs.stored
    lens = inputs.lengths(100, 37)
    # Slots past each length hold NaN too.
    latent = latent.copy()
    latent[1, 37:] = to_bfloat16_bits(np.float32(np.nan))
    pool, table = nan_pool(inputs.rng, latent, page_size, "bfloat16")
    out, lse = flashdecode.mla_decode(
        *to_device(q, pool, dtype="bfloat16"), DeviceArray.from_numpy(lens),
        block_table=DeviceArray.from_numpy(table), scale=DEEPSEEK_SCALE,
        return_lse=True, num_splits=3, backend="cuda")
    expected, expected_lse = expected_mla(*inputs.exact[:2], lens)
    check(out, lse, expected, expected_lse, "bfloat16",
          f"seed={inputs.seed} page_size={page_size}")


@on_the_device
def test_multi_token_prediction_with_query_lens():
    inputs = latent_inputs("bfloat16", 16, 3, 64, query_len=2)
    q, latent, _ = inputs.stored
    lens = inputs.lengths(1, 2, 63)
    query_lens = np.array([2, 1, 0], np.int32)
    out, lse = flashdecode.mla_decode(
        *to_device(q, latent, dtype="bfloat16"), DeviceArray.from_numpy(lens),
        scale=DEEPSEEK_SCALE, return_lse=True,
        query_lens=DeviceArray.from_numpy(query_lens), backend="cuda")
    assert out.shape == (3, 2, 16, 512)
    expected, expected_lse = expected_mla(*inputs.exact[:2], lens,
                                          query_lens=query_lens)
    check(out, lse, expected, expected_lse, "bfloat16", f"seed={inputs.seed}")


@on_the_device
@pytest.mark.parametrize("granularity", ["tensor", "token_head"])
def test_fp8_latent_cache(granularity):
    """One k_scale scales the keys and the values read from them; no
    v_scale is bound."""
    inputs = latent_inputs("bfloat16", 16, 2, 80)
    q = inputs.stored[0]
    latent8, _, scale, _ = flashdecode.quantize_kv(
        inputs.exact[1], inputs.exact[1], "float8_e4m3fn",
        granularity=granularity)
    lens = inputs.lengths(80, 5)
    device_scale = scale if isinstance(scale, float) else \
        DeviceArray.from_numpy(scale)
    out, lse = flashdecode.mla_decode(
        DeviceArray.from_numpy(q, dtype="bfloat16"),
        DeviceArray.from_numpy(latent8.view(np.uint8)),
        DeviceArray.from_numpy(lens), scale=DEEPSEEK_SCALE,
        kv_dtype="float8_e4m3fn", k_scale=device_scale, return_lse=True,
        num_splits=3, backend="cuda")
    held = dequantized(latent8, scale, "float8_e4m3fn")
    expected, expected_lse = expected_mla(inputs.exact[0], held, lens)
    check(out, lse, expected, expected_lse, "bfloat16",
          f"seed={inputs.seed} {granularity}")


def decode_over_e4m3(inputs, q, scale):
    """MLA decode of `q` (float64 values, held as bf16) over inputs' latent
    cache quantized to e4m3 with one scale, on the device: out, lse, the
    cache as held (dequantized) and the lengths."""
    latent8, _, k_scale, _ = flashdecode.quantize_kv(
        inputs.exact[1], inputs.exact[1], "float8_e4m3fn",
        granularity="tensor")
    lens = inputs.lengths(80, 5)
    out, lse = flashdecode.mla_decode(
        DeviceArray.from_numpy(to_bfloat16_bits(q), dtype="bfloat16"),
        DeviceArray.from_numpy(latent8.view(np.uint8)),
        DeviceArray.from_numpy(lens), scale=scale,
        kv_dtype="float8_e4m3fn", k_scale=float(k_scale), return_lse=True,
        num_splits=3, backend="cuda")
    return out, lse, dequantized(latent8, k_scale, "float8_e4m3fn"), lens


@on_the_device
@pytest.mark.parametrize("power", [24, -30])
def test_fp8_latent_cache_with_queries_outside_half_range(power):
    """bf16 queries over an e4m3 cache with one scale multiply in f16, q
    times a power of two per block: queries 2^24 times the usual (past
    f16's 65504) or 2^-30 (below its subnormals), the softmax scale divided
    by as much, give the usual attention."""
    inputs = latent_inputs("bfloat16", 16, 2, 80)
    q = inputs.exact[0] * 2.0 ** power
    scale = DEEPSEEK_SCALE * 2.0 ** -power
    out, lse, held, lens = decode_over_e4m3(inputs, q, scale)
    expected, expected_lse = attention(q, held, held[..., :512], lens,
                                       scale=scale)
    check(out, lse, expected, expected_lse, "bfloat16",
          f"seed={inputs.seed} 2^{power}")


@on_the_device
def test_fp8_latent_cache_nan_query_poisons_only_its_row():
    """With f16 products a NaN in one head's q makes that row NaN (output
    and lse); the tile's other rows keep their q (the power of two counts
    finite values only) and match the reference."""
    inputs = latent_inputs("bfloat16", 16, 2, 80)
    q = inputs.exact[0].copy()
    q[0, 3, 100] = np.nan
    out, lse, held, lens = decode_over_e4m3(inputs, q, DEEPSEEK_SCALE)
    actual, actual_lse = decode(out.numpy(), "bfloat16"), lse.numpy()
    assert np.isnan(actual[0, 3]).all() and np.isnan(actual_lse[0, 3]), \
        f"seed={inputs.seed}"
    clean = q.copy()
    clean[0, 3] = 0.0
    expected, expected_lse = expected_mla(clean, held, lens)
    actual[0, 3], actual_lse[0, 3] = 0.0, expected_lse[0, 3]
    expected[0, 3] = 0.0
    check_against_reference(to_bfloat16_bits(actual), actual_lse, expected,
                            expected_lse, "bfloat16", TOLERANCE["bfloat16"],
                            LSE_TOLERANCE, f"seed={inputs.seed}")


@on_the_device
@pytest.mark.parametrize("num_splits", [None, 7])
def test_warpgroup_tile_on_sm90a(num_splits):
    """sm_90a's wgmma tile at DeepSeek's 128 heads (two 64-row tiles) over a
    pool of pages of 64 whose unused slots hold NaN: lengths 0, 1 and 129
    (not a multiple of a step's 32 keys or of a page)."""
    inputs = latent_inputs("bfloat16", 128, 3, 130)
    q, latent, _ = inputs.stored
    lens = inputs.lengths(0, 1, 129)
    latent = latent.copy()
    for b, length in enumerate(lens):
        latent[b, length:] = to_bfloat16_bits(np.float32(np.nan))
    pool, table = nan_pool(inputs.rng, latent, 64, "bfloat16")
    dq, dpool = to_device(q, pool, dtype="bfloat16")
    out, lse = flashdecode.decode_attention(
        dq, dpool, None, DeviceArray.from_numpy(lens),
        block_table=DeviceArray.from_numpy(table), v_head_dim=512,
        scale=DEEPSEEK_SCALE, return_lse=True, num_splits=num_splits,
        arch="sm_90a", backend="cuda")
    expected, expected_lse = expected_mla(*inputs.exact[:2], lens)
    check(out, lse, expected, expected_lse, "bfloat16",
          f"seed={inputs.seed} splits={num_splits}")


@on_the_device
def test_warpgroup_tile_multi_token_prediction_on_sm90a():
    """Kimi K2's 64 heads at Lq = 2 (128 rows, causal) with per-sequence
    query lengths, f16, dense, replayed by a Decoder with growing
    lengths."""
    inputs = latent_inputs("float16", 64, 3, 80, query_len=2)
    q, latent, _ = inputs.stored
    dq, dlatent = to_device(q, latent)
    lens = DeviceArray.from_numpy(inputs.lengths(1, 2, 63))
    query_lens = np.array([2, 1, 0], np.int32)
    out = DeviceArray.empty((3, 2, 64, 512), "float16")
    lse = DeviceArray.empty((3, 2, 64), "float32")
    decoder = flashdecode.Decoder(
        dq, dlatent, None, lens, out, lse, scale=DEEPSEEK_SCALE,
        v_head_dim=512, num_splits=3, arch="sm_90a",
        query_lens=DeviceArray.from_numpy(query_lens))
    decoder.capture()
    for now in [(1, 2, 63), (33, 80, 64)]:
        lengths = inputs.lengths(*now)
        lens.copy_from_numpy(lengths)
        decoder.replay()
        expected, expected_lse = expected_mla(*inputs.exact[:2], lengths,
                                              query_lens=query_lens)
        check(out, lse, expected, expected_lse, "float16",
              f"seed={inputs.seed} lengths {now}")


@on_the_device
def test_decoder_replays_with_growing_lengths_and_moved_pages():
    """A captured Decoder over a paged latent cache: each replay reads the
    lengths and the block table as they are then."""
    inputs = latent_inputs("bfloat16", 16, 2, 96)
    q, latent, _ = inputs.stored
    pool, table = nan_pool(inputs.rng, latent, 16, "bfloat16")
    dq, dpool = to_device(q, pool, dtype="bfloat16")
    lens = DeviceArray.from_numpy(inputs.lengths(1, 0))
    dtable = DeviceArray.from_numpy(table)
    out = DeviceArray.empty((2, 16, 512), "bfloat16")
    lse = DeviceArray.empty((2, 16), "float32")
    decoder = flashdecode.Decoder(dq, dpool, None, lens, out, lse,
                                  block_table=dtable, scale=DEEPSEEK_SCALE,
                                  v_head_dim=512, num_splits=4)
    decoder.capture()
    for step, now in enumerate([(1, 0), (17, 5), (96, 64)]):
        if step == 2:
            # Sequence 0's pages trade places with the spare ones'.
            moved = pool.copy()
            spare = np.setdiff1d(np.arange(pool.shape[0]), table)
            table = table.copy()
            table[0, :3], old = spare[:3], table[0, :3].copy()
            moved[spare[:3]] = pool[old]
            moved[old] = to_bfloat16_bits(np.float32(np.nan))
            dpool.copy_from_numpy(moved)
            dtable.copy_from_numpy(table)
        lengths = inputs.lengths(*now)
        lens.copy_from_numpy(lengths)
        decoder.replay()
        expected, expected_lse = expected_mla(*inputs.exact[:2], lengths)
        check(out, lse, expected, expected_lse, "bfloat16",
              f"seed={inputs.seed} replay {step} lengths {now}")


@on_the_device
def test_gemma4_global_heads_with_soft_cap_and_window():
    """D = D_v = 512 with values of their own, GQA-8, Lq = 2."""
    inputs = Inputs("bfloat16", (2, 2, 16, 512), (2, 60, 2, 512))
    lens = inputs.lengths(60, 9)
    out, lse = flashdecode.decode_attention(
        *to_device(*inputs.stored, dtype="bfloat16"),
        DeviceArray.from_numpy(lens), backend="cuda", return_lse=True,
        logits_soft_cap=30.0, window_left=24, num_splits=3)
    expected, expected_lse = attention(*inputs.exact, lens,
                                       logits_soft_cap=30.0, window_left=24)
    check(out, lse, expected, expected_lse, "bfloat16", f"seed={inputs.seed}")


@on_the_device
def test_value_cache_narrower_than_the_keys():
    """D = 192, D_v = 128 (DeepSeek's heads before absorption), f16."""
    inputs = Inputs("float16", (2, 8, 192), (2, 50, 2, 192))
    q, k, _ = inputs.stored
    v = inputs.rng.normal(0.0, 1.0, (2, 50, 2, 128)).astype(np.float16)
    lens = inputs.lengths(50, 0)
    out, lse = flashdecode.decode_attention(
        *to_device(q, k, v), DeviceArray.from_numpy(lens), v_head_dim=128,
        backend="cuda", return_lse=True, num_splits=4)
    assert out.shape == (2, 8, 128)
    expected, expected_lse = attention(inputs.exact[0], inputs.exact[1],
                                       v.astype(np.float64), lens)
    check(out, lse, expected, expected_lse, "float16", f"seed={inputs.seed}")


@on_the_device
def test_errors_name_the_argument():
    inputs = latent_inputs("bfloat16", 16, 1, 8)
    q, latent = to_device(*inputs.stored[:2], dtype="bfloat16")
    lens = DeviceArray.from_numpy(inputs.lengths(8))
    with pytest.raises(ValueError, match="v_scale must be None with v_cache "
                       "None"):
        flashdecode.decode_attention(q, latent, None, lens, v_head_dim=512,
                                     v_scale=1.0, backend="cuda")
    with pytest.raises(ValueError, match=r"out shape \(1, 16, 576\) must equal "
                       r"q shape \(1, 16, 576\) with the values' head dim "
                       r"512 last: \(1, 16, 512\)"):
        flashdecode.decode_attention(
            q, latent, None, lens, v_head_dim=512, backend="cuda",
            out=DeviceArray.empty((1, 16, 576), "bfloat16"))
    with pytest.raises(ValueError, match="v_cache is None: give v_head_dim"):
        flashdecode.Decoder(q, latent, None, lens,
                            DeviceArray.empty((1, 16, 512), "bfloat16"))

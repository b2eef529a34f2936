"""MLA's absorbed decode and values apart from keys on backend="cpu",
against the float64 reference (reference.py) on fresh random inputs (the
run's seed is in the header; FD_TEST_SEED reruns it): mla_decode over a
latent cache whose first 512 columns are the values, dense and paged,
lengths 0, 1 and not a multiple of the page, Lq = 2 causal, fp8 latent
caches, decode_attention with v_cache None and with a value cache of its own
width, and the errors that name the argument."""
import numpy as np
import pytest

import flashdecode
from fp8_checks import dequantized
from reference import Inputs, attention, check_against_reference, page_pool

DEEPSEEK_SCALE = 1.0 / np.sqrt(192.0)


def latent_inputs(dtype, heads, batch, max_len, query_len=1):
    q_shape = (batch, heads, 576) if query_len == 1 else \
        (batch, query_len, heads, 576)
    return Inputs(dtype, q_shape, (batch, max_len, 1, 576))


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("heads", [16, 128])
@pytest.mark.parametrize("num_splits", [None, 1, 7])
def test_mla_decode_matches_float64(dtype, heads, num_splits):
    inputs = latent_inputs(dtype, heads, 3, 130)
    q, latent, _ = inputs.stored
    lens = inputs.lengths(0, 1, 129)
    out, lse = flashdecode.mla_decode(q, latent, lens, scale=DEEPSEEK_SCALE,
                                      return_lse=True, num_splits=num_splits,
                                      dtype=dtype)
    assert out.shape == (3, heads, 512) and lse.shape == (3, heads)
    exact_q, exact_latent, _ = inputs.exact
    expected, expected_lse = attention(exact_q, exact_latent,
                                       exact_latent[..., :512], lens,
                                       scale=DEEPSEEK_SCALE)
    check_against_reference(out, lse, expected, expected_lse, dtype,
                            1e-2 if dtype == "bfloat16" else 1e-5, 1e-5,
                            f"seed={inputs.seed}")


@pytest.mark.parametrize("page_size", [1, 16, 64])
def test_paged_mla_decode_reads_its_pages(page_size):
    inputs = latent_inputs("bfloat16", 16, 2, 100)
    q, latent, spare = inputs.stored
    lens = inputs.lengths(100, 37)
    pool, _, table = page_pool(inputs.rng, latent, spare, page_size, "NHD")
    paged = flashdecode.mla_decode(q, pool, lens, block_table=table,
                                   scale=DEEPSEEK_SCALE, num_splits=3,
                                   dtype="bfloat16")
    dense = flashdecode.mla_decode(q, latent, lens, scale=DEEPSEEK_SCALE,
                                   num_splits=3, dtype="bfloat16")
    np.testing.assert_array_equal(paged, dense)
    exact_q, exact_latent, _ = inputs.exact
    expected, expected_lse = attention(exact_q, exact_latent,
                                       exact_latent[..., :512], lens,
                                       scale=DEEPSEEK_SCALE)
    check_against_reference(paged, None, expected, expected_lse, "bfloat16",
                            1e-2, 1e-5, f"seed={inputs.seed}")


def test_multi_token_prediction_is_causal():
    inputs = latent_inputs("bfloat16", 16, 3, 64, query_len=2)
    q, latent, _ = inputs.stored
    lens = inputs.lengths(1, 2, 63)
    query_lens = np.array([2, 1, 0], np.int32)
    out, lse = flashdecode.mla_decode(q, latent, lens, scale=DEEPSEEK_SCALE,
                                      return_lse=True, query_lens=query_lens,
                                      dtype="bfloat16")
    assert out.shape == (3, 2, 16, 512)
    exact_q, exact_latent, _ = inputs.exact
    expected, expected_lse = attention(
        exact_q, exact_latent, exact_latent[..., :512], lens,
        scale=DEEPSEEK_SCALE, query_lens=query_lens)
    check_against_reference(out, lse, expected, expected_lse, "bfloat16",
                            1e-2, 1e-5, f"seed={inputs.seed}")


@pytest.mark.parametrize("granularity", ["tensor", "token_head"])
def test_fp8_latent_cache(granularity):
    """One k_scale scales the keys and the values read from them."""
    inputs = latent_inputs("bfloat16", 16, 2, 80)
    q = inputs.stored[0]
    latent = inputs.exact[1]
    latent8, _, scale, _ = flashdecode.quantize_kv(
        latent, latent, "float8_e4m3fn", granularity=granularity)
    lens = inputs.lengths(80, 5)
    out, lse = flashdecode.mla_decode(q, latent8, lens, scale=DEEPSEEK_SCALE,
                                      kv_dtype="float8_e4m3fn", k_scale=scale,
                                      return_lse=True, num_splits=3,
                                      dtype="bfloat16")
    # The reference reads what the cache holds: its fp8 values times their
    # scales.
    held = dequantized(latent8, scale, "float8_e4m3fn")
    expected, expected_lse = attention(inputs.exact[0], held,
                                       held[..., :512], lens,
                                       scale=DEEPSEEK_SCALE)
    check_against_reference(out, lse, expected, expected_lse, "bfloat16",
                            1e-2, 1e-5, f"seed={inputs.seed}")


def test_decode_attention_value_cache_of_its_own_width():
    # D = 192 over D_v = 128, GQA-4; f32.
    inputs = Inputs("float32", (2, 8, 192), (2, 50, 2, 192))
    q, k, _ = inputs.stored
    v = inputs.rng.normal(0.0, 1.0, (2, 50, 2, 128)).astype(np.float32)
    lens = inputs.lengths(50, 0)
    out, lse = flashdecode.decode_attention(q, k, v, lens, v_head_dim=128,
                                            return_lse=True, num_splits=4)
    expected, expected_lse = attention(inputs.exact[0], inputs.exact[1],
                                       v.astype(np.float64), lens)
    check_against_reference(out, lse, expected, expected_lse, "float32",
                            1e-5, 1e-5, f"seed={inputs.seed}")


def test_value_cache_none_needs_v_head_dim():
    inputs = latent_inputs("bfloat16", 16, 1, 8)
    q, latent, _ = inputs.stored
    lens = inputs.lengths(8)
    with pytest.raises(ValueError, match="v_cache is None: give v_head_dim"):
        flashdecode.decode_attention(q, latent, None, lens, dtype="bfloat16")
    out = flashdecode.decode_attention(q, latent, None, lens, v_head_dim=512,
                                       scale=DEEPSEEK_SCALE, dtype="bfloat16")
    np.testing.assert_array_equal(
        out, flashdecode.mla_decode(q, latent, lens, scale=DEEPSEEK_SCALE,
                                    dtype="bfloat16"))


def test_mla_errors_name_the_argument():
    inputs = latent_inputs("bfloat16", 16, 1, 8)
    q, latent, _ = inputs.stored
    lens = inputs.lengths(8)
    with pytest.raises(ValueError, match="q's head dim 512 must equal "
                       "kv_cache's 576"):
        flashdecode.mla_decode(q[..., :512].copy(), latent, lens,
                               dtype="bfloat16")
    with pytest.raises(ValueError, match="head_dim_v 640 must be at most "
                       "kv_cache's head dim 576"):
        flashdecode.mla_decode(q, latent, lens, head_dim_v=640,
                               dtype="bfloat16")
    with pytest.raises(ValueError, match="one latent KV head .* got 2"):
        flashdecode.mla_decode(q, np.concatenate([latent, latent], axis=2),
                               lens, dtype="bfloat16")
    with pytest.raises(ValueError, match="v_scale must be None with v_cache "
                       "None"):
        flashdecode.decode_attention(q, latent, None, lens, v_head_dim=512,
                                     v_scale=1.0, dtype="bfloat16")
    with pytest.raises(ValueError, match="v_head_dim 520 is not supported"):
        flashdecode.decode_attention(q, latent, None, lens, v_head_dim=520,
                                     dtype="bfloat16")


def test_compile_builds_the_latent_kernels():
    """MLA's kernels take no value cache nor v_scale; Gemma 4's 512-wide
    heads compile as any other."""
    kernel = flashdecode.compile(576, 16, 1, "bfloat16", 4, v_head_dim=512,
                                 shared_kv=True, kv_dtype="float8_e4m3fn")
    config = kernel.manifest["config"]
    assert config["shared_kv"] is True and config["v_head_dim"] == 512
    partial = next(spec for spec in kernel.manifest["kernels"]
                   if spec["name"] == "fd_partial_attention")
    names = [param["name"] for param in partial["params"]]
    assert "value_cache" not in names and "v_scale" not in names
    assert "k_scale" in names
    wide = flashdecode.compile(512, 8, 2, num_splits=4)
    assert wide.manifest["config"]["v_head_dim"] == 512
    with pytest.raises(ValueError, match="shared_kv reads the values from "
                       "the key cache's first v_head_dim columns"):
        flashdecode.compile(128, 8, 2, v_head_dim=256, shared_kv=True)
    with pytest.raises(TypeError, match="v_head_dim must be an int"):
        flashdecode.compile(128, 8, 2, v_head_dim=1.5)


def test_plan_splits_plans_the_latent_kernel_as_compile_does():
    """A latent token's 576 columns are read once: plan_splits with
    v_head_dim and shared_kv gives compile()'s automatic count."""
    for heads in (16, 128):
        planned = flashdecode.plan_splits(
            1, 1, 32768, num_q_heads=heads, head_dim=576, v_head_dim=512,
            shared_kv=True, kv_dtype="bfloat16")
        kernel = flashdecode.compile(576, heads, 1, "bfloat16", "auto",
                                     batch=1, max_len=32768, v_head_dim=512,
                                     shared_kv=True)
        assert planned == kernel.num_splits, heads
    with pytest.raises(ValueError, match="head_dim 576 is the value head dim "
                       "too, which is at most 512"):
        flashdecode.plan_splits(1, 1, 4096, num_q_heads=16, head_dim=576)
    with pytest.raises(ValueError, match="shared_kv reads the values from "
                       "the key cache's first v_head_dim columns"):
        flashdecode.plan_splits(1, 1, 4096, num_q_heads=16, head_dim=128,
                                v_head_dim=256, shared_kv=True)
    with pytest.raises(ValueError, match="v_head_dim and shared_kv describe "
                       "the kernel's work"):
        flashdecode.plan_splits(1, 1, 4096, shared_kv=True)

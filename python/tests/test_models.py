"""The attention configuration of each model the README's table names,
compiled and checked against the float64 reference of reference.py on both
backends: the CPU lowering and the GPU kernels (on fdemu in make test, on a
GPU with libcuda). Heads, head dim, window, soft-cap, sinks and ALiBi are
the models'; a sequence longer than the window and a short one (so the
window both cuts and does not). One decode token per sequence (Lq = 1), and
Lq = 3 (speculative decoding) for Llama. MLA's absorbed decode (DeepSeek-V3
at its 16 heads per GPU with tensor parallelism over 8 and its 128 with
data-parallel attention, Kimi K2's 64) reads one latent cache whose first
512 columns are the values, in bf16 and as an e4m3 cache (one scale).

Inputs are fresh random numbers on every run; a failure names its seed.
"""
import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray

from fp8_checks import dequantized
from reference import Inputs, attention, check_with_sinks


def bloom_slopes(heads):
    """ALiBi's slopes for a power-of-two head count: 2^(-8 (h + 1) / H)."""
    return 2.0 ** (-8.0 * (np.arange(heads) + 1) / heads)


# name: (Hq, Hkv, D, dtype, options) — the models' attention layers (Gemma
# 2/3 and gpt-oss alternate windowed and global layers: the windowed ones;
# Gemma 4's global layers, 32 query heads over 4 KV heads of 512, its
# config's global_head_dim and num_global_key_value_heads). "latent": MLA's
# value head dim, the values the first columns of the one latent cache.
MODELS = {
    "Llama-3.1-8B": (32, 8, 128, "bfloat16", {}),
    "Mistral-7B-v0.1": (32, 8, 128, "float16", {"window_left": 4096}),
    "Gemma-2-9B": (16, 8, 256, "bfloat16",
                   {"window_left": 4096, "logits_soft_cap": 50.0}),
    "Gemma-3-12B": (16, 8, 256, "bfloat16", {"window_left": 1024}),
    "gpt-oss-20b": (64, 8, 64, "bfloat16",
                    {"window_left": 128, "sinks": True}),
    "Qwen2.5-7B": (28, 4, 128, "bfloat16", {}),
    "Phi-3-mini": (32, 32, 96, "float16", {}),
    "BLOOM-560m": (16, 16, 64, "float16", {"alibi_slopes": True}),
    "Gemma-4-31B-global": (32, 4, 512, "bfloat16", {}),
    "DeepSeek-V3-TP8": (16, 1, 576, "bfloat16", {"latent": 512}),
    "DeepSeek-V3-TP8-e4m3": (16, 1, 576, "bfloat16",
                             {"latent": 512, "kv_dtype": "float8_e4m3fn"}),
    "DeepSeek-V3-DP": (128, 1, 576, "bfloat16", {"latent": 512}),
    "DeepSeek-V3-DP-e4m3": (128, 1, 576, "bfloat16",
                            {"latent": 512, "kv_dtype": "float8_e4m3fn"}),
    "Kimi-K2-TP8": (64, 1, 576, "bfloat16", {"latent": 512}),
    "Kimi-K2-TP8-e4m3": (64, 1, 576, "bfloat16",
                         {"latent": 512, "kv_dtype": "float8_e4m3fn"}),
}
# DeepSeek-V3's and Kimi K2's softmax scale: 1/sqrt(192) (YaRN's factor
# aside), not 1/sqrt(576).
MLA_SCALE = 1.0 / np.sqrt(192.0)
# The long sequence passes the window (or, without one, a few chunks).
TOLERANCE = {"float16": 1e-2, "bfloat16": 1e-2}
LSE_TOLERANCE = {"cpu": 1e-4, "cuda": 1e-3}


def problem(name, query_len=1):
    heads, kv_heads, dim, dtype, options = MODELS[name]
    window = options.get("window_left")
    long = (window or 1000) + 37
    q_shape = (2, heads, dim) if query_len == 1 else \
        (2, query_len, heads, dim)
    inputs = Inputs(dtype, q_shape, (2, long, kv_heads, dim))
    lens = inputs.lengths(long, 5)
    extra = {}
    if options.get("sinks"):
        extra["sinks"] = inputs.rng.normal(0.0, 2.0, heads).astype(np.float32)
    if options.get("alibi_slopes"):
        extra["alibi_slopes"] = bloom_slopes(heads).astype(np.float32)
    rules = {key: options[key] for key in ("window_left", "logits_soft_cap")
             if key in options}
    return inputs, lens, rules, extra


class Caches:
    """What a model's call reads besides q (decode_attention's k_cache,
    v_cache and their keywords) and what the reference reads: the float64
    keys and values the caches hold."""

    def __init__(self, name, inputs):
        options = MODELS[name][4]
        self.keys, self.values = inputs.stored[1:]
        self.options = {}
        exact_keys, exact_values = inputs.exact[1:]
        latent = options.get("latent")
        if latent:
            self.values = None
            self.options = {"v_head_dim": latent, "scale": MLA_SCALE}
        kv_dtype = options.get("kv_dtype")
        if kv_dtype:
            self.keys, _, scale, _ = flashdecode.quantize_kv(
                exact_keys, exact_keys, kv_dtype)
            exact_keys = dequantized(self.keys, scale, kv_dtype)
            self.options.update(kv_dtype=kv_dtype,
                                k_scale=float(scale.reshape(-1)[0]))
        self.expected_keys = exact_keys
        self.expected_values = exact_keys[..., :latent] if latent \
            else exact_values


def check(name, backend, out, lse, inputs, lens, rules, extra, caches):
    scale = caches.options.get("scale")
    expected, expected_lse = attention(
        inputs.exact[0], caches.expected_keys, caches.expected_values, lens,
        scale=scale, **rules, **extra)
    check_with_sinks(out, lse, expected, expected_lse, lens, inputs.dtype,
                     TOLERANCE[inputs.dtype], LSE_TOLERANCE[backend],
                     f"{name} on {backend}, seed {inputs.seed}")


@pytest.mark.parametrize("name", MODELS)
def test_cpu(name):
    inputs, lens, rules, extra = problem(name)
    caches = Caches(name, inputs)
    dtype = "bfloat16" if inputs.dtype == "bfloat16" else None
    out, lse = flashdecode.decode_attention(
        inputs.stored[0], caches.keys, caches.values, lens, return_lse=True,
        dtype=dtype, **rules, **extra, **caches.options)
    check(name, "cpu", out, lse, inputs, lens, rules, extra, caches)


@pytest.mark.usefixtures("cuda_driver")
@pytest.mark.parametrize("name", MODELS)
def test_cuda(name):
    inputs, lens, rules, extra = problem(name)
    caches = Caches(name, inputs)
    dtype = "bfloat16" if inputs.dtype == "bfloat16" else None
    q, k, v = [None if array is None else DeviceArray.from_numpy(
        array, dtype=dtype if array.dtype == np.uint16 else None)
        for array in (inputs.stored[0], caches.keys, caches.values)]
    device_extra = {key: DeviceArray.from_numpy(value)
                    for key, value in extra.items()}
    out, lse = flashdecode.decode_attention(
        q, k, v, DeviceArray.from_numpy(lens), return_lse=True,
        backend="cuda", **rules, **device_extra, **caches.options)
    check(name, "cuda", out.numpy(), lse.numpy(), inputs, lens, rules, extra,
          caches)


def test_speculative_llama_on_both_backends(cuda_driver):
    inputs, lens, rules, extra = problem("Llama-3.1-8B", query_len=3)
    q, k, v = inputs.stored
    out, lse = flashdecode.decode_attention(
        q, k, v, lens, return_lse=True, dtype="bfloat16")
    caches = Caches("Llama-3.1-8B", inputs)
    check("Llama-3.1-8B Lq=3", "cpu", out, lse, inputs, lens, rules, extra,
          caches)
    device = [DeviceArray.from_numpy(array, dtype="bfloat16")
              for array in inputs.stored]
    out, lse = flashdecode.decode_attention(
        *device, DeviceArray.from_numpy(lens), return_lse=True,
        backend="cuda")
    check("Llama-3.1-8B Lq=3", "cuda", out.numpy(), lse.numpy(), inputs,
          lens, rules, extra, caches)

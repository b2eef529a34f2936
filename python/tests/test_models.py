"""The attention configuration of each model the README's table names,
compiled and checked against the float64 reference of reference.py on both
backends: the CPU lowering and the GPU kernels (on fdemu in make test, on a
GPU with libcuda). Heads, head dim, window, soft-cap, sinks and ALiBi are
the models'; a sequence longer than the window and a short one (so the
window both cuts and does not). One decode token per sequence (Lq = 1), and
Lq = 3 (speculative decoding) for Llama.

Inputs are fresh random numbers on every run; a failure names its seed.
"""
import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray

from reference import Inputs, attention, check_with_sinks


def bloom_slopes(heads):
    """ALiBi's slopes for a power-of-two head count: 2^(-8 (h + 1) / H)."""
    return 2.0 ** (-8.0 * (np.arange(heads) + 1) / heads)


# name: (Hq, Hkv, D, dtype, options) — the models' attention layers (Gemma
# 2/3 and gpt-oss alternate windowed and global layers: the windowed ones).
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
}
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


def check(name, backend, out, lse, inputs, lens, rules, extra):
    q, k, v = inputs.exact
    expected, expected_lse = attention(q, k, v, lens, **rules, **extra)
    check_with_sinks(out, lse, expected, expected_lse, lens, inputs.dtype,
                     TOLERANCE[inputs.dtype], LSE_TOLERANCE[backend],
                     f"{name} on {backend}, seed {inputs.seed}")


@pytest.mark.parametrize("name", MODELS)
def test_cpu(name):
    inputs, lens, rules, extra = problem(name)
    q, k, v = inputs.stored
    dtype = "bfloat16" if inputs.dtype == "bfloat16" else None
    out, lse = flashdecode.decode_attention(
        q, k, v, lens, return_lse=True, dtype=dtype, **rules, **extra)
    check(name, "cpu", out, lse, inputs, lens, rules, extra)


@pytest.mark.usefixtures("cuda_driver")
@pytest.mark.parametrize("name", MODELS)
def test_cuda(name):
    inputs, lens, rules, extra = problem(name)
    dtype = "bfloat16" if inputs.dtype == "bfloat16" else None
    q, k, v = [DeviceArray.from_numpy(array, dtype=dtype)
               for array in inputs.stored]
    device_extra = {key: DeviceArray.from_numpy(value)
                    for key, value in extra.items()}
    out, lse = flashdecode.decode_attention(
        q, k, v, DeviceArray.from_numpy(lens), return_lse=True,
        backend="cuda", **rules, **device_extra)
    check(name, "cuda", out.numpy(), lse.numpy(), inputs, lens, rules, extra)


def test_speculative_llama_on_both_backends(cuda_driver):
    inputs, lens, rules, extra = problem("Llama-3.1-8B", query_len=3)
    q, k, v = inputs.stored
    out, lse = flashdecode.decode_attention(
        q, k, v, lens, return_lse=True, dtype="bfloat16")
    check("Llama-3.1-8B Lq=3", "cpu", out, lse, inputs, lens, rules, extra)
    device = [DeviceArray.from_numpy(array, dtype="bfloat16")
              for array in inputs.stored]
    out, lse = flashdecode.decode_attention(
        *device, DeviceArray.from_numpy(lens), return_lse=True,
        backend="cuda")
    check("Llama-3.1-8B Lq=3", "cuda", out.numpy(), lse.numpy(), inputs,
          lens, rules, extra)

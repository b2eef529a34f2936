"""backend='cuda' and Decoder against the CPU backend (needs a GPU)."""
import numpy as np
import pytest

import flashdecode
from reference import attention, check_with_sinks, random_sinks

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to PyTorch", allow_module_level=True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cuda_matches_cpu(dtype):
    q = torch.randn(3, 8, 128, dtype=torch.float32) * 2
    k = torch.randn(3, 700, 2, 128)
    v = torch.randn(3, 700, 2, 128)
    lens = torch.tensor([0, 333, 700], dtype=torch.int32)
    out, lse = flashdecode.decode_attention(
        q.to(dtype).cuda(), k.to(dtype).cuda(), v.to(dtype).cuda(),
        lens.cuda(), return_lse=True, backend="cuda")
    torch.cuda.synchronize()
    cpu_dtype = "bfloat16" if dtype == torch.bfloat16 else None
    as_numpy = (lambda x: x.to(dtype).view(torch.int16).numpy().view(np.uint16)) \
        if dtype == torch.bfloat16 else (lambda x: x.to(dtype).numpy())
    expected, expected_lse = flashdecode.decode_attention(
        as_numpy(q), as_numpy(k), as_numpy(v), lens.numpy(), return_lse=True,
        dtype=cpu_dtype)
    actual = out.float().cpu().numpy()
    reference = expected.astype(np.float32) if cpu_dtype is None else \
        (expected.astype(np.uint32) << 16).view(np.float32)
    assert np.abs(actual - reference).max() <= 1e-2 * np.abs(reference).max()
    np.testing.assert_allclose(lse.cpu().numpy()[1:], expected_lse[1:],
                               rtol=1e-3, atol=1e-3)


def test_decoder_replays_as_lengths_grow():
    q = (torch.randn(2, 8, 128) * 2).half().cuda()
    k = torch.randn(2, 512, 2, 128).half().cuda()
    v = torch.randn(2, 512, 2, 128).half().cuda()
    lens = torch.tensor([1, 5], dtype=torch.int32).cuda()
    out = torch.empty_like(q)
    decoder = flashdecode.Decoder(q, k, v, lens, out)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        decoder.capture()
        for step in range(0, 500, 99):
            lens.copy_(torch.tensor([1 + step, 5 + step], dtype=torch.int32))
            decoder.replay()
            stream.synchronize()
            expected = flashdecode.decode_attention(
                q.cpu().numpy(), k.cpu().numpy(), v.cpu().numpy(),
                lens.cpu().numpy())
            actual = out.cpu().numpy().astype(np.float32)
            assert np.abs(actual - expected).max() <= \
                1e-2 * np.abs(expected).max()


def test_paged_cuda_matches_cpu():
    pool_k = torch.randn(40, 16, 2, 128).half()
    pool_v = torch.randn(40, 16, 2, 128).half()
    table = torch.randperm(40, dtype=torch.int32)[:36].reshape(3, 12)
    q = (torch.randn(3, 8, 128) * 2).half()
    lens = torch.tensor([192, 100, 0], dtype=torch.int32)
    out = flashdecode.decode_attention(
        q.cuda(), pool_k.cuda(), pool_v.cuda(), lens.cuda(),
        block_table=table.cuda(), backend="cuda")
    torch.cuda.synchronize()
    expected = flashdecode.decode_attention(
        q.numpy(), pool_k.numpy(), pool_v.numpy(), lens.numpy(),
        block_table=table.numpy())
    actual = out.cpu().numpy().astype(np.float32)
    assert np.abs(actual - expected).max() <= 1e-2 * np.abs(expected).max()


def test_kernels_are_compiled_for_this_gpu():
    major, minor = torch.cuda.get_device_capability(0)
    expected = "sm_90" if major >= 9 else \
        {0: "sm_80", 6: "sm_86", 7: "sm_86", 9: "sm_89"}[minor]
    assert flashdecode._flashdecode.cuda_target(0) == expected
    q = torch.randn(1, 8, 128, dtype=torch.float16, device="cuda")
    k = torch.randn(1, 64, 2, 128, dtype=torch.float16, device="cuda")
    lens = torch.tensor([64], dtype=torch.int32, device="cuda")
    out = torch.empty_like(q)
    assert flashdecode.Decoder(q, k, k, lens, out).arch == expected


def test_misaligned_view_is_rejected_before_launching():
    """buf[1:] viewed as q: one f16 element past a 16-byte boundary."""
    buffer = torch.randn(1 + 2 * 8 * 128, dtype=torch.float16, device="cuda")
    q = buffer[1:].view(2, 8, 128)
    k = torch.randn(2, 64, 2, 128, dtype=torch.float16, device="cuda")
    lens = torch.tensor([64, 5], dtype=torch.int32, device="cuda")
    with pytest.raises(ValueError, match=r"^q data pointer 0x[0-9a-f]+ is not "
                       r"16-byte aligned \(address mod 16 = 2\)"):
        flashdecode.decode_attention(q, k, k, lens, backend="cuda")
    # The context is intact, and a copy is aligned.
    out = flashdecode.decode_attention(q.clone(), k, k, lens, backend="cuda")
    torch.cuda.synchronize()
    assert out.shape == q.shape


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_second_gpu_and_mixed_devices():
    q = (torch.randn(2, 8, 128) * 2).half()
    k = torch.randn(2, 300, 2, 128).half()
    lens = torch.tensor([300, 77], dtype=torch.int32)
    on_1 = [x.to("cuda:1") for x in (q, k, k, lens)]
    out = flashdecode.decode_attention(*on_1, backend="cuda")
    assert out.device == torch.device("cuda:1")
    torch.cuda.synchronize(1)
    expected = flashdecode.decode_attention(q.numpy(), k.numpy(), k.numpy(),
                                            lens.numpy())
    actual = out.cpu().numpy().astype(np.float32)
    assert np.abs(actual - expected).max() <= 1e-2 * np.abs(expected).max()
    mixed = [on_1[0].to("cuda:0")] + on_1[1:]
    with pytest.raises(ValueError, match=r"q on cuda:0; k_cache, v_cache, "
                       r"seq_lens on cuda:1"):
        flashdecode.decode_attention(*mixed, backend="cuda")


def test_sinks_as_a_tensor():
    """Attention sinks (float32 [Hq] on the GPU) against the float64
    reference, per call and in a Decoder whose graph reads new values."""
    rng = np.random.default_rng()
    q = torch.from_numpy(rng.normal(0, 2, (3, 8, 128))).half()
    k = torch.from_numpy(rng.normal(0, 1, (3, 500, 2, 128))).half()
    v = torch.from_numpy(rng.normal(0, 1, (3, 500, 2, 128))).half()
    lens = torch.tensor([0, 333, 500], dtype=torch.int32)
    sinks = torch.from_numpy(random_sinks(rng, 8))
    exact = [x.double().numpy() for x in (q, k, v)]

    def check(out, lse, sinks):
        expected, expected_lse = attention(*exact, lens.numpy(),
                                           sinks=sinks.numpy())
        check_with_sinks(out.cpu().numpy(), lse.cpu().numpy(), expected,
                         expected_lse, lens.numpy(), "float16", 1e-2, 1e-3,
                         f"sinks={sinks.tolist()}")

    device = [x.cuda() for x in (q, k, v, lens, sinks)]
    out, lse = flashdecode.decode_attention(*device[:4], sinks=device[4],
                                            return_lse=True, backend="cuda")
    torch.cuda.synchronize()
    check(out, lse, sinks)
    out, lse = torch.empty_like(device[0]), torch.empty(3, 8, device="cuda")
    decoder = flashdecode.Decoder(*device[:4], out, lse, sinks=device[4])
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        decoder.capture()
        for _ in range(3):
            sinks = torch.from_numpy(random_sinks(rng, 8))
            device[4].copy_(sinks)
            decoder.replay()
            stream.synchronize()
            check(out, lse, sinks)
    for bad, words in ((sinks, "sinks must be a CUDA tensor"),
                       (device[4].half(), "sinks must be float32"),
                       (device[4].double(), "sinks dtype is not supported"),
                       (torch.zeros(16, device="cuda")[::2],
                        "sinks must be contiguous"),
                       (device[4][:4], r"sinks must have shape \(8,\)")):
        with pytest.raises(ValueError, match=words):
            flashdecode.decode_attention(*device[:4], sinks=bad,
                                         backend="cuda")


@pytest.mark.parametrize("granularity", ["tensor", "token_head"])
def test_fp8_caches_match_cpu(granularity):
    """uint8 tensors with kv_dtype and float8_e4m3fn tensors (no kv_dtype)
    on a side stream, scales as CUDA tensors and a float (staged on that
    stream), against the CPU backend on the same bytes."""
    rng = np.random.default_rng()
    k = rng.normal(size=(2, 300, 2, 128))
    v = rng.normal(size=(2, 300, 2, 128)) * 4
    kb, vb, ks, vs = flashdecode.quantize_kv(k, v, "float8_e4m3fn",
                                             granularity)
    q = (torch.randn(2, 8, 128) * 2).half()
    lens = np.array([0, 257], np.int32)
    v_scale = float(vs[0]) if granularity == "tensor" else vs
    expected, expected_lse = flashdecode.decode_attention(
        q.numpy(), kb, vb, lens, kv_dtype="float8_e4m3fn", k_scale=ks,
        v_scale=v_scale, return_lse=True)
    k_dev, v_dev = (torch.from_numpy(b).cuda() for b in (kb, vb))
    scales = {"k_scale": torch.from_numpy(ks).cuda(),
              "v_scale": v_scale if granularity == "tensor" else
              torch.from_numpy(vs).cuda()}
    calls = [((k_dev, v_dev), {"kv_dtype": "float8_e4m3fn"})]
    if hasattr(torch, "float8_e4m3fn"):
        calls.append(((k_dev.view(torch.float8_e4m3fn),
                       v_dev.view(torch.float8_e4m3fn)), {}))
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        results = [flashdecode.decode_attention(
            q.cuda(), *caches, torch.from_numpy(lens).cuda(),
            backend="cuda", return_lse=True, **scales, **kv)
            for caches, kv in calls]
    stream.synchronize()
    for out, lse in results:
        actual = out.cpu().numpy().astype(np.float32)
        assert np.abs(actual - expected).max() <= \
            1e-2 * np.abs(expected).max()
        np.testing.assert_allclose(lse.cpu().numpy()[1:], expected_lse[1:],
                                   rtol=1e-3, atol=1e-3)

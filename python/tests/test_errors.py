"""Every class of bad input raises, naming the argument; nothing crashes."""
import numpy as np
import pytest

import flashdecode


def inputs(batch=2, heads=(8, 2), dim=64, length=16, dtype=np.float32):
    q = np.ones((batch, heads[0], dim), dtype)
    k = np.ones((batch, length, heads[1], dim), dtype)
    v = np.ones_like(k)
    lens = np.full(batch, length, np.int32)
    return q, k, v, lens


def test_wrong_rank():
    q, k, v, lens = inputs()
    with pytest.raises(ValueError, match=r"q must be \[B, Hq, D\] or \[B, Lq, Hq, D\]"):
        flashdecode.decode_attention(q[0], k, v, lens)
    with pytest.raises(ValueError, match="k_cache must be 4-D"):
        flashdecode.decode_attention(q, k[0], v, lens)


def test_mismatched_shapes():
    q, k, v, lens = inputs()
    with pytest.raises(ValueError, match="v_cache shape .* must equal k_cache shape"):
        flashdecode.decode_attention(q, k, v[:, :8].copy(), lens)
    with pytest.raises(ValueError, match="k_cache batch 1 must equal q batch 2"):
        flashdecode.decode_attention(q, k[:1], v[:1], lens)
    with pytest.raises(ValueError, match=r"seq_lens must have shape \(2,\)"):
        flashdecode.decode_attention(q, k, v, lens[:1])
    with pytest.raises(ValueError, match="k_cache head dim 32 must equal q head dim 64"):
        flashdecode.decode_attention(q, k[..., :32].copy(), v[..., :32].copy(), lens)


def test_mismatched_dtypes():
    q, k, v, lens = inputs()
    with pytest.raises(TypeError,
                       match=r"k_cache dtype float16 must match q \(float32\)"):
        flashdecode.decode_attention(q, k.astype(np.float16), v, lens)
    with pytest.raises(TypeError, match="dtype float64 is not supported"):
        flashdecode.decode_attention(q.astype(np.float64), k, v, lens)
    with pytest.raises(TypeError, match="pass dtype='bfloat16'"):
        flashdecode.decode_attention(q.view(np.uint16)[..., :64].copy(),
                                     k, v, lens)
    with pytest.raises(TypeError, match="q is float32 but dtype='float16'"):
        flashdecode.decode_attention(q, k, v, lens, dtype="float16")
    with pytest.raises(ValueError, match="dtype must be one of"):
        flashdecode.decode_attention(q, k, v, lens, dtype="float8")
    with pytest.raises(TypeError, match="seq_lens must be a numpy int32 array"):
        flashdecode.decode_attention(q, k, v, lens.astype(np.int64))
    with pytest.raises(TypeError, match="q must be a numpy array"):
        flashdecode.decode_attention(q.tolist(), k, v, lens)


def test_non_contiguous():
    q, k, v, lens = inputs()
    with pytest.raises(ValueError, match="k_cache must be C-contiguous"):
        flashdecode.decode_attention(q, k[:, ::2], v[:, ::2], lens[:] // 2)


def test_lengths_out_of_range():
    q, k, v, lens = inputs()
    with pytest.raises(ValueError, match=r"seq_lens must be in \[0, 16\]"):
        flashdecode.decode_attention(q, k, v, np.array([17, 1], np.int32))
    with pytest.raises(ValueError, match=r"seq_lens must be in \[0, 16\]"):
        flashdecode.decode_attention(q, k, v, np.array([-1, 1], np.int32))


def test_unsupported_heads_and_dims():
    q, k, v, lens = inputs(heads=(6, 4))
    with pytest.raises(ValueError, match=r"q heads \(6\) must be a multiple of k_cache heads \(4\)"):
        flashdecode.decode_attention(q, k, v, lens)
    q, k, v, lens = inputs(dim=100)
    with pytest.raises(ValueError, match="head dim 100 is not supported"):
        flashdecode.decode_attention(q, k, v, lens)
    q, k, v, lens = inputs()
    with pytest.raises(ValueError, match="9 query tokens per sequence; 1 to 8"):
        flashdecode.decode_attention(np.ones((2, 9, 8, 64), np.float32), k, v, lens)


def test_bad_options():
    q, k, v, lens = inputs()
    with pytest.raises(ValueError, match="num_splits must be 'auto', None or a positive int"):
        flashdecode.decode_attention(q, k, v, lens, num_splits=0)
    with pytest.raises(ValueError, match="scale must be a positive finite number"):
        flashdecode.decode_attention(q, k, v, lens, scale=-1.0)
    with pytest.raises(ValueError, match=r"kv_layout must be NHD \(nhd\) or HND \(hnd\)"):
        flashdecode.decode_attention(q, k, v, lens, kv_layout="NDH")
    with pytest.raises(ValueError, match="backend must be 'cpu' or 'cuda'"):
        flashdecode.decode_attention(q, k, v, lens, backend="tpu")
    with pytest.raises(ValueError, match="batch must be >= 1"):
        flashdecode.plan_splits(0, 8, 1024)
    with pytest.raises(ValueError, match="arch 'sm_70' is not supported"):
        flashdecode.compile(128, 32, 8, arch="sm_70")
    with pytest.raises(ValueError, match="head_dim 100 is not supported"):
        flashdecode.compile(100, 32, 8)


def test_cuda_backend_without_a_gpu_or_tensor():
    q, k, v, lens = inputs()
    # numpy arrays are not CUDA tensors: a TypeError naming q.
    with pytest.raises(TypeError, match="q must be a CUDA tensor"):
        flashdecode.decode_attention(q, k, v, lens, backend="cuda")

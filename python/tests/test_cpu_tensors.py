"""backend="cpu" on CPU torch tensors and with out= / lse=: the same kernels
as on numpy arrays (bit-identical results), tensors returned for tensors,
the given buffers written, bad buffers refused naming the argument."""
import numpy as np
import pytest

import flashdecode
from reference import attention

torch = pytest.importorskip("torch")


def _problem(rng, dtype=np.float32):
    q = rng.standard_normal((3, 8, 64)).astype(dtype)
    k = rng.standard_normal((3, 40, 2, 64)).astype(dtype)
    v = rng.standard_normal((3, 40, 2, 64)).astype(dtype)
    lens = np.array([40, 0, 17], np.int32)
    return q, k, v, lens


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_tensors_run_the_numpy_kernels(dtype):
    rng = np.random.default_rng()
    q, k, v, lens = _problem(rng, dtype)
    sinks = rng.standard_normal(8).astype(np.float32)
    expected, expected_lse = flashdecode.decode_attention(
        q, k, v, lens, return_lse=True, sinks=sinks)
    out, lse = flashdecode.decode_attention(
        *(torch.from_numpy(a) for a in (q, k, v, lens)), return_lse=True,
        sinks=torch.from_numpy(sinks))
    assert isinstance(out, torch.Tensor) and isinstance(lse, torch.Tensor)
    assert np.array_equal(out.numpy(), expected)
    assert np.array_equal(lse.numpy(), expected_lse)
    reference, _ = attention(q.astype(np.float64), k.astype(np.float64),
                             v.astype(np.float64), lens, sinks=sinks)
    np.testing.assert_allclose(out.numpy().astype(np.float64), reference,
                               atol=2e-3 if dtype == np.float16 else 2e-5)


def test_bfloat16_tensors():
    rng = np.random.default_rng()
    q, k, v, lens = _problem(rng)
    tq, tk, tv = (torch.from_numpy(a).bfloat16() for a in (q, k, v))
    out = flashdecode.decode_attention(tq, tk, tv, torch.from_numpy(lens))
    assert out.dtype == torch.bfloat16
    bits = [t.view(torch.int16).numpy().view(np.uint16) for t in (tq, tk, tv)]
    expected = flashdecode.decode_attention(*bits, lens, dtype="bfloat16")
    assert np.array_equal(out.view(torch.int16).numpy().view(np.uint16),
                          expected)


def test_out_and_lse_are_written():
    rng = np.random.default_rng()
    q, k, v, lens = _problem(rng)
    expected, expected_lse = flashdecode.decode_attention(q, k, v, lens,
                                                          return_lse=True)
    out = np.full((3, 8, 64), np.nan, np.float32)
    lse = np.full((3, 8), np.nan, np.float32)
    result = flashdecode.decode_attention(q, k, v, lens, return_lse=True,
                                          out=out, lse=lse)
    assert result[0] is out and result[1] is lse
    assert np.array_equal(out, expected) and np.array_equal(lse, expected_lse)
    tout = torch.full((3, 8, 64), float("nan"))
    got = flashdecode.decode_attention(
        *(torch.from_numpy(a) for a in (q, k, v, lens)), out=tout)
    assert got is tout and np.array_equal(tout.numpy(), expected)


def test_bad_buffers_name_the_argument():
    rng = np.random.default_rng()
    q, k, v, lens = _problem(rng)
    with pytest.raises(ValueError, match=r"out must be float32 of shape "
                       r"\(3, 8, 64\), got float16"):
        flashdecode.decode_attention(q, k, v, lens,
                                     out=np.empty((3, 8, 64), np.float16))
    with pytest.raises(ValueError, match=r"lse must be float32 of shape "
                       r"\(3, 8\)"):
        flashdecode.decode_attention(q, k, v, lens, return_lse=True,
                                     lse=np.empty((3, 9), np.float32))
    with pytest.raises(ValueError, match="lse is written only with "
                       "return_lse=True"):
        flashdecode.decode_attention(q, k, v, lens,
                                     lse=np.empty((3, 8), np.float32))
    with pytest.raises(ValueError, match="out must be C-contiguous"):
        flashdecode.decode_attention(
            q, k, v, lens, out=np.empty((3, 8, 128), np.float32)[..., ::2])

"""merge_states, merge_state, merge_state_in_place: the exact log-sum-exp
merge of attention states computed apart (fd.merge_states).

A state is an attention output row and its log-sum-exp over some set of
keys; two states over disjoint key sets merge into the state over their
union. numpy arrays (and CPU torch tensors) run the CPU lowering."""

import numpy as np

from . import _flashdecode as _native

_LSE_BASES = ("e", "2")
_STATE_TYPES = {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32",
                np.dtype(np.uint16): "bf16"}


def _is_torch(array):
    return hasattr(array, "data_ptr") and hasattr(array, "is_cuda")


def _host_view(array, name):
    """(numpy view, torch dtype or None): a CPU torch tensor as numpy
    (bfloat16 as uint16 bit patterns), sharing its memory."""
    if not _is_torch(array):
        return array, None
    if array.is_cuda:
        raise NotImplementedError(
            f"{name} is a CUDA tensor: merge_states runs on the CPU only so "
            "far (numpy arrays and CPU tensors); the GPU kernel is not built "
            "yet")
    import torch
    if array.dtype == torch.bfloat16:
        return array.view(torch.int16).numpy().view(np.uint16), array.dtype
    return array.numpy(), array.dtype


def _as_torch(array, dtype):
    import torch
    if dtype == torch.bfloat16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def _state_type(array, name):
    """fd's element type name of a states array (uint16 and ml_dtypes
    bfloat16: bf16 bit patterns)."""
    if not isinstance(array, np.ndarray):
        if hasattr(array, "__cuda_array_interface__"):
            raise NotImplementedError(
                f"{name} is a device array: merge_states runs on the CPU "
                "only so far (numpy arrays and CPU tensors); the GPU kernel "
                "is not built yet")
        raise TypeError(f"{name} must be a numpy array or a CPU torch "
                        f"tensor, got {type(array).__name__}")
    kind = array.dtype
    if kind.name == "bfloat16":
        kind = np.dtype(np.uint16)
    if kind not in _STATE_TYPES:
        raise TypeError(f"{name} dtype {array.dtype} is not supported: "
                        "expected float16, float32, or bfloat16 as uint16 "
                        "bit patterns")
    return _STATE_TYPES[kind]


def _check_contiguous(array, name):
    if not array.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous "
                         "(numpy.ascontiguousarray makes it so)")


def _check_lse_base(lse_base):
    if lse_base not in _LSE_BASES:
        raise ValueError(f"lse_base must be 'e' (natural logs, flashdecode's "
                         f"lse) or '2' (FlashInfer's), got {lse_base!r}")
    return lse_base == "2"


def _check_lse(array, name, shape):
    if not isinstance(array, np.ndarray) or array.dtype != np.float32:
        raise TypeError(f"{name} must be a float32 array of shape {shape}, "
                        f"got {getattr(array, 'dtype', type(array).__name__)}")
    if array.shape != shape:
        raise ValueError(f"{name} must be float32 {shape} (the states' rows "
                         f"and heads), got shape {array.shape}")
    _check_contiguous(array, name)


def _check_head_dim(head_dim, name):
    if not _native.is_supported_value_head_dim(head_dim):
        raise ValueError(f"{name}'s head dim {head_dim} is not supported: "
                         f"expected a {_native.SUPPORTED_VALUE_HEAD_DIMS}")


def _check_mask(mask, rows):
    """mask [T] bool, uint8 or int8 as the int8 flags the kernel reads."""
    if mask is None:
        return None
    mask, _ = _host_view(mask, "mask")
    if not isinstance(mask, np.ndarray) or mask.dtype not in (
            np.bool_, np.uint8, np.int8):
        raise TypeError("mask must be a bool or uint8 array of shape "
                        f"({rows},), got "
                        f"{getattr(mask, 'dtype', type(mask).__name__)}")
    if mask.shape != (rows,):
        raise ValueError(f"mask must have one flag per row, shape ({rows},), "
                         f"got {mask.shape}")
    _check_contiguous(mask, "mask")
    return mask.view(np.int8)


def _merge(states, lses, out, lse, mask, base2):
    """Runs fd.merge_states over checked arrays: `states` [T, N_i, H, D]
    and `lses` [T, N_i, H], one pair per operand."""
    rows, _, heads, head_dim = states[0].shape
    _native.cpu_merge_states(
        states, lses, out, lse, mask, _state_type(states[0], "v"), rows,
        heads, head_dim, [s.shape[1] for s in states], base2)


def _check_state(v, s, v_name, s_name, stacked):
    """A checked state: v [T, N, H, D] (stacked) or [T, H, D], s its lses;
    returns numpy views of both and the torch dtype (None for numpy)."""
    v, torch_dtype = _host_view(v, v_name)
    s, _ = _host_view(s, s_name)
    _state_type(v, v_name)
    rank = 4 if stacked else 3
    form = "[T, N, H, D]" if stacked else "[T, H, D]"
    if v.ndim != rank:
        raise ValueError(f"{v_name} must be {form}, got shape {v.shape}")
    _check_contiguous(v, v_name)
    _check_head_dim(v.shape[-1], v_name)
    _check_lse(s, s_name, v.shape[:-1])
    return v, s, torch_dtype


def merge_states(v, s, *, lse_base="e"):
    """Merges the N states of each row and head: ``v`` [T, N, H, D]
    (float16, float32, or bfloat16 as uint16 bit patterns), ``s``
    [T, N, H] float32 their lses. Returns (v_out [T, H, D] in v's dtype,
    s_out [T, H] float32), computed in float32::

        m = max_n s[n];  w_n = exp(s[n] - m)
        v_out = sum_n w_n v[n] / sum_n w_n;  s_out = m + log(sum_n w_n)

    ``lse_base="2"`` reads and writes base-2 lses (FlashInfer's; exp2,
    log2); ``"e"`` natural logs (flashdecode's own lse). A state whose lse
    is -inf or +inf is empty: it contributes nothing and its row is not
    read; a row of empty states gives zeros and -inf; a NaN lse gives NaN in
    its row, a NaN element of a non-empty state NaN in that element. numpy
    arrays and CPU torch tensors (returned as such) run on the CPU."""
    base2 = _check_lse_base(lse_base)
    v, s, torch_dtype = _check_state(v, s, "v", "s", stacked=True)
    rows, count, heads, head_dim = v.shape
    if not 1 <= count <= _native.MAX_MERGED_STATES:
        raise ValueError(f"v must hold 1 to {_native.MAX_MERGED_STATES} "
                         f"states a row (its second dimension), got {count}")
    out = np.empty((rows, heads, head_dim), v.dtype)
    lse = np.empty((rows, heads), np.float32)
    _merge([v], [s], out, lse, None, base2)
    if torch_dtype is not None:
        return _as_torch(out, torch_dtype), _as_torch(lse, None)
    return out, lse


def _check_pair(v_a, s_a, v_b, s_b, names):
    """Two checked [T, H, D] states of one shape and dtype."""
    v_a, s_a, torch_dtype = _check_state(v_a, s_a, names[0], names[1],
                                         stacked=False)
    v_b, s_b, _ = _check_state(v_b, s_b, names[2], names[3], stacked=False)
    if v_b.shape != v_a.shape or v_b.dtype != v_a.dtype:
        raise ValueError(f"{names[2]} must have {names[0]}'s shape and dtype "
                         f"{v_a.shape} {v_a.dtype}, got {v_b.shape} "
                         f"{v_b.dtype}")
    return v_a, s_a, v_b, s_b, torch_dtype


def merge_state(v_a, s_a, v_b, s_b, *, lse_base="e"):
    """Merges two states: ``v_a``, ``v_b`` [T, H, D] (one dtype, as for
    merge_states), ``s_a``, ``s_b`` [T, H] float32 their lses. Returns
    (v [T, H, D], s [T, H]), merge_states of the two stacked."""
    base2 = _check_lse_base(lse_base)
    v_a, s_a, v_b, s_b, torch_dtype = _check_pair(
        v_a, s_a, v_b, s_b, ("v_a", "s_a", "v_b", "s_b"))
    rows, heads, head_dim = v_a.shape
    out = np.empty_like(v_a)
    lse = np.empty((rows, heads), np.float32)
    _merge([v_a.reshape(rows, 1, heads, head_dim),
            v_b.reshape(rows, 1, heads, head_dim)],
           [s_a.reshape(rows, 1, heads), s_b.reshape(rows, 1, heads)],
           out, lse, None, base2)
    if torch_dtype is not None:
        return _as_torch(out, torch_dtype), _as_torch(lse, None)
    return out, lse


def merge_state_in_place(v, s, v_other, s_other, mask=None, *,
                         lse_base="e"):
    """Merges ``v_other``, ``s_other`` into ``v``, ``s`` (each [T, H, D] and
    [T, H] float32, as for merge_state), in place: with ``mask`` ([T] bool
    or uint8), only the rows whose flag is set; the others keep their state
    (a fixed shape for CUDA-graph replays). Returns None."""
    base2 = _check_lse_base(lse_base)
    v, s, v_other, s_other, _ = _check_pair(
        v, s, v_other, s_other, ("v", "s", "v_other", "s_other"))
    rows, heads, head_dim = v.shape
    flags = _check_mask(mask, rows)
    _merge([v.reshape(rows, 1, heads, head_dim),
            v_other.reshape(rows, 1, heads, head_dim)],
           [s.reshape(rows, 1, heads), s_other.reshape(rows, 1, heads)],
           v, s, flags, base2)

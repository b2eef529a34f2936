"""merge_states, merge_state, merge_state_in_place: the exact log-sum-exp
merge of attention states computed apart (fd.merge_states).

A state is an attention output row and its log-sum-exp over some set of
keys; two states over disjoint key sets merge into the state over their
union. numpy arrays (and CPU torch tensors) run the CPU lowering; device
arrays (DeviceArray, PyTorch CUDA tensors, __cuda_array_interface__) the
GPU kernel, queued on PyTorch's current stream for tensors and on the
legacy default stream otherwise, or on ``stream``."""

import numpy as np

from . import _flashdecode as _native
from ._common import (_DTYPES, _QUERY_ELEMENT_BYTES, _host_view, _is_torch,
                      _to_tensor)
from ._cuda_arrays import (_CudaArray, _common_device, _new_output,
                           _torch_stream)
from .device_array import DeviceArray

_LSE_BASES = ("e", "2")
_STATE_TYPES = {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32",
                np.dtype(np.uint16): "bf16"}


def _state_type(array, name):
    """fd's element type name of a states array (uint16 and ml_dtypes
    bfloat16: bf16 bit patterns)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, a CPU torch tensor "
                        "or a device array (DeviceArray, a PyTorch CUDA "
                        "tensor, __cuda_array_interface__), got "
                        f"{type(array).__name__}")
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
    mask = _host_view(mask, "mask")
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
    returns numpy views of both and whether v was a torch tensor."""
    tensor = _is_torch(v)
    v, s = _host_view(v, v_name), _host_view(s, s_name)
    _state_type(v, v_name)
    rank = 4 if stacked else 3
    form = "[T, N, H, D]" if stacked else "[T, H, D]"
    if v.ndim != rank:
        raise ValueError(f"{v_name} must be {form}, got shape {v.shape}")
    _check_contiguous(v, v_name)
    _check_head_dim(v.shape[-1], v_name)
    _check_lse(s, s_name, v.shape[:-1])
    return v, s, tensor


def _is_device(array):
    """Whether ``array`` is device memory (a DeviceArray, a PyTorch CUDA
    tensor, an object with __cuda_array_interface__)."""
    if _is_torch(array):
        return array.is_cuda
    return not isinstance(array, np.ndarray) and (
        isinstance(array, DeviceArray) or
        hasattr(array, "__cuda_array_interface__"))


def _aligned(array, bytes_):
    if array.pointer % bytes_:
        raise ValueError(f"{array.name} data pointer {array.pointer:#x} is "
                         f"not {bytes_}-byte aligned (its elements' size)")
    return array


def _device_state(v, s, v_name, s_name, stacked):
    """Checked device arrays of a state: v [T, N, H, D] (stacked) or
    [T, H, D] and its lses s, as _CudaArrays."""
    va = _CudaArray(v, v_name, alignment=1,
                    expected="float16, float32 or bfloat16")
    if va.dtype not in _DTYPES:
        raise va.unsupported()
    _aligned(va, _QUERY_ELEMENT_BYTES[va.dtype])
    rank = 4 if stacked else 3
    if len(va.shape) != rank:
        form = "[T, N, H, D]" if stacked else "[T, H, D]"
        raise ValueError(f"{v_name} must be {form}, got shape {va.shape}")
    _check_head_dim(va.shape[-1], v_name)
    sa = _aligned(_CudaArray(s, s_name, alignment=1, expected="float32"), 4)
    if sa.dtype != "float32" or sa.shape != tuple(va.shape[:-1]):
        raise ValueError(f"{s_name} must be float32 {tuple(va.shape[:-1])} "
                         f"(the states' rows and heads), got {sa.dtype} "
                         f"{sa.shape}")
    return va, sa


def _device_mask(mask, rows):
    if mask is None:
        return None
    ma = _CudaArray(mask, "mask", alignment=1, strict=False)
    if ma.found not in ("bool", "uint8", "int8"):
        raise TypeError(f"mask must be a bool or uint8 array of shape "
                        f"({rows},), got {ma.found}")
    if ma.shape != (rows,):
        raise ValueError(f"mask must have one flag per row, shape ({rows},), "
                         f"got {ma.shape}")
    return ma


def _device_of(arrays):
    """The GPU of checked device arrays; with no rows (empty arrays, whose
    pointers may be 0 and unknown to the driver) the one they name, else
    0: nothing is read."""
    if arrays[0].shape[0]:
        return _common_device(arrays)
    return next((a.device for a in arrays if a.device is not None), 0)


def _device_merge(states, lses, out, lse, mask, base2, like, stream,
                  device):
    """Queues fd.merge_states on GPU `device` (_device_of) over checked
    device arrays: `states` and `lses` _CudaArrays of one operand each,
    `out` and `lse` pointers (no launch without rows)."""
    if not states[0].shape[0]:
        return
    rows, heads, head_dim = states[0].shape[0], states[0].shape[-2], \
        states[0].shape[-1]
    if stream is None:
        stream = _torch_stream(device) if _is_torch(like) else 0
    _native.cuda_merge_states(
        [a.pointer for a in states], [a.pointer for a in lses], out, lse,
        mask.pointer if mask else 0, _DTYPES[states[0].dtype], rows,
        heads, head_dim,
        [a.shape[1] if len(a.shape) == 4 else 1 for a in states], base2,
        device, stream)


def _check_count(count):
    if not 1 <= count <= _native.MAX_MERGED_STATES:
        raise ValueError(f"v must hold 1 to {_native.MAX_MERGED_STATES} "
                         f"states a row (its second dimension), got {count}")


def merge_states(v, s, *, lse_base="e", stream=None):
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
    arrays and CPU torch tensors (returned as such) run on the CPU; device
    arrays on their GPU, queued on ``stream`` (a CUstream handle; None:
    PyTorch's current stream for tensors, else the legacy default stream),
    the outputs new arrays of the same kind: one kernel launch, no
    synchronization. The first call of a shape compiles and loads its
    kernel: make it before capturing a CUDA graph, and capture
    merge_state_in_place, which allocates nothing (a new DeviceArray
    output is a cuMemAlloc, which a capture does not take)."""
    base2 = _check_lse_base(lse_base)
    if _is_device(v):
        va, sa = _device_state(v, s, "v", "s", stacked=True)
        rows, count, heads, head_dim = va.shape
        _check_count(count)
        device = _device_of([va, sa])
        out, out_pointer = _new_output(v, (rows, heads, head_dim), va.dtype,
                                       device)
        lse, lse_pointer = _new_output(v, (rows, heads), "float32", device)
        _device_merge([va], [sa], out_pointer, lse_pointer, None, base2, v,
                      stream, device)
        return out, lse
    v, s, tensor = _check_state(v, s, "v", "s", stacked=True)
    rows, count, heads, head_dim = v.shape
    _check_count(count)
    out = np.empty((rows, heads, head_dim), v.dtype)
    lse = np.empty((rows, heads), np.float32)
    _merge([v], [s], out, lse, None, base2)
    return (_to_tensor(out), _to_tensor(lse)) if tensor else (out, lse)


def _check_alike(a, b, names):
    """The second state of a pair has the first's shape and dtype."""
    if tuple(b.shape) != tuple(a.shape) or b.dtype != a.dtype:
        raise ValueError(f"{names[2]} must have {names[0]}'s shape and dtype "
                         f"{tuple(a.shape)} {a.dtype}, got {tuple(b.shape)} "
                         f"{b.dtype}")


def _check_pair(v_a, s_a, v_b, s_b, names):
    """Two checked [T, H, D] states of one shape and dtype."""
    v_a, s_a, tensor = _check_state(v_a, s_a, names[0], names[1],
                                    stacked=False)
    v_b, s_b, _ = _check_state(v_b, s_b, names[2], names[3], stacked=False)
    _check_alike(v_a, v_b, names)
    return v_a, s_a, v_b, s_b, tensor


def _device_pair(v_a, s_a, v_b, s_b, names):
    """Two checked [T, H, D] device states of one shape and dtype."""
    va, sa = _device_state(v_a, s_a, names[0], names[1], stacked=False)
    vb, sb = _device_state(v_b, s_b, names[2], names[3], stacked=False)
    _check_alike(va, vb, names)
    return va, sa, vb, sb


def merge_state(v_a, s_a, v_b, s_b, *, lse_base="e", stream=None):
    """Merges two states: ``v_a``, ``v_b`` [T, H, D] (one dtype, as for
    merge_states), ``s_a``, ``s_b`` [T, H] float32 their lses. Returns
    (v [T, H, D], s [T, H]), merge_states of the two stacked; device
    arrays and ``stream`` as for merge_states."""
    base2 = _check_lse_base(lse_base)
    names = ("v_a", "s_a", "v_b", "s_b")
    if _is_device(v_a):
        va, sa, vb, sb = _device_pair(v_a, s_a, v_b, s_b, names)
        rows, heads, head_dim = va.shape
        device = _device_of([va, sa, vb, sb])
        out, out_pointer = _new_output(v_a, va.shape, va.dtype, device)
        lse, lse_pointer = _new_output(v_a, (rows, heads), "float32", device)
        _device_merge([va, vb], [sa, sb], out_pointer, lse_pointer, None,
                      base2, v_a, stream, device)
        return out, lse
    v_a, s_a, v_b, s_b, tensor = _check_pair(v_a, s_a, v_b, s_b, names)
    rows, heads, head_dim = v_a.shape
    out = np.empty_like(v_a)
    lse = np.empty((rows, heads), np.float32)
    _merge([v_a.reshape(rows, 1, heads, head_dim),
            v_b.reshape(rows, 1, heads, head_dim)],
           [s_a.reshape(rows, 1, heads), s_b.reshape(rows, 1, heads)],
           out, lse, None, base2)
    return (_to_tensor(out), _to_tensor(lse)) if tensor else (out, lse)


def merge_state_in_place(v, s, v_other, s_other, mask=None, *,
                         lse_base="e", stream=None):
    """Merges ``v_other``, ``s_other`` into ``v``, ``s`` (each [T, H, D] and
    [T, H] float32, as for merge_state), in place: with ``mask`` ([T] bool
    or uint8), only the rows whose flag is set; the others keep their state
    (a fixed shape for CUDA-graph replays: the mask's contents are read at
    every launch). Returns None; device arrays and ``stream`` as for
    merge_states."""
    base2 = _check_lse_base(lse_base)
    names = ("v", "s", "v_other", "s_other")
    if _is_device(v):
        va, sa, vb, sb = _device_pair(v, s, v_other, s_other, names)
        flags = _device_mask(mask, va.shape[0])
        device = _device_of([va, sa, vb, sb] + ([flags] if flags else []))
        _device_merge([va, vb], [sa, sb], va.pointer, sa.pointer, flags,
                      base2, v, stream, device)
        return None
    v, s, v_other, s_other, _ = _check_pair(v, s, v_other, s_other, names)
    rows, heads, head_dim = v.shape
    flags = _check_mask(mask, rows)
    _merge([v.reshape(rows, 1, heads, head_dim),
            v_other.reshape(rows, 1, heads, head_dim)],
           [s.reshape(rows, 1, heads), s_other.reshape(rows, 1, heads)],
           v, s, flags, base2)

"""backend="cuda"'s arguments: device arrays (DeviceArray, PyTorch CUDA
tensors, __cuda_array_interface__ objects) checked for the kernels (dtype,
shape, alignment, one GPU), outputs made on that GPU, lengths read back, and
the stream PyTorch would use; shared by decode_attention, the Decoder and
the merges."""

import contextvars
import functools
import math

import numpy as np

from . import _flashdecode as _native
from . import _fp8
from ._common import (_BUFFERS, _DTYPES, _Problem, _buffer_shape_error,
                      _is_torch, _length_bound)
from .device_array import DeviceArray


# What needs the device memory the checks below ask for: "backend='cuda'"
# (decode_attention, cascade_decode) or a class that binds device buffers,
# "a Decoder", "a CascadeDecoder" (_checks_for).
_CALLER_DEFAULT = "backend='cuda'"
_CALLER = contextvars.ContextVar("flashdecode_caller",
                                 default=_CALLER_DEFAULT)


def _checks_for(caller):
    """Decorator: within the function, the checks' messages name `caller`
    as what needs device memory, unless a caller around it is named
    already (a CascadeDecoder's Decoders speak for the CascadeDecoder)."""
    def decorate(function):
        @functools.wraps(function)
        def checked(*args, **kwargs):
            outer = _CALLER.get() != _CALLER_DEFAULT
            token = None if outer else _CALLER.set(caller)
            try:
                return function(*args, **kwargs)
            finally:
                if token is not None:
                    _CALLER.reset(token)
        return checked
    return decorate


class NotOnDeviceError(TypeError, ValueError):
    """A host object (a numpy array, a list, a CPU tensor) given where
    backend="cuda" or a Decoder needs device memory. The same class for q,
    the caches, the lengths, the feature buffers and the scales: a TypeError
    (the object's kind) and a ValueError (as every other problem of a
    feature buffer or scale is)."""


class _CudaArray:
    """Pointer, shape, dtype and device of a contiguous device array, its
    pointer checked for the alignment the kernels read it with. ``device`` is
    None for a ``__cuda_array_interface__`` object until _common_device asks
    the driver. A dtype the kernels do not know is a TypeError, or with
    ``strict=False`` (the caches, whose dtype _fp8.kv_format judges first)
    ``dtype`` None and its name in ``found``."""

    _TORCH = {"torch.float32": "float32", "torch.float16": "float16",
              "torch.bfloat16": "bfloat16", "torch.int32": "int32",
              "torch.uint8": "uint8", "torch.float8_e4m3fn": "float8_e4m3fn",
              "torch.float8_e5m2": "float8_e5m2"}
    _TYPESTR = {"<f4": "float32", "<f2": "float16", "<i4": "int32",
                "|u1": "uint8"}

    def __init__(self, array, name, alignment=16,
                 expected="float32, float16 or bfloat16 (int32 for seq_lens)",
                 strict=True):
        self.name = name
        if isinstance(array, DeviceArray):
            # Its interface cannot say bfloat16 (no typestr for it).
            self.pointer = array._address
            self.shape = array.shape
            self.dtype = array.dtype
            self.device = array.device
            contiguous = True
        elif _is_torch(array):
            if not array.is_cuda:
                raise NotOnDeviceError(
                    f"{name} must be a CUDA tensor for {_CALLER.get()}")
            self.pointer = array.data_ptr()
            self.shape = tuple(array.shape)
            self.dtype = self._TORCH.get(str(array.dtype))
            self.device = array.device.index
            contiguous = array.is_contiguous()
        elif hasattr(array, "__cuda_array_interface__"):
            interface = array.__cuda_array_interface__
            self.pointer = interface["data"][0]
            self.shape = tuple(interface["shape"])
            self.dtype = self._TYPESTR.get(interface["typestr"])
            self.device = None
            contiguous = interface.get("strides") is None
        else:
            hint = " (flashdecode.DeviceArray.from_numpy copies one to the " \
                "device)" if isinstance(array, np.ndarray) else ""
            raise NotOnDeviceError(f"{name} must be a CUDA tensor for "
                            f"{_CALLER.get()}: a flashdecode.DeviceArray, a "
                            "PyTorch CUDA tensor or an object with "
                            "__cuda_array_interface__; got "
                            f"{type(array).__module__}.{type(array).__name__}"
                            + hint)
        self.found = self.dtype
        if self.dtype is None:
            # Named only here: the per-call path knows its dtypes.
            self.found = str(array.dtype).removeprefix("torch.") \
                if _is_torch(array) else \
                _typestr_name(array.__cuda_array_interface__["typestr"])
            self.expected = expected
            if strict:
                raise self.unsupported()
        if not contiguous:
            raise ValueError(f"{name} must be contiguous")
        # A misaligned base would kill the CUDA context with a misaligned
        # address fault: refuse it before anything is launched.
        if self.pointer % alignment:
            raise ValueError(
                f"{name} data pointer {self.pointer:#x} is not "
                f"{alignment}-byte aligned (address mod {alignment} = "
                f"{self.pointer % alignment}): the kernels read it "
                f"{alignment} bytes at a time, so a view that starts inside a "
                "buffer (such as buf[1:]) cannot be used; pass a copy (e.g. "
                "tensor.clone())")

    def unsupported(self):
        return TypeError(f"{self.name} dtype is not supported: expected "
                         f"{self.expected}")


def _typestr_name(typestr):
    """A readable name of a __cuda_array_interface__ typestr."""
    try:
        return np.dtype(typestr).name
    except TypeError:
        return typestr


def _common_device(arrays):
    """The GPU every _CudaArray is on; ValueError naming the arguments when
    they differ or when the driver does not know a pointer."""
    devices = {}
    for array in arrays:
        if array is None:  # a length staged by the launch
            continue
        if array.device is None:
            array.device = _native.pointer_device(array.pointer)
            if array.device is None:
                raise ValueError(
                    f"{array.name} (data pointer {array.pointer:#x}) is not "
                    "device memory the CUDA driver knows: expected memory "
                    "allocated through the driver (a DeviceArray, a PyTorch "
                    "or CuPy CUDA array)")
        devices.setdefault(array.device, []).append(array.name)
    if len(devices) > 1:
        where = "; ".join(f"{', '.join(names)} on cuda:{device}"
                          for device, names in sorted(devices.items()))
        raise ValueError(f"the arrays are on different GPUs ({where}): all "
                         "must be on one")
    return next(iter(devices))


_cuda_devices = {}


def _device_info(device):
    """(PTX target for the compute capability, SM count) of GPU ``device``,
    asked of the driver once."""
    info = _cuda_devices.get(device)
    if info is None:
        info = (_native.cuda_target(device), _native.cuda_sm_count(device))
        _cuda_devices[device] = info
    return info


def _check_float(array, name):
    if array.dtype not in _DTYPES:
        raise TypeError(f"{name} dtype {array.dtype} is not supported: "
                        "expected float32, float16 or bfloat16")


_CACHE_DTYPES = "float32, float16 or bfloat16 (q's), or uint8 or fp8 (with " \
    "kv_dtype)"


def _check_cuda_inputs(q, k_cache, v_cache, seq_lens, block_table, kv_layout,
                       dtype, kv_dtype=None, v_head_dim=None,
                       shared_prefix=False):
    """(_Problem, [_CudaArray of q, k_cache, v_cache, seq_lens(, table)],
    the caches' fp8 format: a kv_dtype name or None). With v_cache None
    (v_head_dim given: the values are k_cache's first v_head_dim columns)
    k_cache stands in for v_cache in the list; _value_pointer is then 0.
    With shared_prefix the caches hold one shared prefix (_Problem), whose
    length may be an int the launch stages: None in the list then."""
    qa = _CudaArray(q, "q")
    if qa.dtype not in _DTYPES:
        _fp8.check_query_dtype(qa.found)
        _check_float(qa, "q")
    if dtype is not None and dtype != qa.dtype:
        raise TypeError(f"q is {qa.dtype} but dtype={dtype!r} was given")
    ka = _CudaArray(k_cache, "k_cache", expected=_CACHE_DTYPES, strict=False)
    va = ka if v_cache is None else _CudaArray(
        v_cache, "v_cache", expected=_CACHE_DTYPES, strict=False)
    kv_format = _fp8.kv_format(ka.found, va.found, kv_dtype)
    # Lengths are read one int32 at a time.
    staged = shared_prefix and isinstance(seq_lens, int)
    la = None if staged else _CudaArray(seq_lens, "seq_lens", alignment=4)
    arrays = [qa, ka, va, la]
    table_shape = None
    if block_table is not None:
        table = _CudaArray(block_table, "block_table")
        if table.dtype != "int32":
            raise TypeError("block_table must be int32")
        arrays.append(table)
        table_shape = table.shape
    problem = _Problem(qa.shape, ka.shape,
                       None if v_cache is None else va.shape,
                       (1,) if staged else la.shape, kv_layout, table_shape,
                       v_head_dim, shared_prefix=shared_prefix)
    if kv_format is None:
        for other in (ka, va):
            if other.dtype is None:
                raise other.unsupported()
            if other.dtype != qa.dtype:
                raise TypeError(f"{other.name} dtype {other.dtype} must match "
                                f"q ({qa.dtype})")
    if la is not None and la.dtype != "int32":
        raise TypeError("seq_lens must be int32")
    return problem, arrays, kv_format


def _value_pointer(problem, arrays):
    """The value cache's address for the kernels: 0 where the values are
    the key cache's (_check_cuda_inputs)."""
    return 0 if problem.shared_kv else arrays[2].pointer


def _scale_array(scale, name):
    """A k_scale / v_scale array for backend="cuda" and Decoder
    (_fp8.check_scales' as_array): a device array, read a float at a time
    (4-byte aligned). Every problem is a ValueError naming the argument (a
    host object a NotOnDeviceError, a ValueError too)."""
    if isinstance(scale, np.ndarray) or not (
            isinstance(scale, DeviceArray) or _is_torch(scale) or
            hasattr(scale, "__cuda_array_interface__")):
        hint = " (flashdecode.DeviceArray.from_numpy copies one to the " \
            "device)" if isinstance(scale, np.ndarray) else ""
        raise NotOnDeviceError(
            f"{name} must be a float or a float32 device array for "
            f"{_CALLER.get()} (a flashdecode.DeviceArray, a PyTorch CUDA tensor "
            "or an object with __cuda_array_interface__), got "
            f"{type(scale).__module__}.{type(scale).__name__}" + hint)
    return _read_by_element(scale, name, "float32")


def _check_cuda_scales(kv_format, k_scale, v_scale, arrays, problem):
    """_fp8.check_scales over device arrays: ([(k_scale, its granularity),
    (v_scale, its granularity)], the kernel's granularity, the number of
    scales per token and KV head), each scale a float or a _CudaArray
    (also appended to ``arrays``, for the common device). Values read from
    the key cache are scaled by k_scale: its entry alone is returned, and
    no v_scale is bound."""
    if problem.shared_kv:
        v_scale = _fp8.shared_value_scale(k_scale, v_scale)
    if kv_format is None and k_scale is None and v_scale is None:
        return [], "tensor", 0  # the per-call path without fp8
    cache_shape = arrays[1].shape
    scales, granularity = _fp8.check_scales(kv_format, k_scale, v_scale,
                                            cache_shape, _scale_array)
    if problem.shared_kv:
        scales = scales[:1]
    arrays.extend(scale for scale, _ in scales
                  if isinstance(scale, _CudaArray))
    return scales, granularity, math.prod(cache_shape[:-1])


def _check_out(out, q, problem):
    array = _CudaArray(out, "out")
    if array.dtype != q.dtype:
        raise TypeError(f"out dtype {array.dtype} must match q ({q.dtype})")
    if array.shape != problem.out_shape():
        apart = "" if problem.value_head_dim == problem.head_dim else \
            f" with the values' head dim {problem.value_head_dim} last: " \
            f"{problem.out_shape()}"
        raise ValueError(f"out shape {array.shape} must equal q shape "
                         f"{q.shape}{apart}")
    return array


def _check_lse(lse, problem):
    array = _CudaArray(lse, "lse")
    if array.shape != problem.lse_shape() or array.dtype != "float32":
        raise ValueError(f"lse must be float32 {problem.lse_shape()}")
    return array


def _read_by_element(array, name, dtype):
    """The _CudaArray of a device buffer the kernels read an element of
    ``dtype`` at a time (4-byte aligned); its problems are ValueErrors."""
    try:
        return _CudaArray(array, name, alignment=4, expected=dtype)
    except NotOnDeviceError:
        raise
    except TypeError as error:
        raise ValueError(str(error)) from None


def _check_buffer(array, name, problem):
    """The _CudaArray of sinks, alibi_slopes (float32 [Hq]) or query_lens
    (int32 [B]): device memory read an element at a time (4-byte aligned).
    Every problem is a ValueError naming the argument."""
    dtype = _BUFFERS[name][0]
    array = _read_by_element(array, name, dtype)
    if array.dtype != dtype:
        raise ValueError(f"{name} must be {dtype}, got {array.dtype}")
    shape_error = _buffer_shape_error(name, array.shape, problem)
    if shape_error:
        raise ValueError(shape_error)
    return array


def _check_buffers(buffers, problem, arrays):
    """The pointers (0 for None) of the optional buffers (name -> array or
    None), each checked (_check_buffer) and appended to ``arrays``."""
    pointers = {}
    for name, array in buffers.items():
        pointers[name] = 0
        if array is not None:
            arrays.append(_check_buffer(array, name, problem))
            pointers[name] = arrays[-1].pointer
    return pointers


def _check_suffix_lens(suffix_lens, problem):
    """The _CudaArray of a shared prefix's suffix lengths: int32 [B] device
    memory, read an element at a time (4-byte aligned); its problems are
    ValueErrors naming the argument (cascade_decode's seq_lens)."""
    array = _read_by_element(suffix_lens, "seq_lens", "int32")
    if array.dtype != "int32" or array.shape != (problem.batch,):
        raise ValueError(f"seq_lens (the suffixes' lengths) must be int32 "
                         f"({problem.batch},), got {array.dtype} "
                         f"{array.shape}")
    return array


def _new_output(like, shape, dtype, device):
    """(array, data pointer): a tensor on ``device`` when ``like`` is a
    PyTorch tensor, a DeviceArray otherwise."""
    if _is_torch(like):
        import torch
        tensor = torch.empty(shape, dtype=getattr(torch, dtype),
                             device=like.device)
        return tensor, tensor.data_ptr()
    array = DeviceArray.empty(shape, dtype, device=device)
    return array, array._address


def _shard_pointer(kv_shard, device):
    """CudaLauncher's and CudaPlan's kv_shard_rank: 0, or the address of
    the rank on ``device``."""
    return 0 if kv_shard is None else \
        _native.shard_rank_address(kv_shard.rank, device)


def _check_device_lengths(problem, seq_lens, query_lens, device, stream,
                          kv_shard=None):
    """check_lengths=True: the lengths at device addresses ``seq_lens`` and
    ``query_lens`` (0: none), read back once ``stream``'s queued work is done
    (None: the legacy default stream, which waits for blocking streams'),
    each in [0, max_len] (_length_bound) ([0, Lq]), or a ValueError naming
    the first entry outside."""
    for name, address, (bound, what) in (
            ("seq_lens", seq_lens, _length_bound(problem.max_len, kv_shard)),
            ("query_lens", query_lens,
             (problem.query_len, "at most the query tokens of q"))):
        if not address:
            continue
        values = _native.read_int32(address, problem.batch, device,
                                    stream or 0)
        bad = np.flatnonzero((values < 0) | (values > bound))
        if bad.size:
            first = int(bad[0])
            raise ValueError(
                f"{name}[{first}] = {int(values[first])} is outside [0, "
                f"{bound}] ({what}; check_lengths=True read it back)")


def _torch_stream(device):
    import torch
    return torch.cuda.current_stream(device).cuda_stream

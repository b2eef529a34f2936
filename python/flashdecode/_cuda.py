"""backend="cuda" and Decoder: device arrays (DeviceArray, PyTorch CUDA
tensors, __cuda_array_interface__ objects) on the GPU that holds them, with
kernels compiled for its compute capability and loaded once per
configuration and GPU."""

import numpy as np

from . import _flashdecode as _native
from ._common import (_BUFFERS, _DTYPES, _Problem, _buffer_flags,
                      _buffer_shape_error, _check_scale, _check_soft_cap,
                      _check_window, _planner_options, _split_options)
from .device_array import DeviceArray


def _is_torch(array):
    return hasattr(array, "data_ptr") and hasattr(array, "is_cuda")


class _CudaArray:
    """Pointer, shape, dtype and device of a contiguous device array, its
    pointer checked for the alignment the kernels read it with. ``device`` is
    None for a ``__cuda_array_interface__`` object until _common_device asks
    the driver."""

    _TORCH = {"torch.float32": "float32", "torch.float16": "float16",
              "torch.bfloat16": "bfloat16", "torch.int32": "int32"}
    _TYPESTR = {"<f4": "float32", "<f2": "float16", "<i4": "int32"}

    def __init__(self, array, name, alignment=16,
                 expected="float32, float16 or bfloat16 (int32 for seq_lens)"):
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
                raise TypeError(f"{name} must be a CUDA tensor for backend='cuda'")
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
            raise TypeError(f"{name} must be a CUDA tensor for "
                            "backend='cuda': a flashdecode.DeviceArray, a "
                            "PyTorch CUDA tensor or an object with "
                            "__cuda_array_interface__; got "
                            f"{type(array).__module__}.{type(array).__name__}"
                            + hint)
        if self.dtype is None:
            raise TypeError(f"{name} dtype is not supported: expected "
                            f"{expected}")
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


def _common_device(arrays):
    """The GPU every _CudaArray is on; ValueError naming the arguments when
    they differ or when the driver does not know a pointer."""
    devices = {}
    for array in arrays:
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


def _check_cuda_inputs(q, k_cache, v_cache, seq_lens, block_table, kv_layout,
                       dtype):
    """(_Problem, [_CudaArray of q, k_cache, v_cache, seq_lens(, table)])."""
    qa = _CudaArray(q, "q")
    _check_float(qa, "q")
    if dtype is not None and dtype != qa.dtype:
        raise TypeError(f"q is {qa.dtype} but dtype={dtype!r} was given")
    ka, va = _CudaArray(k_cache, "k_cache"), _CudaArray(v_cache, "v_cache")
    # Lengths are read one int32 at a time.
    la = _CudaArray(seq_lens, "seq_lens", alignment=4)
    arrays = [qa, ka, va, la]
    table_shape = None
    if block_table is not None:
        table = _CudaArray(block_table, "block_table")
        if table.dtype != "int32":
            raise TypeError("block_table must be int32")
        arrays.append(table)
        table_shape = table.shape
    problem = _Problem(qa.shape, ka.shape, va.shape, la.shape, kv_layout,
                       table_shape)
    for other in (ka, va):
        if other.dtype != qa.dtype:
            raise TypeError(f"{other.name} dtype {other.dtype} must match q "
                            f"({qa.dtype})")
    if la.dtype != "int32":
        raise TypeError("seq_lens must be int32")
    return problem, arrays


def _check_out(out, q):
    array = _CudaArray(out, "out")
    if array.dtype != q.dtype:
        raise TypeError(f"out dtype {array.dtype} must match q ({q.dtype})")
    if array.shape != q.shape:
        raise ValueError(f"out shape {array.shape} must equal q shape "
                         f"{q.shape}")
    return array


def _check_lse(lse, problem):
    array = _CudaArray(lse, "lse")
    if array.shape != problem.lse_shape() or array.dtype != "float32":
        raise ValueError(f"lse must be float32 {problem.lse_shape()}")
    return array


def _check_buffer(array, name, problem):
    """The _CudaArray of sinks, alibi_slopes (float32 [Hq]) or query_lens
    (int32 [B]): device memory read an element at a time (4-byte aligned).
    Every problem is a ValueError naming the argument."""
    dtype = _BUFFERS[name][0]
    try:
        array = _CudaArray(array, name, alignment=4, expected=dtype)
    except TypeError as error:
        raise ValueError(str(error)) from None
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


def _torch_stream(device):
    import torch
    return torch.cuda.current_stream(device).cuda_stream


class Decoder:
    """Fixed GPU buffers bound once, for CUDA-graph decoding.

        decoder = Decoder(q, k_cache, v_cache, seq_lens, out)
        decoder.capture()        # records partial + merge once
        ...                      # write new lengths into seq_lens in place
        decoder.replay()         # one launch, no re-capture

    The Decoder keeps its arrays (DeviceArray, PyTorch CUDA tensors,
    __cuda_array_interface__ objects) alive; they must keep their addresses,
    so rebinding means a new Decoder. All must be on one GPU (``device``),
    which decides the context; the kernels are compiled for its compute
    capability (``arch``, e.g. "sm_80" on an A100) unless ``arch=`` names a
    target. ``stream`` is a CUstream handle (int); the default is PyTorch's
    current stream for tensors, else a stream the Decoder owns
    (DeviceArray.numpy() and copy_from_numpy() wait for it). Deleting the
    Decoder waits for the streams it launched on. ``blocks_per_sm``,
    ``min_chunk_length`` and ``max_splits`` are the split planner's knobs
    (see plan_splits; None keeps the default); ``window_left`` and
    ``logits_soft_cap`` are decode_attention's. ``sinks`` (attention
    sinks: a float32 ``[Hq]`` device array on the same GPU, one logit per
    query head) is bound like every buffer: its contents are read at each
    run() and replay(), so new values written in place need no re-capture.
    ``alibi_slopes`` (ALiBi: a float32 ``[Hq]`` device array, one slope per
    query head) likewise: the partial kernel reads it at every launch.
    ``query_lens`` (per-sequence query lengths: an int32 ``[B]`` device
    array, decode_attention's) likewise: both kernels read it at every
    launch, so a replay may have another number of real query tokens per
    sequence (values outside ``[0, Lq]`` are clamped).
    """

    def __init__(self, q, k_cache, v_cache, seq_lens, out, lse=None, *,
                 num_splits=None, scale=None, kv_layout="NHD",
                 block_table=None, arch=None, blocks_per_sm=None,
                 min_chunk_length=None, max_splits=None, window_left=None,
                 logits_soft_cap=None, sinks=None, alibi_slopes=None,
                 query_lens=None):
        window_left = _check_window(window_left)
        logits_soft_cap = _check_soft_cap(logits_soft_cap)
        problem, arrays = _check_cuda_inputs(q, k_cache, v_cache, seq_lens,
                                             block_table, kv_layout, None)
        qa, ka, va, la = arrays[:4]
        oa = _check_out(out, qa)
        arrays.append(oa)
        lse_pointer = 0
        if lse is not None:
            arrays.append(_check_lse(lse, problem))
            lse_pointer = arrays[-1].pointer
        buffers = {"sinks": sinks, "alibi_slopes": alibi_slopes,
                   "query_lens": query_lens}
        pointers = _check_buffers(buffers, problem, arrays)
        splits, split_kv = _split_options(num_splits)
        self.device = _common_device(arrays)
        target, sm_count = _device_info(self.device)
        self._keep_alive = (q, k_cache, v_cache, seq_lens, out, lse,
                            block_table, sinks, alibi_slopes, query_lens)
        # PyTorch tensors run on PyTorch's current stream; other arrays on
        # the plan's own stream (never the legacy one, which cannot be
        # captured, nor a PyTorch stream of another driver).
        self._torch_stream = any(_is_torch(x) for x in self._keep_alive)
        # The config's batch and max_len are the buffers' sizes.
        config = _native.KernelConfig(
            problem.head_dim, problem.num_q_heads, problem.num_kv_heads,
            problem.query_len, _DTYPES[qa.dtype], kv_layout,
            problem.page_size, splits, split_kv, _check_scale(scale),
            lse is not None, problem.batch, problem.max_len, sm_count,
            target if arch is None else arch,
            **_planner_options(blocks_per_sm, min_chunk_length, max_splits),
            window_left=window_left, logits_soft_cap=logits_soft_cap,
            **_buffer_flags(buffers))
        table = arrays[4].pointer if block_table is not None else 0
        self._plan = _native.CudaPlan(
            config, self.device, qa.pointer, ka.pointer, va.pointer,
            la.pointer, oa.pointer, lse_pointer, table,
            problem.num_pages if block_table is not None else 0,
            **pointers)
        self.num_splits = self._plan.num_splits
        self.arch = self._plan.arch

    def _stream(self, stream):
        """The stream handle to use; None is the plan's own stream."""
        if stream is None and self._torch_stream:
            return _torch_stream(self.device)
        return stream

    def run(self, stream=None):
        self._plan.launch(self._stream(stream))

    def capture(self, stream=None):
        self._plan.capture(self._stream(stream))

    def replay(self, stream=None):
        self._plan.replay(self._stream(stream))


# (configuration, device) -> the process's loaded kernels for it.
_cuda_launchers = {}


def _decode_cuda(q, k_cache, v_cache, seq_lens, num_splits, scale, kv_layout,
                 return_lse, dtype, block_table, arch, out, lse, stream,
                 planner, window_left=0, logits_soft_cap=None, **buffers):
    """``buffers``: sinks, alibi_slopes, query_lens (None or device
    arrays)."""
    problem, arrays = _check_cuda_inputs(q, k_cache, v_cache, seq_lens,
                                         block_table, kv_layout, dtype)
    qa = arrays[0]
    splits, _ = _split_options(num_splits)
    if lse is not None and not return_lse:
        raise ValueError("lse is written only with return_lse=True")
    if stream is not None and (isinstance(stream, bool) or
                               not isinstance(stream, int) or stream < 0):
        raise TypeError(f"stream must be a CUstream handle (an int >= 0) or "
                        f"None, got {stream!r}")
    pointers = _check_buffers(buffers, problem, arrays)
    flags = _buffer_flags(buffers)
    inputs = len(arrays)
    if out is not None:
        arrays.append(_check_out(out, qa))
    if lse is not None:
        arrays.append(_check_lse(lse, problem))
    device = _common_device(arrays)
    target, sm_count = _device_info(device)
    if out is None:
        out, out_pointer = _new_output(q, qa.shape, qa.dtype, device)
    else:
        out_pointer = arrays[inputs].pointer
    lse_pointer = 0
    if lse is not None:
        lse_pointer = arrays[-1].pointer
    elif return_lse:
        lse, lse_pointer = _new_output(q, problem.lse_shape(), "float32",
                                       device)
    if splits == 0:
        # The planner's choice for this batch and the keys a sequence
        # attends to (as fd-split-kv plans), so that batches that split
        # alike share one kernel.
        splits = _native.plan_splits(
            problem.batch, problem.num_kv_heads,
            _native.attended_length(problem.max_len, problem.query_len,
                                    window_left),
            sm_count, **planner)
    if arch is None:
        arch = target
    key = (problem.head_dim, problem.num_q_heads, problem.num_kv_heads,
           problem.query_len, qa.dtype, kv_layout, problem.page_size, splits,
           scale, return_lse, window_left, logits_soft_cap) + \
        tuple(sorted(flags.items())) + (arch, device)
    launcher = _cuda_launchers.get(key)
    if launcher is None:
        launcher = _native.cuda_launcher(_native.KernelConfig(
            problem.head_dim, problem.num_q_heads, problem.num_kv_heads,
            problem.query_len, _DTYPES[qa.dtype], kv_layout,
            problem.page_size, splits, True, scale, return_lse, 1, 4096,
            sm_count, arch, window_left=window_left,
            logits_soft_cap=logits_soft_cap, **flags), device)
        _cuda_launchers[key] = launcher
    if stream is None:
        stream = _torch_stream(device) if any(
            _is_torch(x) for x in (q, k_cache, v_cache, seq_lens)) else 0
    launcher.launch(qa.pointer, arrays[1].pointer, arrays[2].pointer,
                    arrays[3].pointer, out_pointer, lse_pointer,
                    arrays[4].pointer if block_table is not None else 0,
                    problem.num_pages if block_table is not None else 0,
                    problem.batch, problem.max_len, stream, **pointers)
    return (out, lse) if return_lse else out

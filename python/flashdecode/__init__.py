"""flashdecode: Flash-Decoding attention from Python.

    import numpy as np, flashdecode
    out = flashdecode.decode_attention(q, k_cache, v_cache, seq_lens)

``decode_attention`` runs the compiled CPU lowering on numpy arrays
(``backend="cpu"``) or the generated PTX on device arrays (``backend="cuda"``:
``DeviceArray``, PyTorch CUDA tensors, or anything with
``__cuda_array_interface__``), on the GPU that holds them, compiled for its
compute capability, with kernels loaded once per configuration and GPU.
``compile`` returns the PTX and manifest of a configuration, ``plan_splits``
the split count the compiler would choose, and ``Decoder`` binds fixed GPU
buffers for CUDA-graph decoding.

Shapes: q ``[B, Hq, D]`` or ``[B, Lq, Hq, D]`` (query token t of Lq sees keys
``< len - Lq + t + 1``); caches ``[B, Lmax, Hkv, D]`` (NHD) or
``[B, Hkv, Lmax, D]`` (HND); ``seq_lens`` int32 ``[B]``. The output has q's
shape and dtype; the lse is float32 ``[B, Hq]`` (``[B, Lq, Hq]``), natural log.
bfloat16 numpy data is given as uint16 bit patterns with ``dtype="bfloat16"``.
"""

import json
import math

import numpy as np

from . import _flashdecode as _native
from .device_array import DeviceArray

__all__ = ["compile", "plan_splits", "decode_attention", "Kernel", "Decoder",
           "DeviceArray"]

CudaError = _native.CudaError

_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}
_MAX_QUERY_LEN = 8


def plan_splits(batch, num_kv_heads, max_len, sm_count=132):
    """The split count fd-split-kv chooses for this problem (same function)."""
    return _native.plan_splits(batch, num_kv_heads, max_len, sm_count)


class Kernel:
    """Compiled GPU kernels: ``ptx`` (name -> text), ``manifest`` (dict),
    ``num_splits``."""

    def __init__(self, ptx, manifest, num_splits):
        self.ptx = dict(ptx)
        self.manifest = json.loads(manifest)
        self.num_splits = num_splits

    def __repr__(self):
        config = self.manifest["config"]
        return (f"Kernel(head_dim={config['head_dim']}, "
                f"num_q_heads={config['num_q_heads']}, "
                f"num_kv_heads={config['num_kv_heads']}, "
                f"dtype={config['dtype']}, num_splits={self.num_splits})")


def _dtype_code(dtype):
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
    return _DTYPES[dtype]


def _split_options(num_splits):
    """(num_splits for the config, whether to split) from the user's value."""
    if num_splits is None or num_splits == "auto":
        return 0, True
    if isinstance(num_splits, bool) or not isinstance(num_splits, int) \
            or num_splits < 1:
        raise ValueError(
            f"num_splits must be 'auto', None or a positive int, got {num_splits!r}")
    return num_splits, True


def compile(head_dim, num_q_heads, num_kv_heads, dtype="float16",
            num_splits="auto", kv_layout="NHD", arch="sm_90", batch=1,
            max_len=4096, *, query_len=1, scale=None, return_lse=False,
            sm_count=132):
    """Compiles the GPU kernels of one configuration (through the JIT cache).

    No device is involved, so ``arch`` and ``sm_count`` default to an H200's;
    decode_attention(backend="cuda") and Decoder ask the GPU instead."""
    splits, split_kv = _split_options(num_splits)
    ptx, manifest, chosen = _native.compile(_native.KernelConfig(
        head_dim, num_q_heads, num_kv_heads, query_len, _dtype_code(dtype),
        kv_layout, 0, splits, split_kv, scale, return_lse, batch, max_len,
        sm_count, arch))
    return Kernel(ptx, manifest, chosen)


class _Problem:
    """The checked shapes of one decode_attention call. With a block table
    shape the caches are page pools [num_pages, page_size, Hkv, D] (NHD) or
    [num_pages, Hkv, page_size, D] (HND)."""

    def __init__(self, q_shape, k_shape, v_shape, lens_shape, kv_layout,
                 table_shape=None):
        if kv_layout not in ("NHD", "HND"):
            raise ValueError(f"kv_layout must be 'NHD' or 'HND', got {kv_layout!r}")
        if len(q_shape) not in (3, 4):
            raise ValueError(
                f"q must be [B, Hq, D] or [B, Lq, Hq, D], got shape {tuple(q_shape)}")
        if len(k_shape) != 4:
            raise ValueError(
                f"k_cache must be 4-D ({'[B, Lmax, Hkv, D]' if kv_layout == 'NHD' else '[B, Hkv, Lmax, D]'}),"
                f" got shape {tuple(k_shape)}")
        if tuple(v_shape) != tuple(k_shape):
            raise ValueError(f"v_cache shape {tuple(v_shape)} must equal "
                             f"k_cache shape {tuple(k_shape)}")
        self.q_shape = tuple(q_shape)
        self.batch = q_shape[0]
        self.has_query_len = len(q_shape) == 4
        self.query_len = q_shape[1] if self.has_query_len else 1
        self.num_q_heads, self.head_dim = q_shape[-2], q_shape[-1]
        if kv_layout == "NHD":
            kb, positions, self.num_kv_heads, kd = k_shape
        else:
            kb, self.num_kv_heads, positions, kd = k_shape
        self.page_size = 0
        if table_shape is None:
            self.max_len = positions
            if kb != self.batch:
                raise ValueError(f"k_cache batch {kb} must equal q batch "
                                 f"{self.batch}")
        else:
            if len(table_shape) != 2 or table_shape[0] != self.batch:
                raise ValueError(f"block_table must be [B, max_pages] with B = "
                                 f"{self.batch}, got shape {tuple(table_shape)}")
            if positions < 1 or positions > 256 or positions & (positions - 1):
                raise ValueError(f"page size {positions} (the caches' "
                                 f"{'second' if kv_layout == 'NHD' else 'third'}"
                                 " dimension) is not supported: expected a "
                                 "power of two from 1 to 256")
            self.page_size, self.num_pages = positions, kb
            self.max_pages = table_shape[1]
            self.max_len = self.max_pages * positions
        if kd != self.head_dim:
            raise ValueError(f"k_cache head dim {kd} must equal q head dim "
                             f"{self.head_dim}")
        if not (32 <= self.head_dim <= 256 and self.head_dim % 8 == 0):
            raise ValueError(f"head dim {self.head_dim} is not supported: "
                             "expected a multiple of 8 in [32, 256]")
        if self.num_kv_heads < 1 or self.num_q_heads % self.num_kv_heads:
            raise ValueError(
                f"q heads ({self.num_q_heads}) must be a multiple of k_cache "
                f"heads ({self.num_kv_heads})")
        if not 1 <= self.query_len <= _MAX_QUERY_LEN:
            raise ValueError(f"q has {self.query_len} query tokens per "
                             f"sequence; 1 to {_MAX_QUERY_LEN} are supported")
        if self.batch < 1:
            raise ValueError("q must hold at least one sequence")
        if self.max_len < 1:
            raise ValueError("the caches must hold at least one position")
        if tuple(lens_shape) != (self.batch,):
            raise ValueError(f"seq_lens must have shape ({self.batch},), got "
                             f"{tuple(lens_shape)}")

    def lse_shape(self):
        if self.has_query_len:
            return (self.batch, self.query_len, self.num_q_heads)
        return (self.batch, self.num_q_heads)


def _check_scale(scale):
    if scale is None:
        return None
    scale = float(scale)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number, got {scale}")
    return scale


def _numpy_dtype(array, name, dtype):
    """The flashdecode dtype of a numpy array, checked against ``dtype``."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy array for backend='cpu', got "
                        f"{type(array).__name__}")
    kind = array.dtype
    if kind == np.float32:
        found = "float32"
    elif kind == np.float16:
        found = "float16"
    elif kind == np.uint16 or kind.name == "bfloat16":
        if dtype != "bfloat16":
            raise TypeError(f"{name} holds 16-bit patterns ({kind}): pass "
                            "dtype='bfloat16'")
        found = "bfloat16"
    else:
        raise TypeError(f"{name} dtype {kind} is not supported: expected "
                        "float32, float16, or bfloat16 as uint16 bit patterns")
    if dtype is not None and dtype != found:
        raise TypeError(f"{name} is {found} but dtype={dtype!r} was given")
    if not array.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous "
                         "(numpy.ascontiguousarray makes it so)")
    return found


_cpu_kernels = {}


def _cpu_kernel(problem, dtype, num_splits, scale, return_lse):
    splits, split_kv = _split_options(num_splits)
    # An automatic split count depends on the batch and cache length.
    planned = (problem.batch, problem.max_len) if splits == 0 else (1, 4096)
    key = (problem.head_dim, problem.num_q_heads, problem.num_kv_heads,
           problem.query_len, dtype, problem.layout, problem.page_size, splits,
           split_kv, scale, return_lse) + planned
    kernel = _cpu_kernels.get(key)
    if kernel is None:
        kernel = _native.CPUKernel(_native.KernelConfig(
            problem.head_dim, problem.num_q_heads, problem.num_kv_heads,
            problem.query_len, _DTYPES[dtype], problem.layout,
            problem.page_size, splits, split_kv, scale, return_lse,
            planned[0], planned[1], 132, "sm_90"))
        _cpu_kernels[key] = kernel
    return kernel


def _decode_cpu(q, k_cache, v_cache, seq_lens, num_splits, scale, kv_layout,
                return_lse, dtype, block_table):
    found = _numpy_dtype(q, "q", dtype)
    for name, array in (("k_cache", k_cache), ("v_cache", v_cache)):
        if _numpy_dtype(array, name, found) != found:
            raise TypeError(f"{name} dtype must match q ({found})")
    if block_table is not None:
        if not isinstance(block_table, np.ndarray) or block_table.dtype != np.int32:
            raise TypeError("block_table must be a numpy int32 array")
        if not block_table.flags.c_contiguous:
            raise ValueError("block_table must be C-contiguous")
    problem = _Problem(q.shape, k_cache.shape, v_cache.shape,
                       np.shape(seq_lens), kv_layout,
                       None if block_table is None else block_table.shape)
    problem.layout = kv_layout
    if block_table is not None and block_table.size and (
            block_table.min() < 0 or block_table.max() >= problem.num_pages):
        raise ValueError(
            f"block_table entries must be page indices in [0, "
            f"{problem.num_pages}) (the caches hold {problem.num_pages} pages), "
            f"got {block_table.min()}..{block_table.max()}")
    if not isinstance(seq_lens, np.ndarray) or seq_lens.dtype != np.int32:
        raise TypeError("seq_lens must be a numpy int32 array")
    seq_lens = np.ascontiguousarray(seq_lens)
    if seq_lens.size and (seq_lens.min() < 0 or seq_lens.max() > problem.max_len):
        raise ValueError(f"seq_lens must be in [0, {problem.max_len}] (the "
                         f"cache length), got {seq_lens.min()}..{seq_lens.max()}")
    kernel = _cpu_kernel(problem, found, num_splits, scale, return_lse)
    out = np.empty_like(q)
    lse = np.empty(problem.lse_shape(), np.float32) if return_lse else None
    if block_table is None:
        kernel.run(q, k_cache, v_cache, seq_lens, out, lse, problem.batch,
                   problem.max_len)
    else:
        kernel.run(q, k_cache, v_cache, seq_lens, out, lse, problem.batch,
                   problem.max_len, block_table, problem.num_pages,
                   problem.max_pages)
    return (out, lse) if return_lse else out


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

    def __init__(self, array, name, alignment=16):
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
            raise TypeError(f"{name} dtype is not supported: expected float32, "
                            "float16 or bfloat16 (int32 for seq_lens)")
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
    Decoder waits for the streams it launched on.
    """

    def __init__(self, q, k_cache, v_cache, seq_lens, out, lse=None, *,
                 num_splits=None, scale=None, kv_layout="NHD",
                 block_table=None, arch=None):
        problem, arrays = _check_cuda_inputs(q, k_cache, v_cache, seq_lens,
                                             block_table, kv_layout, None)
        qa, ka, va, la = arrays[:4]
        oa = _check_out(out, qa)
        arrays.append(oa)
        lse_pointer = 0
        if lse is not None:
            arrays.append(_check_lse(lse, problem))
            lse_pointer = arrays[-1].pointer
        splits, split_kv = _split_options(num_splits)
        self.device = _common_device(arrays)
        target, sm_count = _device_info(self.device)
        self._keep_alive = (q, k_cache, v_cache, seq_lens, out, lse,
                            block_table)
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
            target if arch is None else arch)
        table = arrays[4].pointer if block_table is not None else 0
        self._plan = _native.CudaPlan(
            config, self.device, qa.pointer, ka.pointer, va.pointer,
            la.pointer, oa.pointer, lse_pointer, table)
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
                 return_lse, dtype, block_table, arch, out, lse, stream):
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
        # The planner's choice for this batch and length, so that batches
        # that split alike share one kernel.
        splits = _native.plan_splits(problem.batch, problem.num_kv_heads,
                                     problem.max_len, sm_count)
    if arch is None:
        arch = target
    key = (problem.head_dim, problem.num_q_heads, problem.num_kv_heads,
           problem.query_len, qa.dtype, kv_layout, problem.page_size, splits,
           scale, return_lse, arch, device)
    launcher = _cuda_launchers.get(key)
    if launcher is None:
        launcher = _native.cuda_launcher(_native.KernelConfig(
            problem.head_dim, problem.num_q_heads, problem.num_kv_heads,
            problem.query_len, _DTYPES[qa.dtype], kv_layout,
            problem.page_size, splits, True, scale, return_lse, 1, 4096,
            sm_count, arch), device)
        _cuda_launchers[key] = launcher
    if stream is None:
        stream = _torch_stream(device) if any(
            _is_torch(x) for x in (q, k_cache, v_cache, seq_lens)) else 0
    launcher.launch(qa.pointer, arrays[1].pointer, arrays[2].pointer,
                    arrays[3].pointer, out_pointer, lse_pointer,
                    arrays[4].pointer if block_table is not None else 0,
                    problem.batch, problem.max_len, stream)
    return (out, lse) if return_lse else out


def decode_attention(q, k_cache, v_cache, seq_lens, *, num_splits=None,
                     scale=None, kv_layout="NHD", return_lse=False,
                     backend="cpu", dtype=None, block_table=None, arch=None,
                     out=None, lse=None, stream=None):
    """softmax(scale * q k^T) v over each sequence's first seq_lens[b] keys.

    num_splits: None/"auto" (the planner's choice) or a positive count.
    block_table: int32 [B, max_pages]; when given, the caches are page pools
    [num_pages, page_size, Hkv, D] (NHD) or [num_pages, Hkv, page_size, D]
    (HND) and position j of sequence b is slot j % page_size of page
    block_table[b, j // page_size]. The CPU backend checks every entry; on
    the GPU entries must be valid page indices (not checked, to stay async).
    scale: default 1/sqrt(D). Returns out, or (out, lse) with return_lse.

    backend="cuda" (device arrays, all on one GPU, which decides the
    context): the kernels are compiled for that GPU's compute capability
    (``arch`` names a target instead, e.g. "sm_80") and loaded once per
    configuration and GPU; a call checks its arguments, binds them and
    launches on ``stream`` (a CUstream handle; default PyTorch's current
    stream for tensors, else the legacy default stream, which DeviceArray
    copies wait for) without synchronizing. ``out`` (and ``lse``, with
    return_lse) are written instead of new arrays. The split workspace is
    one per GPU and stream, grown (after that stream's queued work) to the
    largest batch seen; it may move, so capture a Decoder, not this
    function, into a CUDA graph. Every pointer must be 16-byte aligned
    (seq_lens: 4).

    Raises ValueError/TypeError naming the bad argument, RuntimeError for a
    missing GPU or driver or a kernel the GPU rejects.
    """
    if dtype is not None:
        _dtype_code(dtype)
    scale = _check_scale(scale)
    if backend == "cpu":
        for name, value in (("arch", arch), ("out", out), ("lse", lse),
                            ("stream", stream)):
            if value is not None:
                raise ValueError(f"{name} is for backend='cuda'")
        return _decode_cpu(q, k_cache, v_cache, seq_lens, num_splits, scale,
                           kv_layout, return_lse, dtype, block_table)
    if backend == "cuda":
        return _decode_cuda(q, k_cache, v_cache, seq_lens, num_splits, scale,
                            kv_layout, return_lse, dtype, block_table, arch,
                            out, lse, stream)
    raise ValueError(f"backend must be 'cpu' or 'cuda', got {backend!r}")

"""DeviceArray: a contiguous array in GPU memory, for backend="cuda" without
PyTorch.

    lens = flashdecode.DeviceArray.from_numpy(np.array([5, 9], np.int32))
    out = flashdecode.DeviceArray.empty((2, 8, 128), "float16")
    lens.copy_from_numpy(np.array([6, 10], np.int32))   # in place
    out.numpy()                                         # copy back

Memory comes from the runtime's driver (libcuda, or $FD_CUDA_DRIVER such as
the emulator) in the primary context of GPU ``device`` (default 0), so
PyTorch and CuPy on the same GPU can use it through
``__cuda_array_interface__``. Copies are synchronous on the legacy default
stream, so they wait for work queued there (decode_attention's default for
DeviceArrays) and on blocking streams (a Decoder's own).
bfloat16 data is given as uint16 bit patterns with ``dtype="bfloat16"`` (or
as an ml_dtypes bfloat16 array) and comes back the same way; fp8 caches
likewise as uint8 bit patterns with ``dtype="float8_e4m3fn"`` or
``"float8_e5m2"`` (or ml_dtypes fp8 arrays), or as plain "uint8" arrays
(decode_attention's kv_dtype then names the format).
"""

import math

import numpy as np

from . import _flashdecode as _native
from ._spellings import accepted, spelled

_HOST_DTYPES = {"float32": np.dtype(np.float32),
                "float16": np.dtype(np.float16),
                "bfloat16": np.dtype(np.uint16),
                "int32": np.dtype(np.int32),
                "uint8": np.dtype(np.uint8),
                "float8_e4m3fn": np.dtype(np.uint8),
                "float8_e5m2": np.dtype(np.uint8)}
# The dtypes numpy holds as bit patterns (ml_dtypes' arrays are named so).
_BIT_PATTERNS = {"bfloat16": np.dtype(np.uint16),
                 "float8_e4m3fn": np.dtype(np.uint8),
                 "float8_e5m2": np.dtype(np.uint8)}
# bfloat16 has no numpy typestr: "<V2" is what ml_dtypes' bfloat16 reports.
# fp8 has none either: it shows as its bytes.
_TYPESTRS = {"float32": "<f4", "float16": "<f2", "bfloat16": "<V2",
             "int32": "<i4", "uint8": "|u1", "float8_e4m3fn": "|u1",
             "float8_e5m2": "|u1"}


def _check_dtype(dtype):
    """``dtype`` in Python's spelling (any spelling of a float or fp8 type
    is taken), or a ValueError naming them."""
    spelled_dtype = spelled("kv_dtype", dtype)
    if spelled_dtype not in _HOST_DTYPES:
        raise ValueError(f"dtype must be one of int32, uint8, "
                         f"{accepted('dtype')}, or an fp8 format: "
                         f"{accepted('fp8')}; got {dtype!r}")
    return spelled_dtype


def _dtype_of(a, dtype):
    """The DeviceArray dtype of numpy array ``a``, checked with ``dtype``."""
    kind = a.dtype
    if kind.name in _BIT_PATTERNS:
        found = kind.name
    elif dtype in _BIT_PATTERNS and kind == _BIT_PATTERNS[dtype]:
        found = dtype
    elif kind == np.uint16:
        raise TypeError(f"a holds 16-bit patterns ({kind}): pass "
                        "dtype='bfloat16'")
    else:
        found = next((name for name, host in _HOST_DTYPES.items()
                      if name not in _BIT_PATTERNS and kind == host), None)
        if found is None:
            raise TypeError(f"a dtype {kind} is not supported: expected "
                            "float32, float16, int32, uint8, or bfloat16 "
                            "(fp8) as uint16 (uint8) bit patterns")
    if dtype is not None and dtype != found:
        raise TypeError(f"a is {found} but dtype={dtype!r} was given")
    return found


class DeviceArray:
    """A C-contiguous array in device memory: ``shape``, ``dtype`` (a string),
    ``device`` (the GPU's ordinal), ``nbytes``, ``__cuda_array_interface__``.
    Freed with the object."""

    def __init__(self, shape, dtype, *, device=0):
        """Uninitialized device memory of ``shape`` (ints >= 0) and ``dtype``
        ("float32", "float16", "bfloat16", "int32", "uint8", "float8_e4m3fn"
        or "float8_e5m2") on GPU ``device``; also ``empty``."""
        if isinstance(shape, (int, np.integer)):
            shape = (shape,)
        if not isinstance(shape, (tuple, list)) or not all(
                isinstance(n, (int, np.integer)) and not isinstance(n, bool)
                for n in shape):
            raise TypeError(f"shape must be a tuple of ints, got {shape!r}")
        if any(n < 0 for n in shape):
            raise ValueError(f"shape must not be negative, got {tuple(shape)}")
        if isinstance(device, bool) or \
                not isinstance(device, (int, np.integer)) or device < 0:
            raise TypeError(f"device must be a GPU ordinal (an int >= 0), got "
                            f"{device!r}")
        self._shape = tuple(int(n) for n in shape)
        self._dtype = _check_dtype(dtype)
        self._host_dtype = _HOST_DTYPES[self._dtype]
        self._device = int(device)
        self._buffer = _native.DeviceBuffer(
            math.prod(self._shape) * self._host_dtype.itemsize, self._device)
        # Read on every decode_attention call: kept as a plain attribute.
        self._address = self._buffer.address

    @classmethod
    def empty(cls, shape, dtype, *, device=0):
        """Uninitialized device memory of ``shape`` and ``dtype`` on GPU
        ``device``."""
        return cls(shape, dtype, device=device)

    @classmethod
    def from_numpy(cls, a, dtype=None, *, device=0):
        """A device copy of numpy array ``a`` on GPU ``device``. ``dtype``
        (default: a's) must be "bfloat16" for uint16 bit patterns; uint8
        ones are "uint8" unless it names an fp8 format ("float8_e4m3fn",
        "float8_e5m2")."""
        if not isinstance(a, np.ndarray):
            raise TypeError(f"a must be a numpy array, got {type(a).__name__}")
        if dtype is not None:
            dtype = _check_dtype(dtype)
        found = _dtype_of(a, dtype)
        array = cls(a.shape, found, device=device)
        array._host_dtype = a.dtype  # ml_dtypes' bfloat16 comes back as such
        array._buffer.upload(np.ascontiguousarray(a))
        return array

    def copy_from_numpy(self, a):
        """Overwrites the device data with numpy array ``a`` of the same shape
        and dtype (e.g. new lengths between graph replays)."""
        if not isinstance(a, np.ndarray):
            raise TypeError(f"a must be a numpy array, got {type(a).__name__}")
        target = f"this array is {self._dtype} {self._shape}"
        try:
            found = _dtype_of(a, self._dtype if self._dtype in _BIT_PATTERNS
                              else None)
        except TypeError as error:
            raise TypeError(f"{error}; {target}") from None
        if found != self._dtype:
            raise TypeError(f"a is {found} but {target}")
        if a.shape != self._shape:
            raise ValueError(f"a has shape {a.shape}, this array "
                             f"{self._shape}")
        self._buffer.upload(np.ascontiguousarray(a))

    def numpy(self):
        """A host copy; bfloat16 (fp8) comes back as uint16 (uint8) bit
        patterns, or as ml_dtypes arrays when the array was made from
        one."""
        host = np.empty(self._shape, self._host_dtype)
        self._buffer.download(host)
        return host

    def reshape(self, *shape):
        """A view of the same device memory with another shape of as many
        elements (C order, as numpy's reshape of a contiguous array); it
        keeps the memory alive."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool)
                   and n >= 0 for n in shape):
            raise TypeError(f"shape must be ints >= 0, got {shape!r}")
        shape = tuple(int(n) for n in shape)
        if math.prod(shape) != math.prod(self._shape):
            raise ValueError(f"cannot reshape {self._shape} into {shape}: "
                             f"{math.prod(self._shape)} elements")
        view = object.__new__(DeviceArray)
        view.__dict__.update(self.__dict__)
        view._shape = shape
        return view

    @property
    def shape(self):
        """The shape, a tuple of ints (C order, contiguous)."""
        return self._shape

    @property
    def dtype(self):
        """The element type's name: "float32", "float16", "bfloat16",
        "int32", "uint8", "float8_e4m3fn" or "float8_e5m2"."""
        return self._dtype

    @property
    def device(self):
        """The ordinal of the GPU whose memory holds it."""
        return self._device

    @property
    def nbytes(self):
        """Bytes of device memory it holds."""
        return self._buffer.nbytes

    @property
    def __cuda_array_interface__(self):
        return {"version": 3, "shape": self._shape,
                "typestr": _TYPESTRS[self._dtype],
                "data": (self._address, False), "strides": None}

    def __repr__(self):
        return f"DeviceArray(shape={self._shape}, dtype={self._dtype!r})"

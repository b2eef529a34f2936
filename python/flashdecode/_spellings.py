"""The names of enumerated values in any of their spellings: dtypes
("float16", "f16", "half"), fp8 formats ("float8_e4m3fn", "e4m3"), scale
granularities ("token_head", "token-head") and cache layouts ("NHD",
"nhd"), read through the native table (fd/Planning/Spellings.h) that
fd-compile and fd-plan read, so every interface takes every spelling."""
from . import _flashdecode as _native

# Each option's kinds of names, tried in order (kv_dtype: an fp8 format or,
# where the caches may be of the queries' type, an element type).
_OPTION_KINDS = {"dtype": ("dtype",), "kv_dtype": ("fp8", "dtype"),
                 "kv_scale": ("kv_scale",), "kv_layout": ("kv_layout",),
                 "granularity": ("kv_scale",)}


def spelled(option, value):
    """``value`` of ``option`` ("dtype", "kv_dtype", "kv_scale",
    "kv_layout", "granularity") in Python's spelling when it spells a value
    of the table; anything else as given, for the caller's own check (which
    names every spelling with ``accepted``)."""
    if not isinstance(value, str):
        return value
    for kind in _OPTION_KINDS[option]:
        python = _native.python_spelling(kind, value)
        if python is not None:
            return python
    return value


def accepted(kind):
    """Every value of ``kind`` with all its spellings, Python's first:
    "float16 (f16, half, fp16), bfloat16 (bf16) or float32 (...)"."""
    return _native.describe_spellings(kind)


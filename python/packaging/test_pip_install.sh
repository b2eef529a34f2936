#!/usr/bin/env bash
# `pip install .` as a user meets it: a fresh venv (Debian's numpy through
# --system-site-packages), pip install of the source tree with no index
# (nothing from PyPI), reusing BUILD; then, from outside the source tree,
# the README's Python example as written there, the version, fdemu from the
# wheel running backend="cuda" against the CPU backend, and a console
# script. Usage: test_pip_install.sh SOURCE BUILD WORK PYTHON
set -euo pipefail
source=$1 build=$2 work=$3 python=$4
rm -rf "$work"
mkdir -p "$work"
"$python" -m venv --system-site-packages --without-pip "$work/venv"
venv_python=$work/venv/bin/python
"$venv_python" -m pip install --no-index --no-cache-dir --quiet \
  --config-settings build-dir="$build" "$source"
cd "$work"
awk '/^## Python: `flashdecode`/ { section = 1 }
     section && /^```$/ && inside { exit }
     inside { print }
     section && /^```python$/ { inside = 1 }' "$source/README.md" >example.py
test -s example.py
FD_CACHE_DIR=$work/cache "$venv_python" example.py
echo "README example: ran"
FD_CACHE_DIR=$work/cache "$venv_python" - "$work/venv" <<'PY'
import os, sys
import numpy as np
import flashdecode
venv = os.path.realpath(sys.argv[1])
for path in (flashdecode.__file__, flashdecode.emulator_library()):
    assert os.path.realpath(path).startswith(venv), f"{path} is not in {venv}"
os.environ["FD_CUDA_DRIVER"] = flashdecode.emulator_library()
kernel = flashdecode.compile(128, 32, 8)
manifest = kernel.manifest
version = manifest["compiler_version"]
assert version == f"flashdecode {flashdecode.__version__} (MLIR 22)", version
seed = int.from_bytes(os.urandom(4), "little")
print(f"seed {seed}")
rng = np.random.default_rng(seed)
q = rng.standard_normal((2, 32, 128)).astype(np.float16)
k = rng.standard_normal((2, 96, 8, 128)).astype(np.float16)
v = rng.standard_normal((2, 96, 8, 128)).astype(np.float16)
lens = np.array([77, 1], np.int32)
expected = flashdecode.decode_attention(q, k, v, lens)
device = flashdecode.DeviceArray.from_numpy
out = flashdecode.decode_attention(device(q), device(k), device(v),
                                   device(lens), backend="cuda").numpy()
error = np.abs(out.astype(np.float64) - expected.astype(np.float64)).max()
assert error < 2e-3, error
print(f"version {flashdecode.__version__}, fdemu from the wheel: max error "
      f"{error:.1e} against the CPU backend")
PY
"$work/venv/bin/fd-compile" --version

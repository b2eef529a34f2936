"""The CUDA path on GPUs other than the H200, on misaligned views, on several
devices, and per call (issue #10), on fdemu (the emulator as CUDA driver) in
make test.

- Target: kernels are compiled for the device's compute capability (sm_80 on
  an A100, FDEMU_GPU=a100, run in a subprocess because the emulated GPU is
  fixed per process); arch= overrides, and sm_90 PTX on an A100 is a
  RuntimeError carrying the JIT log.
- Alignment: a pointer that is not 16-byte aligned (4 for seq_lens) is a
  ValueError naming the Python argument, before anything is launched.
- Devices: the arrays' device decides the context; an address the driver
  does not know, and arrays on two devices, are ValueErrors.
- Per call: kernels are loaded once per configuration and device and the
  workspace is one per (device, stream), sized for the largest batch seen.
"""
import ctypes
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray

from reference import random_inputs

pytestmark = pytest.mark.usefixtures("cuda_driver")

native = flashdecode._flashdecode


def on_fdemu():
    return os.environ.get("FD_CUDA_DRIVER", "").endswith("libfdemu.so")


def _fields(launcher, *names):
    """Fields of a launcher's resolved config (manifest names)."""
    fields = launcher.config.fields
    return tuple(fields[name] for name in names)


def _launcher_key(launcher):
    """What the process keys a launcher by: its resolved config and GPU."""
    return repr(launcher.config), launcher.device


def _launcher_keys():
    return {_launcher_key(launcher) for launcher in native.cuda_launchers()}


def small_problem(rng, batch=2, heads=(8, 2), head_dim=64, length=40):
    num_q_heads, num_kv_heads = heads
    (q, k, v), _ = random_inputs(rng, "float16",
                                 (batch, num_q_heads, head_dim),
                                 (batch, length, num_kv_heads, head_dim))
    lens = rng.integers(1, length + 1, batch).astype(np.int32)
    return q, k, v, lens


def device_arrays(*arrays):
    return [DeviceArray.from_numpy(a) for a in arrays]


def assert_close(out, expected):
    actual = out.numpy().astype(np.float32)
    error = np.abs(actual - expected).max() / np.abs(expected).max()
    assert error <= 1e-2, f"relative error {error}"


class Shifted:
    """A __cuda_array_interface__ view of ``shape`` that starts ``offset``
    bytes into a DeviceArray: what ``buf[1:].view(shape)`` of a PyTorch or
    CuPy buffer is."""

    def __init__(self, array, offset, shape, typestr):
        self._array = array  # keeps the memory alive
        self.__cuda_array_interface__ = {
            "version": 3, "shape": shape, "typestr": typestr, "strides": None,
            "data": (array.__cuda_array_interface__["data"][0] + offset,
                     False)}


def shifted_like(array, offset=2):
    """A misaligned view with ``array``'s shape and dtype (one f16 element
    into a buffer one element longer)."""
    interface = array.__cuda_array_interface__
    itemsize = np.dtype(interface["typestr"]).itemsize
    buffer = DeviceArray.empty(int(np.prod(array.shape)) + 16 // itemsize,
                               array.dtype)
    return Shifted(buffer, offset, array.shape, interface["typestr"])


# Target from the device.

def test_default_device_compiles_for_sm_90():
    if not on_fdemu():
        pytest.skip("checks fdemu's default H200")
    assert native.cuda_target() == "sm_90"
    rng = np.random.default_rng()
    q, k, v, lens = small_problem(rng, heads=(4, 4))
    arrays = device_arrays(q, k, v, lens)
    out = flashdecode.decode_attention(*arrays, backend="cuda", num_splits=2)
    assert_close(out, flashdecode.decode_attention(q, k, v, lens))
    # The launchers' resolved configs name the arch they were compiled for.
    used = [(launcher.config.fields["arch"], launcher.arch)
            for launcher in native.cuda_launchers()
            if _fields(launcher, "head_dim", "num_q_heads", "num_kv_heads",
                       "query_len", "dtype", "requested_num_splits") ==
            (64, 4, 4, 1, "f16", 2)]
    assert used == [("sm_90", "sm_90")]
    decoder = flashdecode.Decoder(*arrays, DeviceArray.empty(q.shape,
                                                             "float16"))
    assert decoder.arch == "sm_90" and decoder.device == 0


def test_explicit_arch_overrides_the_device():
    """sm_80 PTX runs on an H200 (PTX is forward-compatible)."""
    rng = np.random.default_rng()
    q, k, v, lens = small_problem(rng, heads=(4, 2))
    arrays = device_arrays(q, k, v, lens)
    out = flashdecode.decode_attention(*arrays, backend="cuda", arch="sm_80",
                                       num_splits=3)
    assert_close(out, flashdecode.decode_attention(q, k, v, lens))
    assert any(launcher.config.fields["arch"] == "sm_80" and
               launcher.arch == "sm_80"
               for launcher in native.cuda_launchers())
    decoder = flashdecode.Decoder(*arrays, DeviceArray.empty(q.shape,
                                                             "float16"),
                                  arch="sm_80")
    assert decoder.arch == "sm_80"
    with pytest.raises(ValueError, match="arch"):
        flashdecode.decode_attention(*arrays, backend="cuda", arch="sm_70")


A100_SCRIPT = textwrap.dedent("""
    import json
    import numpy as np
    import flashdecode
    from flashdecode import DeviceArray

    native = flashdecode._flashdecode
    rng = np.random.default_rng()
    q = rng.normal(size=(2, 8, 64)).astype(np.float16)
    k = rng.normal(size=(2, 40, 2, 64)).astype(np.float16)
    v = rng.normal(size=(2, 40, 2, 64)).astype(np.float16)
    lens = np.array([40, 17], np.int32)
    arrays = [DeviceArray.from_numpy(a) for a in (q, k, v, lens)]
    result = {"name": native.cuda_device_name(),
              "target": native.cuda_target()}
    out = flashdecode.decode_attention(*arrays, backend="cuda")
    expected = flashdecode.decode_attention(q, k, v, lens)
    result["error"] = float(np.abs(out.numpy().astype(np.float32) - expected)
                            .max() / np.abs(expected).max())
    result["launcher_archs"] = sorted(
        launcher.arch for launcher in native.cuda_launchers())
    out = DeviceArray.empty(q.shape, "float16")
    decoder = flashdecode.Decoder(*arrays, out)
    decoder.run()
    result["decoder_arch"] = decoder.arch
    result["decoder_error"] = float(np.abs(out.numpy().astype(np.float32) -
                                           expected).max() /
                                    np.abs(expected).max())
    for name, call in (
            ("decode_attention", lambda: flashdecode.decode_attention(
                *arrays, backend="cuda", arch="sm_90")),
            ("Decoder", lambda: flashdecode.Decoder(
                *arrays, DeviceArray.empty(q.shape, "float16"),
                arch="sm_90"))):
        try:
            call()
            result[name] = None
        except Exception as error:
            result[name] = [type(error).__mro__[1].__name__
                            if type(error).__name__ == "CudaError"
                            else type(error).__name__, str(error)]
    # Rejected loads leave the context usable.
    out = flashdecode.decode_attention(*arrays, backend="cuda")
    result["after"] = float(np.abs(out.numpy().astype(np.float32) - expected)
                            .max() / np.abs(expected).max())
    print(json.dumps(result))
""")


def test_a100_compiles_for_sm_80_and_refuses_sm_90():
    if not on_fdemu():
        pytest.skip("FDEMU_GPU=a100 needs fdemu")
    environment = dict(os.environ, FDEMU_GPU="a100")
    run = subprocess.run([sys.executable, "-c", A100_SCRIPT],
                         env=environment, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["name"] == "fdemu (emulated A100)"
    assert result["target"] == "sm_80"
    assert result["launcher_archs"] == ["sm_80"]
    assert result["decoder_arch"] == "sm_80"
    assert result["error"] <= 1e-2 and result["decoder_error"] <= 1e-2
    for name in ("decode_attention", "Decoder"):
        kind, message = result[name]
        assert kind == "RuntimeError", (name, kind, message)
        assert "CUDA_ERROR_INVALID_PTX" in message
        assert "JIT log: " in message and "sm_90" in message
    assert result["after"] <= 1e-2


# Alignment.

def good_arrays(rng):
    q, k, v, lens = small_problem(rng, batch=2, heads=(8, 2), length=16)
    return dict(zip(("q", "k_cache", "v_cache", "seq_lens"),
                    device_arrays(q, k, v, lens)))


@pytest.mark.parametrize("name", ["q", "k_cache", "v_cache", "out", "lse",
                                  "block_table", "seq_lens"])
def test_misaligned_pointer_names_the_argument(name):
    rng = np.random.default_rng()
    arrays = good_arrays(rng)
    options = {"return_lse": True,
               "out": DeviceArray.empty((2, 8, 64), "float16"),
               "lse": DeviceArray.empty((2, 8), "float32")}
    if name == "block_table":
        # The caches as pools of 32 pages of one position.
        pool = rng.normal(size=(32, 1, 2, 64)).astype(np.float16)
        arrays["k_cache"], arrays["v_cache"] = device_arrays(pool, pool)
        options["block_table"] = DeviceArray.from_numpy(
            rng.permutation(32).astype(np.int32).reshape(2, 16))
    everything = {**arrays, **options}
    everything[name] = shifted_like(everything[name])
    alignment = 4 if name == "seq_lens" else 16
    with pytest.raises(ValueError) as raised:
        flashdecode.decode_attention(**everything, backend="cuda")
    message = str(raised.value)
    assert message.startswith(f"{name} data pointer 0x"), message
    assert (f"is not {alignment}-byte aligned (address mod {alignment} = 2)"
            in message)
    if name in ("out", "lse"):
        with pytest.raises(ValueError, match=f"^{name} data pointer"):
            flashdecode.Decoder(*(everything[n] for n in (
                "q", "k_cache", "v_cache", "seq_lens", "out", "lse")),
                block_table=everything.get("block_table"))
    # Nothing was launched: no sticky misaligned-address fault follows.
    out = flashdecode.decode_attention(**arrays, backend="cuda",
                                       block_table=options.get("block_table"))
    assert out.numpy().shape == (2, 8, 64)


def test_aligned_offset_view_is_accepted():
    """A view 16 bytes into a buffer is fine: only alignment matters."""
    rng = np.random.default_rng()
    q, k, v, lens = small_problem(rng)
    buffer = DeviceArray.from_numpy(np.concatenate(
        [np.zeros(8, np.float16), q.ravel()]))
    view = Shifted(buffer, 16, q.shape, "<f2")
    _, k_d, v_d, lens_d = device_arrays(q, k, v, lens)
    out = flashdecode.decode_attention(view, k_d, v_d, lens_d, backend="cuda")
    assert_close(out, flashdecode.decode_attention(q, k, v, lens))


# Devices.

class ForeignHostMemory:
    """An interface that points at host memory (a numpy buffer): memory the
    CUDA driver did not allocate."""

    def __init__(self, shape, typestr):
        itemsize = np.dtype(typestr).itemsize
        self._host = np.zeros(int(np.prod(shape)) * itemsize + 16, np.uint8)
        address = self._host.ctypes.data
        self.__cuda_array_interface__ = {
            "version": 3, "shape": shape, "typestr": typestr,
            "strides": None, "data": (address + (-address) % 16, False)}


class TensorOnAnotherDevice:
    """Stands in for a PyTorch CUDA tensor on cuda:1 (the attributes
    flashdecode reads of one) over real device memory: fdemu emulates one
    device, so arrays on two can only be described, not allocated."""

    class _Device:
        index = 1

    def __init__(self, array):
        self._array = array
        self.is_cuda = True
        self.device = self._Device()
        self.shape = array.shape
        self.dtype = "torch." + array.dtype

    def data_ptr(self):
        return self._array.__cuda_array_interface__["data"][0]

    def is_contiguous(self):
        return True


def test_pointer_device_asks_the_driver():
    array = DeviceArray.empty((4, 64), "float32")
    address = array.__cuda_array_interface__["data"][0]
    assert native.pointer_device(address) == 0
    assert native.pointer_device(address + array.nbytes - 1) == 0
    host = np.zeros(16, np.float32)
    assert native.pointer_device(host.ctypes.data) is None
    assert array.device == 0


def test_interface_objects_run_on_the_device_of_their_memory():
    rng = np.random.default_rng()
    q, k, v, lens = small_problem(rng)

    class Foreign:
        def __init__(self, array):
            self._array = array
            self.__cuda_array_interface__ = array.__cuda_array_interface__

    out = flashdecode.decode_attention(
        *[Foreign(a) for a in device_arrays(q, k, v, lens)], backend="cuda")
    assert out.device == 0
    assert_close(out, flashdecode.decode_attention(q, k, v, lens))


@pytest.mark.parametrize("name", ["q", "k_cache", "seq_lens", "out"])
def test_memory_the_driver_does_not_know_is_rejected(name):
    rng = np.random.default_rng()
    arrays = {**good_arrays(rng),
              "out": DeviceArray.empty((2, 8, 64), "float16")}
    interface = arrays[name].__cuda_array_interface__
    arrays[name] = ForeignHostMemory(interface["shape"], interface["typestr"])
    with pytest.raises(ValueError) as raised:
        flashdecode.decode_attention(**arrays, backend="cuda")
    assert str(raised.value).startswith(f"{name} (data pointer 0x")
    assert "is not device memory the CUDA driver knows" in str(raised.value)


def test_arrays_on_two_devices_are_rejected():
    rng = np.random.default_rng()
    arrays = good_arrays(rng)
    arrays["v_cache"] = TensorOnAnotherDevice(arrays["v_cache"])
    with pytest.raises(ValueError) as raised:
        flashdecode.decode_attention(**arrays, backend="cuda")
    assert str(raised.value) == (
        "the arrays are on different GPUs (q, k_cache, seq_lens on cuda:0; "
        "v_cache on cuda:1): all must be on one")
    out = DeviceArray.empty((2, 8, 64), "float16")
    with pytest.raises(ValueError, match="v_cache on cuda:1"):
        flashdecode.Decoder(*arrays.values(), out)


def test_a_device_that_is_not_there_is_a_runtime_error():
    if not on_fdemu():
        pytest.skip("fdemu emulates exactly one device")
    with pytest.raises(RuntimeError, match=r"no CUDA device 1 \(1 present\)"):
        DeviceArray.empty(4, "float32", device=1)
    with pytest.raises(RuntimeError, match="no CUDA device 1"):
        native.cuda_sm_count(1)
    with pytest.raises(TypeError, match="device must be a GPU ordinal"):
        DeviceArray.empty(4, "float32", device=-1)


# Per call.

def create_stream():
    """A blocking stream from the driver fdrt uses, in the current context
    (the primary context, current since fdrt opened the device)."""
    driver = ctypes.CDLL(os.environ.get("FD_CUDA_DRIVER") or "libcuda.so.1")
    stream = ctypes.c_void_p()
    assert driver.cuStreamCreate(ctypes.byref(stream), 0) == 0
    return stream.value


def workspace_bytes(batch, num_q_heads, splits, head_dim):
    return batch * num_q_heads * splits * (head_dim + 1) * 4


def test_calls_reuse_the_kernels_and_the_streams_workspace():
    """One configuration loaded once however often it is called, on the
    caller's stream, whose workspace grows only for a larger batch."""
    rng = np.random.default_rng()
    stream = create_stream()
    assert native.cuda_workspace_bytes(0, stream) == 0
    before = _launcher_keys()
    # A configuration no other test uses (D=40, 3 q heads per KV head).
    heads, head_dim, splits = (6, 2), 40, 3
    for step, batch in enumerate([2, 2, 5, 1, 3]):
        q, k, v, lens = small_problem(rng, batch, heads, head_dim)
        out = flashdecode.decode_attention(
            *device_arrays(q, k, v, lens), backend="cuda", num_splits=splits,
            stream=stream)
        assert_close(out, flashdecode.decode_attention(q, k, v, lens))
        largest = 2 if step < 2 else 5
        assert native.cuda_workspace_bytes(0, stream) == workspace_bytes(
            largest, heads[0], splits, head_dim), f"step {step}"
    added = [launcher for launcher in native.cuda_launchers()
             if _launcher_key(launcher) not in before]
    assert len(added) == 1
    (launcher,) = added
    assert launcher.launch_count == 5 and launcher.num_splits == splits


def test_batches_that_plan_alike_share_one_kernel():
    """Automatic splits are planned per call; the kernel is keyed by the
    planned count, not by the batch."""
    rng = np.random.default_rng()
    before = _launcher_keys()
    for batch in (3, 4):
        q, k, v, lens = small_problem(rng, batch, (5, 1), 56, length=30)
        out = flashdecode.decode_attention(*device_arrays(q, k, v, lens),
                                           backend="cuda")
        assert_close(out, flashdecode.decode_attention(q, k, v, lens))
    work = {"num_q_heads": 5, "head_dim": 56}
    assert flashdecode.plan_splits(3, 1, 30, **work) == \
        flashdecode.plan_splits(4, 1, 30, **work)
    added = [launcher for launcher in native.cuda_launchers()
             if _launcher_key(launcher) not in before]
    assert len(added) == 1
    # Keyed by the resolved config: a fixed count, no planning hints.
    assert _fields(added[0], "requested_num_splits") == (added[0].num_splits,)
    assert "planned_batch" not in added[0].config.fields


def test_outputs_can_be_given():
    rng = np.random.default_rng()
    q, k, v, lens = small_problem(rng)
    out = DeviceArray.empty(q.shape, "float16")
    lse = DeviceArray.empty((2, 8), "float32")
    result = flashdecode.decode_attention(*device_arrays(q, k, v, lens),
                                          backend="cuda", out=out, lse=lse,
                                          return_lse=True)
    assert result[0] is out and result[1] is lse
    expected, expected_lse = flashdecode.decode_attention(q, k, v, lens,
                                                          return_lse=True)
    assert_close(out, expected)
    np.testing.assert_allclose(lse.numpy(), expected_lse, rtol=1e-3,
                               atol=1e-3)


@pytest.mark.parametrize("options,error,words", [
    (lambda: {"stream": -1}, TypeError, "stream must be a CUstream handle"),
    (lambda: {"stream": 1.5}, TypeError, "stream must be a CUstream handle"),
    (lambda: {"lse": DeviceArray.empty((2, 8), "float32")}, ValueError,
     "lse is written only with return_lse=True"),
    (lambda: {"out": DeviceArray.empty((2, 8, 32), "float16")}, ValueError,
     "out shape (2, 8, 32) must equal q shape (2, 8, 64)"),
    (lambda: {"out": DeviceArray.empty((2, 8, 64), "float32")}, TypeError,
     "out dtype float32 must match q (float16)"),
])
def test_bad_per_call_options_name_the_argument(options, error, words):
    arrays = good_arrays(np.random.default_rng())
    with pytest.raises(error) as raised:
        flashdecode.decode_attention(**arrays, backend="cuda", **options())
    assert words in str(raised.value)


@pytest.mark.parametrize("option", ["arch", "stream"])
def test_cuda_options_are_refused_on_the_cpu(option):
    q, k, v, lens = small_problem(np.random.default_rng())
    with pytest.raises(ValueError, match=f"{option} is for backend='cuda'"):
        flashdecode.decode_attention(q, k, v, lens, **{option: 0})

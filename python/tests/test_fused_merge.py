"""compile(fused_merge=True): the partial kernel also merges, with no merge
kernel. Its manifest says fused_merge, its one kernel takes the merge's
buffers (output, lse, sinks) and then "merge_counters" after its own
parameters, and the workspace names the counters' bytes per sequence
(num_kv_heads int32s). No device is involved in those tests; the
decode_attention / Decoder tests below run on fdemu (see there).
"""
import ctypes
import os

import numpy as np
import pytest

import flashdecode
from flashdecode import DeviceArray

from per_head_buffers import LSE_TOLERANCE, TOLERANCE, check_device, to_device
from query_lens_checks import random_query_lens, sentinel
from query_lens_checks import run as run_query_lens
from reference import Inputs, attention, check_rows, decode, random_sinks


def params_of(kernel):
    """Kernel name -> its parameters' names, in order."""
    return {spec["name"]: [p["name"] for p in spec["params"]]
            for spec in kernel.manifest["kernels"]}


@pytest.mark.parametrize("num_kv_heads", [1, 2, 8])
def test_compile_with_fused_merge(num_kv_heads):
    kernel = flashdecode.compile(64, 8, num_kv_heads, num_splits=4,
                                 return_lse=True, fused_merge=True)
    assert kernel.manifest["config"]["fused_merge"] is True
    assert [spec["name"] for spec in kernel.manifest["kernels"]] == [
        "fd_partial_attention"]
    assert list(kernel.ptx) == ["fd_partial_attention"]
    params = params_of(kernel)["fd_partial_attention"]
    assert params[-3:] == ["output", "lse", "merge_counters"]
    assert params.count("merge_counters") == 1
    workspace = kernel.manifest["workspace"]
    assert workspace["merge_counter_bytes_per_sequence"] == num_kv_heads * 4
    # The partials still go through the workspace, sized as without.
    plain = flashdecode.compile(64, 8, num_kv_heads, num_splits=4,
                                return_lse=True)
    assert workspace["bytes_per_sequence"] == \
        plain.manifest["workspace"]["bytes_per_sequence"]


def test_fused_merge_parameters_follow_the_features():
    """Without an lse: output then the counters; with sinks: output, lse,
    sinks, counters; the partial kernel's own parameters (ALiBi slopes,
    query lengths) stay before the merge's."""
    no_lse = flashdecode.compile(64, 8, 2, num_splits=4, fused_merge=True)
    params = params_of(no_lse)["fd_partial_attention"]
    assert params[-2:] == ["output", "merge_counters"]
    assert "lse" not in params
    sinks = flashdecode.compile(64, 8, 2, num_splits=4, return_lse=True,
                                with_sinks=True, fused_merge=True)
    assert params_of(sinks)["fd_partial_attention"][-4:] == [
        "output", "lse", "sinks", "merge_counters"]
    every = flashdecode.compile(64, 8, 2, num_splits=4, query_len=2,
                                with_sinks=True, with_alibi=True,
                                with_query_lens=True, fused_merge=True)
    assert params_of(every)["fd_partial_attention"][-5:] == [
        "alibi_slopes", "query_lens", "output", "sinks", "merge_counters"]


def test_without_fused_merge():
    """The default: two kernels, no counters (0 bytes), fused_merge false;
    other PTX than the fused kernel's (the flag is in the cache key)."""
    plain = flashdecode.compile(64, 8, 2, num_splits=4, return_lse=True)
    assert plain.manifest["config"]["fused_merge"] is False
    assert [spec["name"] for spec in plain.manifest["kernels"]] == [
        "fd_partial_attention", "fd_merge"]
    assert plain.manifest["workspace"][
        "merge_counter_bytes_per_sequence"] == 0
    assert "merge_counters" not in [
        name for params in params_of(plain).values() for name in params]
    fused = flashdecode.compile(64, 8, 2, num_splits=4, return_lse=True,
                                fused_merge=True)
    assert fused.ptx["fd_partial_attention"] != \
        plain.ptx["fd_partial_attention"]


def test_the_native_config_carries_fused_merge():
    native = flashdecode._flashdecode
    positional = (64, 8, 2, 1, "f16", "NHD", 0, 4, True, None, False, 1,
                  4096, 132, "sm_90")
    assert "fused_merge=1" in repr(native.KernelRequest(*positional,
                                                        fused_merge=True))
    assert "fused_merge=0" in repr(native.KernelRequest(*positional))


def test_automatic_splits_stay_within_what_the_fused_merge_merges():
    """MQA over 128k keys: 75 splits with the merge kernel (two row tiles
    on tensor cores, 150 blocks); fused, planned with the merge's serial
    tail (48) and within 256 (the most whose weights fit in the partial
    kernel's shared memory), in compile(), plan_splits and the per-call
    CUDA path's planning alike."""
    assert flashdecode.compile(128, 32, 1, max_len=131072).num_splits == 75
    fused = flashdecode.compile(128, 32, 1, max_len=131072, fused_merge=True)
    assert fused.num_splits == 48
    assert flashdecode.plan_splits(1, 1, 131072, num_q_heads=32, head_dim=128,
                                   fused_merge=True) == 48
    assert flashdecode.plan_splits(1, 1, 131072, num_q_heads=32,
                                   head_dim=128) == 75
    native = flashdecode._flashdecode
    positional = (128, 32, 1, 1, "f16", "NHD", 0, 0, True, None, False, 1,
                  131072, 132, "sm_90")
    assert native.KernelRequest(*positional).automatic_max_splits() == 512
    assert native.KernelRequest(*positional, fused_merge=True) \
        .automatic_max_splits() == 256
    assert native.KernelRequest(*positional, max_splits=100,
                                fused_merge=True) \
        .automatic_max_splits() == 100
    # What decode_attention and Decoder plan on a GPU: the JIT's choice,
    # within the fused merge's cap and max_splits.
    assert native.KernelRequest(*positional).resolve_num_splits() == 75
    assert native.KernelRequest(*positional, fused_merge=True) \
        .resolve_num_splits() == 48
    assert native.KernelRequest(*positional, max_splits=30, fused_merge=True) \
        .resolve_num_splits() <= 30


def test_plan_splits_fused_merge_needs_the_work():
    with pytest.raises(ValueError, match="fused_merge describe the kernel's "
                       "work: pass num_q_heads and head_dim"):
        flashdecode.plan_splits(1, 8, 4096, fused_merge=True)
    with pytest.raises(ValueError,
                       match="fused_merge must be True or False, got 'yes'"):
        flashdecode.plan_splits(1, 8, 4096, num_q_heads=32, head_dim=128,
                                fused_merge="yes")


@pytest.mark.parametrize("value", ["yes", 1, 0, None, np.bool_(True)])
def test_fused_merge_must_be_a_bool(value):
    with pytest.raises(ValueError, match="fused_merge must be True or False"):
        flashdecode.compile(64, 8, 2, fused_merge=value)


# decode_attention and Decoder with fused_merge=True: on fdemu (the
# emulator as CUDA driver) in make test, on a GPU when run with libcuda,
# against the float64 reference of reference.py and against
# fused_merge=False. The per-call path takes zeroed counters per GPU and
# stream, a Decoder's plan its own; each launch must leave them zero, or
# the next launch's last block to finish would not merge (its output would
# be stale). Inputs are fresh random numbers on every run; a failure names
# its seed. Sizes are small: the emulator interprets every thread.

on_the_device = pytest.mark.usefixtures("cuda_driver")

# (dtype, q heads, KV heads): the partial kernel each runs (head dim 64).
HEADS = {"f16-gqa-tensor-cores": ("float16", 8, 2),
         "f32-mha-cuda-cores": ("float32", 4, 4),
         "bf16-mha-cuda-cores": ("bfloat16", 4, 4)}


def fused_launches():
    """Launches of the per-call path's fused launchers so far (their
    resolved configs hold the flags)."""
    return sum(launcher.launch_count
               for launcher in flashdecode._flashdecode.cuda_launchers()
               if launcher.config.fields["fused_merge"])


def kernel_launches(action):
    """The kernels action() launched, as fdemu logs them (it runs work when
    it is enqueued); None on another driver."""
    path = os.environ.get("FD_CUDA_DRIVER")
    emulator = ctypes.CDLL(path) if path else None
    if emulator is None or not hasattr(emulator, "fdemuRecordLaunches"):
        action()
        return None
    emulator.fdemuRecordLaunches(1)
    try:
        action()
        return emulator.fdemuLaunchCount()
    finally:
        emulator.fdemuRecordLaunches(0)


def create_stream():
    """A blocking stream from the driver fdrt uses (test_cuda_devices')."""
    driver = ctypes.CDLL(os.environ.get("FD_CUDA_DRIVER") or "libcuda.so.1")
    stream = ctypes.c_void_p()
    assert driver.cuStreamCreate(ctypes.byref(stream), 0) == 0
    return stream.value


def check_agree(fused, plain, dtype, context):
    """(out, lse) of fused_merge=True and of False (host arrays): equal to
    the tolerances, row by row, -inf lse in the same places."""
    check_rows(decode(fused[0], dtype), decode(plain[0], dtype), dtype,
               TOLERANCE[dtype], context)
    if fused[1] is None:
        return
    finite = np.isfinite(plain[1])
    np.testing.assert_array_equal(np.isneginf(fused[1]),
                                  np.isneginf(plain[1]), err_msg=context)
    np.testing.assert_allclose(fused[1][finite], plain[1][finite],
                               rtol=LSE_TOLERANCE, atol=LSE_TOLERANCE,
                               err_msg=context)


def decode_cuda(inputs, lens, **options):
    """decode_attention(backend="cuda") on device copies of inputs.stored,
    writing into out (and lse) filled with a sentinel, so that a row the
    kernels leave unwritten shows; returns the DeviceArrays."""
    q, k, v = inputs.stored
    dtype = "bfloat16" if inputs.dtype == "bfloat16" else None
    out = DeviceArray.from_numpy(sentinel(q.shape, inputs.dtype), dtype=dtype)
    lse = DeviceArray.from_numpy(sentinel(q.shape[:-1], "float32")) \
        if options.get("return_lse") else None
    result = flashdecode.decode_attention(
        *to_device(q, k, v, dtype=dtype), DeviceArray.from_numpy(lens),
        backend="cuda", out=out, lse=lse, **options)
    assert (result[0] if lse is not None else result) is out
    return out, lse


@on_the_device
@pytest.mark.parametrize("num_splits", [1, 3, None, 16])
@pytest.mark.parametrize("kernel", HEADS)
def test_decode_attention_matches_float64(kernel, num_splits):
    """Lengths 0 (zeros, lse -inf), 1, odd and full; splits 1, 3,
    automatic and 16 (more than the short sequences have keys); with the
    lse. The fused launcher runs (once per call), and its result equals
    fused_merge=False's."""
    dtype, num_q_heads, num_kv_heads = HEADS[kernel]
    inputs = Inputs(dtype, (4, num_q_heads, 64), (4, 120, num_kv_heads, 64))
    lens = inputs.lengths(0, 1, 2 * int(inputs.rng.integers(5, 55)) + 1,
                          120)
    expected, expected_lse = attention(*inputs.exact, lens)
    context = f"seed={inputs.seed} {kernel} splits={num_splits} " \
        f"lens={lens.tolist()}"
    before = fused_launches()
    result = []
    launched = kernel_launches(lambda: result.extend(decode_cuda(
        inputs, lens, num_splits=num_splits, return_lse=True,
        fused_merge=True)))
    out, lse = result
    assert fused_launches() == before + 1
    assert launched in (None, 1), "one kernel, no merge kernel"
    check_device(out, lse, expected, expected_lse, dtype, lens, context)
    plain = decode_cuda(inputs, lens, num_splits=num_splits,
                        return_lse=True)
    assert fused_launches() == before + 1
    check_agree((out.numpy(), lse.numpy()),
                (plain[0].numpy(), plain[1].numpy()), dtype, context)


@on_the_device
def test_decode_attention_without_lse_and_new_arrays():
    """Without return_lse (the kernel takes output, then the counters)
    and without out=: a new DeviceArray."""
    inputs = Inputs("float16", (3, 8, 64), (3, 90, 2, 64))
    lens = inputs.lengths(90, 17, 0)
    q, k, v = to_device(*inputs.stored)
    out = flashdecode.decode_attention(q, k, v, DeviceArray.from_numpy(lens),
                                       backend="cuda", num_splits=4,
                                       fused_merge=True)
    assert isinstance(out, DeviceArray) and out.shape == (3, 8, 64)
    expected, expected_lse = attention(*inputs.exact, lens)
    check_device(out, None, expected, expected_lse, "float16", lens,
                 f"seed={inputs.seed}")


@on_the_device
def test_successive_calls_leave_the_counters_zero():
    """The per-call path's counters are one buffer per GPU and stream,
    shared by every fused configuration launched there: each launch must
    leave them zero for the next, whatever its batch, heads or splits
    (and a larger batch grows them, zeroed)."""
    cases = [("float16", 2, 8, 2, 3), ("float16", 2, 8, 2, 5),
             ("float32", 3, 4, 4, 2), ("float16", 6, 8, 2, 3),
             ("bfloat16", 2, 4, 4, 7), ("float16", 2, 8, 2, 3)]
    for dtype, batch, num_q_heads, num_kv_heads, splits in cases:
        inputs = Inputs(dtype, (batch, num_q_heads, 64),
                        (batch, 70, num_kv_heads, 64))
        lens = inputs.rng.integers(1, 71, batch).astype(np.int32)
        out, lse = decode_cuda(inputs, lens, num_splits=splits,
                               return_lse=True, fused_merge=True)
        expected, expected_lse = attention(*inputs.exact, lens)
        check_device(out, lse, expected, expected_lse, dtype, lens,
                     f"seed={inputs.seed} {dtype} batch={batch} heads="
                     f"{num_q_heads}/{num_kv_heads} splits={splits}")


@on_the_device
def test_each_stream_has_zeroed_counters_of_its_own():
    """decode_attention's fused launches take the counters of the GPU and
    stream (as the split workspace): batch * Hkv int32s, grown (at least
    doubling, zeroed) for a larger batch, untouched by launches without the
    fused merge; launches alternating between two streams both stay
    right."""
    native = flashdecode._flashdecode
    streams = [create_stream(), create_stream()]
    assert [native.cuda_merge_counter_bytes(0, s) for s in streams] == [0, 0]
    sizes = {stream: 0 for stream in streams}
    for step, (batch, fused) in enumerate(
            [(2, True), (2, True), (5, False), (5, True), (1, True),
             (3, True), (12, True)]):
        stream = streams[step % 2]
        inputs = Inputs("float16", (batch, 8, 64), (batch, 60, 2, 64))
        lens = inputs.rng.integers(0, 61, batch).astype(np.int32)
        out, lse = decode_cuda(inputs, lens, num_splits=3, return_lse=True,
                               fused_merge=fused, stream=stream)
        if fused and sizes[stream] < batch * 2 * 4:
            sizes[stream] = max(batch * 2 * 4, 2 * sizes[stream])
        assert [native.cuda_merge_counter_bytes(0, s) for s in streams] == \
            [sizes[s] for s in streams], f"step {step}"
        expected, expected_lse = attention(*inputs.exact, lens)
        check_device(out, lse, expected, expected_lse, "float16", lens,
                     f"seed={inputs.seed} step {step} batch={batch} "
                     f"fused={fused}")


@on_the_device
def test_sinks_and_query_lens():
    """Sinks (read by the fused merge) and per-sequence query lengths
    (read by the partial kernel and its merge) at Lq = 3: padding rows
    zeros with lse -inf; equal to fused_merge=False."""
    inputs = Inputs("bfloat16", (4, 3, 8, 64), (4, 100, 2, 64),
                    q_magnitude=3.0)
    lens = inputs.lengths(0, 2, 61, 100)
    query_lens = random_query_lens(inputs.rng, 4, 3)
    sinks = random_sinks(inputs.rng, 8)
    fused = run_query_lens("cuda", inputs, lens, query_lens, sinks=sinks,
                           num_splits=3, fused_merge=True)
    plain = run_query_lens("cuda", inputs, lens, query_lens, sinks=sinks,
                           num_splits=3)
    check_agree(fused, plain, "bfloat16",
                f"seed={inputs.seed} query_lens={query_lens.tolist()}")


@on_the_device
def test_fused_decoder_plans_with_the_merge_tail():
    """A fused Decoder's automatic split count is plan_splits(...,
    fused_merge=True) for the device's SMs: MQA's 32 rows make the last
    block's merge long, so it splits less than the merge kernel's plan,
    and the result is still the attention."""
    inputs = Inputs("float16", (1, 32, 128), (1, 8192, 1, 128))
    q, k, v = to_device(*inputs.stored)
    lens = inputs.lengths(8001)
    out = DeviceArray.empty((1, 32, 128), "float16")
    lse = DeviceArray.empty((1, 32), "float32")
    plan = dict(sm_count=flashdecode._flashdecode.cuda_sm_count(),
                num_q_heads=32, head_dim=128)
    fused = flashdecode.plan_splits(1, 1, 8192, fused_merge=True, **plan)
    assert 1 < fused < flashdecode.plan_splits(1, 1, 8192, **plan)
    decoder = flashdecode.Decoder(q, k, v, DeviceArray.from_numpy(lens), out,
                                  lse, fused_merge=True)
    assert decoder.num_splits == fused
    decoder.run()
    expected, expected_lse = attention(*inputs.exact, lens)
    check_device(out, lse, expected, expected_lse, "float16", lens,
                 f"fused, {fused} automatic splits")
    # decode_attention's per-call planning alike: its launchers are keyed
    # by the resolved config (the planned count, the flags).
    per_call = flashdecode.decode_attention(
        q, k, v, DeviceArray.from_numpy(lens), backend="cuda",
        return_lse=True, fused_merge=True)
    check_device(*per_call, expected, expected_lse, "float16", lens,
                 "fused, per call")
    assert any(launcher.config.fields["requested_num_splits"] == fused and
               launcher.config.fields["fused_merge"]
               for launcher in flashdecode._flashdecode.cuda_launchers())


@on_the_device
@pytest.mark.parametrize("kernel", ["f16-gqa-tensor-cores",
                                    "f32-mha-cuda-cores"])
def test_decoder_replays_as_lengths_change(kernel):
    """One capture (which runs nothing), then several replays while the
    lengths change in place (grow, shrink, 0): each replay must merge
    anew, which it does only if every launch left the plan's counters
    zero. A Decoder without the fused merge over other outputs agrees."""
    dtype, num_q_heads, num_kv_heads = HEADS[kernel]
    inputs = Inputs(dtype, (3, num_q_heads, 64), (3, 160, num_kv_heads, 64))
    q, k, v = to_device(*inputs.stored)
    lens = inputs.lengths(1, 7, 40)
    device_lens = DeviceArray.from_numpy(lens)
    out_sentinel = sentinel((3, num_q_heads, 64), dtype)
    out = DeviceArray.from_numpy(out_sentinel)
    lse = DeviceArray.from_numpy(sentinel((3, num_q_heads), "float32"))
    decoder = flashdecode.Decoder(q, k, v, device_lens, out, lse,
                                  num_splits=4, fused_merge=True)
    plain_out = DeviceArray.empty((3, num_q_heads, 64), dtype)
    plain_lse = DeviceArray.empty((3, num_q_heads), "float32")
    plain = flashdecode.Decoder(q, k, v, device_lens, plain_out, plain_lse,
                                num_splits=4)
    assert decoder.num_splits == plain.num_splits == 4
    assert kernel_launches(decoder.capture) in (None, 0)
    plain.capture()
    np.testing.assert_array_equal(out.numpy(), out_sentinel)
    steps = [[1, 7, 40], [33, 90, 41], [160, 0, 12], [5, 5, 5],
             [0, 0, 0], [159, 77, 3]]
    for step, values in enumerate(steps):
        lens = np.array(values, np.int32)
        device_lens.copy_from_numpy(lens)
        assert kernel_launches(decoder.replay) in (None, 1), \
            "one kernel, no merge kernel"
        assert kernel_launches(plain.replay) in (None, 2)
        expected, expected_lse = attention(*inputs.exact, lens)
        context = f"seed={inputs.seed} replay {step} lens={values}"
        check_device(out, lse, expected, expected_lse, dtype, lens, context)
        check_agree((out.numpy(), lse.numpy()),
                    (plain_out.numpy(), plain_lse.numpy()), dtype, context)
    # An eager run between replays leaves the counters zero too.
    lens = inputs.lengths(20, 150, 2)
    device_lens.copy_from_numpy(lens)
    decoder.run()
    for step in range(2):
        expected, expected_lse = attention(*inputs.exact, lens)
        check_device(out, lse, expected, expected_lse, dtype, lens,
                     f"seed={inputs.seed} after run, replay {step}")
        lens = lens[::-1].copy()
        device_lens.copy_from_numpy(lens)
        decoder.replay()


@on_the_device
def test_decoder_with_sinks_and_query_lens_replays():
    """A Decoder with the fused merge, sinks and query lengths: replays
    after new lengths and query lengths are written in place."""
    inputs = Inputs("float16", (2, 2, 8, 64), (2, 80, 2, 64))
    q, k, v = to_device(*inputs.stored)
    sinks = random_sinks(inputs.rng, 8)
    lens = inputs.lengths(10, 80)
    query_lens = np.array([2, 1], np.int32)
    device_lens, device_query_lens = to_device(lens, query_lens)
    out = DeviceArray.from_numpy(sentinel((2, 2, 8, 64), "float16"))
    lse = DeviceArray.empty((2, 2, 8), "float32")
    decoder = flashdecode.Decoder(
        q, k, v, device_lens, out, lse, num_splits=3, fused_merge=True,
        sinks=DeviceArray.from_numpy(sinks), query_lens=device_query_lens)
    decoder.capture()
    for step, (values, queries) in enumerate(
            [([10, 80], [2, 1]), ([44, 3], [0, 2]), ([79, 1], [2, 2]),
             ([0, 60], [1, 0])]):
        lens = np.array(values, np.int32)
        query_lens = np.array(queries, np.int32)
        device_lens.copy_from_numpy(lens)
        device_query_lens.copy_from_numpy(query_lens)
        assert kernel_launches(decoder.replay) in (None, 1)
        expected, expected_lse = attention(*inputs.exact, lens, sinks=sinks,
                                           query_lens=query_lens)
        check_device(out, lse, expected, expected_lse, "float16", lens,
                     f"seed={inputs.seed} replay {step} lens={values} "
                     f"query_lens={queries}", query_lens=query_lens)


@pytest.mark.parametrize("value", ["yes", 1, 0, None, np.bool_(True)])
def test_decode_attention_on_the_cpu_checks_fused_merge(value):
    inputs = Inputs("float32", (2, 8, 64), (2, 16, 2, 64))
    with pytest.raises(ValueError, match="fused_merge must be True or False"):
        flashdecode.decode_attention(*inputs.stored, inputs.lengths(16, 3),
                                     fused_merge=value)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_the_cpu_backend_computes_the_same_with_fused_merge(dtype):
    """The CPU path has no merge kernel: fused_merge=True gives the very
    same result (and the reference's)."""
    inputs = Inputs(dtype, (3, 8, 64), (3, 50, 2, 64))
    lens = inputs.lengths(0, 50, 23)
    plain = flashdecode.decode_attention(*inputs.stored, lens, num_splits=3,
                                         return_lse=True)
    fused = flashdecode.decode_attention(*inputs.stored, lens, num_splits=3,
                                         return_lse=True, fused_merge=True)
    np.testing.assert_array_equal(fused[0], plain[0])
    np.testing.assert_array_equal(fused[1], plain[1])
    expected, expected_lse = attention(*inputs.exact, lens)
    check_agree(fused, (expected.astype(dtype), expected_lse.astype(
        np.float32)), dtype, f"seed={inputs.seed}")


@on_the_device
@pytest.mark.parametrize("value", ["yes", 1, 0, None, np.bool_(True)])
def test_cuda_and_the_decoder_check_fused_merge(value):
    """A ValueError naming fused_merge before anything reaches the device:
    no launch; the device works after."""
    inputs = Inputs("float16", (2, 8, 64), (2, 16, 2, 64))
    lens = inputs.lengths(16, 3)
    arrays = to_device(*inputs.stored, lens)
    out = DeviceArray.empty((2, 8, 64), "float16")
    before = fused_launches()
    with pytest.raises(ValueError, match="fused_merge must be True or False"):
        flashdecode.decode_attention(*arrays, backend="cuda",
                                     fused_merge=value)
    with pytest.raises(ValueError, match="fused_merge must be True or False"):
        flashdecode.Decoder(*arrays, out, fused_merge=value)
    assert fused_launches() == before
    flashdecode.decode_attention(*arrays, backend="cuda", out=out,
                                 fused_merge=True)
    expected, expected_lse = attention(*inputs.exact, lens)
    check_device(out, None, expected, expected_lse, "float16", lens,
                 f"seed={inputs.seed}")

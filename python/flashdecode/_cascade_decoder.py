"""CascadeDecoder: cascade_decode's three launches bound once to fixed GPU
buffers, for CUDA-graph decoding."""

from . import _flashdecode as _native
from ._cascade import _check_prefix_on_device, _prefix_views
from ._common import _DTYPES, _is_torch
from ._cuda_arrays import (_CudaArray, _checks_for, _new_output,
                           _torch_stream)
from ._decoder import Decoder
from ._merge import _device_merge, _device_pair
from ._spellings import spelled


class CascadeDecoder:
    """cascade_decode bound to fixed GPU buffers, for CUDA-graph decoding.

        decoder = CascadeDecoder(q, prefix_k, prefix_v, prefix_len, k_cache,
                                 v_cache, seq_lens, out)
        decoder.capture()    # the prefix pass, the suffix pass, the merge
        ...                  # write new lengths into seq_lens, prefix_len
        decoder.replay()     # one graph launch

    The arguments are cascade_decode's, each a device array (DeviceArray,
    PyTorch CUDA tensor, __cuda_array_interface__) on one GPU, kept alive
    and bound by address: ``prefix_len`` is an int32 [1] device array and,
    like ``seq_lens`` (the suffixes' lengths, int32 [R]), the block tables,
    ``sinks`` and ``alibi_slopes``, read at every run() and replay(), so
    new values written in place need no re-capture (the kernels clamp
    lengths into their caches' capacity and report nothing). ``out`` ([R,
    (Lq,) Hq, D]) receives the result, ``lse`` ([R, (Lq,) Hq] float32, or
    None) its log-sum-exp; the prefix pass's own output and lse are
    buffers the CascadeDecoder owns. ``stream``: as for Decoder (PyTorch's
    current stream for tensors, else a stream the CascadeDecoder owns);
    ``arch``, ``num_splits``, ``scale``, ``kv_layout``, ``window_left``,
    ``logits_soft_cap`` and the planner's knobs as for cascade_decode.
    """

    @_checks_for("a CascadeDecoder")
    def __init__(self, q, prefix_k, prefix_v, prefix_len, k_cache, v_cache,
                 seq_lens, out, lse=None, *, block_table=None,
                 prefix_block_table=None, num_splits=None, scale=None,
                 kv_layout="NHD", arch=None, blocks_per_sm=None,
                 min_chunk_length=None, max_splits=None, window_left=None,
                 logits_soft_cap=None, sinks=None, alibi_slopes=None):
        kv_layout = spelled("kv_layout", kv_layout)
        if isinstance(prefix_len, int) or \
                tuple(getattr(prefix_len, "shape", ())) != (1,):
            raise ValueError("prefix_len must be an int32 [1] device array: "
                             "a CascadeDecoder reads it at every replay, got "
                             f"{prefix_len!r}")
        _check_prefix_on_device(prefix_k, prefix_v, prefix_len)
        common = {"num_splits": num_splits, "scale": scale,
                  "kv_layout": kv_layout, "arch": arch,
                  "blocks_per_sm": blocks_per_sm,
                  "min_chunk_length": min_chunk_length,
                  "max_splits": max_splits, "window_left": window_left,
                  "logits_soft_cap": logits_soft_cap,
                  "alibi_slopes": alibi_slopes}
        outputs = _CudaArray(out, "out")
        device = _native.pointer_device(outputs.pointer)
        rows_shape = tuple(out.shape[:-1])
        if lse is None:
            lse, _ = _new_output(out, rows_shape, "float32", device)
        prefix_out, _ = _new_output(out, tuple(out.shape), outputs.dtype,
                                    device)
        prefix_lse, _ = _new_output(out, rows_shape, "float32", device)
        self._suffix = Decoder(q, k_cache, v_cache, seq_lens, out, lse,
                               block_table=block_table, sinks=sinks,
                               **common)
        views = _prefix_views(prefix_k, prefix_v, prefix_block_table,
                              kv_layout)
        self._prefix = Decoder(q, views[0], views[1], prefix_len, prefix_out,
                               prefix_lse, block_table=views[2],
                               _suffix_lens=seq_lens, **common)
        self.device = self._suffix.device
        rows = 1
        for extent in rows_shape[:-1]:
            rows *= extent
        heads, head_dim = rows_shape[-1], tuple(out.shape)[-1]
        states = [array.reshape((rows, heads, head_dim)) if not
                  _is_torch(array) else array.view(rows, heads, head_dim)
                  for array in (out, prefix_out)]
        lses = [array.reshape((rows, heads)) if not _is_torch(array)
                else array.view(rows, heads) for array in (lse, prefix_lse)]
        # Checked once: a launch inside a capture asks the driver nothing.
        self._merged = _device_pair(states[0], lses[0], states[1], lses[1],
                                    ("out", "lse", "prefix out",
                                     "prefix lse"))
        self._keep_alive = (states, lses, prefix_out, prefix_lse)
        self._torch_stream = _is_torch(out)
        self._graph = None
        self.out, self.lse = out, lse
        # The merge kernel is compiled and loaded now, not during a capture.
        _native.cuda_merge_states([0, 0], [0, 0], 0, 0, 0,
                                  _DTYPES[outputs.dtype], 0, heads, head_dim,
                                  [1, 1], False, self.device, 0)

    def _stream(self, stream):
        """The stream to launch on: the caller's, PyTorch's current one for
        tensors, else the prefix plan's own."""
        if stream is not None:
            return stream
        if self._torch_stream:
            return _torch_stream(self.device)
        return self._prefix._plan.own_stream

    def _launch(self, stream):
        self._prefix._plan.launch(stream)
        self._suffix._plan.launch(stream)
        out, lse, prefix_out, prefix_lse = self._merged
        _device_merge([out, prefix_out], [lse, prefix_lse], out.pointer,
                      lse.pointer, None, False, self.out, stream, self.device)

    def run(self, stream=None):
        """One decode step: the two passes and their merge, on ``stream``."""
        self._launch(self._stream(stream))

    def capture(self, stream=None):
        """Records run()'s three launches into a CUDA graph."""
        stream = self._stream(stream)
        self._graph = _native.CudaGraph(self.device, stream,
                                        lambda: self._launch(stream))

    def replay(self, stream=None):
        """Launches the graph capture() recorded."""
        if self._graph is None:
            raise RuntimeError("replay() before capture()")
        self._graph.replay(self._stream(stream))

"""Devices, models, sessions and snapshots over libstrata's handles."""

from __future__ import annotations

import ctypes
import os
import threading
from ctypes import byref, c_int32, c_int64, c_size_t, c_void_p
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from . import _lib
from ._arrays import as_array
from .errors import CheckpointError, InvalidArgumentError, ShapeError, check

PathLike = Union[str, bytes, "os.PathLike[Any]"]
Tokens = Union[Sequence[int], np.ndarray]

_BACKENDS = {"auto": _lib.BACKEND_AUTO, "cpu": _lib.BACKEND_CPU, "metal": _lib.BACKEND_METAL, "emu": _lib.BACKEND_EMU}
#: tokens a prefill runs at once unless told otherwise (STRATA_DEFAULT_STEP)
DEFAULT_STEP = _lib.DEFAULT_STEP
_log_keep = None  # the installed ctypes callback, kept alive while installed
_log_lock = threading.Lock()


def version() -> str:
    """The library's version string, e.g. "strata 0.1.0 (abi 1)"."""
    return _lib.load().strata_version_string().decode()


def set_log_callback(fn: Optional[Callable[[int, str], None]], level: int = _lib.LOG_INFO) -> None:
    """Sends library log messages at or above level to fn(level: int, message: str); None
    silences them (the default). fn may be called from any thread and must not raise."""
    global _log_keep
    lib = _lib.load()
    with _log_lock:
        if fn is None:
            check(lib.strata_set_log_callback(ctypes.cast(None, _lib.LOG_FN), 0, None), lib)
            _log_keep = None
            return
        cb = _lib.LOG_FN(lambda lvl, msg, ud: fn(int(lvl), msg.decode("utf-8", "replace")))
        check(lib.strata_set_log_callback(cb, level, None), lib)
        _log_keep = cb


class _Handle:
    """An owned libstrata handle freed by close() (also on garbage collection and on leaving a
    with block). After close() the stale handle is still passed to the library, which answers
    InvalidHandleError: the package adds no state of its own."""

    _free: str = ""

    def __init__(self, lib: ctypes.CDLL, handle: Optional[int]) -> None:
        self._lib = lib
        self._h = c_void_p(handle)
        self._closed = False

    @property
    def handle(self) -> Optional[int]:
        """The raw handle value (for low-level calls through strata.library())."""
        return self._h.value

    def close(self) -> None:
        if self._closed:
            return
        check(getattr(self._lib, self._free)(self._h), self._lib)
        self._closed = True

    def __enter__(self) -> "_Handle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self._closed and self._h.value:
                getattr(self._lib, self._free)(self._h)
        except Exception:
            pass


class Device(_Handle):
    """A compute device: backend "auto" (metal where the GPU and OS run the kernels: Apple7 or
    later with MSL 3.1, else cpu, and the kernels line says why), "cpu", "metal" (Apple
    GPUs) or "emu" (the Metal kernels on the MSL emulator: needs clang; for tests and kernel
    debugging, far slower than a GPU)."""

    _free = "strata_device_free"

    def __init__(self, backend: str = "auto") -> None:
        lib = _lib.load()
        if backend not in _BACKENDS:
            raise InvalidArgumentError(f"backend {backend!r}: want one of {sorted(_BACKENDS)}")
        p = lib.strata_device_default_params()
        p.backend = _BACKENDS[backend]
        h = c_void_p()
        check(lib.strata_device_open(byref(p), byref(h)), lib)
        super().__init__(lib, h.value)

    def info(self) -> Dict[str, str]:
        """{"backend": "cpu" | "metal" | "emu", "kernels": the whole kernel report (on metal and
        emu every kernel variant dispatched so far with its count)}."""
        props = _lib.DeviceProps(struct_size=ctypes.sizeof(_lib.DeviceProps))
        check(self._lib.strata_device_info(self._h, byref(props)), self._lib)
        n = c_size_t()
        check(self._lib.strata_device_kernels(self._h, None, 0, byref(n)), self._lib)
        buf = ctypes.create_string_buffer(n.value + 1)
        check(self._lib.strata_device_kernels(self._h, buf, n.value + 1, None), self._lib)
        return {"backend": props.backend.decode(), "kernels": buf.value.decode("utf-8", "replace")}

    @property
    def backend(self) -> str:
        return self.info()["backend"]


class Model(_Handle):
    """A checkpoint loaded on a device: checkpoint_dir is a checkpoint directory or a llama.cpp
    GGUF file ("x.gguf"; a split set by any of its parts; architectures qwen3next, qwen35,
    qwen35moe), loaded by the same Go code as strata.LoadModel through the C ABI's
    strata_model_load (docs/FORMATS.md, section GGUF). progress, if given, is called as progress(done_bytes,
    total_bytes, tensor_name) while loading. layers=(lo, hi) loads one pipeline stage: decoder
    layers [lo, hi) only (plus the embedding when lo == 0 and the head when hi is the layer
    count); its sessions take the previous stage's residual streams (Session.prefill's hidden)
    when lo > 0 and return their own instead of logits when hi < layers. None: the whole model.
    compute is the arithmetic of the linear layers' products: "f32" (default, float32), "bf16"
    (activations and weights as bfloat16, float32 sums) or "int8" (activations quantized per row
    and block of 32, MLX affine and FP8 codes as integers); a CPU option (InvalidArgumentError on
    metal or emu, and for another name). Model.compute_report() says what ran."""

    _free = "strata_model_free"

    def __init__(self, device: Device, checkpoint_dir: PathLike,
                 progress: Optional[Callable[[int, int, str], None]] = None,
                 layers: Optional[Tuple[int, int]] = None, compute: str = "f32") -> None:
        if not isinstance(device, Device):
            raise InvalidArgumentError(f"device must be a strata.Device, got {type(device).__name__}")
        checkpoint_dir = _path(checkpoint_dir)
        lib = device._lib
        p = lib.strata_model_default_params()
        if layers is not None:
            if (not isinstance(layers, (tuple, list)) or len(layers) != 2
                    or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in layers)):
                raise InvalidArgumentError(f"layers must be a pair of integers (lo, hi), got {layers!r}")
            if not 0 <= layers[0] < layers[1] < 2**31:
                raise InvalidArgumentError(f"layers {tuple(layers)!r} is not a non-empty range [lo, hi)")
            p.layer_lo, p.layer_hi = int(layers[0]), int(layers[1])
        if not isinstance(compute, str) or compute not in ("f32", "bf16", "int8"):
            raise InvalidArgumentError(f"compute must be 'f32', 'bf16' or 'int8', got {compute!r}")
        compute_b = compute.encode()  # kept alive through the load
        p.compute = compute_b
        keep = None
        if progress is not None:
            keep = _lib.PROGRESS_FN(lambda d, t, n, ud: progress(int(d), int(t), n.decode()))
            p.progress = keep
        h = c_void_p()
        check(lib.strata_model_load(device._h, checkpoint_dir, byref(p), byref(h)), lib)
        del keep  # the callback is only called during the load
        super().__init__(lib, h.value)
        props = _lib.ModelProps(struct_size=ctypes.sizeof(_lib.ModelProps))
        check(lib.strata_model_info(self._h, byref(props)), lib)
        self.arch = props.arch.decode()
        self.vocab = int(props.vocab)
        self.layers = int(props.layers)
        #: the loaded stage's decoder layers [lo, hi); (0, layers) for a whole model
        self.layer_range = (int(props.layer_lo), int(props.layer_hi))
        #: floats per token of a stage's residual streams (S*D)
        self.hidden_size = int(props.hidden_size)

    def describe(self) -> str:
        """A one-line description: sizes, heads, experts."""
        n = c_size_t()
        check(self._lib.strata_model_describe(self._h, None, 0, byref(n)), self._lib)
        buf = ctypes.create_string_buffer(n.value + 1)
        check(self._lib.strata_model_describe(self._h, buf, n.value + 1, None), self._lib)
        return buf.value.decode()

    def compute_report(self) -> str:
        """What the compute mode ran: the mode, the kernel of each weight format, how many
        matrices, and why any ran in f32."""
        n = c_size_t()
        check(self._lib.strata_model_compute(self._h, None, 0, byref(n)), self._lib)
        buf = ctypes.create_string_buffer(n.value + 1)
        check(self._lib.strata_model_compute(self._h, buf, n.value + 1, None), self._lib)
        return buf.value.decode()

    def session(self, max_context: int = 0) -> "Session":
        """A new session (an empty cache) of max_context tokens (0: 4096 or the model's maximum)."""
        return Session(self, max_context)


def _tokens(tokens: Tokens) -> np.ndarray:
    """tokens as a C-contiguous int32 array, checked to be a non-empty 1-D sequence of ids that
    int32 holds."""
    if isinstance(tokens, (str, bytes)) or tokens is None:
        raise InvalidArgumentError(f"tokens must be a non-empty 1-D sequence of token ids, got {type(tokens).__name__}"
                                   " (text goes through strata.Tokenizer first)")
    a = np.asarray(tokens)
    if a.ndim != 1 or a.size == 0:
        raise InvalidArgumentError(f"tokens must be a non-empty 1-D sequence, got shape {a.shape}")
    if not np.issubdtype(a.dtype, np.integer):
        raise InvalidArgumentError(f"tokens must be integers, got dtype {a.dtype}")
    if a.dtype != np.int32:
        if a.min() < np.iinfo(np.int32).min or a.max() > np.iinfo(np.int32).max:
            raise InvalidArgumentError("token ids do not fit in int32")
        a = a.astype(np.int32)
    return np.ascontiguousarray(a)


def _step(step: Any) -> int:
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or not 0 <= step < 2**63:
        raise InvalidArgumentError(f"step must be a non-negative integer (0: one shot), got {step!r}")
    return int(step)


def _prefill_call(fn: Any, first: Any, lib: ctypes.CDLL, tokens: Tokens, vocab: int, all_logits: bool,
                  step: int, hidden: Any = None, stage: Optional["Model"] = None) -> np.ndarray:
    toks = _tokens(tokens)
    if not isinstance(all_logits, (bool, np.bool_)):
        raise InvalidArgumentError(f"all_logits must be a bool, got {all_logits!r}")
    p = lib.strata_prefill_default_params()
    p.all_logits = 1 if all_logits else 0
    p.step = _step(step)
    keep = []
    if hidden is not None:
        if stage is None or stage.layer_range[0] == 0:
            raise InvalidArgumentError("hidden is the input of a pipeline stage that starts after layer 0 (Model(layers=(lo, hi)) with lo > 0)")
        h = np.ascontiguousarray(as_array(hidden, "hidden"), dtype=np.float32)
        if h.shape != (toks.size, stage.hidden_size):
            raise ShapeError(f"hidden must be [{toks.size}, {stage.hidden_size}] (tokens x hidden_size), got {list(h.shape)}")
        keep.append(h)
        p.hidden_in = h.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        p.hidden_in_len = h.size
    headless = stage is not None and stage.layer_range[1] < stage.layers
    written = c_size_t()
    tok_ptr = toks.ctypes.data_as(ctypes.POINTER(c_int32))
    if headless:
        out = np.empty((toks.size, stage.hidden_size), dtype=np.float32)
        p.hidden_out = out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        p.hidden_out_cap = out.size
        check(fn(first, tok_ptr, toks.size, byref(p), None, 0, byref(written)), lib)
        return out
    rows = toks.size if all_logits else 1
    out = np.empty((rows, vocab), dtype=np.float32)
    check(fn(first, tok_ptr, toks.size, byref(p), out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
             out.size, byref(written)), lib)
    assert written.value == out.size
    return out if all_logits else out[0]


class Session(_Handle):
    """One sequence's cache. Used by one thread at a time: a call while another thread is inside
    a call on the same session raises BusyError."""

    _free = "strata_session_free"

    def __init__(self, model: Model, max_context: int = 0) -> None:
        if not isinstance(model, Model):
            raise InvalidArgumentError(f"model must be a strata.Model, got {type(model).__name__}")
        if isinstance(max_context, bool) or not isinstance(max_context, (int, np.integer)) or not 0 <= max_context < 2**63:
            raise InvalidArgumentError(f"max_context must be an integer in [0, 2^63), got {max_context!r}")
        lib = model._lib
        p = lib.strata_session_default_params()
        p.max_context = int(max_context)
        h = c_void_p()
        check(lib.strata_session_new(model._h, byref(p), byref(h)), lib)
        super().__init__(lib, h.value)
        self.model = model
        self.vocab = model.vocab

    def prefill(self, tokens: Tokens, all_logits: bool = False, step: int = DEFAULT_STEP,
                hidden: Any = None) -> np.ndarray:
        """Runs tokens (1-D integer ids) at the next positions and returns float32 logits:
        [vocab] for the last token, or [len(tokens), vocab] with all_logits. A prompt longer than
        step runs in steps of step tokens within the call (memory bounded by the step; the same
        results as separate calls of step tokens); step=0 runs it in one step.

        For a pipeline stage (Model(layers=(lo, hi))): hidden, required when lo > 0, is the
        previous stage's output for the same tokens, float32 [len(tokens), model.hidden_size]; a
        stage with hi < layers returns its residual streams [len(tokens), hidden_size] instead
        of logits. Raises CapacityError past max_context, OutOfMemoryError when a step's
        activations do not fit (lower step), InvalidArgumentError / ShapeError for bad input;
        a failed call leaves the session unchanged."""
        return _prefill_call(self._lib.strata_session_prefill, self._h, self._lib, tokens, self.vocab, all_logits,
                             step, hidden, self.model)

    def cancel(self) -> None:
        """Asks a prefill running in another thread to stop (it raises CancelledError)."""
        check(self._lib.strata_session_cancel(self._h), self._lib)

    @property
    def position(self) -> int:
        """Tokens in the cache (the next prefill's first position)."""
        pos = c_int64()
        check(self._lib.strata_session_position(self._h, byref(pos)), self._lib)
        return pos.value

    def reset(self) -> None:
        """Empties the cache."""
        check(self._lib.strata_session_reset(self._h), self._lib)

    def snapshot(self) -> "Snapshot":
        """A copy of the whole state, restorable into any session of the same model."""
        h = c_void_p()
        check(self._lib.strata_session_snapshot(self._h, byref(h)), self._lib)
        return Snapshot(self._lib, h.value)

    def restore(self, snapshot: "Snapshot") -> None:
        """Replaces the state with a copy of snapshot's."""
        if not isinstance(snapshot, Snapshot):
            raise InvalidArgumentError(f"snapshot must be a strata.Snapshot, got {type(snapshot).__name__}")
        check(self._lib.strata_session_restore(self._h, snapshot._h), self._lib)

    def save(self, path: PathLike) -> None:
        """Writes the whole state to a session state file at path (safetensors: numpy and MLX read
        it; README.md describes it), atomically: a temporary file flushed and renamed over path
        (strata.WriteFile in Go: one left by a killed process is removed by the next save; an
        existing device or FIFO is written in place). Raises InvalidArgumentError when the file cannot be written (the message names it)."""
        check(self._lib.strata_session_save(self._h, _path(path, "path")), self._lib)

    def load(self, path: PathLike) -> None:
        """Replaces the state (position, token ids, every state) with a state file's, made by the
        same checkpoint and stage on any backend. On error the session is unchanged:
        CheckpointError (missing, not a state file, truncated, corrupt), UnsupportedError (a newer
        format version), InvalidArgumentError (another model's, checkpoint's or stage's file),
        CapacityError (more tokens than max_context)."""
        check(self._lib.strata_session_load(self._h, _path(path, "path")), self._lib)

    def save_mlx_lm(self, path: PathLike, format: str = "new", dtype: Optional[str] = None,
                    model: Optional[str] = None) -> None:
        """Writes the state as an mlx-lm prompt-cache file at path (ending in .safetensors), so that
        `mlx_lm.generate --prompt-cache-file path` continues after the session's tokens
        (qwen3_next, qwen3_5, qwen3_5_moe): per attention layer a KVCache (keys after k_norm and
        RoPE, values [1, Hkv, T, head_dim]), per GDN layer an ArraysCache (conv state
        [1, K-1, channels], recurrent state [1, Hv, Dv, Dk] float32). format: "new" (mlx-lm after
        PR #1632; loading its empty arrays needs mlx >= 0.32.1) or "legacy"; dtype of keys,
        values and conv states: "bfloat16", "float16", "float32" or None (the model's, as mlx-lm
        runs it); model: the metadata "model" mlx_lm.generate loads (None: the checkpoint
        directory). Written atomically; on error nothing is written. Raises UnsupportedError (a
        family mlx-lm has no model for, e.g. qwen4_exp; layer_types that disagree with
        full_attention_interval; a pipeline stage) or InvalidArgumentError (an unknown format or
        dtype, an empty string for any of the three, an empty session, a name without .safetensors)."""
        p = self._lib.strata_mlx_lm_default_params()
        for field, value in (("format", format), ("dtype", dtype), ("model", model)):
            if value is None:
                continue
            if not isinstance(value, str) or "\0" in value or value == "":
                raise InvalidArgumentError(f"{field} must be a non-empty string without NUL bytes (None: the default), got {value!r}")
            setattr(p, field, value.encode())
        check(self._lib.strata_session_save_mlx_lm(self._h, _path(path, "path"), byref(p)), self._lib)

    @property
    def tokens(self) -> np.ndarray:
        """The token ids the state was made from, int32 [position]."""
        n = c_size_t()
        check(self._lib.strata_session_tokens(self._h, None, 0, byref(n)), self._lib)
        out = np.empty(n.value, dtype=np.int32)
        check(self._lib.strata_session_tokens(self._h, out.ctypes.data_as(ctypes.POINTER(c_int32)), out.size,
                                              byref(n)), self._lib)
        return out


class Snapshot(_Handle):
    """A session state taken by Session.snapshot()."""

    _free = "strata_snapshot_free"

    @property
    def position(self) -> int:
        pos = c_int64()
        check(self._lib.strata_snapshot_position(self._h, byref(pos)), self._lib)
        return pos.value


def prefill(checkpoint_dir: PathLike, tokens: Tokens, all_logits: bool = False, step: int = DEFAULT_STEP) -> np.ndarray:
    """One-shot: loads checkpoint_dir on the default device, prefills tokens in a fresh session
    and releases everything. Returns the logits like Session.prefill; the vocabulary size is read
    from the checkpoint's config."""
    import json
    path = _path(checkpoint_dir)
    try:
        with open(os.path.join(path, b"config.json")) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{checkpoint_dir}: cannot read config.json: {e}") from None
    vocab = cfg.get("vocab_size") or cfg.get("text_config", {}).get("vocab_size")
    if not vocab:
        raise InvalidArgumentError(f"{checkpoint_dir}/config.json has no vocab_size")
    lib = _lib.load()
    return _prefill_call(lib.strata_prefill, path, lib, tokens, int(vocab), all_logits, step)


def _path(p: PathLike, what: str = "checkpoint_dir") -> bytes:
    """A path (str, bytes or os.PathLike) as the bytes the C ABI takes."""
    if isinstance(p, (str, bytes, os.PathLike)):
        b = os.fsencode(p)
        if b"\0" in b:
            raise InvalidArgumentError(f"{what} {p!r} contains a NUL byte")
        return b
    raise InvalidArgumentError(f"{what} must be a path (str, bytes or os.PathLike), got {type(p).__name__}")

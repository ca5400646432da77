"""Loading libstrata and declaring its C functions (include/strata.h) for ctypes."""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from typing import Optional
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int32,
                    c_int64, c_size_t, c_void_p)

ABI_VERSION = 5
DEFAULT_STEP = 1024  # STRATA_DEFAULT_STEP
DEFAULT_PROMPT_CACHE_BYTES = 2 << 30  # STRATA_DEFAULT_PROMPT_CACHE_BYTES
DEFAULT_CHECKPOINT_EVERY = 1024  # STRATA_DEFAULT_CHECKPOINT_EVERY
CACHE_SOURCES = {0: "", 1: "session", 2: "memory", 3: "disk"}  # STRATA_CACHE_*

# Status codes (strata_status), stable and appended only.
OK = 0
ERR_INVALID_ARGUMENT = 1
ERR_INVALID_HANDLE = 2
ERR_SHAPE = 3
ERR_DTYPE = 4
ERR_CAPACITY = 5
ERR_CHECKPOINT = 6
ERR_BACKEND = 7
ERR_OUT_OF_MEMORY = 8
ERR_CANCELLED = 9
ERR_INTERNAL = 10
ERR_BUSY = 11
ERR_UNSUPPORTED = 12

# Element types of strata_tensor.
F32, F16, BF16, I32, U8 = 0, 1, 2, 3, 4

LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR = 0, 1, 2, 3
BACKEND_AUTO, BACKEND_CPU, BACKEND_METAL, BACKEND_EMU = 0, 1, 2, 3
GDN_GROUPED, GDN_TILED = 0, 1
GDN_CHUNKED, GDN_RECURRENT = 0, 1

strata_status = c_int32
LOG_FN = CFUNCTYPE(None, c_int32, c_char_p, c_void_p)
PROGRESS_FN = CFUNCTYPE(None, c_int64, c_int64, c_char_p, c_void_p)


class Tensor(Structure):
    _fields_ = [("data", c_void_p), ("dtype", c_int32), ("ndim", c_int32),
                ("shape", POINTER(c_int64)), ("strides", POINTER(c_int64))]


class DeviceParams(Structure):
    _fields_ = [("struct_size", c_size_t), ("backend", c_int32)]


class DeviceProps(Structure):
    _fields_ = [("struct_size", c_size_t), ("backend", c_char * 16), ("kernels", c_char * 256)]


class ModelParams(Structure):
    _fields_ = [("struct_size", c_size_t), ("progress", PROGRESS_FN), ("progress_user_data", c_void_p),
                ("layer_lo", c_int64), ("layer_hi", c_int64), ("compute", c_char_p)]


class ModelProps(Structure):
    _fields_ = [("struct_size", c_size_t), ("arch", c_char * 32), ("vocab", c_int64), ("layers", c_int64),
                ("layer_lo", c_int64), ("layer_hi", c_int64), ("hidden_size", c_int64)]


class SessionParams(Structure):
    _fields_ = [("struct_size", c_size_t), ("max_context", c_int64)]


class PrefillParams(Structure):
    _fields_ = [("struct_size", c_size_t), ("all_logits", c_int32), ("step", c_int64),
                ("hidden_in", POINTER(c_float)), ("hidden_in_len", c_size_t),
                ("hidden_out", POINTER(c_float)), ("hidden_out_cap", c_size_t)]


class MLXLMParams(Structure):
    _fields_ = [("struct_size", c_size_t), ("format", c_char_p), ("dtype", c_char_p), ("model", c_char_p)]


class PromptCacheParams(Structure):
    _fields_ = [("struct_size", c_size_t), ("dir", c_char_p), ("bytes", c_int64), ("disk_bytes", c_int64),
                ("every", c_int64)]


class PromptCacheResult(Structure):
    _fields_ = [("struct_size", c_size_t), ("reused", c_int64), ("tokens", c_int64), ("source", c_int32),
                ("checkpoints", c_int64), ("checkpoint_bytes", c_int64), ("skipped", c_int64),
                ("restore_seconds", c_double), ("checkpoint_seconds", c_double), ("total_seconds", c_double),
                ("memory_checkpoints", c_int64), ("memory_bytes", c_int64), ("disk_checkpoints", c_int64),
                ("disk_bytes", c_int64)]


class AttentionParams(Structure):
    _fields_ = [("struct_size", c_size_t), ("pos0", c_int64), ("scale", c_float),
                ("sel_dense", POINTER(Tensor)), ("sel_offsets", POINTER(Tensor)), ("sel_tokens", POINTER(Tensor))]


class GDNParams(Structure):
    _fields_ = [("struct_size", c_size_t), ("head_map", c_int32), ("mode", c_int32), ("normalize_qk", c_int32)]


class MoEParams(Structure):
    _fields_ = [("struct_size", c_size_t), ("shared", POINTER(Tensor)), ("beta", POINTER(Tensor))]


_h = c_void_p  # every handle type is an opaque pointer
_T = POINTER(Tensor)

# name: (restype, argtypes), in the order of include/strata.h.
PROTOTYPES = {
    "strata_abi_version": (c_int32, []),
    "strata_version_string": (c_char_p, []),
    "strata_last_error": (c_size_t, [c_char_p, c_size_t]),
    "strata_status_name": (c_char_p, [strata_status]),
    "strata_set_log_callback": (strata_status, [LOG_FN, c_int32, c_void_p]),
    "strata_device_default_params": (DeviceParams, []),
    "strata_device_open": (strata_status, [POINTER(DeviceParams), POINTER(_h)]),
    "strata_device_free": (strata_status, [_h]),
    "strata_device_info": (strata_status, [_h, POINTER(DeviceProps)]),
    "strata_device_kernels": (strata_status, [_h, c_char_p, c_size_t, POINTER(c_size_t)]),
    "strata_model_default_params": (ModelParams, []),
    "strata_model_load": (strata_status, [_h, c_char_p, POINTER(ModelParams), POINTER(_h)]),
    "strata_model_free": (strata_status, [_h]),
    "strata_model_info": (strata_status, [_h, POINTER(ModelProps)]),
    "strata_model_describe": (strata_status, [_h, c_char_p, c_size_t, POINTER(c_size_t)]),
    "strata_model_compute": (strata_status, [_h, c_char_p, c_size_t, POINTER(c_size_t)]),
    "strata_session_default_params": (SessionParams, []),
    "strata_session_new": (strata_status, [_h, POINTER(SessionParams), POINTER(_h)]),
    "strata_session_free": (strata_status, [_h]),
    "strata_prefill_default_params": (PrefillParams, []),
    "strata_session_prefill": (strata_status, [_h, POINTER(c_int32), c_size_t, POINTER(PrefillParams),
                                               POINTER(c_float), c_size_t, POINTER(c_size_t)]),
    "strata_session_cancel": (strata_status, [_h]),
    "strata_session_position": (strata_status, [_h, POINTER(c_int64)]),
    "strata_session_reset": (strata_status, [_h]),
    "strata_session_snapshot": (strata_status, [_h, POINTER(_h)]),
    "strata_session_restore": (strata_status, [_h, _h]),
    "strata_snapshot_position": (strata_status, [_h, POINTER(c_int64)]),
    "strata_snapshot_free": (strata_status, [_h]),
    "strata_session_save": (strata_status, [_h, c_char_p]),
    "strata_session_load": (strata_status, [_h, c_char_p]),
    "strata_session_tokens": (strata_status, [_h, POINTER(c_int32), c_size_t, POINTER(c_size_t)]),
    "strata_mlx_lm_default_params": (MLXLMParams, []),
    "strata_session_save_mlx_lm": (strata_status, [_h, c_char_p, POINTER(MLXLMParams)]),
    "strata_prompt_cache_default_params": (PromptCacheParams, []),
    "strata_prompt_cache_new": (strata_status, [_h, POINTER(PromptCacheParams), POINTER(_h)]),
    "strata_prompt_cache_free": (strata_status, [_h]),
    "strata_prompt_cache_prefill": (strata_status, [_h, _h, POINTER(c_int32), c_size_t, POINTER(PrefillParams),
                                                    POINTER(c_float), c_size_t, POINTER(c_size_t),
                                                    POINTER(PromptCacheResult)]),
    "strata_prefill": (strata_status, [c_char_p, POINTER(c_int32), c_size_t, POINTER(PrefillParams),
                                       POINTER(c_float), c_size_t, POINTER(c_size_t)]),
    "strata_attention_default_params": (AttentionParams, []),
    "strata_attention": (strata_status, [_h, _T, _T, _T, _T, _T, POINTER(AttentionParams)]),
    "strata_gdn_default_params": (GDNParams, []),
    "strata_gdn_scan": (strata_status, [_h, _T, _T, _T, _T, _T, _T, _T, POINTER(GDNParams)]),
    "strata_moe_default_params": (MoEParams, []),
    "strata_moe_combine": (strata_status, [_h, _T, _T, _T, _T, POINTER(MoEParams)]),
    "strata_tokenizer_load": (strata_status, [c_char_p, POINTER(_h)]),
    "strata_tokenizer_free": (strata_status, [_h]),
    "strata_tokenizer_vocab_size": (strata_status, [_h, POINTER(c_int64)]),
    "strata_tokenizer_encode": (strata_status, [_h, c_char_p, c_size_t, POINTER(c_int32), c_size_t, POINTER(c_size_t)]),
    "strata_tokenizer_decode": (strata_status, [_h, POINTER(c_int32), c_size_t, c_char_p, c_size_t, POINTER(c_size_t)]),
}

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None


def library_name() -> str:
    """The platform's file name of the library: libstrata.so, libstrata.dylib or strata.dll."""
    if sys.platform == "darwin":
        return "libstrata.dylib"
    if sys.platform == "win32":
        return "strata.dll"
    return "libstrata.so"


def library_path() -> str:
    """Where the library is looked for: $STRATA_LIBRARY when set, else next to this package's
    files, where `pip install ./python` puts the one it builds."""
    env = os.environ.get("STRATA_LIBRARY")
    if env:
        return env
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), library_name())


def load(path: Optional[str] = None) -> ctypes.CDLL:
    """Loads libstrata (once per process) and returns the ctypes.CDLL with every function's
    argtypes and restype declared. Raises OSError when the library cannot be loaded and
    RuntimeError when its ABI version differs from this package's."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        path = path or library_path()
        if not os.path.exists(path):
            raise OSError(f"libstrata not found at {path}: install the package with `python3 -m pip install ./python` "
                          f"(it builds the library), or build it with `go build -buildmode=c-shared -o "
                          f"{library_name()} ./capi` and set STRATA_LIBRARY")
        lib = ctypes.CDLL(path)
        for name, (restype, argtypes) in PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        abi = lib.strata_abi_version()
        if abi != ABI_VERSION:
            raise RuntimeError(f"{path} has ABI version {abi}, this package speaks {ABI_VERSION}")
        _lib = lib
        return lib

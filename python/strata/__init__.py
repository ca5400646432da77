"""strata: prefill for hybrid Gated DeltaNet / attention MoE language models, from Python.

A thin ctypes layer over libstrata (include/strata.h); numpy arrays in and out.

    import strata
    dev = strata.Device()                       # "auto", "cpu", "metal" or "emu"
    model = strata.Model(dev, "path/to/checkpoint")
    tok = strata.Tokenizer("path/to/checkpoint")  # its tokenizer.json
    with model.session() as s:
        logits = s.prefill(tok.encode("Hello"))  # float32 [vocab]: the next-token logits
    print(tok.decode([int(logits.argmax())]))

`python3 -m pip install ./python` (from the repository; needs Go and a C compiler) builds
libstrata into the installed package, where it is found without any setting. $STRATA_LIBRARY,
when set, names another build to load instead (e.g. one made with
`go build -buildmode=c-shared -o libstrata.so ./capi`). Failures raise strata.Error
subclasses carrying the status code and the library's message.
"""

from ._lib import ABI_VERSION, library_path
from ._lib import load as library
from .api import DEFAULT_STEP, Device, Model, Session, Snapshot, prefill, set_log_callback, version
from .files import check_output, same_file, write_file
from .errors import (BackendError, BusyError, CancelledError, CapacityError, CheckpointError, DTypeError, Error,
                     InternalError, InvalidArgumentError, InvalidHandleError, OutOfMemoryError, ShapeError,
                     UnsupportedError, status_name)
from .ops import attention, gdn_scan, moe_combine
from .promptcache import DEFAULT_CHECKPOINT_EVERY, DEFAULT_PROMPT_CACHE_BYTES, PromptCache
from .tokenizer import Tokenizer

__all__ = [
    "ABI_VERSION", "library", "library_path", "version", "set_log_callback",
    "DEFAULT_STEP", "Device", "Model", "Session", "Snapshot", "prefill", "Tokenizer",
    "PromptCache", "DEFAULT_PROMPT_CACHE_BYTES", "DEFAULT_CHECKPOINT_EVERY",
    "attention", "gdn_scan", "moe_combine",
    "Error", "InvalidArgumentError", "InvalidHandleError", "ShapeError", "DTypeError", "CapacityError",
    "CheckpointError", "BackendError", "OutOfMemoryError", "CancelledError", "InternalError", "BusyError",
    "UnsupportedError",
    "status_name",
    "write_file", "check_output", "same_file",
]

"""strata: prefill for hybrid Gated DeltaNet / attention MoE language models, from Python.

A thin ctypes layer over libstrata (include/strata.h); numpy arrays in and out.

    import strata
    dev = strata.Device()                       # "auto", "cpu", "metal" or "emu"
    model = strata.Model(dev, "path/to/checkpoint")
    with model.session() as s:
        logits = s.prefill([1, 2, 3])           # float32 [vocab]: the next-token logits

The library is $STRATA_LIBRARY or libstrata.so / libstrata.dylib next to this package; build it
with `go build -buildmode=c-shared -o libstrata.so ./capi`. Failures raise strata.Error
subclasses carrying the status code and the library's message.
"""

from ._lib import ABI_VERSION, library_path
from ._lib import load as library
from .api import Device, Model, Session, Snapshot, prefill, set_log_callback, version
from .errors import (BackendError, BusyError, CancelledError, CapacityError, CheckpointError, DTypeError, Error,
                     InternalError, InvalidArgumentError, InvalidHandleError, OutOfMemoryError, ShapeError,
                     UnsupportedError, status_name)
from .ops import attention, gdn_scan, moe_combine

__all__ = [
    "ABI_VERSION", "library", "library_path", "version", "set_log_callback",
    "Device", "Model", "Session", "Snapshot", "prefill",
    "attention", "gdn_scan", "moe_combine",
    "Error", "InvalidArgumentError", "InvalidHandleError", "ShapeError", "DTypeError", "CapacityError",
    "CheckpointError", "BackendError", "OutOfMemoryError", "CancelledError", "InternalError", "BusyError",
    "UnsupportedError",
    "status_name",
]

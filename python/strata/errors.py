"""Exceptions raised for failed libstrata calls: one class per strata_status."""

from __future__ import annotations

import ctypes
from typing import Optional

from . import _lib


class Error(Exception):
    """A failed strata call. status is the strata_status code, message the library's message
    (strata_last_error on the calling thread) or the package's own check."""

    status: int = _lib.ERR_INTERNAL

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status
        self.message = message

    def __str__(self) -> str:
        return f"{status_name(self.status)}: {self.message}"


class InvalidArgumentError(Error, ValueError):
    status = _lib.ERR_INVALID_ARGUMENT


class InvalidHandleError(Error):
    status = _lib.ERR_INVALID_HANDLE


class ShapeError(Error, ValueError):
    status = _lib.ERR_SHAPE


class DTypeError(Error, TypeError):
    status = _lib.ERR_DTYPE


class CapacityError(Error):
    status = _lib.ERR_CAPACITY


class CheckpointError(Error):
    status = _lib.ERR_CHECKPOINT


class BackendError(Error):
    status = _lib.ERR_BACKEND


class OutOfMemoryError(Error, MemoryError):
    status = _lib.ERR_OUT_OF_MEMORY


class CancelledError(Error):
    status = _lib.ERR_CANCELLED


class InternalError(Error):
    status = _lib.ERR_INTERNAL


class BusyError(Error):
    status = _lib.ERR_BUSY


class UnsupportedError(Error):
    """A valid format, setting or shape strata does not run (named in the message)."""
    status = _lib.ERR_UNSUPPORTED


_BY_STATUS = {c.status: c for c in (InvalidArgumentError, InvalidHandleError, ShapeError, DTypeError,
                                    CapacityError, CheckpointError, BackendError, OutOfMemoryError,
                                    CancelledError, InternalError, BusyError, UnsupportedError)}

_NAMES = {
    _lib.OK: "STRATA_OK", _lib.ERR_INVALID_ARGUMENT: "STRATA_ERR_INVALID_ARGUMENT",
    _lib.ERR_INVALID_HANDLE: "STRATA_ERR_INVALID_HANDLE", _lib.ERR_SHAPE: "STRATA_ERR_SHAPE",
    _lib.ERR_DTYPE: "STRATA_ERR_DTYPE", _lib.ERR_CAPACITY: "STRATA_ERR_CAPACITY",
    _lib.ERR_CHECKPOINT: "STRATA_ERR_CHECKPOINT", _lib.ERR_BACKEND: "STRATA_ERR_BACKEND",
    _lib.ERR_OUT_OF_MEMORY: "STRATA_ERR_OUT_OF_MEMORY", _lib.ERR_CANCELLED: "STRATA_ERR_CANCELLED",
    _lib.ERR_INTERNAL: "STRATA_ERR_INTERNAL", _lib.ERR_BUSY: "STRATA_ERR_BUSY",
    _lib.ERR_UNSUPPORTED: "STRATA_ERR_UNSUPPORTED",
}


def status_name(status: int) -> str:
    return _NAMES.get(status, f"status {status}")


def from_status(status: int, message: str) -> Error:
    """The exception for a status code (Error itself for a code this package does not know)."""
    cls = _BY_STATUS.get(status)
    return cls(message) if cls else Error(message, status)


def check(status: int, lib: Optional[ctypes.CDLL] = None) -> None:
    """Raises the exception for a non-zero status with the calling thread's last error."""
    if status == _lib.OK:
        return
    lib = lib or _lib.load()
    n = lib.strata_last_error(None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    lib.strata_last_error(buf, n + 1)
    raise from_status(status, buf.value.decode("utf-8", "replace"))

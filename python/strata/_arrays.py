"""Arrays the op functions accept: numpy arrays, objects with __array_interface__, and CPU
DLPack tensors (__dlpack__), all viewed as numpy arrays without a copy."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from .errors import InvalidArgumentError

# DLPack device types (dlpack.h, DLDeviceType).
_DL_CPU = 1
_DL_DEVICES = {1: "CPU", 2: "CUDA", 3: "CUDA host", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI", 10: "ROCm",
               11: "ROCm host", 13: "CUDA managed", 14: "oneAPI"}


def as_array(obj: Any, name: str, writable: bool = False) -> np.ndarray:
    """obj as a numpy array sharing its memory.

    numpy arrays are returned as they are; objects with __array_interface__ go through
    np.asarray; objects with __dlpack__ must report CPU memory (__dlpack_device__) and go
    through np.from_dlpack. numpy (before 2.1) marks DLPack views read-only because the
    unversioned DLPack protocol cannot say; a producer that cannot export read-only memory
    (numpy itself refuses to) exports writable memory, so for outputs (writable) the view is
    made writable. Anything else raises InvalidArgumentError naming the argument.
    """
    if isinstance(obj, np.ndarray):
        return obj
    if hasattr(obj, "__array_interface__"):
        return np.asarray(obj)
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj, name, writable)
    raise InvalidArgumentError(f"{name}: expected a numpy array, an object with __array_interface__ or a CPU "
                               f"DLPack tensor (__dlpack__), got {type(obj).__name__}")


def _from_dlpack(obj: Any, name: str, writable: bool) -> np.ndarray:
    if not hasattr(obj, "__dlpack_device__"):
        raise InvalidArgumentError(f"{name}: {type(obj).__name__} has __dlpack__ but no __dlpack_device__")
    dev, _ = obj.__dlpack_device__()
    if dev != _DL_CPU:
        raise InvalidArgumentError(f"{name}: DLPack tensor on a {_DL_DEVICES.get(int(dev), f'type {int(dev)}')} device; "
                                   f"strata's op functions take CPU memory (copy it to the CPU first)")
    if not hasattr(np, "from_dlpack"):
        raise InvalidArgumentError(f"{name}: DLPack needs numpy >= 1.22 (this is {np.__version__})")
    arr = np.from_dlpack(obj)
    if not writable or arr.flags.writeable or arr.size == 0:
        return arr
    if not (arr.flags.c_contiguous and arr.flags.aligned):
        return arr  # the caller's checks reject it with the precise reason
    buf = (ctypes.c_char * arr.nbytes).from_address(arr.ctypes.data)
    view = np.frombuffer(buf, dtype=arr.dtype).reshape(arr.shape)
    buf._keep = arr  # the DLPack view (and through it the producer's memory) lives as long as view
    return view

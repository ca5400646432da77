"""strata's kernels on numpy arrays: attention, Gated DeltaNet scan, MoE combine.

Each op runs on the device passed as device= (a strata.Device: the CPU kernels on "cpu", the Metal
kernels on "metal" and on the emulator "emu"; device.info()["kernels"] then names the kernel
variants that ran). Without device= they run on a process-wide cpu device opened on first use.
Arrays may be numpy arrays, objects with __array_interface__, or CPU DLPack tensors
(__dlpack__, e.g. CPU torch tensors), used in place without a copy. Every array is checked
here before the call (dtype, shape against the op, C-contiguity, alignment, writability of
outputs) and again by the library. Outputs are returned as new arrays
unless passed in (out=...), in which case they are written in place.
"""

import ctypes
import math

import numpy as np

import threading

from . import _lib
from ._arrays import as_array
from .errors import DTypeError, InvalidArgumentError, ShapeError, check

_cpu = None
_cpu_lock = threading.Lock()


def _device(device):
    """The handle of device (a strata.Device), or of the shared cpu device when None."""
    global _cpu
    from .api import Device
    if device is None:
        with _cpu_lock:
            if _cpu is None:
                _cpu = Device("cpu")
            device = _cpu
    if not isinstance(device, Device):
        raise InvalidArgumentError(f"device must be a strata.Device, got {type(device).__name__}")
    return device._h

_DTYPES = {np.dtype(np.float32): _lib.F32, np.dtype(np.float16): _lib.F16,
           np.dtype(np.int32): _lib.I32, np.dtype(np.uint8): _lib.U8}


class _Desc:
    """A strata_tensor over a numpy array; holds the array and the shape buffer alive."""

    def __init__(self, arr, name, dtype, shape, writable=False):
        arr = as_array(arr, name, writable)
        if arr.dtype != np.dtype(dtype):
            raise DTypeError(f"{name}: dtype {arr.dtype}, want {np.dtype(dtype)}")
        if arr.ndim != len(shape):
            raise ShapeError(f"{name}: shape {arr.shape} has {arr.ndim} dims, want {len(shape)}")
        for i, (got, want) in enumerate(zip(arr.shape, shape)):
            if got < 1 or (want is not None and got != want):
                raise ShapeError(f"{name}: shape {arr.shape}, dim {i} must be {want if want is not None else '>= 1'}")
        if not arr.flags.c_contiguous:
            raise InvalidArgumentError(f"{name}: array is not C-contiguous (use np.ascontiguousarray)")
        if not arr.flags.aligned:
            raise InvalidArgumentError(f"{name}: array data is not aligned to its element size")
        if writable and not arr.flags.writeable:
            raise InvalidArgumentError(f"{name}: output array is read-only")
        if arr.size >= 2**31:
            raise ShapeError(f"{name}: {arr.size} elements exceed 32-bit offsets")
        self.arr = arr
        self.shape = (ctypes.c_int64 * arr.ndim)(*arr.shape)
        self.t = _lib.Tensor(arr.ctypes.data, _DTYPES[arr.dtype], arr.ndim, self.shape, None)

    def ptr(self):
        return ctypes.pointer(self.t)


def _ptr(d):
    return d.ptr() if d is not None else None


def _flag(v, name):
    """Refuses a flag that is not a bool (a string such as "no" would be taken as true)."""
    if not isinstance(v, (bool, np.bool_)):
        raise InvalidArgumentError(f"{name} must be a bool, got {v!r}")


def _out(out, name, shape):
    if out is None:
        return np.empty(shape, dtype=np.float32)
    return out


def attention(q, k, v, pos0=0, scale=None, selection=None, out=None, lse=None, return_lse=False, device=None):
    """Causal grouped-query attention of a prefill chunk (strata_attention).

    q [T, Hq, D] float32 at positions pos0..pos0+T-1; k, v [N, Hkv, D] the cache including the new
    tokens (N >= pos0+T); scale defaults to 1/sqrt(D). selection, for QSA-sparse rows, is
    (dense [T] uint8 or None, offsets [T+1] int32, tokens [n] int32). Returns o [T, Hq, D], and
    (o, lse [T, Hq]) with return_lse or when lse is passed. device: the strata.Device to run on
    (None: the shared cpu device).
    """
    lib = _lib.load()
    dev = _device(device)
    dq = _Desc(q, "q", np.float32, (None, None, None))
    T, Hq, D = dq.arr.shape
    dk = _Desc(k, "k", np.float32, (None, None, D))
    N, Hkv, _ = dk.arr.shape
    dv = _Desc(v, "v", np.float32, (N, Hkv, D))
    if isinstance(pos0, (bool, np.bool_)) or not isinstance(pos0, (int, np.integer)):
        raise InvalidArgumentError(f"pos0 must be an integer position, got {pos0!r}")
    if pos0 < 0 or pos0 + T > N:
        raise ShapeError(f"pos0 {pos0} with T {T} needs pos0+T <= N = {N} cache rows")
    if scale is not None and (isinstance(scale, (bool, np.bool_)) or not isinstance(scale, (int, float, np.integer, np.floating))):
        raise InvalidArgumentError(f"scale must be a number or None, got {scale!r}")
    if scale is not None and scale == 0:
        raise InvalidArgumentError("scale 0 would zero every score: give None for the default 1/sqrt(D)")
    if scale is not None and math.isfinite(float(scale)):
        with np.errstate(over="ignore", under="ignore"):
            s32 = np.float32(scale)
        if s32 == 0 or not np.isfinite(s32):
            raise InvalidArgumentError(f"scale {scale!r} is outside float32's range (it would be {float(s32)!r}, and the library takes a float32): give a scale whose float32 is nonzero and finite, or None for 1/sqrt(D)")
    _flag(return_lse, "return_lse")
    if Hq % Hkv:
        raise InvalidArgumentError(f"Hkv {Hkv} does not divide Hq {Hq}")
    o = _out(out, "out", (T, Hq, D))
    do = _Desc(o, "out", np.float32, (T, Hq, D), writable=True)
    want_lse = return_lse or lse is not None
    l = _out(lse, "lse", (T, Hq)) if want_lse else None
    dl = _Desc(l, "lse", np.float32, (T, Hq), writable=True) if want_lse else None
    p = lib.strata_attention_default_params()
    p.pos0 = int(pos0)
    p.scale = 0.0 if scale is None else float(scale)
    keep = []
    if selection is not None:
        if not isinstance(selection, (tuple, list)) or len(selection) != 3:
            raise InvalidArgumentError("selection must be a tuple (dense, offsets, tokens): dense [T] bool/int, offsets [T+1] int32, tokens int32")
        dense, offsets, tokens = selection
        doff = _Desc(offsets, "sel_offsets", np.int32, (T + 1,))
        dtok = _Desc(tokens, "sel_tokens", np.int32, (None,))
        p.sel_offsets, p.sel_tokens = doff.ptr(), dtok.ptr()
        keep += [doff, dtok]
        if dense is not None:
            dd = _Desc(dense, "sel_dense", np.uint8, (T,))
            p.sel_dense = dd.ptr()
            keep.append(dd)
    check(lib.strata_attention(dev, dq.ptr(), dk.ptr(), dv.ptr(), do.ptr(), _ptr(dl), ctypes.byref(p)), lib)
    return (o, l) if want_lse else o


def gdn_scan(q, k, v, g, beta, state, normalize_qk=False, head_map="grouped", mode="chunked", out=None, device=None):
    """The gated delta rule over T tokens (strata_gdn_scan).

    q, k [T, Hk, Dk] (already l2-normalised and q scaled by Dk^-1/2, unless normalize_qk);
    v [T, Hv, Dv]; g (log decay) and beta [T, Hv]; state [Hv, Dk, Dv] float32 holds the initial
    state and is updated in place to the final one. head_map "grouped" (value head h reads qk head
    h // (Hv/Hk)) or "tiled" (h % Hk); mode "chunked" or "recurrent". Returns o [T, Hv, Dv].
    device: the strata.Device to run on (None: the shared cpu device).
    """
    lib = _lib.load()
    maps = {"grouped": _lib.GDN_GROUPED, "tiled": _lib.GDN_TILED}
    modes = {"chunked": _lib.GDN_CHUNKED, "recurrent": _lib.GDN_RECURRENT}
    _flag(normalize_qk, "normalize_qk")
    if not isinstance(head_map, str) or not isinstance(mode, str) or head_map not in maps or mode not in modes:
        raise InvalidArgumentError(f"head_map {head_map!r} / mode {mode!r}: want {sorted(maps)} / {sorted(modes)}")
    dev = _device(device)
    dq = _Desc(q, "q", np.float32, (None, None, None))
    T, Hk, Dk = dq.arr.shape
    dk = _Desc(k, "k", np.float32, (T, Hk, Dk))
    dv = _Desc(v, "v", np.float32, (T, None, None))
    _, Hv, Dv = dv.arr.shape
    if Hv % Hk:
        raise InvalidArgumentError(f"Hv {Hv} is not a multiple of Hk {Hk}")
    dg = _Desc(g, "g", np.float32, (T, Hv))
    db = _Desc(beta, "beta", np.float32, (T, Hv))
    ds = _Desc(state, "state", np.float32, (Hv, Dk, Dv), writable=True)
    o = _out(out, "out", (T, Hv, Dv))
    do = _Desc(o, "out", np.float32, (T, Hv, Dv), writable=True)
    p = lib.strata_gdn_default_params()
    p.head_map, p.mode, p.normalize_qk = maps[head_map], modes[mode], 1 if normalize_qk else 0
    check(lib.strata_gdn_scan(dev, dq.ptr(), dk.ptr(), dv.ptr(), dg.ptr(), db.ptr(), ds.ptr(), do.ptr(), ctypes.byref(p)), lib)
    return o


def moe_combine(ye, rk, w, shared=None, out=None, residual=None, beta=None, device=None):
    """Combines expert outputs per token (strata_moe_combine):
    u[t] = sum over slots j with rk[t, j] >= 0 of w[t, j] * ye[rk[t, j]] (+ shared[t]).

    ye [rows, D] float32; rk [T, K] int32 (-1 = empty slot); w [T, K]; shared [T, D] optional.
    Without residual, returns u [T, D] (in out when given). With residual H [T, S, D] and beta
    [T, S], updates H in place, H[t, s] += beta[t, s] * u[t] (the fused GatedResidual write), and
    returns it. device: the strata.Device to run on (None: the shared cpu device).
    """
    lib = _lib.load()
    dev = _device(device)
    dye = _Desc(ye, "ye", np.float32, (None, None))
    rows, D = dye.arr.shape
    drk = _Desc(rk, "rk", np.int32, (None, None))
    T, K = drk.arr.shape
    if drk.arr.size and (drk.arr.min() < -1 or drk.arr.max() >= rows):
        raise InvalidArgumentError(f"rk values must lie in [-1, {rows}), got {drk.arr.min()}..{drk.arr.max()}")
    dw = _Desc(w, "w", np.float32, (T, K))
    p = lib.strata_moe_default_params()
    keep = []
    if shared is not None:
        dsh = _Desc(shared, "shared", np.float32, (T, D))
        p.shared = dsh.ptr()
        keep.append(dsh)
    if (residual is None) != (beta is None):
        raise InvalidArgumentError("residual and beta go together (the fused GatedResidual write)")
    if residual is not None and out is not None:
        raise InvalidArgumentError("out is for the plain combine; with residual the result is written into residual in place")
    if residual is not None:
        dbeta = _Desc(beta, "beta", np.float32, (T, None))
        S = dbeta.arr.shape[1]
        dout = _Desc(residual, "residual", np.float32, (T, S, D), writable=True)
        p.beta = dbeta.ptr()
        keep.append(dbeta)
        result = residual
    else:
        result = _out(out, "out", (T, D))
        dout = _Desc(result, "out", np.float32, (T, D), writable=True)
    check(lib.strata_moe_combine(dev, dye.ptr(), drk.ptr(), dw.ptr(), dout.ptr(), ctypes.byref(p)), lib)
    return result


def default_scale(D):
    """The attention score scale used when scale is None: 1/sqrt(D)."""
    return 1.0 / math.sqrt(D)

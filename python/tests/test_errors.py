import ctypes
import os
import re
import shutil
import subprocess
import threading
from ctypes import POINTER, byref, c_float, c_int32, c_int64, c_void_p

import numpy as np
import pytest

from helpers import ROOT, TINY_Q4


def lib_error(strata, fn, *args):
    """Calls a raw library function expecting failure; returns (status, message)."""
    lib = strata.library()
    st = getattr(lib, fn)(*args)
    n = lib.strata_last_error(None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    lib.strata_last_error(buf, n + 1)
    return st, buf.value.decode()


def test_status_codes_match_header(strata):
    from strata import _lib
    with open(os.path.join(ROOT, "include", "strata.h")) as f:
        header = f.read()
    defs = dict(re.findall(r"#define STRATA_(OK|ERR_\w+)\s+(\d+)", header))
    assert len(defs) == 13
    for name, value in defs.items():
        assert getattr(_lib, name) == int(value), name
    lib = strata.library()
    for name, value in defs.items():
        assert lib.strata_status_name(int(value)).decode() == "STRATA_" + name
    assert int(re.search(r"#define STRATA_ABI_VERSION (\d+)", header).group(1)) == strata.ABI_VERSION
    assert int(re.search(r"#define STRATA_DEFAULT_PROMPT_CACHE_BYTES (\d+)LL", header).group(1)) == _lib.DEFAULT_PROMPT_CACHE_BYTES
    assert int(re.search(r"#define STRATA_DEFAULT_CHECKPOINT_EVERY (\d+)", header).group(1)) == _lib.DEFAULT_CHECKPOINT_EVERY
    sources = {int(v): k.lower() for k, v in re.findall(r"#define STRATA_CACHE_(\w+)\s+(\d+)", header)}
    assert {k: v if v != "miss" else "" for k, v in sources.items()} == _lib.CACHE_SOURCES


def test_struct_layouts_match_c(strata, tmp_path):
    """ctypes structures have the sizes and field offsets the C compiler gives them."""
    from strata import _lib
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to compare struct layouts with")
    structs = {"strata_tensor": _lib.Tensor, "strata_device_params": _lib.DeviceParams,
               "strata_device_props": _lib.DeviceProps, "strata_model_params": _lib.ModelParams,
               "strata_model_props": _lib.ModelProps, "strata_session_params": _lib.SessionParams,
               "strata_prefill_params": _lib.PrefillParams, "strata_attention_params": _lib.AttentionParams,
               "strata_gdn_params": _lib.GDNParams, "strata_moe_params": _lib.MoEParams,
               "strata_prompt_cache_params": _lib.PromptCacheParams,
               "strata_prompt_cache_result": _lib.PromptCacheResult}
    lines = []
    for cname, cls in structs.items():
        lines.append(f'printf("{cname} %zu\\n", sizeof({cname}));')
        for f, _ in cls._fields_:
            lines.append(f'printf("{cname}.{f} %zu\\n", offsetof({cname}, {f}));')
    src = tmp_path / "layout.c"
    src.write_text('#include <stddef.h>\n#include <stdio.h>\n#include "strata.h"\nint main(void) {\n' +
                   "\n".join(lines) + "\nreturn 0;\n}\n")
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-I", os.path.join(ROOT, "include"), str(src), "-o", str(exe)], check=True)
    got = dict(line.split() for line in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines())
    for cname, cls in structs.items():
        assert int(got[cname]) == ctypes.sizeof(cls), cname
        for f, _ in cls._fields_:
            assert int(got[f"{cname}.{f}"]) == getattr(cls, f).offset, f"{cname}.{f}"


def test_null_pointers(strata, device, model):
    from strata import _lib
    lib = strata.library()
    assert lib.strata_device_open(None, None) == _lib.ERR_INVALID_ARGUMENT
    h = c_void_p()
    st, msg = lib_error(strata, "strata_model_load", device.handle, None, None, byref(h))
    assert st == _lib.ERR_INVALID_ARGUMENT and "checkpoint_dir or out is NULL" in msg
    st, msg = lib_error(strata, "strata_model_load", model.handle, TINY_Q4.encode(), None, byref(h))
    assert st == _lib.ERR_INVALID_HANDLE and "not a strata_device" in msg  # a model handle where a device goes
    st, msg = lib_error(strata, "strata_session_position", None, byref(c_int64()))
    assert st == _lib.ERR_INVALID_HANDLE and "NULL strata_session" in msg
    with model.session(16) as s:
        st, msg = lib_error(strata, "strata_session_prefill", s.handle, None, 3, None, None, 0, None)
        assert st == _lib.ERR_INVALID_ARGUMENT and "NULL" in msg
        st, msg = lib_error(strata, "strata_session_position", s.handle, None)
        assert st == _lib.ERR_INVALID_ARGUMENT and "out is NULL" in msg
    q = np.zeros((2, 2, 4), np.float32)
    with pytest.raises(strata.InvalidArgumentError):
        strata.attention(q, None, q)
    st, msg = lib_error(strata, "strata_attention", device.handle, None, None, None, None, None, None)
    assert st == _lib.ERR_INVALID_ARGUMENT and "q: NULL" in msg
    # The op entry points take the device first: a missing or wrong handle is refused.
    kv = np.zeros((2, 1, 4), np.float32)
    shape, kshape = (c_int64 * 3)(2, 2, 4), (c_int64 * 3)(2, 1, 4)
    o = np.zeros((2, 2, 4), np.float32)
    tq, tk = _lib.Tensor(q.ctypes.data, _lib.F32, 3, shape, None), _lib.Tensor(kv.ctypes.data, _lib.F32, 3, kshape, None)
    to = _lib.Tensor(o.ctypes.data, _lib.F32, 3, shape, None)
    st, msg = lib_error(strata, "strata_attention", None, byref(tq), byref(tk), byref(tk), byref(to), None, None)
    assert st == _lib.ERR_INVALID_HANDLE and "NULL strata_device" in msg
    st, msg = lib_error(strata, "strata_attention", model.handle, byref(tq), byref(tk), byref(tk), byref(to), None, None)
    assert st == _lib.ERR_INVALID_HANDLE and "not a strata_device" in msg
    with pytest.raises(strata.InvalidArgumentError):
        strata.attention(q, kv, kv, device="cpu")


def test_exceptions_carry_status_and_message(strata, device):
    from strata import _lib
    with pytest.raises(strata.CheckpointError) as e:
        strata.Model(device, "/nonexistent/checkpoint")
    assert e.value.status == _lib.ERR_CHECKPOINT
    assert "/nonexistent/checkpoint" in e.value.message and "STRATA_ERR_CHECKPOINT" in str(e.value)
    with pytest.raises(strata.BackendError):
        strata.Device("metal")


def test_wrong_dtype_and_shape(strata, device, model):
    from strata import _lib
    q = np.zeros((3, 2, 4), np.float32)
    kv = np.zeros((3, 1, 4), np.float32)
    with pytest.raises(strata.DTypeError):
        strata.attention(q.astype(np.float64), kv, kv)
    with pytest.raises(strata.DTypeError):
        strata.moe_combine(np.zeros((3, 4), np.float32), np.zeros((2, 2), np.int64), np.zeros((2, 2), np.float32))
    with pytest.raises(strata.ShapeError):
        strata.attention(q, kv, np.zeros((3, 1, 5), np.float32))
    with pytest.raises(strata.ShapeError):
        strata.attention(q, kv, kv, pos0=1)  # the cache holds 3 rows, pos0 + T = 4
    for bad in (0.5, True, "0", None):
        with pytest.raises(strata.InvalidArgumentError, match="pos0 must be an integer"):
            strata.attention(q, kv, kv, pos0=bad)
    with pytest.raises(strata.InvalidArgumentError, match="scale must be a number"):
        strata.attention(q, kv, kv, scale="1")
    with pytest.raises(strata.InvalidArgumentError):
        strata.attention(np.zeros((3, 4, 2), np.float32).transpose(0, 2, 1), kv, kv)  # not contiguous
    ro = np.zeros((3, 2, 4), np.float32)
    ro.flags.writeable = False
    with pytest.raises(strata.InvalidArgumentError):
        strata.attention(q, kv, kv, out=ro)
    # The library checks descriptors itself too: bypass the package's checks.
    shape = (c_int64 * 3)(3, 2, 4)
    qi = np.zeros((3, 2, 4), np.int32)
    tq = _lib.Tensor(qi.ctypes.data, _lib.I32, 3, shape, None)
    tk = _lib.Tensor(kv.ctypes.data, _lib.F32, 3, (c_int64 * 3)(3, 1, 4), None)
    o = np.zeros((3, 2, 4), np.float32)
    to = _lib.Tensor(o.ctypes.data, _lib.F32, 3, (c_int64 * 3)(3, 2, 5), None)
    st, msg = lib_error(strata, "strata_attention", device.handle, byref(tq), byref(tk), byref(tk), byref(to), None, None)
    assert st == _lib.ERR_DTYPE and "q: dtype i32" in msg
    tq = _lib.Tensor(q.ctypes.data, _lib.F32, 3, shape, None)
    st, msg = lib_error(strata, "strata_attention", device.handle, byref(tq), byref(tk), byref(tk), byref(to), None, None)
    assert st == _lib.ERR_SHAPE and "o: shape" in msg
    with model.session(8) as s:
        with pytest.raises(strata.InvalidArgumentError):
            s.prefill([1, 512])
        with pytest.raises(strata.InvalidArgumentError):
            s.prefill([])
        with pytest.raises(strata.InvalidArgumentError):
            s.prefill([1.5, 2.0])
        with pytest.raises(strata.CapacityError):
            s.prefill(np.arange(9))
        with pytest.raises(strata.InvalidArgumentError, match="strata.Tokenizer"):
            s.prefill("hello")  # text, not ids
        with pytest.raises(strata.InvalidArgumentError, match="got NoneType"):
            s.prefill(None)
        with pytest.raises(strata.InvalidArgumentError, match="all_logits must be a bool"):
            s.prefill([1, 2], all_logits="yes")
        assert s.position == 0


def test_op_arguments_of_the_wrong_kind(strata):
    """Flags must be bools, scale a nonzero number, head_map a name, selection a triple, and out
    is not taken together with residual: each refused with a strata error, not used as given."""
    q = np.zeros((4, 2, 4), np.float32)
    kv = np.zeros((4, 1, 4), np.float32)
    with pytest.raises(strata.InvalidArgumentError, match="scale 0"):
        strata.attention(q, kv, kv, scale=0.0)
    for scale in (1e-50, 1e50):  # nonzero and finite in float64, 0 or inf as the float32 the library takes
        with pytest.raises(strata.InvalidArgumentError, match="outside float32's range"):
            strata.attention(q, kv, kv, scale=scale)
    with pytest.raises(strata.InvalidArgumentError, match="return_lse must be a bool"):
        strata.attention(q, kv, kv, return_lse="no")
    for sel in (5, (None, None)):
        with pytest.raises(strata.InvalidArgumentError, match="selection must be a tuple"):
            strata.attention(q, kv, kv, selection=sel)
    T, Hk, Hv, Dk, Dv = 3, 1, 2, 4, 4
    args = (np.zeros((T, Hk, Dk), np.float32), np.zeros((T, Hk, Dk), np.float32), np.zeros((T, Hv, Dv), np.float32),
            np.zeros((T, Hv), np.float32), np.zeros((T, Hv), np.float32), np.zeros((Hv, Dk, Dv), np.float32))
    with pytest.raises(strata.InvalidArgumentError, match="normalize_qk must be a bool"):
        strata.gdn_scan(*args, normalize_qk="no")
    with pytest.raises(strata.InvalidArgumentError, match="head_map"):
        strata.gdn_scan(*args, head_map=["grouped"])
    ye = np.zeros((2, 4), np.float32)
    rk = np.zeros((1, 2), np.int32)
    w = np.full((1, 2), 0.5, np.float32)
    with pytest.raises(strata.InvalidArgumentError, match="with residual"):
        strata.moe_combine(ye, rk, w, out=np.zeros((1, 4), np.float32), residual=np.zeros((1, 1, 4), np.float32),
                           beta=np.zeros((1, 1), np.float32))


def test_output_buffer_too_small(strata, model):
    from strata import _lib
    lib = strata.library()
    toks = np.asarray([1, 2, 3], np.int32)
    out = np.zeros(512 * 3, np.float32)
    with model.session(8) as s:
        st, msg = lib_error(strata, "strata_session_prefill", s.handle, toks.ctypes.data_as(POINTER(c_int32)), 3,
                            None, out.ctypes.data_as(POINTER(c_float)), 511, None)
        assert st == _lib.ERR_SHAPE and "logits_cap 511" in msg
        p = lib.strata_prefill_default_params()
        p.all_logits = 1
        st, msg = lib_error(strata, "strata_session_prefill", s.handle, toks.ctypes.data_as(POINTER(c_int32)), 3,
                            byref(p), out.ctypes.data_as(POINTER(c_float)), 512 * 3 - 1, None)
        assert st == _lib.ERR_SHAPE and "1536 needed" in msg
        assert s.position == 0 and not out.any()


def test_freed_handles_and_double_free(strata, device):
    m = strata.Model(device, TINY_Q4)
    s = m.session(16)
    snap = s.snapshot()
    snap.close()
    with pytest.raises(strata.InvalidHandleError, match="already freed"):
        s.restore(snap)
    s.close()
    with pytest.raises(strata.InvalidHandleError, match="already freed"):
        s.prefill([1])
    m.close()
    with pytest.raises(strata.InvalidHandleError):
        m.session()
    lib = strata.library()
    for fn, h in [("strata_session_free", s.handle), ("strata_model_free", m.handle), ("strata_snapshot_free", snap.handle)]:
        st, msg = lib_error(strata, fn, h)
        assert st == strata.InvalidHandleError.status and "already freed" in msg, fn
    assert lib.strata_session_free(None) == 0
    st, msg = lib_error(strata, "strata_session_reset", 0x7FFF0003)
    assert st == strata.InvalidHandleError.status and "never issued" in msg


def test_one_session_from_two_threads(strata, model, q4_goldens):
    ids = q4_goldens["a.input_ids"]
    with model.session(256) as s:
        started = threading.Event()
        result = {}

        def run():
            started.set()
            result["logits"] = s.prefill(ids, all_logits=True)

        t = threading.Thread(target=run)
        t.start()
        started.wait()
        busy = 0
        while t.is_alive():
            try:
                s.position
            except strata.BusyError as e:
                busy += 1
                assert e.status == strata.BusyError.status and "another thread" in e.message
        t.join()
        assert "logits" in result and s.position == 96
        assert busy > 0


def test_many_threads_share_device_and_model(strata, model):
    prompt = np.asarray([7, 300, 11, 511, 2, 99], np.int32)
    with model.session(16) as s:
        ref = s.prefill(prompt)
    errors = []

    def worker():
        try:
            for _ in range(3):
                with model.session(16) as s:
                    if not np.array_equal(s.prefill(prompt), ref):
                        errors.append("logits differ")
        except Exception as e:  # collected and reported by the main thread
            errors.append(repr(e))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_log_callback(strata):
    got = []
    strata.set_log_callback(lambda lvl, msg: got.append((lvl, msg)), level=1)
    try:
        d = strata.Device("auto")
        d.close()
    finally:
        strata.set_log_callback(None)
    assert any("backend" in m for _, m in got)
    n = len(got)
    strata.Device("cpu").close()
    assert len(got) == n  # silent again

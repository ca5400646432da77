"""The op functions take numpy arrays, objects with __array_interface__ and CPU DLPack tensors."""

import numpy as np
import pytest


class Interface:
    """Exposes an array only through __array_interface__."""

    def __init__(self, a):
        self._a = a
        self.__array_interface__ = a.__array_interface__


class DLPack:
    """Exposes an array only through the DLPack protocol, on the device given."""

    def __init__(self, a, device=(1, 0)):
        self._a, self._device = a, device

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._device


def moe_inputs():
    rng = np.random.default_rng(3)
    ye = rng.standard_normal((12, 8), dtype=np.float32)
    rk = np.array([[0, 3, -1], [5, 11, 2]], dtype=np.int32)
    w = rng.standard_normal((2, 3), dtype=np.float32)
    return ye, rk, w


@pytest.mark.parametrize("wrap", [Interface, DLPack])
def test_inputs_and_outputs(strata, wrap):
    ye, rk, w = moe_inputs()
    want = strata.moe_combine(ye, rk, w)
    out = np.zeros_like(want)
    got = strata.moe_combine(wrap(ye), wrap(rk), wrap(w), out=wrap(out))
    assert np.array_equal(out, want)  # written in place, through the wrapper
    assert isinstance(got, wrap)


def test_dlpack_state_in_place(strata):
    rng = np.random.default_rng(5)
    T, Hk, Hv, D = 3, 1, 2, 8
    q, k = (rng.standard_normal((T, Hk, D), dtype=np.float32) for _ in range(2))
    v = rng.standard_normal((T, Hv, D), dtype=np.float32)
    g = -np.abs(rng.standard_normal((T, Hv), dtype=np.float32))
    beta = rng.uniform(0, 1, (T, Hv)).astype(np.float32)
    s0 = rng.standard_normal((Hv, D, D), dtype=np.float32)
    s_np, s_dl = s0.copy(), s0.copy()
    o_np = strata.gdn_scan(q, k, v, g, beta, s_np, normalize_qk=True)
    o_dl = strata.gdn_scan(*(DLPack(a) for a in (q, k, v, g, beta, s_dl)), normalize_qk=True)
    assert np.array_equal(o_np, o_dl)
    assert np.array_equal(s_np, s_dl) and not np.array_equal(s0, s_dl)


def test_rejected(strata):
    ye, rk, w = moe_inputs()
    with pytest.raises(strata.InvalidArgumentError, match="CUDA device"):
        strata.moe_combine(DLPack(ye, device=(2, 0)), rk, w)
    with pytest.raises(strata.InvalidArgumentError, match="ye: expected a numpy array"):
        strata.moe_combine(ye.tolist(), rk, w)
    with pytest.raises(strata.InvalidArgumentError, match="read-only"):
        ro = np.zeros((2, 8), np.float32)
        ro.flags.writeable = False
        strata.moe_combine(ye, rk, w, out=Interface(ro))

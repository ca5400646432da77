import os

import numpy as np
import pytest

from helpers import GOLDENS, read_safetensors, rel_err

TOL = 1e-4  # op outputs, relative to max |x|


@pytest.fixture(scope="module")
def attn_moe():
    return read_safetensors(os.path.join(GOLDENS, "op_attn_moe.safetensors"))


@pytest.fixture(scope="module")
def gdn():
    return read_safetensors(os.path.join(GOLDENS, "op_gdn.safetensors"))


def test_attention_goldens(strata, attn_moe, op_device):
    g = attn_moe
    o, lse = strata.attention(g["attn.q"], g["attn.k"], g["attn.v"], pos0=200, return_lse=True, device=op_device)
    assert o.shape == (96, 24, 256) and lse.shape == (96, 24)
    assert rel_err(o, g["attn.o"]) <= TOL
    assert rel_err(lse, g["attn.lse"]) <= TOL
    # An explicit scale of 1/16 is the default for D = 256; outputs may be passed in.
    out = np.zeros_like(o)
    strata.attention(g["attn.q"], g["attn.k"], g["attn.v"], pos0=200, scale=1 / 16, out=out, device=op_device)
    assert np.array_equal(out, o)


def reference_attention(q, k, v, pos0, keys_of_row):
    """float64 attention over the listed keys of each row (GQA: head h reads kv head h // HPG)."""
    T, Hq, D = q.shape
    hpg = Hq // k.shape[1]
    o = np.zeros((T, Hq, D))
    for t in range(T):
        keys = keys_of_row(t)
        for h in range(Hq):
            s = k[keys, h // hpg].astype(np.float64) @ q[t, h].astype(np.float64) / np.sqrt(D)
            p = np.exp(s - s.max())
            o[t, h] = (p / p.sum()) @ v[keys, h // hpg].astype(np.float64)
    return o


def test_attention_selection_against_float64(strata, op_device):
    rng = np.random.default_rng(7)
    T, Hq, Hkv, D, pos0 = 9, 4, 2, 16, 5
    q = rng.standard_normal((T, Hq, D), dtype=np.float32)
    k = rng.standard_normal((pos0 + T, Hkv, D), dtype=np.float32)
    v = rng.standard_normal((pos0 + T, Hkv, D), dtype=np.float32)
    dense = np.zeros(T, np.uint8)
    dense[::3] = 1
    lists = []
    for t in range(T):
        if dense[t]:
            lists.append([])
        else:  # a random strictly ascending subset of 0..pos0+t that keeps the diagonal
            keep = sorted(set(rng.choice(pos0 + t, size=(pos0 + t) // 2, replace=False).tolist()) | {pos0 + t})
            lists.append(keep)
    offsets = np.cumsum([0] + [len(x) for x in lists]).astype(np.int32)
    tokens = np.asarray([x for row in lists for x in row], np.int32)
    o = strata.attention(q, k, v, pos0=pos0, selection=(dense, offsets, tokens), device=op_device)
    ref = reference_attention(q, k, v, pos0, lambda t: list(range(pos0 + t + 1)) if dense[t] else lists[t])
    assert rel_err(o, ref) <= 1e-5


@pytest.mark.parametrize("mode", ["chunked", "recurrent"])
def test_gdn_goldens(strata, gdn, mode, op_device):
    g = gdn
    q, k = g["q"].copy(), g["k"].copy()
    state = g["state_in"].copy()
    o = strata.gdn_scan(q, k, g["v"], g["g"], g["beta"], state, normalize_qk=True, mode=mode, device=op_device)
    assert np.array_equal(q, g["q"]) and np.array_equal(k, g["k"])  # normalize_qk works on copies
    assert rel_err(o, g["o"]) <= TOL
    assert rel_err(state, g["state_out"]) <= TOL


def test_gdn_tiled_equals_permuted_grouped(strata, op_device):
    # Tiled (value head h reads qk head h % Hk) equals Grouped after permuting the value heads.
    rng = np.random.default_rng(3)
    T, Hk, r, Dk, Dv = 5, 2, 3, 8, 4
    Hv = Hk * r
    q = rng.standard_normal((T, Hk, Dk), dtype=np.float32)
    k = rng.standard_normal((T, Hk, Dk), dtype=np.float32)
    v = rng.standard_normal((T, Hv, Dv), dtype=np.float32)
    gg = -rng.random((T, Hv), dtype=np.float32)
    beta = rng.random((T, Hv), dtype=np.float32)
    st_t = np.zeros((Hv, Dk, Dv), np.float32)
    o_t = strata.gdn_scan(q, k, v, gg, beta, st_t, normalize_qk=True, head_map="tiled", mode="recurrent", device=op_device)
    perm = np.asarray([m * Hk + j for j in range(Hk) for m in range(r)])  # grouped slot -> tiled head
    st_g = np.zeros((Hv, Dk, Dv), np.float32)
    o_g = strata.gdn_scan(q, k, np.ascontiguousarray(v[:, perm]), np.ascontiguousarray(gg[:, perm]),
                          np.ascontiguousarray(beta[:, perm]), st_g, normalize_qk=True, mode="recurrent", device=op_device)
    assert np.array_equal(o_g, o_t[:, perm]) and np.array_equal(st_g, st_t[perm])


def test_moe_combine_goldens(strata, attn_moe, op_device):
    g = attn_moe
    out = strata.moe_combine(g["moe.ye"], g["moe.rk"], g["moe.w"], device=op_device)
    assert rel_err(out, g["moe.out"]) <= TOL
    # Fused GatedResidual write against a float64 evaluation from the golden combine.
    T, D = out.shape
    S = 4
    rng = np.random.default_rng(1)
    H = rng.standard_normal((T, S, D), dtype=np.float32)
    H0 = H.copy()
    beta = rng.random((T, S), dtype=np.float32) * 2
    shared = rng.standard_normal((T, D), dtype=np.float32)
    strata.moe_combine(g["moe.ye"], g["moe.rk"], g["moe.w"], shared=shared, residual=H, beta=beta, device=op_device)
    u = g["moe.out"].astype(np.float64) + shared
    ref = H0 + beta[:, :, None].astype(np.float64) * u[:, None, :]
    assert rel_err(H, ref) <= TOL


def test_kernel_report_names_the_variants(strata, op_device):
    """After the ops above, the device's kernel report names what ran: the Metal kernel variants
    on emu, the CPU kernel sets on cpu."""
    kernels = op_device.info()["kernels"]
    if op_device.backend == "emu":
        for name in ("qsa_flash_f32_hpg12", "_sparse", "gdn_scan_f32", "gdn_scan_chunk", "moe_comb", "gr_apply_moec"):
            assert name in kernels, kernels
    else:
        assert kernels.startswith("cpu (GOMAXPROCS="), kernels

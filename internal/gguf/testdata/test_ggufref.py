"""Checks of ggufref.py (numpy + pytest; `go` on the PATH for the source checkpoints):

    python3 -m pytest -q internal/gguf/testdata/test_ggufref.py

- the BF16 fixtures, read by ggufref and with llama.cpp's converter transforms undone, equal their
  source checkpoints (modelgen presets, regenerated here and checked by sha256) bit for bit in
  bfloat16, every tensor, and leaving out the Qwen3.5 V-head reordering or the Qwen3-Next qkvz
  regrouping breaks that (the fixtures exercise both);
- the block decoders on hand-made blocks whose values are known from the block layouts, and the
  reader's refusals of damaged files;
- goldens.safetensors and fixtures.json against the fixtures (names, sha256, recomputed goldens);
- the header-only published layouts: they parse, end after their header, and are what
  published/make_published.py writes.
"""
import hashlib
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))

import ggufref  # noqa: E402
import mlxlm_ref  # noqa: E402  (its safetensors reader and bf16 rounding)

# preset -> (fixture stem, sha256 of the generated model.safetensors)
SOURCES = {
    "qwen35-gguf": ("qwen35", "d2335b251a4f8ced7293e5119a1bd225a16e5a75f3bb8e6fb794c553faef5aec"),
    "qwen35moe-gguf": ("qwen35moe", "8248bfd00a503ba1cb8f035001fb3297dee707a63c5725e553608f328d878283"),
    "qwen3next-gguf": ("qwen3next", "22808ad83c0025c1900ebb0abf573834432ae964d3a0bda313c37177fb055116"),
}


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("src")
    subprocess.run(["go", "run", "./internal/modelgen/cmd/fixtures", str(d), *SOURCES], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    out = {}
    for preset, (_, sha) in SOURCES.items():
        path = os.path.join(d, preset, "model.safetensors")
        with open(path, "rb") as f:
            got = hashlib.sha256(f.read()).hexdigest()
        assert got == sha, f"{preset}: generated checkpoint sha256 {got}, the fixtures were made from {sha}"
        tensors, _, _ = mlxlm_ref.read_safetensors(path)
        out[preset] = tensors
    return out


def _bits_diff(hf, src):
    """Names whose float64 value, rounded to bfloat16, differs from the source's bits."""
    assert set(hf) == set(src), (sorted(set(hf) ^ set(src)))[:6]
    bad = []
    for k, a in hf.items():
        dt, s = src[k]
        assert dt == "BF16" and a.shape == s.shape, (k, dt, a.shape, s.shape)
        if not np.array_equal(mlxlm_ref._bf16_bits(a), s.view(np.uint16)):
            bad.append(k)
    return bad


@pytest.mark.parametrize("preset", sorted(SOURCES))
def test_bf16_inverts_bit_exactly(sources, preset):
    g = ggufref.read_gguf(os.path.join(HERE, SOURCES[preset][0] + "-BF16.gguf"))
    _, hf = ggufref.to_hf(g)
    assert _bits_diff(hf, sources[preset]) == []
    # the stored forms: norms float32(w + 1), ssm_a float32(-exp(A_log)), both F32
    for name, ti in g.tensors.items():
        if name.endswith("_norm.weight") or name.endswith("ssm_a") or name.endswith("ssm_dt.bias"):
            assert ti.type_name == "F32", name


def test_reorder_and_regroup_matter(sources, monkeypatch):
    """Without the inverse V-head reordering (Qwen3.5) the GDN tensors no longer match; without
    the qkvz regrouping (Qwen3-Next) in_proj_qkvz no longer matches."""
    monkeypatch.setattr(ggufref, "_reorder_v", lambda a, *args, **kw: a)
    g = ggufref.read_gguf(os.path.join(HERE, "qwen35-BF16.gguf"))
    bad = _bits_diff(ggufref.to_hf(g)[1], sources["qwen35-gguf"])
    assert {k.split(".")[-2] for k in bad} >= {"in_proj_qkv", "in_proj_z", "in_proj_a", "in_proj_b", "conv1d", "out_proj"}
    g = ggufref.read_gguf(os.path.join(HERE, "qwen3next-BF16.gguf"))
    _, hf = ggufref.to_hf(g)
    src = sources["qwen3next-gguf"]
    name = "model.layers.0.linear_attn.in_proj_qkvz.weight"
    qkv, z = g.array("blk.0.attn_qkv.weight"), g.array("blk.0.attn_gate.weight")
    plain = np.concatenate([qkv, z])  # the stored rows in order, not regrouped per key head
    assert not np.array_equal(mlxlm_ref._bf16_bits(plain), src[name][1].view(np.uint16))
    assert np.array_equal(mlxlm_ref._bf16_bits(hf[name]), src[name][1].view(np.uint16))


def _f16b(x):
    return np.float16(x).tobytes()


def test_blocks():
    # Q8_0: d = 0.5, codes -128..127 step
    qs = np.arange(-16, 16, dtype=np.int8)
    v = ggufref.dequantize("Q8_0", np.frombuffer(_f16b(0.5) + qs.tobytes(), np.uint8))
    assert np.array_equal(v, 0.5 * qs)
    # Q4_0: byte j holds element j (low nibble) and j + 16 (high)
    qs = bytes([(j & 15) | ((15 - j) << 4) for j in range(16)])
    v = ggufref.dequantize("Q4_0", np.frombuffer(_f16b(2.0) + qs, np.uint8))
    assert np.array_equal(v, 2.0 * (np.array(list(range(16)) + list(range(15, -1, -1))) - 8))
    # Q5_0: element j's fifth bit is bit j of qh
    qh = struct.pack("<I", 0x80000001)
    v = ggufref.dequantize("Q5_0", np.frombuffer(_f16b(1.0) + qh + bytes(16), np.uint8))
    want = np.full(32, -16.0)
    want[0] = want[31] = 0
    assert np.array_equal(v, want)
    # IQ4_NL: the code table
    v = ggufref.dequantize("IQ4_NL", np.frombuffer(_f16b(1.0) + bytes([0x10] * 16), np.uint8))
    assert np.array_equal(v, [-127.0] * 16 + [-104.0] * 16)
    # MXFP4: E8M0 exponent 128 (x2), codes 1 (0.5) and 15 (-6)
    v = ggufref.dequantize("MXFP4", np.frombuffer(bytes([128]) + bytes([0xF1] * 16), np.uint8))
    assert np.array_equal(v, [1.0] * 16 + [-12.0] * 16)
    # Q4_K: scale index 0 = 1, min 0 = 2; index 5 = (s[9] & 15) | (s[1] >> 6) << 4
    sc = bytearray(12)
    sc[0], sc[4] = 1, 2
    sc[9], sc[1] = 0x03, 0x40  # scale 5 = 3 | 1 << 4 = 19, min 5 = 0 | (s[5] >> 6) << 4 = 0
    qs = bytes([0x21] * 128)  # low nibble 1, high 2
    v = ggufref.dequantize("Q4_K", np.frombuffer(_f16b(1.0) + _f16b(0.5) + bytes(sc) + qs, np.uint8))
    assert np.array_equal(v[:32], [1 * 1 - 0.5 * 2] * 32)
    assert np.array_equal(v[160:192], [19 * 2.0] * 32)  # sub-block 5: high nibbles of the third chunk
    # Q6_K: ql = 0, qh = 0: every value -32 * d * scale of its 16
    sc = np.arange(1, 17, dtype=np.int8)
    v = ggufref.dequantize("Q6_K", np.frombuffer(bytes(192) + sc.tobytes() + _f16b(1.0), np.uint8))
    want = -32.0 * np.concatenate([np.repeat(sc[h * 8 + 2 * i:h * 8 + 2 * i + 2], 16) for h in range(2) for i in range(4)])
    assert np.array_equal(v, want)
    # IQ4_XS: sub-block 1 scale = high nibble of scales_l[0] | bits 2..3 of scales_h << 4
    blk = _f16b(1.0) + struct.pack("<H", 0b1000) + bytes([0x50, 0, 0, 0]) + bytes([0x88] * 128)
    v = ggufref.dequantize("IQ4_XS", np.frombuffer(blk, np.uint8))
    assert np.array_equal(v[32:64], [(5 + 32 - 32) * 1.0] * 32) and np.array_equal(v[:32], [-32.0] * 32)


def test_bad_files(tmp_path):
    p = tmp_path / "x.gguf"
    p.write_bytes(b"GGUX" + bytes(20))
    with pytest.raises(ggufref.GGUFError, match="bad magic"):
        ggufref.read_gguf(str(p))
    p.write_bytes(b"GGUF" + struct.pack("<I", 2) + bytes(16))
    with pytest.raises(ggufref.GGUFError, match="version 2"):
        ggufref.read_gguf(str(p))
    data = open(os.path.join(HERE, "qwen35-BF16.gguf"), "rb").read()
    p.write_bytes(data[:len(data) - 100])
    with pytest.raises(ggufref.GGUFError, match="past the file"):
        ggufref.read_gguf(str(p))


PUBLISHED = os.path.join(HERE, "published")


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(PUBLISHED) if f.endswith(".gguf")))
def test_published_header_only(name):
    """Each header-only copy parses, ends right after its header, and holds its architecture's
    tensors for every layer at the sizes its metadata gives."""
    path = os.path.join(PUBLISHED, name)
    g = ggufref.read_gguf(path, header_only=True)
    assert os.path.getsize(path) == g.data_start
    arch = g.meta["general.architecture"]
    L = g.meta[arch + ".block_count"]
    n = g.meta[arch + ".full_attention_interval"]
    D = g.meta[arch + ".embedding_length"]
    for i in range(L):
        want = "attn_q.weight" if (i + 1) % n == 0 else "attn_qkv.weight"
        assert f"blk.{i}.{want}" in g.tensors, (name, i, want)
    assert g.tensors["token_embd.weight"].ne[0] == D
    ends = sorted((t.offset, t.offset + t.nbytes) for t in g.tensors.values())
    assert all(a[1] <= b[0] for a, b in zip(ends, ends[1:]))  # no overlap
    if arch != "qwen4exp":
        c = ggufref.config_of(g)
        assert c["linear_num_value_heads"] * c["linear_value_head_dim"] == g.tensors["blk.0.attn_gate.weight"].ne[1]


GOLDENS = os.path.join(HERE, "goldens.safetensors")


def _goldens():
    tensors, _, _ = mlxlm_ref.read_safetensors(GOLDENS)
    return {k: mlxlm_ref.to_float64(dt, a) if dt != "I32" else a for k, (dt, a) in tensors.items()}


@pytest.mark.skipif(not os.path.exists(GOLDENS), reason="no goldens yet")
def test_goldens_cover_every_fixture_and_reproduce():
    """goldens.safetensors holds a golden for every fixture, made from PROMPT; recomputing the
    BF16 and Q4_K_M ones gives the stored float32 values back (within float32 rounding)."""
    import goldens
    g = _goldens()
    assert g["input_ids"].tolist() == goldens.PROMPT
    names = sorted(f[:-5] for f in os.listdir(HERE) if f.endswith(".gguf"))
    assert sorted(k[:-7] for k in g if k.endswith(".logits")) == names
    with open(os.path.join(HERE, "fixtures.json")) as f:
        manifest = json.load(f)
    assert manifest["prompt"] == goldens.PROMPT
    assert sorted(e["file"] for e in manifest["fixtures"]) == [n + ".gguf" for n in names]
    for e in manifest["fixtures"]:
        with open(os.path.join(HERE, e["file"]), "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == e["sha256"], e["file"]
    for name in names:
        if name.endswith(("-BF16", "-Q4_K_M")):
            _, logits, _ = goldens.logits_of(os.path.join(HERE, name + ".gguf"), None, [])
            # float64 BLAS results may differ in the last bits between machines: one float32 ulp at |logit| < 8
            assert np.max(np.abs(logits - g[name + ".logits"])) <= 1e-6, name


def test_published_files_are_the_generators(tmp_path):
    """make_published.py writes exactly the committed header-only files."""
    subprocess.run([sys.executable, os.path.join(PUBLISHED, "make_published.py"), str(tmp_path)], check=True,
                   stdout=subprocess.DEVNULL)
    made = sorted(os.listdir(tmp_path))
    assert made == sorted(f for f in os.listdir(PUBLISHED) if f.endswith(".gguf"))
    for f in made:
        with open(tmp_path / f, "rb") as a, open(os.path.join(PUBLISHED, f), "rb") as b:
            assert a.read() == b.read(), f

"""An independent reader of GGUF files (version 3) and of ggml's tensor block types, numpy only,
written from the GGUF specification (ggml's docs/gguf.md: header, metadata value types, tensor
info table, general.alignment) and ggml's block layouts (ggml-common.h: the block structs;
ggml-quants.c: what each dequantize_row_* computes). Nothing here calls strata or gguf-py.

It also undoes what llama.cpp's converter (convert_hf_to_gguf.py at ngxson/llama.cpp 3f545bec,
conversion/qwen.py: Qwen3NextModel, _LinearAttentionVReorderBase, Qwen3_5TextModel,
Qwen3_5MoeTextModel; Qwen2MoeModel for the experts) did to a Hugging Face checkpoint of
qwen3_next, qwen3_5 or qwen3_5_moe, giving back the checkpoint's tensors by their Hugging Face
names (to_hf), every value float64:
- `*norm.weight` except the GDN output norm (`ssm_norm`) was stored as w + 1: read as stored - 1;
- `ssm_a` = -exp(A_log): A_log = log(-ssm_a); `ssm_dt.bias` is dt_bias;
- `ssm_conv1d` [C, K] back to conv1d.weight [C, 1, K];
- qwen3next: `attn_qkv` = [all q | all k | all v] and `attn_gate` = all z, regrouped from
  in_proj_qkvz's per-key-head [q | k | v of its r value heads | z of them]: joined back;
  `ssm_ba` is in_proj_ba unchanged;
- qwen35 / qwen35moe with Hk < Hv: the value heads reordered from grouped by key head
  (g * r + j) to tiled (j * Hk + g) in the V rows of attn_qkv, attn_gate (in_proj_z),
  ssm_alpha / ssm_beta (in_proj_a / in_proj_b), ssm_a, ssm_dt.bias, the V channels of
  ssm_conv1d and the columns of ssm_out: put back in grouped order;
- experts stacked [E, rows, cols] (ffn_{gate,up,down}_exps): qwen3next back to
  mlp.experts.{e}.{gate,up,down}_proj.weight, qwen3.5-MoE's gate and up joined back into
  mlp.experts.gate_up_proj [E, 2I, D] (gate rows first), down_proj [E, D, I];
- `ffn_gate_inp_shexp` ([D, 1] as converted, [D] after llama-quantize) is shared_expert_gate [1, D].

Usage: read_gguf(path) -> GGUF (.meta: key -> value, .tensors: name -> TensorInfo,
.array(name) -> float64 numpy array in the Hugging Face / PyTorch axis order, ne reversed);
to_hf(gguf) -> (config dict for a float64 reference, {hf_name: float64 array}).
"""

import struct

import numpy as np

GGUF_MAGIC = b"GGUF"

# Metadata value types (gguf.md): id -> (name, struct format or None).
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9

# ggml_type id -> (name, elements per block, bytes per block).
TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210), 20: ("IQ4_NL", 32, 18), 23: ("IQ4_XS", 256, 136), 30: ("BF16", 1, 2),
    39: ("MXFP4", 32, 17),
}
TYPE_IDS = {v[0]: k for k, v in TYPES.items()}

KVALUES_IQ4NL = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.float64)
# E2M1 values (OCP MX spec) by 4-bit code: bit 3 sign, then exponent (2 bits, bias 1), mantissa (1 bit).
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float64)


class GGUFError(ValueError):
    """A file this reader cannot read, named with the file and the problem."""


class TensorInfo:
    def __init__(self, name, ne, type_id, offset):
        self.name, self.ne, self.type_id, self.offset = name, ne, type_id, offset

    @property
    def type_name(self):
        return TYPES[self.type_id][0]

    @property
    def shape(self):
        """PyTorch / numpy axis order: ne reversed (ne[0] is the contiguous row length)."""
        return tuple(reversed(self.ne))

    @property
    def nbytes(self):
        _, blk, size = TYPES[self.type_id]
        n = int(np.prod(self.ne, dtype=np.int64))
        return n // blk * size


class GGUF:
    """A parsed GGUF file. header_only: a file whose tensor data lies past its end (the header-only
    copies of published layouts) is accepted; its tensors' data cannot be read."""

    def __init__(self, path, header_only=False):
        self.path, self.header_only = path, header_only
        with open(path, "rb") as f:
            self.buf = f.read()
        self.pos = 0
        if self._take(4) != GGUF_MAGIC:
            raise GGUFError(f"{path}: not a GGUF file (bad magic)")
        self.version = self._u32()
        if self.version != 3:
            raise GGUFError(f"{path}: GGUF version {self.version}, want 3")
        n_tensors, n_kv = self._u64(), self._u64()
        self.meta, self.meta_types = {}, {}
        for _ in range(n_kv):
            key = self._str()
            t = self._u32()
            self.meta[key] = self._value(t)
            self.meta_types[key] = t
        self.tensors = {}
        for _ in range(n_tensors):
            name = self._str()
            nd = self._u32()
            ne = [self._u64() for _ in range(nd)]
            t = self._u32()
            off = self._u64()
            if t not in TYPES:
                raise GGUFError(f"{path}: tensor {name}: ggml type {t} not read here")
            blk = TYPES[t][1]
            if ne[0] % blk:
                raise GGUFError(f"{path}: tensor {name}: row length {ne[0]} not a multiple of the block {blk}")
            self.tensors[name] = TensorInfo(name, ne, t, off)
        self.alignment = int(self.meta.get("general.alignment", 32))
        self.data_start = -(-self.pos // self.alignment) * self.alignment
        for ti in self.tensors.values():
            if ti.offset % self.alignment:
                raise GGUFError(f"{path}: tensor {ti.name}: offset {ti.offset} not aligned to {self.alignment}")
            end = self.data_start + ti.offset + ti.nbytes
            if end > len(self.buf) and not header_only:
                raise GGUFError(f"{path}: tensor {ti.name}: data end {end} past the file's {len(self.buf)} bytes")

    # --- header primitives
    def _take(self, n):
        if self.pos + n > len(self.buf):
            raise GGUFError(f"{self.path}: header truncated at byte {self.pos}")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def _u32(self):
        return struct.unpack("<I", self._take(4))[0]

    def _u64(self):
        return struct.unpack("<Q", self._take(8))[0]

    def _str(self):
        return self._take(self._u64()).decode("utf-8")

    def _value(self, t):
        if t in _SCALARS:
            fmt = _SCALARS[t]
            return struct.unpack(fmt, self._take(struct.calcsize(fmt)))[0]
        if t == _STRING:
            return self._str()
        if t == _ARRAY:
            et, n = self._u32(), self._u64()
            return [self._value(et) for _ in range(n)]
        raise GGUFError(f"{self.path}: metadata value type {t} unknown")

    # --- tensors
    def raw(self, name):
        if self.header_only:
            raise GGUFError(f"{self.path}: header-only, no data for tensor {name}")
        ti = self.tensors[name]
        a = self.data_start + ti.offset
        return np.frombuffer(self.buf, dtype=np.uint8, count=ti.nbytes, offset=a)

    def array(self, name):
        """The tensor's values as float64, shape ne reversed."""
        ti = self.tensors[name]
        return dequantize(ti.type_name, self.raw(name)).reshape(ti.shape)


def read_gguf(path, header_only=False):
    return GGUF(path, header_only)


# ----------------------------------------------------------------------------------------------
# Block types (ggml-common.h structs; values as ggml's dequantize_row_* computes them, in float64).


def _f16(b):
    return b.copy().view("<f2").astype(np.float64)


def _blocks(data, size):
    if len(data) % size:
        raise GGUFError(f"{len(data)} bytes is not a whole number of {size}-byte blocks")
    return data.reshape(-1, size)


def _split_nibbles(qs):
    """[nb, 16] bytes -> [nb, 32] codes: element j < 16 from the low nibble of byte j, 16 + j from its high."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int64)


def _scale_min_k4(sc):
    """Q4_K / Q5_K packed 6-bit scales and mins (get_scale_min_k4): [nb, 12] -> ([nb, 8], [nb, 8])."""
    sc = sc.astype(np.int64)
    d = np.empty((sc.shape[0], 8), np.int64)
    m = np.empty_like(d)
    for j in range(8):
        if j < 4:
            d[:, j] = sc[:, j] & 63
            m[:, j] = sc[:, j + 4] & 63
        else:
            d[:, j] = (sc[:, j + 4] & 0xF) | ((sc[:, j - 4] >> 6) << 4)
            m[:, j] = (sc[:, j + 4] >> 4) | ((sc[:, j] >> 6) << 4)
    return d, m


def dequantize(type_name, data):
    """Flat float64 values of data (uint8 bytes) stored as ggml type type_name."""
    if type_name == "F32":
        return data.copy().view("<f4").astype(np.float64)
    if type_name == "F16":
        return data.copy().view("<f2").astype(np.float64)
    if type_name == "BF16":
        return (data.copy().view("<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if type_name == "Q8_0":  # {f16 d; int8 qs[32]}
        b = _blocks(data, 34)
        return (_f16(b[:, :2]) * b[:, 2:].view(np.int8).astype(np.float64)).ravel()
    if type_name in ("Q4_0", "IQ4_NL"):  # {f16 d; u8 qs[16]}
        b = _blocks(data, 18)
        q = _split_nibbles(b[:, 2:])
        v = q - 8.0 if type_name == "Q4_0" else KVALUES_IQ4NL[q]
        return (_f16(b[:, :2]) * v).ravel()
    if type_name == "Q4_1":  # {f16 d; f16 m; u8 qs[16]}
        b = _blocks(data, 20)
        return (_f16(b[:, :2]) * _split_nibbles(b[:, 4:]) + _f16(b[:, 2:4])).ravel()
    if type_name in ("Q5_0", "Q5_1"):  # {f16 d; [f16 m;] u8 qh[4]; u8 qs[16]}
        size = 22 if type_name == "Q5_0" else 24
        b = _blocks(data, size)
        o = 2 if type_name == "Q5_0" else 4
        qh = b[:, o:o + 4].copy().view("<u4").astype(np.int64)  # [nb, 1]
        bits = (qh >> np.arange(32)) & 1  # bit j: fifth bit of element j
        q = _split_nibbles(b[:, o + 4:]) | (bits << 4)
        if type_name == "Q5_0":
            return (_f16(b[:, :2]) * (q - 16.0)).ravel()
        return (_f16(b[:, :2]) * q + _f16(b[:, 2:4])).ravel()
    if type_name == "MXFP4":  # {u8 e (E8M0); u8 qs[16]}: 2^(e - 127) * e2m1(code)
        b = _blocks(data, 17)
        scale = np.ldexp(1.0, b[:, 0].astype(np.int64) - 127)[:, None]
        return (scale * E2M1[_split_nibbles(b[:, 1:])]).ravel()
    if type_name == "Q4_K":  # {f16 d; f16 dmin; u8 scales[12]; u8 qs[128]}
        b = _blocks(data, 144)
        d, dmin = _f16(b[:, :2]), _f16(b[:, 2:4])
        sc, mn = _scale_min_k4(b[:, 4:16])
        qs = b[:, 16:].reshape(-1, 4, 32).astype(np.int64)  # 4 chunks of 32 bytes, each 64 values
        q = np.stack([qs & 0xF, qs >> 4], axis=2).reshape(-1, 8, 32)  # sub-block 2c: low nibbles, 2c+1: high
        return (d[:, :, None] * sc[:, :, None] * q - dmin[:, :, None] * mn[:, :, None]).ravel()
    if type_name == "Q5_K":  # {f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}
        b = _blocks(data, 176)
        d, dmin = _f16(b[:, :2]), _f16(b[:, 2:4])
        sc, mn = _scale_min_k4(b[:, 4:16])
        qh = b[:, 16:48].astype(np.int64)  # [nb, 32]
        qs = b[:, 48:].reshape(-1, 4, 32).astype(np.int64)
        q = np.stack([qs & 0xF, qs >> 4], axis=2).reshape(-1, 8, 32)
        hi = (qh[:, None, :] >> np.arange(8)[None, :, None]) & 1  # sub-block s uses bit s of qh[l]
        q = q + 16 * hi
        return (d[:, :, None] * sc[:, :, None] * q - dmin[:, :, None] * mn[:, :, None]).ravel()
    if type_name == "Q6_K":  # {u8 ql[128]; u8 qh[64]; int8 scales[16]; f16 d}
        b = _blocks(data, 210)
        ql = b[:, :128].reshape(-1, 2, 64).astype(np.int64)  # two halves of 128 values
        qh = b[:, 128:192].reshape(-1, 2, 32).astype(np.int64)
        sc = b[:, 192:208].view(np.int8).astype(np.float64).reshape(-1, 2, 8)
        d = _f16(b[:, 208:210])
        out = np.empty((b.shape[0], 2, 4, 32))
        # within a half (l < 32): q1 = ql[l] low | qh bits 0-1, q2 = ql[l+32] low | bits 2-3,
        # q3 = ql[l] high | bits 4-5, q4 = ql[l+32] high | bits 6-7, each minus 32, at y[l + 32 i]
        out[:, :, 0] = (ql[:, :, :32] & 0xF) | (((qh >> 0) & 3) << 4)
        out[:, :, 1] = (ql[:, :, 32:] & 0xF) | (((qh >> 2) & 3) << 4)
        out[:, :, 2] = (ql[:, :, :32] >> 4) | (((qh >> 4) & 3) << 4)
        out[:, :, 3] = (ql[:, :, 32:] >> 4) | (((qh >> 6) & 3) << 4)
        out -= 32
        # scale index within the half: is = l / 16 + 2 i, i.e. per 16 values in order
        s = sc.reshape(-1, 2, 4, 2)[..., None]  # [nb, half, i, l/16, 1]
        out = out.reshape(-1, 2, 4, 2, 16) * s
        return (d[:, :, None, None, None] * out).ravel()
    if type_name == "IQ4_XS":  # {f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}
        b = _blocks(data, 136)
        d = _f16(b[:, :2])
        sh = b[:, 2:4].copy().view("<u2").astype(np.int64)  # [nb, 1]
        sl = b[:, 4:8].astype(np.int64)
        ib = np.arange(8)
        ls = ((sl[:, ib // 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4)
        q = _split_nibbles(b[:, 8:].reshape(-1, 16)).reshape(-1, 8, 32)
        return (d[:, :, None] * (ls - 32)[:, :, None] * KVALUES_IQ4NL[q]).ravel()
    if type_name == "Q2_K":  # {u8 scales[16]; u8 qs[64]; f16 d; f16 dmin}
        b = _blocks(data, 84)
        sc = b[:, :16].astype(np.int64).reshape(-1, 2, 4, 2)  # [nb, half, shift j, 16-group]
        qs = b[:, 16:80].astype(np.int64).reshape(-1, 2, 1, 2, 16)  # [nb, half, -, 16-group, l]
        d, dmin = _f16(b[:, 80:82]), _f16(b[:, 82:84])
        shift = (2 * np.arange(4)).reshape(1, 1, 4, 1, 1)
        q = (qs >> shift) & 3  # [nb, half, j, group, l]
        dl = d[:, :, None, None, None] * (sc & 0xF)[..., None]
        ml = dmin[:, :, None, None, None] * (sc >> 4)[..., None]
        return (dl * q - ml).ravel()
    if type_name == "Q3_K":  # {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d}
        b = _blocks(data, 110)
        hm = b[:, :32].astype(np.int64)
        qs = b[:, 32:96].astype(np.int64).reshape(-1, 2, 1, 2, 16)
        s = b[:, 96:108].astype(np.int64)
        d = _f16(b[:, 108:110])
        sc = np.empty((b.shape[0], 16), np.int64)  # 16 six-bit scales: low 4 bits, then 2 high bits
        for i in range(16):
            low = (s[:, i % 8] >> (4 * (i // 8))) & 0xF
            high = (s[:, 8 + i % 4] >> (2 * (i // 4))) & 3
            sc[:, i] = (low | (high << 4)) - 32
        sc = sc.reshape(-1, 2, 4, 2)
        shift = (2 * np.arange(4)).reshape(1, 1, 4, 1, 1)
        q = (qs >> shift) & 3  # [nb, half, j, group, l]
        # the high bit: bit (4 half + j) of hmask[16 group + l]; clear means minus 4
        hbit = (hm.reshape(-1, 1, 1, 2, 16) >> (4 * np.arange(2).reshape(1, 2, 1, 1, 1) + np.arange(4).reshape(1, 1, 4, 1, 1))) & 1
        q = q - 4 * (1 - hbit)
        return (d[:, :, None, None, None] * sc[..., None] * q).ravel()
    raise GGUFError(f"ggml type {type_name} not read here")


# ----------------------------------------------------------------------------------------------
# The converter's transforms, undone.

ARCHS = ("qwen3next", "qwen35", "qwen35moe")


def _reorder_v(a, axis, hk, r, hd, to_grouped=True):
    """Moves value heads along axis between tiled order (index j * hk + g) and grouped order
    (g * r + j); each head is hd wide."""
    a = np.moveaxis(a, axis, 0)
    rest = a.shape[1:]
    if to_grouped:  # stored [r, hk, hd] -> [hk, r, hd]
        a = a.reshape(r, hk, hd, *rest).swapaxes(0, 1)
    else:
        a = a.reshape(hk, r, hd, *rest).swapaxes(0, 1)
    return np.moveaxis(a.reshape(hk * r * hd, *rest), 0, axis)


def config_of(g):
    """The text-model config a float64 reference needs, from the GGUF metadata alone."""
    m = g.meta
    arch = m["general.architecture"]
    if arch not in ARCHS:
        raise GGUFError(f"{g.path}: architecture {arch!r} is not one of {ARCHS}")

    def k(name, default=None):
        key = f"{arch}.{name}"
        if key not in m:
            if default is None:
                raise GGUFError(f"{g.path}: metadata key {key} missing")
            return default
        return m[key]

    D, L = k("embedding_length"), k("block_count")
    hd = k("attention.key_length")
    Hv = k("ssm.time_step_rank")
    cfg = {
        "arch": arch, "hidden_size": D, "num_hidden_layers": L,
        "vocab_size": g.tensors["token_embd.weight"].ne[1],
        "num_attention_heads": k("attention.head_count"), "num_key_value_heads": k("attention.head_count_kv"),
        "head_dim": hd, "rms_norm_eps": k("attention.layer_norm_rms_epsilon"),
        "rope_theta": k("rope.freq_base"), "rope_dims": k("rope.dimension_count"),
        "linear_num_key_heads": k("ssm.group_count"), "linear_num_value_heads": Hv,
        "linear_key_head_dim": k("ssm.state_size"), "linear_value_head_dim": k("ssm.inner_size") // Hv,
        "linear_conv_kernel_dim": k("ssm.conv_kernel"), "full_attention_interval": k("full_attention_interval"),
        "num_experts": k("expert_count", 0), "num_experts_per_tok": k("expert_used_count", 0),
        "moe_intermediate_size": k("expert_feed_forward_length", 0),
        "shared_expert_intermediate_size": k("expert_shared_feed_forward_length", 0),
        "intermediate_size": k("feed_forward_length", 0),
        "tie_word_embeddings": "output.weight" not in g.tensors,
    }
    return cfg


def to_hf(g):
    """(config, {Hugging Face name: float64 array}) of the values g holds, the converter's
    transforms undone (see the module docstring). Every tensor of g is used exactly once."""
    c = config_of(g)
    arch = c["arch"]
    nxt = arch == "qwen3next"
    pre = "model." if nxt else "model.language_model."
    hk, hv = c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv, r = c["linear_key_head_dim"], c["linear_value_head_dim"], hv // hk
    reorder = not nxt and hk != hv
    left = set(g.tensors)
    out = {}

    def take(name):
        if name not in g.tensors:
            raise GGUFError(f"{g.path}: tensor {name} missing")
        left.discard(name)
        return g.array(name)

    def norm(name):  # stored as w + 1
        return take(name) - 1.0

    out[pre + "embed_tokens.weight"] = take("token_embd.weight")
    out[pre + "norm.weight"] = norm("output_norm.weight")
    if "output.weight" in g.tensors:
        out["lm_head.weight"] = take("output.weight")
    for i in range(c["num_hidden_layers"]):
        b, p = f"blk.{i}.", f"{pre}layers.{i}."
        out[p + "input_layernorm.weight"] = norm(b + "attn_norm.weight")
        out[p + "post_attention_layernorm.weight"] = norm(b + "post_attention_norm.weight")
        if b + "ssm_a" in g.tensors:
            a = p + "linear_attn."
            qkv, z = take(b + "attn_qkv.weight"), take(b + "attn_gate.weight")
            kd = hk * dk
            conv = take(b + "ssm_conv1d.weight")  # [C, K]
            A = -take(b + "ssm_a")
            dt = take(b + "ssm_dt.bias")
            outp = take(b + "ssm_out.weight")
            if nxt:
                q, k, v = qkv[:kd].reshape(hk, dk, -1), qkv[kd:2 * kd].reshape(hk, dk, -1), qkv[2 * kd:].reshape(hk, r * dv, -1)
                out[a + "in_proj_qkvz.weight"] = np.concatenate([q, k, v, z.reshape(hk, r * dv, -1)], axis=1).reshape(-1, qkv.shape[1])
                out[a + "in_proj_ba.weight"] = take(b + "ssm_ba.weight")
            else:
                if reorder:
                    qkv = np.concatenate([qkv[:2 * kd], _reorder_v(qkv[2 * kd:], 0, hk, r, dv)])
                    z = _reorder_v(z, 0, hk, r, dv)
                    conv = np.concatenate([conv[:2 * kd], _reorder_v(conv[2 * kd:], 0, hk, r, dv)])
                    A, dt = _reorder_v(A, 0, hk, r, 1), _reorder_v(dt, 0, hk, r, 1)
                    outp = _reorder_v(outp, 1, hk, r, dv)
                out[a + "in_proj_qkv.weight"] = qkv
                out[a + "in_proj_z.weight"] = z
                bb, aa = take(b + "ssm_beta.weight"), take(b + "ssm_alpha.weight")
                if reorder:
                    bb, aa = _reorder_v(bb, 0, hk, r, 1), _reorder_v(aa, 0, hk, r, 1)
                out[a + "in_proj_b.weight"], out[a + "in_proj_a.weight"] = bb, aa
            out[a + "conv1d.weight"] = conv[:, None, :]
            out[a + "A_log"] = np.log(A)
            out[a + "dt_bias"] = dt
            out[a + "norm.weight"] = take(b + "ssm_norm.weight")  # the gated norm: as stored
            out[a + "out_proj.weight"] = outp
        else:
            a = p + "self_attn."
            for hf, gg in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"), ("o_proj", "attn_output")):
                out[a + hf + ".weight"] = take(b + gg + ".weight")
            out[a + "q_norm.weight"] = norm(b + "attn_q_norm.weight")
            out[a + "k_norm.weight"] = norm(b + "attn_k_norm.weight")
        m = p + "mlp."
        if b + "ffn_gate_inp.weight" in g.tensors:
            out[m + "gate.weight"] = take(b + "ffn_gate_inp.weight")
            eg, eu, ed = take(b + "ffn_gate_exps.weight"), take(b + "ffn_up_exps.weight"), take(b + "ffn_down_exps.weight")
            if nxt:
                for e in range(eg.shape[0]):
                    out[f"{m}experts.{e}.gate_proj.weight"] = eg[e]
                    out[f"{m}experts.{e}.up_proj.weight"] = eu[e]
                    out[f"{m}experts.{e}.down_proj.weight"] = ed[e]
            else:
                out[m + "experts.gate_up_proj"] = np.concatenate([eg, eu], axis=1)
                out[m + "experts.down_proj"] = ed
            for w in ("gate", "up", "down"):
                out[f"{m}shared_expert.{w}_proj.weight"] = take(f"{b}ffn_{w}_shexp.weight")
            out[m + "shared_expert_gate.weight"] = take(b + "ffn_gate_inp_shexp.weight").reshape(1, -1)
        else:
            for w in ("gate", "up", "down"):
                out[f"{m}{w}_proj.weight"] = take(f"{b}ffn_{w}.weight")
    if left:
        raise GGUFError(f"{g.path}: {len(left)} tensors not mapped, e.g. {sorted(left)[:4]}")
    return c, out

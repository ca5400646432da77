"""An independent float64 reference of mlx-lm's one-token decode step for qwen3_next, qwen3_5 and
qwen3_5_moe, with mlx-lm's per-layer caches and a reader and writer of mlx-lm prompt-cache files.
numpy only; nothing here calls strata.

Sources (read, not copied): ml-explore/mlx-lm at d78bf58e (2026-08-22, version string 0.32.0):
mlx_lm/models/qwen3_next.py, qwen3_5.py, qwen3_5_moe.py, gated_delta.py, cache.py (KVCache,
ArraysCache, save_prompt_cache, load_prompt_cache), base.py, rope_utils.py, switch_layers.py,
activations.py; ml-explore/mlx at 846d1762: mlx/io/safetensors.cpp (the file writer),
python/mlx/utils.py (tree_flatten / tree_unflatten, which name the tensors and metadata keys),
mlx/fast.cpp (RoPE frequencies), python/mlx/nn/layers/activations.py (softplus = logaddexp(x, 0)).

Model (load_model): a Hugging Face checkpoint directory in the published layout, read with this
module's own safetensors reader (BF16 widened through its bits): qwen3_next with `model.*` names
and per-expert `mlp.experts.{e}.{gate,up,down}_proj.weight`; qwen3_5 / qwen3_5_moe with
`model.language_model.*` names (the text model under `text_config`, or a flat config) and fused
`mlp.experts.gate_up_proj` [E, 2I, D] (gate rows first) / `mlp.experts.down_proj` [E, D, I];
`model.visual.*` and `mtp.*` are skipped, any other unused tensor is an error. The weights are
taken as mlx-lm's sanitize leaves them: the five zero-centred norms (input / post-attention /
final / q / k) as 1 + w, conv1d [C, 1, K] as w[c, j], the GDN gated norm's weight as stored.
Layer i is attention iff (i + 1) % full_attention_interval == 0 (default 4; `layer_types`, which
mlx-lm does not read, must agree); qwen3_next layers are MoE iff not in mlp_only_layers and
(i + 1) % decoder_sparse_step == 0, qwen3_5 layers iff num_experts > 0.

Decode (Model.step): one token at position T = the cached length, following mlx-lm's formulas with
every value in float64: h = x + mixer(rms(x)); out = h + mlp(rms(h)); logits = lm_head(rms(out)),
rms(v, w) = w * v / sqrt(mean(v^2) + rms_norm_eps).
- Attention: q_proj gives per head [query | gate]; q_norm / k_norm; RoPE (non-traditional, on the
  first int(head_dim * partial_rotary_factor) dims, inv_freq_i = theta^(-i / half)) at position
  T; k, v appended to the cache; softmax(q K^T / sqrt(head_dim)) V with query head h reading KV
  head h // (Hq / Hkv); o_proj(o * sigmoid(gate)).
- Gated DeltaNet: mixed = [q | k | v] (qwen3_next: in_proj_qkvz de-interleaved per key head
  [q | k | v of its r heads | z of its r heads], in_proj_ba as [b of r | a of r]); the conv runs
  over [conv state (K-1 rows) ; mixed], silu; q = dk^-1 q / sqrt(mean(q^2) + 1e-6),
  k = dk^-0.5 k / sqrt(mean(k^2) + 1e-6) (mlx-lm's rms_norm form of the L2 norm);
  beta = sigmoid(b), g = exp(-exp(A_log) softplus(a + dt_bias)); per value head h (key head
  h // (Hv / Hk)) on M [Dv, Dk]: M = g M; delta = beta (v - M k); M += delta k^T; y = M q; then
  out_proj(silu(z) * rms(y, norm.weight)).
- MLP: down(silu(gate x) * up x); MoE: p = softmax(router x), the top-k of p (ties to the lower
  expert index), renormalised iff norm_topk_prob (mlx-lm's defaults when the config lacks it:
  False for qwen3_next, True for qwen3_5), plus sigmoid(shared_expert_gate x) * shared_expert(x).

Caches (make_cache), exactly as mlx-lm lays them out for one sequence (B = 1), held in float64:
- KVCache (attention layers): keys, values [1, Hkv, T, head_dim]; keys after k_norm and RoPE.
  The length T is the offset (mlx-lm stores no offset).
- ArraysCache (GDN layers), cache[0] = conv state [1, K-1, conv_dim]: the last K-1 rows of the
  [q | k | v] projection before the conv, oldest first (zero rows while fewer tokens were seen);
  cache[1] = recurrent state [1, Hv, Dv, Dk] (the transpose of the usual S [Dk, Dv]).

Files (save_prompt_cache / load_prompt_cache), as mlx-lm's save_prompt_cache writes them through
tree_flatten and mx.save_safetensors: tensor `i.<path in layer i's state>`; metadata `0.i` = ""
(neither class has a meta_state), `1.<key>` = the caller's metadata, `2.i` = the class name.
- CURRENT, mlx-lm after PR #1632 (11a6ce75, 2026-08-22): an ArraysCache's state is
  (cache, left_padding, lengths), so `i.0.0` conv, `i.0.1` recurrent, `i.1` / `i.2` empty
  arrays (F32, shape [0], a zero-length span) for a single sequence.
- LEGACY, mlx-lm from e08ec15b (2026-02-03, the MambaCache class gone) to e03e45ed: an
  ArraysCache's state is its list: `i.0` conv, `i.1` recurrent (BF16 in files of mlx-lm before
  735a43b2, 2026-03-15; the loader takes any float dtype).
- KVCache layers are `i.0` keys, `i.1` values in both.
The header is what mlx writes (nlohmann json dump): compact JSON, keys sorted at every level,
`__metadata__` always present, no padding; the data follow in sorted name order (mlx's order is
that of an unordered_map, so a reader must use data_offsets, as this one does). Keys, values and
conv state are written in one activation dtype (BF16 as mlx-lm writes a bf16 model's cache, or
F32 / F16), the recurrent state in F32 (mlx-lm's since 735a43b2, 2026-03-15).

Where mlx-lm and transformers differ only in dtype casts (bf16 activations, bf16(1 + w) norm
weights, norms rounding x / rms before the multiply, fp32 A_log, the router's weights in the
logits dtype) this module computes in float64. Formula differences it keeps from mlx-lm: the
q/k L2 norm's epsilon (dk * 1e-6 inside the sum of squares, transformers 1e-6; Model.hf_qk_l2norm
switches to transformers' to measure the effect: 1.3e-5 to 2.6e-5 on the logits of prompt a of the
test checkpoints, test_mlxlm_ref.py), softplus without transformers' threshold of
20, norm_topk_prob honoured for qwen3_5_moe (transformers always renormalises; the same when the
config lacks it). Where it differs from mlx-lm: float64 throughout; top-k ties are broken to the
lower index (mlx-lm's argpartition leaves them unspecified); a config without top-level
rope_theta / partial_rotary_factor (transformers v5 keeps them in rope_parameters, which mlx-lm's
qwen3_next does not read) takes them from rope_parameters; only the "default" RoPE type; B = 1;
checks that mlx-lm does not make (a cache with the wrong layer count or shapes is an error, not
silently zipped).

API: load_model(dir) -> Model; Model.make_cache(); Model.step(token, cache) -> logits [vocab]
float64; Model.decode(tokens, cache) -> logits [T, vocab]; save_prompt_cache(path, cache,
metadata, fmt, activation_dtype); load_prompt_cache(path, fmt) -> LoadedCache(cache, metadata,
dtypes); file_format(path); read_safetensors(path); gated_delta_step(...).
"""

import json
import os
import re
from collections import namedtuple

import numpy as np

CURRENT = "current"
LEGACY = "legacy"
FORMATS = (CURRENT, LEGACY)


class MLXRefError(ValueError):
    """Base of this module's errors: bad input, named with the file / tensor / field."""


class SafetensorsError(MLXRefError):
    """A file that is not a readable safetensors file."""


class CheckpointError(MLXRefError):
    """A checkpoint directory this reference cannot read as mlx-lm would."""


class CacheFileError(MLXRefError):
    """A prompt-cache file that is not what mlx-lm's save_prompt_cache writes."""


class CacheFormatError(CacheFileError):
    """A prompt-cache file of the other format (CURRENT vs LEGACY) than the one asked for."""


class CacheMismatchError(MLXRefError):
    """A cache whose layers or shapes do not fit the model."""


# ---------------------------------------------------------------------------------------------
# safetensors

_FILE_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4",
                "U32": "<u4", "U8": "u1"}
_FLOAT_DTYPES = ("F32", "BF16", "F16")


def read_safetensors(path):
    """Reads a safetensors file: returns (tensors, metadata, header_bytes). tensors maps a name to
    (dtype string, numpy array as stored: BF16 as its uint16 bits, others in their numpy dtype);
    metadata is the `__metadata__` dict (or {} when absent or null). Spans are taken from
    data_offsets and checked against the dtype, the shape and the file size (SafetensorsError)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise SafetensorsError(f"{path}: {len(raw)} bytes, shorter than the 8-byte header length")
    n = int.from_bytes(raw[:8], "little")
    if n == 0 or 8 + n > len(raw):
        raise SafetensorsError(f"{path}: header length {n} does not fit a {len(raw)}-byte file")
    header_bytes = raw[8:8 + n]
    try:
        header = json.loads(header_bytes)
    except ValueError as err:
        raise SafetensorsError(f"{path}: the header is not JSON: {err}") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: the header is not a JSON object")
    body = memoryview(raw)[8 + n:]
    tensors = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        dt = e.get("dtype")
        if dt not in _FILE_DTYPES:
            raise SafetensorsError(f"{path}: tensor {name}: dtype {dt!r} not read by this reference")
        shape = [int(s) for s in e["shape"]]
        begin, end = e["data_offsets"]
        want = int(np.prod(shape, dtype=np.int64)) * np.dtype(_FILE_DTYPES[dt]).itemsize
        if end - begin != want or end > len(body) or begin < 0:
            raise SafetensorsError(f"{path}: tensor {name}: data_offsets [{begin}, {end}] do not hold "
                                 f"{dt} {shape} ({want} bytes) inside the {len(body)}-byte body")
        a = np.frombuffer(body[begin:end], dtype=_FILE_DTYPES[dt]).reshape(shape)
        tensors[name] = (dt, a.astype(a.dtype.newbyteorder("=")))
    meta = header.get("__metadata__") or {}
    return tensors, meta, header_bytes


def to_float64(dtype, a):
    """A stored array (read_safetensors' second element) widened exactly to float64."""
    if dtype == "BF16":
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def _bf16_bits(a):
    """float64 -> bfloat16 bits, rounded to nearest even once (a float32 step that lands on a
    bfloat16 tie is nudged toward the float64 value first, so there is no double rounding)."""
    f = a.astype(np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    tie = ((bits & 0xFFFF) == 0x8000) & (f.astype(np.float64) != a)
    up = np.abs(a) > np.abs(f.astype(np.float64))
    bits = np.where(tie & up, bits + 1, np.where(tie & ~up, bits - 1, bits))
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return bits.astype(np.uint16)


def encode(a, dtype):
    """The bytes of float64 array a stored as dtype F32, F16 or BF16 (little-endian, round to
    nearest even). Non-finite values, and finite ones that overflow the dtype, are refused."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        raise MLXRefError(f"refusing to store non-finite values as {dtype}")
    if dtype == "F32":
        out = a.astype("<f4")
    elif dtype == "F16":
        out = a.astype("<f2")
    elif dtype == "BF16":
        out = _bf16_bits(a).astype("<u2")
        if np.any((out & 0x7F80) == 0x7F80):
            raise MLXRefError("values overflow BF16")
        return out.tobytes()
    else:
        raise MLXRefError(f"dtype {dtype!r}: a cache is stored as one of {_FLOAT_DTYPES}")
    if not np.all(np.isfinite(out)):
        raise MLXRefError(f"values overflow {dtype}")
    return out.tobytes()


def write_safetensors(path, tensors, metadata):
    """Writes {name: (dtype, float64 array)} and a {str: str} metadata dict the way mlx's
    save_safetensors does: 8-byte little-endian header length, the header as compact JSON with
    keys sorted at every level and `__metadata__` always present (null when empty, as nlohmann
    writes an unset value), then the data without padding, here in sorted name order."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        dt, a = tensors[name]
        b = encode(a, dt)
        header[name] = {"data_offsets": [off, off + len(b)], "dtype": dt, "shape": list(np.shape(a))}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = dict(metadata) if metadata else None
    text = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for b in blobs:
            f.write(b)


# ---------------------------------------------------------------------------------------------
# checkpoint and config


class Config:
    """The text model's sizes as mlx-lm's ModelArgs reads them (see the module docstring)."""

    def __init__(self, cfg, path):
        top = cfg
        self.model_type = top.get("model_type")
        if self.model_type == "qwen3_next":
            t = top
        elif self.model_type in ("qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text"):
            t = top.get("text_config", top)
        else:
            raise CheckpointError(f"{path}/config.json: model_type {self.model_type!r} is not "
                                  "qwen3_next, qwen3_5 or qwen3_5_moe")
        self.next = self.model_type == "qwen3_next"

        def need(key, default=None, where=t):
            if key in where and where[key] is not None:
                return where[key]
            if default is None:
                raise CheckpointError(f"{path}/config.json: field {key} missing")
            return default

        self.D = need("hidden_size")
        self.n_layers = need("num_hidden_layers")
        self.vocab = need("vocab_size")
        self.eps = float(need("rms_norm_eps"))
        self.Hq = need("num_attention_heads")
        self.Hkv = need("num_key_value_heads")
        self.hd = need("head_dim", self.D // self.Hq if not self.next else None)
        self.Hk, self.Hv = need("linear_num_key_heads"), need("linear_num_value_heads")
        self.dk, self.dv = need("linear_key_head_dim"), need("linear_value_head_dim")
        self.K = need("linear_conv_kernel_dim")
        self.interval = need("full_attention_interval", 4)
        self.tie = bool(t.get("tie_word_embeddings", False))
        if t.get("attention_bias"):
            raise CheckpointError(f"{path}/config.json: attention_bias true is not implemented here")
        if self.Hv % self.Hk or self.Hq % self.Hkv:
            raise CheckpointError(f"{path}/config.json: heads Hv {self.Hv} / Hk {self.Hk}, "
                                  f"Hq {self.Hq} / Hkv {self.Hkv} do not divide")
        if self.next:  # mlx-lm reads rope_theta / partial_rotary_factor / rope_scaling at top level;
            # a transformers v5 config keeps the first two in rope_parameters only: taken from there
            rope = t.get("rope_parameters") or {}
            theta = t.get("rope_theta", rope.get("rope_theta"))
            prf = t.get("partial_rotary_factor", rope.get("partial_rotary_factor"))
            rope = t.get("rope_scaling") or rope
        else:  # qwen3_5's __post_init__: a (default) rope_parameters overrides, defaults 100000 / 0.25
            rope = t.get("rope_parameters", {"rope_theta": 100000.0})
            src = rope or t
            theta, prf = src.get("rope_theta", 100000.0), src.get("partial_rotary_factor", 0.25)
            rope = rope or {}
        rtype = rope.get("type", rope.get("rope_type", "default"))
        if rtype not in ("default", "mrope"):
            raise CheckpointError(f"{path}/config.json: RoPE type {rtype!r} is not implemented here")
        if theta is None or prf is None:
            raise CheckpointError(f"{path}/config.json: rope_theta / partial_rotary_factor missing")
        self.theta, self.rope_dims = float(theta), int(self.hd * prf)
        self.linear = [(i + 1) % self.interval != 0 for i in range(self.n_layers)]
        types = t.get("layer_types")
        if types is not None:
            want = ["linear_attention" if lin else "full_attention" for lin in self.linear]
            if list(types) != want:
                raise CheckpointError(f"{path}/config.json: layer_types {types} disagree with "
                                      f"full_attention_interval {self.interval}, which mlx-lm uses")
        self.E = t.get("num_experts", 0) or 0
        if self.next:
            only, step = t.get("mlp_only_layers", []), need("decoder_sparse_step")
            self.moe = [i not in only and self.E > 0 and (i + 1) % step == 0 for i in range(self.n_layers)]
            self.norm_topk = bool(t.get("norm_topk_prob", False))
        else:
            self.moe = [self.E > 0] * self.n_layers
            self.norm_topk = bool(t.get("norm_topk_prob", True))
        if any(self.moe):
            self.topk = need("num_experts_per_tok")
            self.I_moe = need("moe_intermediate_size")
            self.I_shared = need("shared_expert_intermediate_size")
        if not all(self.moe):
            self.I = need("intermediate_size")
        self.conv_dim = 2 * self.Hk * self.dk + self.Hv * self.dv


def _read_checkpoint(path):
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    elif os.path.exists(os.path.join(path, "model.safetensors")):
        files = ["model.safetensors"]
    else:
        raise CheckpointError(f"{path}: neither model.safetensors.index.json nor model.safetensors")
    out = {}
    for fn in files:
        try:
            tensors, _, _ = read_safetensors(os.path.join(path, fn))
        except (OSError, SafetensorsError) as err:
            raise CheckpointError(str(err)) from err
        for k, (dt, a) in tensors.items():
            if dt not in ("F32", "BF16", "F16", "F64"):
                raise CheckpointError(f"{path}/{fn}: tensor {k}: dtype {dt} (a quantized or "
                                      "non-float checkpoint is not read here)")
            out[k] = to_float64(dt, a)
    return out


class _Weights:
    def __init__(self, raw, path):
        self.raw, self.path = raw, path

    def take(self, name, shape):
        if name not in self.raw:
            raise CheckpointError(f"{self.path}: tensor {name} missing")
        a = self.raw.pop(name)
        if tuple(a.shape) != tuple(shape):
            raise CheckpointError(f"{self.path}: tensor {name}: shape {list(a.shape)}, want {list(shape)}")
        return a


class _Layer:
    pass


class Model:
    """A loaded checkpoint (load_model) and mlx-lm's decode step in float64."""

    hf_qk_l2norm = False  # True: transformers' q/k L2 norm (eps 1e-6 inside the sum), to measure mlx-lm's

    def __init__(self, path):
        with open(os.path.join(path, "config.json")) as f:
            self.config = c = Config(json.load(f), path)
        raw = _read_checkpoint(path)
        for k in [k for k in raw if k.startswith("model.visual.") or k.startswith("mtp.")]:
            del raw[k]
        w = _Weights(raw, path)
        p = "model." if c.next else "model.language_model."
        D, hd, kd = c.D, c.hd, c.Hk * c.dk
        self.embed = w.take(p + "embed_tokens.weight", (c.vocab, D))
        self.norm = 1.0 + w.take(p + "norm.weight", (D,))
        self.lm_head = self.embed if c.tie else w.take("lm_head.weight", (c.vocab, D))
        self.layers = []
        for i in range(c.n_layers):
            L, q = _Layer(), f"{p}layers.{i}."
            L.linear, L.moe = c.linear[i], c.moe[i]
            L.in_norm = 1.0 + w.take(q + "input_layernorm.weight", (D,))
            L.post_norm = 1.0 + w.take(q + "post_attention_layernorm.weight", (D,))
            if L.linear:
                a = q + "linear_attn."
                if c.next:
                    L.qkvz = w.take(a + "in_proj_qkvz.weight", (2 * kd + 2 * c.Hv * c.dv, D))
                    L.ba = w.take(a + "in_proj_ba.weight", (2 * c.Hv, D))
                else:
                    L.qkv = w.take(a + "in_proj_qkv.weight", (c.conv_dim, D))
                    L.z = w.take(a + "in_proj_z.weight", (c.Hv * c.dv, D))
                    L.b = w.take(a + "in_proj_b.weight", (c.Hv, D))
                    L.a = w.take(a + "in_proj_a.weight", (c.Hv, D))
                L.conv = w.take(a + "conv1d.weight", (c.conv_dim, 1, c.K))[:, 0, :]  # w[c, j]
                L.A_log = w.take(a + "A_log", (c.Hv,))
                L.dt_bias = w.take(a + "dt_bias", (c.Hv,))
                L.gnorm = w.take(a + "norm.weight", (c.dv,))  # not zero-centred: as stored
                L.out = w.take(a + "out_proj.weight", (D, c.Hv * c.dv))
            else:
                a = q + "self_attn."
                L.q = w.take(a + "q_proj.weight", (2 * c.Hq * hd, D))
                L.k = w.take(a + "k_proj.weight", (c.Hkv * hd, D))
                L.v = w.take(a + "v_proj.weight", (c.Hkv * hd, D))
                L.o = w.take(a + "o_proj.weight", (D, c.Hq * hd))
                L.q_norm = 1.0 + w.take(a + "q_norm.weight", (hd,))
                L.k_norm = 1.0 + w.take(a + "k_norm.weight", (hd,))
            m = q + "mlp."
            if L.moe:
                E, I, Is = c.E, c.I_moe, c.I_shared
                L.router = w.take(m + "gate.weight", (E, D))
                if c.next:
                    L.eg = np.stack([w.take(f"{m}experts.{e}.gate_proj.weight", (I, D)) for e in range(E)])
                    L.eu = np.stack([w.take(f"{m}experts.{e}.up_proj.weight", (I, D)) for e in range(E)])
                    L.ed = np.stack([w.take(f"{m}experts.{e}.down_proj.weight", (D, I)) for e in range(E)])
                else:
                    gu = w.take(m + "experts.gate_up_proj", (E, 2 * I, D))
                    L.eg, L.eu = gu[:, :I], gu[:, I:]
                    L.ed = w.take(m + "experts.down_proj", (E, D, I))
                L.sg = w.take(m + "shared_expert.gate_proj.weight", (Is, D))
                L.su = w.take(m + "shared_expert.up_proj.weight", (Is, D))
                L.sd = w.take(m + "shared_expert.down_proj.weight", (D, Is))
                L.seg = w.take(m + "shared_expert_gate.weight", (1, D))[0]
            else:
                L.gate = w.take(m + "gate_proj.weight", (c.I, D))
                L.up = w.take(m + "up_proj.weight", (c.I, D))
                L.down = w.take(m + "down_proj.weight", (D, c.I))
            self.layers.append(L)
        if c.tie:
            raw.pop("lm_head.weight", None)  # mlx-lm's sanitize drops it
        if raw:
            raise CheckpointError(f"{path}: {len(raw)} tensors not used by the model, e.g. {sorted(raw)[:4]}")

    # --- caches

    def make_cache(self):
        """mlx-lm's make_cache: an empty ArraysCache per GDN layer, KVCache per attention layer."""
        return [ArraysCache() if L.linear else KVCache() for L in self.layers]

    def check_cache(self, cache):
        """Raises CacheMismatchError unless cache fits this model: one entry per layer of the
        layer's class, mlx-lm's shapes, the same length T in every attention layer."""
        c = self.config
        if len(cache) != len(self.layers):
            raise CacheMismatchError(f"cache has {len(cache)} layers, the model {len(self.layers)}")
        lengths = set()
        for i, (L, e) in enumerate(zip(self.layers, cache)):
            want = ArraysCache if L.linear else KVCache
            if type(e) is not want:
                raise CacheMismatchError(f"layer {i}: {type(e).__name__}, the model's layer needs {want.__name__}")
            if L.linear:
                conv, rec = e.cache
                if (conv is None) != (rec is None):
                    raise CacheMismatchError(f"layer {i}: conv state and recurrent state must be both set "
                                             "or both empty")
                for name, a, shape in (("conv state", conv, (1, c.K - 1, c.conv_dim)),
                                       ("recurrent state", rec, (1, c.Hv, c.dv, c.dk))):
                    if a is not None and a.shape != shape:
                        raise CacheMismatchError(f"layer {i}: {name} {list(a.shape)}, want {list(shape)}")
            elif e.keys is not None:
                shape = (1, c.Hkv, e.offset, c.hd)
                if e.keys.shape != shape or e.values.shape != shape:
                    raise CacheMismatchError(f"layer {i}: keys {list(e.keys.shape)}, values "
                                             f"{list(e.values.shape)}, want {list(shape)}")
                lengths.add(e.offset)
            else:
                lengths.add(0)
        if len(lengths) > 1:
            raise CacheMismatchError(f"attention layers hold different lengths {sorted(lengths)}")

    # --- decode

    def step(self, token, cache):
        """Runs one token through the model, updating cache in place (mlx-lm's decode step);
        returns the next-token logits [vocab] float64. token: int id; cache: make_cache() or
        load_prompt_cache(...).cache, checked first (CacheMismatchError)."""
        self.check_cache(cache)
        c = self.config
        if not 0 <= int(token) < c.vocab:
            raise MLXRefError(f"token {token} outside the vocabulary of {c.vocab}")
        x = self.embed[int(token)]
        for L, e in zip(self.layers, cache):
            h = _rms(x, L.in_norm, c.eps)
            x = x + (self._gdn(L, h, e) if L.linear else self._attention(L, h, e))
            x = x + self._mlp(L, _rms(x, L.post_norm, c.eps))
        return self.lm_head @ _rms(x, self.norm, c.eps)

    def decode(self, tokens, cache):
        """step() for each token in turn: logits [len(tokens), vocab] float64."""
        return np.stack([self.step(t, cache) for t in tokens])

    def _rope(self, x, pos):
        c = self.config
        half = c.rope_dims // 2
        theta = pos * c.theta ** (-np.arange(half) / half)
        cos, sin = np.cos(theta), np.sin(theta)
        x1, x2 = x[:, :half], x[:, half:c.rope_dims]
        return np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos, x[:, c.rope_dims:]], axis=1)

    def _attention(self, L, x, e):
        c = self.config
        qg = (L.q @ x).reshape(c.Hq, 2 * c.hd)
        q, gate = qg[:, :c.hd], qg[:, c.hd:].reshape(-1)
        k = _rms((L.k @ x).reshape(c.Hkv, c.hd), L.k_norm, c.eps)
        v = (L.v @ x).reshape(c.Hkv, c.hd)
        q = _rms(q, L.q_norm, c.eps)
        pos = e.offset
        q, k = self._rope(q, pos), self._rope(k, pos)
        e.append(k, v)
        kv_head = np.arange(c.Hq) // (c.Hq // c.Hkv)
        K, V = e.keys[0][kv_head], e.values[0][kv_head]  # [Hq, T+1, hd]
        s = np.einsum("hd,htd->ht", q, K) * c.hd ** -0.5
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        o = np.einsum("ht,htd->hd", p, V).reshape(-1)
        return L.o @ (o * _sigmoid(gate))

    def _gdn(self, L, x, e):
        c = self.config
        r, kd = c.Hv // c.Hk, c.Hk * c.dk
        if c.next:  # per key head: [q | k | v of its r value heads | z of them], [b of r | a of r]
            g = (L.qkvz @ x).reshape(c.Hk, -1)
            v0, z0 = 2 * c.dk, 2 * c.dk + r * c.dv
            mixed = np.concatenate([g[:, :c.dk].ravel(), g[:, c.dk:v0].ravel(), g[:, v0:z0].ravel()])
            z = g[:, z0:].reshape(c.Hv, c.dv)
            ba = (L.ba @ x).reshape(c.Hk, 2 * r)
            b, a = ba[:, :r].reshape(c.Hv), ba[:, r:].reshape(c.Hv)
        else:
            mixed, z = L.qkv @ x, (L.z @ x).reshape(c.Hv, c.dv)
            b, a = L.b @ x, L.a @ x
        conv = e.cache[0][0] if e.cache[0] is not None else np.zeros((c.K - 1, c.conv_dim))
        X = np.vstack([conv, mixed[None]])  # [K, C], oldest first
        e.cache[0] = X[1:][None].copy()
        co = _silu(np.einsum("cj,jc->c", L.conv, X))
        q, k = co[:kd].reshape(c.Hk, c.dk), co[kd:2 * kd].reshape(c.Hk, c.dk)
        v = co[2 * kd:].reshape(c.Hv, c.dv)
        if self.hf_qk_l2norm:
            q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6) * c.dk ** -0.5
            k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
        else:
            q = q / c.dk / np.sqrt((q * q).mean(-1, keepdims=True) + 1e-6)
            k = k * c.dk ** -0.5 / np.sqrt((k * k).mean(-1, keepdims=True) + 1e-6)
        beta = _sigmoid(b)
        decay = np.exp(-np.exp(L.A_log) * np.logaddexp(a + L.dt_bias, 0.0))
        state = e.cache[1][0] if e.cache[1] is not None else np.zeros((c.Hv, c.dv, c.dk))
        y, state = gated_delta_step(q, k, v, decay, beta, state)
        e.cache[1] = state[None]
        return L.out @ (_silu(z) * _rms(y, L.gnorm, c.eps)).reshape(-1)

    def _mlp(self, L, x):
        c = self.config
        if not L.moe:
            return L.down @ (_silu(L.gate @ x) * (L.up @ x))
        logits = L.router @ x
        p = np.exp(logits - logits.max())
        p /= p.sum()
        idx = np.argsort(-p, kind="stable")[:c.topk]
        s = p[idx] / p[idx].sum() if c.norm_topk else p[idx]
        y = sum(s[j] * (L.ed[ex] @ (_silu(L.eg[ex] @ x) * (L.eu[ex] @ x))) for j, ex in enumerate(idx))
        return y + _sigmoid(L.seg @ x) * (L.sd @ (_silu(L.sg @ x) * (L.su @ x)))


def load_model(path):
    """Loads a Hugging Face checkpoint directory (config.json + safetensors) of qwen3_next,
    qwen3_5 or qwen3_5_moe as a Model; CheckpointError names what does not fit."""
    return Model(path)


def gated_delta_step(q, k, v, g, beta, state):
    """mlx-lm's single-step gated delta rule (gated_delta.py, _gated_delta_step_ops and the Metal
    kernel), float64. q, k [Hk, Dk] (already normalised and scaled); v [Hv, Dv]; g, beta [Hv];
    state [Hv, Dv, Dk]. Value head h reads key head h // (Hv / Hk). Returns (y [Hv, Dv], new state)."""
    Hv, Hk = v.shape[0], k.shape[0]
    kh = np.arange(Hv) // (Hv // Hk)
    qq, kk = q[kh], k[kh]
    M = g[:, None, None] * state
    delta = beta[:, None] * (v - np.einsum("hvk,hk->hv", M, kk))
    M = M + delta[:, :, None] * kk[:, None, :]
    return np.einsum("hvk,hk->hv", M, qq), M


def _rms(x, w, eps):
    return w * (x / np.sqrt((x * x).mean(-1, keepdims=True) + eps))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _silu(x):
    return x * _sigmoid(x)


# ---------------------------------------------------------------------------------------------
# caches and prompt-cache files


class KVCache:
    """mlx-lm's KVCache for one sequence: keys, values [1, Hkv, T, head_dim] float64 (keys after
    k_norm and RoPE) or None while empty; offset = T."""

    def __init__(self, keys=None, values=None):
        self.keys, self.values = keys, values

    @property
    def offset(self):
        return 0 if self.keys is None else self.keys.shape[2]

    def append(self, k, v):
        """Adds one position: k, v [Hkv, head_dim]."""
        k, v = k[None, :, None, :], v[None, :, None, :]
        self.keys = k if self.keys is None else np.concatenate([self.keys, k], axis=2)
        self.values = v if self.values is None else np.concatenate([self.values, v], axis=2)


class ArraysCache:
    """mlx-lm's ArraysCache(size=2) of a GDN layer for one sequence: cache[0] the conv state
    [1, K-1, conv_dim], cache[1] the recurrent state [1, Hv, Dv, Dk], float64, or None while
    empty. left_padding and lengths (batch decoding) are always None here."""

    def __init__(self, conv=None, recurrent=None):
        self.cache = [conv, recurrent]


LoadedCache = namedtuple("LoadedCache", "cache metadata dtypes")
LoadedCache.__doc__ = """load_prompt_cache's result: cache (a list of KVCache / ArraysCache,
float64), metadata (the caller's {str: str}, the file's `1.<key>` entries), dtypes ({tensor
name: safetensors dtype string})."""

_ACT_ROLES = ("keys", "values", "conv")


def _state_names(i, cls, fmt):
    """Layer i's (tensor name, role) as tree_flatten names the state of class cls in format fmt."""
    if cls == "KVCache":
        return [(f"{i}.0", "keys"), (f"{i}.1", "values")]
    if fmt == CURRENT:
        return [(f"{i}.0.0", "conv"), (f"{i}.0.1", "recurrent"), (f"{i}.1", "empty"), (f"{i}.2", "empty")]
    return [(f"{i}.0", "conv"), (f"{i}.1", "recurrent")]


def _state_arrays(i, e):
    if isinstance(e, KVCache):
        if e.keys is None:
            raise CacheFileError(f"layer {i}: an empty KVCache has no state mlx-lm can save")
        return {"keys": e.keys, "values": e.values}
    if isinstance(e, ArraysCache):
        if e.cache[0] is None or e.cache[1] is None:
            raise CacheFileError(f"layer {i}: an ArraysCache with an empty entry cannot be saved")
        return {"conv": e.cache[0], "recurrent": e.cache[1], "empty": np.zeros((0,))}
    raise CacheFileError(f"layer {i}: {type(e).__name__} is not a cache these models make")


def save_prompt_cache(path, cache, metadata=None, fmt=CURRENT, activation_dtype="BF16"):
    """Writes cache (a list of KVCache / ArraysCache) as mlx-lm's save_prompt_cache would, in
    format fmt (CURRENT or LEGACY). Keys, values and conv state are stored as activation_dtype
    (BF16, F32 or F16), the recurrent state as F32, the empty left_padding / lengths of CURRENT as
    F32 [0]. metadata: {str: str}, stored as `1.<key>`; a key with a "." or of digits only is
    refused (mlx's tree_unflatten would read it back nested or as a list). path must end in
    .safetensors (mlx appends it otherwise, and mx.load chooses the format by it). On the test
    checkpoints a BF16 file moves the next token's logits by about 6e-3 (mostly through the conv
    state), F16 by 8e-4, F32 by less than 2e-7 (test_mlxlm_ref.py)."""
    if fmt not in FORMATS:
        raise CacheFileError(f"format {fmt!r}: one of {FORMATS}")
    if not str(path).endswith(".safetensors"):
        raise CacheFileError(f"{path}: a prompt-cache file name ends in .safetensors")
    if activation_dtype not in _FLOAT_DTYPES:
        raise CacheFileError(f"activation dtype {activation_dtype!r}: one of {_FLOAT_DTYPES}")
    metadata = dict(metadata or {})
    for k, v in metadata.items():
        if not isinstance(k, str) or not isinstance(v, str) or not k or "." in k or k.isdigit():
            raise CacheFileError(f"metadata {k!r}: keys are non-empty strings without '.', not all "
                                 "digits, and values are strings")
    tensors, meta = {}, {}
    for i, e in enumerate(cache):
        arrays = _state_arrays(i, e)
        for name, role in _state_names(i, type(e).__name__, fmt):
            tensors[name] = (activation_dtype if role in _ACT_ROLES else "F32", arrays[role])
        meta[f"0.{i}"] = ""
        meta[f"2.{i}"] = type(e).__name__
    for k, v in metadata.items():
        meta[f"1.{k}"] = v
    write_safetensors(path, tensors, meta)


def file_format(path):
    """CURRENT or LEGACY, from the tensor names of the file's ArraysCache layers (CacheFileError
    when it has none or they mix)."""
    tensors, meta = _read_cache_file(path)
    return _detect(path, tensors, _classes(path, meta))


def _read_cache_file(path):
    try:
        tensors, meta, _ = read_safetensors(path)
    except SafetensorsError as err:
        raise CacheFileError(str(err)) from err
    return tensors, meta


def _classes(path, meta):
    classes = {}
    for k, v in meta.items():
        m = re.fullmatch(r"2\.(\d+)", k)
        if m:
            classes[int(m.group(1))] = v
        elif not re.fullmatch(r"0\.\d+|1\..+", k):
            raise CacheFileError(f"{path}: metadata key {k!r} is not 0.<layer>, 1.<key> or 2.<layer>")
    n = len(classes)
    if n == 0 or sorted(classes) != list(range(n)):
        raise CacheFileError(f"{path}: metadata names classes for layers {sorted(classes)}, not 0..n-1")
    for i in range(n):
        if classes[i] == "MambaCache":
            raise CacheFileError(f"{path}: layer {i} is a MambaCache: a file of mlx-lm before e08ec15b "
                                 "(2026-02-03), which no later mlx-lm loads")
        if classes[i] not in ("KVCache", "ArraysCache"):
            raise CacheFileError(f"{path}: layer {i} is a {classes[i]}, not a KVCache or ArraysCache")
        if meta.get(f"0.{i}") != "":
            raise CacheFileError(f"{path}: metadata 0.{i} is {meta.get(f'0.{i}')!r}; both classes write \"\"")
    extra = [k for k in meta if k.startswith("0.") and int(k[2:]) >= n]
    if extra:
        raise CacheFileError(f"{path}: metadata {extra} for layers past {n - 1}")
    return [classes[i] for i in range(n)]


def _detect(path, tensors, classes):
    kinds = set()
    for i, cls in enumerate(classes):
        if cls == "ArraysCache":
            kinds.add(CURRENT if f"{i}.0.0" in tensors else LEGACY)
    if len(kinds) != 1:
        raise CacheFileError(f"{path}: cannot tell the format: ArraysCache layers in {sorted(kinds) or 'none'}")
    return kinds.pop()


_WHY = {CURRENT: "ArraysCache layers as i.0.0 / i.0.1 / i.1 / i.2: mlx-lm after PR #1632",
        LEGACY: "ArraysCache layers as i.0 / i.1: mlx-lm before PR #1632"}


def load_prompt_cache(path, fmt=CURRENT):
    """Reads a prompt-cache file of format fmt (CURRENT or LEGACY) as mlx-lm's load_prompt_cache
    would, with stricter checks: a file of the other format raises CacheFormatError naming both,
    any other deviation from what save_prompt_cache writes (metadata keys, class names, tensor
    names, dtypes, B != 1, non-empty left_padding / lengths) raises CacheFileError. Returns
    LoadedCache(cache, metadata, dtypes); the arrays are the stored values widened to float64. (A
    file without ArraysCache layers is the same in both formats.)"""
    if fmt not in FORMATS:
        raise CacheFileError(f"format {fmt!r}: one of {FORMATS}")
    if not str(path).endswith(".safetensors"):
        raise CacheFileError(f"{path}: mx.load reads a prompt cache only from a .safetensors name")
    tensors, meta = _read_cache_file(path)
    classes = _classes(path, meta)
    got = _detect(path, tensors, classes) if "ArraysCache" in classes else fmt
    if got != fmt:
        raise CacheFormatError(f"{path}: a {got} mlx-lm prompt-cache file ({_WHY[got]}), not the "
                               f"{fmt} format asked for")
    cache, dtypes, seen = [], {}, set()
    for i, cls in enumerate(classes):
        arrays = {}
        for name, role in _state_names(i, cls, fmt):
            if name not in tensors:
                raise CacheFileError(f"{path}: layer {i} ({cls}, {fmt} format): tensor {name} missing")
            dt, a = tensors[name]
            seen.add(name)
            dtypes[name] = dt
            if role == "empty":
                if dt != "F32" or a.shape != (0,):
                    raise CacheFileError(f"{path}: tensor {name}: {dt} {list(a.shape)}; a single-sequence "
                                         "cache stores left_padding / lengths as F32 [0]")
                continue
            want_nd = 3 if role == "conv" else 4
            if dt not in _FLOAT_DTYPES or a.ndim != want_nd or a.shape[0] != 1:
                raise CacheFileError(f"{path}: tensor {name} ({role}): {dt} {list(a.shape)}, want a float "
                                     f"{want_nd}-D array with batch 1")
            arrays[role] = to_float64(dt, a)
        if cls == "KVCache":
            if arrays["keys"].shape[:3] != arrays["values"].shape[:3]:
                raise CacheFileError(f"{path}: layer {i}: keys {list(arrays['keys'].shape)} and values "
                                     f"{list(arrays['values'].shape)} disagree")
            cache.append(KVCache(arrays["keys"], arrays["values"]))
        else:
            cache.append(ArraysCache(arrays["conv"], arrays["recurrent"]))
    extra = sorted(set(tensors) - seen)
    if extra:
        raise CacheFileError(f"{path}: tensors {extra[:6]} belong to no layer's {fmt}-format state")
    metadata = {k[2:]: v for k, v in meta.items() if k.startswith("1.")}
    return LoadedCache(cache, metadata, dtypes)

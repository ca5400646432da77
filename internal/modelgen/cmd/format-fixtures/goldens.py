# Transformers goldens of the format fixture set (modelgen.FormatFixtures, written by the command
# beside this file), and a self-check of this script's readers that needs numpy only.
#
#   go run ./internal/modelgen/cmd/format-fixtures FIXTURES
#   python3 goldens.py FIXTURES testdata/goldens/model_goldens.safetensors OUT_DIR   # numpy, torch, transformers
#   python3 goldens.py --check FIXTURES                                             # numpy only
#
# Every checkpoint is read back as a loader must, independently of strata: this file's own
# safetensors reader; its own decoders, written from the formats' definitions (E4M3 from its bit
# layout, E2M1 and E8M0 likewise, MLX affine scale * code + bias with codes read bit by bit, FP8
# e4m3(code) * the scale of its 128 x 128 block or of the tensor); the names of mlx-vlm, mlx-lm and
# the FP8 releases mapped back to transformers' Qwen4ExpForCausalLM / Qwen3NextForCausalLM (experts
# fused as gate_up_proj [E, 2I, D] and down_proj [E, D, I], the n-gram table's row blocks joined
# into one table, conv1d [C, K, 1] back to [C, 1, K]); the zero-centred norm gains a file stores as
# bf16(1 + w) read as stored - 1 in float64, the convention taken from how the file was written
# (fixtures.json gains_written) and checked against the stored values and against strata's
# reading (gains_read). Each decoded tensor is compared with the bf16 source checkpoint's within
# the error its format allows (a name or layout mistake shows as an O(1) difference).
#
# Goldens (torch + transformers 5.17): transformers' model code run in float64 on the CPU on those
# weights, prompts a and b (the input ids of model_goldens.safetensors): every .float() of a float64
# tensor and every float32 softmax of one stay in float64, the gated norm and the rotary embedding
# compute in float64, the Gated DeltaNet core is a float64 token-by-token recurrence (the modeling
# module's torch_chunk_gated_delta_rule global replaced, value head h reading qk head h // (Hv/Hk)),
# and every top-k (the router's, the QSA indexer's blocks) is a stable sort, exact ties to the lower
# index. Before running, the state dict's keys and shapes are compared with the weights read, and
# the PLE int64 buffers a file stores with the ones transformers derives. The logits, rounded to
# float32, go to OUT_DIR/goldens.safetensors as NAME.a.logits [35, vocab] and NAME.b.logits [61,
# vocab] (the rows A_ROWS and B_ROWS of prompts a and b, saved as a.rows and b.rows);
# OUT_DIR/report.txt logs every check and transformers' own float32 path against float64.
#
# --check (numpy only) runs everything but transformers: each fixture's sha256 against
# fixtures.json, the readers, the gains' convention, the comparison with the source, and, where
# FIXTURES/_float32/NAME exists (format-fixtures -dequantized), equality in float32 with strata's
# own float32 copy of the fixture's weights (modelgen.Dequantize): the two decoders agree bit for
# bit.
import hashlib
import json
import os
import sys
import tempfile
import traceback

import numpy as np

# The rows of the logits kept: strides prime to every tile size, the rows where the chunked cases
# split (prompt a in calls of 37 + 1 + rest) and the last.
A_ROWS = sorted(set(range(0, 96, 3)) | {37, 38, 95})
B_ROWS = list(range(0, 300, 5)) + [299]

# ----------------------------------------------------------------------------------------------
# Element formats, from their definitions.


def e4m3_values():
    """E4M3 (float8_e4m3fn) by code: bit 7 sign, bits 6..3 exponent e (bias 7), bits 2..0 mantissa m:
    2^(e-7) (1 + m/8) for e > 0, m 2^-9 for e = 0; 0x7f and 0xff are NaN (no infinities)."""
    v = np.zeros(256)
    for c in range(256):
        e, m = (c >> 3) & 15, c & 7
        x = m * 2.0**-9 if e == 0 else 2.0 ** (e - 7) * (1 + m / 8)
        if c & 0x7F == 0x7F:
            x = np.nan
        v[c] = -x if c & 0x80 else x
    return v


def e2m1_values():
    """E2M1 by code: bit 3 sign, bits 2..1 exponent e (bias 1), bit 0 mantissa m: 2^(e-1) (1 + m/2)
    for e > 0, m / 2 for e = 0."""
    v = np.zeros(16)
    for c in range(16):
        e, m = (c >> 1) & 3, c & 1
        x = m / 2 if e == 0 else 2.0 ** (e - 1) * (1 + m / 2)
        v[c] = -x if c & 8 else x
    return v


E4M3, E2M1 = e4m3_values(), e2m1_values()


def e8m0(s):
    """E8M0 scales: 2^(s - 127); 255 is not a number (OCP), read as +inf as mlx does."""
    s = s.astype(np.int64)
    return np.where(s == 255, np.inf, np.ldexp(1.0, s - 127))


def self_test():
    assert E4M3[0x7E] == 448 and E4M3[0x08] == 2.0**-6 and E4M3[0x01] == 2.0**-9 and E4M3[0x38] == 1 and E4M3[0xC0] == -2
    assert np.isnan(E4M3[0x7F]) and np.isnan(E4M3[0xFF]) and np.all(np.diff(E4M3[:0x7F]) > 0)
    assert list(E2M1[:8]) == [0, 0.5, 1, 1.5, 2, 3, 4, 6] and list(E2M1[8:]) == [-0.0, -0.5, -1, -1.5, -2, -3, -4, -6]
    assert e8m0(np.array([127, 130, 0])).tolist() == [1, 8, 2.0**-127]
    w = np.array([[0b11100100_01010011_00100001_10000111]], dtype=np.uint32)  # nibbles low first
    assert unpack(w, 4).tolist() == [[7, 8, 1, 2, 3, 5, 4, 14]]
    assert unpack(w, 8).tolist() == [[0x87, 0x21, 0x53, 0xE4]]
    assert unpack(np.array([[0xFFFFFFFF, 0x1]], dtype=np.uint32), 3)[0, 10].item() == 0b111  # bit 30..32 straddles


# ----------------------------------------------------------------------------------------------
# safetensors

DTYPES = {"BF16": "<u2", "F16": "<f2", "F32": "<f4", "F64": "<f8", "U32": "<u4", "U8": "u1", "F8_E4M3": "u1", "I64": "<i8", "I32": "<i4"}


def read_safetensors(path):
    """(tensors, metadata): floats widened to float64 (bf16 by its bits), codes and integers as stored."""
    data = open(path, "rb").read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    out, dtypes = {}, {}
    meta = header.pop("__metadata__", {}) or {}
    for k, h in header.items():
        a, b = h["data_offsets"]
        raw = np.frombuffer(body[a:b], dtype=DTYPES[h["dtype"]])
        if h["dtype"] == "BF16":
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        if raw.dtype.kind == "f":
            raw = raw.astype(np.float64)
        out[k] = raw.reshape(h["shape"])
        dtypes[k] = h["dtype"]
    return out, dtypes, meta


def read_dir(path):
    tensors, dtypes, metas = {}, {}, []
    for f in sorted(os.listdir(path)):
        if f.endswith(".safetensors"):
            t, d, m = read_safetensors(os.path.join(path, f))
            tensors.update(t)
            dtypes.update(d)
            metas.append(m)
    return tensors, dtypes, metas


# ----------------------------------------------------------------------------------------------
# Decoders. Each returns float64 values and the largest error the format allows relative to the
# tensor's max |w| (for the comparison with the source).


def unpack(codes, bits):
    """Rows of a little-endian bit stream of uint32 words: element i is bits i*bits .. i*bits+bits-1."""
    c = codes.reshape(-1, codes.shape[-1]).astype(np.uint64)
    n = c.shape[-1] * 32 // bits
    pos = np.arange(n)[:, None] * bits + np.arange(bits)[None, :]
    q = ((c[:, pos // 32] >> (pos % 32).astype(np.uint64)) & 1) << np.arange(bits, dtype=np.uint64)
    return q.sum(-1).astype(np.int64).reshape(*codes.shape[:-1], n)


def dequant_affine(codes, scales, biases, bits, group):
    q = unpack(codes, bits).astype(np.float64)
    s, b = np.repeat(scales, group, axis=-1), np.repeat(biases, group, axis=-1)
    # half a step of (max - min) / (2^b - 1), the step widened up to 1.5x where mlx rounds the
    # group edge to a whole number of steps
    return s * q + b, 1.5 / (2**bits - 1) + 0.01


def dequant_float_mode(codes, scales, mode):
    bits, group = {"mxfp4": (4, 32), "nvfp4": (4, 16), "mxfp8": (8, 32)}[mode]
    q = unpack(codes, bits)
    vals = E4M3[q] if bits == 8 else E2M1[q]
    sc = E4M3[scales] if mode == "nvfp4" else e8m0(scales)
    # E8M0 scales round log2(amax / max code) to an integer, so up to 2^0.5 of the range clips.
    return vals * np.repeat(sc, group, axis=-1), {"mxfp4": 0.35, "nvfp4": 0.2, "mxfp8": 0.35}[mode]


def dequant_fp8_blocks(codes, scale_inv):
    n, k = codes.shape
    gn, gk = -(-n // 128), -(-k // 128)
    if scale_inv.shape != (gn, gk):
        raise SystemExit(f"FP8 scale grid {scale_inv.shape}, want {(gn, gk)} for {codes.shape}")
    s = np.repeat(np.repeat(scale_inv, 128, axis=0)[:n], 128, axis=1)[:, :k]
    return E4M3[codes] * s, 0.07


def dequant_fp8_tensor(codes, scale):
    if scale.size != 1:
        raise SystemExit(f"FP8 tensor scale of shape {scale.shape}")
    return E4M3[codes] * scale.reshape(()), 0.07


def module_quant(cfg, mod):
    """(mode, bits, group) an MLX loader reads for module mod: its own entry (an entry without mode is
    affine, as mlx's to_quantized defaults to it) or the block's defaults."""
    block = cfg.get("quantization") or cfg.get("text_config", {}).get("quantization")
    defaults = {"affine": (4, 64), "mxfp4": (4, 32), "nvfp4": (4, 16), "mxfp8": (8, 32)}
    e = block.get(mod, True)
    if e is True:
        e = block
        mode = block.get("mode") or "affine"
    else:
        mode = e.get("mode") or "affine"
    bits = e.get("bits") or defaults[mode][0]
    group = e.get("group_size") or defaults[mode][1]
    return mode, bits, group


# ----------------------------------------------------------------------------------------------
# Names and layouts, mapped to transformers' CausalLM state dict (the canonical form here).


def canonical(name):
    """The transformers CausalLM name of a tensor, or None for one the text model does not use."""
    for skip in ("vision_tower.", "model.visual.", "mtp."):
        if name.startswith(skip):
            return None
    for a, b in (("language_model.model.", "model."), ("language_model.lm_head.", "lm_head."), ("model.language_model.", "model.")):
        if name.startswith(a):
            return b + name[len(a) :]
    return name


ZERO_CENTRED = {
    # transformers' RMSNorms applied as (1 + w) (Qwen4ExpTextRMSNorm, Qwen3NextRMSNorm); the gated
    # norm of the GDN (linear_attn.norm) is applied as stored.
    "qwen4_exp": ("hc_norm.weight", "q_norm.weight", "k_norm.weight", "q_layernorm.weight", "k_layernorm.weight",
                  "norm_key.weight", "norm_query.weight", "norm_conv.weight"),
    "qwen3_next": ("input_layernorm.weight", "post_attention_layernorm.weight", "q_norm.weight", "k_norm.weight"),
}


def is_zero_centred(family, name):
    return name.endswith(ZERO_CENTRED[family]) or (family == "qwen3_next" and name == "model.norm.weight")


def family_of(cfg):
    mt = cfg["model_type"]
    return "qwen4_exp" if mt.startswith("qwen4_exp") else mt


def read_weights(path, gains=None):
    """The text model's weights of the checkpoint in path as float64 under canonical names (int64
    buffers as stored), with each decoded tensor's error bound. gains ("w" or "1+w", or None for
    float32 copies, which store w) says how the file stores the zero-centred gains; the stored
    values' own reading is returned beside it."""
    cfg = json.load(open(os.path.join(path, "config.json")))
    fam = family_of(cfg)
    raw, dtypes, metas = read_dir(path)
    mlx = any(m.get("format") == "mlx" for m in metas)
    used = set()
    out, bound = {}, {}
    for k in sorted(raw):
        if k.endswith((".scales", ".biases", ".weight_scale_inv")) or k.endswith("ngram_embedding.weight_scale"):
            continue
        v, mod = raw[k], (k[: -len(".weight")] if k.endswith(".weight") else k)
        err = 0.0
        if mod + ".scales" in raw:
            mode, bits, group = module_quant(cfg, mod)
            sc = raw[mod + ".scales"]
            if dtypes[mod + ".scales"] == "U8":
                if mode == "affine" or mod + ".biases" in raw:
                    raise SystemExit(f"{k}: U8 scales of a float mode, but its entry reads {mode}")
                v, err = dequant_float_mode(v, sc, mode)
            else:
                if mode != "affine":
                    raise SystemExit(f"{k}: float scales, but its entry reads {mode}")
                v, err = dequant_affine(v, sc, raw[mod + ".biases"], bits, group)
                used.add(mod + ".biases")
            used.add(mod + ".scales")
            if v.shape[-1] % group != 0 or v.shape[-1] // group != sc.shape[-1]:
                raise SystemExit(f"{k}: {sc.shape[-1]} groups of {group} for {v.shape[-1]} inputs")
        elif dtypes[k] == "F8_E4M3":
            if mod + ".weight_scale_inv" in raw:
                v, err = dequant_fp8_blocks(v, raw[mod + ".weight_scale_inv"])
                used.add(mod + ".weight_scale_inv")
            else:
                scale = k[: k.index("ngram_embedding.")] + "ngram_embedding.weight_scale"
                v, err = dequant_fp8_tensor(v, raw[scale])
                used.add(scale)
        name = canonical(k)
        if name is None:
            continue
        if mlx and "conv1d.weight" in name and v.ndim == 3 and v.shape[2] == 1:
            v = v.transpose(0, 2, 1)  # [C, K, 1] -> [C, 1, K]
        out[name], bound[name] = v, err
    unused = sorted(n for n in raw if n.endswith((".scales", ".biases", ".weight_scale_inv", "weight_scale")) and n not in used and canonical(n))
    if unused:
        raise SystemExit(f"{path}: scales without their weights: {unused[:5]}")
    # The zero-centred gains: the stored values' reading (their mean over every element, w about
    # 0, 1 + w about 1 in these files, split at 0.5) must be the writer's.
    zc = [n for n in out if is_zero_centred(fam, n)]
    mean = float(np.concatenate([out[n].ravel() for n in zc]).mean())
    read = "1+w" if mean >= 0.5 else "w"
    if gains is not None and read != gains:
        raise SystemExit(f"{path}: the zero-centred gains' mean is {mean:.3f} ({read}), the file was written storing {gains}")
    if read == "1+w":
        for n in zc:
            out[n] = out[n] - 1.0
            bound[n] = 0.02  # bf16(1 + w) keeps w to 2^-9 near 1
    join_tables(out, bound)
    fuse_experts(out, bound)
    return cfg, out, bound, (mean, len(zc))


def join_tables(out, bound):
    """The n-gram table's row blocks (shard_{k} or shards.{k}) joined into transformers' one table."""
    parts = {}
    for n in list(out):
        for sep in (".ngram_embedding.shard_", ".ngram_embedding.shards."):
            if sep in n:
                pre, rest = n.split(sep)
                parts.setdefault(pre, {})[int(rest.split(".")[0])] = n
    for pre, ks in parts.items():
        if sorted(ks) != list(range(len(ks))):
            raise SystemExit(f"{pre}: row blocks {sorted(ks)[:5]}...")
        name = pre + ".ngram_embedding.weight"
        out[name] = np.concatenate([out.pop(ks[i]) for i in range(len(ks))], axis=0)
        bound[name] = max(bound.pop(ks[i]) for i in range(len(ks)))


def fuse_experts(out, bound):
    """Experts stacked under switch_mlp or stored one by one, fused as transformers 5 holds them."""
    pres = {n[: n.index(".mlp.")] for n in out if ".mlp.switch_mlp." in n or ".mlp.experts.0." in n}
    for pre in sorted(pres):
        if pre + ".mlp.switch_mlp.gate_proj.weight" in out:
            g, u, d = (out.pop(pre + ".mlp.switch_mlp.%s_proj.weight" % p) for p in ("gate", "up", "down"))
            b = max(bound.pop(pre + ".mlp.switch_mlp.%s_proj.weight" % p) for p in ("gate", "up", "down"))
        else:
            E = 0
            while pre + ".mlp.experts.%d.gate_proj.weight" % E in out:
                E += 1
            names = {p: [pre + ".mlp.experts.%d.%s_proj.weight" % (e, p) for e in range(E)] for p in ("gate", "up", "down")}
            b = max(bound.pop(n) for ns in names.values() for n in ns)
            g, u, d = (np.stack([out.pop(n) for n in names[p]]) for p in ("gate", "up", "down"))
        out[pre + ".mlp.experts.gate_up_proj"] = np.concatenate([g, u], axis=1)
        out[pre + ".mlp.experts.down_proj"] = d
        bound[pre + ".mlp.experts.gate_up_proj"] = bound[pre + ".mlp.experts.down_proj"] = b


def compare_source(w, bound, src):
    """The decoded weights against the source's, each within its format's bound of max |w|."""
    if sorted(k for k in w if w[k].dtype.kind == "f") != sorted(k for k in src if src[k].dtype.kind == "f"):
        raise SystemExit(f"names differ from the source's: {sorted(set(w) ^ set(src))[:8]}")
    worst, bad = (0.0, ""), []
    for k, v in src.items():
        if v.dtype.kind != "f":
            if k in w and not np.array_equal(w[k], v):
                bad.append(f"{k}: int64 buffer differs from the source's")
            continue
        if w[k].shape != v.shape:
            bad.append(f"{k}: shape {w[k].shape}, source {v.shape}")
            continue
        r = float(np.abs(w[k] - v).max() / max(np.abs(v).max(), 1e-30))
        worst = max(worst, (r, k))
        if r > bound[k] + 1e-12:
            bad.append(f"{k}: max|diff|/max|w| {r:.3g} > {bound[k]:.3g}")
    if bad:
        raise SystemExit("decoded weights far from the source: " + "; ".join(bad[:8]))
    return worst


def sha256(path):
    return hashlib.sha256(open(os.path.join(path, "model.safetensors"), "rb").read()).hexdigest()


def load_fixture(fixtures, e, log):
    """A fixture's weights, checked against the manifest and its source."""
    path = os.path.join(fixtures, e["name"])
    if sha256(path) != e["sha256"]:
        raise SystemExit(f"{e['name']}: model.safetensors is not the one fixtures.json describes (sha256)")
    if e["gains_written"] != e["gains_read"]:
        raise SystemExit(f"{e['name']}: written storing the gains as {e['gains_written']}, strata reads {e['gains_read']}")
    cfg, w, bound, (mean, nzc) = read_weights(path, e["gains_written"])
    log(f"  {e['kind']} {e.get('quantization', 'bf16')}: {len(w)} tensors; zero-centred gains stored as {e['gains_written']} (mean {mean:.3f} over {nzc})")
    if e["name"] != e["source"]:
        _, src, _, _ = read_weights(os.path.join(fixtures, e["source"]), "w")
        r, k = compare_source(w, bound, src)
        log(f"  decoded vs source weights: worst max|diff|/max|w| {r:.3g} ({k})")
    return cfg, w


def check(fixtures):
    """The numpy part alone: every fixture read, checked and, where a float32 copy exists, compared
    bit for bit with strata's decoding."""
    self_test()
    manifest = json.load(open(os.path.join(fixtures, "fixtures.json")))
    failed = []
    for e in manifest:
        print(e["name"], flush=True)
        try:
            _, w = load_fixture(fixtures, e, print)
            f32 = os.path.join(fixtures, "_float32", e["name"])
            if os.path.isdir(f32):
                _, g, _, _ = read_weights(f32)
                diff = [k for k in g if g[k].dtype.kind == "f" and not np.array_equal(w[k].astype(np.float32), g[k].astype(np.float32))]
                if sorted(g) != sorted(k for k in w if w[k].dtype.kind == "f") or diff:
                    raise SystemExit(f"differs from strata's float32 copy: {diff[:5]} {sorted(set(g) ^ set(w))[:5]}")
                print(f"  equal in float32 to strata's decoding ({len(g)} tensors)")
        except BaseException as ex:
            print(f"{e['name']}: FAILED: {ex}")
            failed.append(e["name"])
    print("checked", len(manifest), "fixtures; failed:", failed)
    return 1 if failed else 0


# ----------------------------------------------------------------------------------------------
# Goldens (torch, transformers).


def goldens(fixtures, prompts_path, out_dir):
    import torch
    import torch.nn.functional as F
    import transformers
    from safetensors.torch import load_file, save_file

    torch.set_grad_enabled(False)
    os.makedirs(out_dir, exist_ok=True)
    ids = load_file(prompts_path)
    prompts = {p: ids[p + ".input_ids"].long()[None] for p in ("a", "b")}
    report = open(os.path.join(out_dir, "report.txt"), "w")

    def log(*a):
        print(*a, flush=True)
        print(*a, file=report, flush=True)

    log("transformers", transformers.__version__, "torch", torch.__version__)
    self_test()

    calls = {}  # patched function -> calls in the run (each patch must be used)

    def counted(f):
        def g(*a, **k):
            calls[f.__name__] = calls.get(f.__name__, 0) + 1
            return f(*a, **k)
        g.__name__ = f.__name__
        return g

    @counted
    def gdn_rule64(query, key, value, g, beta, chunk_size=64, initial_state=None, output_final_state=False,
                   use_qk_l2norm_in_kernel=False, **kwargs):
        # [B, T, H, d] in; value head h reads qk head h // (Hv / Hk)
        if key.shape[2] != value.shape[2]:
            r = value.shape[2] // key.shape[2]
            query, key = query.repeat_interleave(r, dim=2), key.repeat_interleave(r, dim=2)
        q, k, v, g, beta = [x.transpose(1, 2).to(torch.float64) for x in (query, key, value, g, beta)]
        if use_qk_l2norm_in_kernel:
            q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6)
            k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
        q = q * q.shape[-1] ** -0.5
        B, H, T, dk = k.shape
        S = torch.zeros(B, H, dk, v.shape[-1], dtype=torch.float64) if initial_state is None else initial_state.to(torch.float64)
        o = torch.zeros(B, H, T, v.shape[-1], dtype=torch.float64)
        for t in range(T):
            S = S * g[:, :, t].exp()[..., None, None]
            delta = (v[:, :, t] - (S * k[:, :, t, :, None]).sum(-2)) * beta[:, :, t, None]
            S = S + k[:, :, t, :, None] * delta[..., None, :]
            o[:, :, t] = (S * q[:, :, t, :, None]).sum(-2)
        return o.transpose(1, 2).contiguous().to(query.dtype), (S if output_final_state else None)

    @counted
    def gated_norm64(self, hidden_states, gate=None):
        x = hidden_states.to(torch.float64)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        act = getattr(self, "activation", "silu")
        gt = gate.to(torch.float64)
        x = self.weight.to(torch.float64) * x * (torch.sigmoid(gt) if act == "sigmoid" else F.silu(gt))
        return x.to(hidden_states.dtype)

    @counted
    def rope64(self, x, position_ids):
        pid = position_ids
        while pid.dim() > 2:  # the multimodal rows: all equal for text, which makes mrope plain RoPE
            if not all(torch.equal(pid[0], pid[i]) for i in range(pid.shape[0])):
                raise SystemExit("position rows differ: not a text-only prompt")
            pid = pid[0]
        freqs = pid[0].to(torch.float64)[:, None] * self.inv64[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)[None]
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    _float, _softmax = torch.Tensor.float, F.softmax

    def float_keep64(self, *args, **kwargs):
        return self if self.dtype == torch.float64 else _float(self, *args, **kwargs)

    def softmax_keep64(x, dim=None, _stacklevel=3, dtype=None):
        if x.dtype == torch.float64 and dtype in (torch.float32, torch.float16, torch.bfloat16):
            dtype = torch.float64
        return _softmax(x, dim=dim, _stacklevel=_stacklevel, dtype=dtype)

    @counted
    def topk_stable(x, k, dim=-1, largest=True, sorted=True, **kwargs):
        # every top-k a stable sort: exact ties go to the lower index
        s = torch.sort(x, dim=dim, descending=largest, stable=True)
        return torch.return_types.topk((s.values.narrow(dim, 0, k), s.indices.narrow(dim, 0, k)))

    def build(path, dtype):
        # the model from the fixture's config.json without its quantization blocks (the weights
        # are given decoded; transformers is not to quantize anything)
        raw = json.load(open(os.path.join(path, "config.json")))
        for c in (raw, raw.get("text_config", {})):
            c.pop("quantization", None)
            c.pop("quantization_config", None)
        tmp = tempfile.mkdtemp()
        json.dump(raw, open(os.path.join(tmp, "config.json"), "w"))
        cfg = transformers.AutoConfig.from_pretrained(tmp)
        text = getattr(cfg, "text_config", cfg)
        text._attn_implementation = "eager"
        try:
            text._experts_implementation = "eager"
        except Exception:
            pass
        model = transformers.AutoModelForCausalLM.from_config(text)
        return model.to(dtype).eval(), text

    def state_for(model, w):
        """The weights in the model's state-dict form, checked key by key and shape by shape."""
        state = model.state_dict()
        w = dict(w)
        if not any(k.endswith("experts.gate_up_proj") for k in state):  # per-expert parameters
            for k in [k for k in w if k.endswith("mlp.experts.gate_up_proj")]:
                pre = k[: -len("gate_up_proj")]
                gu, dn = w.pop(k), w.pop(pre + "down_proj")
                I = gu.shape[1] // 2
                for e in range(gu.shape[0]):
                    w[f"{pre}{e}.gate_proj.weight"], w[f"{pre}{e}.up_proj.weight"] = gu[e, :I], gu[e, I:]
                    w[f"{pre}{e}.down_proj.weight"] = dn[e]
        for k, v in state.items():  # the PLE hash buffers: the file's must be transformers' own
            if v.dtype == torch.int64:
                if k in w and not np.array_equal(w[k], v.numpy()):
                    raise SystemExit(f"{k}: the file's values differ from transformers' {v.tolist()[:4]}...")
                w[k] = v.numpy()
        missing, extra = sorted(set(state) - set(w)), sorted(set(w) - set(state))
        bad = [f"{k} {w[k].shape} (model {tuple(state[k].shape)})" for k in state if k in w and tuple(state[k].shape) != w[k].shape]
        if missing or extra or bad:
            raise SystemExit(f"state dict mismatch: missing {missing[:8]} ({len(missing)}), unexpected {extra[:8]} ({len(extra)}), shapes {bad[:8]}")
        return w

    def run(path, w, dtype, patch):
        model, text = build(path, dtype)
        sd = state_for(model, w)
        model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)).to(dtype if v.dtype.kind == "f" else torch.int64) for k, v in sd.items()}, strict=True)
        patches = []
        if patch:
            dim = int(text.head_dim * text.rope_parameters.get("partial_rotary_factor", 1.0))
            inv64 = 1.0 / (text.rope_parameters["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
            classes, gdn = set(), 0
            for mod in model.modules():
                name = type(mod).__name__
                if name.endswith("GatedDeltaNet"):
                    home = sys.modules[type(mod).__module__]
                    if not hasattr(home, "torch_chunk_gated_delta_rule"):
                        raise SystemExit(f"{home.__name__} has no torch_chunk_gated_delta_rule")
                    classes.add((home, "torch_chunk_gated_delta_rule", gdn_rule64))
                    if hasattr(home, "torch_recurrent_gated_delta_rule"):
                        classes.add((home, "torch_recurrent_gated_delta_rule", gdn_rule64))
                    gdn += 1
                elif name.endswith("RMSNormGated"):
                    classes.add((type(mod), "forward", gated_norm64))
                elif name.endswith("RotaryEmbedding"):
                    mod.inv64 = inv64
                    classes.add((type(mod), "forward", rope64))
            if gdn == 0 or not any(c[2] is gated_norm64 for c in classes) or not any(c[2] is rope64 for c in classes):
                raise SystemExit(f"float64 patches incomplete: {gdn} GDN layers, {sorted(c[0].__name__ for c in classes)}")
            patches = sorted(classes, key=lambda c: (c[0].__name__, c[1])) + [
                (torch.Tensor, "float", float_keep64), (F, "softmax", softmax_keep64), (torch, "topk", topk_stable), (torch.Tensor, "topk", topk_stable)]
            log("  float64 patches:", gdn, "GDN layers,", ", ".join(f"{c[0].__name__}.{c[1]}" for c in patches))
        saved = [(o, n, getattr(o, n)) for o, n, _ in patches]
        calls.clear()
        try:
            for o, n, f in patches:
                setattr(o, n, f)
            logits = {p: model(input_ids=x, use_cache=False).logits[0] for p, x in prompts.items()}
        finally:
            for o, n, f in saved:
                setattr(o, n, f)
        if patch:
            log("  patched calls:", dict(sorted(calls.items())))
            unused = [f for f in ("gdn_rule64", "gated_norm64", "rope64", "topk_stable") if not calls.get(f)]
            if unused:
                raise SystemExit(f"float64 patches not called: {unused} (transformers' code paths changed)")
        return logits

    manifest = json.load(open(os.path.join(fixtures, "fixtures.json")))
    out, failed = {}, []
    for e in manifest:
        log(e["name"])
        try:
            path = os.path.join(fixtures, e["name"])
            _, w = load_fixture(fixtures, e, log)
            l64 = run(path, w, torch.float64, True)
            l32 = run(path, w, torch.float32, False)
        except BaseException:
            log(f"{e['name']}: FAILED\n{traceback.format_exc()}")
            failed.append(e["name"])
            continue
        for p, v in l64.items():
            assert v.dtype == torch.float64 and torch.isfinite(v).all()
            out[f"{e['name']}.{p}.logits"] = v[A_ROWS if p == "a" else B_ROWS].to(torch.float32).contiguous()
        d = (l32["b"].double() - l64["b"]).abs().max().item()
        log(f"{e['name']} (sha256 {e['sha256'][:16]}): a {tuple(l64['a'].shape)} b {tuple(l64['b'].shape)} mean|logit| {l64['b'].abs().mean().item():.4f}; "
            f"transformers fp32 (its own path) vs float64, prompt b: max|diff| {d:.3g}")
    out["a.rows"] = torch.tensor(A_ROWS, dtype=torch.int32)
    out["b.rows"] = torch.tensor(B_ROWS, dtype=torch.int32)
    save_file(out, os.path.join(out_dir, "goldens.safetensors"))
    log("wrote", len(out), "tensors; failed:", failed)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        sys.exit(check(sys.argv[2]))
    if len(sys.argv) != 4:
        sys.exit(__doc__ or "usage: goldens.py FIXTURES PROMPTS OUT_DIR | goldens.py --check FIXTURES")
    sys.exit(goldens(*sys.argv[1:4]))

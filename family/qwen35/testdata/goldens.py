# Transformers goldens of the generated Qwen3.5 checkpoints and their MLX conversions
# (family/qwen35/testdata/README.md says how they are made and what they hold).
#
#   python3 family/qwen35/testdata/goldens.py FIXTURES testdata/goldens/model_goldens.safetensors OUT_DIR
#
# FIXTURES holds one folder per checkpoint: NAME (a Hugging Face checkpoint in the published
# multimodal layout) and NAME-mlx4 (its MLX 4-bit conversion). Each is read back as a loader
# must: the MLX codes dequantized here with numpy (scale * q + bias per group, codes read bit by
# bit), the norms an MLX conversion stores as 1 + w read as stored - 1, the tensors renamed to
# transformers' text model (Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM). Transformers then runs
# prompts a and b (the input ids of model_goldens.safetensors) in float64 on the CPU: every
# .float() of a float64 tensor and every float32 softmax of one stay in float64, the gated norm
# and the rotary embedding compute in float64, the Gated DeltaNet core is a float64 token-by-token
# recurrence, and the router's top-k is a stable sort (exact ties to the lower expert index). The
# logits, rounded to float32, go to OUT_DIR/goldens.safetensors as NAME.a.logits [96, vocab] (every
# row) and NAME.b.logits [61, vocab] (the rows B_ROWS of prompt b, saved as b.rows: every fifth and
# the last); the states after prompt a of the Hugging Face checkpoints (not of their conversions)
# as NAME.a.<layer>.{conv,recurrent,k,v};
# OUT_DIR/report.txt compares each with transformers' own float32 path.
import json
import os
import sys
import traceback

import numpy as np
import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import load_file, save_file

torch.set_grad_enabled(False)
fixtures, golden_path, out_dir = sys.argv[1:4]
os.makedirs(out_dir, exist_ok=True)
ids = load_file(golden_path)
prompts = {p: ids[p + ".input_ids"].long()[None] for p in ("a", "b")}
report = open(os.path.join(out_dir, "report.txt"), "w")
# The rows of prompt b's logits kept: a stride prime to every tile size, and the last row.
B_ROWS = list(range(0, 300, 5)) + [299]


def log(*a):
    print(*a, flush=True)
    print(*a, file=report, flush=True)


log("transformers", transformers.__version__, "torch", torch.__version__)

SHIFTED = (".input_layernorm.weight", ".post_attention_layernorm.weight", ".norm.weight", ".q_norm.weight", ".k_norm.weight")


def dequant(codes, scales, biases, bits, group):
    """MLX affine: element i of a row is bits i*b..i*b+b-1 of the row's little-endian bit stream."""
    lead, words = codes.shape[:-1], codes.shape[-1]
    n = words * 32 // bits
    c = codes.reshape(-1, words).astype(np.uint64)
    bitpos = np.arange(n)[:, None] * bits + np.arange(bits)[None, :]  # [n, bits]
    w = c[:, bitpos // 32]  # [rows, n, bits]
    q = ((w >> (bitpos % 32).astype(np.uint64)) & 1) << np.arange(bits, dtype=np.uint64)
    q = q.sum(-1).astype(np.float64)  # [rows, n]
    s = np.repeat(scales.reshape(-1, n // group).astype(np.float64), group, axis=1)
    b = np.repeat(biases.reshape(-1, n // group).astype(np.float64), group, axis=1)
    return (s * q + b).reshape(*lead, n)


def read_safetensors(path):
    """A safetensors file as numpy arrays: floats widened to float64 (bf16 by its bits), integers as stored."""
    data = open(path, "rb").read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    out = {}
    for k, h in header.items():
        if k == "__metadata__":
            continue
        a, b = h["data_offsets"]
        raw = np.frombuffer(body[a:b], dtype={"BF16": "<u2", "F16": "<f2", "F32": "<f4", "U32": "<u4", "I64": "<i8"}[h["dtype"]])
        if h["dtype"] == "BF16":
            raw = (raw.astype(np.uint32) << 16).view(np.float32)
        if raw.dtype.kind == "f":
            raw = raw.astype(np.float64)
        out[k] = raw.reshape(h["shape"])
    return out


def read_checkpoint(path):
    """The text model's weights as float64 numpy arrays under transformers' CausalLM names."""
    cfg = json.load(open(os.path.join(path, "config.json")))
    quant = cfg.get("quantization")
    raw = {}
    for f in sorted(os.listdir(path)):
        if f.endswith(".safetensors"):
            raw.update(read_safetensors(os.path.join(path, f)))
    mlx = any(k.startswith("language_model.") for k in raw)
    out = {}
    for k, v in raw.items():
        if k.endswith(".scales") or k.endswith(".biases"):
            continue
        mod = k[: -len(".weight")] if k.endswith(".weight") else k
        if mod + ".scales" in raw:
            e = quant.get(mod, quant)
            v = dequant(v, raw[mod + ".scales"], raw[mod + ".biases"], e["bits"], e["group_size"])
        if mlx:
            if k.startswith("vision_tower."):
                continue
            name = k.replace("language_model.model.", "model.").replace("language_model.lm_head.", "lm_head.")
            if "conv1d.weight" in name and v.ndim == 3 and v.shape[2] == 1:
                v = v.transpose(0, 2, 1)  # [C, K, 1] -> [C, 1, K]
            if v.ndim == 1 and name.endswith(SHIFTED) and "linear_attn.norm" not in name:
                v = v - 1.0  # stored as 1 + w
        else:
            if k.startswith("model.visual.") or k.startswith("mtp."):
                continue
            name = k.replace("model.language_model.", "model.")
        out[name] = v
    # MLX stacks the experts under switch_mlp: back to the fused [E, 2I, D] / [E, D, I].
    for k in [k for k in out if ".mlp.switch_mlp.gate_proj.weight" in k]:
        pre = k[: k.index(".mlp.switch_mlp.")]
        g, u, d = (out.pop(pre + ".mlp.switch_mlp.%s_proj.weight" % p) for p in ("gate", "up", "down"))
        out[pre + ".mlp.experts.gate_up_proj"] = np.concatenate([g, u], axis=1)
        out[pre + ".mlp.experts.down_proj"] = d
    return out


def gdn_rule64(query, key, value, g, beta, chunk_size=64, initial_state=None, output_final_state=False,
               use_qk_l2norm_in_kernel=False, **kwargs):
    q, k, v, g, beta = [x.transpose(1, 2).to(torch.float64) for x in (query, key, value, g, beta)]
    if use_qk_l2norm_in_kernel:
        q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    q = q * q.shape[-1] ** -0.5
    B, H, T, dk = k.shape
    if q.shape[1] != H:  # grouped heads: value head h reads qk head h // (Hv/Hk)
        raise SystemExit("unexpected head counts")
    S = torch.zeros(B, H, dk, v.shape[-1], dtype=torch.float64) if initial_state is None else initial_state.to(torch.float64)
    o = torch.zeros(B, H, T, v.shape[-1], dtype=torch.float64)
    for t in range(T):
        S = S * g[:, :, t].exp()[..., None, None]
        delta = (v[:, :, t] - (S * k[:, :, t, :, None]).sum(-2)) * beta[:, :, t, None]
        S = S + k[:, :, t, :, None] * delta[..., None, :]
        o[:, :, t] = (S * q[:, :, t, :, None]).sum(-2)
    return o.transpose(1, 2).contiguous().to(query.dtype), (S if output_final_state else None)


def router64(self, hidden_states):
    h = hidden_states.reshape(-1, self.weight.shape[1])
    logits = F.linear(h, self.weight)
    p = torch.softmax(logits.to(torch.float64), dim=-1)
    idx = torch.sort(p, dim=-1, descending=True, stable=True).indices[:, : self.top_k]
    w = torch.gather(p, -1, idx)
    if getattr(self, "norm_topk_prob", True):
        w = w / w.sum(-1, keepdim=True)
    return logits, w.to(logits.dtype), idx


def gated_norm64(self, hidden_states, gate=None):
    x = hidden_states.to(torch.float64)
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
    x = self.weight.to(torch.float64) * x * F.silu(gate.to(torch.float64))
    return x.to(hidden_states.dtype)


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


def build(path, dtype):
    cfg = transformers.AutoConfig.from_pretrained(path)
    text = getattr(cfg, "text_config", cfg)
    text._attn_implementation = "eager"
    try:
        text._experts_implementation = "eager"
    except Exception:
        pass
    model = transformers.AutoModelForCausalLM.from_config(text)
    return model.to(dtype).eval(), text


def run(path, weights, dtype, patch):
    model, text = build(path, dtype)
    state = model.state_dict()
    missing = sorted(set(state) - set(weights))
    extra = sorted(set(weights) - set(state))
    bad = [k for k in state if k in weights and tuple(state[k].shape) != weights[k].shape]
    if missing or extra or bad:
        raise SystemExit(f"{path}: state dict mismatch: missing {missing[:8]} ({len(missing)}), unexpected {extra[:8]} ({len(extra)}), shapes {bad[:8]}")
    model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)).to(dtype) for k, v in weights.items()}, strict=True)
    saved, patches = [], []
    if patch:
        dim = int(text.head_dim * text.rope_parameters.get("partial_rotary_factor", 1.0))
        inv64 = 1.0 / (text.rope_parameters["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        classes = set()
        gdn = 0
        for mod in model.modules():
            name = type(mod).__name__
            if name.endswith("GatedDeltaNet"):
                # The layer calls its modeling module's torch_chunk_gated_delta_rule (a global).
                home = sys.modules[type(mod).__module__]
                if not hasattr(home, "torch_chunk_gated_delta_rule"):
                    raise SystemExit(f"{home.__name__} has no torch_chunk_gated_delta_rule")
                classes.add((home, "torch_chunk_gated_delta_rule", gdn_rule64))
                gdn += 1
            elif name.endswith("RMSNormGated"):
                classes.add((type(mod), "forward", gated_norm64))
            elif name.endswith("TopKRouter"):
                classes.add((type(mod), "forward", router64))
            elif name.endswith("RotaryEmbedding"):
                mod.inv64 = inv64
                classes.add((type(mod), "forward", rope64))
        if gdn == 0 or not any(c[2] is gated_norm64 for c in classes):
            raise SystemExit(f"float64 patches incomplete: {gdn} GDN layers, {sorted(c[0].__name__ for c in classes)}")
        patches = sorted(classes, key=lambda c: (c[0].__name__, c[1])) + [(torch.Tensor, "float", float_keep64), (F, "softmax", softmax_keep64)]
        log("  float64 patches:", gdn, "GDN layers,", ", ".join(c[0].__name__ for c in patches))
        saved = [(o, n, getattr(o, n)) for o, n, _ in patches]
    try:
        for o, n, f in patches:
            setattr(o, n, f)
        logits = {p: model(input_ids=x, use_cache=False).logits[0] for p, x in prompts.items()}
        states = {}
        if patch:
            out = model(input_ids=prompts["a"], use_cache=True)
            states = cache_states(out.past_key_values)
        return logits, states
    finally:
        for o, n, f in saved:
            setattr(o, n, f)


def cache_states(cache):
    """Whatever per-layer states transformers' hybrid cache holds after prompt a (best effort)."""
    out = {}
    try:
        for key in ("conv_states", "recurrent_states", "key_cache", "value_cache"):
            for i, t in enumerate(getattr(cache, key, []) or []):
                if torch.is_tensor(t) and t.numel() > 0:
                    out[f"{i}.{key}"] = t[0].to(torch.float32).contiguous()
        for i, layer in enumerate(getattr(cache, "layers", []) or []):
            for key in ("conv_states", "recurrent_states", "keys", "values"):
                t = getattr(layer, key, None)
                if torch.is_tensor(t) and t.numel() > 0:
                    out[f"{i}.{key}"] = t[0].to(torch.float32).contiguous()
    except Exception:
        log("  cache states not read:", traceback.format_exc().splitlines()[-1])
    return out


goldens, failed = {}, []
for name in sorted(os.listdir(fixtures)):
    path = os.path.join(fixtures, name)
    if not os.path.isdir(path):
        continue
    base = path[: -len("-mlx4")] if name.endswith("-mlx4") else path
    try:
        log(name)
        w = read_checkpoint(path)
        if base != path:
            # The conversion's weights read back must be the source's within 4-bit rounding: a
            # name or layout mistake here would show as an O(1) difference.
            src = read_checkpoint(base)
            worst = max((np.abs(w[k] - src[k]).max() / max(np.abs(src[k]).max(), 1e-30), k) for k in src)
            log(f"  dequantized vs source weights: worst max|diff|/max|w| {worst[0]:.3g} ({worst[1]})")
            if worst[0] > 0.3:
                raise SystemExit("dequantized weights far from the source")
        l64, states = run(base, w, torch.float64, True)
        l32, _ = run(base, w, torch.float32, False)
    except BaseException:
        log(f"{name}: FAILED\n{traceback.format_exc()}")
        failed.append(name)
        continue
    for p, v in l64.items():
        assert v.dtype == torch.float64 and torch.isfinite(v).all()
        goldens[f"{name}.{p}.logits"] = (v[B_ROWS] if p == "b" else v).to(torch.float32).contiguous()
    for k, v in states.items() if base == path else ():
        goldens[f"{name}.a.{k}"] = v
    d = (l32["b"].double() - l64["b"]).abs().max().item()
    log(f"{name}: a {tuple(l64['a'].shape)} b {tuple(l64['b'].shape)} mean|logit| {l64['b'].abs().mean().item():.4f}; "
        f"transformers fp32 (its own path) vs float64, prompt b: max|diff| {d:.3g}; states {sorted(states)[:6]}...")
goldens["b.rows"] = torch.tensor(B_ROWS, dtype=torch.int32)
save_file(goldens, os.path.join(out_dir, "goldens.safetensors"))
log("wrote", len(goldens), "tensors; failed:", failed)
sys.exit(1 if failed else 0)

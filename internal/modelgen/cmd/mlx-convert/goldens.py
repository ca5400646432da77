# Transformers goldens of the MLX conversions of qwen3next-tiny (strata/mlx_test.go TestMLXGoldens).
#
#   go run ./internal/modelgen/cmd/mlx-convert -golden-set testdata/qwen3next-tiny SET_DIR
#   python3 internal/modelgen/cmd/mlx-convert/goldens.py SET_DIR testdata/goldens/model_goldens.safetensors OUT_DIR
#
# SET_DIR holds NAME/hf for every conversion (`mlx-convert -golden-set`): the float32
# Hugging Face checkpoint of the exact weights of conversion NAME. For each, transformers'
# Qwen3NextForCausalLM runs prompts a and b (the input ids of model_goldens.safetensors) in
# float64 on the CPU: every .float() of a float64 tensor and every float32 softmax of one stay in
# float64, the RMSNorms, the gated norm and the rotary embedding compute in float64, the Gated
# DeltaNet core is a float64 token-by-token recurrence, and the router's top-k is a stable sort
# (exact ties to the lower expert index). The logits, rounded to float32, go to
# OUT_DIR/mlx_goldens.safetensors as NAME.a.logits [35, 512] and NAME.b.logits [61, 512] (the
# rows A_ROWS and B_ROWS of prompts a and b, saved as a.rows and b.rows); the
# report (OUT_DIR/report_mlx.txt) compares each with transformers' own float32 path.
import os
import sys
import traceback

import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM
from transformers.models.qwen3_next import modeling_qwen3_next as q3

torch.set_grad_enabled(False)
set_dir, golden_path, out_dir = sys.argv[1:4]
ids = load_file(golden_path)
prompts = {p: ids[p + ".input_ids"].long()[None] for p in ("a", "b")}
report = open(os.path.join(out_dir, "report_mlx.txt"), "w")
# The rows of the logits kept: strides prime to every tile size, the rows where the chunked cases
# split (prompt a in calls of 37 + 1 + rest) and the last.
A_ROWS = sorted(set(range(0, 96, 3)) | {37, 38, 95})
B_ROWS = list(range(0, 300, 5)) + [299]


def log(*a):
    print(*a)
    print(*a, file=report, flush=True)


log("transformers", transformers.__version__, "torch", torch.__version__)


def gdn_rule64(query, key, value, g, beta, chunk_size=64, initial_state=None, output_final_state=False,
               use_qk_l2norm_in_kernel=False, **kwargs):
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


def router64(self, hidden_states):
    h = hidden_states.reshape(-1, self.hidden_dim)
    logits = F.linear(h, self.weight)
    p = torch.softmax(logits.to(torch.float64), dim=-1)
    idx = torch.sort(p, dim=-1, descending=True, stable=True).indices[:, : self.top_k]
    w = torch.gather(p, -1, idx)
    if self.norm_topk_prob:
        w = w / w.sum(-1, keepdim=True)
    return logits, w.to(logits.dtype), idx


def gated_norm64(self, hidden_states, gate=None):
    x = hidden_states.to(torch.float64)
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
    x = self.weight.to(torch.float64) * x * F.silu(gate.to(torch.float64))
    return x.to(hidden_states.dtype)


def rope64(self, x, position_ids):
    freqs = position_ids[0].to(torch.float64)[:, None] * self.inv64[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)[None]
    return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


_float, _softmax = torch.Tensor.float, F.softmax


def float_keep64(self, *args, **kwargs):
    return self if self.dtype == torch.float64 else _float(self, *args, **kwargs)


def softmax_keep64(x, dim=None, _stacklevel=3, dtype=None):
    if x.dtype == torch.float64 and dtype in (torch.float32, torch.float16, torch.bfloat16):
        dtype = torch.float64
    return _softmax(x, dim=dim, _stacklevel=_stacklevel, dtype=dtype)


def load(path, dtype):
    kw = dict(dtype=dtype, attn_implementation="eager", output_loading_info=True)
    try:
        model, info = AutoModelForCausalLM.from_pretrained(path, experts_implementation="eager", **kw)
    except TypeError:
        model, info = AutoModelForCausalLM.from_pretrained(path, **kw)
    bad = {k: v for k, v in info.items() if v}
    if bad:
        raise SystemExit(f"{path}: loading info {bad}")
    return model.eval()


def run64(path):
    model = load(path, torch.float64)
    rot = model.model.rotary_emb
    cfg = model.config
    dim = int(cfg.head_dim * cfg.rope_parameters.get("partial_rotary_factor", 1.0))
    rot.inv64 = 1.0 / (cfg.rope_parameters["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    patches = [(q3.Qwen3NextTopKRouter, "forward", router64), (q3.Qwen3NextRMSNormGated, "forward", gated_norm64),
               (q3.Qwen3NextRotaryEmbedding, "forward", rope64), (torch.Tensor, "float", float_keep64), (F, "softmax", softmax_keep64)]
    saved = [(o, n, getattr(o, n)) for o, n, _ in patches]
    for mod in model.modules():
        if isinstance(mod, q3.Qwen3NextGatedDeltaNet):
            mod.chunk_gated_delta_rule = gdn_rule64
            mod.causal_conv1d_fn = None
            if not isinstance(mod.norm, q3.Qwen3NextRMSNormGated):
                raise SystemExit("a fused gated norm is in use; the float64 run needs Qwen3NextRMSNormGated")
    try:
        for o, n, f in patches:
            setattr(o, n, f)
        return {p: model(input_ids=x, use_cache=False).logits[0] for p, x in prompts.items()}
    finally:
        for o, n, f in saved:
            setattr(o, n, f)


out, failed = {}, []
for name in sorted(os.listdir(set_dir)):
    path = os.path.join(set_dir, name, "hf")
    if not os.path.isdir(path):
        continue
    try:
        l64 = run64(path)
    except Exception:
        log(f"{name}: FAILED\n{traceback.format_exc()}")
        failed.append(name)
        continue
    l32 = load(path, torch.float32)(input_ids=prompts["b"], use_cache=False).logits[0]
    for p, v in l64.items():
        assert v.dtype == torch.float64 and torch.isfinite(v).all()
        out[f"{name}.{p}.logits"] = v[A_ROWS if p == "a" else B_ROWS].to(torch.float32).contiguous()
    d = (l32.double() - l64["b"]).abs().max().item()
    log(f"{name}: a {tuple(l64['a'].shape)} b {tuple(l64['b'].shape)} mean|logit| {l64['b'].abs().mean().item():.4f}; "
        f"transformers fp32 (its own path) vs float64, prompt b: max|diff| {d:.3g}")
out["a.rows"] = torch.tensor(A_ROWS, dtype=torch.int32)
out["b.rows"] = torch.tensor(B_ROWS, dtype=torch.int32)
save_file(out, os.path.join(out_dir, "mlx_goldens.safetensors"))
log("wrote", len(out), "tensors; failed:", failed)
sys.exit(1 if failed else 0)

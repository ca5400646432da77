"""Float64 goldens of the GGUF fixtures beside this file (numpy only):

    python3 internal/gguf/testdata/goldens.py internal/gguf/testdata [SOURCES_DIR]

For each NAME.gguf: its tensors read by ggufref.py (this folder's own GGUF reader and block
decoders, from the format's definition), the converter's transforms undone (ggufref.to_hf), so
the weights are the values the file holds, in the Hugging Face layout; the config from the GGUF
metadata alone (ggufref.config_of; with SOURCES_DIR, the folder `go run
./internal/modelgen/cmd/fixtures` writes, every size is also checked against the source
checkpoint's config.json). The forward is python/tests/mlxlm_ref.py's float64 model with
transformers' q/k L2 norm (Model.hf_qk_l2norm; test_mlxlm_ref.py shows that this form matches the
transformers float64 goldens of testdata/ to float32 rounding), run token by token over PROMPT.
MoE routing renormalises the top-k weights (norm_topk_prob, as transformers' Qwen3.5-MoE always
does and as Qwen3-Next's published config says; llama.cpp does the same for both).

Writes goldens.safetensors: `input_ids` [T] int32 and `NAME.logits` [T, vocab] float32 (every
row, rounded from float64); fixtures.json: per file its sha256 (the goldens apply to exactly those
bytes), architecture, general.file_type, source preset and tensor type counts; and report.txt
(types per file, logit ranges, the BF16 files against their sources).
"""
import glob
import hashlib
import json
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))

import ggufref  # noqa: E402
import mlxlm_ref  # noqa: E402

# 53 token ids < 128 (the fixtures' vocabulary), fixed: chunks of 37 + 1 + 15 cover every path of
# a chunked prefill. The ids were drawn once with numpy.random.default_rng(31).integers(0, 127, 53).
PROMPT = [int(x) for x in np.random.default_rng(31).integers(0, 127, 53)]

SOURCE_OF = {"qwen35": "qwen35-gguf", "qwen35moe": "qwen35moe-gguf", "qwen3next": "qwen3next-gguf"}


def hf_config(c):
    """A flat Hugging Face config (the text model's) for mlxlm_ref, from ggufref.config_of."""
    arch = c["arch"]
    cfg = {k: c[k] for k in ("hidden_size", "num_hidden_layers", "vocab_size", "num_attention_heads",
                             "num_key_value_heads", "head_dim", "linear_num_key_heads", "linear_num_value_heads",
                             "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim",
                             "full_attention_interval", "tie_word_embeddings")}
    cfg["rms_norm_eps"] = float(c["rms_norm_eps"])
    cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": float(c["rope_theta"]),
                              "partial_rotary_factor": c["rope_dims"] / c["head_dim"]}
    cfg["attention_bias"] = False
    if c["num_experts"]:
        cfg.update(num_experts=c["num_experts"], num_experts_per_tok=c["num_experts_per_tok"],
                   moe_intermediate_size=c["moe_intermediate_size"],
                   shared_expert_intermediate_size=c["shared_expert_intermediate_size"], norm_topk_prob=True)
    else:
        cfg["intermediate_size"] = c["intermediate_size"]
    if arch == "qwen3next":
        cfg.update(model_type="qwen3_next", decoder_sparse_step=1, mlp_only_layers=[])
    else:
        cfg["model_type"] = "qwen3_5_moe_text" if arch == "qwen35moe" else "qwen3_5_text"
    return cfg


def check_against_source(cfg, src_cfg, name):
    t = src_cfg.get("text_config", src_cfg)
    for k, v in cfg.items():
        if k in ("model_type", "rope_parameters", "rms_norm_eps", "norm_topk_prob", "full_attention_interval"):
            continue
        if k in t and t[k] != v:
            raise SystemExit(f"{name}: GGUF metadata gives {k} = {v}, the source config {t[k]}")
    rp = t["rope_parameters"]
    if (float(rp["rope_theta"]), rp["partial_rotary_factor"]) != (cfg["rope_parameters"]["rope_theta"],
                                                                    cfg["rope_parameters"]["partial_rotary_factor"]):
        raise SystemExit(f"{name}: RoPE {cfg['rope_parameters']} disagrees with the source {rp}")
    if abs(cfg["rms_norm_eps"] - t["rms_norm_eps"]) > 1e-12:
        raise SystemExit(f"{name}: rms_norm_eps {cfg['rms_norm_eps']} vs the source's {t['rms_norm_eps']}")


def write_safetensors(path, tensors):
    """{name: numpy array (float64, float32 or int32)} as a safetensors file, sorted by name."""
    dt = {np.dtype("float64"): "F64", np.dtype("float32"): "F32", np.dtype("int32"): "I32"}
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dt[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def logits_of(path, sources, report):
    g = ggufref.read_gguf(path)
    name = os.path.basename(path)[:-len(".gguf")]
    c, weights = ggufref.to_hf(g)
    cfg = hf_config(c)
    stem = name.split("-")[0]
    if sources:
        with open(os.path.join(sources, SOURCE_OF[stem], "config.json")) as f:
            check_against_source(cfg, json.load(f), name)
    types = {}
    for t in g.tensors.values():
        types[t.type_name] = types.get(t.type_name, 0) + 1
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        write_safetensors(os.path.join(d, "model.safetensors"), weights)
        model = mlxlm_ref.load_model(d)
    model.hf_qk_l2norm = True
    logits = model.decode(PROMPT, model.make_cache())
    line = (f"{name}: {g.meta['general.architecture']}, file type {g.meta.get('general.file_type')}, "
            f"{len(g.tensors)} tensors ({', '.join(f'{k} {v}' for k, v in sorted(types.items()))}); "
            f"max |logit| {np.abs(logits).max():.4g}")
    if sources and name.endswith("-BF16"):
        src, _, _ = mlxlm_ref.read_safetensors(os.path.join(sources, SOURCE_OF[stem], "model.safetensors"))
        bad = [k for k, a in weights.items() if not np.array_equal(mlxlm_ref._bf16_bits(a), src[k][1].view(np.uint16))]
        if bad or set(src) != set(weights):
            raise SystemExit(f"{name}: does not invert to its source: {bad[:4]}")
        line += f"; inverts to the source checkpoint bit for bit in bf16 ({len(weights)} tensors)"
        with tempfile.TemporaryDirectory() as d:  # the source's config with the interval the converter was given
            with open(os.path.join(sources, SOURCE_OF[stem], "config.json")) as f:
                sc = json.load(f)
            sc.get("text_config", sc)["full_attention_interval"] = cfg["full_attention_interval"]
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(sc, f)
            os.symlink(os.path.join(os.path.abspath(sources), SOURCE_OF[stem], "model.safetensors"),
                       os.path.join(d, "model.safetensors"))
            direct = mlxlm_ref.load_model(d)
        direct.hf_qk_l2norm = True
        d = np.abs(direct.decode(PROMPT, direct.make_cache()) - logits).max()
        line += f"; the same forward on the source checkpoint directly: max |diff| {d:.3g}"
    report.append(line)
    with open(path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    entry = {"file": os.path.basename(path), "sha256": sha, "architecture": g.meta["general.architecture"],
             "file_type": g.meta.get("general.file_type"), "source": SOURCE_OF[stem], "types": dict(sorted(types.items()))}
    return name, logits, entry


def main():
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    folder = sys.argv[1]
    sources = sys.argv[2] if len(sys.argv) == 3 else None
    report = [f"prompt ({len(PROMPT)} tokens): {PROMPT}"]
    out = {"input_ids": np.array(PROMPT, dtype=np.int32)}
    bf16, manifest = {}, []
    for path in sorted(glob.glob(os.path.join(folder, "*.gguf"))):
        name, logits, entry = logits_of(path, sources, report)
        manifest.append(entry)
        out[name + ".logits"] = logits.astype(np.float32)
        if name.endswith("-BF16"):
            bf16[name.split("-")[0]] = logits
        print(report[-1], flush=True)
    for k in sorted(out):
        if k.endswith(".logits") and not k.endswith("-BF16.logits"):
            stem = k.split("-")[0]
            if stem in bf16:
                d = np.abs(out[k].astype(np.float64) - bf16[stem]).max()
                report.append(f"{k[:-7]}: max |logits - {stem}-BF16's| {d:.3g} (quantization; not a tolerance)")
    write_safetensors(os.path.join(folder, "goldens.safetensors"), out)
    with open(os.path.join(folder, "fixtures.json.tmp"), "w") as f:
        f.write('{"prompt": ' + json.dumps(PROMPT) + ',\n "fixtures": [\n  ')
        f.write(",\n  ".join(json.dumps(e) for e in manifest) + "\n ]\n}\n")
    os.replace(os.path.join(folder, "fixtures.json.tmp"), os.path.join(folder, "fixtures.json"))
    with open(os.path.join(folder, "report.txt.tmp"), "w") as f:
        f.write("\n".join(report) + "\n")
    os.replace(os.path.join(folder, "report.txt.tmp"), os.path.join(folder, "report.txt"))


if __name__ == "__main__":
    main()

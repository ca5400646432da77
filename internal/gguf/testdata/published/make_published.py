"""Header-only GGUF copies of published GGUF layouts (metadata and tensor table, no tensor data),
for tests of GGUF inspection and of the loader's checks on the real sizes and type mixes.

    python3 make_published.py OUT_DIR                    # every layout below, header-only
    python3 make_published.py --sparse-bf16 NAME FILE    # NAME's tensor table in BF16 with its data
                                                         # section a hole of the full size

Each file is what llama.cpp's converter (convert_hf_to_gguf.py, ngxson/llama.cpp 3f545bec) writes
for the release's published config.json, with the converter's tensor names, shapes (ggml order:
ne[0] is the row length) and metadata keys in its order, then retyped tensor by tensor as the
quantization named: the header ends after the tensor table and the alignment padding; the
offsets are those of a full file, so every tensor's data lies past the end of the file.

Left out of every file: the tokenizer arrays (`tokenizer.ggml.tokens`, `token_type`, `merges`;
tens of megabytes for 151936 / 248320 tokens); `tokenizer.ggml.model` and `.pre` are kept.
Left out of the conversions: the MTP layers (as `--no-mtp` converts) and the vision tower (the
text-model conversion leaves it to a separate mmproj file).

Layouts (OUT_DIR/NAME.gguf):
- `qwen3-next-80b-a3b-Q4_K_M`: Qwen3-Next-80B-A3B, types from `llama-quantize --dry-run` of the
  BF16 conversion to Q4_K_M (qwen3-next-80b-a3b-Q4_K_M.types, written by that run's log);
- `qwen3.5-27b-Q4_K_M`: Qwen3.5-27B (dense), likewise (qwen3.5-27b-Q4_K_M.types);
- `qwen3.6-35b-a3b-Q4_K_M`: Qwen3.6-35B-A3B, likewise (qwen3.6-35b-a3b-Q4_K_M.types);
- `qwen3.6-35b-a3b-UD-Q4_K_XL-like`: Qwen3.6-35B-A3B (the Qwen3.5-35B-A3B layout), a per-class
  mix in the manner of unsloth's UD-Q4_K_XL (not a transcription of that file): routed experts'
  gate and up Q4_K, their down Q5_K, attention and GDN projections and the shared expert Q8_0,
  token_embd Q4_K, output Q6_K; norms, ssm_a, ssm_dt.bias, ssm_conv1d and the routers F32 (as
  llama-quantize leaves them);
- `qwen3.8-flash-next-Q8_0`: Qwen3.8-Flash-Next (qwen4exp) in the manner of ggml-org's Q8_0 file
  (flash_next_q8): Q8_0 matrices, the n-gram table Q4_0, hyper-connection matrices F16.

The .types files were made from this generator's --sparse-bf16 output by llama.cpp's own
llama-quantize (same commit): `llama-quantize --dry-run FILE Q4_K_M`, its log's per-tensor lines
(`[ i/ n] NAME - [shape], type = BF16, size = ... (TYPE)`) reduced to `NAME TYPE`.
"""
import os
import struct
import sys

# ggml types: id, elements per block, bytes per block
TYPES = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144),
         "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210), "BF16": (30, 1, 2), "Q5_0": (6, 32, 22),
         "Q5_1": (7, 32, 24), "Q4_1": (3, 32, 20), "IQ4_NL": (20, 32, 18), "IQ4_XS": (23, 256, 136),
         "Q2_K": (10, 256, 84), "Q3_K": (11, 256, 110), "MXFP4": (39, 32, 17)}
# llama_ftype values (general.file_type)
FILE_TYPES = {"BF16": 32, "Q4_K_M": 15, "Q8_0": 7}
ALIGN = 32

U32, I32, F32, BOOL, STR, ARR, U64 = 4, 5, 6, 7, 8, 9, 10


# ----------------------------------------------------------------------------------------------
# The converter's output for each architecture


class Model:
    def __init__(self, arch, name):
        self.arch, self.name = arch, name
        self.meta = []  # (key, type, value); arrays as (ARR, element type, values)
        self.tensors = []  # (name, ne list, class)

    def kv(self, key, typ, value):
        self.meta.append((key.replace("{arch}", self.arch), typ, value))

    def t(self, name, *ne):
        self.tensors.append((name, list(ne)))


def hybrid(arch, name, *, D, L, V, Hq, Hkv, hd, Hk, Hv, dk, dv, ctx, theta, ffn=None, E=0, K=0, I=0, SI=0,
           sections=None, pre="qwen35", interval=4):
    """The converter's metadata and tensors for qwen3next / qwen35 / qwen35moe (conversion/qwen.py:
    Qwen3NextModel.set_gguf_parameters and its bases; the tensor map of gguf-py's constants)."""
    m = Model(arch, name)
    m.kv("general.architecture", STR, arch)
    m.kv("general.type", STR, "model")
    m.kv("general.name", STR, name)
    m.kv("{arch}.block_count", U32, L)
    m.kv("{arch}.context_length", U32, ctx)
    m.kv("{arch}.embedding_length", U32, D)
    if ffn is not None:
        m.kv("{arch}.feed_forward_length", U32, ffn)
    m.kv("{arch}.attention.head_count", U32, Hq)
    m.kv("{arch}.attention.head_count_kv", U32, Hkv)
    if sections is not None:
        m.kv("{arch}.rope.dimension_sections", ARR, (I32, sections))
    m.kv("{arch}.rope.freq_base", F32, theta)
    m.kv("{arch}.attention.layer_norm_rms_epsilon", F32, 1e-6)
    if E:
        m.kv("{arch}.expert_count", U32, E)
        m.kv("{arch}.expert_used_count", U32, K)
    m.kv("{arch}.attention.key_length", U32, hd)
    m.kv("{arch}.attention.value_length", U32, hd)
    m.kv("general.file_type", U32, FILE_TYPES["BF16"])
    if E:
        m.kv("{arch}.expert_feed_forward_length", U32, I)
        m.kv("{arch}.expert_shared_feed_forward_length", U32, SI)
    m.kv("{arch}.ssm.conv_kernel", U32, 4)
    m.kv("{arch}.ssm.state_size", U32, dk)
    m.kv("{arch}.ssm.group_count", U32, Hk)
    m.kv("{arch}.ssm.time_step_rank", U32, Hv)
    m.kv("{arch}.ssm.inner_size", U32, Hv * dv)
    m.kv("{arch}.full_attention_interval", U32, interval)
    m.kv("{arch}.rope.dimension_count", U32, hd // 4)
    m.kv("general.quantization_version", U32, 2)
    m.kv("tokenizer.ggml.model", STR, "gpt2")
    m.kv("tokenizer.ggml.pre", STR, pre)

    C = 2 * Hk * dk + Hv * dv
    m.t("token_embd.weight", D, V)
    for i in range(L):
        b = f"blk.{i}."
        m.t(b + "attn_norm.weight", D)
        if (i + 1) % interval:
            m.t(b + "ssm_a", Hv)
            m.t(b + "ssm_conv1d.weight", 4, C)
            m.t(b + "ssm_dt.bias", Hv)
            if arch == "qwen3next":
                m.t(b + "ssm_ba.weight", D, 2 * Hv)
            else:
                m.t(b + "ssm_alpha.weight", D, Hv)
                m.t(b + "ssm_beta.weight", D, Hv)
            m.t(b + "attn_qkv.weight", D, C)
            m.t(b + "attn_gate.weight", D, Hv * dv)
            m.t(b + "ssm_norm.weight", dv)
            m.t(b + "ssm_out.weight", Hv * dv, D)
        else:
            m.t(b + "attn_k_norm.weight", hd)
            m.t(b + "attn_k.weight", D, Hkv * hd)
            m.t(b + "attn_output.weight", Hq * hd, D)
            m.t(b + "attn_q_norm.weight", hd)
            m.t(b + "attn_q.weight", D, 2 * Hq * hd)
            m.t(b + "attn_v.weight", D, Hkv * hd)
        if E:
            m.t(b + "ffn_down_exps.weight", I, D, E)
            m.t(b + "ffn_gate_exps.weight", D, I, E)
            m.t(b + "ffn_up_exps.weight", D, I, E)
            m.t(b + "ffn_gate_inp.weight", D, E)
            m.t(b + "ffn_down_shexp.weight", SI, D)
            m.t(b + "ffn_gate_shexp.weight", D, SI)
            m.t(b + "ffn_up_shexp.weight", D, SI)
            m.t(b + "ffn_gate_inp_shexp.weight", D, 1)
        else:
            m.t(b + "ffn_down.weight", ffn, D)
            m.t(b + "ffn_gate.weight", D, ffn)
            m.t(b + "ffn_up.weight", D, ffn)
        m.t(b + "post_attention_norm.weight", D)
    m.t("output_norm.weight", D)
    m.t("output.weight", D, V)
    return m


def qwen3_next_80b():
    # config.json of Qwen3-Next-80B-A3B (internal/modelgen/release.go, qwen3NextConfig)
    return hybrid("qwen3next", "Qwen3 Next 80B A3B Instruct", D=2048, L=48, V=151936, Hq=16, Hkv=2, hd=256, Hk=16,
                  Hv=32, dk=128, dv=128, ctx=262144, theta=1e7, ffn=5120, E=512, K=10, I=512, SI=512, pre="qwen2")


def qwen36_35b_a3b():
    # Qwen3.5-35B-A3B's layout (internal/modelgen/release.go, qwen35A3B), which Qwen3.6-35B-A3B shares
    return hybrid("qwen35moe", "Qwen3.6 35B A3B", D=2048, L=40, V=248320, Hq=16, Hkv=2, hd=256, Hk=16, Hv=32,
                  dk=128, dv=128, ctx=262144, theta=1e7, E=256, K=8, I=512, SI=512, sections=[11, 11, 10, 0])


def qwen35_27b():
    # Qwen3.5-27B / Qwen3.6-27B (dense): D 5120, 64 layers, 24 query / 4 KV heads of 256, GDN 16 key /
    # 48 value heads of 128, MLP 17408, vocabulary 248320, untied output, rope_theta 1e7
    return hybrid("qwen35", "Qwen3.5 27B", D=5120, L=64, V=248320, Hq=24, Hkv=4, hd=256, Hk=16, Hv=48, dk=128,
                  dv=128, ctx=262144, theta=1e7, ffn=17408, sections=[11, 11, 10, 0])


def qwen38_flash_next():
    """Qwen3.8-Flash-Next (llama.cpp architecture qwen4exp, ggml-org/llama.cpp#27742): the hybrid keys
    and tensors above with hyper-connections (4 streams, low rank 320) around every mixer and MoE and
    in place of the final norm, a QSA indexer on the attention layers (index_qk_proj split into
    indexer.q_proj and indexer.k_proj) and the PLE n-gram table on layer 1. Key and tensor names
    from llama.cpp's qwen4exp tables (llama-arch.cpp, the qwen4exp tensor loader); the config from
    internal/modelgen/release.go (flashNextConfig, flashNextTensors)."""
    D, S, R, L, V = 2560, 4, 320, 48, 248320
    Hq, Hkv, hd, Hk, Hv, dk, dv = 24, 2, 256, 16, 48, 128, 128
    E, K, I, SI = 512, 10, 640, 640
    idx_heads, idx_dim = 4, 128
    ple_rows, ple_dim = 320001536, 2560 // 16
    m = hybrid("qwen4exp", "Qwen3.8 Flash Next", D=D, L=L, V=V, Hq=Hq, Hkv=Hkv, hd=hd, Hk=Hk, Hv=Hv, dk=dk, dv=dv,
               ctx=262144, theta=1e7, E=E, K=K, I=I, SI=SI, sections=[11, 11, 10, 0])
    at = next(i for i, (k, _, _) in enumerate(m.meta) if k == "general.quantization_version")
    extra = Model("qwen4exp", "")
    extra.kv("{arch}.hyper_connection.count", U32, S)
    extra.kv("{arch}.hyper_connection.low_rank", U32, R)
    extra.kv("{arch}.attention.indexer.head_count", U32, idx_heads)
    extra.kv("{arch}.attention.indexer.key_length", U32, idx_dim)
    extra.kv("{arch}.attention.indexer.top_k", U32, 2048)
    extra.kv("{arch}.attention.compress_ratios", ARR, (I32, [4 if (i + 1) % 4 == 0 else 0 for i in range(L)]))
    extra.kv("{arch}.ple.layers", ARR, (I32, [1]))
    extra.kv("{arch}.ple.ngram_size", U32, 3)
    extra.kv("{arch}.ple.heads_per_ngram", U32, 8)
    extra.kv("{arch}.ple.conv_kernel", U32, 4)
    extra.kv("{arch}.ple.eos_token_id", U32, 248044)
    extra.kv("{arch}.ple.image_token_id", U32, 248056)
    extra.kv("{arch}.embedding_length_per_layer_input", U32, ple_dim)
    extra.kv("{arch}.ple.layer_multipliers", ARR, (U64, [23703573157769, 20109073645365, 8052911324071]))
    extra.kv("{arch}.ple.head_offsets", ARR, (U64, [0, 20000003, 40000026, 60000059, 80000106, 100000165, 120000228,
                                                     140000297, 160000374, 180000455, 200000548, 220000655, 240000802,
                                                     260000955, 280001114, 300001275]))
    extra.kv("{arch}.ple.head_vocab_sizes", ARR, (U64, [20000003, 20000023, 20000033, 20000047, 20000059, 20000063,
                                                         20000069, 20000077, 20000081, 20000093, 20000107, 20000147,
                                                         20000153, 20000159, 20000161, 20000171]))
    m.meta[at:at] = extra.meta
    out = []
    for name, ne in m.tensors:
        if name == "output_norm.weight":  # no final norm: the hyper-connection mixer instead
            out += [("output_hc_norm.weight", [S * D]), ("output_hc_down.weight", [S * D, R]),
                    ("output_hc_up.weight", [R, S * D])]
            continue
        out.append((name, ne))
        if name.endswith(".attn_norm.weight"):
            b = name[:-len("attn_norm.weight")]
            out += [(b + "hc_attn_norm.weight", [S * D]), (b + "hc_attn_down.weight", [S * D, R]),
                    (b + "hc_attn_up.weight", [R, S * D]), (b + "hc_attn_inject.weight", [S * D, S])]
        if name.endswith(".attn_v.weight"):
            b = name[:-len("attn_v.weight")]
            out += [(b + "indexer.q_proj.weight", [D, idx_heads * idx_dim]), (b + "indexer.k_proj.weight", [D, idx_dim]),
                    (b + "indexer.q_norm.weight", [idx_dim]), (b + "indexer.k_norm.weight", [idx_dim])]
        if name.endswith(".post_attention_norm.weight"):
            b = name[:-len("post_attention_norm.weight")]
            out += [(b + "hc_ffn_norm.weight", [S * D]), (b + "hc_ffn_down.weight", [S * D, R]),
                    (b + "hc_ffn_up.weight", [R, S * D]), (b + "hc_ffn_inject.weight", [S * D, S])]
            if b == "blk.1.":
                out += [(b + "ple_key.weight", [D, S * D]), (b + "ple_value.weight", [D, D]),
                        (b + "ple_norm_key.weight", [S * D]), (b + "ple_norm_query.weight", [S * D]),
                        (b + "ple_norm_conv.weight", [S * D]), (b + "ple_conv1d.weight", [4, S * D])]
    # qwen4exp has no attn_norm / post_attention_norm: the hyper-connections' norms take their place
    m.tensors = [t for t in out if not t[0].endswith((".attn_norm.weight", ".post_attention_norm.weight"))]
    m.tensors.insert(1, ("per_layer_token_embd.weight", [ple_dim, ple_rows]))
    return m


# ----------------------------------------------------------------------------------------------
# Type assignment


def never_quantized(name, ne):
    """What llama-quantize keeps as converted (F32 here): 1-D tensors, norms, ssm_conv1d, routers."""
    return (len(ne) < 2 or name.endswith("_norm.weight") or "ssm_conv1d" in name or "ffn_gate_inp" in name)


def ud_like(name, ne):
    if never_quantized(name, ne):
        return "F32"
    if name == "output.weight":
        return "Q6_K"
    if name == "token_embd.weight":
        return "Q4_K"
    if name.endswith(("ffn_gate_exps.weight", "ffn_up_exps.weight")):
        return "Q4_K"
    if name.endswith("ffn_down_exps.weight"):
        return "Q5_K"
    return "Q8_0"


def flash_next_q8(name, ne):
    """ggml-org's Q8_0 of Qwen3.8-Flash-Next as its users describe it: Q8_0 matrices, the n-gram
    table at Q4_0, the hyper-connection matrices F16, ssm_alpha / ssm_beta and the routers F32."""
    if never_quantized(name, ne) or name.endswith(("ssm_alpha.weight", "ssm_beta.weight")) or "ple_conv1d" in name:
        return "F32"
    if name == "per_layer_token_embd.weight":
        return "Q4_0"
    if "hc_" in name:
        return "F16"
    return "Q8_0"


def types_from_file(path):
    """name -> type from a .types file (lines `name type`, from llama-quantize --dry-run's log)."""
    out = {}
    with open(path) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                n, t = line.split()
                out[n] = t
    return out


# ----------------------------------------------------------------------------------------------
# Writing


def _s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def _val(typ, v):
    if typ == U32:
        return struct.pack("<I", v)
    if typ == I32:
        return struct.pack("<i", v)
    if typ == F32:
        return struct.pack("<f", v)
    if typ == U64:
        return struct.pack("<Q", v)
    if typ == BOOL:
        return struct.pack("<?", v)
    if typ == STR:
        return _s(v)
    if typ == ARR:
        et, vals = v
        return struct.pack("<IQ", et, len(vals)) + b"".join(_val(et, x) for x in vals)
    raise ValueError(typ)


def nbytes(ne, typ):
    _, blk, size = TYPES[typ]
    if ne[0] % blk:
        raise ValueError(f"row length {ne[0]} is not a multiple of {typ}'s block {blk}")
    n = 1
    for x in ne:
        n *= x
    return n // blk * size


def write(path, m, typeof, file_type, sparse=False):
    """Writes m with each tensor's type typeof(name, ne); returns the full data size."""
    meta = [(k, t, (FILE_TYPES[file_type] if k == "general.file_type" else v)) for k, t, v in m.meta]
    out = [b"GGUF", struct.pack("<IQQ", 3, len(m.tensors), len(meta))]
    for k, t, v in meta:
        out += [_s(k), struct.pack("<I", t), _val(t, v)]
    off = 0
    for name, ne in m.tensors:
        typ = typeof(name, ne)
        if file_type != "BF16":  # llama-quantize writes ggml's dimension count: trailing 1s dropped
            while len(ne) > 1 and ne[-1] == 1:
                ne = ne[:-1]
        out += [_s(name), struct.pack("<I", len(ne)), b"".join(struct.pack("<Q", x) for x in ne),
                struct.pack("<IQ", TYPES[typ][0], off)]
        off += nbytes(ne, typ)
        off += -off % ALIGN
    head = b"".join(out)
    head += bytes(-len(head) % ALIGN)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(head)
        if sparse:
            f.truncate(len(head) + off)
    os.replace(tmp, path)
    return off


MODELS = {"qwen3-next-80b-a3b": qwen3_next_80b, "qwen3.6-35b-a3b": qwen36_35b_a3b, "qwen3.5-27b": qwen35_27b,
          "qwen3.8-flash-next": qwen38_flash_next}


def bf16(name, ne):
    return "F32" if never_quantized(name, ne) or name.endswith(("ssm_a", "ssm_dt.bias")) else "BF16"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    if len(sys.argv) == 4 and sys.argv[1] == "--sparse-bf16":
        m = MODELS[sys.argv[2]]()
        size = write(sys.argv[3], m, bf16, "BF16", sparse=True)
        print(f"{sys.argv[3]}: {len(m.tensors)} tensors, {size / 2**30:.2f} GiB of data (a hole)")
        return
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    out = sys.argv[1]
    jobs = [("qwen3-next-80b-a3b-Q4_K_M", "qwen3-next-80b-a3b", "Q4_K_M", "types"),
            ("qwen3.5-27b-Q4_K_M", "qwen3.5-27b", "Q4_K_M", "types"),
            ("qwen3.6-35b-a3b-Q4_K_M", "qwen3.6-35b-a3b", "Q4_K_M", "types"),
            ("qwen3.6-35b-a3b-UD-Q4_K_XL-like", "qwen3.6-35b-a3b", "Q4_K_M", ud_like),
            ("qwen3.8-flash-next-Q8_0", "qwen3.8-flash-next", "Q8_0", flash_next_q8)]
    for fname, model, ftype, rule in jobs:
        m = MODELS[model]()
        if rule == "types":
            table = types_from_file(os.path.join(here, fname + ".types"))
            missing = [n for n, _ in m.tensors if n not in table]
            if missing or len(table) != len(m.tensors):
                raise SystemExit(f"{fname}.types does not match the tensor table: {missing[:4]}")
            rule = lambda name, ne, table=table: table[name]  # noqa: E731
        size = write(os.path.join(out, fname + ".gguf"), m, rule, ftype)
        print(f"{fname}.gguf: {len(m.tensors)} tensors, {size / 2**30:.2f} GiB of data (absent)")


if __name__ == "__main__":
    main()

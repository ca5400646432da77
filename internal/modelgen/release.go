package modelgen

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/stratakernels/strata/internal/safetensors"
)

// Release is the structure of a published bf16 checkpoint: its config.json (the published
// fields and values) and its tensor table (every name, dtype and shape, in checkpoint order),
// split into as many shards as the release has. WriteHeaderOnly writes it without its weights,
// so that loading and inspection can be tested on the real layout in seconds and megabytes.
//
// The tables are written from the published layouts (docs/FORMATS.md section 1:
// names, prefixes, expert storage, PLE buffers and table shards), not from strata's own
// expectations, so that a test of the checks against them can fail. The text model's tensors
// are the release's; under mtp.* and model.visual.* (which strata skips by prefix) the fixture
// holds a representative set of the head's and the vision tower's tensors (transformers' module
// names, the configs' sizes), not a transcription.
type Release struct {
	Name   string
	Shards int
	// config returns a fresh copy of config.json (JSON-compatible values).
	config func() map[string]any
	// tensors returns the tensor table; tensors with Data (the PLE hash buffers) hold the
	// release's values.
	tensors func() []safetensors.WriteTensor
}

// Config returns a fresh copy of the release's config.json as a JSON-compatible map.
func (r Release) Config() map[string]any { return r.config() }

// Tensors returns the release's tensor table in checkpoint order. Tensors with Data hold the
// release's values (the PLE hash buffers); the others have nil Data.
func (r Release) Tensors() []safetensors.WriteTensor { return r.tensors() }

// Releases are the published checkpoints strata runs, by name.
var Releases = map[string]Release{
	"qwen3.8-flash-next": {Name: "qwen3.8-flash-next", Shards: 131, config: flashNextConfig, tensors: flashNextTensors},
	"qwen3-next-80b-a3b": {Name: "qwen3-next-80b-a3b", Shards: 41, config: qwen3NextConfig, tensors: qwen3NextTensors},
	"qwen3.5-35b-a3b": {Name: "qwen3.5-35b-a3b", Shards: 14,
		config: func() map[string]any { return qwen35Config(qwen35A3B) }, tensors: func() []safetensors.WriteTensor { return qwen35Tensors(qwen35A3B) }},
	"qwen3.5-122b-a10b": {Name: "qwen3.5-122b-a10b", Shards: 50,
		config: func() map[string]any { return qwen35Config(qwen35A10B) }, tensors: func() []safetensors.WriteTensor { return qwen35Tensors(qwen35A10B) }},
}

// HeaderOnly configures WriteHeaderOnly.
type HeaderOnly struct {
	// Truncate ends every shard after the tensors that carry data (the PLE buffers) instead
	// of extending it to its full size with a hole; only a header-only reader accepts such a
	// file.
	Truncate bool
	// Config and Tensors, when set, edit the config and the tensor table before writing (tests
	// use them to damage one thing).
	Config  func(map[string]any)
	Tensors func([]safetensors.WriteTensor) []safetensors.WriteTensor
}

// WriteHeaderOnly writes r into dir (created if needed): config.json,
// model.safetensors.index.json and r.Shards shards model-0000k-of-0000N.safetensors, each with
// its complete header. The weights are not written: a shard's data section is a hole (a sparse
// file of the full size, so a 360 GB release takes a few megabytes of disk) or, with Truncate,
// absent. The PLE hash buffers are written with their values. Tensors are assigned to shards
// in order, each shard holding about 1/Shards of the bytes (an edited table may need fewer).
func WriteHeaderOnly(dir string, r Release, opts HeaderOnly) error {
	cfg := r.Config()
	if opts.Config != nil {
		opts.Config(cfg)
	}
	ts := r.Tensors()
	if opts.Tensors != nil {
		ts = opts.Tensors(ts)
	}
	shards, err := splitShards(ts, r.Shards)
	if err != nil {
		return fmt.Errorf("modelgen: %s: %w", r.Name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	weightMap := map[string]string{}
	var total int64
	for k, part := range shards {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", k+1, len(shards))
		for _, t := range part {
			weightMap[t.Name] = name
			total += tensorBytes(t)
		}
		if err := safetensors.WriteSparseFile(filepath.Join(dir, name), part, map[string]string{"format": "pt"}, opts.Truncate); err != nil {
			return err
		}
	}
	idx, err := json.MarshalIndent(map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, safetensors.IndexFile), append(idx, '\n'), 0o644); err != nil {
		return err
	}
	cj, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), append(cj, '\n'), 0o644)
}

func tensorBytes(t safetensors.WriteTensor) int64 {
	n := int64(t.DType.Size())
	for _, s := range t.Shape {
		n *= s
	}
	return n
}

// splitShards cuts ts, in order, into at most n non-empty runs: a new shard starts when the
// next tensor would take the current one past a size limit, the smallest limit that gives at
// most n shards (found by bisection). The published tables split into exactly their shard
// count; an edited table with a huge tensor may give fewer.
func splitShards(ts []safetensors.WriteTensor, n int) ([][]safetensors.WriteTensor, error) {
	if len(ts) == 0 || n < 1 {
		return nil, fmt.Errorf("%d tensors cannot fill %d shards", len(ts), n)
	}
	split := func(limit int64) [][]safetensors.WriteTensor {
		var out [][]safetensors.WriteTensor
		var cur []safetensors.WriteTensor
		var size int64
		for _, t := range ts {
			b := tensorBytes(t)
			if len(cur) > 0 && size+b > limit {
				out = append(out, cur)
				cur, size = nil, 0
			}
			cur = append(cur, t)
			size += b
		}
		return append(out, cur)
	}
	var lo, hi int64 = 1, 0
	for _, t := range ts {
		hi += tensorBytes(t)
	}
	for lo < hi {
		if mid := lo + (hi-lo)/2; len(split(mid)) <= n {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return split(lo), nil
}

// table builds a tensor table.
type table struct{ out []safetensors.WriteTensor }

func (t *table) bf16(name string, shape ...int64) {
	t.out = append(t.out, safetensors.WriteTensor{Name: name, DType: safetensors.BF16, Shape: shape})
}

func (t *table) f32(name string, shape ...int64) {
	t.out = append(t.out, safetensors.WriteTensor{Name: name, DType: safetensors.F32, Shape: shape})
}

func (t *table) i64(name string, values []int64) {
	b := make([]byte, 8*len(values))
	for i, v := range values {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	t.out = append(t.out, safetensors.WriteTensor{Name: name, DType: safetensors.I64, Shape: []int64{int64(len(values))}, Data: b})
}

// flashNextConfig is the config.json of Qwen3.8-Flash-Next (Qwen4ExpForConditionalGeneration):
// the text model's fields and values as published (text_config), the vision tower's
// (vision_config: transformers' Qwen4ExpVisionConfig sizes with out_hidden_size = the text
// hidden size) and the top-level token ids.
func flashNextConfig() map[string]any {
	layerTypes := make([]any, 48)
	for i := range layerTypes {
		layerTypes[i] = "linear_attention"
		if i%4 == 3 {
			layerTypes[i] = "full_attention"
		}
	}
	text := map[string]any{
		"model_type": "qwen4_exp_text", "dtype": "bfloat16", "hidden_act": "silu",
		"hidden_size": 2560, "num_hidden_layers": 48, "full_attention_interval": 4, "layer_types": layerTypes,
		"attention_bias": false, "attention_dropout": 0.0,
		"ple_layer_ids": []any{2}, "ple_embed_dim": 2560, "ple_conv_kernel_size": 4,
		"num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 640, "shared_expert_intermediate_size": 640,
		"hc_count": 4, "hc_lowrank": 320,
		"linear_num_key_heads": 16, "linear_num_value_heads": 48, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
		"linear_conv_kernel_dim": 4, "mamba_ssm_dtype": "float32",
		"num_attention_heads": 24, "num_key_value_heads": 2, "head_dim": 256,
		"indexer_n_heads": 4, "indexer_kv_heads": 1, "indexer_head_dim": 128, "indexer_budget": 2048, "indexer_compress_ratio": 4,
		"ngram_size": 3, "heads_per_ngram": 8, "ngram_vocab_size_base": 20000000, "make_ngram_vocab_size_divisible_by": 128,
		"split_ngram_parts":     128,
		"mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": false,
		"mtp": map[string]any{"hybrid": true, "layer_types": []any{"full_attention"}, "mtp_use_hidden_state_from_layer": nil,
			"num_hidden_layers": 1, "rope_theta": 10000000},
		"vocab_size": 248320, "eos_token_id": 248044, "rms_norm_eps": 1e-6, "output_gate_type": "sigmoid",
		"tie_word_embeddings": false, "use_cache": true, "max_position_embeddings": 262144, "partial_rotary_factor": 0.25,
		"rope_parameters": map[string]any{"mrope_interleaved": true, "mrope_section": []any{11, 11, 10},
			"partial_rotary_factor": 0.25, "rope_theta": 10000000, "rope_type": "default"},
	}
	return map[string]any{
		"architectures": []any{"Qwen4ExpForConditionalGeneration"}, "model_type": "qwen4_exp",
		"language_model_only": false, "text_config": text,
		"vision_config": map[string]any{"model_type": "qwen4_exp", "depth": 27, "hidden_size": 1152, "hidden_act": "gelu_pytorch_tanh",
			"intermediate_size": 4304, "num_heads": 16, "in_channels": 3, "patch_size": 16, "spatial_merge_size": 2,
			"temporal_patch_size": 2, "out_hidden_size": 2560, "num_position_embeddings": 2304, "initializer_range": 0.02},
		"image_token_id": 248056, "video_token_id": 248057, "vision_start_token_id": 248053, "vision_end_token_id": 248054,
		"tie_word_embeddings": false, "transformers_version": "5.17.0",
	}
}

// Flash-Next's PLE hash buffers (its one PLE layer, decoder layer 1, PLE index 0), computed
// with transformers' formulas (_build_layer_multipliers with vocab 248320, seed 1234;
// _find_nth_prime_after from ngram_vocab_size_base 20000000) in Python integers.
var (
	flashNextMultipliers = []int64{23703573157769, 20109073645365, 8052911324071}
	flashNextHeadVocabs  = []int64{20000003, 20000023, 20000033, 20000047, 20000059, 20000063, 20000069, 20000077,
		20000081, 20000093, 20000107, 20000147, 20000153, 20000159, 20000161, 20000171}
	flashNextHeadOffsets = []int64{0, 20000003, 40000026, 60000059, 80000106, 100000165, 120000228, 140000297,
		160000374, 180000455, 200000548, 220000655, 240000802, 260000955, 280001114, 300001275}
)

// flashNextRows is the n-gram table's row count: the head sizes' sum 320001531 rounded up to a
// multiple of 128, stored as 128 shards of 2500012 rows of 2560/16 = 160.
const flashNextRows = 320001536

func flashNextTensors() []safetensors.WriteTensor {
	const (
		D, S, R, V        = 2560, 4, 320, 248320
		Hk, Hv, dk, dv    = 16, 48, 128, 128
		Hq, Hkv, hd       = 24, 2, 256
		E, I, SI          = 512, 640, 640
		idxHeads, idxDim  = 4 + 1, 128
		parts, pleHeadDim = 128, 2560 / 16
	)
	t := &table{}
	hyper := func(p string, inject bool) {
		t.bf16(p+"hc_norm.weight", S*D)
		t.bf16(p+"input_mix_weight_down.weight", R, S*D)
		t.bf16(p+"input_mix_weight_up.weight", S*D, R)
		if inject {
			t.bf16(p+"block_inject_weight.weight", S, S*D)
		}
	}
	attention := func(p string, indexer bool) {
		t.bf16(p+"self_attn.q_proj.weight", 2*Hq*hd, D)
		t.bf16(p+"self_attn.k_proj.weight", Hkv*hd, D)
		t.bf16(p+"self_attn.v_proj.weight", Hkv*hd, D)
		t.bf16(p+"self_attn.o_proj.weight", D, Hq*hd)
		t.bf16(p+"self_attn.q_norm.weight", hd)
		t.bf16(p+"self_attn.k_norm.weight", hd)
		if indexer {
			t.bf16(p+"self_attn.indexer.index_qk_proj.weight", idxHeads*idxDim, D)
			t.bf16(p+"self_attn.indexer.q_layernorm.weight", idxDim)
			t.bf16(p+"self_attn.indexer.k_layernorm.weight", idxDim)
		}
	}
	moe := func(p string) {
		t.bf16(p+"mlp.gate.weight", E, D)
		t.bf16(p+"mlp.experts.gate_up_proj", E, 2*I, D)
		t.bf16(p+"mlp.experts.down_proj", E, D, I)
		t.bf16(p+"mlp.shared_expert.gate_proj.weight", SI, D)
		t.bf16(p+"mlp.shared_expert.up_proj.weight", SI, D)
		t.bf16(p+"mlp.shared_expert.down_proj.weight", D, SI)
		t.bf16(p+"mlp.shared_expert_gate.weight", 1, D)
	}
	const lm = "model.language_model."
	t.bf16(lm+"embed_tokens.weight", V, D)
	for i := 0; i < 48; i++ {
		p := lm + "layers." + strconv.Itoa(i) + "."
		hyper(p+"attn_hyper_connection.", true)
		if i%4 == 3 {
			attention(p, true)
		} else {
			const C = 2*Hk*dk + Hv*dv
			t.bf16(p+"linear_attn.in_proj_qkv.weight", C, D)
			t.bf16(p+"linear_attn.in_proj_z.weight", Hv*dv, D)
			t.bf16(p+"linear_attn.in_proj_b.weight", Hv, D)
			t.bf16(p+"linear_attn.in_proj_a.weight", Hv, D)
			t.bf16(p+"linear_attn.conv1d.weight", C, 1, 4)
			t.bf16(p+"linear_attn.dt_bias", Hv)
			t.bf16(p+"linear_attn.A_log", Hv)
			t.bf16(p+"linear_attn.norm.weight", dv)
			t.bf16(p+"linear_attn.out_proj.weight", D, Hv*dv)
		}
		hyper(p+"mlp_hyper_connection.", true)
		moe(p)
		if i == 1 { // ple_layer_ids [2]
			q := p + "ple."
			t.bf16(q+"key_proj.weight", S*D, D)
			t.bf16(q+"value_proj.weight", D, D)
			t.bf16(q+"norm_key.weight", S*D)
			t.bf16(q+"norm_query.weight", S*D)
			t.bf16(q+"norm_conv.weight", S*D)
			t.bf16(q+"conv1d.weight", S*D, 1, 4)
			t.i64(q+"ple_embedding.layer_multipliers", flashNextMultipliers)
			t.i64(q+"ple_embedding.ngram_heads_offsets", flashNextHeadOffsets)
			t.i64(q+"ple_embedding.ngram_heads_vocab_sizes", flashNextHeadVocabs)
			for k := 0; k < parts; k++ {
				t.bf16(q+"ple_embedding.ngram_embedding.shard_"+strconv.Itoa(k)+".weight", flashNextRows/parts, pleHeadDim)
			}
		}
	}
	hyper(lm+"hyper_connection_mixer.", false)
	t.bf16("lm_head.weight", V, D)
	visionTower(t, 27, 1152, 4304, 2560)
	// The multi-token-prediction head: one hyper-connected full-attention MoE block.
	t.bf16("mtp.fc.weight", D, 2*D)
	t.bf16("mtp.pre_fc_norm_embedding.weight", D)
	t.bf16("mtp.pre_fc_norm_hidden.weight", D)
	hyper("mtp.layers.0.attn_hyper_connection.", true)
	attention("mtp.layers.0.", false)
	hyper("mtp.layers.0.mlp_hyper_connection.", true)
	moe("mtp.layers.0.")
	hyper("mtp.hyper_connection_mixer.", false)
	return t.out
}

// visionTower adds a Qwen3-VL-style vision tower under model.visual.: patch embedding,
// learned position embedding, depth blocks (pre-norm attention and MLP, with biases) and the
// patch merger into the text hidden size out (spatial merge 2: 4 patches per token).
func visionTower(t *table, depth, h, inter, out int64) {
	const v = "model.visual."
	t.bf16(v+"patch_embed.proj.weight", h, 3, 2, 16, 16)
	t.bf16(v+"patch_embed.proj.bias", h)
	t.bf16(v+"pos_embed.weight", 2304, h)
	for b := int64(0); b < depth; b++ {
		p := v + "blocks." + strconv.FormatInt(b, 10) + "."
		for _, n := range []string{"norm1", "norm2"} {
			t.bf16(p+n+".weight", h)
			t.bf16(p+n+".bias", h)
		}
		t.bf16(p+"attn.qkv.weight", 3*h, h)
		t.bf16(p+"attn.qkv.bias", 3*h)
		t.bf16(p+"attn.proj.weight", h, h)
		t.bf16(p+"attn.proj.bias", h)
		t.bf16(p+"mlp.linear_fc1.weight", inter, h)
		t.bf16(p+"mlp.linear_fc1.bias", inter)
		t.bf16(p+"mlp.linear_fc2.weight", h, inter)
		t.bf16(p+"mlp.linear_fc2.bias", h)
	}
	t.bf16(v+"merger.norm.weight", h)
	t.bf16(v+"merger.norm.bias", h)
	t.bf16(v+"merger.linear_fc1.weight", 4*h, 4*h)
	t.bf16(v+"merger.linear_fc1.bias", 4*h)
	t.bf16(v+"merger.linear_fc2.weight", out, 4*h)
	t.bf16(v+"merger.linear_fc2.bias", out)
}

// qwen3NextConfig is the config.json of Qwen3-Next-80B-A3B-Instruct (Qwen3NextForCausalLM),
// the published fields and values.
func qwen3NextConfig() map[string]any {
	return map[string]any{
		"architectures": []any{"Qwen3NextForCausalLM"}, "attention_dropout": 0.0,
		"bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "full_attention_interval": 4,
		"head_dim": 256, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 5120,
		"linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
		"linear_value_head_dim": 128, "max_position_embeddings": 262144, "mlp_only_layers": []any{},
		"model_type": "qwen3_next", "moe_intermediate_size": 512, "norm_topk_prob": true, "num_attention_heads": 16,
		"num_experts": 512, "num_experts_per_tok": 10, "num_hidden_layers": 48, "num_key_value_heads": 2,
		"output_router_logits": false, "partial_rotary_factor": 0.25, "rms_norm_eps": 1e-6, "rope_scaling": nil,
		"rope_theta": 10000000, "router_aux_loss_coef": 0.001, "shared_expert_intermediate_size": 512,
		"tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.57.0.dev0",
		"use_cache": true, "use_sliding_window": false, "vocab_size": 151936,
	}
}

func qwen3NextTensors() []safetensors.WriteTensor {
	const (
		D, V           = 2048, 151936
		Hk, Hv, dk, dv = 16, 32, 128, 128
		Hq, Hkv, hd    = 16, 2, 256
		E, I, SI       = 512, 512, 512
	)
	t := &table{}
	attention := func(p string) {
		t.bf16(p+"self_attn.q_proj.weight", 2*Hq*hd, D)
		t.bf16(p+"self_attn.k_proj.weight", Hkv*hd, D)
		t.bf16(p+"self_attn.v_proj.weight", Hkv*hd, D)
		t.bf16(p+"self_attn.o_proj.weight", D, Hq*hd)
		t.bf16(p+"self_attn.q_norm.weight", hd)
		t.bf16(p+"self_attn.k_norm.weight", hd)
	}
	moe := func(p string) {
		t.bf16(p+"mlp.gate.weight", E, D)
		for e := 0; e < E; e++ {
			q := p + "mlp.experts." + strconv.Itoa(e) + "."
			t.bf16(q+"gate_proj.weight", I, D)
			t.bf16(q+"up_proj.weight", I, D)
			t.bf16(q+"down_proj.weight", D, I)
		}
		t.bf16(p+"mlp.shared_expert.gate_proj.weight", SI, D)
		t.bf16(p+"mlp.shared_expert.up_proj.weight", SI, D)
		t.bf16(p+"mlp.shared_expert.down_proj.weight", D, SI)
		t.bf16(p+"mlp.shared_expert_gate.weight", 1, D)
	}
	t.bf16("model.embed_tokens.weight", V, D)
	for i := 0; i < 48; i++ {
		p := "model.layers." + strconv.Itoa(i) + "."
		t.bf16(p+"input_layernorm.weight", D)
		if i%4 == 3 {
			attention(p)
		} else {
			// in_proj_qkvz rows are grouped per qk head: [q (dk) | k (dk) | v, z of its Hv/Hk value heads].
			t.bf16(p+"linear_attn.in_proj_qkvz.weight", 2*Hk*dk+2*Hv*dv, D)
			t.bf16(p+"linear_attn.in_proj_ba.weight", 2*Hv, D)
			t.bf16(p+"linear_attn.conv1d.weight", 2*Hk*dk+Hv*dv, 1, 4)
			t.bf16(p+"linear_attn.dt_bias", Hv)
			t.bf16(p+"linear_attn.A_log", Hv)
			t.bf16(p+"linear_attn.norm.weight", dv)
			t.bf16(p+"linear_attn.out_proj.weight", D, Hv*dv)
		}
		t.bf16(p+"post_attention_layernorm.weight", D)
		moe(p)
	}
	t.bf16("model.norm.weight", D)
	t.bf16("lm_head.weight", V, D)
	// The multi-token-prediction head: one full-attention MoE block with its own norms.
	t.bf16("mtp.fc.weight", D, 2*D)
	t.bf16("mtp.pre_fc_norm_embedding.weight", D)
	t.bf16("mtp.pre_fc_norm_hidden.weight", D)
	t.bf16("mtp.layers.0.input_layernorm.weight", D)
	attention("mtp.layers.0.")
	t.bf16("mtp.layers.0.post_attention_layernorm.weight", D)
	moe("mtp.layers.0.")
	t.bf16("mtp.norm.weight", D)
	return t.out
}

// qwen35Sizes are the sizes of a Qwen3.5 MoE release (Qwen3_5MoeForConditionalGeneration).
type qwen35Sizes struct {
	D, Layers, Hq, Hkv, Hk, Hv, E, K, I, SI int64
}

// The published Qwen3.5 MoE models. Qwen3.5-35B-A3B's config.json is the one public reproductions
// of the file agree on (its fields and values; no public source lists its shards); Qwen3.5-122B-A10B's
// is written from the sizes public training scripts and model notes give for it, in the same
// fields. The shard counts are chosen at about 5 GB per shard.
var (
	qwen35A3B  = qwen35Sizes{D: 2048, Layers: 40, Hq: 16, Hkv: 2, Hk: 16, Hv: 32, E: 256, K: 8, I: 512, SI: 512}
	qwen35A10B = qwen35Sizes{D: 3072, Layers: 48, Hq: 32, Hkv: 2, Hk: 16, Hv: 64, E: 256, K: 8, I: 1024, SI: 1024}
)

// qwen35Config is the config.json of a Qwen3.5 MoE release: the text model under text_config
// (attention every fourth layer, interleaved MRoPE sections over the 64 rotary dims), the
// vision tower's sizes and the multimodal token ids.
func qwen35Config(z qwen35Sizes) map[string]any {
	layerTypes := make([]any, z.Layers)
	for i := range layerTypes {
		layerTypes[i] = "linear_attention"
		if i%4 == 3 {
			layerTypes[i] = "full_attention"
		}
	}
	return map[string]any{
		"architectures": []any{"Qwen3_5MoeForConditionalGeneration"}, "model_type": "qwen3_5_moe",
		"image_token_id": 248056, "video_token_id": 248057, "vision_start_token_id": 248053, "vision_end_token_id": 248054,
		"tie_word_embeddings": false, "dtype": "bfloat16", "transformers_version": "4.57.0.dev0",
		"vision_config": map[string]any{"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16,
			"in_channels": 3, "patch_size": 16, "temporal_patch_size": 2, "spatial_merge_size": 2, "num_position_embeddings": 2304,
			"out_hidden_size": z.D, "hidden_act": "gelu_pytorch_tanh", "deepstack_visual_indexes": []any{},
			"initializer_range": 0.02, "model_type": "qwen3_5_moe"},
		"text_config": map[string]any{
			"attention_bias": false, "attention_dropout": 0.0, "attn_output_gate": true, "bos_token_id": 248044,
			"eos_token_id": 248044, "dtype": "bfloat16", "full_attention_interval": 4, "head_dim": 256, "hidden_act": "silu",
			"hidden_size": z.D, "initializer_range": 0.02, "layer_types": layerTypes, "linear_conv_kernel_dim": 4,
			"linear_key_head_dim": 128, "linear_num_key_heads": z.Hk, "linear_num_value_heads": z.Hv, "linear_value_head_dim": 128,
			"mamba_ssm_dtype": "float32", "max_position_embeddings": 262144, "model_type": "qwen3_5_moe_text",
			"moe_intermediate_size": z.I, "mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": false,
			"num_attention_heads": z.Hq, "num_experts": z.E, "num_experts_per_tok": z.K, "num_hidden_layers": z.Layers,
			"num_key_value_heads": z.Hkv, "output_router_logits": false, "pad_token_id": nil, "partial_rotary_factor": 0.25,
			"rms_norm_eps": 1e-6, "router_aux_loss_coef": 0.001, "shared_expert_intermediate_size": z.SI,
			"tie_word_embeddings": false, "use_cache": true, "vocab_size": 248320,
			"rope_parameters": map[string]any{"mrope_interleaved": true, "mrope_section": []any{11, 11, 10},
				"partial_rotary_factor": 0.25, "rope_theta": 10000000, "rope_type": "default"},
		},
	}
}

// qwen35Tensors is the tensor table of a Qwen3.5 MoE release: the text model under
// model.language_model. with fused experts, A_log and the gated norm in F32 (Qwen3.5's files;
// everything else BF16), lm_head, a one-layer multi-token-prediction head and the vision tower.
func qwen35Tensors(z qwen35Sizes) []safetensors.WriteTensor {
	const V, dk, dv, hd = 248320, 128, 128, 256
	D := z.D
	t := &table{}
	attention := func(p string) {
		t.bf16(p+"self_attn.q_proj.weight", 2*z.Hq*hd, D)
		t.bf16(p+"self_attn.k_proj.weight", z.Hkv*hd, D)
		t.bf16(p+"self_attn.v_proj.weight", z.Hkv*hd, D)
		t.bf16(p+"self_attn.o_proj.weight", D, z.Hq*hd)
		t.bf16(p+"self_attn.q_norm.weight", hd)
		t.bf16(p+"self_attn.k_norm.weight", hd)
	}
	moe := func(p string) {
		t.bf16(p+"mlp.gate.weight", z.E, D)
		t.bf16(p+"mlp.experts.gate_up_proj", z.E, 2*z.I, D)
		t.bf16(p+"mlp.experts.down_proj", z.E, D, z.I)
		t.bf16(p+"mlp.shared_expert.gate_proj.weight", z.SI, D)
		t.bf16(p+"mlp.shared_expert.up_proj.weight", z.SI, D)
		t.bf16(p+"mlp.shared_expert.down_proj.weight", D, z.SI)
		t.bf16(p+"mlp.shared_expert_gate.weight", 1, D)
	}
	const lm = "model.language_model."
	t.bf16(lm+"embed_tokens.weight", V, D)
	C := 2*z.Hk*dk + z.Hv*dv
	for i := int64(0); i < z.Layers; i++ {
		p := lm + "layers." + strconv.FormatInt(i, 10) + "."
		t.bf16(p+"input_layernorm.weight", D)
		if i%4 == 3 {
			attention(p)
		} else {
			t.bf16(p+"linear_attn.in_proj_qkv.weight", C, D)
			t.bf16(p+"linear_attn.in_proj_z.weight", z.Hv*dv, D)
			t.bf16(p+"linear_attn.in_proj_b.weight", z.Hv, D)
			t.bf16(p+"linear_attn.in_proj_a.weight", z.Hv, D)
			t.bf16(p+"linear_attn.conv1d.weight", C, 1, 4)
			t.bf16(p+"linear_attn.dt_bias", z.Hv)
			t.f32(p+"linear_attn.A_log", z.Hv)
			t.f32(p+"linear_attn.norm.weight", dv)
			t.bf16(p+"linear_attn.out_proj.weight", D, z.Hv*dv)
		}
		t.bf16(p+"post_attention_layernorm.weight", D)
		moe(p)
	}
	t.bf16(lm+"norm.weight", D)
	t.bf16("lm_head.weight", V, D)
	t.bf16("mtp.fc.weight", D, 2*D)
	t.bf16("mtp.pre_fc_norm_embedding.weight", D)
	t.bf16("mtp.pre_fc_norm_hidden.weight", D)
	t.bf16("mtp.layers.0.input_layernorm.weight", D)
	attention("mtp.layers.0.")
	t.bf16("mtp.layers.0.post_attention_layernorm.weight", D)
	moe("mtp.layers.0.")
	t.bf16("mtp.norm.weight", D)
	visionTower(t, 27, 1152, 4304, D)
	return t.out
}

// ReleaseNames lists the names of Releases, sorted.
func ReleaseNames() []string {
	var n []string
	for k := range Releases {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Package gen is the Qwen3.8-Flash-Next family's generator settings (internal/modelgen,
// registered in family/all/gen): the config.json of a generated checkpoint, the presets, the
// published bf16 and FP8 releases' structure, the FP8 release's layout and the format fixtures.
package gen

import (
	"strconv"
	"strings"

	"github.com/stratakernels/strata/internal/modelgen/genreg"
	"github.com/stratakernels/strata/internal/safetensors"
)

func init() {
	genreg.Register(genreg.Family{
		Name:   "qwen4_exp",
		Config: config,
		Presets: map[string]genreg.Spec{
			// The main job's default: a reduced-size Qwen3.8-Flash-Next architecture (every op of
			// the real model, QSA sparse selection active past 131 tokens).
			"qwen4exp-small": {Arch: "qwen4_exp_text", D: 512, Layers: 8, Vocab: 8192, AttnEvery: 4,
				Hq: 12, Hkv: 1, HeadDim: 256, Hk: 2, Hv: 6, Dk: 128, Dv: 128, Experts: 32, TopK: 10, MoEI: 128, SharedI: 128,
				Streams: 4, HCRank: 64, IdxHeads: 4, IdxBudget: 128, PLELayers: []int{2}, PLEEmbedDim: 128, RopeTheta: 1e7, Seed: 1},
			// qwen4exp-small with the Qwen3 tokenizer's vocabulary size (151936 embedding rows),
			// so that Qwen3's tokenizer.json can turn text into its ids and its predictions back
			// into text (the weights are random: the predicted text means nothing). 464 MB.
			"qwen4exp-small-qwen3vocab": {Arch: "qwen4_exp_text", D: 512, Layers: 8, Vocab: 151936, AttnEvery: 4,
				Hq: 12, Hkv: 1, HeadDim: 256, Hk: 2, Hv: 6, Dk: 128, Dv: 128, Experts: 32, TopK: 10, MoEI: 128, SharedI: 128,
				Streams: 4, HCRank: 64, IdxHeads: 4, IdxBudget: 128, PLELayers: []int{2}, PLEEmbedDim: 128, RopeTheta: 1e7, Seed: 4},
			// A 4-layer slice of Qwen3.8-Flash-Next at real width (3 GDN + 1 QSA, 64 of the 512
			// experts, top-10): the benchmark model.
			"qwen4exp-slice": {Arch: "qwen4_exp_text", D: 2560, Layers: 4, Vocab: 8192, AttnEvery: 4,
				Hq: 24, Hkv: 2, HeadDim: 256, Hk: 16, Hv: 48, Dk: 128, Dv: 128, Experts: 64, TopK: 10, MoEI: 640, SharedI: 640,
				Streams: 4, HCRank: 320, IdxHeads: 4, IdxBudget: 2048, PLELayers: []int{2}, PLEEmbedDim: 256, RopeTheta: 1e7, Seed: 3},
			// The source of the format fixtures: the multimodal layout (model.language_model.*,
			// fused experts) with the n-gram table split in 128 row blocks of width 32, which MLX's
			// group of 32 divides (512 / 16 heads); 3 GDN + 1 QSA layers, 8 experts top-4 of width
			// 32 (ragged 128 x 128 FP8 blocks), within a few megabytes.
			"qwen4exp-fmt": {Arch: "qwen4_exp", D: 128, Layers: 4, Vocab: 512, AttnEvery: 4,
				Hq: 2, Hkv: 1, HeadDim: 256, Hk: 1, Hv: 2, Dk: 128, Dv: 128, Experts: 8, TopK: 4, MoEI: 32, SharedI: 32,
				Streams: 4, HCRank: 32, IdxHeads: 4, IdxBudget: 32, PLELayers: []int{2}, PLEEmbedDim: 512, NGramBase: 300, NGramParts: 128,
				RopeTheta: 1e7, Seed: 21, Prefix: "model.language_model.", Constants: true},
		},
		Releases: []genreg.Release{
			genreg.NewRelease("qwen3.8-flash-next", 131, flashNextConfig, flashNextTensors),
			// The FP8 release: no public source lists its full tensor table or config.json, so
			// both are assembled from the bf16 release's by the rules docs/FORMATS.md section 4
			// gives. The shape [1] of the n-gram table's one scale is a stated choice. The mtp
			// head has its routed experts in FP8 too: with them the table totals 185.5 GB, the
			// size reported for the release (bf16 they would make it 188.0 GB).
			genreg.NewRelease(fp8Release, 131, func() map[string]any { return withFP8(flashNextConfig(), flashNextFP8Tensors()) }, flashNextFP8Tensors),
		},
		FP8Releases: map[string]genreg.FP8Options{fp8Release: fp8Options},
		// mlx-vlm's conversions at 3, 4 and 8 bits (groups of 32, 64 and 128) storing the
		// zero-centred gains as w (mlx-vlm since its PR #2032) and as 1 + w (before), its mxfp4,
		// nvfp4 and mxfp8 conversions, and the FP8 release's layout (BF16 scales, as published).
		FormatFixtures: []genreg.FormatFixture{
			{Name: "qwen4exp-fmt", Source: "qwen4exp-fmt"},
			{Name: "qwen4exp-fmt-mlx3", Source: "qwen4exp-fmt", MLX: &genreg.MLXOptions{Quantize: true, Bits: 3, Group: 32, VLM: true, GainsAsW: true}},
			{Name: "qwen4exp-fmt-mlx4", Source: "qwen4exp-fmt", MLX: &genreg.MLXOptions{Quantize: true, Bits: 4, Group: 64, VLM: true, GainsAsW: true}},
			{Name: "qwen4exp-fmt-mlx4-shifted", Source: "qwen4exp-fmt", MLX: &genreg.MLXOptions{Quantize: true, Bits: 4, Group: 64, VLM: true}},
			{Name: "qwen4exp-fmt-mlx8-shifted", Source: "qwen4exp-fmt", MLX: &genreg.MLXOptions{Quantize: true, Bits: 8, Group: 128, VLM: true}},
			{Name: "qwen4exp-fmt-mxfp4", Source: "qwen4exp-fmt", MLX: &genreg.MLXOptions{Quantize: true, Mode: "mxfp4", VLM: true, GainsAsW: true}},
			{Name: "qwen4exp-fmt-nvfp4", Source: "qwen4exp-fmt", MLX: &genreg.MLXOptions{Quantize: true, Mode: "nvfp4", VLM: true, GainsAsW: true}},
			{Name: "qwen4exp-fmt-mxfp8", Source: "qwen4exp-fmt", MLX: &genreg.MLXOptions{Quantize: true, Mode: "mxfp8", VLM: true, GainsAsW: true}},
			{Name: "qwen4exp-fmt-fp8", Source: "qwen4exp-fmt", FP8: &fp8Fixture},
		},
	})
}

const fp8Release = "qwen3.8-flash-next-fp8"

// fp8Options is the layout of Qwen3.8-Flash-Next-FP8: the routed experts converted (stored one by
// one) and the n-gram table (one scale for all its row blocks), every other Linear layer listed
// as not converted; BF16 scales.
var fp8Options = genreg.FP8Options{Roles: []string{"experts"}, Tables: true, PerTensorFlags: true, ScaleDType: safetensors.BF16}

// fp8Fixture is the format fixture's copy of fp8Options.
var fp8Fixture = fp8Options

// config is the config.json of a generated Qwen3.8-Flash-Next checkpoint: for model_type
// qwen4_exp_text the text model's (Qwen4ExpForCausalLM), for qwen4_exp the published multimodal
// form (Qwen4ExpForConditionalGeneration: the text model under text_config, a small
// vision_config, the image and video token ids). The spec's sizes with the release's n-gram
// settings scaled down (ngram_vocab_size_base 1000 unless the spec gives one), eos the last token,
// split_ngram_parts the spec's (512 when it gives none, the table then stored whole).
func config(s genreg.Spec) map[string]any {
	c := genreg.BaseConfig(s, "qwen_sparse_attention")
	c["architectures"] = []string{"Qwen4ExpForCausalLM"}
	c["eos_token_id"] = s.Vocab - 1
	c["hc_count"], c["hc_lowrank"] = s.Streams, s.HCRank
	base := 1000
	if s.NGramBase > 0 {
		base = s.NGramBase
	}
	c["heads_per_ngram"], c["ngram_size"], c["ngram_vocab_size_base"] = 8, 3, base
	c["make_ngram_vocab_size_divisible_by"] = 128
	c["indexer_budget"], c["indexer_compress_ratio"], c["indexer_head_dim"] = s.IdxBudget, 4, 128
	c["indexer_kv_heads"], c["indexer_n_heads"] = 1, s.IdxHeads
	c["number_of_conv_states"] = 3
	c["output_gate_type"] = "sigmoid"
	c["ple_conv_kernel_size"], c["ple_embed_dim"], c["ple_layer_ids"] = 4, s.PLEEmbedDim, s.PLELayers
	c["seed"] = 1234
	c["split_ngram_parts"] = 512
	if s.NGramParts > 1 {
		c["split_ngram_parts"] = s.NGramParts
	}
	rp := c["rope_parameters"].(map[string]any)
	rp["mrope_interleaved"] = true
	rp["mrope_section"] = genreg.MRoPESection(s.HeadDim)
	if s.Arch != "qwen4_exp" {
		return c
	}
	delete(c, "architectures")
	c["model_type"] = "qwen4_exp_text"
	return map[string]any{
		"architectures": []string{"Qwen4ExpForConditionalGeneration"}, "model_type": "qwen4_exp", "text_config": c,
		"vision_config": map[string]any{"model_type": "qwen4_exp", "depth": 1, "hidden_size": 64, "hidden_act": "gelu_pytorch_tanh",
			"intermediate_size": 128, "num_heads": 2, "in_channels": 3, "patch_size": 16, "spatial_merge_size": 2,
			"temporal_patch_size": 2, "out_hidden_size": s.D, "num_position_embeddings": 64, "initializer_range": 0.02},
		"image_token_id": s.Vocab - 5, "video_token_id": s.Vocab - 4, "vision_start_token_id": s.Vocab - 3, "vision_end_token_id": s.Vocab - 2,
		"tie_word_embeddings": false, "language_model_only": false, "transformers_version": "5.17.0",
	}
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
	t := &genreg.Table{}
	hyper := func(p string, inject bool) {
		t.BF16(p+"hc_norm.weight", S*D)
		t.BF16(p+"input_mix_weight_down.weight", R, S*D)
		t.BF16(p+"input_mix_weight_up.weight", S*D, R)
		if inject {
			t.BF16(p+"block_inject_weight.weight", S, S*D)
		}
	}
	attention := func(p string, indexer bool) {
		t.BF16(p+"self_attn.q_proj.weight", 2*Hq*hd, D)
		t.BF16(p+"self_attn.k_proj.weight", Hkv*hd, D)
		t.BF16(p+"self_attn.v_proj.weight", Hkv*hd, D)
		t.BF16(p+"self_attn.o_proj.weight", D, Hq*hd)
		t.BF16(p+"self_attn.q_norm.weight", hd)
		t.BF16(p+"self_attn.k_norm.weight", hd)
		if indexer {
			t.BF16(p+"self_attn.indexer.index_qk_proj.weight", idxHeads*idxDim, D)
			t.BF16(p+"self_attn.indexer.q_layernorm.weight", idxDim)
			t.BF16(p+"self_attn.indexer.k_layernorm.weight", idxDim)
		}
	}
	moe := func(p string) {
		t.BF16(p+"mlp.gate.weight", E, D)
		t.BF16(p+"mlp.experts.gate_up_proj", E, 2*I, D)
		t.BF16(p+"mlp.experts.down_proj", E, D, I)
		t.BF16(p+"mlp.shared_expert.gate_proj.weight", SI, D)
		t.BF16(p+"mlp.shared_expert.up_proj.weight", SI, D)
		t.BF16(p+"mlp.shared_expert.down_proj.weight", D, SI)
		t.BF16(p+"mlp.shared_expert_gate.weight", 1, D)
	}
	const lm = "model.language_model."
	t.BF16(lm+"embed_tokens.weight", V, D)
	for i := 0; i < 48; i++ {
		p := lm + "layers." + strconv.Itoa(i) + "."
		hyper(p+"attn_hyper_connection.", true)
		if i%4 == 3 {
			attention(p, true)
		} else {
			const C = 2*Hk*dk + Hv*dv
			t.BF16(p+"linear_attn.in_proj_qkv.weight", C, D)
			t.BF16(p+"linear_attn.in_proj_z.weight", Hv*dv, D)
			t.BF16(p+"linear_attn.in_proj_b.weight", Hv, D)
			t.BF16(p+"linear_attn.in_proj_a.weight", Hv, D)
			t.BF16(p+"linear_attn.conv1d.weight", C, 1, 4)
			t.BF16(p+"linear_attn.dt_bias", Hv)
			t.BF16(p+"linear_attn.A_log", Hv)
			t.BF16(p+"linear_attn.norm.weight", dv)
			t.BF16(p+"linear_attn.out_proj.weight", D, Hv*dv)
		}
		hyper(p+"mlp_hyper_connection.", true)
		moe(p)
		if i == 1 { // ple_layer_ids [2]
			q := p + "ple."
			t.BF16(q+"key_proj.weight", S*D, D)
			t.BF16(q+"value_proj.weight", D, D)
			t.BF16(q+"norm_key.weight", S*D)
			t.BF16(q+"norm_query.weight", S*D)
			t.BF16(q+"norm_conv.weight", S*D)
			t.BF16(q+"conv1d.weight", S*D, 1, 4)
			t.I64(q+"ple_embedding.layer_multipliers", flashNextMultipliers)
			t.I64(q+"ple_embedding.ngram_heads_offsets", flashNextHeadOffsets)
			t.I64(q+"ple_embedding.ngram_heads_vocab_sizes", flashNextHeadVocabs)
			for k := 0; k < parts; k++ {
				t.BF16(q+"ple_embedding.ngram_embedding.shard_"+strconv.Itoa(k)+".weight", flashNextRows/parts, pleHeadDim)
			}
		}
	}
	hyper(lm+"hyper_connection_mixer.", false)
	t.BF16("lm_head.weight", V, D)
	t.VisionTower(27, 1152, 4304, 2560)
	// The multi-token-prediction head: one hyper-connected full-attention MoE block.
	t.BF16("mtp.fc.weight", D, 2*D)
	t.BF16("mtp.pre_fc_norm_embedding.weight", D)
	t.BF16("mtp.pre_fc_norm_hidden.weight", D)
	hyper("mtp.layers.0.attn_hyper_connection.", true)
	attention("mtp.layers.0.", false)
	hyper("mtp.layers.0.mlp_hyper_connection.", true)
	moe("mtp.layers.0.")
	hyper("mtp.hyper_connection_mixer.", false)
	return t.Out
}

// flashNextFP8Tensors is the bf16 release's table with the routed experts of every decoder layer
// and of the mtp head
// stored one by one as FP8 (mlp.experts.{e}.{gate,up,down}_proj.weight [640, 2560], [640, 2560],
// [2560, 640] with BF16 weight_scale_inv [5, 20], [5, 20], [20, 5]) and the n-gram table's 128
// row blocks as F8_E4M3 sharing one BF16 ngram_embedding.weight_scale; the mtp head's experts
// likewise.
func flashNextFP8Tensors() []safetensors.WriteTensor {
	var out []safetensors.WriteTensor
	scaled := false
	for _, t := range flashNextTensors() {
		switch {
		case strings.HasSuffix(t.Name, ".mlp.experts.gate_up_proj"):
			pre := strings.TrimSuffix(t.Name, "gate_up_proj")
			E, I2, D := t.Shape[0], t.Shape[1], t.Shape[2]
			for e := int64(0); e < E; e++ {
				p := pre + strconv.FormatInt(e, 10) + "."
				out = genreg.FP8Linear(out, safetensors.WriteTensor{Name: p + "gate_proj.weight", Shape: []int64{I2 / 2, D}})
				out = genreg.FP8Linear(out, safetensors.WriteTensor{Name: p + "up_proj.weight", Shape: []int64{I2 / 2, D}})
				out = genreg.FP8Linear(out, safetensors.WriteTensor{Name: p + "down_proj.weight", Shape: []int64{D, I2 / 2}})
			}
		case strings.HasSuffix(t.Name, ".mlp.experts.down_proj"):
			// written with gate_up_proj, one expert at a time
		case strings.Contains(t.Name, ".ple_embedding.ngram_embedding.shard_"):
			if !scaled {
				base := t.Name[:strings.Index(t.Name, "ngram_embedding.")]
				out = append(out, safetensors.WriteTensor{Name: base + "ngram_embedding.weight_scale", DType: safetensors.BF16, Shape: []int64{1}})
				scaled = true
			}
			t.DType = safetensors.F8E4M3
			out = append(out, t)
		default:
			out = append(out, t)
		}
	}
	return out
}

// withFP8 adds the FP8 release's quantization_config to cfg: modules_to_not_convert lists the
// module of every 2-D weight of ts left in float, the embedding's included; modules_to_convert
// names the n-gram table where ts stores it as FP8 with one scale; weight_per_tensor and
// act_per_tensor false.
func withFP8(cfg map[string]any, ts []safetensors.WriteTensor) map[string]any {
	var notConvert []string
	convert := false
	for _, t := range ts {
		mod, weight := strings.CutSuffix(t.Name, ".weight")
		switch {
		case t.DType == safetensors.F8E4M3 || t.DType == safetensors.I64 || strings.HasSuffix(t.Name, "weight_scale_inv"):
		case strings.HasSuffix(t.Name, "ngram_embedding.weight_scale"):
			convert = true
		case weight && len(t.Shape) == 2:
			notConvert = append(notConvert, mod)
		}
	}
	qc := genreg.FP8QuantConfig(notConvert)
	qc["weight_per_tensor"], qc["act_per_tensor"] = false, false
	if convert {
		qc["modules_to_convert"] = []any{"ple.ple_embedding.ngram_embedding"}
	}
	cfg["quantization_config"] = qc
	return cfg
}

// Package gen is the Qwen3.5 / Qwen3.6 family's generator settings (internal/modelgen, registered
// in family/all/gen): the config.json of a generated checkpoint, the presets and the published
// MoE releases' structure.
package gen

import (
	"strconv"

	"github.com/stratakernels/strata/internal/modelgen/genreg"
	"github.com/stratakernels/strata/internal/safetensors"
)

func init() {
	genreg.Register(genreg.Family{
		Name:   "qwen3_5",
		Config: config,
		Presets: map[string]genreg.Spec{
			// Reduced Qwen3.5 models in the published multimodal layout (model.language_model.*,
			// the text model under text_config): 3 GDN layers (2 value heads per qk head) + 1
			// attention layer (6 query heads per KV head, as Qwen3.5-27B), dense MLPs or 16 fused
			// experts top-4. The transformers goldens of family/qwen35/testdata are theirs.
			"qwen35-tiny": {Arch: "qwen3_5", D: 256, Layers: 4, Vocab: 512, AttnEvery: 4,
				Hq: 12, Hkv: 2, HeadDim: 256, Hk: 2, Hv: 4, Dk: 128, Dv: 128, DenseI: 384,
				RopeTheta: 1e7, Seed: 11, Prefix: "model.language_model."},
			"qwen35moe-tiny": {Arch: "qwen3_5_moe", D: 256, Layers: 4, Vocab: 512, AttnEvery: 4,
				Hq: 12, Hkv: 2, HeadDim: 256, Hk: 2, Hv: 4, Dk: 128, Dv: 128, Experts: 16, TopK: 4, MoEI: 64, SharedI: 64,
				RopeTheta: 1e7, Seed: 12, Prefix: "model.language_model."},
			// The sources of the GGUF fixtures (internal/gguf/testdata): 1 GDN + 1 attention layer
			// and a GDN with 2 value heads per key head over 2 key heads, so that the converter's
			// V-head reordering moves rows. qwen35-gguf is 256 wide, so llama-quantize's
			// 256-element block types (Q4_K, Q6_K, IQ4_XS) apply to its rows of D; the MoE one is
			// 128 wide.
			"qwen35-gguf": {Arch: "qwen3_5", D: 256, Layers: 2, Vocab: 128, AttnEvery: 2,
				Hq: 2, Hkv: 1, HeadDim: 32, Hk: 2, Hv: 4, Dk: 32, Dv: 32, DenseI: 64,
				RopeTheta: 1e7, Seed: 31, Prefix: "model.language_model."},
			"qwen35moe-gguf": {Arch: "qwen3_5_moe", D: 128, Layers: 2, Vocab: 128, AttnEvery: 2,
				Hq: 2, Hkv: 1, HeadDim: 32, Hk: 2, Hv: 4, Dk: 32, Dv: 32, Experts: 4, TopK: 2, MoEI: 32, SharedI: 32,
				RopeTheta: 1e7, Seed: 32, Prefix: "model.language_model."},
		},
		Releases: []genreg.Release{
			genreg.NewRelease("qwen3.5-35b-a3b", 14, func() map[string]any { return qwen35Config(qwen35A3B) },
				func() []safetensors.WriteTensor { return qwen35Tensors(qwen35A3B) }),
			genreg.NewRelease("qwen3.5-122b-a10b", 50, func() map[string]any { return qwen35Config(qwen35A10B) },
				func() []safetensors.WriteTensor { return qwen35Tensors(qwen35A10B) }),
		},
	})
}

// moe are the MoE model types.
var moe = map[string]bool{"qwen3_5_moe": true, "qwen3_5_moe_text": true}

// textOf is the text model's model_type of a multimodal one.
var textOf = map[string]string{"qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"}

// config is the config.json of a generated Qwen3.5 checkpoint: the multimodal form
// (Qwen3_5ForConditionalGeneration or Qwen3_5MoeForConditionalGeneration, the text model under
// text_config, a small vision_config) for the model types qwen3_5 and qwen3_5_moe, the flat text
// form for qwen3_5_text and qwen3_5_moe_text.
func config(s genreg.Spec) map[string]any {
	isMoE := moe[s.Arch]
	text := genreg.BaseConfig(s, "full_attention")
	rp := text["rope_parameters"].(map[string]any)
	rp["mrope_interleaved"] = true
	rp["mrope_section"] = genreg.MRoPESection(s.HeadDim)
	text["attn_output_gate"] = true
	text["full_attention_interval"] = s.AttnEvery
	text["mamba_ssm_dtype"] = "float32"
	text["eos_token_id"] = s.Vocab - 1
	if isMoE {
		delete(text, "norm_topk_prob") // not a field of Qwen3_5MoeTextConfig
	} else {
		text["intermediate_size"] = s.DenseI
	}
	want, nested := textOf[s.Arch]
	if !nested {
		text["architectures"] = []string{map[bool]string{false: "Qwen3_5ForCausalLM", true: "Qwen3_5MoeForCausalLM"}[isMoE]}
		return text
	}
	text["model_type"] = want
	vision := map[string]any{"depth": 1, "hidden_size": 64, "hidden_act": "gelu_pytorch_tanh", "intermediate_size": 128,
		"num_heads": 2, "in_channels": 3, "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
		"out_hidden_size": s.D, "num_position_embeddings": 64, "initializer_range": 0.02,
		"model_type": map[bool]string{false: "qwen3_5_vision", true: "qwen3_5_moe_vision"}[isMoE]}
	if isMoE {
		vision["deepstack_visual_indexes"] = []int{}
	}
	return map[string]any{
		"architectures":  []string{map[bool]string{false: "Qwen3_5ForConditionalGeneration", true: "Qwen3_5MoeForConditionalGeneration"}[isMoE]},
		"model_type":     s.Arch,
		"text_config":    text,
		"vision_config":  vision,
		"image_token_id": s.Vocab - 5, "video_token_id": s.Vocab - 4, "vision_start_token_id": s.Vocab - 3, "vision_end_token_id": s.Vocab - 2,
		"tie_word_embeddings": false, "language_model_only": false, "transformers_version": "5.17.0",
	}
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
	t := &genreg.Table{}
	attention := func(p string) {
		t.BF16(p+"self_attn.q_proj.weight", 2*z.Hq*hd, D)
		t.BF16(p+"self_attn.k_proj.weight", z.Hkv*hd, D)
		t.BF16(p+"self_attn.v_proj.weight", z.Hkv*hd, D)
		t.BF16(p+"self_attn.o_proj.weight", D, z.Hq*hd)
		t.BF16(p+"self_attn.q_norm.weight", hd)
		t.BF16(p+"self_attn.k_norm.weight", hd)
	}
	moe := func(p string) {
		t.BF16(p+"mlp.gate.weight", z.E, D)
		t.BF16(p+"mlp.experts.gate_up_proj", z.E, 2*z.I, D)
		t.BF16(p+"mlp.experts.down_proj", z.E, D, z.I)
		t.BF16(p+"mlp.shared_expert.gate_proj.weight", z.SI, D)
		t.BF16(p+"mlp.shared_expert.up_proj.weight", z.SI, D)
		t.BF16(p+"mlp.shared_expert.down_proj.weight", D, z.SI)
		t.BF16(p+"mlp.shared_expert_gate.weight", 1, D)
	}
	const lm = "model.language_model."
	t.BF16(lm+"embed_tokens.weight", V, D)
	C := 2*z.Hk*dk + z.Hv*dv
	for i := int64(0); i < z.Layers; i++ {
		p := lm + "layers." + strconv.FormatInt(i, 10) + "."
		t.BF16(p+"input_layernorm.weight", D)
		if i%4 == 3 {
			attention(p)
		} else {
			t.BF16(p+"linear_attn.in_proj_qkv.weight", C, D)
			t.BF16(p+"linear_attn.in_proj_z.weight", z.Hv*dv, D)
			t.BF16(p+"linear_attn.in_proj_b.weight", z.Hv, D)
			t.BF16(p+"linear_attn.in_proj_a.weight", z.Hv, D)
			t.BF16(p+"linear_attn.conv1d.weight", C, 1, 4)
			t.BF16(p+"linear_attn.dt_bias", z.Hv)
			t.F32(p+"linear_attn.A_log", z.Hv)
			t.F32(p+"linear_attn.norm.weight", dv)
			t.BF16(p+"linear_attn.out_proj.weight", D, z.Hv*dv)
		}
		t.BF16(p+"post_attention_layernorm.weight", D)
		moe(p)
	}
	t.BF16(lm+"norm.weight", D)
	t.BF16("lm_head.weight", V, D)
	t.BF16("mtp.fc.weight", D, 2*D)
	t.BF16("mtp.pre_fc_norm_embedding.weight", D)
	t.BF16("mtp.pre_fc_norm_hidden.weight", D)
	t.BF16("mtp.layers.0.input_layernorm.weight", D)
	attention("mtp.layers.0.")
	t.BF16("mtp.layers.0.post_attention_layernorm.weight", D)
	moe("mtp.layers.0.")
	t.BF16("mtp.norm.weight", D)
	t.VisionTower(27, 1152, 4304, D)
	return t.Out
}

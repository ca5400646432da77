// Package gen is the Qwen3-Next family's generator settings (internal/modelgen, registered in
// family/all/gen): the config.json of a generated checkpoint, the presets, the published bf16 and
// FP8 releases' structure, the FP8 release's layout and the format fixtures.
package gen

import (
	"strconv"
	"strings"

	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/internal/modelgen/genreg"
	"github.com/stratakernels/strata/internal/safetensors"
)

func init() {
	genreg.Register(genreg.Family{
		Name:   "qwen3_next",
		Config: config,
		Presets: map[string]genreg.Spec{
			"qwen3next-small": {Arch: "qwen3_next", D: 512, Layers: 8, Vocab: 8192, AttnEvery: 4,
				Hq: 12, Hkv: 1, HeadDim: 256, Hk: 2, Hv: 6, Dk: 128, Dv: 128, Experts: 32, TopK: 10, MoEI: 128, SharedI: 128,
				RopeTheta: 1e7, Seed: 2, PerExpertLayout: true},
			// A 4-layer slice of Qwen3-Next-80B-A3B at real width (3 GDN + 1 attention, 64 of the
			// 512 experts, top-10), in the published per-expert layout that mlx_lm.convert reads:
			// the bf16 side of the MLX benchmarks (its 4- and 8-bit conversions come from
			// modelgen.ConvertMLX).
			"qwen3next-slice": {Arch: "qwen3_next", D: 2048, Layers: 4, Vocab: 8192, AttnEvery: 4,
				Hq: 16, Hkv: 2, HeadDim: 256, Hk: 16, Hv: 32, Dk: 128, Dv: 128, Experts: 64, TopK: 10, MoEI: 512, SharedI: 512,
				RopeTheta: 1e7, Seed: 5, PerExpertLayout: true},
			// The source of the format fixtures: the published per-expert layout, the shared
			// expert 128 wide (the FP8 release regroups the shared expert's gate and up rows in
			// whole 128-row blocks).
			"qwen3next-fmt": {Arch: "qwen3_next", D: 128, Layers: 4, Vocab: 512, AttnEvery: 4,
				Hq: 2, Hkv: 1, HeadDim: 256, Hk: 1, Hv: 2, Dk: 128, Dv: 128, Experts: 8, TopK: 4, MoEI: 32, SharedI: 128,
				RopeTheta: 1e7, Seed: 22, PerExpertLayout: true},
			// The source of the GGUF fixtures (internal/gguf/testdata): 1 GDN + 1 attention layer,
			// a GDN with 2 value heads per key head over 2 key heads, so that the converter's
			// regrouping of in_proj_qkvz moves rows; 128 wide.
			"qwen3next-gguf": {Arch: "qwen3_next", D: 128, Layers: 2, Vocab: 128, AttnEvery: 2,
				Hq: 2, Hkv: 1, HeadDim: 32, Hk: 2, Hv: 4, Dk: 32, Dv: 32, Experts: 4, TopK: 2, MoEI: 32, SharedI: 32,
				RopeTheta: 1e7, Seed: 33, PerExpertLayout: true},
		},
		Releases: []genreg.Release{
			genreg.NewRelease("qwen3-next-80b-a3b", 41, qwen3NextConfig, qwen3NextTensors),
			// The FP8 release: no public source lists its full tensor table, so it is assembled
			// from the bf16 release's by the rules docs/FORMATS.md section 4 gives; its shard count
			// is the bf16 release's 41 halved (21), a stated choice.
			genreg.NewRelease(fp8Release, 21, func() map[string]any { return withFP8(qwen3NextConfig(), qwen3NextFP8Tensors()) }, qwen3NextFP8Tensors),
		},
		FP8Releases: map[string]genreg.FP8Options{fp8Release: fp8Options},
		// The FP8 release's layout with BF16 scales (as published) and F32 ones, and mlx-lm's
		// mxfp4 conversion.
		FormatFixtures: []genreg.FormatFixture{
			{Name: "qwen3next-fmt", Source: "qwen3next-fmt"},
			{Name: "qwen3next-fmt-fp8", Source: "qwen3next-fmt", FP8: fp8Layout(safetensors.BF16)},
			{Name: "qwen3next-fmt-fp8-f32", Source: "qwen3next-fmt", FP8: fp8Layout(safetensors.F32)},
			{Name: "qwen3next-fmt-mxfp4", Source: "qwen3next-fmt", MLX: &genreg.MLXOptions{Quantize: true, Mode: "mxfp4"}},
		},
	})
}

const fp8Release = "qwen3-next-80b-a3b-instruct-fp8"

// fp8Options is the layout of Qwen3-Next-80B-A3B-Instruct-FP8: every Linear layer converted but
// lm_head, the router mlp.gate, mlp.shared_expert_gate and linear_attn.in_proj_ba, its
// modules_to_not_convert listing every other tensor's module too; BF16 scales.
var fp8Options = genreg.FP8Options{Keep: []string{"lm_head", "mlp.gate", "mlp.shared_expert_gate", "linear_attn.in_proj_ba"},
	ListVectors: true, Fmt: true, ScaleDType: safetensors.BF16}

// fp8Layout is the FP8 release's layout with scales of dtype scales.
func fp8Layout(scales safetensors.DType) *genreg.FP8Options {
	o := fp8Options
	o.ScaleDType = scales
	return &o
}

// config is the config.json of a generated Qwen3-Next checkpoint (Qwen3NextForCausalLM).
func config(s genreg.Spec) map[string]any {
	c := genreg.BaseConfig(s, "full_attention")
	c["architectures"] = []string{"Qwen3NextForCausalLM"}
	c["partial_rotary_factor"] = 0.25
	c["decoder_sparse_step"] = 1
	c["mlp_only_layers"] = []int{}
	c["intermediate_size"] = s.MoEI * 2
	c["eos_token_id"] = nil
	return c
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
	t := &genreg.Table{}
	attention := func(p string) {
		t.BF16(p+"self_attn.q_proj.weight", 2*Hq*hd, D)
		t.BF16(p+"self_attn.k_proj.weight", Hkv*hd, D)
		t.BF16(p+"self_attn.v_proj.weight", Hkv*hd, D)
		t.BF16(p+"self_attn.o_proj.weight", D, Hq*hd)
		t.BF16(p+"self_attn.q_norm.weight", hd)
		t.BF16(p+"self_attn.k_norm.weight", hd)
	}
	moe := func(p string) {
		t.BF16(p+"mlp.gate.weight", E, D)
		for e := 0; e < E; e++ {
			q := p + "mlp.experts." + strconv.Itoa(e) + "."
			t.BF16(q+"gate_proj.weight", I, D)
			t.BF16(q+"up_proj.weight", I, D)
			t.BF16(q+"down_proj.weight", D, I)
		}
		t.BF16(p+"mlp.shared_expert.gate_proj.weight", SI, D)
		t.BF16(p+"mlp.shared_expert.up_proj.weight", SI, D)
		t.BF16(p+"mlp.shared_expert.down_proj.weight", D, SI)
		t.BF16(p+"mlp.shared_expert_gate.weight", 1, D)
	}
	t.BF16("model.embed_tokens.weight", V, D)
	for i := 0; i < 48; i++ {
		p := "model.layers." + strconv.Itoa(i) + "."
		t.BF16(p+"input_layernorm.weight", D)
		if i%4 == 3 {
			attention(p)
		} else {
			// in_proj_qkvz rows are grouped per qk head: [q (dk) | k (dk) | v, z of its Hv/Hk value heads].
			t.BF16(p+"linear_attn.in_proj_qkvz.weight", 2*Hk*dk+2*Hv*dv, D)
			t.BF16(p+"linear_attn.in_proj_ba.weight", 2*Hv, D)
			t.BF16(p+"linear_attn.conv1d.weight", 2*Hk*dk+Hv*dv, 1, 4)
			t.BF16(p+"linear_attn.dt_bias", Hv)
			t.BF16(p+"linear_attn.A_log", Hv)
			t.BF16(p+"linear_attn.norm.weight", dv)
			t.BF16(p+"linear_attn.out_proj.weight", D, Hv*dv)
		}
		t.BF16(p+"post_attention_layernorm.weight", D)
		moe(p)
	}
	t.BF16("model.norm.weight", D)
	t.BF16("lm_head.weight", V, D)
	// The multi-token-prediction head: one full-attention MoE block with its own norms.
	t.BF16("mtp.fc.weight", D, 2*D)
	t.BF16("mtp.pre_fc_norm_embedding.weight", D)
	t.BF16("mtp.pre_fc_norm_hidden.weight", D)
	t.BF16("mtp.layers.0.input_layernorm.weight", D)
	attention("mtp.layers.0.")
	t.BF16("mtp.layers.0.post_attention_layernorm.weight", D)
	moe("mtp.layers.0.")
	t.BF16("mtp.norm.weight", D)
	return t.Out
}

// qwen3NextFP8Keep are the Linear modules Qwen3-Next-80B-A3B-Instruct-FP8 keeps in bf16 besides
// the embedding (its modules_to_not_convert, by dotted parts).
var qwen3NextFP8Keep = []string{"lm_head", "mlp.gate", "mlp.shared_expert_gate", "linear_attn.in_proj_ba", "mtp.fc"}

// qwen3NextFP8Tensors is the bf16 release's table with every Linear weight but the embedding and
// the modules of qwen3NextFP8Keep as FP8 (the mtp head's too).
func qwen3NextFP8Tensors() []safetensors.WriteTensor {
	keep := &hfconfig.FP8Quant{NotConvert: qwen3NextFP8Keep}
	var out []safetensors.WriteTensor
	for _, t := range qwen3NextTensors() {
		mod := strings.TrimSuffix(t.Name, ".weight")
		if _, kept := keep.Excluded(mod); len(t.Shape) == 2 && mod != t.Name && !kept && !strings.HasSuffix(mod, "embed_tokens") {
			out = genreg.FP8Linear(out, t)
			continue
		}
		out = append(out, t)
	}
	return out
}

// withFP8 adds the FP8 release's quantization_config to cfg: modules_to_not_convert lists the
// module of every tensor of ts left in float, of the text model and the mtp head, but the
// embedding and the final norm, which the published list omits; "fmt": "e4m3".
func withFP8(cfg map[string]any, ts []safetensors.WriteTensor) map[string]any {
	var notConvert []string
	for _, t := range ts {
		if t.DType == safetensors.F8E4M3 || strings.HasSuffix(t.Name, "weight_scale_inv") {
			continue
		}
		if mod := strings.TrimSuffix(t.Name, ".weight"); mod != "model.embed_tokens" && mod != "model.norm" {
			notConvert = append(notConvert, mod)
		}
	}
	qc := genreg.FP8QuantConfig(notConvert)
	qc["fmt"] = "e4m3"
	cfg["quantization_config"] = qc
	return cfg
}

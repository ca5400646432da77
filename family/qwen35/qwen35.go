// Package qwen35 is the Qwen3.5 / Qwen3.6 family (transformers' qwen3_5 and qwen3_5_moe:
// Qwen3.5-0.8B to -27B and Qwen3.6-27B dense, Qwen3.5-35B-A3B, -122B-A10B, -397B-A17B and
// Qwen3.6-35B-A3B with experts): Gated DeltaNet layers with separate projections (in_proj_qkv,
// in_proj_z, in_proj_b, in_proj_a; value head h reads qk head h / (Hv/Hk)) and a silu-gated norm,
// gated full attention every full_attention_interval-th layer (per head [query | gate], zero-centred
// q/k norms, partial RoPE over a quarter of the head), a dense SwiGLU MLP in every layer (qwen3_5)
// or a sparse MoE block with a sigmoid-gated shared expert whose top-k weights are always
// renormalised (qwen3_5_moe), one residual stream with zero-centred RMSNorms and a final norm.
// The math follows transformers' modeling_qwen3_5.py and modeling_qwen3_5_moe.py (v5.17), the
// defaults their configuration files. The published models are multimodal: the text model sits
// under text_config, its tensors under model.language_model.; the vision tower (model.visual.*)
// and the multi-token-prediction head (mtp.*) are skipped.
//
// RoPE: rope_parameters carries mrope_section and mrope_interleaved (multimodal RoPE over the
// temporal, height and width positions). For text all three positions are the token's, so the
// sections only split the rotary pairs and the result is plain partial RoPE; the sections must
// sum to the rotary dim / 2 (hfconfig checks it).
//
// Checkpoint layouts: model.language_model. (the published Qwen3_5ForConditionalGeneration /
// Qwen3_5MoeForConditionalGeneration files; experts fused as gate_up_proj [E, 2I, D] and
// down_proj [E, D, I], or one tensor per expert and projection), model. (a text-only re-save), and
// the MLX conversions of mlx-vlm and mlx-lm (language_model.model., language_model.lm_head, experts
// stacked under switch_mlp, conv1d [C, K, 1], input/post-attention layernorms, the final norm and
// q/k norms stored as 1 + w, linear_attn.norm never; the vision tower under vision_tower.*).
package qwen35

import (
	"fmt"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/hfconfig"
)

func init() { family.Register(Family{}) }

// Family is Qwen3.5 / Qwen3.6.
type Family struct{}

// Name is "qwen3_5".
func (Family) Name() string { return "qwen3_5" }

// model types: the multimodal configs (the text model under text_config) and the text-only ones.
var (
	textOf = map[string]string{"qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"}
	moe    = map[string]bool{"qwen3_5_moe": true, "qwen3_5_moe_text": true}
)

// ModelTypes: qwen3_5 and qwen3_5_moe (multimodal, the text model under text_config), and the
// text-only qwen3_5_text and qwen3_5_moe_text.
func (Family) ModelTypes() map[string]string {
	return map[string]string{"qwen3_5": "Qwen3.5 / Qwen3.6", "qwen3_5_moe": "Qwen3.5 / Qwen3.6 MoE",
		"qwen3_5_text": "Qwen3.5 / Qwen3.6", "qwen3_5_moe_text": "Qwen3.5 / Qwen3.6 MoE"}
}

// ReadConfig reads a qwen3_5 / qwen3_5_moe config (text model under text_config; vision_config and
// the image and video token ids ignored) or a flat qwen3_5_text / qwen3_5_moe_text one, with the
// defaults of Qwen3_5TextConfig / Qwen3_5MoeTextConfig. Settings transformers ignores silently are
// refused here rather than guessed: a norm_topk_prob of false, mlp_only_layers, a
// decoder_sparse_step other than 1 (the MoE model renormalises and routes in every layer), an
// output_gate_type other than silu ("swish"), attn_output_gate false, layer_types disagreeing with
// full_attention_interval (MLX readers place the attention layers by the interval), and a
// tie_word_embeddings of the text model disagreeing with the top level's.
func (Family) ReadConfig(top *hfconfig.Object, c *hfconfig.Config) []string {
	text := top
	if want, nested := textOf[c.ModelType]; nested {
		c.LanguageModelOnly = top.Bool("language_model_only", false)
		sub, ok := top.Sub("text_config")
		if !ok {
			top.Fail("text_config", "model_type %s needs a text_config object", c.ModelType)
			return nil
		}
		text = sub
		if tmt := text.Str("model_type", want); tmt != want {
			return []string{fmt.Sprintf("text_config.model_type %q, want %s", tmt, want)}
		}
		if err := hfconfig.ReadQuantization(c, text); err != nil {
			return []string{err.Error()}
		}
	}
	isMoE := moe[c.ModelType]
	d := hfconfig.TextDefaults{Vocab: 248320, D: 4096, Layers: 32, Hq: 16, Hkv: 4, HeadDim: 256, MaxPositions: 32768,
		Hk: 16, Hv: 32, Dk: 128, Dv: 128, ConvK: 4, PartialRotary: 0.25}
	if isMoE {
		d.D, d.Layers, d.Hkv = 2048, 40, 2
	}
	unsupported := hfconfig.ReadText(c, text, d)
	if act := text.Str("output_gate_type", "silu"); act != "silu" && act != "swish" {
		unsupported = append(unsupported, fmt.Sprintf("%s %q (the Qwen3.5 gated norm is silu)", text.Name("output_gate_type"), act))
	}
	if !text.Bool("attn_output_gate", true) {
		unsupported = append(unsupported, text.Name("attn_output_gate")+" false (the Qwen3.5 attention always gates its output)")
	}
	if isMoE {
		hfconfig.ReadMoE(c, text, hfconfig.MoEDefaults{Experts: 256, TopK: 8, MoEI: 512, SharedI: 512})
		if !c.NormTopK {
			unsupported = append(unsupported, text.Name("norm_topk_prob")+" false (Qwen3.5 MoE always renormalises the top-k weights)")
		}
		hfconfig.ReadSparseStep(c, text, 0) // intermediate_size, when a file carries one, is unused
		if c.DecoderSparseStep != 1 || len(c.MLPOnlyLayers) > 0 {
			unsupported = append(unsupported, fmt.Sprintf("%s %d and %s %v (every Qwen3.5 MoE layer is sparse)",
				text.Name("decoder_sparse_step"), c.DecoderSparseStep, text.Name("mlp_only_layers"), c.MLPOnlyLayers))
		}
		c.DenseI = 0
	} else {
		c.DenseI = text.Int("intermediate_size", 12288)
	}
	names := map[string]hfconfig.LayerType{
		"linear_attention": hfconfig.LinearAttention, "mamba": hfconfig.LinearAttention,
		"full_attention": hfconfig.FullAttention, "attention": hfconfig.FullAttention,
	}
	hfconfig.ReadLayerTypes(c, text, hfconfig.FullAttention, names)
	if text.Has("layer_types") && text.Has("full_attention_interval") {
		if n := text.Int("full_attention_interval", 4); n > 0 {
			for i, t := range c.LayerTypes {
				if (t == hfconfig.FullAttention) != ((i+1)%n == 0) {
					text.Fail("layer_types", "layer %d is %s, but full_attention_interval %d places %s there (MLX readers go by the interval: the file describes two models)",
						i, t, n, map[bool]string{true: "attention", false: "a GDN layer"}[(i+1)%n == 0])
					break
				}
			}
		}
	}
	text.Unknown(hfconfig.IgnoredFields)
	if text != top {
		if top.Has("tie_word_embeddings") {
			if tie := top.Bool("tie_word_embeddings", false); text.Has("tie_word_embeddings") && tie != c.TieWordEmbeddings {
				top.Fail("tie_word_embeddings", "%v disagrees with text_config.tie_word_embeddings %v", tie, c.TieWordEmbeddings)
			} else {
				c.TieWordEmbeddings = tie
			}
		}
		if eos := top.IntOrInts("eos_token_id"); len(c.EOS) == 0 {
			c.EOS = eos
		}
		top.Unknown(hfconfig.IgnoredFields, hfconfig.VisionFields)
	}
	return unsupported
}

// MLXLMModel: mlx-lm runs the dense models as qwen3_5 and the MoE ones as qwen3_5_moe
// (family.MLXLM).
func (Family) MLXLMModel(c *hfconfig.Config) string {
	if moe[c.ModelType] {
		return "qwen3_5_moe"
	}
	return "qwen3_5"
}

// Validate: the MoE model has experts.
func (Family) Validate(c *hfconfig.Config) []string {
	if moe[c.ModelType] && c.Experts <= 0 {
		return []string{fmt.Sprintf("%s needs num_experts > 0", c.ModelType)}
	}
	return nil
}

var (
	hfSkips = []family.Skip{
		{Prefix: "mtp.", Reason: "multi-token-prediction head: used in decoding, not by prefill"},
		{Prefix: "model.visual.", Reason: "vision tower: strata prefills text", Vision: true},
	}
	mlxSkips = []family.Skip{
		{Prefix: "vision_tower.", Reason: "vision tower: strata prefills text", Vision: true},
		{Prefix: "mtp.", Reason: "multi-token-prediction head: used in decoding, not by prefill"},
	}
)

// Prefixes: model.language_model. (the published files), model. (a text-only re-save) and
// language_model.model. (mlx-vlm's and mlx-lm's conversions).
func (Family) Prefixes() []family.Prefix {
	return []family.Prefix{
		{Text: "model.language_model.", LMHead: "lm_head.weight", Skipped: hfSkips},
		{Text: "model.", LMHead: "lm_head.weight", Skipped: hfSkips},
		{Text: "language_model.model.", LMHead: "language_model.lm_head.weight", MLXOnly: true, Skipped: mlxSkips},
	}
}

// Plan builds the Qwen3.5 layer plan. An MLX conversion stores the zero-centred RMSNorm weights
// (input_layernorm, post_attention_layernorm, norm, q_norm, k_norm) as 1 + w (mlx-vlm's and
// mlx-lm's qwen3_5 sanitize); linear_attn.norm is plain in both.
func (Family) Plan(c *hfconfig.Config, l family.Layout) (*family.Plan, error) {
	b := family.NewBuilder(c, l)
	p := b.P
	p.Embed = b.Embedding(l.Model("embed_tokens.weight"), c.Vocab, c.D)
	b.Head()
	norm := b.Gain(l.Model("norm.weight"), c.D, true, l.ShiftedGains)
	p.Head.Norm = &norm
	for i := 0; i < c.Layers; i++ {
		ly := family.Layer{Index: i, Type: c.LayerTypes[i]}
		in := b.Gain(l.Layer(i, "input_layernorm.weight"), c.D, true, l.ShiftedGains)
		post := b.Gain(l.Layer(i, "post_attention_layernorm.weight"), c.D, true, l.ShiftedGains)
		ly.In.Norm, ly.Post.Norm = &in, &post
		if ly.Type == hfconfig.LinearAttention {
			ly.GDN = b.GDN(i)
		} else {
			ly.Attn = b.Attention(i, l.ShiftedGains)
		}
		b.MLP(&ly)
		p.Layers = append(p.Layers, ly)
	}
	b.Skip()
	return p, p.Check()
}

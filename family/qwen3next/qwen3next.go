// Package qwen3next is the Qwen3-Next family (transformers' qwen3_next: Qwen3-Next-80B-A3B,
// Qwen3-Coder-Next): Gated DeltaNet layers with fused projections grouped per qk head, gated full
// attention every full_attention_interval-th layer, sparse MoE with a gated shared expert (dense
// MLPs where mlp_only_layers or decoder_sparse_step say), one residual stream with zero-centred
// RMSNorms before each block, a final norm. The math follows transformers' modeling_qwen3_next.py
// (v5.17), the defaults its configuration_qwen3_next.py.
//
// Checkpoint layouts: the Hugging Face releases (prefix model., experts one tensor per expert, or
// fused in a transformers 5 re-save; mtp.* skipped) and mlx-lm's conversions (experts stacked
// under switch_mlp, conv1d [C, K, 1], input/post-attention layernorms, the final norm and q/k
// norms stored as 1 + w, affine-quantized modules).
package qwen3next

import (
	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/hfconfig"
)

func init() { family.Register(Family{}) }

// Family is Qwen3-Next.
type Family struct{}

// Name is "qwen3_next".
func (Family) Name() string { return "qwen3_next" }

// ModelTypes: qwen3_next.
func (Family) ModelTypes() map[string]string { return map[string]string{"qwen3_next": "Qwen3-Next"} }

// ReadConfig reads a qwen3_next config.json with Qwen3NextConfig's defaults.
func (Family) ReadConfig(top *hfconfig.Object, c *hfconfig.Config) []string {
	unsupported := hfconfig.ReadText(c, top, hfconfig.TextDefaults{Vocab: 151936, D: 2048, Layers: 48, Hq: 16, Hkv: 2, HeadDim: 256,
		MaxPositions: 32768, Hk: 16, Hv: 32, Dk: 128, Dv: 128, ConvK: 4, PartialRotary: 0.25})
	hfconfig.ReadMoE(c, top, hfconfig.MoEDefaults{Experts: 512, TopK: 10, MoEI: 512, SharedI: 512})
	hfconfig.ReadSparseStep(c, top, 5632)
	hfconfig.ReadLayerTypes(c, top, hfconfig.FullAttention, map[string]hfconfig.LayerType{
		"linear_attention": hfconfig.LinearAttention, "mamba": hfconfig.LinearAttention,
		"full_attention": hfconfig.FullAttention, "attention": hfconfig.FullAttention,
	})
	top.Unknown(hfconfig.IgnoredFields)
	return unsupported
}

// MLXLMModel: mlx-lm runs Qwen3-Next as qwen3_next (family.MLXLM).
func (Family) MLXLMModel(*hfconfig.Config) string { return "qwen3_next" }

// Validate has nothing to add to hfconfig's checks.
func (Family) Validate(*hfconfig.Config) []string { return nil }

// Prefixes: model. (Hugging Face and mlx-lm), lm_head.weight.
func (Family) Prefixes() []family.Prefix {
	return []family.Prefix{{Text: "model.", LMHead: "lm_head.weight",
		Skipped: []family.Skip{{Prefix: "mtp.", Reason: "multi-token-prediction head: used in decoding, not by prefill"}}}}
}

// Plan builds the Qwen3-Next layer plan. An MLX conversion stores the zero-centred RMSNorm
// weights (input_layernorm, post_attention_layernorm, norm, q_norm, k_norm) as 1 + w (mlx-lm's
// qwen3_next sanitize); linear_attn.norm is plain in both.
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
			ly.GDN = b.GDNGrouped(i)
		} else {
			ly.Attn = b.Attention(i, l.ShiftedGains)
		}
		b.MLP(&ly)
		p.Layers = append(p.Layers, ly)
	}
	b.Skip()
	return p, p.Check()
}

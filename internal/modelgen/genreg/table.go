package genreg

import (
	"encoding/binary"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
)

// Table builds a release's tensor table in checkpoint order.
type Table struct{ Out []safetensors.WriteTensor }

// BF16 adds a BF16 tensor without data.
func (t *Table) BF16(name string, shape ...int64) {
	t.Out = append(t.Out, safetensors.WriteTensor{Name: name, DType: safetensors.BF16, Shape: shape})
}

// F32 adds an F32 tensor without data.
func (t *Table) F32(name string, shape ...int64) {
	t.Out = append(t.Out, safetensors.WriteTensor{Name: name, DType: safetensors.F32, Shape: shape})
}

// I64 adds an I64 tensor [len(values)] holding values.
func (t *Table) I64(name string, values []int64) { t.Out = append(t.Out, Int64Tensor(name, values)) }

// Int64Tensor is an I64 tensor [len(v)] of v (little-endian).
func Int64Tensor(name string, v []int64) safetensors.WriteTensor {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return safetensors.WriteTensor{Name: name, DType: safetensors.I64, Shape: []int64{int64(len(v))}, Data: b}
}

// VisionTower adds the vision tower the published multimodal releases share, under
// model.visual.: patch embedding (3 channels, temporal patch 2, 16 x 16 patches), a learned
// position embedding of 2304 positions, depth pre-norm blocks of width h (attention and an MLP of
// width inter, with biases) and the patch merger into the text hidden size out (spatial merge 2:
// 4 patches per token).
func (t *Table) VisionTower(depth, h, inter, out int64) {
	const v = "model.visual."
	t.BF16(v+"patch_embed.proj.weight", h, 3, 2, 16, 16)
	t.BF16(v+"patch_embed.proj.bias", h)
	t.BF16(v+"pos_embed.weight", 2304, h)
	for b := int64(0); b < depth; b++ {
		p := v + "blocks." + strconv.FormatInt(b, 10) + "."
		for _, n := range []string{"norm1", "norm2"} {
			t.BF16(p+n+".weight", h)
			t.BF16(p+n+".bias", h)
		}
		t.BF16(p+"attn.qkv.weight", 3*h, h)
		t.BF16(p+"attn.qkv.bias", 3*h)
		t.BF16(p+"attn.proj.weight", h, h)
		t.BF16(p+"attn.proj.bias", h)
		t.BF16(p+"mlp.linear_fc1.weight", inter, h)
		t.BF16(p+"mlp.linear_fc1.bias", inter)
		t.BF16(p+"mlp.linear_fc2.weight", h, inter)
		t.BF16(p+"mlp.linear_fc2.bias", h)
	}
	t.BF16(v+"merger.norm.weight", h)
	t.BF16(v+"merger.norm.bias", h)
	t.BF16(v+"merger.linear_fc1.weight", 4*h, 4*h)
	t.BF16(v+"merger.linear_fc1.bias", 4*h)
	t.BF16(v+"merger.linear_fc2.weight", out, 4*h)
	t.BF16(v+"merger.linear_fc2.bias", out)
}

// FP8Linear appends the 2-D ".weight" tensor t of a table to out as F8_E4M3 codes followed by its
// BF16 weight_scale_inv [ceil(N/128), ceil(K/128)] (transformers' fine-grained FP8 blocks,
// op.FP8Grid).
func FP8Linear(out []safetensors.WriteTensor, t safetensors.WriteTensor) []safetensors.WriteTensor {
	g := op.FP8Grid(int(t.Shape[0]), int(t.Shape[1]))
	t.DType = safetensors.F8E4M3
	return append(out, t, safetensors.WriteTensor{Name: strings.TrimSuffix(t.Name, ".weight") + ".weight_scale_inv", DType: safetensors.BF16,
		Shape: []int64{int64(g[0]), int64(g[1])}})
}

// BaseConfig is the part of a generated config.json the families share: sizes, heads, the Gated
// DeltaNet and MoE fields, RoPE with partial_rotary_factor 0.25 and the bookkeeping fields
// transformers writes, with layer_types from AttnEvery (attn naming the attention layers).
func BaseConfig(s Spec, attn string) map[string]any {
	types := make([]string, s.Layers)
	for i := range types {
		types[i] = "linear_attention"
		if s.AttnEvery > 0 && (i+1)%s.AttnEvery == 0 {
			types[i] = attn
		}
	}
	c := map[string]any{
		"attention_bias": false, "attention_dropout": 0.0, "bos_token_id": nil, "dtype": "bfloat16",
		"head_dim": s.HeadDim, "hidden_act": "silu", "hidden_size": s.D, "initializer_range": 0.02,
		"layer_types": types, "linear_conv_kernel_dim": 4, "linear_key_head_dim": s.Dk,
		"linear_num_key_heads": s.Hk, "linear_num_value_heads": s.Hv, "linear_value_head_dim": s.Dv,
		"max_position_embeddings": 65536, "model_type": s.Arch,
		"num_attention_heads": s.Hq, "num_hidden_layers": s.Layers, "num_key_value_heads": s.Hkv,
		"pad_token_id": nil, "rms_norm_eps": 1e-6, "tie_word_embeddings": false, "use_cache": true, "vocab_size": s.Vocab,
		"rope_parameters": map[string]any{"partial_rotary_factor": 0.25, "rope_theta": s.RopeTheta, "rope_type": "default"},
	}
	if s.Experts > 0 {
		c["moe_intermediate_size"], c["num_experts"], c["num_experts_per_tok"] = s.MoEI, s.Experts, s.TopK
		c["shared_expert_intermediate_size"], c["norm_topk_prob"] = s.SharedI, true
		c["output_router_logits"], c["router_aux_loss_coef"] = false, 0.001
	}
	return c
}

// MRoPESection splits the rotary pairs of head_dim hd at partial_rotary_factor 0.25 (hd/8 pairs)
// into the temporal, height and width sections in the published releases' proportions 11:11:10.
func MRoPESection(hd int) []int {
	pairs := hd / 8
	return []int{pairs * 11 / 32, pairs * 11 / 32, pairs - 2*(pairs*11/32)}
}

// FP8QuantConfig is the quantization_config the published FP8 releases share: quant_method fp8,
// dynamic activation scales, 128 x 128 weight blocks and modules_to_not_convert, the modules
// notConvert names sorted and without repeats. A release adds its own keys.
func FP8QuantConfig(notConvert []string) map[string]any {
	sort.Strings(notConvert)
	return map[string]any{"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": []any{128, 128},
		"modules_to_not_convert": slices.Compact(notConvert)}
}

package family_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/hfconfig"
)

// TestFP8QuantConfig parses the FP8 releases' quantization_config blocks (both releases'
// config.json as modelgen assembles them): the block size, the lists as written, and an entry
// naming a module by its path or a run of its dotted parts; malformed blocks are ErrConfig
// naming the key.
func TestFP8QuantConfig(t *testing.T) {
	c, err := family.Parse(releaseConfig(t, "qwen3.8-flash-next-fp8", nil))
	if err != nil {
		t.Fatal(err)
	}
	q := c.FP8
	if q == nil || c.Quant != nil || q.Block != [2]int{128, 128} || len(q.Convert) != 1 || len(q.NotConvert) == 0 {
		t.Fatalf("Qwen3.8-Flash-Next-FP8: %+v", q)
	}
	for m, want := range map[string]string{
		"model.language_model.layers.1.ple.ple_embedding.ngram_embedding.shard_7": "ple.ple_embedding.ngram_embedding",
		"model.language_model.layers.1.ple.ple_embedding":                         "",
		"model.language_model.layers.1.ple.ple_embedding.ngram_embedding_x":       "",
	} {
		if e, ok := q.Included(m); e != want || ok != (want != "") {
			t.Errorf("Included(%s) = %q %v, want %q", m, e, ok, want)
		}
	}
	c, err = family.Parse(releaseConfig(t, "qwen3-next-80b-a3b-instruct-fp8", nil))
	if err != nil {
		t.Fatal(err)
	}
	for m, want := range map[string]bool{
		"lm_head": true, "model.layers.3.mlp.gate": true, "model.layers.3.mlp.gate_proj": false,
		"model.layers.0.linear_attn.in_proj_ba": true, "model.layers.0.linear_attn.in_proj_qkvz": false,
		"model.layers.0.mlp.experts.7.gate_proj": false, "model.layers.10.mlp.shared_expert_gate": true,
	} {
		if _, ok := c.FP8.Excluded(m); ok != want {
			t.Errorf("Excluded(%s) = %v, want %v", m, ok, want)
		}
	}
	bad := []struct {
		name string
		qc   map[string]any
		want string
	}{
		{"no block size", map[string]any{"quant_method": "fp8"}, "quantization_config.weight_block_size: missing"},
		{"block of three", map[string]any{"quant_method": "fp8", "weight_block_size": []int{128, 128, 1}}, "quantization_config.weight_block_size: want [rows, columns]"},
		{"unknown key", map[string]any{"quant_method": "fp8", "weight_block_size": []int{128, 128}, "granularity": 3}, "unknown fields quantization_config.granularity"},
		{"list of numbers", map[string]any{"quant_method": "fp8", "weight_block_size": []int{128, 128}, "modules_to_not_convert": []int{1}}, "quantization_config.modules_to_not_convert: want a list of strings"},
		{"with an MLX block", nil, "an MLX quantization block beside an FP8 quantization_config"},
	}
	for _, b := range bad {
		_, err := family.Parse(releaseConfig(t, qwen3Next, func(top, _ map[string]any) {
			if b.qc == nil {
				top["quantization_config"] = map[string]any{"quant_method": "fp8", "weight_block_size": []int{128, 128}}
				top["quantization"] = map[string]any{"bits": 4, "group_size": 64}
				return
			}
			top["quantization_config"] = b.qc
		}))
		if !errors.Is(err, hfconfig.ErrConfig) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: %v, want hfconfig.ErrConfig mentioning %q", b.name, err, b.want)
		}
	}
}

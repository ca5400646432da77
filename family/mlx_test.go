package family_test

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stratakernels/strata/family"
	_ "github.com/stratakernels/strata/family/all"
	"github.com/stratakernels/strata/internal/hfconfig"
)

// TestMLXQuantBlock parses mlx_lm.convert's quantization blocks: the defaults, per-module
// entries (dicts, false, true, null sizes taking affine's 64 and 4 as MLX's to_quantized does),
// the same block under quantization_config alone, and refuses malformed ones naming the key.
func TestMLXQuantBlock(t *testing.T) {
	parse := func(edit func(top map[string]any)) (*hfconfig.Config, error) {
		return family.Parse(releaseConfig(t, qwen3Next, func(top, _ map[string]any) { edit(top) }))
	}
	block := map[string]any{"group_size": 32, "bits": 3, "mode": "affine",
		"model.layers.0.mlp.gate":               map[string]any{"group_size": 64, "bits": 8},
		"lm_head":                               map[string]any{"group_size": nil, "bits": 6, "mode": "affine"},
		"model.layers.1.self_attn.v_proj":       false,
		"model.layers.2.linear_attn.out_proj":   true,
		"model.layers.3.mlp.shared_expert_gate": map[string]any{"bits": nil},
	}
	c, err := parse(func(top map[string]any) { top["quantization"] = block; top["quantization_config"] = block })
	if err != nil {
		t.Fatal(err)
	}
	want := &hfconfig.MLXQuant{Bits: 3, Group: 32, Modules: map[string]hfconfig.ModuleQuant{
		"model.layers.0.mlp.gate":               {Quantized: true, Bits: 8, Group: 64},
		"lm_head":                               {Quantized: true, Bits: 6, Group: 64},
		"model.layers.1.self_attn.v_proj":       {},
		"model.layers.2.linear_attn.out_proj":   {Quantized: true, Bits: 3, Group: 32},
		"model.layers.3.mlp.shared_expert_gate": {Quantized: true, Bits: 4, Group: 64},
	}}
	if !reflect.DeepEqual(c.Quant, want) {
		t.Fatalf("got %+v\nwant %+v", c.Quant, want)
	}
	if m, own := c.Quant.For("model.layers.5.mlp.gate"); own || m != (hfconfig.ModuleQuant{Quantized: true, Bits: 3, Group: 32}) {
		t.Fatalf("default: %+v %v", m, own)
	}
	c, err = parse(func(top map[string]any) { top["quantization_config"] = map[string]any{"bits": 8, "group_size": 128} })
	if err != nil || c.Quant == nil || c.Quant.Bits != 8 || c.Quant.Group != 128 {
		t.Fatalf("quantization_config alone: %+v %v", c, err)
	}
	if c, err := parse(func(map[string]any) {}); err != nil || c.Quant != nil {
		t.Fatalf("no block: %+v %v", c, err)
	}
	bad := []struct {
		name  string
		block any
		want  string
	}{
		{"unknown field", map[string]any{"bits": 4, "group_size": 64, "granularity": 2}, "quantization.granularity: unknown field"},
		{"entry of a number", map[string]any{"bits": 4, "group_size": 64, "lm_head": 8}, "quantization.lm_head: want {group_size, bits} or false"},
		{"entry with an unknown key", map[string]any{"bits": 4, "group_size": 64, "lm_head": map[string]any{"bits": 4, "scale": 1}},
			"quantization.lm_head.scale: unknown field of a per-module entry"},
		{"bits not an integer", map[string]any{"bits": "four", "group_size": 64}, "quantization.bits: want an integer"},
		{"not an object", []int{4, 64}, "quantization: want an object"},
	}
	for _, b := range bad {
		_, err := parse(func(top map[string]any) { top["quantization"] = b.block })
		if !errors.Is(err, hfconfig.ErrConfig) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: %v, want hfconfig.ErrConfig mentioning %q", b.name, err, b.want)
		}
	}
	_, err = parse(func(top map[string]any) {
		top["quantization"] = map[string]any{"bits": 4, "group_size": 64}
		top["quantization_config"] = map[string]any{"bits": 4, "group_size": 32}
	})
	if !errors.Is(err, hfconfig.ErrConfig) || !strings.Contains(err.Error(), "quantization and quantization_config differ") {
		t.Errorf("differing blocks: %v", err)
	}
}

// TestShiftedNorm: under an MLX layout exactly the pre-norms, the final norm and the attention
// q/k norms are read as stored - 1; linear_attn.norm, and every norm of a Hugging Face layout, are
// not.
func TestShiftedNorm(t *testing.T) {
	c, err := family.Load(filepath.Join(testdata, "qwen3next-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	for _, mlx := range []bool{true, false} {
		p, err := family.Of(c).Plan(c, layoutOf(t, c, "model.", family.Stacked, mlx))
		if err != nil {
			t.Fatal(err)
		}
		shifted := map[string]bool{}
		vecs := []family.Vec{*p.Head.Norm}
		for _, l := range p.Layers {
			vecs = append(vecs, *l.In.Norm, *l.Post.Norm)
			if g := l.GDN; g != nil {
				vecs = append(vecs, g.Norm, g.Conv, g.ALog, g.DtBias)
			}
			if a := l.Attn; a != nil {
				vecs = append(vecs, a.QNorm, a.KNorm)
			}
		}
		for _, v := range vecs {
			shifted[v.Tensor] = v.Shifted
		}
		for name, want := range map[string]bool{
			"model.norm.weight": true, "model.layers.0.input_layernorm.weight": true,
			"model.layers.3.post_attention_layernorm.weight": true, "model.layers.3.self_attn.q_norm.weight": true,
			"model.layers.3.self_attn.k_norm.weight": true, "model.layers.0.linear_attn.norm.weight": false,
			"model.layers.0.linear_attn.conv1d.weight": false,
		} {
			got, ok := shifted[name]
			if !ok {
				t.Fatalf("%s is not a vector of the plan", name)
			}
			if got != (want && mlx) {
				t.Errorf("MLX %v %s: shifted %v", mlx, name, got)
			}
		}
	}
}

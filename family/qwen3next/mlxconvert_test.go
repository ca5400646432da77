package qwen3next_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stratakernels/strata/family"
	_ "github.com/stratakernels/strata/family/all"
	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/internal/safetensors"
)

const tinyQwen3Next = "../../testdata/qwen3next-tiny"

// bf16 rounds to nearest even.
func bf16(f float32) uint16 {
	u := math.Float32bits(f)
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// TestConvertMLX: modelgen.ConvertMLX's 4-bit conversion of qwen3next-tiny has mlx_lm's layout
// (switch_mlp experts, conv1d [C, K, 1], norms stored as bf16(1 + w), metadata format mlx, no
// lm_head or mtp changes beyond mlx_lm's, the quantization block twice with the 8-bit router and
// shared-expert gate entries); converting twice gives identical files; the config reads as an
// MLX conversion; modelgen.Dequantize gives a Hugging Face checkpoint of the same structure as
// the source, whose weights are the source's within one quantization step (MLX's scale puts the
// group's edge on a code, so the far end may clip by up to a step).
func TestConvertMLX(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	o := modelgen.MLXOptions{Quantize: true, Bits: 4, Group: 64}
	for _, d := range []string{a, b} {
		if err := modelgen.ConvertMLX(tinyQwen3Next, d, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"config.json", safetensors.SingleFile, safetensors.IndexFile} {
		x, _ := os.ReadFile(filepath.Join(a, f))
		y, _ := os.ReadFile(filepath.Join(b, f))
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Errorf("%s differs between two conversions (or is empty)", f)
		}
	}
	src, err := safetensors.OpenDir(tinyQwen3Next)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out, err := safetensors.OpenDir(a)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if f := out.Files()[0]; f.Metadata["format"] != "mlx" {
		t.Fatalf("metadata %v", f.Metadata)
	}
	get := func(ck *safetensors.Checkpoint, n string) []float32 {
		tn, err := ck.Tensor(n)
		if err != nil {
			t.Fatal(err)
		}
		v, err := tn.Float32()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, n := range out.Names() {
		if strings.Contains(n, "mlp.experts.") {
			t.Fatalf("%s: experts not stacked", n)
		}
	}
	if tn, _ := out.Tensor("model.layers.0.linear_attn.conv1d.weight"); !reflect.DeepEqual(tn.Shape, []int64{1280, 4, 1}) {
		t.Fatalf("conv1d %v", tn.Shape)
	}
	hn, mn := get(src, "model.layers.3.self_attn.q_norm.weight"), get(out, "model.layers.3.self_attn.q_norm.weight")
	for i := range hn {
		if want := math.Float32frombits(uint32(bf16(hn[i]+1)) << 16); mn[i] != want {
			t.Fatalf("q_norm[%d] = %g, want bf16(1 + %g) = %g", i, mn[i], hn[i], want)
		}
	}
	if ln := get(out, "model.layers.0.linear_attn.norm.weight"); !reflect.DeepEqual(ln, get(src, "model.layers.0.linear_attn.norm.weight")) {
		t.Fatal("linear_attn.norm was changed")
	}
	// Expert 5's gate_proj against the stacked, quantized switch_mlp.gate_proj.
	w := get(src, "model.layers.2.mlp.experts.5.gate_proj.weight") // [32, 256]
	codes, _ := out.Tensor("model.layers.2.mlp.switch_mlp.gate_proj.weight")
	sc, bi := get(out, "model.layers.2.mlp.switch_mlp.gate_proj.scales"), get(out, "model.layers.2.mlp.switch_mlp.gate_proj.biases")
	if !reflect.DeepEqual(codes.Shape, []int64{12, 32, 32}) || len(sc) != 12*32*4 {
		t.Fatalf("codes %v %s, scales %d", codes.Shape, codes.DType, len(sc))
	}
	var cfg map[string]any
	raw, _ := os.ReadFile(filepath.Join(a, "config.json"))
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	q := cfg["quantization"].(map[string]any)
	if !reflect.DeepEqual(q, cfg["quantization_config"]) || len(q) != 3+8 || !reflect.DeepEqual(q["model.layers.1.mlp.gate"], map[string]any{"group_size": 64.0, "bits": 8.0}) {
		t.Fatalf("quantization %v", q)
	}

	c, err := family.Load(a)
	if err != nil {
		t.Fatal(err)
	}
	res, err := family.CheckCheckpoint(c, out)
	if err != nil {
		t.Fatal(err)
	}
	// 39 modules quantized: embed, lm_head, 3 x 3 GDN + 4 attention projections, per layer the
	// router, gate/up of the experts, shared gate/up and the shared-expert gate (down_proj's
	// input width 32 is not a multiple of 64).
	if l := res.Plan.Layout; !l.MLX || l.Experts != family.Stacked || len(res.Quant) != 39 || res.Quant["model.layers.0.mlp.shared_expert_gate.weight"].Bits != 8 {
		t.Fatalf("layout %+v, %d quantized modules", l, len(res.Quant))
	}

	hf := t.TempDir()
	if err := modelgen.Dequantize(a, hf, family.PerExpert); err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.OpenDir(hf)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	hc, err := family.Load(hf)
	if err != nil {
		t.Fatal(err)
	}
	hres, err := family.CheckCheckpoint(hc, ck)
	if err != nil {
		t.Fatal(err)
	}
	if l := hres.Plan.Layout; l.MLX || l.Experts != family.PerExpert || len(hres.Quant) != 0 || len(ck.Names()) != len(src.Names()) {
		t.Fatalf("dequantized: %+v, %d tensors (source %d)", l, len(ck.Names()), len(src.Names()))
	}
	// Expert 5's gate_proj, as its codes in the stacked switch_mlp.gate_proj dequantize.
	deq := get(ck, "model.layers.2.mlp.experts.5.gate_proj.weight")
	for i, v := range w {
		g := 5*32*4 + i/64
		step := math.Abs(float64(sc[g]))
		if d := math.Abs(float64(deq[i] - v)); d > step*(1+16.0/256)+math.Abs(float64(bi[g]))/256+1e-6 {
			t.Fatalf("expert 5 gate_proj element %d: %g dequantizes to %g (scale %g)", i, v, deq[i], sc[g])
		}
	}
	if qn := get(ck, "model.layers.3.self_attn.q_norm.weight"); qn[7] != mn[7]-1 {
		t.Fatalf("q_norm[7] %g, want %g - 1", qn[7], mn[7])
	}
}

// TestConvertMLXMixed: mixed_3_6 gives every quantized module its own entry with a null group
// size (mlx_lm.convert without --q-group-size): 6 bits for lm_head and the v_proj of layer 3 (the
// last eighth of 4 layers), 3 bits for the rest, the router included.
func TestConvertMLXMixed(t *testing.T) {
	d := t.TempDir()
	if err := modelgen.ConvertMLX(tinyQwen3Next, d, modelgen.MLXOptions{Quantize: true, Recipe: "mixed_3_6"}); err != nil {
		t.Fatal(err)
	}
	c, err := family.Load(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Quant.Modules) != 39 {
		t.Fatalf("%d entries", len(c.Quant.Modules))
	}
	for mod, e := range c.Quant.Modules {
		want := 3
		if mod == "lm_head" || mod == "model.layers.3.self_attn.v_proj" {
			want = 6
		}
		if e.Bits != want || e.Group != 64 {
			t.Errorf("%s: %+v, want %d bits in groups of 64", mod, e, want)
		}
	}
	raw, _ := os.ReadFile(filepath.Join(d, "config.json"))
	if !bytes.Contains(raw, []byte(`"group_size": null`)) {
		t.Error("entries without null group sizes")
	}
}

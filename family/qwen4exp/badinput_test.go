package qwen4exp_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/internal/modeltest"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/strata"
)

func bf16To(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

func bf16Bytes(v []float32) []byte {
	out := make([]byte, 2*len(v))
	for i, x := range v {
		u := math.Float32bits(x)
		u += 0x7fff + (u>>16)&1
		out[2*i], out[2*i+1] = byte(u>>16), byte(u>>24)
	}
	return out
}

type tensorEdit = func([]safetensors.WriteTensor, map[string]string) []safetensors.WriteTensor

// set edits tensor name in place.
func set(name string, f func(*safetensors.WriteTensor)) tensorEdit {
	return func(ts []safetensors.WriteTensor, _ map[string]string) []safetensors.WriteTensor {
		for i := range ts {
			if ts[i].Name == name {
				f(&ts[i])
			}
		}
		return ts
	}
}

// drop removes tensor name.
func drop(name string) tensorEdit {
	return func(ts []safetensors.WriteTensor, _ map[string]string) []safetensors.WriteTensor {
		return slices.DeleteFunc(ts, func(w safetensors.WriteTensor) bool { return w.Name == name })
	}
}

// quantConfig edits the FP8 quantization_config.
func quantConfig(f func(q map[string]any)) func(map[string]any) {
	return func(c map[string]any) { f(c["quantization_config"].(map[string]any)) }
}

// TestFormatsBadInput: each damaged FP8 or MLX float-mode checkpoint fails Inspect and LoadModel
// with the same error, naming the tensor and, where config.json and the tensors disagree, both
// readings: a scale grid of the wrong shape, an FP8 tensor missing its scale, a module in
// modules_to_not_convert stored as FP8, an FP8 table modules_to_convert does not name, a float
// Linear that modules_to_not_convert does not name, E5M2 codes, F16 scales, an MLX float mode
// with biases or declared otherwise than its tensors hold.
func TestFormatsBadInput(t *testing.T) {
	fp8, mx := fixture(t, "qwen4exp-fmt-fp8"), fixture(t, "qwen4exp-fmt-mxfp4")
	const (
		pre    = "model.language_model.layers.2.mlp."
		expert = pre + "experts.3.gate_proj"
		table  = "model.language_model.layers.1.ple.ple_embedding.ngram_embedding."
		vpre   = "language_model.model.layers.3."
	)
	cases := []struct {
		name     string
		src      string
		tensors  tensorEdit
		cfg      func(map[string]any)
		sentinel error
		wants    []string
	}{
		{"scale grid of the wrong shape", fp8, set(expert+".weight_scale_inv", func(w *safetensors.WriteTensor) {
			w.Shape, w.Data = []int64{2, 1}, append(w.Data, w.Data...)
		}), nil, strata.ErrCheckpoint, []string{expert + ".weight_scale_inv has shape [2 1], but the weight " + expert + ".weight [32, 128] in blocks of 128 x 128 needs [1, 1]"}},
		{"FP8 tensor missing its scale", fp8, drop(expert + ".weight_scale_inv"), nil, strata.ErrCheckpoint,
			[]string{expert + ".weight is F8_E4M3 without its scale: " + expert + ".weight_scale_inv is missing"}},
		{"table missing its scale", fp8, drop(table + "weight_scale"), nil, strata.ErrCheckpoint,
			[]string{table + "shard_0.weight is F8_E4M3 without its scale", "(nor its whole-tensor scale " + table + "weight_scale)"}},
		{"module in modules_to_not_convert stored as FP8", fp8, nil, quantConfig(func(q map[string]any) {
			q["modules_to_not_convert"] = append(q["modules_to_not_convert"].([]any), "layers.2.mlp.experts.3.gate_proj")
		}), strata.ErrCheckpoint, []string{`config.json's modules_to_not_convert names ` + expert + ` (entry "layers.2.mlp.experts.3.gate_proj"), which reads its weight unconverted, but ` + expert + ".weight is F8_E4M3 (FP8 codes)"}},
		{"FP8 table not in modules_to_convert", fp8, nil, quantConfig(func(q map[string]any) { delete(q, "modules_to_convert") }), strata.ErrCheckpoint,
			[]string{table + "shard_0.weight is an embedding table stored F8_E4M3, but config.json's modules_to_convert does not name"}},
		{"float Linear not in modules_to_not_convert", fp8, nil, quantConfig(func(q map[string]any) {
			q["modules_to_not_convert"] = slices.DeleteFunc(q["modules_to_not_convert"].([]any), func(e any) bool { return e == pre+"shared_expert.gate_proj" })
		}), strata.ErrCheckpoint, []string{pre + "shared_expert.gate_proj.weight is BF16, but config.json's modules_to_not_convert does not name " + pre + "shared_expert.gate_proj"}},
		{"scale grid beside a float weight", fp8, func(ts []safetensors.WriteTensor, _ map[string]string) []safetensors.WriteTensor {
			return append(ts, safetensors.WriteTensor{Name: pre + "shared_expert.up_proj.weight_scale_inv", DType: safetensors.BF16, Shape: []int64{1, 1}, Data: []byte{0x80, 0x3f}})
		}, nil, strata.ErrCheckpoint, []string{pre + "shared_expert.up_proj.weight_scale_inv is an FP8 scale grid, but " + pre + "shared_expert.up_proj.weight is BF16"}},
		{"E5M2 codes", fp8, set(expert+".weight", func(w *safetensors.WriteTensor) { w.DType = safetensors.F8E5M2 }), nil, strata.ErrCheckpoint,
			[]string{expert + ".weight is F8_E5M2: strata reads FP8 weights as E4M3 codes"}},
		{"F16 scales", fp8, set(expert+".weight_scale_inv", func(w *safetensors.WriteTensor) { w.DType = safetensors.F16 }), nil, strata.ErrCheckpoint,
			[]string{expert + ".weight_scale_inv is F16, want BF16 or F32 scales for " + expert + ".weight"}},
		{"FP8 codes without an FP8 config", fp8, nil, func(c map[string]any) { delete(c, "quantization_config") }, strata.ErrCheckpoint,
			[]string{"model.language_model.layers.0.mlp.experts.0.down_proj.weight is F8_E4M3 (FP8), but config.json has no quantization_config with quant_method fp8"}},
		{"float mode with biases", mx, func(ts []safetensors.WriteTensor, _ map[string]string) []safetensors.WriteTensor {
			return append(ts, safetensors.WriteTensor{Name: vpre + "self_attn.o_proj.biases", DType: safetensors.BF16, Shape: []int64{128, 16}, Data: make([]byte, 128*16*2)})
		}, nil, strata.ErrCheckpoint, []string{vpre + "self_attn.o_proj.biases exists, but " + vpre + "self_attn.o_proj.scales holds U8 scales of a float mode"}},
		{"float mode declared otherwise", mx, nil, func(c map[string]any) {
			for _, k := range []string{"quantization", "quantization_config"} {
				c[k].(map[string]any)["mode"], c[k].(map[string]any)["group_size"] = "nvfp4", 16
			}
		}, strata.ErrCheckpoint, []string{"language_model.lm_head.weight holds mxfp4 (4 bits in groups of 32) (its shapes [512 16] and [512 4], U8 scales, for in=128), but config.json declares nvfp4 (4 bits in groups of 16) for language_model.lm_head (the default of the quantization block)"}},
		{"float mode of another group", mx, nil, func(c map[string]any) {
			for _, k := range []string{"quantization", "quantization_config"} {
				c[k].(map[string]any)["group_size"] = 64
			}
		}, strata.ErrUnsupported, []string{`MLX quantization mode "mxfp4"`, "with 4 bits in groups of 64: mlx fixes the mode at 4 bits in groups of 32"}},
	}
	dev, err := strata.Open(strata.Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := modeltest.Rewrite(t, tc.src, tc.tensors, tc.cfg)
			_, ierr := strata.Inspect(dir)
			m, lerr := strata.LoadModel(dev, dir, strata.LoadOptions{})
			if m != nil {
				m.Close()
			}
			for _, err := range []error{ierr, lerr} {
				if !errors.Is(err, tc.sentinel) {
					t.Fatalf("error %v does not wrap %v", err, tc.sentinel)
				}
				if tc.sentinel == strata.ErrCheckpoint && !errors.Is(err, hfconfig.ErrTensors) && !errors.Is(err, hfconfig.ErrConfig) {
					t.Errorf("error %v wraps neither hfconfig.ErrTensors nor ErrConfig", err)
				}
				for _, w := range tc.wants {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
			}
			if ierr.Error() != lerr.Error() {
				t.Errorf("Inspect and LoadModel disagree:\n%v\n%v", ierr, lerr)
			}
		})
	}
}

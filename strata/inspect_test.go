package strata

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/internal/safetensors"
)

// headerOnly writes a published release without its weights (modelgen.WriteHeaderOnly).
func headerOnly(t *testing.T, name string, opts modelgen.HeaderOnly) string {
	t.Helper()
	dir := t.TempDir()
	if err := modelgen.WriteHeaderOnly(dir, modelgen.Releases[name], opts); err != nil {
		t.Fatal(err)
	}
	return dir
}

// releaseBytes sums the release's tensor bytes: all of them, and those under a prefix.
func releaseBytes(name string) (all int64, byPrefix map[string]int64, counts map[string]int) {
	byPrefix, counts = map[string]int64{}, map[string]int{}
	for _, w := range modelgen.Releases[name].Tensors() {
		b := int64(w.DType.Size())
		for _, s := range w.Shape {
			b *= s
		}
		all += b
		// "vectors": the text model's norm, conv and gate weights, which the loader widens from
		// BF16 to float32 (2 more bytes per element in memory)
		text := !strings.HasPrefix(w.Name, "mtp.") && !strings.HasPrefix(w.Name, "model.visual.") && w.DType == safetensors.BF16
		if text && (len(w.Shape) == 1 || strings.Contains(w.Name, "conv1d")) {
			byPrefix["vectors"] += b
		}
		for _, p := range []string{"mtp.", "model.visual."} {
			if strings.HasPrefix(w.Name, p) {
				byPrefix[p] += b
				counts[p]++
			}
		}
		counts[""]++
	}
	return all, byPrefix, counts
}

// TestInspectReleases: Inspect of the header-only Qwen3.8-Flash-Next and Qwen3-Next-80B-A3B
// checkpoints reports the real models' sizes (docs/MODELS.md, "Real sizes") and tensor tables.
func TestInspectReleases(t *testing.T) {
	t.Run("qwen3.8-flash-next", func(t *testing.T) {
		dir := headerOnly(t, "qwen3.8-flash-next", modelgen.HeaderOnly{})
		info, err := Inspect(dir)
		if err != nil {
			t.Fatal(err)
		}
		all, by, n := releaseBytes("qwen3.8-flash-next")
		used := all - by["mtp."] - by["model.visual."] - 280
		want := &ModelInfo{
			Dir: dir, Arch: "qwen4_exp", ModelType: "qwen4_exp", Architectures: []string{"Qwen4ExpForConditionalGeneration"},
			D: 2560, Layers: 48, GDNLayers: 36, QSALayers: 12, Hq: 24, Hkv: 2, HeadDim: 256, RotaryDim: 64,
			Hk: 16, Hv: 48, Dk: 128, Dv: 128, Experts: 512, TopK: 10, MoEI: 640, SharedI: 640, Vocab: 248320, Streams: 4,
			QSABudget: 2048, PLELayers: []int{1}, MaxPositions: 262144, MTPLayers: 1,
			Prefix: "model.language_model.", FusedExperts: true, Layout: "prefix model.language_model., experts fused", NGramShards: 128, Shards: 131,
			Tensors: n[""], TensorBytes: all, UsedTensors: n[""] - n["mtp."] - n["model.visual."] - 3, UsedBytes: used,
			WeightDTypes:      []DTypeBytes{{"BF16", n[""] - n["mtp."] - n["model.visual."] - 3, used}},
			PLEBuffersChecked: 1, ResidentBytes: used + by["vectors"],
			Skipped: []SkippedTensors{
				{"mtp.*", n["mtp."], by["mtp."], "multi-token-prediction head (mtp_num_hidden_layers 1): used in decoding, not by prefill"},
				{"model.visual.*", n["model.visual."], by["model.visual."], "vision tower: strata prefills text"},
				{"ple.ple_embedding.{layer_multipliers,ngram_heads_offsets,ngram_heads_vocab_sizes}", 3, 280,
					"PLE hash constants: checked equal to what config.json implies (strata derives them)"},
			},
		}
		if !reflect.DeepEqual(info, want) {
			t.Errorf("\n got %+v\nwant %+v", info, want)
		}
		if info.TensorBytes < 359e9 || info.TensorBytes > 361e9 {
			t.Errorf("%d tensor bytes, the release is about 360 GB", info.TensorBytes)
		}
	})
	t.Run("qwen3-next-80b-a3b", func(t *testing.T) {
		dir := headerOnly(t, "qwen3-next-80b-a3b", modelgen.HeaderOnly{})
		info, err := Inspect(dir)
		if err != nil {
			t.Fatal(err)
		}
		all, by, n := releaseBytes("qwen3-next-80b-a3b")
		used := all - by["mtp."]
		want := &ModelInfo{
			Dir: dir, Arch: "qwen3_next", ModelType: "qwen3_next", Architectures: []string{"Qwen3NextForCausalLM"},
			D: 2048, Layers: 48, GDNLayers: 36, AttentionLayers: 12, Hq: 16, Hkv: 2, HeadDim: 256, RotaryDim: 64,
			Hk: 16, Hv: 32, Dk: 128, Dv: 128, Experts: 512, TopK: 10, MoEI: 512, SharedI: 512, Vocab: 151936, Streams: 1,
			MaxPositions: 262144, Prefix: "model.", Layout: "prefix model.", Shards: 41,
			Tensors: n[""], TensorBytes: all, UsedTensors: n[""] - n["mtp."], UsedBytes: used,
			WeightDTypes: []DTypeBytes{{"BF16", n[""] - n["mtp."], used}}, ResidentBytes: used + by["vectors"],
			Skipped: []SkippedTensors{{"mtp.*", n["mtp."], by["mtp."], "multi-token-prediction head: used in decoding, not by prefill"}},
		}
		if !reflect.DeepEqual(info, want) {
			t.Errorf("\n got %+v\nwant %+v", info, want)
		}
	})
}

// TestInspectTruncated: shards cut after their headers are inspected (and listed as truncated);
// LoadModel refuses them.
func TestInspectTruncated(t *testing.T) {
	dir := headerOnly(t, "qwen3.8-flash-next", modelgen.HeaderOnly{Truncate: true})
	info, err := Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Truncated) != 131 {
		t.Fatalf("%d truncated shards, want 131", len(info.Truncated))
	}
	var present, size int64
	for _, s := range info.Truncated {
		present += s.Present
		size += s.Size
	}
	if present != 280 || size != info.TensorBytes {
		t.Fatalf("%d of %d bytes present, want the 280 bytes of the PLE buffers of %d", present, size, info.TensorBytes)
	}
	dev, err := Open(Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadModel(dev, dir, LoadOptions{}); !errors.Is(err, ErrCheckpoint) || !errors.Is(err, safetensors.ErrFormat) || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("LoadModel of a truncated checkpoint: %v", err)
	}
}

// TestLoadAndInspectRefuse: a damaged PLE buffer (ErrCheckpoint) and each unsupported format
// (ErrUnsupported) fail LoadModel and Inspect with the same error (one check), naming the
// problem; LoadModel fails before reading any weight (the sparse 360 GB checkpoint holds none).
func TestLoadAndInspectRefuse(t *testing.T) {
	const vocab = "model.language_model.layers.1.ple.ple_embedding.ngram_heads_vocab_sizes"
	badPLE := modelgen.HeaderOnly{Tensors: func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		for i := range ts {
			if ts[i].Name == vocab {
				b := append([]byte(nil), ts[i].Data...)
				binary.LittleEndian.PutUint64(b[8*9:], 20000094)
				ts[i].Data = b
			}
		}
		return ts
	}}
	quant := func(q map[string]any) modelgen.HeaderOnly {
		return modelgen.HeaderOnly{Config: func(top map[string]any) { top["quantization_config"] = q }}
	}
	cases := []struct {
		name     string
		opts     modelgen.HeaderOnly
		sentinel error
		want     string
	}{
		{"PLE vocab size", badPLE, hfconfig.ErrTensors, vocab + "[9] = 20000094, config.json implies 20000093"},
		{"fp8", quant(map[string]any{"quant_method": "fp8", "weight_block_size": []int{128, 128}}), hfconfig.ErrUnsupported, `quantization method "fp8" is not supported`},
		{"modelopt", quant(map[string]any{"quant_method": "modelopt", "quant_algo": "NVFP4"}), hfconfig.ErrUnsupported, `quantization method "modelopt" is not supported`},
		{"compressed-tensors", quant(map[string]any{"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized"}), hfconfig.ErrUnsupported, `quantization method "compressed-tensors"`},
		{"auto-round", quant(map[string]any{"quant_method": "auto-round", "bits": 4}), hfconfig.ErrUnsupported, `quantization method "auto-round"`},
		{"awq", quant(map[string]any{"quant_method": "awq", "bits": 4}), hfconfig.ErrUnsupported, `quantization method "awq"`},
		{"gptq", quant(map[string]any{"quant_method": "gptq", "bits": 4}), hfconfig.ErrUnsupported, `quantization method "gptq"`},
		{"unknown method", quant(map[string]any{"quant_method": "quanto"}), hfconfig.ErrUnsupported, `quantization method "quanto" is not supported`},
		{"mlx", modelgen.HeaderOnly{Config: func(top map[string]any) { top["quantization"] = map[string]any{"group_size": 64, "bits": 4} }},
			hfconfig.ErrUnsupported, "an MLX conversion of qwen4_exp (mlx-vlm; config.json has an MLX quantization block (affine, 4 bits, group size 64)) is not supported"},
		{"qwen3_moe", modelgen.HeaderOnly{Config: func(top map[string]any) { top["model_type"] = "qwen3_moe" }}, hfconfig.ErrUnsupported, `model_type "qwen3_moe", Qwen3 MoE, is not supported`},
		{"mamba_ssm_dtype", modelgen.HeaderOnly{Config: func(top map[string]any) { top["text_config"].(map[string]any)["mamba_ssm_dtype"] = "bfloat16" }},
			hfconfig.ErrUnsupported, `mamba_ssm_dtype "bfloat16"`},
	}
	dev, err := Open(Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := headerOnly(t, "qwen3.8-flash-next", tc.opts)
			_, ierr := Inspect(dir)
			m, lerr := LoadModel(dev, dir, LoadOptions{})
			if m != nil {
				m.Close()
			}
			// A damaged checkpoint is ErrCheckpoint; a format strata does not run is ErrUnsupported
			// (hfconfig's ErrUnsupported is op's, which the loader keeps).
			public := ErrCheckpoint
			if tc.sentinel == hfconfig.ErrUnsupported {
				public = ErrUnsupported
			}
			for _, err := range []error{ierr, lerr} {
				if !errors.Is(err, public) || !errors.Is(err, tc.sentinel) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want %v and %v mentioning %q", err, public, tc.sentinel, tc.want)
				}
			}
			if ierr.Error() != lerr.Error() {
				t.Errorf("Inspect and LoadModel disagree:\n%v\n%v", ierr, lerr)
			}
		})
	}
	for _, dir := range []string{filepath.Join(t.TempDir(), "absent"), testdata("qwen4exp-tiny", "config.json")} {
		if _, err := Inspect(dir); !errors.Is(err, ErrCheckpoint) {
			t.Errorf("Inspect(%s): %v", dir, err)
		}
	}
}

// TestInfoTiny: Model.Info of a loaded tiny model is what Inspect reports for its folder, with
// the sizes of testdata/README.md; the copy it returns is the caller's.
func TestInfoTiny(t *testing.T) {
	for _, tm := range tinyModels {
		t.Run(tm.name, func(t *testing.T) {
			m := loadTiny(t, tm.dir)
			info := m.Info()
			in, err := Inspect(testdata(tm.dir))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(&info, in) {
				t.Fatalf("Info %+v\nInspect %+v", info, *in)
			}
			if info.D != 256 || info.Layers != 4 || info.GDNLayers != 3 || info.AttentionLayers+info.QSALayers != 1 ||
				info.Vocab != 512 || info.Experts != 12 || info.TopK != 10 || info.Shards != 2 || info.Prefix != "model." ||
				len(info.Skipped) != 0 || info.PLEBuffersChecked != 0 || info.UsedTensors != info.Tensors || len(info.Truncated) != 0 {
				t.Fatalf("info %+v", info)
			}
			if tm.dir == "qwen4exp-tiny" && (!reflect.DeepEqual(info.PLELayers, []int{1}) || info.Streams != 4 || info.QSALayers != 1 || !info.FusedExperts) {
				t.Fatalf("qwen4exp info %+v", info)
			}
			info.Architectures[0] = "changed"
			if m.Info().Architectures[0] == "changed" {
				t.Fatal("Info shares its slices with the model")
			}
		})
	}
}

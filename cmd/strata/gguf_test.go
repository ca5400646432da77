package main

import (
	"path/filepath"
	"strings"
	"testing"
)

var ggufData = filepath.Join("..", "..", "internal", "gguf", "testdata")

// TestGGUFInspectAndPrefill: --inspect of a header-only copy of a published GGUF layout prints
// its types by class and passes; a refused architecture is an error after the summary; --model
// X.gguf prefills token ids from the file alone.
func TestGGUFInspectAndPrefill(t *testing.T) {
	out, err := runMain(t, "--model", filepath.Join(ggufData, "published", "qwen3.5-27b-Q4_K_M.gguf"), "--inspect")
	if err != nil || !strings.Contains(out, "llama.cpp architecture qwen35") || !strings.Contains(out, "Q4_K") ||
		!strings.Contains(out, "check      ok: the metadata and every tensor") || !strings.Contains(out, "a header-only copy or a file cut short") {
		t.Errorf("--inspect qwen3.5-27b-Q4_K_M: %v\n%s", err, out)
	}
	out, err = runMain(t, "--model", filepath.Join(ggufData, "published", "qwen3.8-flash-next-Q8_0.gguf"), "--inspect")
	if err == nil || !strings.Contains(out, "refused") || !strings.Contains(out, "Qwen3.8-Flash-Next") {
		t.Errorf("--inspect qwen3.8-flash-next-Q8_0: %v\n%s", err, out)
	}
	out, err = runMain(t, "--model", filepath.Join(ggufData, "qwen3next-Q4_K_M.gguf"), "--backend", "cpu", "--tokens", "1,2,3,4,5")
	if err != nil || !strings.Contains(out, "top-5") {
		t.Errorf("--model qwen3next-Q4_K_M.gguf --tokens: %v\n%s", err, out)
	}
	out, err = runMain(t, "--model", filepath.Join(ggufData, "qwen3next-Q4_K_M.gguf"), "--inspect")
	if err != nil || strings.Contains(out, "cut short") {
		t.Errorf("--inspect of a whole file reports missing data: %v\n%s", err, out)
	}
}

package tokenizer

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stratakernels/strata/internal/gguf"
)

// TestLoadGGUF: the tiny tokenizer written into a GGUF file's tokenizer.ggml.* keys (as
// llama.cpp's converter writes them) reads back through LoadGGUF to the ids and text of
// tokenizer.json; a GGUF file without a tokenizer is refused with ErrNoTokenizer.
func TestLoadGGUF(t *testing.T) {
	v := tinyGGUF(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	kvs := []gguf.KV{
		{Key: "general.architecture", Value: gguf.ValueOf("qwen3next")},
		{Key: "tokenizer.ggml.model", Value: gguf.ValueOf(v.Model)},
		{Key: "tokenizer.ggml.pre", Value: gguf.ValueOf(v.Pre)},
		{Key: "tokenizer.ggml.tokens", Value: gguf.ValueOf(v.Tokens)},
		{Key: "tokenizer.ggml.token_type", Value: gguf.ValueOf(v.TokenTypes)},
		{Key: "tokenizer.ggml.merges", Value: gguf.ValueOf(v.Merges)},
		{Key: "tokenizer.ggml.eos_token_id", Value: gguf.ValueOf(uint32(511))},
		{Key: "tokenizer.ggml.add_bos_token", Value: gguf.ValueOf(false)},
	}
	if err := gguf.Write(path, kvs, nil); err != nil {
		t.Fatal(err)
	}
	tok, err := LoadGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	ref := tiny(t)
	for _, text := range []string{"aaaa", "abc", "<|im_start|>aa<|im", "hello\n\n  wörld's"} {
		want, _ := ref.Encode(text)
		got, err := tok.Encode(text)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%q: ids %v, %v; through tokenizer.json %v", text, got, err, want)
		}
	}
	bare := filepath.Join(dir, "bare.gguf")
	if err := gguf.Write(bare, kvs[:1], nil); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadGGUF(bare); !errors.Is(err, ErrNoTokenizer) {
		t.Errorf("a file without a tokenizer: %v, want ErrNoTokenizer", err)
	}
}

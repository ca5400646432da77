//go:build cgo

package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stratakernels/strata/strata"
)

// tinyTokenizer is the tokenizer package's small byte-level tokenizer.json (ids 0..511).
const tinyTokenizer = "../tokenizer/testdata/tiny/tokenizer.json"

func TestTokenizerRoundTrip(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(tinyTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{tinyTokenizer, dir} { // the file, or a directory holding it
		h, err := tokenizerLoad(path)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := tokenizerVocabSize(h); err != nil || n != 512 {
			t.Errorf("%s: vocab size %d, %v", path, n, err)
		}
		ids, err := tokenizerEncode(h, "<|im_start|>hello world")
		if want := []int32{511, 262, 263, 'o', 'r', 'l', 'd'}; err != nil || !slices.Equal(ids, want) {
			t.Errorf("%s: ids %v, %v; want %v", path, ids, err, want)
		}
		if s, err := tokenizerDecode(h, ids); err != nil || s != "<|im_start|>hello world" {
			t.Errorf("decode: %q, %v", s, err)
		}
		if err := tokenizerFree(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tokenizerEncode(h, "x"); !errors.Is(err, errInvalidHandle) {
			t.Errorf("freed tokenizer: %v", err)
		}
		if err := tokenizerFree(h); !errors.Is(err, errInvalidHandle) {
			t.Errorf("double free: %v", err)
		}
	}
	if err := tokenizerFree(0); err != nil {
		t.Errorf("freeing NULL: %v", err)
	}
}

// TestTokenizerErrors: files that are missing or not implemented are checkpoint errors; bad
// text and unknown ids are invalid arguments; a handle of another kind is an invalid handle.
func TestTokenizerErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "wordpiece.json")
	if err := os.WriteFile(bad, []byte(`{"model": {"type": "WordPiece", "vocab": {}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{dir, filepath.Join(dir, "none.json"), bad} {
		if _, err := tokenizerLoad(path); !sameStatus(err, strata.ErrCheckpoint) {
			t.Errorf("load %s: %v, want a checkpoint error", path, err)
		}
	}
	h, err := tokenizerLoad(tinyTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	defer tokenizerFree(h)
	if _, err := tokenizerEncode(h, "ok\xff"); !sameStatus(err, strata.ErrInvalidArgument) {
		t.Errorf("invalid UTF-8: %v", err)
	}
	if _, err := tokenizerDecode(h, []int32{1, 300}); !sameStatus(err, strata.ErrInvalidArgument) {
		t.Errorf("unknown id: %v", err)
	}
	dev, err := deviceOpen(1)
	if err != nil {
		t.Fatal(err)
	}
	defer deviceFree(dev)
	if _, err := tokenizerEncode(dev, "x"); !errors.Is(err, errInvalidHandle) {
		t.Errorf("device as tokenizer: %v", err)
	}
	if err := deviceFree(h); !errors.Is(err, errInvalidHandle) {
		t.Errorf("tokenizer as device: %v", err)
	}
}
